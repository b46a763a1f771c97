#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: azure_vm_chain
short_description: Create, delete, deallocate and start the Azure virtual machines of Waldur resources
version_added: 1.0.0
description:
  - Works on a list of machines at once, concurrently, and returns one result per machine in input order.
    One machine failing never stops the others.
  - O(machines[].state=present) builds the chain of one machine. The chain is resource group,
    virtual network, subnet, Standard static public IP address, network security group (only with
    O(machines[].allowed_ssh_ranges)), network interface, virtual machine. After the resource group, three
    branches run at the same time (O(parallel_branches)), the public IP address, the network security group,
    and the virtual network then its subnet; the network interface waits for all three, the machine for the
    interface. Every object of the chain is read before anything is written, so that a rerun adopts what
    exists. An existing virtual machine is never written again.
  - Concurrency. O(max_workers) machines are built at once, each with up to three writes in flight, and
    every write the chains start takes a token from a bucket sized like Azure Resource Manager's documented
    write limit per subscription and service principal (O(arm_write_burst) tokens, refilled at
    O(arm_writes_per_second)), so a large batch waits on this side instead of drawing throttling errors.
    A new machine sends 8 writes, so 24 machines at once fit in the default bucket.
  - Owner tags. Every object made carries the tags C(waldur-resource-uuid) (the Waldur resource, 32
    lower-case hex digits) and C(waldur-offering-uuid) (O(machines[].offering_uuid)); a subnet cannot carry
    tags and belongs to its virtual network; the OS disk, which Azure does not tag with its machine, is
    tagged once the machine exists. A shared group the module has to make carries only the offering tag.
  - An existing object is adopted only when it carries this resource's C(waldur-resource-uuid) tag and its
    provisioning succeeded. An object at a wanted name without that tag (another resource's, or nobody's)
    is never adopted, changed or deleted, and the item fails naming it and its owner before anything is
    written. One of this resource's objects still being provisioned makes the item a C(retry); one whose
    provisioning failed fails the item with Azure's reason (a failed machine left by an earlier run is
    deleted with everything carrying its owner tag, as Waldur keeps no resource to terminate it by).
  - The chain is looked up by its owner tag first (resource groups in the subscription, or the objects in
    the shared group), so a resource renamed since an interrupted run finishes its first chain; only when
    nothing carries the tag are the names derived from the current name.
  - Location, size, image and SSH key are checked before anything is created. Creates of one batch whose
    derived names coincide (the same group and machine name) are all refused before any write, naming each
    other. A chain that fails part-way before its machine exists is rolled back, deleting only what this run
    made (an object counts as made only when Azure answered its create with success on a name read free just
    before; its own group only when a fresh listing shows nothing else in it) and never while one of its
    operations is still running; the item fails with the cause.
  - A create Azure did not confirm (refused, or no answer) is never rolled back as made. The object is read
    again; a machine that exists with this resource's owner tag is adopted (done when its provisioning
    succeeded). A transient failure (no answer, throttling, a 5xx) is a C(retry) with nothing rolled back, and
    the next run adopts what Azure made. No retry of the SDK waits past O(deadline), whatever C(Retry-After)
    asks; the item is a C(retry) before the deadline instead. A branch that fails lets the branches already running finish (an operation Azure accepted
    cannot be called back) and keeps them from starting another write; then the rollback runs, and the
    item's message names every branch that failed.
  - Once the virtual machine exists (Azure accepted its creation), nothing fails the item. A deadline hit
    while Azure works on an operation, or a failed read afterwards, makes it a C(retry) carrying the
    machine's ARM id, and the next run adopts the machine by its owner tag.
  - Without O(machines[].resource_group) every machine gets a group of its own,
    C(group-<the whole resource uuid, 32 hex>-<name>); in a shared group the machine name carries the first
    8 hex digits of the resource uuid, C(<name>-<8 hex>).
  - The machine's OS disk and network interface are deleted with it, password login is disabled, the SSH
    key is installed for the admin user, custom data is sent base64-encoded. A random administrator
    password satisfies Azure and is never reported.
  - O(machines[].state=absent) reads the deletion route from the machine's ARM id, never from the current
    settings. A dedicated group is deleted whole only when a fresh listing of it, read just before, shows
    nothing without this resource's owner tag (the OS disk its machine manages counts as the machine's);
    otherwise the machine, its network interface, security group, public IP and network are deleted one by
    one and the group is kept, the message naming what else it holds, and whose each is, in one line that
    starts with C(kept resource group). In a shared group exactly the machine's objects are
    deleted (an object carrying another resource's owner tag is left and named). Machines made before owner
    tags (Waldur Mastermind, C(group-<4 hex>-<name>)) are reached this way, by their ARM id only; their
    untagged group goes whole only when it holds nothing but the chain that id names. Without a backend id,
    what carries the resource's owner tag is deleted (a create that never reported its machine); a group
    carrying the tag goes only when it is named the way the agent names this resource's group, any other
    (a customer's, the tag copied for cost reports) is kept with everything untagged in it.
  - O(machines[].state=deallocated) and O(machines[].state=running) deallocate or start a machine only when
    its instance view says otherwise. With two or more such machines, the machines, their power states,
    network interfaces and public addresses are read from one subscription-wide paged listing each, not
    one by one; a machine missing from the listings is read directly.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.azure
  - waldur.site_agent.batch
  - waldur.site_agent.packed
  - waldur.site_agent.attributes.backend
options:
  machines_packed:
    description:
      - O(machines) packed, as one JSON text of the same items (see the description); exactly one
        of the two is given. Each item is checked as an item of O(machines) would be.
    type: raw
  machines:
    description:
      - The machines to act on, usually made from Waldur orders by the P(waldur.site_agent.vm_items#filter) filter.
        Required unless O(machines_packed) is given.
    type: list
    elements: dict
    suboptions:
      resource_uuid:
        description:
          - UUID of the Waldur resource (dashed or not). Names of the Azure objects derive from it.
        type: str
        required: true
      order_uuid:
        description:
          - UUID of the Waldur order, echoed in the result.
        type: str
      offering_uuid:
        description:
          - UUID of the Waldur offering, written in the C(waldur-offering-uuid) tag of the objects made.
        type: str
      name:
        description:
          - Name of the Waldur resource. Transliterated to Latin letters (Cyrillic, Greek, accents), sanitized to
            C([a-z0-9-]), at most 50 characters. A name with nothing left (CJK characters, symbols only) becomes
            C(vm-<first 8 hex of the resource uuid>).
        type: str
      state:
        description:
          - V(present) creates or adopts the machine; V(absent) deletes it; V(deallocated) and V(running)
            set its power state.
        type: str
        choices: [present, absent, deallocated, running]
        default: present
      backend_id:
        description:
          - ARM id of the machine, once Waldur knows it. With V(present), a machine under this id is left
            as it is and a missing one fails the item; it is never re-created under its old id.
        type: str
      location:
        description:
          - Azure location, for example C(westeurope). Required to create.
        type: str
      size:
        description:
          - VM size, for example C(Standard_B1s); must be offered in the location. Required to create.
        type: str
      image:
        description:
          - Marketplace image, C(publisher:offer:sku:version) or a dict with those four keys. Required to
            create.
        type: raw
      ssh_public_key:
        description:
          - OpenSSH public key installed for the admin user. Required to create.
        type: str
      admin_username:
        description:
          - Name of the administrator account.
        type: str
        default: waldur
      custom_data:
        description:
          - Cloud-init user data, sent base64-encoded as the machine's custom data.
        type: str
      resource_group:
        description:
          - A shared resource group. Unset, the machine gets a dedicated group.
        type: str
      network_cidr:
        description:
          - Address space of the machine's virtual network.
        type: str
        default: 10.0.0.0/16
      subnet_cidr:
        description:
          - Address prefix of the machine's subnet, inside O(machines[].network_cidr).
        type: str
        default: 10.0.0.0/24
      allowed_ssh_ranges:
        description:
          - Addresses, CIDRs or service tags that may connect on TCP port 22. A network security group with
            one inbound rule admitting exactly these is created; none, and no inbound traffic is admitted.
        type: list
        elements: str
  parallel_branches:
    description:
      - Build the public IP address, the network security group and the virtual network (then its subnet) of
        a machine at the same time. V(false) builds them one after the other, as one chain.
    type: bool
    default: true
  arm_write_burst:
    description:
      - Size of the bucket of write tokens the batch's chains share, a positive number. The default is Azure
        Resource Manager's documented write bucket per subscription and service principal (200).
    type: int
    default: 200
  arm_writes_per_second:
    description:
      - Rate at which the bucket of write tokens refills, a positive number. The default is Azure Resource
        Manager's documented refill rate for writes (10 a second); a cloud still on the hourly limits (1,200
        writes an hour per subscription and principal) needs about V(0.33).
    type: float
    default: 10
  deadline:
    description:
      - Seconds for the whole batch. Machines not finished by then are a C(retry) with a message saying so
        (with the machine's ARM id once Azure accepted its creation); nothing is rolled back while Azure is
        still working on an operation, and the next run picks them up.
    type: float
    default: 900
"""

EXAMPLES = r"""
- name: Create a machine in a dedicated resource group
  waldur.site_agent.azure_vm_chain:
    machines:
      - resource_uuid: 1234abcd5678ef901234abcd5678ef90
        order_uuid: 0f0e0d0c0b0a09080706050403020100
        offering_uuid: 5c1e0ffe5c1e0ffe5c1e0ffe5c1e0ffe
        name: Web Server
        location: westeurope
        size: Standard_B1s
        image: Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest
        ssh_public_key: "{{ lookup('ansible.builtin.file', '~/.ssh/id_ed25519.pub') }}"
        allowed_ssh_ranges:
          - 203.0.113.0/24
  register: created

- name: Deallocate a paused machine
  waldur.site_agent.azure_vm_chain:
    machines:
      - resource_uuid: 1234abcd5678ef901234abcd5678ef90
        backend_id: "{{ created.results[0].backend_id }}"
        state: deallocated

- name: Power states for thousands of resources, the lists handed over packed (as the membership pass does)
  waldur.site_agent.azure_vm_chain:
    machines_packed: "{{ waldur_resources.resources_packed | waldur.site_agent.vm_membership_items }}"
    packed: true
  register: power_states

- name: Delete it (the route, whole group or single objects, is read from the id)
  waldur.site_agent.azure_vm_chain:
    machines:
      - resource_uuid: 1234abcd5678ef901234abcd5678ef90
        backend_id: "{{ created.results[0].backend_id }}"
        state: absent
"""

RETURN = r"""
diff:
  description:
    - With C(--diff), one entry per machine that changed (or would change), for Ansible's diff
      output; C(before_header) and C(after_header) name the machine.
  returned: with C(--diff), when a machine changed
  type: list
  elements: dict
  sample:
    - before: {backend_id: "/subscriptions/.../virtualMachines/vm-1", power: running}
      after: {backend_id: "/subscriptions/.../virtualMachines/vm-1", power: deallocated}
      before_header: resource 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b
      after_header: resource 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b
msg:
  description: How many machines ended how.
  returned: always
  type: str
  sample: "3 machine(s): 1 created, 1 failed, 1 retry"
results_packed:
  description: RV(results) packed, as one JSON text of the same results.
  returned: when O(packed) is true
  type: str
  sample: '[{"resource_uuid": "1234abcd5678ef901234abcd5678ef90", "action": "none", "changed": false}]'
failures:
  description: The results that failed (as in RV(results)), so that a packed run still names them.
  returned: when O(packed) is true
  type: list
  elements: dict
results:
  description: One result per machine, in the order of O(machines).
  returned: unless O(packed) is true
  type: list
  elements: dict
  contains:
    resource_uuid:
      description: The machine's resource UUID, 32 lower-case hex digits.
      type: str
      sample: 1234abcd5678ef901234abcd5678ef90
    order_uuid:
      description: The order UUID given with the item, normalised; null without one.
      type: str
    backend_id:
      description: ARM id of the virtual machine (also of a C(retry) once the machine exists); null when there is none.
      type: str
      sample: /subscriptions/0000/resourceGroups/group-1234abcd5678ef901234abcd5678ef90-web-server/providers/Microsoft.Compute/virtualMachines/web-server
    changed:
      description: Whether anything was (or in check mode would be) written on Azure.
      type: bool
    failed:
      description: Whether this item failed (true for a C(retry) too).
      type: bool
    retry:
      description:
        - Whether the item did not finish but nothing is wrong (Azure still working, a read failed once the
          machine existed, the deadline); C(waldur.site_agent.waldur_orders) leaves its order for the next run.
      type: bool
    msg:
      description: What happened, or why the item failed.
      type: str
    action:
      description: What was done.
      type: str
      choices: [created, adopted, deleted, absent, powered_off, powered_on, unknown, none]
    backend_metadata:
      description: What Waldur stores as the resource's backend metadata; null when there is no machine.
      type: dict
      contains:
        backend_type:
          description: Always C(azure).
          type: str
        virtual_machine:
          description: C(id), C(name), C(location), C(size), C(power_state), C(public_ip), C(private_ip).
          type: dict
    exception:
      description: Traceback of an unexpected error (a bug) that failed the item.
      returned: when such an error happened
      type: str
api_calls:
  description: ARM requests sent by this task (retries and long-running-operation polls included), as
    C(reads) (GETs) and C(writes) (the other methods); C(retries) is 0, because the SDK's own retries
    are counted as reads and writes.
  returned: always
  type: dict
  sample: {reads: 30, writes: 12, retries: 0}
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.chain import VmChain
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.pacing import (
    ARM_WRITES_PER_SECOND,
    ARM_WRITE_BURST,
    WritePacer,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import (
    azure_argument_spec,
    clients_from_module,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.validate import (
    DEFAULT_ADMIN_USERNAME,
    DEFAULT_NETWORK_CIDR,
    DEFAULT_SUBNET_CIDR,
    duplicate_errors,
    normalized_items,
    summary,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import (
    BatchRunner,
    api_call_counts,
    batch_argument_spec,
    machine_diff,
    batch_option_problem,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import list_option


MACHINE_OPTIONS = dict(
    resource_uuid=dict(type="str", required=True),
    order_uuid=dict(type="str"),
    offering_uuid=dict(type="str"),
    name=dict(type="str"),
    state=dict(type="str", default="present", choices=["present", "absent", "deallocated", "running"]),
    backend_id=dict(type="str"),
    location=dict(type="str"),
    size=dict(type="str"),
    image=dict(type="raw"),
    ssh_public_key=dict(type="str", no_log=False),
    admin_username=dict(type="str", default=DEFAULT_ADMIN_USERNAME),
    custom_data=dict(type="str"),
    resource_group=dict(type="str"),
    network_cidr=dict(type="str", default=DEFAULT_NETWORK_CIDR),
    subnet_cidr=dict(type="str", default=DEFAULT_SUBNET_CIDR),
    allowed_ssh_ranges=dict(type="list", elements="str"),
)


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = azure_argument_spec()
    argument_spec.update(
        machines=dict(type="list", elements="dict", options=MACHINE_OPTIONS),
        machines_packed=dict(type="raw"),
        packed=dict(type="bool", default=False),
        parallel_branches=dict(type="bool", default=True),
        arm_write_burst=dict(type="int", default=ARM_WRITE_BURST),
        arm_writes_per_second=dict(type="float", default=ARM_WRITES_PER_SECOND),
    )
    argument_spec.update(batch_argument_spec())
    module = build(argument_spec=argument_spec, supports_check_mode=True,
                   required_one_of=[("machines", "machines_packed")],
                   mutually_exclusive=[("machines", "machines_packed")])

    BatchRunner(module, None)  # the batch options, before any call
    problem = batch_option_problem(module.params, positive=("arm_write_burst", "arm_writes_per_second"))
    if problem:
        module.fail_json(msg=problem)
    items = normalized_items(module, list_option(module, "machines", MACHINE_OPTIONS))
    duplicate_errors(items)
    clients = clients_from_module(module)
    deadline = time.monotonic() + module.params["deadline"]
    clients.deadline = deadline  # no SDK retry waits past it, whatever Retry-After asks

    def api_calls():
        # azure-core retries inside the SDK: each attempt counts as a read or a write, not as a retry
        return api_call_counts(clients.counter.reads, clients.counter.writes, 0)

    runner = BatchRunner(module, None, echo=("resource_uuid", "order_uuid"), api_calls=api_calls)
    if any(not item.get("error") for item in items):  # duplicates carry an error and need no call
        try:
            clients.authenticate()
        except AzureError as error:
            runner.fail("%s; no machine was touched" % error)
    pacer = WritePacer(module.params["arm_write_burst"], module.params["arm_writes_per_second"])
    chain = VmChain(module, clients, deadline, branches=module.params["parallel_branches"], pacer=pacer)
    chain.plan_power(items)  # many power items: their machines come from listings, not one read each

    results = runner.run(items, chain.run)
    for item, result in zip(items, results):
        # items cut off by the deadline come back with only failed/changed/retry/msg
        result.setdefault("backend_id", item.get("backend_id") or chain.accepted_vms.get(item["resource_uuid"]))
        result.setdefault("action", "none")
        result.setdefault("backend_metadata", None)
        diff = machine_diff(result, ("running", "deallocated"), size=item.get("size")) if module._diff and result.get("changed") else None
        if diff:
            result["diff"] = diff
    runner.finish(results, msg=summary(results), packed=module.params["packed"], fail_msg=lambda failures, results: "%d of %d machine(s) failed: %s" % (
        len(failures), len(results), failures[0]["msg"]))


if __name__ == "__main__":
    main()
