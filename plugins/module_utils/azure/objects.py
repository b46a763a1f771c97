# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The ARM objects of one machine: their kinds, labels, reads and deletions.

Shared by the module that builds and tears down machines (``azure_vm_chain``) and the
audit (``azure_audit``): a machine's objects are read and deleted the same way by both,
and an object carrying another resource's owner tag is never deleted.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import companion_names
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import describe_owner, owner_of

# Kinds of the objects of one machine, in the order a shared-group deletion removes them.
DELETION_ORDER = ("vm", "nic", "nsg", "public_ip", "subnet", "vnet")
# The same for objects found by owner tag (subnets go with their network, the OS disk after its machine).
OWNED_DELETION_ORDER = ("vm", "disk", "nic", "nsg", "public_ip", "vnet")
# kind -> (provider, type) of the objects ARM lists as resources of a group
TOP_LEVEL_TYPES = {
    "vnet": ("Microsoft.Network", "virtualNetworks"),
    "public_ip": ("Microsoft.Network", "publicIPAddresses"),
    "nsg": ("Microsoft.Network", "networkSecurityGroups"),
    "nic": ("Microsoft.Network", "networkInterfaces"),
    "vm": ("Microsoft.Compute", "virtualMachines"),
    "disk": ("Microsoft.Compute", "disks"),
}
KIND_OF_TYPE = dict((("%s/%s" % parts).lower(), kind) for kind, parts in TOP_LEVEL_TYPES.items())
KIND_LABELS = {
    "group": "resource group",
    "vnet": "virtual network",
    "subnet": "subnet",
    "public_ip": "public IP address",
    "nsg": "network security group",
    "nic": "network interface",
    "vm": "virtual machine",
    "disk": "OS disk",
}


def kind_of(resource):
    """The kind (``vm``, ``nic`` ...) of a generic resource listed by ARM, or None."""
    return KIND_OF_TYPE.get(str(getattr(resource, "type", "") or "").lower())


def label_of(resource):
    """How a message names a listed object (``virtual machine web``; an unknown type by its ARM type)."""
    kind = kind_of(resource)
    what = KIND_LABELS[kind] if kind else (getattr(resource, "type", None) or "resource")
    return "%s %s" % (what, getattr(resource, "name", None))


def list_group_contents(clients, group, deadline=None, created_time=False):
    """A fresh listing of everything ARM lists in ``group`` (with tags, and ``managed_by`` for
    disks; with ``created_time``, each object's creation time); None when the group is gone."""
    kwargs = {"expand": "createdTime"} if created_time else {}
    try:
        return clients.call("listing resource group %s" % group,
                            lambda: list(clients.resource.resources.list_by_resource_group(group, **kwargs)),
                            deadline=deadline)
    except AzureError as error:
        if error.not_found:
            return None
        raise


def sort_contents(listed, resource_uuid, legacy_vm=None):
    """Split a fresh listing of a group (``list_group_contents``) into ``(ours, foreign)``.

    ``ours``: ``[(kind, name, marked)]`` of what is this resource's: what carries its owner mark
    (``marked``); the OS disk one of those machines manages (ARM does not copy a machine's tags to
    the disk it makes, and the listing names the machine in ``managed_by``); what ARM lists under one
    of them (a machine's extension). With ``legacy_vm`` (an untagged group reached by the backend id
    Waldur holds, made before owner tags), the untagged objects named after that machine
    (``<vm>``, ``net<vm>``, ``pubip<vm>``, ``nsg<vm>``/``NSG<vm>``, ``nic<vm>``) are its too.
    ``foreign``: the labels of everything else, each with its owner (``virtual machine db (no owner tag)``).
    Subnets and rules are not listed by ARM: they go with their network or security group.
    """
    uuid = str(resource_uuid).lower()
    legacy = {}
    if legacy_vm:
        legacy = dict((kind, name.lower()) for kind, name in companion_names(legacy_vm).items())
        legacy["nsg_mastermind"] = ("NSG" + legacy_vm).lower()
    ours, foreign, our_ids, rest = [], [], set(), []
    for resource in listed:
        kind, name, owner = kind_of(resource), str(getattr(resource, "name", "")), owner_of(resource)
        if owner == uuid or (owner is None and legacy and kind and name.lower() in (
                legacy.get(kind), legacy["nsg_mastermind"] if kind == "nsg" else None)):
            ours.append((kind, name, owner == uuid))
            our_ids.add(str(resource.id).lower())
        else:
            rest.append((resource, kind, name, owner))
    for resource, kind, name, owner in rest:
        manager = str(getattr(resource, "managed_by", None) or "").lower()
        parent = str(resource.id).lower().rsplit("/", 2)[0]
        if owner is None and ((kind == "disk" and manager in our_ids) or parent in our_ids):
            ours.append((kind, name, False))
        else:
            foreign.append("%s (%s)" % (label_of(resource), describe_owner(owner)))
    return ours, foreign


