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

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import AzureError
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
                   require_mark=False):
    """Delete ``[(kind, name)]`` of ``group`` in order, each read first, tolerating 404.

    With ``resource_uuid``, an object carrying another resource's owner tag is left; with
    ``require_mark`` too, so is an object carrying no owner tag (otherwise such an object is
    one made before owner tags, reached through its machine's backend id). In check mode
    nothing is deleted. Returns ``(deleted labels, left labels)``."""
    operations = object_operations(clients, group, vnet_name)
    deleted, left = [], []
    for kind, name in targets:
        read, delete = operations[kind]
        label = "%s %s" % (KIND_LABELS[kind], name)
        current = clients.read("reading " + label, read, name, deadline=deadline)
        if current is None:
            continue
        owner = owner_of(current)
        if resource_uuid and (owner not in (None, resource_uuid) or (require_mark and owner is None)):
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
