# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""What a run reads of its VMs: power state, sizes (:class:`SizeCatalog`), addresses, metadata.

Every read goes through :class:`~.clients.AzureClients`, which the callers pass in."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, AzureUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import parse_resource_id


def plain(value):
    """An SDK model's enum member as its plain string value (``Standard_B1s``, not the enum)."""
    return getattr(value, "value", value)


def power_state(instance_view):
    """``running``, ``deallocated``, ... from an instance view's ``PowerState/<x>`` status."""
    return power_of_codes(plain(getattr(status, "code", None)) for status in getattr(instance_view, "statuses", None) or [])


def power_of_codes(codes):
    """The ``<x>`` of the first ``PowerState/<x>`` among an instance view's status codes, or None."""
    for code in codes:
        code = code or ""
        if code.lower().startswith("powerstate/"):
            return code.split("/", 1)[1]
    return None


def normalize_location(location):
    """ARM's canonical location name: ``West Europe`` -> ``westeurope``."""
    return str(location or "").replace(" ", "").lower()


def size_figures(size, os_disk_gb=None):
    """Allocation figures of a VM size: cores, memory MiB, disk MiB (OS disk + resource disk).

    ``os_disk_gb`` is the machine's own OS disk when Azure reports it: a size's
    ``osDiskSizeInMB`` is the largest OS disk the size allows (1047552 MiB for most
    sizes), not the disk the machine was given, so it is only the fallback."""
    if size is None:
        return {"cores": None, "ram_mb": None, "disk_mb": None}
    if os_disk_gb:
        os_disk = int(os_disk_gb) * 1024
    else:
        os_disk = getattr(size, "os_disk_size_in_mb", None) or 0
    resource_disk = getattr(size, "resource_disk_size_in_mb", None) or 0
    return {
        "cores": getattr(size, "number_of_cores", None),
        "ram_mb": getattr(size, "memory_in_mb", None),
        "disk_mb": os_disk + resource_disk,
    }


class SlimSize:
    """A VM size of a location's ``vmSizes`` listing (ARM's JSON), under the SDK model's attribute names."""

    __slots__ = ("name", "number_of_cores", "memory_in_mb", "os_disk_size_in_mb", "resource_disk_size_in_mb",
                 "max_data_disk_count")

    def __init__(self, body):
        self.name = body.get("name")
        self.number_of_cores = body.get("numberOfCores")
        self.memory_in_mb = body.get("memoryInMB")
        self.os_disk_size_in_mb = body.get("osDiskSizeInMB")
        self.resource_disk_size_in_mb = body.get("resourceDiskSizeInMB")
        self.max_data_disk_count = body.get("maxDataDiskCount")


class SizeCatalog:
    """VM sizes by location, listed at most once per location per run (thread-safe).

    A failed listing is remembered too, so a hundred machines in a location that
    does not exist cost one call, not a hundred.
    """

    def __init__(self, clients, deadline=None):
        self.clients = clients
        self.deadline = deadline
        self._lock = threading.Lock()
        self._locks = {}
        self._sizes = {}
        self._errors = {}

    def _location_lock(self, location):
        with self._lock:
            return self._locks.setdefault(location, threading.Lock())

    def sizes(self, location):
        """``{lower-case size name: size}`` of a location; AzureError when it cannot be listed."""
        location = normalize_location(location)
        with self._location_lock(location):
            if location not in self._sizes and location not in self._errors:
                # ARM's JSON, not the SDK's models: a read needs no management SDK imported
                path = "/subscriptions/%s/providers/Microsoft.Compute/locations/%s/vmSizes" % (
                    self.clients.subscription_id, location)
                try:
                    listed = self.clients.call(
                        "listing the VM sizes of location %s" % location,
                        lambda: [SlimSize(body) for page in self.clients.json_pages("compute", path)
                                 for body in page if isinstance(body, dict)])
                    if not listed:
                        # ARM lists VM sizes for every location it has: none at all is not a catalogue
                        raise AzureUnproven("ARM listed no VM size at all in location %s; that listing is not "
                                            "trusted" % location)
                    self._sizes[location] = dict((str(size.name or "").lower(), size) for size in listed)
                except AzureError as error:
                    self._errors[location] = error
            if location in self._errors:
                raise self._errors[location]
            return self._sizes[location]

    def size(self, location, name):
        """The size ``name`` of ``location`` (case-insensitive), or None when not offered there."""
        return self.sizes(location).get(str(name or "").lower())


def primary(references):
    """The primary entry of a list of NIC / IP configuration references (else the first)."""
    references = list(references or [])
    for reference in references:
        if getattr(reference, "primary", None):
            return reference
    return references[0] if references else None


def _read_network_object(clients, what, operations, object_id, deadline):
    """The network object an ARM id names (None for an id that names none, or for ARM's own
    not-found), read with the network client's ``operations`` (built only when an id parses)."""
    parts = parse_resource_id(object_id)
    if not parts:
        return None
    return clients.read("reading %s %s" % (what, parts["name"]), getattr(clients.network, operations).get,
                        parts["group"], parts["name"], deadline=deadline)


def read_network_interface(clients, nic_id, deadline=None):
    return _read_network_object(clients, "network interface", "network_interfaces", nic_id, deadline)


def read_public_ip(clients, public_ip_id, deadline=None):
    return _read_network_object(clients, "public IP address", "public_ip_addresses", public_ip_id, deadline)


def vm_metadata(vm, power=None, private_ip=None, public_ip=None):
    """What Waldur stores as the resource's ``backend_metadata``."""
    hardware = getattr(vm, "hardware_profile", None)
    return {
        "backend_type": "azure",
        "virtual_machine": {
            "id": getattr(vm, "id", None),
            "name": getattr(vm, "name", None),
            "location": getattr(vm, "location", None),
            "size": plain(getattr(hardware, "vm_size", None)),
            "power_state": power,
            "public_ip": public_ip,
            "private_ip": private_ip,
        },
    }


def vm_addresses(clients, vm, nic=None, public_ip=None, deadline=None):
    """``(private_ip, public_ip)`` of a VM's primary NIC; missing NIC or address -> None.

    ``nic`` / ``public_ip`` are used when the caller already holds them; anything
    else is read (a 404 gives None, other errors raise).
    """
    if nic is None:
        network_profile = getattr(vm, "network_profile", None)
        reference = primary(getattr(network_profile, "network_interfaces", None))
        if reference is not None:
            nic = read_network_interface(clients, reference.id, deadline=deadline)
    if nic is None:
        return None, None
    ip_configuration = primary(getattr(nic, "ip_configurations", None))
    if ip_configuration is None:
        return None, None
    private_ip = getattr(ip_configuration, "private_ip_address", None)
    if public_ip is None:
        reference = getattr(ip_configuration, "public_ip_address", None)
        if reference is not None and getattr(reference, "id", None):
            public_ip = read_public_ip(clients, reference.id, deadline=deadline)
    return private_ip, getattr(public_ip, "ip_address", None) if public_ip is not None else None
