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
version_added: 1.0.0
description:
  - For every ARM id, whether the virtual machine exists, its location, size and power state, and the cores,
    memory and disk of its size (the figures).
  - The figures are not mapped onto the offering's components here; the P(waldur.site_agent.usage_rows#filter)
    filter does that with the offering's C(backend_components).
  - Reports allocation, not consumption; the Azure Consumption API is not read.
  - Disk is the size's OS disk plus its resource (temporary) disk, in MiB.
  - Several machines are read from four subscription-wide paged listings, run side by side and joined in
    memory - the machines, their power states (C(statusOnly=true)), the network interfaces and the public IP
    addresses - so a run costs about four calls per page of machines (two with O(addresses=false)), not calls
    per machine or per resource group; a single machine is read directly. A machine or object missing from a listing
    is read on its own, and only that read, answering ARM's own not-found, shows a machine gone (a listing may be empty,
    partial or older than the machine). VM sizes are listed once per location.
  - A machine that is missing or cannot be read is reported with RV(machines[].found=false) and no figures.
  - With O(read_subscription=true) the subscription itself is read first (C(GET /subscriptions/{id})), the direct
    proof that ARM knows it and that the identity may read it; the module fails naming the subscription and the
    identity when it cannot (the order pass's probe, which then approves nothing).
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.azure
  - waldur.site_agent.packed
  - waldur.site_agent.attributes.read_only
options:
  backend_ids:
    description:
      - ARM ids of the virtual machines. Empty entries are reported as not found. Required unless
        O(backend_ids_packed) is given or O(read_subscription) is true.
    type: list
    elements: str
  backend_ids_packed:
    description:
      - O(backend_ids) packed, as one JSON text of the same ids (see the description); exactly one of
        the two is given.
    type: raw
  addresses:
    description:
      - Whether the machines' private and public IP addresses are read (into RV(machines[].backend_metadata)).
      - Measuring needs none of them; without them, several machines cost two listings (the machines and their
        power states), not four, and the addresses in RV(machines[].backend_metadata) are null.
    type: bool
    default: true
  read_subscription:
    description:
      - Read the subscription (C(GET /subscriptions/{id})) before any machine and return it as RV(subscription).
      - The module fails when ARM answers that it does not know the subscription (C(SubscriptionNotFound),
        C(InvalidSubscriptionId)), refuses this identity (C(AuthorizationFailed), HTTP 403), cannot be reached, or
        says the subscription is C(Disabled) or C(Deleted); the message names the subscription, where it came from
        and the identity that signed in, never a secret.
    type: bool
    default: false
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

- name: Prove that this identity can work in the subscription (the order pass's probe)
  waldur.site_agent.azure_vm_chain_info:
    read_subscription: true
  register: probe

- name: Thousands of machines, the lists handed over packed, without their addresses (as the report pass does)
  waldur.site_agent.azure_vm_chain_info:
    backend_ids_packed: "{{ waldur_resources.resources_packed | waldur.site_agent.backend_ids }}"
    addresses: false
    packed: true
  register: measured
"""

RETURN = r"""
machines_packed:
  description: RV(machines) packed, as one JSON text of the same entries.
  returned: when O(packed) is true
  type: str
  sample: '[{"backend_id": "/subscriptions/.../virtualMachines/web-1", "found": true, "size": "Standard_B2s"}]'
machines:
  description: One entry per backend id, in the order of O(backend_ids).
  returned: unless O(packed) is true
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
      description:
        - What Waldur stores as the resource's backend metadata; null when not found. Its addresses are null
          when O(addresses) is false.
      type: dict
    msg:
      description:
        - Why a machine is not found or not measured, or which part of it (power state, network interface,
          public IP) could not be read; empty otherwise.
      type: str
    bad_backend_id:
      description:
        - True when the backend id is not the ARM id of a virtual machine, or names another subscription than
          the configured one (RV(machines[].msg) says which); absent otherwise. The report pass counts such a
          resource failed instead of leaving its usage out.
      type: bool
      returned: when true
    read_failed:
      description:
        - True when the machine could not be read or measured (ARM failed or answered something that is not
          its JSON, or its location's VM sizes could not be listed or do not hold its size); absent otherwise.
          The report pass counts its resource failed, naming why, instead of leaving its usage out.
      type: bool
      returned: when true
subscription:
  description: The subscription as ARM answered it.
  returned: when O(read_subscription) is true
  type: dict
  contains:
    subscription_id:
      description: Its id, as ARM spells it.
      type: str
    display_name:
      description: Its name.
      type: str
    state:
      description: C(Enabled), C(Warned) or C(PastDue) (a C(Disabled) or C(Deleted) one fails the module).
      type: str
    tenant_id:
      description: The tenant it belongs to.
      type: str
  sample: {subscription_id: 5ab5c71d-0000-4000-a000-000000000001, display_name: Production, state: Enabled,
           tenant_id: 7e4a47d0-0000-4000-a000-000000000002}
api_calls:
  description: ARM requests sent by this task.
  returned: always
  type: int
  sample: 5
azure_sign_in:
  description:
    - Which identity signed in to Azure and where it came from (O(auth_source) and the option, variable,
      credential-file profile or endpoint), never a secret. The order pass's probe shows it at C(-v).
  returned: success, and on a failure once the sign-in is decided (a rejected credential, a subscription that
    cannot be read)
  type: str
  sample: service principal 00000000-0000-0000-0000-000000000000 in tenant 11111111-1111-1111-1111-111111111111
    with a client secret (auth_source auto, the module options or AZURE_* variables)
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import (
    azure_argument_spec,
    clients_from_module,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import (
    SizeCatalog,
    plain,
    power_state,
    size_figures,
    vm_addresses,
    vm_metadata,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.subscription import read_subscription
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.listings import (
    LISTING_THRESHOLD,
    MachineListings,
    arm_key,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import (
    InvalidAzureId,
    parse_vm_id,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import run_batch
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import list_option, pack


class Reader:
    """Reads the machines of one run and measures them."""

    def __init__(self, module, clients, deadline):
        self.module = module
        self.clients = clients
        self.deadline = deadline
        self.sizes = SizeCatalog(clients, deadline)
        self.max_workers = module.params["max_workers"]
        self.addresses = module.params.get("addresses", True)

    # ---- subscription-wide listings -------------------------------------------------------
    def read_listed(self, keys):
        """``{id: (vm, power, private_ip, public_ip, notes)}`` for the machines that exist: one paged
        listing each of machines, power states, NICs and public IPs, joined in memory."""
        listed = MachineListings(self.clients, self.deadline, self.max_workers).read(
            keys, addresses=self.addresses)
        return dict((key, (machine.vm, machine.power) + machine.addresses + (machine.notes,))
                    for key, machine in listed.items())

    # ---- one by one -------------------------------------------------------------------------
    def read_one(self, backend_id):
        """``(vm, power, private_ip, public_ip, notes)`` or None when the machine does not exist."""
        _subscription, group, name = parse_vm_id(backend_id)
        vm = self.clients.read("reading virtual machine %s" % name, self.clients.compute.virtual_machines.get,
                               group, name, expand="instanceView", deadline=self.deadline)
        if vm is None:
            return None
        private_ip, public_ip = (vm_addresses(self.clients, vm, deadline=self.deadline)
                                 if self.addresses else (None, None))
        return vm, power_state(getattr(vm, "instance_view", None)), private_ip, public_ip, []

    # ---- measuring --------------------------------------------------------------------------
    def describe(self, entry, read):
        vm, power, private_ip, public_ip, notes = read
        # a part the listings missed and its own read failed: said, though the machine is measured
        entry["msg"] = "; ".join("not read: %s" % note for note in notes)
        size_name = plain(getattr(getattr(vm, "hardware_profile", None), "vm_size", None))
        entry.update(found=True, name=getattr(vm, "name", None), location=getattr(vm, "location", None),
                     size=size_name, power_state=power,
                     backend_metadata=vm_metadata(vm, power=power, private_ip=private_ip, public_ip=public_ip))
        # a machine found but not measured is named by the report pass (read_failed), never billed as
        # nothing: its size is unknown, not zero
        if not size_name or not entry["location"]:
            entry.update(msg="is not measured: Azure returned no size or location for it", read_failed=True)
            return
        try:
            size = self.sizes.size(entry["location"], size_name)
        except AzureError as error:
            entry.update(msg="is not measured: %s" % error, read_failed=True)
            return
        if size is None:
            entry.update(msg="is not measured: size %s is not listed in location %s" % (size_name, entry["location"]),
                         read_failed=True)
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
                entry.update(msg=str(error), bad_backend_id=True)
                keys.append(None)
                continue
            if subscription.lower() != str(self.clients.subscription_id).lower():
                entry.update(msg="belongs to subscription %s, not to the configured one" % subscription,
                             bad_backend_id=True)
                keys.append(None)
                continue
            keys.append(arm_key(backend_id))
            originals.setdefault(arm_key(backend_id), backend_id)

        wanted = sorted(set(key for key in keys if key))
        reads, errors = {}, {}
        if len(wanted) >= LISTING_THRESHOLD:
            try:
                reads = self.read_listed(wanted)
            except AzureError as error:
                self.module.fail_json(msg=str(error))
        # One machine, or one the listings do not hold: a listing's silence proves nothing (it may
        # be empty, partial or older than the machine), so only its own read says it is gone.
        unread = [key for key in wanted if key not in reads]
        outcomes = run_batch([originals[key] for key in unread], self._read_or_error,
                             max_workers=self.max_workers, deadline_seconds=self._remaining())
        for key, outcome in zip(unread, outcomes):
            if outcome.get("failed"):
                errors[key] = outcome["msg"]
            else:
                reads[key] = outcome["read"]

        for entry, key in zip(entries, keys):
            if key is None:
                continue
            if key in errors:
                # a machine that could not be read is named by the report pass, never left out quietly
                entry.update(msg="could not be read: %s" % errors[key], read_failed=True)
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


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = azure_argument_spec()
    argument_spec.update(
        backend_ids=dict(type="list", elements="str"),
        backend_ids_packed=dict(type="raw"),
        packed=dict(type="bool", default=False),
        addresses=dict(type="bool", default=True),
        read_subscription=dict(type="bool", default=False),
        max_workers=dict(type="int", default=8),
        deadline=dict(type="float", default=900),
    )
    module = build(argument_spec=argument_spec, supports_check_mode=True,
                   required_if=[("read_subscription", False, ("backend_ids", "backend_ids_packed"), True)],
                   mutually_exclusive=[("backend_ids", "backend_ids_packed")])
    backend_ids = list_option(module, "backend_ids", elements="str")
    clients = clients_from_module(module)
    deadline_seconds = module.params["deadline"]
    clients.deadline = time.monotonic() + deadline_seconds if deadline_seconds else None  # bounds SDK retries
    result = dict(changed=False)
    if any(backend_ids) or module.params["read_subscription"]:
        try:
            clients.authenticate()
            if module.params["read_subscription"]:
                result["subscription"] = read_subscription(clients)
        except AzureError as error:
            # Fail rather than report every machine as unmeasured: nothing would be billed.
            module.fail_json(msg=str(error), api_calls=clients.api_calls, azure_sign_in=clients.sign_in.describe())
    reader = Reader(module, clients, clients.deadline)
    machines = reader.run(backend_ids)
    if module.params["packed"]:
        result["machines_packed"] = pack(machines)
    else:
        result["machines"] = machines
    module.exit_json(api_calls=clients.api_calls, azure_sign_in=clients.sign_in.describe(), **result)


if __name__ == "__main__":
    main()
