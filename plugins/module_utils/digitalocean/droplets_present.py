# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The present steps of do_droplet's worker: adopt the resource's droplet, or create it, once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import decides, is_absent, require
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import parse_time
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets_power import RetryLater, held, outcome_of, refuse_foreign
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError, DigitalOceanUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import describe_droplet, resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import droplet_name, resource_tag, ssh_key_name

UTC = datetime.timezone.utc


def _created(facts):
    return parse_time(facts.get("created_at"))


def _seconds(value):
    return ("%g" % value) if isinstance(value, float) else str(value)


class DropletPresentSteps:
    """``state: present`` for ``DropletWorker``: a droplet Waldur records, one carrying the resource's
    tag (adopted; copies an overlapping pass made removed), or a new one."""

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
            held(result, "%d droplets carry tag %s and none was deleted or adopted, since %s: %s; delete the one(s) "
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
