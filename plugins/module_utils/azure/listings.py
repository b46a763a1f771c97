# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Many machines at once, from the subscription's paged listings: the virtual machines, their
power states (``statusOnly=true``), the network interfaces and the public IP addresses, one
listing each, side by side, joined in memory by ARM id.

A pass over N machines then costs about four times ``N / page size`` calls (two times without
the addresses, which metering does not read), whatever the number of resource groups, instead of a read (or a group listing) per machine. Objects a
listing misses (made while the listings ran) are read one by one.

The listings are read as ARM's JSON (``AzureClients.json_pages``), not as SDK models, whose
construction cost about a millisecond of CPU per object, and each listed object is cut down, as
its page arrives, to the few fields a pass reads (a :class:`SlimVm`, :class:`SlimNic`,
:class:`SlimPublicIp` or a power-state string): four listings of 10,000 objects held whole took
hundreds of MiB."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, AzureUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import power_of_codes
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import run_batch

# From this many machines on, the listings cost fewer calls than reading each machine (a machine
# read one by one costs three: the machine with its instance view, its NIC, its public IP).
LISTING_THRESHOLD = 2
# The four listings run side by side.
LISTINGS = 4


def arm_key(resource_id):
    """ARM ids compare case-insensitively (Compute often upper-cases the group segment)."""
    return str(resource_id or "").lower()


def _field(body, *path):
    """``body[path[0]][path[1]]...`` of ARM's JSON, None where a step is missing."""
    for key in path:
        body = body.get(key) if isinstance(body, dict) else None
    return body


def _primary(references):
    """The primary one of ARM's JSON references (``properties.primary``), else the first."""
    references = [reference for reference in references or [] if isinstance(reference, dict)]
    for reference in references:
        if _field(reference, "properties", "primary"):
            return reference
    return references[0] if references else None


def power_of(instance_view):
    """The power state of an instance view as ARM's JSON (``statuses[].code``)."""
    return power_of_codes(status.get("code") for status in _field(instance_view, "statuses") or []
                          if isinstance(status, dict))


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
    """The fields of a listed virtual machine (ARM's JSON) a pass reads, under the SDK model's
    attribute names (``hardware_profile.vm_size``, ``storage_profile.os_disk.disk_size_gb``,
    ``network_profile.network_interfaces``), so the code that reads an SDK model reads it too."""

    __slots__ = ("id", "name", "location", "tags", "vm_size", "os_disk_gb", "nic_id")

    def __init__(self, body):
        properties = body.get("properties")
        self.id = body.get("id")
        self.name = body.get("name")
        self.location = body.get("location")
        self.tags = dict(body.get("tags") or {}) or None
        self.vm_size = _field(properties, "hardwareProfile", "vmSize")
        self.os_disk_gb = _field(properties, "storageProfile", "osDisk", "diskSizeGB")
        self.nic_id = _field(_primary(_field(properties, "networkProfile", "networkInterfaces")), "id")

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
    """A listed network interface (ARM's JSON): its primary IP configuration's private address and
    public IP id."""

    __slots__ = ("id", "private_ip", "public_ip_id")

    def __init__(self, body):
        configuration = _field(_primary(_field(body, "properties", "ipConfigurations")), "properties")
        self.id = body.get("id")
        self.private_ip = _field(configuration, "privateIPAddress")
        self.public_ip_id = _field(configuration, "publicIPAddress", "id")

    @property
    def ip_configurations(self):
        return [_View(primary=True, private_ip_address=self.private_ip,
                      public_ip_address=_View(id=self.public_ip_id) if self.public_ip_id else None)]


class SlimPublicIp:
    """A listed public IP address (ARM's JSON): its id and address."""

    __slots__ = ("id", "ip_address")

    def __init__(self, body):
        self.id = body.get("id")
        self.ip_address = _field(body, "properties", "ipAddress")


def addresses(nic, public_ip):
    """``(private_ip, public_ip)`` of a :class:`SlimNic` and a :class:`SlimPublicIp` (either may be None)."""
    return (nic.private_ip if nic is not None else None), (public_ip.ip_address if public_ip is not None else None)


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


