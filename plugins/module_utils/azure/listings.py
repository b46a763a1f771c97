# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Many machines at once, from the subscription's paged listings: the virtual machines, their
power states (``statusOnly=true``), the network interfaces and the public IP addresses, one
listing each, side by side, joined in memory by ARM id.

A pass over N machines then costs about four times ``N / page size`` calls, whatever the
number of resource groups, instead of a read (or a group listing) per machine. Objects a
listing misses (made while the listings ran) are read one by one."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import (
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


def _reference_key(reference):
    return arm_key(getattr(reference, "id", None)) or None


def nic_key_of(vm):
    """The key of a machine's primary network interface, or None."""
    return _reference_key(primary(getattr(getattr(vm, "network_profile", None), "network_interfaces", None)))


def public_ip_key_of(nic):
    """The key of the public IP address of a NIC's primary IP configuration, or None."""
    configuration = primary(getattr(nic, "ip_configurations", None))
    return _reference_key(getattr(configuration, "public_ip_address", None))


def addresses(nic, public_ip):
    """``(private_ip, public_ip)`` of a NIC's primary IP configuration and its public IP object."""
    configuration = primary(getattr(nic, "ip_configurations", None)) if nic is not None else None
    private_ip = getattr(configuration, "private_ip_address", None)
    return private_ip, getattr(public_ip, "ip_address", None) if public_ip is not None else None


class ListedMachine:
    """One machine as the listings saw it: the model, its power state, its NIC and public IP objects."""

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

    def _walk(self, what, listing, wanted=None):
        """``{key: object}`` of a paged listing (every page followed); with ``wanted``, only those
        keys, and the listing stops at the page where the last of them is seen."""
        def walk():
            found = {}
            if wanted is not None and not wanted:
                return found
            for entry in listing():
                key = arm_key(getattr(entry, "id", None))
                if wanted is None or key in wanted:
                    found[key] = entry
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
        vms, statuses, nics, public_ips = self._together([
            lambda: self._walk("listing the virtual machines of the subscription", compute.list_all, wanted),
            lambda: self._walk("listing the power states of the virtual machines",
                               lambda: compute.list_all(status_only="true"), wanted),
            # NICs and public IPs are listed whole, at the same time as the machines: their ids
            # are only known once the machines are, and waiting for those would double the wall time.
            lambda: self._walk("listing the network interfaces of the subscription",
                               network.network_interfaces.list_all),
            lambda: self._walk("listing the public IP addresses of the subscription",
                               network.public_ip_addresses.list_all),
        ])
        power = dict((key, power_state(getattr(status, "instance_view", None))) for key, status in statuses.items())
        # the SDK builds a model's attributes on every access: each reference is read once
        nic_of = dict((key, nic_key_of(vm)) for key, vm in vms.items())
        notes = {}
        # What a listing missed is read one by one: an object made (or a machine created) after
        # one listing passed it and before another did is in one and not the other. Rare, and
        # never in a steady pass.
        self._read_missing([("power", key, vm.id) for key, vm in vms.items() if power.get(key) is None]
                           + sorted(set(("nic", nic_of[key], self._nic_id(vm)) for key, vm in vms.items()
                                        if nic_of[key] and nic_of[key] not in nics)),
                           power, nics, public_ips, notes)
        theirs = dict((nic_key, nics[nic_key]) for nic_key in set(nic_of.values()) if nics.get(nic_key) is not None)
        public_ip_of = dict((nic_key, public_ip_key_of(nic)) for nic_key, nic in theirs.items())
        self._read_missing(sorted(set(("public_ip", public_ip_of[nic_key], self._public_ip_id(nic))
                                      for nic_key, nic in theirs.items()
                                      if public_ip_of[nic_key] and public_ip_of[nic_key] not in public_ips)),
                           power, nics, public_ips, notes)
        found = {}
        for key, vm in vms.items():
            nic_key = nic_of[key]
            nic = theirs.get(nic_key)
            public_ip_key = public_ip_of.get(nic_key)
            found[key] = ListedMachine(vm, power.get(key), nic, public_ips.get(public_ip_key) if public_ip_key else None,
                                       [notes[part] for part in (key, nic_key, public_ip_key) if part in notes])
        return found

    @staticmethod
    def _nic_id(vm):
        return getattr(primary(getattr(getattr(vm, "network_profile", None), "network_interfaces", None)), "id", None)

    @staticmethod
    def _public_ip_id(nic):
        configuration = primary(getattr(nic, "ip_configurations", None))
        return getattr(getattr(configuration, "public_ip_address", None), "id", None)

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
                {"power": power, "nic": nics, "public_ip": public_ips}[kind][key] = outcome["value"]
            else:
                notes[key] = outcome.get("msg") or "could not be read"
