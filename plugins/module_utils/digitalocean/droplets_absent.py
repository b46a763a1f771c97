# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The absent steps of do_droplet's worker: delete what is provably the resource's droplet, nothing else."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import is_absent, require
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets_power import held
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import describe_droplet, resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import derived_names, resource_tag


class DropletAbsentSteps:
    """``state: absent`` for ``DropletWorker``."""

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
            held(result, "kept droplet %s: Waldur records it for this resource, but it carries %s, not %s alone; "
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
