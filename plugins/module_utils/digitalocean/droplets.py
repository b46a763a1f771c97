# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""do_droplet's item worker: one item's droplet brought to its state, and the batch's items and summary."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import ProvenList, ProvenObject, Unproven
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets_absent import DropletAbsentSteps
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets_power import DropletPowerSteps, RetryLater, _retryable, held
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets_present import DropletPresentSteps
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import backend_metadata, resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import droplet_name, droplet_tags, resource_tag
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.waiter import DropletWaiter

# ``unknown``: a write whose answer was lost (the connection dropped, a 5xx after it was sent), so
# it may have been carried out; the item is a retry and the next pass reads what exists.
ACTIONS = ("created", "adopted", "deleted", "absent", "resized", "powered_off", "powered_on", "unknown", "none")


def base_result(item):
    return {
        "resource_uuid": item["resource_uuid"],
        "order_uuid": item.get("order_uuid"),
        "backend_id": item.get("backend_id"),
        "changed": False,
        "failed": False,
        "msg": "",
        "action": "none",
        "droplet": None,
        "backend_metadata": None,
        "cloud": None,
        "dropped_tags": [],
    }


def _creates(item):
    return (item.get("state") or "present") == "present" and not item.get("backend_id")


def batch_clashes(items):
    """``{index: message}`` for the items of one batch that would act on one droplet: two items
    with one resource (one owner tag), or two creates deriving one droplet name. Refused before
    any write, all of them: which one would win depends on thread timing."""
    groups = {}
    for index, item in enumerate(items):
        groups.setdefault(("tag", resource_tag(item["resource_uuid"])), []).append(index)
        if _creates(item):
            name = droplet_name(item.get("name"), resource_uuid=item["resource_uuid"])
            groups.setdefault(("name", name), []).append(index)
    clashes = {}
    for (kind, value), indexes in sorted(groups.items()):
        if len(indexes) < 2:
            continue
        named = " and ".join("resource %s (order %s)" % (items[index]["resource_uuid"], items[index].get("order_uuid"))
                             for index in indexes)
        if kind == "tag":
            message = ("refused before any write: %s are %d items of this batch for one resource (owner tag %s); "
                       "nothing was created or deleted for any of them" % (named, len(indexes), value))
        else:
            message = ("refused before any write: %s would create droplets of the same name %s in one batch; "
                       "nothing was created for either; rename one of the resources in Waldur" % (named, value))
        for index in indexes:
            clashes.setdefault(index, message)
    return clashes


