# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Azure names and ARM ids of a Waldur virtual machine.

Everything a later pass needs (which group, which companion objects, how to
delete) is derived from the Waldur resource's name and uuid, or read back out
of the VM's ARM id: the agent keeps no state of its own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.waldur.site_agent.plugins.module_utils.naming import normalize_uuid

MAX_NAME_LENGTH = 50
FALLBACK_NAME = "waldur-vm"
UNIQUE_SUFFIX_LENGTH = 8
GROUP_INFIX_LENGTH = 4

_INVALID_RUN = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")
_VM_ID = re.compile(
    r"^/subscriptions/(?P<subscription>[^/]+)/resourceGroups/(?P<group>[^/]+)"
    r"/providers/Microsoft\.Compute/virtualMachines/(?P<vm>[^/]+)/?$",
    re.IGNORECASE,
)
_RESOURCE_ID = re.compile(
    r"^/subscriptions/(?P<subscription>[^/]+)/resourceGroups/(?P<group>[^/]+)"
    r"/providers/(?P<namespace>[^/]+)/(?P<type>[^/]+)/(?P<name>[^/]+)"
    r"(?:/(?P<child_type>[^/]+)/(?P<child_name>[^/]+))?/?$",
    re.IGNORECASE,
)
_DEDICATED_GROUP = re.compile(r"^group-[0-9a-f]{4}-(?P<rest>.+)$", re.IGNORECASE)
IMAGE_KEYS = ("publisher", "offer", "sku", "version")


class InvalidAzureId(ValueError):
    """A backend id that is not the ARM id of a virtual machine."""


class InvalidImage(ValueError):
    """An image that is neither ``publisher:offer:sku:version`` nor a dict with those keys."""


def sanitize(name):
    """A name Azure accepts for a VM and its companions.

    Lower-case; every run of characters outside ``[a-z0-9-]`` becomes one ``-``;
    repeated dashes collapse; no dash at either end; at most 50 characters;
    ``waldur-vm`` when nothing is left (e.g. a Cyrillic name).
    """
    text = _INVALID_RUN.sub("-", str(name or "").lower())
    text = _DASHES.sub("-", text).strip("-")
    text = text[:MAX_NAME_LENGTH].strip("-")
    return text or FALLBACK_NAME


def unique_suffix(resource_uuid):
    """The first 8 hex digits of the resource uuid (dashed or not, any case)."""
    return normalize_uuid(resource_uuid)[:UNIQUE_SUFFIX_LENGTH]


def companion_names(vm_name):
    """Names of the objects built around a VM, derived from the VM name as it is."""
    return {
        "vm": vm_name,
        "vnet": "net" + vm_name,
        "subnet": "subnet" + vm_name,
        "public_ip": "pubip" + vm_name,
        "nsg": "nsg" + vm_name,
        "nic": "nic" + vm_name,
        "ip_config": "ipconf" + vm_name,
    }


def dedicated_names(name, resource_uuid):
    """A VM in a group of its own: VM = sanitize(name), group = ``group-<4 hex>-<vm>``."""
    vm_name = sanitize(name)
    names = companion_names(vm_name)
    names["group"] = "group-%s-%s" % (normalize_uuid(resource_uuid)[:GROUP_INFIX_LENGTH], vm_name)
    names["dedicated"] = True
    return names


def shared_names(name, resource_uuid, group):
    """A VM in a shared group: the name carries the uuid so two alike names stay apart."""
    vm_name = "%s-%s" % (sanitize(name), unique_suffix(resource_uuid))
    names = companion_names(vm_name)
    names["group"] = group
    names["dedicated"] = False
    return names


def machine_names(name, resource_uuid, shared_group=None):
    """Dedicated names unless a shared group is given."""
    if shared_group:
        return shared_names(name, resource_uuid, shared_group)
    return dedicated_names(name, resource_uuid)


def is_dedicated_group(group, vm_name):
    """Whether ``group`` is the group of this VM alone (``group-<4 hex>-<vm>``).

    Compared case-insensitively: ARM ids often come back with the group upper-cased,
    and Azure names are case-insensitive.
    """
    match = _DEDICATED_GROUP.match(group or "")
    return bool(match) and match.group("rest").lower() == (vm_name or "").lower()


def build_vm_id(subscription_id, group, vm_name):
    return "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s" % (
        subscription_id, group, vm_name)


def parse_vm_id(vm_id):
    """``(subscription, group, vm)`` from a VM's ARM id; anything else raises InvalidAzureId."""
    match = _VM_ID.match(str(vm_id or "").strip())
    if not match:
        raise InvalidAzureId("Not an Azure virtual machine id: %r" % (vm_id,))
    return match.group("subscription"), match.group("group"), match.group("vm")


def names_from_vm_id(vm_id):
    """The VM's names as found in its id (never re-sanitized), its group and its deletion route."""
    subscription, group, vm_name = parse_vm_id(vm_id)
    names = companion_names(vm_name)
    names["group"] = group
    names["subscription"] = subscription
    names["dedicated"] = is_dedicated_group(group, vm_name)
    return names


def parse_resource_id(resource_id):
    """Parts of any ARM resource id (``group``, ``namespace``, ``type``, ``name``, child parts).

    Returns None for something that is not a resource id.
    """
    match = _RESOURCE_ID.match(str(resource_id or "").strip())
    return match.groupdict() if match else None


def same_name(left, right):
    """Azure resource names compare case-insensitively."""
    return (left or "").lower() == (right or "").lower()


def parse_image(image):
    """``{publisher, offer, sku, version}`` from ``publisher:offer:sku:version`` or a dict."""
    if isinstance(image, dict):
        missing = [key for key in IMAGE_KEYS if not str(image.get(key) or "").strip()]
        if missing:
            raise InvalidImage("Azure image %r lacks %s" % (image, ", ".join(missing)))
        return dict((key, str(image[key]).strip()) for key in IMAGE_KEYS)
    parts = str(image or "").split(":")
    if len(parts) != 4 or not all(part.strip() for part in parts):
        raise InvalidImage("Azure image %r is not of the form publisher:offer:sku:version" % (image,))
    return dict(zip(IMAGE_KEYS, (part.strip() for part in parts)))


def image_text(image):
    """``publisher:offer:sku:version`` for a parsed image."""
    return ":".join(image[key] for key in IMAGE_KEYS)
