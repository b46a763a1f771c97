# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Many machines at once, from the subscription's paged listings: the virtual machines, their
power states (``statusOnly=true``), the network interfaces and the public IP addresses, one
listing each, side by side, joined in memory by ARM id.

A pass over N machines then costs about four times ``N / page size`` calls, whatever the
number of resource groups, instead of a read (or a group listing) per machine. Objects a
listing misses (made while the listings ran) are read one by one.

Each listed object is cut down, as its page arrives, to the few fields a pass reads (a
:class:`SlimVm`, :class:`SlimNic`, :class:`SlimPublicIp` or a power-state string) and the SDK
model is dropped: four listings of 10,000 objects held as SDK models took hundreds of MiB."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import (
    plain,
    power_state,
    primary,
    read_network_interface,
    read_public_ip,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import parse_vm_id
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import run_batch

# From this many machines on, the listings cost fewer calls than reading each machine (a machine
# read one by one costs three: the machine with its instance view, its NIC, its public IP).
LISTING_THRESHOLD = 2
# The four listings run side by side.
LISTINGS = 4


def arm_key(resource_id):
    """ARM ids compare case-insensitively (Compute often upper-cases the group segment)."""
    return str(resource_id or "").lower()


def addresses(nic, public_ip):
    """``(private_ip, public_ip)`` of a NIC's primary IP configuration and its public IP object."""
    configuration = primary(getattr(nic, "ip_configurations", None)) if nic is not None else None
    private_ip = getattr(configuration, "private_ip_address", None)
    return private_ip, getattr(public_ip, "ip_address", None) if public_ip is not None else None


class _View:
    """A read-only stand-in for a nested SDK model: the attributes it is given, None for any other."""

    __slots__ = ("_fields",)

    def __init__(self, **fields):
        self._fields = fields

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._fields.get(name)


class SlimVm:
    """The fields of a listed virtual machine a pass reads, under the SDK model's attribute names
    (``hardware_profile.vm_size``, ``storage_profile.os_disk.disk_size_gb``,
    ``network_profile.network_interfaces``), so the code that reads an SDK model reads it too."""

    __slots__ = ("id", "name", "location", "tags", "vm_size", "os_disk_gb", "nic_id")

    def __init__(self, vm):
        self.id = getattr(vm, "id", None)
        self.name = getattr(vm, "name", None)
        self.location = getattr(vm, "location", None)
        self.tags = dict(getattr(vm, "tags", None) or {}) or None
        self.vm_size = plain(getattr(getattr(vm, "hardware_profile", None), "vm_size", None))
        self.os_disk_gb = getattr(getattr(getattr(vm, "storage_profile", None), "os_disk", None), "disk_size_gb", None)
        reference = primary(getattr(getattr(vm, "network_profile", None), "network_interfaces", None))
        self.nic_id = getattr(reference, "id", None)

    @property
    def hardware_profile(self):
        return _View(vm_size=self.vm_size)

    @property
    def storage_profile(self):
        return _View(os_disk=_View(disk_size_gb=self.os_disk_gb))

    @property
    def network_profile(self):
        return _View(network_interfaces=[_View(id=self.nic_id, primary=True)] if self.nic_id else [])

    instance_view = None  # the power state comes from its own listing


class SlimNic:
    """A listed network interface: its primary IP configuration's private address and public IP id."""

    __slots__ = ("id", "private_ip", "public_ip_id")

    def __init__(self, nic):
        self.id = getattr(nic, "id", None)
        configuration = primary(getattr(nic, "ip_configurations", None))
        self.private_ip = getattr(configuration, "private_ip_address", None)
        self.public_ip_id = getattr(getattr(configuration, "public_ip_address", None), "id", None)

    @property
    def ip_configurations(self):
        return [_View(primary=True, private_ip_address=self.private_ip,
                      public_ip_address=_View(id=self.public_ip_id) if self.public_ip_id else None)]


class SlimPublicIp:
    """A listed public IP address: its id and address."""

    __slots__ = ("id", "ip_address")

    def __init__(self, public_ip):
        self.id = getattr(public_ip, "id", None)
        self.ip_address = getattr(public_ip, "ip_address", None)


def _slim(kind, value):
    """What the listings keep of an object read one by one (``kind``: power, nic or public_ip)."""
    if value is None or kind == "power":
        return value
    return SlimNic(value) if kind == "nic" else SlimPublicIp(value)


class ListedMachine:
    """One machine as the listings saw it: a :class:`SlimVm`, its power state, its :class:`SlimNic`
    and :class:`SlimPublicIp` (None where it has none)."""

    __slots__ = ("vm", "power", "nic", "public_ip", "notes")

    def __init__(self, vm, power, nic, public_ip, notes=()):
        self.vm, self.power, self.nic, self.public_ip = vm, power, nic, public_ip
        self.notes = list(notes)  # why a part (power state, NIC, public IP) is missing, when it could not be read

    @property
    def addresses(self):
        return addresses(self.nic, self.public_ip)


