# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""do_droplet's item worker: one item's droplet brought to its state, and the batch's items and summary."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import parse_time
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets_power import DropletPowerSteps, RetryLater, _retryable
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import backend_metadata, resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.waiter import DropletWaiter
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import (
    droplet_name,
    droplet_tags,
    resource_tag,
    ssh_key_name,
)

ACTIONS = ("created", "adopted", "deleted", "absent", "resized", "powered_off", "powered_on", "none")
UTC = datetime.timezone.utc


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


def _created(facts):
    return parse_time(facts.get("created_at"))


def _seconds(value):
    return ("%g" % value) if isinstance(value, float) else str(value)


class DropletWorker(DropletPowerSteps):
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
                by_tag = dict((tag, []) for tag in tags)
                for facts in droplets:
                    for tag in resource_tags(facts["tags"]) & tags:
                        by_tag[tag].append(facts)
                    if facts["id"] in ids:
                        self.known[facts["id"]] = facts
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
        """Facts of droplet ``backend_id`` (None if it does not exist)."""
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
            notes.append("dropped tag(s) %s: the waldur-resource: prefix is reserved" % ", ".join(dropped))
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
        except (DigitalOceanError, ItemError, ValueError) as exc:
            self._fail(result, exc)
        pending = self.deferred.get(id(item))
        if pending is not None:
            pending.update(result=result, notes=notes)
            return dict(self._finish(dict(result), list(notes)), deferred=True)
        return self._finish(result, notes)

    @staticmethod
    def _fail(result, exc):
        result.update(failed=True, msg=str(exc))
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
            except ItemError as exc:
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

    # ---- present ----------------------------------------------------------------------
    def present(self, item, result, notes, tags, deadline):
        backend_id = item.get("backend_id")
        if backend_id:
            facts = self.read(backend_id)
            if facts is None:
                raise ItemError("droplet %s no longer exists and cannot be re-created under the same id; "
                                "terminate the resource and order a new one" % backend_id)
            if item.get("size") and facts["size_slug"] != item["size"]:
                return self.resize(result, facts, item["size"], deadline, item.get("running"))
            if facts["status"] == "new" and self.wait and not self.check_mode:
                facts = self._wait_started(facts, deadline, notes)
            self._describe(result, facts)
            result["msg"] = "droplet %s exists (%s)" % (backend_id, facts["status"])
            if item.get("running") and facts["status"] == "off":
                # a resize interrupted after the power-off left it off; Waldur wants it running
                return self._power_on_after_resize(result, facts, deadline)
            return None

        missing = [field for field in ("region", "image", "size") if not item.get(field)]
        if missing:
            raise ItemError("; ".join("DigitalOcean droplet %s is not specified" % field for field in missing))
        tag = resource_tag(item["resource_uuid"])
        tagged = self.tagged(tag)
        own = [d for d in tagged if resource_tags(d["tags"]) == set([tag])]
        shared = [d for d in tagged if d not in own]
        if len(own) > 1:
            own = [self._remove_duplicates(own, tag, result, notes)]
        if shared:
            notes.append("droplet(s) %s carry another resource's tag as well and were not adopted"
                         % ", ".join(str(d["id"]) for d in shared))
        if own:
            facts = own[0]
            if facts["status"] == "new" and self.wait and not self.check_mode:
                facts = self._wait_started(facts, deadline, notes)
            self._describe(result, facts)
            result.update(action="adopted", msg="adopted droplet %s %s carrying tag %s"
                          % (facts["id"], facts["name"], tag))
            return None

        name = droplet_name(item.get("name"), resource_uuid=item["resource_uuid"])
        key_ids, key_notes = self.client.resolve_ssh_keys(
            item.get("ssh_keys"), ssh_key_name(item["resource_uuid"]), check_mode=self.check_mode)
        spec = "%s (%s, %s)" % (item["region"], item["size"], item["image"])
        result.update(action="created", changed=True)
        if self.check_mode:
            result["msg"] = "would create droplet %s in %s" % (name, spec)
            notes.extend(key_notes)
            return None
        facts = self.client.create_droplet(
            name, item["region"], item["size"], item["image"], ssh_keys=key_ids, tags=tags,
            user_data=item.get("user_data"), resource_tag=tag)
        notes.extend(key_notes)
        self._describe(result, facts)
        result["msg"] = "created droplet %s %s in %s" % (facts["id"], name, spec)
        if self.wait:
            self.deferred[id(item)] = {"facts": facts, "deadline": deadline}
        return None

    def _remove_duplicates(self, own, tag, result, notes):
        """Several droplets carry this resource's tag. When they are copies one order made twice
        (overlapping passes: same name, same size, created within ``duplicate_window`` seconds of
        each other) the oldest is kept and the others deleted; otherwise the item fails naming them."""
        ordered = sorted(own, key=lambda d: (_created(d) or datetime.datetime.max.replace(tzinfo=UTC), d["id"]))
        ids = ", ".join(str(d["id"]) for d in sorted(own, key=lambda d: d["id"]))
        created = [_created(d) for d in ordered]
        if len(set(d["name"] for d in ordered)) > 1:
            differ = "their names differ"
        elif len(set(d["size_slug"] for d in ordered)) > 1:
            differ = "their sizes differ"
        elif None in created:
            differ = "a creation time is unknown"
        elif (created[-1] - created[0]).total_seconds() > self.duplicate_window:
            differ = "they were created more than %s seconds apart" % _seconds(self.duplicate_window)
        else:
            differ = None
        if differ:
            raise ItemError("%d droplets carry tag %s (ids %s); delete the extra ones before retrying (none was "
                            "deleted: %s, so they are not copies made by an overlapping pass)"
                            % (len(own), tag, ids, differ))
        keep, extras = ordered[0], ordered[1:]
        extra_ids = ", ".join(str(d["id"]) for d in extras)
        result["changed"] = True
        if self.check_mode:
            notes.append("would delete duplicate droplet(s) %s made by an overlapping pass, keeping the oldest, %s"
                         % (extra_ids, keep["id"]))
            return keep
        for droplet in extras:
            self.client.destroy_droplet(droplet["id"])
        notes.append("deleted duplicate droplet(s) %s carrying tag %s, made by an overlapping pass (same name "
                     "and size, created within %s seconds); kept the oldest, %s"
                     % (extra_ids, tag, _seconds(self.duplicate_window), keep["id"]))
        return keep

    def _wait_started(self, facts, deadline, notes):
        return self._started(facts, self.waiter.wait(facts, ("active", "off"), deadline), notes)

    def _started(self, facts, latest, notes, cut_short=False):
        if latest is None:
            raise ItemError("droplet %s disappeared while it was being created" % facts["id"])
        if latest["status"] == "new":
            notes.append("still new %s; it keeps starting" % (
                "at the batch's deadline" if cut_short else "after %s seconds" % self.wait_timeout))
        return latest

    # ---- absent -----------------------------------------------------------------------
    def absent(self, item, result, notes):
        backend_id = item.get("backend_id")
        tag = resource_tag(item["resource_uuid"])
        if backend_id:
            if self.check_mode:
                facts = self.client.get_droplet(backend_id)
                if facts is None:
                    result.update(action="absent", msg="droplet %s is already gone" % backend_id)
                else:
                    result.update(action="deleted", changed=True, msg="would delete droplet %s" % backend_id)
            elif self.client.destroy_droplet(backend_id):
                result.update(action="deleted", changed=True, msg="deleted droplet %s" % backend_id)
            else:
                result.update(action="absent", msg="droplet %s is already gone" % backend_id)
            # copies an overlapping pass made carry the same tag: they go with the resource
            others = [d for d in self._own(tag, notes, "left alone") if str(d["id"]) != str(backend_id)]
            if others:
                ids = ", ".join(str(d["id"]) for d in others)
                result.update(action="deleted", changed=True)
                if self.check_mode:
                    notes.append("would also delete droplet(s) %s carrying tag %s" % (ids, tag))
                    return None
                for droplet in others:
                    self.client.destroy_droplet(droplet["id"])
                notes.append("also deleted droplet(s) %s carrying tag %s" % (ids, tag))
            return None

        own = self._own(tag, notes, "left alone")
        if not own:
            result.update(action="absent", msg="no droplet carries tag %s" % tag)
            return None
        ids = ", ".join(str(d["id"]) for d in own)
        result.update(action="deleted", changed=True)
        if self.check_mode:
            result["msg"] = "would delete droplet(s) %s carrying tag %s" % (ids, tag)
            return None
        for droplet in own:
            self.client.destroy_droplet(droplet["id"])
        result["msg"] = "deleted droplet(s) %s carrying tag %s" % (ids, tag)
        return None

    def _own(self, tag, notes, verb):
        """Droplets carrying exactly ``tag`` (this resource's and no other's); the ones that carry
        another resource's tag as well are named in ``notes`` and never touched."""
        tagged = self.tagged(tag)
        own = [d for d in tagged if resource_tags(d["tags"]) == set([tag])]
        shared = [d for d in tagged if d not in own]
        if shared:
            notes.append("droplet(s) %s carry another resource's tag as well and were %s"
                         % (", ".join(str(d["id"]) for d in shared), verb))
        return own


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
        for key in ("backend_id", "name", "region", "image", "size", "user_data"):
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