class DropletWorker(DropletPresentSteps, DropletAbsentSteps, DropletPowerSteps):
    """Brings one item's droplet to its state. ``__call__`` never raises: failures
    become the item's result."""

    def __init__(self, client, check_mode=False, wait=True, wait_timeout=300, clock=time.monotonic,
                 waiter=None, duplicate_window=900):
        self.client = client
        # Created and powered droplets are waited for after the batch (``finish_waits``), all
        # together: a worker blocked on a boot would hold back the writes behind it.
        self.deferred = {}  # id(item) -> what finishing the item's wait needs
        self.duplicate_window = duplicate_window
        # one waiter for all workers: droplets being started are read together
        self.waiter = waiter or DropletWaiter(client, clock=clock)
        self.check_mode = check_mode
        self.wait = wait
        self.wait_timeout = wait_timeout
        self.clock = clock
        self.known = {}
        self.by_tag = {}
        self.clashes = {}  # id(item) -> why it is refused (batch_clashes)

    def refuse_clashes(self, items):
        """Mark the items of this batch that would act on one droplet (``batch_clashes``)."""
        self.clashes = dict((id(items[index]), message) for index, message in batch_clashes(items).items())

    def prefetch(self, items):
        """Read what the items need from paged listings (one call per 200 droplets)
        instead of one call per item: the droplets they name and, when several items
        look droplets up by their resource tag, the droplets carrying each tag. Each
        item uses its entry once."""
        ids = set(int(item["backend_id"]) for item in items
                  if item.get("backend_id") and str(item["backend_id"]).isdigit()
                  and item.get("state") in ("present", "off", "active"))
        tags = set(resource_tag(item["resource_uuid"]) for item in items if self._looks_up_tag(item))
        if len(tags) > 1:
            # worth it only when the whole listing takes fewer calls than one per tag
            droplets = self.client.scan_droplets(max_pages=len(tags) - 1)
            if droplets is not None:
                by_tag = dict((tag, ProvenList(source=droplets.source)) for tag in tags)
                for facts in droplets:
                    for tag in resource_tags(facts["tags"]) & tags:
                        by_tag[tag].append(facts)
                    if facts["id"] in ids:
                        self.known[facts["id"]] = ProvenObject(facts, droplets.source)
                self.by_tag = by_tag
                ids = set()  # ids the listing did not show are read one by one, to confirm they are gone
        if len(ids) > 1:
            self.known = self.client.find_droplets(sorted(ids))

    @staticmethod
    def _looks_up_tag(item):
        """Whether the item reads the droplets carrying its resource tag."""
        if item.get("state") == "absent":
            return True  # every droplet carrying the tag goes, the one Waldur knows and any copy
        if item.get("backend_id"):
            return False
        if (item.get("state") or "present") == "present":
            return all(item.get(field) for field in ("region", "image", "size"))
        return True

    def tagged(self, tag):
        """Droplets carrying ``tag`` (from the prefetched listing when there is one)."""
        if tag in self.by_tag:
            return self.by_tag.pop(tag)
        return self.client.list_droplets(tag_name=tag)

    def read(self, backend_id):
        """Facts of droplet ``backend_id`` (``ProvenAbsence`` if DigitalOcean says it does not exist)."""
        key = int(backend_id)
        if key in self.known:
            return self.known.pop(key)
        return self.client.get_droplet(backend_id)

    def __call__(self, item):
        result = base_result(item)
        notes = []
        tags, dropped = droplet_tags(item.get("tags"), item["resource_uuid"])
        result["dropped_tags"] = dropped
        if dropped:
            notes.append("dropped tag(s) %s: the waldur-resource: and waldur-orphan-since: prefixes are reserved"
                         % ", ".join(dropped))
        if id(item) in self.clashes:
            held(result, self.clashes[id(item)])
            return self._finish(result, notes)
        try:
            if self.client.auth_error is not None:  # one 401 settles it for every item
                raise self.client.auth_error
            backend_id = item.get("backend_id")
            if backend_id and not str(backend_id).isdigit():
                raise ItemError("backend_id %r is not a DigitalOcean droplet id" % backend_id)
            deadline = self.clock() + self.wait_timeout
            state = item.get("state") or "present"
            if state == "present":
                self.present(item, result, notes, tags, deadline)
            elif state == "absent":
                self.absent(item, result, notes)
            else:
                self.power(item, result, notes, state, deadline)
        except (DigitalOceanError, ItemError, ValueError, Unproven) as exc:
            self._fail(result, exc)
        pending = self.deferred.get(id(item))
        if pending is not None:
            pending.update(result=result, notes=notes)
            return dict(self._finish(dict(result), list(notes)), deferred=True)
        return self._finish(result, notes)

    @staticmethod
    def _fail(result, exc):
        result.update(failed=True, msg=str(exc))
        if isinstance(exc, Unproven):
            # an answer that proves nothing: the item is left as it is (never erred) and the pass fails
            result.update(retry=True, held=True)
        if _retryable(exc):
            # transient, or the droplet exists and only a later step failed: the next pass
            # finds it by its tag (or id) and carries on; the order is not erred
            result["retry"] = True

    def finish_waits(self, items, results, deadline):
        """Wait, all together, for the droplets the workers created or powered on or off, until
        each item's own deadline or ``deadline`` (clock time, the
        batch's), and complete their results. A graceful shutdown that does not finish in half
        the item's time is followed by a hard power off, waited for together again. A result the
        batch marked ``deferred`` is one a worker returned before the batch's deadline; the
        others (cut off by it) stay as they are."""
        waiting = []
        for index, item in enumerate(items):
            if results[index].pop("deferred", False) and id(item) in self.deferred:
                waiting.append((index, self.deferred.pop(id(item))))
        self._wait_together(waiting, deadline)
        # (not when the batch's deadline cut the grace time short: a later pass shuts it down)
        late = [(index, pending) for index, pending in waiting
                if pending.get("step") == "shutdown" and pending["deadline"] <= deadline
                and not isinstance(pending["latest"], DigitalOceanError)
                and pending["latest"] is not None and pending["latest"]["status"] != "off"]
        self._wait_together(self._hard_power_off(late), deadline)
        for index, pending in waiting:
            result, notes, latest = pending["result"], pending["notes"], pending["latest"]
            try:
                if isinstance(latest, DigitalOceanError):
                    # the droplet exists: whatever failed while waiting, the next pass finds it by its tag or id
                    raise RetryLater("%s, then reading it failed: %s" % (result["msg"], latest))
                if pending.get("step", "create") == "create":
                    self._describe(result, self._started(pending["facts"], latest, notes,
                                                         cut_short=deadline < pending["deadline"]))
                else:
                    facts, result["msg"] = self._powered(pending, latest)
                    self._describe(result, facts)
            except (ItemError, DigitalOceanError) as exc:  # a read that failed or proved nothing: see _fail
                self._fail(result, exc)
            results[index] = dict(results[index], **self._finish(result, notes))
        return results

    def _wait_together(self, waiting, deadline):
        """One shared wait for every ``(index, pending)``; each pending gets its ``latest``."""
        if not waiting:
            return
        outcomes = self.waiter.wait_all([(pending["facts"], self._statuses(pending), min(pending["deadline"], deadline))
                                         for index, pending in waiting])
        for (index, pending), latest in zip(waiting, outcomes):
            pending["latest"] = latest

    @staticmethod
    def _finish(result, notes):
        parts = [result["msg"]] + notes
        result["msg"] = "; ".join(part for part in parts if part)
        return result

    def _describe(self, result, facts):
        result["droplet"] = facts
        result["backend_metadata"] = backend_metadata(facts) if facts else None
        if facts:
            result["backend_id"] = str(facts["id"])
            result["cloud"] = "droplet %s %s (%s)" % (facts["id"], facts["name"], facts["status"])


def prepare_items(module, droplets):
    """Items with normalised UUIDs and empty strings as None; bad input fails the task."""
    items = []
    for index, raw in enumerate(droplets):
        item = dict(raw)
        for key in ("resource_uuid", "order_uuid"):
            try:
                item[key] = normalize_uuid(item.get(key) or None)
            except ValueError:
                module.fail_json(msg="droplets[%d].%s: %r is not a UUID (expected 32 hex digits, dashed or not)"
                                 % (index, key, raw.get(key)))
        for key in ("backend_id", "name", "region", "image", "size", "user_data", "not_before"):
            value = item.get(key)
            item[key] = str(value).strip() if value is not None and str(value).strip() else None
        if item["user_data"] is not None:
            item["user_data"] = raw["user_data"]  # user data keeps its whitespace
        items.append(item)
    return items


def summarize(results):
    counts = {}
    for result in results:
        if not result["failed"]:
            counts[result["action"]] = counts.get(result["action"], 0) + 1
    done = ", ".join("%d %s" % (counts[action], action) for action in ACTIONS if counts.get(action))
    failed = sum(1 for result in results if result["failed"])
    return "%d droplets: %s; %d failed" % (len(results), done or "nothing", failed), failed