class MachineListings:
    """Reads the machines of a set of ARM ids from the subscription's listings."""

    def __init__(self, clients, deadline=None, max_workers=8):
        self.clients = clients
        self.deadline = deadline
        self.max_workers = max_workers

    def _remaining(self):
        return None if self.deadline is None else max(1.0, self.deadline - time.monotonic())

    def _walk(self, what, listing, slim, wanted=None):
        """``{key: slim(object)}`` of a paged listing (every page followed); with ``wanted``, only
        those keys, and the listing stops at the page where the last of them is seen. Only what
        ``slim`` keeps of an object outlives its page: the SDK model is dropped at once."""
        def walk():
            found = {}
            if wanted is not None and not wanted:
                return found
            for entry in listing():
                key = arm_key(getattr(entry, "id", None))
                if wanted is None or key in wanted:
                    found[key] = slim(entry)
                    if wanted is not None and len(found) == len(wanted):
                        break
            return found

        return self.clients.call(what, walk, deadline=self.deadline)

    def _together(self, jobs):
        outcomes = run_batch(jobs, lambda job: {"value": job()}, max_workers=LISTINGS,
                             deadline_seconds=self._remaining(), on_error=lambda job, exc: {"error": exc})
        values = []
        for outcome in outcomes:
            if "value" not in outcome:
                error = outcome.get("error")
                raise error if isinstance(error, AzureError) else AzureError(
                    outcome.get("msg") or str(error) or "a listing failed")
            values.append(outcome["value"])
        return values

    def read(self, keys):
        """``{key: ListedMachine}`` for the machines of ``keys`` (lower-cased ARM ids) that exist.

        Raises :class:`AzureError` when a listing fails: a pass must not act on half a picture."""
        wanted = set(keys)
        compute = self.clients.compute.virtual_machines
        network = self.clients.network
        vms, power, nics, public_ips = self._together([
            lambda: self._walk("listing the virtual machines of the subscription", compute.list_all, SlimVm, wanted),
            lambda: self._walk("listing the power states of the virtual machines",
                               lambda: compute.list_all(status_only="true"),
                               lambda status: power_state(getattr(status, "instance_view", None)), wanted),
            # NICs and public IPs are listed whole, at the same time as the machines: their ids
            # are only known once the machines are, and waiting for those would double the wall time.
            lambda: self._walk("listing the network interfaces of the subscription",
                               network.network_interfaces.list_all, SlimNic),
            lambda: self._walk("listing the public IP addresses of the subscription",
                               network.public_ip_addresses.list_all, SlimPublicIp),
        ])
        nic_of = dict((key, arm_key(vm.nic_id) or None) for key, vm in vms.items())
        notes = {}
        # What a listing missed is read one by one: an object made (or a machine created) after
        # one listing passed it and before another did is in one and not the other. Rare, and
        # never in a steady pass.
        self._read_missing([("power", key, vm.id) for key, vm in vms.items() if power.get(key) is None]
                           + sorted(set(("nic", nic_of[key], vm.nic_id) for key, vm in vms.items()
                                        if nic_of[key] and nic_of[key] not in nics)),
                           power, nics, public_ips, notes)
        theirs = dict((nic_key, nics[nic_key]) for nic_key in set(nic_of.values()) if nics.get(nic_key) is not None)
        # the other machines' NICs and public IPs (the subscription's, listed whole) go at once
        del nics
        public_ip_of = dict((nic_key, arm_key(nic.public_ip_id) or None) for nic_key, nic in theirs.items())
        self._read_missing(sorted(set(("public_ip", public_ip_of[nic_key], nic.public_ip_id)
                                      for nic_key, nic in theirs.items()
                                      if public_ip_of[nic_key] and public_ip_of[nic_key] not in public_ips)),
                           power, theirs, public_ips, notes)
        found = {}
        for key, vm in vms.items():
            nic_key = nic_of[key]
            nic = theirs.get(nic_key)
            public_ip_key = public_ip_of.get(nic_key)
            found[key] = ListedMachine(vm, power.get(key), nic, public_ips.get(public_ip_key) if public_ip_key else None,
                                       [notes[part] for part in (key, nic_key, public_ip_key) if part in notes])
        return found

    def _read_missing(self, missing, power, nics, public_ips, notes):
        """Read the objects ``missing`` (``(kind, key, ARM id)``) into the joined maps; an object that
        cannot be read is left out, with a note for its machine."""
        if not missing:
            return

        def read_one(entry):
            kind, _key, resource_id = entry
            if kind == "power":
                _subscription, group, name = parse_vm_id(resource_id)
                view = self.clients.read("reading the instance view of virtual machine %s" % name,
                                         self.clients.compute.virtual_machines.instance_view, group, name,
                                         deadline=self.deadline)
                return {"value": power_state(view)}
            read = read_network_interface if kind == "nic" else read_public_ip
            return {"value": read(self.clients, resource_id, deadline=self.deadline)}

        outcomes = run_batch(missing, read_one, max_workers=self.max_workers, deadline_seconds=self._remaining())
        for (kind, key, _resource_id), outcome in zip(missing, outcomes):
            if "value" in outcome:
                {"power": power, "nic": nics, "public_ip": public_ips}[kind][key] = _slim(kind, outcome["value"])
            else:
                notes[key] = outcome.get("msg") or "could not be read"
