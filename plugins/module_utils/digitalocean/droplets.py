# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""do_droplet's item worker: one item's droplet brought to its state, and the batch's items and summary."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import (
    ProvenList,
    ProvenObject,
    Unproven,
    decides,
    is_absent,
    require,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import parse_time
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets_power import (
    DropletPowerSteps,
    RetryLater,
    refuse_foreign,
    _retryable,
    outcome_of,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import (
    DigitalOceanError,
    DigitalOceanUnproven,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import backend_metadata, resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.waiter import DropletWaiter
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import (
    derived_names,
    droplet_name,
    droplet_tags,
    resource_tag,
    ssh_key_name,
)

# ``unknown``: a write whose answer was lost (the connection dropped, a 5xx after it was sent), so
# it may have been carried out; the item is a retry and the next pass reads what exists.
ACTIONS = ("created", "adopted", "deleted", "absent", "resized", "powered_off", "powered_on", "unknown", "none")
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


def describe_droplet(facts):
    """One droplet as the operator tells it from a look-alike: id, name, region, size, created_at."""
    return "%s %s (%s, %s, created %s)" % (facts["id"], facts.get("name"), facts.get("region"),
                                           facts.get("size_slug"), facts.get("created_at") or "at an unknown time")


def _held(result, msg, cloud=None):
    """Kept back for the operator: failed and ``retry`` (the order stays alive, nothing is erred)
    and ``held``, which makes the pass exit non-zero."""
    result.update(failed=True, retry=True, held=True, msg=msg)
    if cloud:
        result["cloud"] = cloud


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
            _held(result, self.clashes[id(item)])
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

    # ---- present ----------------------------------------------------------------------
    def present(self, item, result, notes, tags, deadline):
        backend_id = item.get("backend_id")
        if backend_id:
            facts = require(self.read(backend_id), "droplet %s" % backend_id)
            if is_absent(facts):
                raise ItemError("droplet %s no longer exists and cannot be re-created under the same id; "
                                "terminate the resource and order a new one" % backend_id)
            refuse_foreign(facts, item["resource_uuid"])
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
        tagged = require(self.tagged(tag), "the droplets carrying tag %s" % tag)
        own = [d for d in tagged if resource_tags(d["tags"]) == set([tag])]
        shared = [d for d in tagged if d not in own]
        if not tagged and not item.get("approved_now"):
            # An earlier pass may have made the droplet (the order was approved before this pass):
            # creating on its absence needs a second listing that agrees. One that shows a droplet
            # (the first answer lost it, or a pass running beside this one made it) is what is
            # decided on: the droplet is adopted, never a second one made.
            tagged = self.client.list_droplets(tag_name=tag)
            own = [d for d in tagged if resource_tags(d["tags"]) == set([tag])]
            shared = [d for d in tagged if d not in own]
        if len(own) > 1:
            own = self._remove_duplicates(item, own, tags, result, notes)
            if not own:
                return None  # kept them all for the operator (the result says why)
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

        return self._create(item, result, notes, tags, tagged, deadline)

    @decides("create", "tagged")
    def _create(self, item, result, notes, tags, tagged, deadline):
        """Create the item's droplet: ``tagged`` (the proven listing of the droplets carrying its
        tag) shows none."""
        tag = resource_tag(item["resource_uuid"])
        name = droplet_name(item.get("name"), resource_uuid=item["resource_uuid"])
        key_ids, key_notes = self.client.resolve_ssh_keys(
            item.get("ssh_keys"), ssh_key_name(item["resource_uuid"]), check_mode=self.check_mode)
        spec = "%s (%s, %s)" % (item["region"], item["size"], item["image"])
        if self.check_mode:
            result.update(action="created", changed=True, msg="would create droplet %s in %s" % (name, spec))
            notes.extend(key_notes)
            return None
        with outcome_of(result):
            facts = self.client.create_droplet(
                name, item["region"], item["size"], item["image"], ssh_keys=key_ids, tags=tags,
                user_data=item.get("user_data"), resource_tag=tag)
        # only now: a create DigitalOcean refused (422) changed nothing and created nothing
        result.update(action="created", changed=True)
        notes.extend(key_notes)
        self._describe(result, facts)
        result["msg"] = "created droplet %s %s in %s" % (facts["id"], name, spec)
        if self.wait:
            self.deferred[id(item)] = {"facts": facts, "deadline": deadline}
        return None

    def _confirm_none(self, tag):
        """A second listing of the droplets carrying ``tag``, which must show none as the first did."""
        again = self.client.list_droplets(tag_name=tag)
        if again:
            raise DigitalOceanUnproven(
                "two listings of the droplets carrying tag %s disagree (none, then %s); nothing was created"
                % (tag, ", ".join(str(droplet["id"]) for droplet in again)), method="GET", path="/v2/droplets")

    def _copy_problem(self, item, droplet, name, tags, not_before):
        """Why ``droplet`` is not provably a copy of this order's droplet made by an agent run,
        or None: it must match the order in name, region, size, image and tags, and be created
        after the order (``not_before``), since a hand-made look-alike can copy the tag."""
        image = str(item["image"])
        for label, have, want in (("name", droplet.get("name"), name), ("region", droplet.get("region"), item["region"]),
                                  ("size", droplet.get("size_slug"), item["size"])):
            if have != want:
                return "droplet %s differs from the order (%s %s, not %s)" % (droplet["id"], label, have, want)
        if image not in (str(droplet.get("image")), str(droplet.get("image_id"))):
            return "droplet %s differs from the order (image %s, not %s)" % (droplet["id"], droplet.get("image"), image)
        if set(droplet.get("tags") or []) != set(tags):
            return "droplet %s carries tags %s, not the order's %s" % (
                droplet["id"], ", ".join(sorted(droplet.get("tags") or [])), ", ".join(sorted(tags)))
        created = _created(droplet)
        if created is None:
            return "the creation time of droplet %s is unknown" % droplet["id"]
        if not_before is None:
            return "the item carries no order time (not_before), so a look-alike made before the order cannot be told apart"
        if created < not_before:
            return "droplet %s was created before the order (%s)" % (droplet["id"], item["not_before"])
        return None

    def _remove_duplicates(self, item, own, tags, result, notes):
        """Several droplets carry this resource's tag. Only copies one order made twice, by
        overlapping agent runs, are cleaned up: every one matches the order exactly (name, region,
        size, image, tags), was created after the order and within ``duplicate_window`` seconds of
        the others; then the oldest is kept and adopted (they are alike, and none is known to
        Waldur) and the others are deleted. Otherwise nothing is deleted or adopted: the item is
        held for the operator, naming every droplet. Returns ``[kept]`` or ``[]``."""
        tag = resource_tag(item["resource_uuid"])
        ordered = sorted(own, key=lambda d: (_created(d) or datetime.datetime.max.replace(tzinfo=UTC), d["id"]))
        name = droplet_name(item.get("name"), resource_uuid=item["resource_uuid"])
        not_before = parse_time(item.get("not_before")) if item.get("not_before") else None
        if not_before is not None:
            not_before = not_before.replace(microsecond=0)  # DigitalOcean's created_at has whole seconds
        problems = [problem for problem in (self._copy_problem(item, d, name, tags, not_before) for d in ordered)
                    if problem]
        created = [_created(d) for d in ordered]
        if not problems and (created[-1] - created[0]).total_seconds() > self.duplicate_window:
            problems = ["they were created more than %s seconds apart" % _seconds(self.duplicate_window)]
        if problems:
            listed = "; ".join(describe_droplet(d) for d in ordered)
            _held(result, "%d droplets carry tag %s and none was deleted or adopted, since %s: %s; delete the one(s) "
                          "that are not the resource's machine, and the next pass adopts the one left"
                  % (len(own), tag, problems[0], listed), cloud="droplets " + listed)
            return []
        keep, extras = ordered[0], ordered[1:]
        extra_ids = ", ".join(str(d["id"]) for d in extras)
        if self.check_mode:
            result["changed"] = True
            notes.append("would delete duplicate droplet(s) %s made by an overlapping pass, keeping the oldest, %s"
                         % (extra_ids, keep["id"]))
            return [keep]
        for droplet in extras:
            if self.client.destroy_droplet(droplet["id"]):
                result["changed"] = True
        notes.append("deleted duplicate droplet(s) %s carrying tag %s, made by an overlapping pass (identical to the "
                     "order and to each other, created after it and within %s seconds); kept the oldest, %s"
                     % (extra_ids, tag, _seconds(self.duplicate_window), keep["id"]))
        return [keep]

    def _wait_started(self, facts, deadline, notes):
        return self._started(facts, self.waiter.wait(facts, ("active", "off"), deadline), notes)

    def _started(self, facts, latest, notes, cut_short=False):
        if latest is None:
            # an order erred for its droplet being gone: gone on two reads, one not-found is not enough
            try:
                again = self.client.get_droplet(facts["id"])
            except DigitalOceanError as exc:
                raise RetryLater("droplet %s answered not found while it was being created, then reading it again "
                                 "failed: %s" % (facts["id"], exc))
            if again:
                raise DigitalOceanUnproven("droplet %s answered not found while it was being created, then answered: "
                                           "two reads disagree; the order waits for the next pass" % facts["id"])
            raise ItemError("droplet %s disappeared while it was being created" % facts["id"])
        if latest["status"] == "new":
            notes.append("still new %s; it keeps starting" % (
                "at the batch's deadline" if cut_short else "after %s seconds" % self.wait_timeout))
        return latest

    # ---- absent -----------------------------------------------------------------------
    def absent(self, item, result, notes):
        """Delete the resource's droplet. By backend id: the droplet Waldur records, when it carries
        this resource's tag (or, legacy, no owner tag at all). By tag: only the droplets whose name
        is one the agent derives for the resource; a look-alike with a copied tag is kept and named."""
        backend_id = item.get("backend_id")
        tag = resource_tag(item["resource_uuid"])
        names = derived_names(item.get("name"), item["resource_uuid"])
        own = self._own(tag, notes, "left alone")
        target = next((d for d in own if backend_id and str(d["id"]) == str(backend_id)), None)
        if backend_id and target is None and not self._absent_by_id(item, backend_id, tag, result):
            return None  # held: nothing is deleted
        copies = [d for d in own if d is not target and d["name"] in names]
        kept = [d for d in own if d is not target and d["name"] not in names]
        if kept:
            notes.append("kept droplet(s) %s carrying tag %s: not a name the agent derives for this resource (%s)"
                         % ("; ".join(describe_droplet(d) for d in kept), tag, ", ".join(sorted(names))))
        copy_ids = ", ".join(str(d["id"]) for d in copies)
        if target is None and not copies:
            if not backend_id:
                # done on an absence: only when a second listing agrees (a Terminate is never set done
                # on one answer that lost the droplet)
                self._confirm_none(tag)
                result.update(action="absent", msg="no droplet carries tag %s" % tag)
            return None
        if self.check_mode:
            result.update(action="deleted", changed=True)
            if target is not None:
                result["msg"] = "would delete droplet %s" % backend_id
            if not backend_id:
                result["msg"] = "would delete droplet(s) %s carrying tag %s" % (copy_ids, tag)
            elif copies:
                notes.append("would also delete droplet(s) %s carrying tag %s" % (copy_ids, tag))
            return None
        # changed and deleted only for a droplet DigitalOcean deleted (not one already gone, nor a refusal)
        if target is not None:
            if self.client.destroy_droplet(target["id"]):
                result.update(action="deleted", changed=True, msg="deleted droplet %s" % backend_id)
            else:
                result.update(action="absent", msg="droplet %s is already gone" % backend_id)
        for droplet in copies:
            if self.client.destroy_droplet(droplet["id"]):
                result.update(action="deleted", changed=True)
        if not backend_id:
            result["msg"] = "deleted droplet(s) %s carrying tag %s" % (copy_ids, tag)
        elif copies:
            # copies an overlapping pass made carry the same tag and name: they go with the resource
            notes.append("also deleted droplet(s) %s carrying tag %s" % (copy_ids, tag))
        return None

    def _absent_by_id(self, item, backend_id, tag, result):
        """The droplet Waldur records is not among those carrying exactly this resource's tag: read
        it. Gone → absent. No owner tag at all → deleted (legacy: droplets made before owner tags,
        reached by the exact id Waldur records, as before). Another resource's tag → held, never
        deleted. Returns False when held."""
        facts = require(self.client.get_droplet(backend_id), "droplet %s" % backend_id)
        if is_absent(facts):
            result.update(action="absent", msg="droplet %s is already gone" % backend_id)
            return True
        marks = resource_tags(facts["tags"])
        if marks == set([tag]):
            # the listing of the tag did not show it, the direct read does: the two reads disagree
            raise DigitalOceanUnproven("droplet %s carries tag %s but the listing of that tag did not show it; "
                                       "nothing was deleted" % (backend_id, tag), method="GET", path="/v2/droplets")
        if marks:
            _held(result, "kept droplet %s: Waldur records it for this resource, but it carries %s, not %s alone; "
                          "nothing was deleted. Check whose machine it is, then delete it by hand or leave it only "
                          "this resource's tag" % (describe_droplet(facts), ", ".join(sorted(marks)), tag),
                  cloud="droplet %s %s (%s)" % (facts["id"], facts["name"], facts["status"]))
            result["backend_id"] = str(facts["id"])
            return False
        legacy = "legacy: it carries no waldur-resource tag, and it is the exact id Waldur records for the resource"
        if self.check_mode:
            result.update(action="deleted", changed=True, msg="would delete droplet %s (%s)" % (backend_id, legacy))
        elif self.client.destroy_droplet(backend_id):
            result.update(action="deleted", changed=True, msg="deleted droplet %s (%s)" % (backend_id, legacy))
        else:
            result.update(action="absent", changed=False, msg="droplet %s is already gone" % backend_id)
        return True

    def _own(self, tag, notes, verb):
        """Droplets carrying exactly ``tag`` (this resource's and no other's); the ones that carry
        another resource's tag as well are named in ``notes`` and never touched."""
        tagged = require(self.tagged(tag), "the droplets carrying tag %s" % tag)
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