# What a listing missed, read on its own: kind -> (service, path after the id, what, slim).
JSON_READS = {
    "power": ("compute", "/instanceView", "reading the instance view of virtual machine", power_of),
    "nic": ("network", "", "reading network interface", SlimNic),
    "public_ip": ("network", "", "reading public IP address", SlimPublicIp),
}


class MachineListings:
    """Reads the machines of a set of ARM ids from the subscription's listings."""

    def __init__(self, clients, deadline=None, max_workers=8):
        self.clients = clients
        self.deadline = deadline
        self.max_workers = max_workers

    def _remaining(self):
        return None if self.deadline is None else max(1.0, self.deadline - time.monotonic())

    def _walk(self, what, kind, path, slim, wanted=None, params=None):
        """``{key: slim(object)}`` of a paged listing of ARM's JSON (every page followed); with
        ``wanted``, only those keys, and the listing stops at the page where the last of them is
        seen. Only what ``slim`` keeps of an object outlives its page."""
        def walk():
            found = {}
            if wanted is not None and not wanted:
                return found
            for page in self.clients.json_pages(kind, path, params):
                for body in page:
                    # every object of these listings is an ARM resource: one without its resource id
                    # cannot be told apart from another, so the listing proves nothing
                    if not isinstance(body.get("id"), str) or not body["id"].lower().startswith("/subscriptions/"):
                        raise AzureUnproven("ARM answered GET %s with an object whose id is %r, not a resource id; "
                                            "the listing is not trusted" % (path, body.get("id")))
                    key = arm_key(body.get("id"))
                    if wanted is None or key in wanted:
                        found[key] = slim(body)
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

    def power_states(self, keys):
        """``{key: power state}`` of the machines of ``keys`` that the ``statusOnly`` listing shows
        (one listing, stopped at the page where the last of them is seen)."""
        return self._walk("listing the power states of the virtual machines", "compute",
                          "/subscriptions/%s/providers/Microsoft.Compute/virtualMachines" % self.clients.subscription_id,
                          lambda body: power_of(_field(body, "properties", "instanceView")), set(keys),
                          params={"statusOnly": "true"})

    def read(self, keys, addresses=True):
        """``{key: ListedMachine}`` for the machines of ``keys`` (lower-cased ARM ids) that exist.
        Without ``addresses``, the NICs and public IPs are not listed (half the calls): the
        machines come without them (``nic`` and ``public_ip`` None, no note).

        Raises :class:`AzureError` when a listing fails: a pass must not act on half a picture."""
        wanted = set(keys)
        providers = "/subscriptions/%s/providers/" % self.clients.subscription_id
        listings = [
            lambda: self._walk("listing the virtual machines of the subscription", "compute",
                               providers + "Microsoft.Compute/virtualMachines", SlimVm, wanted),
            lambda: self.power_states(wanted),
        ]
        if addresses:
            # NICs and public IPs are listed whole, at the same time as the machines: their ids
            # are only known once the machines are, and waiting for those would double the wall time.
            listings += [
                lambda: self._walk("listing the network interfaces of the subscription", "network",
                                   providers + "Microsoft.Network/networkInterfaces", SlimNic),
                lambda: self._walk("listing the public IP addresses of the subscription", "network",
                                   providers + "Microsoft.Network/publicIPAddresses", SlimPublicIp),
            ]
        listed = self._together(listings)
        vms, power = listed[:2]
        nics, public_ips = listed[2:] if addresses else ({}, {})
        nic_of = dict((key, (arm_key(vm.nic_id) or None) if addresses else None) for key, vm in vms.items())
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
            service, suffix, what, slim = JSON_READS[kind]
            body = self.clients.read("%s %s" % (what, resource_id.rstrip("/").rsplit("/", 1)[-1]),
                                     self.clients.json_get, service, resource_id, suffix, deadline=self.deadline)
            return {"value": None if body is None else slim(body)}

        outcomes = run_batch(missing, read_one, max_workers=self.max_workers, deadline_seconds=self._remaining())
        for (kind, key, _resource_id), outcome in zip(missing, outcomes):
            if "value" in outcome:
                {"power": power, "nic": nics, "public_ip": public_ips}[kind][key] = outcome["value"]
            else:
                notes[key] = outcome.get("msg") or "could not be read"
