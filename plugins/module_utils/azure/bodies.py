# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""ARM request bodies of one machine's chain, as functions of plain values.

Each returns the dict the SDK's ``begin_create_or_update`` (or ``begin_update``)
is given; nothing here calls Azure, so every body can be checked on its own.
Every taggable object gets ``tags`` (the owner marks); a subnet cannot carry tags.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import RESOURCE_TAG

SSH_RULE_NAME = "default-allow-ssh"
SSH_RULE_PRIORITY = 1000


def group_tags(tags, dedicated):
    """The tags of the machine's resource group: a shared group made for the offering
    belongs to no single resource, so it carries every mark but the resource's."""
    if dedicated:
        return tags
    return dict((key, value) for key, value in tags.items() if key != RESOURCE_TAG)


def group_body(location, tags):
    return {"location": location, "tags": tags}


def vnet_body(location, tags, network_cidr):
    return {
        "location": location,
        "tags": tags,
        "properties": {"addressSpace": {"addressPrefixes": [network_cidr]}},
    }


def subnet_body(subnet_cidr):
    # No tags: a subnet belongs to its (tagged) network.
    return {"properties": {"addressPrefix": subnet_cidr}}


def public_ip_body(location, tags):
    return {
        "location": location,
        "tags": tags,
        "sku": {"name": "Standard"},
        "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"},
    }


def nsg_body(location, tags, ssh_ranges):
    """One inbound rule admitting exactly ``ssh_ranges`` on TCP port 22."""
    return {
        "location": location,
        "tags": tags,
        "properties": {"securityRules": [{
            "name": SSH_RULE_NAME,
            "properties": {
                "protocol": "Tcp",
                "sourcePortRange": "*",
                "destinationPortRange": "22",
                "sourceAddressPrefixes": ssh_ranges,
                "destinationAddressPrefix": "*",
                "access": "Allow",
                "priority": SSH_RULE_PRIORITY,
                "direction": "Inbound",
            },
        }]},
    }


def nic_body(location, tags, ip_config_name, subnet_id, public_ip_id, nsg_id=None):
    body = {
        "location": location,
        "tags": tags,
        "properties": {"ipConfigurations": [{
            "name": ip_config_name,
            "properties": {
                "privateIPAllocationMethod": "Dynamic",
                "subnet": {"id": subnet_id},
                "publicIPAddress": {"id": public_ip_id},
            },
        }]},
    }
    if nsg_id is not None:
        body["properties"]["networkSecurityGroup"] = {"id": nsg_id}
    return body


def vm_body(location, tags, vm_name, size_name, image, nic_id, admin_username, admin_password, ssh_public_key,
            custom_data=None):
    """A Linux machine admitting only ``ssh_public_key``; the password only satisfies Azure.

    The OS disk and the NIC are deleted with the machine."""
    os_profile = {
        "computerName": vm_name,
        "adminUsername": admin_username,
        "adminPassword": admin_password,
        "linuxConfiguration": {
            "disablePasswordAuthentication": True,
            "ssh": {"publicKeys": [{
                "path": "/home/%s/.ssh/authorized_keys" % admin_username,
                "keyData": ssh_public_key.strip(),
            }]},
        },
    }
    if custom_data:
        os_profile["customData"] = base64.b64encode(custom_data.encode("utf-8")).decode("ascii")
    return {
        "location": location,
        "tags": tags,
        "properties": {
            "hardwareProfile": {"vmSize": size_name},
            "storageProfile": {
                "imageReference": dict(image),
                "osDisk": {"createOption": "FromImage", "deleteOption": "Delete"},
            },
            "osProfile": os_profile,
            "networkProfile": {"networkInterfaces": [{
                "id": nic_id,
                "properties": {"primary": True, "deleteOption": "Delete"},
            }]},
        },
    }


def disk_tags_body(tags):
    """The PATCH that puts the owner marks on an OS disk (ARM does not copy a VM's tags to it)."""
    return {"tags": tags}
