#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: azure_vm_chain_info
short_description: Read Azure virtual machines by ARM id and measure what they are allocated
version_added: 0.1.0
description:
  - For every ARM id, whether the virtual machine exists, its location, size and power state, and the cores,
    memory and disk of its size (the figures).
  - The figures are not mapped onto the offering's components here; the P(waldur.site_agent.usage_rows#filter)
    filter does that with the offering's C(backend_components).
  - Reports allocation, not consumption; the Azure Consumption API is not read.
  - Disk is the size's OS disk plus its resource (temporary) disk, in MiB.
  - Several machines are read with the subscription-wide paged listings of machines and of their power
    states, and their network interfaces and public addresses with one listing per resource group, which
    takes fewer calls than reading each machine; a single machine is read directly. VM sizes are listed
    once per location.
  - A machine that is missing or cannot be read is reported with RV(machines[].found=false) and no figures.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.azure
  - waldur.site_agent.attributes.read_only
options:
  backend_ids:
    description:
      - ARM ids of the virtual machines. Empty entries are reported as not found.
    type: list
    elements: str
    required: true
  max_workers:
    description:
      - How many machines are read at the same time when they are read one by one.
    type: int
    default: 8
  deadline:
    description:
      - Seconds for the whole run.
    type: float
    default: 900
"""

EXAMPLES = r"""
- name: Measure the machines of an offering
  waldur.site_agent.azure_vm_chain_info:
    backend_ids: "{{ resources | map(attribute='backend_id') | list }}"
  register: measured

- name: Their usage rows, the figures mapped onto the offering's components
  ansible.builtin.set_fact:
    rows: "{{ measured.machines | waldur.site_agent.usage_rows(resources, backend_components) }}"
"""

RETURN = r"""
machines:
  description: One entry per backend id, in the order of O(backend_ids).
  returned: always
  type: list
  elements: dict
  contains:
    backend_id:
      description: The backend id as given.
      type: str
    found:
      description: Whether the virtual machine exists and could be read.
      type: bool
    name:
      description: Name of the virtual machine.
      type: str
    location:
      description: Its location.
      type: str
    size:
      description: Its VM size.
      type: str
      sample: Standard_B2s
    power_state:
      description: From the instance view, for example C(running) or C(deallocated).
      type: str
    cores:
      description: Cores of the size.
      type: int
    memory_mb:
      description: Memory of the size, MiB.
      type: int
    disk_mb:
      description:
        - OS disk plus resource disk, MiB. The OS disk is the machine's own (C(diskSizeGB)) when Azure
          reports it, else the largest OS disk of the size.
      type: int
    figures:
      description:
        - C(cores), C(ram_mb) and C(disk_mb), as in RV(machines[].cores), RV(machines[].memory_mb) and
          RV(machines[].disk_mb); empty when the machine could not be measured.
      type: dict
      sample: {cores: 2, ram_mb: 4096, disk_mb: 38912}
    backend_metadata:
      description: What Waldur stores as the resource's backend metadata; null when not found.
      type: dict
    msg:
      description: Why a machine is not found or not measured; empty otherwise.
      type: str
