# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Deleting a machine's chain: by the route its ARM id shows (a dedicated group whole,
a shared group object by object), by its owner tag when Waldur holds no id, and the
rollback of a create that failed before its machine existed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.machine import MachineWork, RetryLater
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import build_vm_id, parse_resource_id, same_name
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import (
    DELETION_ORDER,
    OWNED_DELETION_ORDER,
    TOP_LEVEL_TYPES,
    delete_objects,
    kind_of,
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

    def _delete_objects(self, group, vnet_name, targets, resource_uuid=None):
        """Delete ``[(kind, name)]`` in order, tolerating 404 (see ``objects.delete_objects``).
        Returns ``(deleted labels, left labels)``."""
        return delete_objects(self.clients, group, vnet_name, targets, resource_uuid=resource_uuid,
                              check_mode=self.check_mode, deadline=self.deadline)

    def _foreign_in_group(self, state):
        """What the dedicated group holds that this run did not make (the run's own objects and
        the OS disk its machine made are not counted)."""
        names = state.names
        group = names["group"]
        subscription = self.clients.subscription_id
        ours = set()
        for kind in state.created:
            if kind in TOP_LEVEL_TYPES:
                provider, type_name = TOP_LEVEL_TYPES[kind]
                ours.add(("/subscriptions/%s/resourceGroups/%s/providers/%s/%s/%s"
                          % (subscription, group, provider, type_name, names[kind])).lower())
        vm_id = build_vm_id(subscription, group, names["vm"]).lower()
        listed = self._listing("listing resource group %s" % group,
                               self.clients.resource.resources.list_by_resource_group, group)
        return [resource.id for resource in listed
                if str(resource.id).lower() not in ours
                and str(getattr(resource, "managed_by", None) or "").lower() != vm_id]

    def _rollback(self, state):
        """Delete what this run created (never what it adopted, never anything of another owner)."""
        names = state.names
        group = names["group"]
        targets = [(kind, names[kind]) for kind in DELETION_ORDER if kind in state.created]
        try:
            foreign = None
            if names["dedicated"] and "group" in state.created:
                try:
                    foreign = self._foreign_in_group(state)
                except AzureError as error:
                    if not error.not_found:
                        raise
                    return "; rolled back: nothing was left (resource group %s does not exist)" % group
                if not foreign:
                    self._delete_group(group)
                    return "; rolled back: deleted resource group %s" % group
            deleted = self._delete_objects(group, names["vnet"], targets)[0]
            message = "; rolled back: deleted %s" % (", ".join(deleted) or "nothing (nothing was left)")
            if foreign:
                message += ("; resource group %s is left: it holds %s, which this run did not make"
                            % (group, ", ".join(foreign)))
            return message
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
                result.update(action="absent", msg="resource group %s is already gone" % names["group"])
                return
            owner = owner_of(group)
            if owner not in (None, uuid):  # no tag: a group made before owner tags, reached by its backend id
                raise ItemError("resource group %s has %s, not this resource's; it is not deleted"
                                % (names["group"], describe_owner(owner)))
            if provisioning_state(group) == "deleting":
                raise RetryLater("resource group %s is being deleted; the next pass checks that it is gone"
                                 % names["group"])
            self._delete_group(names["group"], current=group)
            result.update(changed=True, action="deleted",
                          msg="%s resource group %s with everything in it" % (verb, names["group"]))
            return
        deleted, left = self._delete_objects(names["group"], names["vnet"], self._shared_targets(names), uuid)
        note = "; left: %s" % ", ".join(left) if left else ""
        if not deleted:
            result.update(action="absent", msg="virtual machine %s and its objects are already gone in resource "
                                               "group %s%s" % (names["vm"], names["group"], note))
            return
        result.update(changed=True, action="deleted",
                      msg="%s %s from resource group %s%s" % (verb, ", ".join(deleted), names["group"], note))

    def _absent_by_owner_tag(self, item, result):
        """Terminate a resource Waldur holds no backend id for (its create was interrupted, or its
        machine failed): delete what carries its owner tag, and only that."""
        marker = "%s=%s" % (RESOURCE_TAG, item["resource_uuid"])
        deleted = self._delete_owned(item["resource_uuid"])
        if not deleted:
            result.update(action="absent", msg="no backend id, and no Azure object carries owner tag %s: there is "
                                               "no virtual machine to delete" % marker)
            return
        result.update(changed=True, action="deleted", msg="%s %s (found by owner tag %s)" % (
            "would delete" if self.check_mode else "deleted", ", ".join(deleted), marker))

    def _delete_owned(self, uuid):
        """Delete every object carrying this resource's owner tag: tagged groups whole, other
        tagged objects one by one (machine first). Returns the labels of what was deleted."""
        marker = "%s=%s" % (RESOURCE_TAG, uuid)
        resources = self.clients.resource
        groups = self._listing("listing the resource groups tagged %s" % marker, resources.resource_groups.list,
                               filter=tag_filter(uuid))
        listed = self._listing("listing the resources tagged %s" % marker, resources.resources.list,
                               filter=tag_filter(uuid))
        deleted = []
        for group in groups:
            if provisioning_state(group) == "deleting":
                raise RetryLater("resource group %s is being deleted; the next pass checks that it is gone"
                                 % group.name)
            if self._delete_group(group.name, current=group):
                deleted.append("resource group %s" % group.name)
        in_groups = set(group.name.lower() for group in groups)
        by_group = {}
        for resource in listed:
            parts = parse_resource_id(resource.id)
            kind = kind_of(resource)
            if parts and kind and parts["group"].lower() not in in_groups:
                by_group.setdefault(parts["group"], {})[kind] = parts["name"]
        for group, kinds in sorted(by_group.items()):
            targets = [(kind, kinds[kind]) for kind in OWNED_DELETION_ORDER if kind in kinds]
            deleted += ["%s from resource group %s" % (label, group) for label in
                        self._delete_objects(group, kinds.get("vnet"), targets, uuid)[0]]
        return deleted