def kept_group(group, foreign):
    """The one line that says why a group is kept, naming what in it is not this resource's."""
    return "kept resource group %s: it holds %s" % (group, ", ".join(foreign))


def own_targets(ours):
    """``[(kind, name)]`` of ``sort_contents``'s ``ours`` the agent deletes one by one, in deletion
    order, and the ``unmarked_ok`` of those among them known as ours without the mark."""
    targets = [(kind, name) for order in OWNED_DELETION_ORDER for kind, name, _marked in ours if kind == order]
    unmarked = set((kind, name.lower()) for kind, name, marked in ours if not marked)
    return targets, unmarked


def object_operations(clients, group, vnet_name):
    """``kind -> (read(name), delete(name))`` for the objects of one machine in ``group``."""
    network = clients.network
    compute = clients.compute
    machines = compute.virtual_machines
    return {
        "vm": (lambda name: machines.get(group, name), lambda name: machines.begin_delete(group, name)),
        "disk": (lambda name: compute.disks.get(group, name), lambda name: compute.disks.begin_delete(group, name)),
        "nic": (lambda name: network.network_interfaces.get(group, name),
                lambda name: network.network_interfaces.begin_delete(group, name)),
        "nsg": (lambda name: network.network_security_groups.get(group, name),
                lambda name: network.network_security_groups.begin_delete(group, name)),
        "public_ip": (lambda name: network.public_ip_addresses.get(group, name),
                      lambda name: network.public_ip_addresses.begin_delete(group, name)),
        "subnet": (lambda name: network.subnets.get(group, vnet_name, name),
                   lambda name: network.subnets.begin_delete(group, vnet_name, name)),
        "vnet": (lambda name: network.virtual_networks.get(group, name),
                 lambda name: network.virtual_networks.begin_delete(group, name)),
    }


def delete_objects(clients, group, vnet_name, targets, resource_uuid=None, check_mode=False, deadline=None,
                   require_mark=False, unmarked_ok=()):
    """Delete ``[(kind, name)]`` of ``group`` in order, each read first, tolerating 404.

    With ``resource_uuid``, an object carrying another resource's owner tag is left; with
    ``require_mark`` too, so is an object carrying no owner tag (otherwise such an object is
    one made before owner tags, reached through its machine's backend id), except those in
    ``unmarked_ok`` (``(kind, lower-case name)``: known to be ours without a mark, such as a
    subnet this run made or the OS disk of our machine). In check mode nothing is deleted.
    Returns ``(deleted labels, left labels)``."""
    operations = object_operations(clients, group, vnet_name)
    deleted, left = [], []
    for kind, name in targets:
        read, delete = operations[kind]
        label = "%s %s" % (KIND_LABELS[kind], name)
        current = clients.read("reading " + label, read, name, deadline=deadline)
        if current is None:
            continue
        owner = owner_of(current)
        unmarked_is_ours = (kind, name.lower()) in unmarked_ok
        if resource_uuid and (owner not in (None, resource_uuid)
                              or (require_mark and owner is None and not unmarked_is_ours)):
            left.append("%s (%s)" % (label, describe_owner(owner)))
            continue
        if not check_mode:
            try:
                clients.call("deleting " + label, delete, name, deadline=deadline)
            except AzureError as error:
                if not error.not_found:  # gone meanwhile
                    raise
                continue
        deleted.append(label)
    return deleted, left
