# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Deleting a machine's chain: by the route its ARM id shows (a dedicated group, a shared
group object by object), by its owner tag when Waldur holds no id, and the rollback of a
create that failed before its machine existed.

Evidence before action: the agent deletes objects, not containers. Every path deletes only
objects carrying this resource's owner mark (``waldur-resource-uuid``); a resource group goes
whole only when a fresh listing of it, read just before, shows nothing that is not this
resource's. Otherwise the resource's own objects in it are deleted one by one and the group is
kept with whatever else it holds, named in one line of the item's message.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, AzureUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.machine import MachineWork, RetryLater
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import is_group_of_resource, parse_resource_id, same_name
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import (
    DELETION_ORDER,
    OWNED_DELETION_ORDER,
    delete_objects,
    kept_group,
    kind_of,
    list_group_contents,
    own_targets,
    sort_contents,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import RESOURCE_TAG, describe_owner, owner_of, provisioning_state, tag_filter
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError


class ChainRemoval(MachineWork):
    """Deletion and rollback of one machine's chain."""

    def _delete_group(self, group, current=None):
        """Delete a whole resource group; False when it was already gone."""
        resources = self.clients.resource.resource_groups
        if current is None and self._read("reading resource group %s" % group, resources.get, group) is None:
            return False
        if not self.check_mode:
            try:
                self._call("deleting resource group %s" % group, resources.begin_delete, group)
            except AzureError as error:
                if not error.not_found:
                    raise
        return True

    def _delete_objects(self, group, vnet_name, targets, resource_uuid=None, require_mark=False, unmarked_ok=()):
        """Delete ``[(kind, name)]`` in order, tolerating 404 (see ``objects.delete_objects``).
        Returns ``(deleted labels, left labels)``."""
        return delete_objects(self.clients, group, vnet_name, targets, resource_uuid=resource_uuid,
                              check_mode=self.check_mode, deadline=self.deadline, require_mark=require_mark,
                              unmarked_ok=unmarked_ok)

    def _clear_group(self, group, uuid, current=None, legacy_vm=None):
        """Delete what is this resource's in ``group``, on the evidence of a fresh listing of it read
        just before: the group whole when it holds nothing else, otherwise this resource's objects one
        by one (the group and whatever else it holds are kept). Returns ``(deleted labels, notes)``:
        notes name what was kept, in one line each. ``legacy_vm``: see ``objects.sort_contents``."""
        listed = list_group_contents(self.clients, group, deadline=self.deadline)
        if listed is None:
            if current is not None:  # read just now: its listing's not-found is a view that disagrees
                raise AzureUnproven("resource group %s answered, but the listing of what it holds answered not "
                                    "found: the two reads disagree; nothing is deleted" % group)
            return [], []
        ours, foreign = sort_contents(listed, uuid, legacy_vm=legacy_vm)
        if not foreign:
            if current is not None and provisioning_state(current) == "deleting":
                raise RetryLater("resource group %s is being deleted; the next pass checks that it is gone" % group)
            return (["resource group %s" % group] if self._delete_group(group, current=current) else []), []
        targets, unmarked = own_targets(ours)
        vnet = next((name for kind, name in targets if kind == "vnet"), None)
        deleted, left = self._delete_objects(group, vnet, targets, uuid, require_mark=legacy_vm is None,
                                             unmarked_ok=unmarked)
        notes = [kept_group(group, foreign)]
        if left:
            notes.append("left: %s" % ", ".join(left))
        return deleted, notes

    def _rollback(self, state):
        """Delete what this run made (a create ARM confirmed, on a name the survey read free), never
        what it adopted, never an object whose create it did not see succeed, never anything without
        this resource's mark."""
        names = state.names
        group = names["group"]
        uuid = state.resource_uuid
        targets = [(kind, names[kind]) for kind in DELETION_ORDER if kind in state.made]
        # A subnet cannot carry a tag: the one this run made is known to be its own.
        unmarked = set([("subnet", names["subnet"].lower())]) if "subnet" in state.made else set()
        if not state.made:
            return "; rolled back: nothing (Azure confirmed no create of this run)"
        try:
            if names["dedicated"] and "group" in state.made:
                deleted, notes = self._clear_group(group, uuid)
                if deleted == ["resource group %s" % group]:
                    state.rolled_back = True
                    return "; rolled back: deleted resource group %s" % group
                if not deleted and not notes:
                    state.rolled_back = True
                    return "; rolled back: nothing was left (resource group %s does not exist)" % group
            else:
                deleted, left = self._delete_objects(group, names["vnet"], targets, uuid, require_mark=True,
                                                     unmarked_ok=unmarked)
                notes = ["left: %s" % ", ".join(left)] if left else []
                state.rolled_back = not left
            message = "; rolled back: deleted %s" % (", ".join(deleted) or "nothing (nothing was left)")
            return message + "".join("; " + note for note in notes)
        except AzureError as error:
            return "; rollback failed, objects may be left in resource group %s: %s" % (group, error)

    def _shared_targets(self, names):
        """This machine's objects in a shared group, as ``[(kind, name)]`` in deletion order.

        Names are derived from the VM name in the id; the names the machine's NIC
        actually references are added when they are this machine's under another
        spelling (a Mastermind-era ``NSG<vm>``), so nothing of a neighbour is touched.
        """
        group = names["group"]
        network = self.clients.network
        nic = self._read("reading network interface %s" % names["nic"], network.network_interfaces.get,
                         group, names["nic"])
        candidates = {kind: [names[kind]] for kind in DELETION_ORDER}
        candidates["nsg"].append("NSG" + names["vm"])
        if nic is not None:
            referenced = {"nsg": getattr(nic, "network_security_group", None)}
            for ip_configuration in getattr(nic, "ip_configurations", None) or []:
                referenced.setdefault("public_ip", getattr(ip_configuration, "public_ip_address", None))
            for kind, reference in referenced.items():
                parts = parse_resource_id(getattr(reference, "id", None))
                if parts and same_name(parts["group"], group) and same_name(parts["name"], names[kind]):
                    candidates[kind].insert(0, parts["name"])
        targets = []
        for kind in DELETION_ORDER:
            seen = set()
            for name in candidates[kind]:
                if name not in seen:
                    seen.add(name)
                    targets.append((kind, name))
        return targets

    def absent(self, item, result):
        backend_id = item.get("backend_id")
        if not backend_id:
            self._absent_by_owner_tag(item, result)
            return
        names = self._names_from_id(backend_id)
        uuid = item["resource_uuid"]
        verb = "would delete" if self.check_mode else "deleted"
        if names["dedicated"]:
            group = self._read("reading resource group %s" % names["group"],
                               self.clients.resource.resource_groups.get, names["group"])
            if group is None:
                # the group's not-found is not the machine's: the machine is read itself before the
                # order is settled on its absence (a group answered gone while its machine answers
                # is a view of ARM that disagrees with itself)
                if self._read_vm(names["group"], names["vm"], instance_view=False) is not None:
                    raise AzureUnproven("resource group %s answered not found, but its virtual machine %s answers: "
                                        "the two reads disagree; nothing is deleted" % (names["group"], names["vm"]))
                result.update(action="absent", msg="resource group %s is already gone" % names["group"])
                return
            owner = owner_of(group)
            if owner not in (None, uuid):
                raise ItemError("resource group %s has %s, not this resource's; it is not deleted"
                                % (names["group"], describe_owner(owner)))
            # A group without an owner tag was made before owner tags and is reached by the backend id
            # Waldur holds. It still goes whole only when the listing shows nothing but the one chain
            # that id names (untagged objects named after its machine) and this resource's marked
            # objects: anything else in it (another resource's mark, a hand-made object under
            # another name) keeps the group, and only that chain is deleted. Conservative on purpose:
            # a wrong "keep" leaves an empty group to tidy by hand, a wrong "delete" loses a machine.
            deleted, notes = self._clear_group(names["group"], uuid, current=group,
                                               legacy_vm=names["vm"] if owner is None else None)
            if deleted == ["resource group %s" % names["group"]]:
                result.update(changed=True, action="deleted",
                              msg="%s resource group %s with everything in it" % (verb, names["group"]))
                return
            self._report_deleted(result, deleted, notes, names["group"], verb,
                                 "virtual machine %s and its objects are already gone in resource group %s"
                                 % (names["vm"], names["group"]))
            return
        deleted, left = self._delete_objects(names["group"], names["vnet"], self._shared_targets(names), uuid)
        self._report_deleted(result, deleted, ["left: %s" % ", ".join(left)] if left else [], names["group"], verb,
                             "virtual machine %s and its objects are already gone in resource group %s"
                             % (names["vm"], names["group"]))

    @staticmethod
    def _report_deleted(result, deleted, notes, group, verb, gone):
        note = "".join("; " + text for text in notes)
        if not deleted:
            result.update(action="absent", msg=gone + note)
            return
        result.update(changed=True, action="deleted",
                      msg="%s %s from resource group %s%s" % (verb, ", ".join(deleted), group, note))

    def _absent_by_owner_tag(self, item, result):
        """Terminate a resource Waldur holds no backend id for (its create was interrupted, or its
        machine failed): delete what carries its owner tag, and only that."""
        marker = "%s=%s" % (RESOURCE_TAG, item["resource_uuid"])
        deleted, notes = self._delete_owned(item["resource_uuid"])
        note = "".join("; " + text for text in notes)
        if not deleted:
            result.update(action="absent", msg="no backend id, and no Azure object carries owner tag %s: there is "
                                               "no virtual machine to delete%s" % (marker, note))
            return
        result.update(changed=True, action="deleted", msg="%s %s (found by owner tag %s)%s" % (
            "would delete" if self.check_mode else "deleted", ", ".join(deleted), marker, note))

    def _delete_owned(self, uuid):
        """Delete what carries this resource's owner tag: a tagged group the agent names for this
        resource (``group-<uuid>-...``) whole when a fresh listing shows nothing else in it, other tagged
        objects one by one (machine first). A tagged group under any other name (the tag copied onto a
        customer's group for cost reports) is never the resource's: only its tagged objects are
        candidates and the group is kept. Returns ``(deleted labels, notes on what was kept)``."""
        marker = "%s=%s" % (RESOURCE_TAG, uuid)
        resources = self.clients.resource
        groups = self._listing("listing the resource groups tagged %s" % marker, resources.resource_groups.list,
                               filter=tag_filter(uuid))
        listed = self._listing("listing the resources tagged %s" % marker, resources.resources.list,
                               filter=tag_filter(uuid))
        deleted, notes, handled = [], [], set()
        for group in groups:
            if not is_group_of_resource(group.name, uuid):
                notes.append("kept resource group %s: it carries owner tag %s but is not a group the agent names "
                             "for this resource" % (group.name, marker))
                continue
            handled.add(group.name.lower())
            cleared, kept = self._clear_group(group.name, uuid, current=group)
            deleted += [label if label.startswith("resource group ") else "%s from resource group %s" % (
                label, group.name) for label in cleared]
            notes += kept
        by_group = {}
        for resource in listed:
            parts = parse_resource_id(resource.id)
            kind = kind_of(resource)
            if parts and kind and parts["group"].lower() not in handled:
                by_group.setdefault(parts["group"], {})[kind] = parts["name"]
        for group, kinds in sorted(by_group.items()):
            targets = [(kind, kinds[kind]) for kind in OWNED_DELETION_ORDER if kind in kinds]
            done, left = self._delete_objects(group, kinds.get("vnet"), targets, uuid, require_mark=True)
            deleted += ["%s from resource group %s" % (label, group) for label in done]
            if left:
                notes.append("left in resource group %s: %s" % (group, ", ".join(left)))
        return deleted, notes