api_calls:
  description: ARM requests sent by this task.
  returned: always
  type: int
  sample: 5
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import (
    AzureError,
    SizeCatalog,
    azure_argument_spec,
    clients_from_module,
    plain,
    power_state,
    primary,
    size_figures,
    vm_addresses,
    vm_metadata,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import (
    InvalidAzureId,
    parse_resource_id,
    parse_vm_id,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import run_batch

# From this many machines on, the two subscription-wide listings (machines, power
# states) cost fewer calls than reading each machine with its instance view.
LISTING_THRESHOLD = 2


def _key(resource_id):
    return str(resource_id or "").lower()


class Reader:
    """Reads the machines of one run and measures them."""

    def __init__(self, module, clients, deadline):
        self.module = module
        self.clients = clients
        self.deadline = deadline
        self.sizes = SizeCatalog(clients, deadline)
        self.max_workers = module.params["max_workers"]

    # ---- subscription-wide listings -------------------------------------------------------
    def _collect(self, what, listing, wanted):
        """Objects of a paged listing whose ids are in ``wanted``; stops once all are seen."""
        wanted = set(wanted)

        def walk():
            found = {}
            if not wanted:
                return found
            for entry in listing():
                key = _key(getattr(entry, "id", None))
                if key in wanted:
                    found[key] = entry
                    if len(found) == len(wanted):
                        break
            return found

        return self.clients.call(what, walk, deadline=self.deadline)

    def _list_by_group(self, what, operation, ids):
        """``{id: object}`` for ARM ids, listing each of their resource groups once.

        ARM has no subscription-wide filter by id for these, and one listing per group
        costs no more than one read per object (a dedicated group holds one of each).
        """
        groups = {}
        for resource_id in ids:
            parts = parse_resource_id(resource_id)
            if parts:
                groups.setdefault(parts["group"].lower(), parts["group"])

        def list_group(group):
            try:
                listed = self.clients.read("listing the %s of resource group %s" % (what, group),
                                           lambda: list(operation(group)), deadline=self.deadline)
            except AzureError as error:
                return {"error": error}
            return {"objects": dict((_key(entry.id), entry) for entry in listed or [])}

        found = {}
        for outcome in run_batch(list(groups.values()), list_group, max_workers=self.max_workers):
            if "objects" not in outcome:
                raise outcome.get("error") or AzureError(outcome.get("msg") or "listing failed")
            found.update(outcome["objects"])
        return found

    def read_listed(self, keys):
        """``{id: (vm, power, private_ip, public_ip)}`` for the machines that exist."""
        compute = self.clients.compute.virtual_machines
        network = self.clients.network
        vms = self._collect("listing the virtual machines of the subscription", compute.list_all, keys)
        statuses = self._collect("listing the power states of the virtual machines",
                                 lambda: compute.list_all(status_only="true"), vms)
        nic_ids = {}
        for key, vm in vms.items():
            reference = primary(getattr(getattr(vm, "network_profile", None), "network_interfaces", None))
            if reference is not None and getattr(reference, "id", None):
                nic_ids[key] = _key(reference.id)
        nics = self._list_by_group("network interfaces", network.network_interfaces.list, nic_ids.values())
        public_ip_ids = {}
        for nic_key, nic in nics.items():
            configuration = primary(getattr(nic, "ip_configurations", None))
            reference = getattr(configuration, "public_ip_address", None)
            if reference is not None and getattr(reference, "id", None):
                public_ip_ids[nic_key] = _key(reference.id)
        public_ips = self._list_by_group("public IP addresses", network.public_ip_addresses.list,
                                         public_ip_ids.values())

        # A machine made between the two listings has no status yet: read its instance view.
        unlisted = [key for key in vms if power_state(getattr(statuses.get(key), "instance_view", None)) is None]
        views = dict(zip(unlisted, run_batch(unlisted, lambda key: self._instance_view(vms[key]),
                                             max_workers=self.max_workers)))
        found = {}
        for key, vm in vms.items():
            power = power_state(getattr(statuses.get(key), "instance_view", None))
            if power is None:
                view = views.get(key)
                power = view.get("power") if isinstance(view, dict) else None
            private_ip = public_ip = None
            nic = nics.get(nic_ids.get(key))
            if nic is not None:
                configuration = primary(getattr(nic, "ip_configurations", None))
                private_ip = getattr(configuration, "private_ip_address", None)
                address = public_ips.get(public_ip_ids.get(nic_ids.get(key)))
                public_ip = getattr(address, "ip_address", None) if address is not None else None
            found[key] = (vm, power, private_ip, public_ip)
        return found

    def _instance_view(self, vm):
        _subscription, group, name = parse_vm_id(vm.id)
        view = self.clients.read("reading the instance view of virtual machine %s" % name,
                                 self.clients.compute.virtual_machines.instance_view, group, name,
                                 deadline=self.deadline)
        return {"power": power_state(view)}

    # ---- one by one -------------------------------------------------------------------------
    def read_one(self, backend_id):
        """``(vm, power, private_ip, public_ip)`` or None when the machine does not exist."""
        _subscription, group, name = parse_vm_id(backend_id)
        vm = self.clients.read("reading virtual machine %s" % name, self.clients.compute.virtual_machines.get,
                               group, name, expand="instanceView", deadline=self.deadline)
        if vm is None:
            return None
        private_ip, public_ip = vm_addresses(self.clients, vm, deadline=self.deadline)
        return vm, power_state(getattr(vm, "instance_view", None)), private_ip, public_ip

    # ---- measuring --------------------------------------------------------------------------
    def describe(self, entry, read):
        vm, power, private_ip, public_ip = read
        size_name = plain(getattr(getattr(vm, "hardware_profile", None), "vm_size", None))
        entry.update(found=True, name=getattr(vm, "name", None), location=getattr(vm, "location", None),
                     size=size_name, power_state=power,
                     backend_metadata=vm_metadata(vm, power=power, private_ip=private_ip, public_ip=public_ip))
        if not size_name or not entry["location"]:
            entry["msg"] = "Azure returned no size or location for this machine; it is not measured"
            return
        try:
            size = self.sizes.size(entry["location"], size_name)
        except AzureError as error:
            entry["msg"] = "not measured: %s" % error
            return
        if size is None:
            entry["msg"] = "size %s is not listed in location %s; the machine is not measured" % (
                size_name, entry["location"])
            return
        os_disk = getattr(getattr(vm, "storage_profile", None), "os_disk", None)
        figures = size_figures(size, getattr(os_disk, "disk_size_gb", None))
        entry.update(cores=figures["cores"], memory_mb=figures["ram_mb"], disk_mb=figures["disk_mb"],
                     figures=dict((key, figures[key]) for key in ("cores", "ram_mb", "disk_mb")))

    def run(self, backend_ids):
        entries = []
        keys = []
        originals = {}
        for backend_id in backend_ids:
            entry = {"backend_id": backend_id, "found": False, "name": None, "location": None, "size": None,
                     "power_state": None, "cores": None, "memory_mb": None, "disk_mb": None, "figures": {},
                     "backend_metadata": None, "msg": ""}
            entries.append(entry)
            if not backend_id:
                entry["msg"] = "no backend id"
                keys.append(None)
                continue
            try:
                subscription = parse_vm_id(backend_id)[0]
            except InvalidAzureId as error:
                entry["msg"] = str(error)
                keys.append(None)
                continue
            if subscription.lower() != str(self.clients.subscription_id).lower():
                entry["msg"] = "belongs to subscription %s, not to the configured one" % subscription
                keys.append(None)
                continue
            keys.append(_key(backend_id))
            originals.setdefault(_key(backend_id), backend_id)

        wanted = sorted(set(key for key in keys if key))
        if len(wanted) >= LISTING_THRESHOLD:
            try:
                found = self.read_listed(wanted)
            except AzureError as error:
                self.module.fail_json(msg=str(error))
            reads = dict((key, found.get(key)) for key in wanted)
            errors = {}
        else:
            outcomes = run_batch([originals[key] for key in wanted], self._read_or_error,
                                 max_workers=self.max_workers,
                                 deadline_seconds=self._remaining())
            reads, errors = {}, {}
            for key, outcome in zip(wanted, outcomes):
                if outcome.get("failed"):
                    errors[key] = outcome["msg"]
                else:
                    reads[key] = outcome["read"]

        for entry, key in zip(entries, keys):
            if key is None:
                continue
            if key in errors:
                entry["msg"] = "could not be read: %s" % errors[key]
            elif reads.get(key) is None:
                entry["msg"] = "the virtual machine does not exist"
            else:
                self.describe(entry, reads[key])
        return entries

    def _remaining(self):
        return None if self.deadline is None else max(1.0, self.deadline - time.monotonic())

    def _read_or_error(self, backend_id):
        try:
            return {"read": self.read_one(backend_id)}
        except AzureError as error:
            return {"failed": True, "msg": str(error)}


def main():
    argument_spec = azure_argument_spec()
    argument_spec.update(
        backend_ids=dict(type="list", elements="str", required=True),
        max_workers=dict(type="int", default=8),
        deadline=dict(type="float", default=900),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    clients = clients_from_module(module)
    if any(module.params["backend_ids"]):
        try:
            clients.authenticate()
        except AzureError as error:
            # Fail rather than report every machine as unmeasured: nothing would be billed.
            module.fail_json(msg=str(error))
    deadline_seconds = module.params["deadline"]
    reader = Reader(module, clients, time.monotonic() + deadline_seconds if deadline_seconds else None)
    machines = reader.run(module.params["backend_ids"])
    module.exit_json(changed=False, machines=machines, api_calls=clients.api_calls)


if __name__ == "__main__":
    main()
