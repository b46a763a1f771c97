#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: do_droplet
short_description: Create, adopt, resize, power and delete DigitalOcean droplets of Waldur resources
version_added: 1.0.0
description:
  - Works on a list of droplets, one per Waldur resource, concurrently on a bounded pool of workers,
    and returns one result per item in the order of the input.
  - Every droplet carries the tag C(waldur-resource:<resource uuid as 32 hex>). Ordered tags with that
    prefix are dropped, so one order cannot claim another resource's droplet.
  - Before creating, the droplets carrying the resource's tag are looked up. Exactly one (carrying no
    other resource's tag) is adopted instead of creating a second droplet; a droplet that also carries
    another resource's tag is never adopted, changed or deleted.
  - Two or more droplets carrying exactly the resource's tag are copies made by overlapping agent runs
    only when every one matches the order exactly (name, region, size, image and tags), was created after
    the order (O(droplets[].not_before)) and within O(duplicate_window) seconds of the others; then the
    oldest is kept (and adopted) and the others are deleted, and the result says so. Otherwise (a tag can
    be copied onto a hand-made look-alike) nothing is deleted or adopted; the item is held for the operator
    (C(failed), C(retry) and C(held)), and its message names every droplet (id, name, region, size,
    creation time) and why they are not copies.
  - Deleting (V(absent)) needs evidence that the droplet is the resource's. The droplet
    O(droplets[].backend_id) is deleted when it carries the resource's tag, or when it carries no
    C(waldur-resource:) tag at all (a legacy droplet made before owner tags, reached by the exact id
    Waldur records; the result says so); one carrying another resource's tag is kept and the item is
    held. Other droplets carrying the tag are deleted only when their name is one the agent derives for
    the resource (from O(droplets[].name), or C(waldur-<first 8 hex of the resource uuid>)); any other
    is kept and named in the result.
  - Items of one batch that would act on one droplet are refused before any write, all of them, and
    held naming each other - two items for one resource (one owner tag), or two creates whose names
    derive the same droplet name.
  - No call waits past O(deadline), whatever DigitalOcean's C(Retry-After) says; the item ends C(retry).
  - A droplet whose O(droplets[].backend_id) no longer exists is never re-created under a new id.
  - An item failing sets that item's C(failed) and C(msg); the task fails only when
    O(fail_on_item_error=true), or when DigitalOcean rejects the token.
  - A failure the next run should retry sets the item's C(retry) as well - DigitalOcean unreachable,
    throttling or answering 5xx after the retries, a create whose answer was lost, and every failure
    after the droplet exists (waiting for it, a power action or a resize that did not finish in time).
    Such an item carries the droplet's id in C(backend_id) when there is one, so C(waldur_orders)
    leaves its order for the next pass instead of erring it.
author:
  - Waldur site agent developers (@waldur)
options:
  droplets_packed:
    description:
      - O(droplets) packed, as one JSON text of the same items (see the description); exactly one
        of the two is given. Each item is checked as an item of O(droplets) would be.
    type: raw
  droplets:
    description:
      - The droplets to act on, one per Waldur resource. Required unless O(droplets_packed) is given.
    type: list
    elements: dict
    suboptions:
      resource_uuid:
        description:
          - UUID of the Waldur resource (dashed or not). Names the droplet's resource tag.
        type: str
        required: true
      order_uuid:
        description:
          - UUID of the Waldur order this item carries out; echoed in the result.
        type: str
      name:
        description:
          - Droplet name. Characters outside C([A-Za-z0-9.-]) become C(-) and the name is lower-cased;
            with no name the droplet is called C(waldur-<first 8 hex of the resource uuid>).
          - With V(absent), the resource's name. A droplet found by its tag is deleted only under a name
            derived from it (or the C(waldur-<8 hex>) name).
        type: str
      approved_now:
        description:
          - The order was approved by this pass, so no earlier pass can have made its droplet, and the one
            listing of the droplets carrying the resource's tag is the proof that none exists. Without it
            (an order an earlier pass approved, which may have made the droplet before it was stopped),
            a listing that shows none is read once more before the droplet is created, and the two must
            agree; when they do not, nothing is created and the item is left for the next pass.
        type: bool
        default: false
      not_before:
        description:
          - When the order was placed (ISO 8601; the order pass gives the order's C(created)). A droplet
            created earlier cannot have been made for the order, so it is never taken for a copy an
            overlapping run made. Without it, droplets carrying one resource's tag are never cleaned up.
        type: str
      state:
        description:
          - V(present) creates the droplet (or adopts the one carrying the resource tag); with
            O(droplets[].backend_id) it checks the droplet exists and resizes it when
            O(droplets[].size) differs.
          - V(absent) deletes the droplet O(droplets[].backend_id) (when it carries this resource's tag,
            or no owner tag at all) and every other droplet carrying exactly this resource's tag under a
            name derived for the resource (copies an overlapping pass made). A droplet already gone is
            not an error.
          - V(off) shuts the droplet down (powering it off when a graceful shutdown does not finish
            within half of O(wait_timeout)); V(active) powers it on. Nothing is done when the droplet
            is already in that state.
        type: str
        choices: [present, absent, "off", active]
        default: present
      backend_id:
        description:
          - Id of the droplet Waldur knows for the resource. Empty means none.
        type: str
      region:
        description:
          - Region slug. Required to create.
        type: str
      image:
        description:
          - Image slug or id. Required to create.
        type: str
      size:
        description:
          - Size slug. Required to create; for the droplet O(droplets[].backend_id) a different slug
            resizes it (CPU and RAM only, never the disk), powering it off first. An adopted droplet
            is never resized. Leave it out to only check that the droplet exists (the order pass does
            so for Create and Restore orders, which never resize).
        type: str
      running:
        description:
          - With O(droplets[].backend_id), the power state the droplet should have after a resize
            (V(true) on, V(false) off). When V(true) and the droplet is off with its size already
            right, it is powered on; a resize interrupted after the power-off is finished this way.
          - Unset, a resized droplet is powered on again only if it was running.
        type: bool
      ssh_keys:
        description:
          - SSH keys for a new droplet, each a key id, an MD5 fingerprint (both must exist in the account)
            or an OpenSSH public key.
          - A public key is found among the account's keys by fingerprint (never by name) and added as
            C(waldur-<first 8 hex of the resource uuid>) when missing.
        type: list
        elements: str
        default: []
      user_data:
        description:
          - Cloud-init user data for a new droplet.
        type: str
      tags:
        description:
          - Tags for a new droplet. Tags starting with C(waldur-resource:) are dropped and listed in the
            result's RV(results[].dropped_tags).
        type: list
        elements: str
        default: []
  wait:
    description:
      - Wait for created droplets to become C(active) and for power actions to complete.
      - Created droplets, and droplets being shut down or powered on (V(off), V(active)), are
        waited for together once all creates and power actions are sent, so waiting never holds
        back a write. A graceful shutdown that has not finished within half of O(wait_timeout) is
        followed by a power off, and those are waited for together again. One paged listing reads
        the status of all of them - of the tag they all carry
        (such as C(waldur)) when there is one, else of the account - at a pace that leaves most of
        DigitalOcean's remaining rate to writes; a single GET when only one droplet is waited for, or
        when the listing takes more pages than there are droplets.
      - A resize always waits for the power-off and the resize itself, which must finish before the
        droplet can be powered on again.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds one item may spend waiting for DigitalOcean (create, power actions, resize).
    type: int
    default: 300
  duplicate_window:
    description:
      - Seconds within which droplets carrying the same resource tag, name and size count as copies
        made by overlapping passes (see the description). Set it to the longest a pass runs (the order
        pass uses its deadline).
    type: float
    default: 900
  return_facts:
    description:
      - Whether each result carries the droplet's facts (RV(results[].droplet)).
      - The membership pass turns it off. RV(results[].backend_metadata) holds what Waldur keeps,
        and at 10,000 items the facts would be most of what Ansible takes in and templates again.
    type: bool
    default: true
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.digitalocean
  - waldur.site_agent.batch
  - waldur.site_agent.packed
  - waldur.site_agent.attributes.backend
"""

EXAMPLES = r"""
- name: Create a droplet for a Waldur resource
  waldur.site_agent.do_droplet:
    token: "{{ digitalocean_token }}"
    droplets:
      - resource_uuid: 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b
        order_uuid: 0a1b2c3d4e5f40718293a4b5c6d7e8f9
        name: web-1
        region: ams3
        image: ubuntu-22-04-x64
        size: s-1vcpu-1gb
        ssh_keys:
          - "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@example.com"
        tags: [waldur]
  register: created

- name: Pause (shut down) and terminate droplets Waldur knows
  waldur.site_agent.do_droplet:
    token: "{{ digitalocean_token }}"
    droplets:
      - resource_uuid: 5f0f2b4c-9a8e-4d3f-8a1b-2c3d4e5f6a7b
        backend_id: "3164444"
        state: "off"
      - resource_uuid: 7a6b5c4d3e2f41a09b8c7d6e5f4a3b2c
        backend_id: "3164450"
        state: absent

- name: Power states for thousands of resources, the lists handed over packed (as the membership pass does)
  waldur.site_agent.do_droplet:
    token: "{{ digitalocean_token }}"
    droplets_packed: "{{ waldur_resources.resources_packed | waldur.site_agent.droplet_membership_items }}"
    return_facts: false
    packed: true
  register: power_states

- name: Resize a droplet to another size slug
  waldur.site_agent.do_droplet:
    token: "{{ digitalocean_token }}"
    droplets:
      - resource_uuid: 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b
        backend_id: "3164444"
        size: s-2vcpu-4gb
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
    - before: {backend_id: "418000001", power: active}
      after: {backend_id: "418000001", power: "off"}
      before_header: vm-1 (resource 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b)
      after_header: vm-1 (resource 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b)
results_packed:
  description: RV(results) packed, as one JSON text of the same results.
  returned: when O(packed) is true
  type: str
  sample: '[{"resource_uuid": "5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b", "action": "none", "changed": false}]'
failures:
  description: The results that failed (as in RV(results)), so that a packed run still names them.
  returned: when O(packed) is true
  type: list
  elements: dict
results:
  description: One result per item of O(droplets), in the same order.
  returned: unless O(packed) is true
  type: list
  elements: dict
  contains:
    resource_uuid:
      description: The item's resource UUID as 32 lower-case hex digits.
      type: str
      sample: 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b
    order_uuid:
      description: The item's order UUID as 32 lower-case hex digits, or null.
      type: str
      sample: 0a1b2c3d4e5f40718293a4b5c6d7e8f9
    backend_id:
      description: Id of the droplet the item is about, as a string; null when there is none.
      type: str
      sample: "3164444"
    changed:
      description: Whether the item changed anything on DigitalOcean (or would, in check mode).
      type: bool
    failed:
      description: Whether the item failed.
      type: bool
    retry:
      description: >-
        Set (with C(failed)) when a later run should retry the item rather than its order be erred:
        a transient failure, or a failure after the droplet exists.
      type: bool
      returned: when the item failed and may be retried
    held:
      description: >-
        Set (with C(failed) and C(retry)) when the item was kept back for the operator: nothing was
        deleted or adopted because the evidence that a droplet is the resource's is missing (several
        droplets carry its tag and are not provably copies, the droplet Waldur records carries another
        resource's tag, or another item of the batch acts on the same droplet). The order stays alive;
        the order pass counts it as unfinished, so the pass exits non-zero.
      type: bool
      returned: when the item was held
    cloud:
      description: What exists on DigitalOcean for the item, for messages (C(droplet <id> <name> (<status>))); null when nothing.
      type: str
      sample: droplet 3164444 web-1 (active)
    msg:
      description: What happened, or why the item failed.
      type: str
      sample: created droplet 3164444 web-1 in ams3 (s-1vcpu-1gb, ubuntu-22-04-x64)
    action:
      description: What was done.
      type: str
      choices: [created, adopted, deleted, absent, resized, powered_off, powered_on, unknown, none]
    droplet:
      description: Facts of the droplet after the action; null when there is no droplet.
      returned: when O(return_facts) is true
      type: dict
      contains:
        id:
          description: Droplet id.
          type: int
        name:
          description: Droplet name.
          type: str
        status:
          description: C(new), C(active), C(off) or C(archive).
          type: str
        region:
          description: Region slug.
          type: str
        size_slug:
          description: Size slug.
          type: str
        image:
          description: Image slug (or name, or id).
          type: str
        image_id:
          description: Image id.
          type: int
        vcpus:
          description: Virtual CPUs.
          type: int
        memory:
          description: Memory in MiB.
          type: int
        disk:
          description: Disk in GB.
          type: int
        networks:
          description: Addresses, C(public_ipv4), C(private_ipv4) and C(public_ipv6) (null when none).
          type: dict
        tags:
          description: The droplet's tags.
          type: list
          elements: str
        created_at:
          description: Creation time (ISO 8601).
          type: str
    backend_metadata:
      description:
        - What Waldur stores as the resource's backend metadata, C({backend_type, droplet}) with the
          droplet's id, name, status, region, size_slug, image, created_at and networks.
        - Null when there is no droplet.
      type: dict
    dropped_tags:
      description: Ordered tags dropped because their C(waldur-resource:) or C(waldur-orphan-since:) prefix is reserved.
      type: list
      elements: str
changed:
  description: Whether any item changed something.
  returned: always
  type: bool
failed_count:
  description: How many items failed.
  returned: always
  type: int
  sample: 0
api_calls:
  description: HTTP requests sent to DigitalOcean, retries included, as C(reads) (GETs), C(writes) (the
    other methods) and C(retries) (requests repeated).
  returned: always
  type: dict
  sample: {reads: 9, writes: 3, retries: 0}
api_retries:
  description: Requests repeated after a rate-limit answer, a server error or a lost connection.
  returned: always
  type: int
  sample: 0
msg:
  description: Summary of the batch.
  returned: always
  type: str
  sample: "3 droplets: 2 created, 1 none; 0 failed"
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import (
    BatchRunner,
    api_call_counts,
    batch_argument_spec,
    machine_diff,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import list_option
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import client_from_module, digitalocean_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets import (
    DropletWorker,
    base_result,
    prepare_items,
    summarize,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError


DROPLET_OPTIONS = dict(
    resource_uuid=dict(type="str", required=True),
    order_uuid=dict(type="str"),
    name=dict(type="str"),
    state=dict(type="str", default="present", choices=["present", "absent", "off", "active"]),
    backend_id=dict(type="str"),
    region=dict(type="str"),
    image=dict(type="str"),
    size=dict(type="str"),
    ssh_keys=dict(type="list", elements="str", default=[], no_log=False),
    user_data=dict(type="str"),
    tags=dict(type="list", elements="str", default=[]),
    running=dict(type="bool"),
    not_before=dict(type="str"),
    approved_now=dict(type="bool", default=False),
)


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = digitalocean_argument_spec()
    argument_spec.update(
        droplets=dict(type="list", elements="dict", options=DROPLET_OPTIONS),
        droplets_packed=dict(type="raw"),
        packed=dict(type="bool", default=False),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=300),
        duplicate_window=dict(type="float", default=900),
        return_facts=dict(type="bool", default=True),
    )
    argument_spec.update(batch_argument_spec())
    module = build(argument_spec=argument_spec, supports_check_mode=True,
                   required_one_of=[("droplets", "droplets_packed")],
                   mutually_exclusive=[("droplets", "droplets_packed")])
    for option in ("wait_timeout", "duplicate_window"):
        if module.params[option] <= 0:
            module.fail_json(msg="%s must be a positive number, got %s" % (option, module.params[option]))
    BatchRunner(module, None)  # the batch options, before any call
    items = prepare_items(module, list_option(module, "droplets", DROPLET_OPTIONS))
    client = client_from_module(module, max_connections=module.params["max_workers"])
    batch_deadline = time.monotonic() + module.params["deadline"]
    # no call (a 429's Retry-After included) waits past the module's deadline: that item ends retry
    client.deadline = batch_deadline
    worker = DropletWorker(client, check_mode=module.check_mode, wait=module.params["wait"],
                           wait_timeout=module.params["wait_timeout"],
                           duplicate_window=module.params["duplicate_window"])

    def on_error(item, exc):  # a defect in the worker still yields the item's result
        result = base_result(item)
        result.update(failed=True, msg="%s: %s" % (type(exc).__name__, exc))
        return result

    def api_calls():
        return api_call_counts(client.stats.reads, client.stats.writes, client.stats.retries)

    runner = BatchRunner(module, worker, echo=(), on_error=on_error, api_calls=api_calls)
    worker.refuse_clashes(items)
    try:
        worker.prefetch(items)
    except DigitalOceanError:
        worker.known, worker.by_tag = {}, {}  # each item reads itself (and a 401 fails them all)
    # items cut off by the deadline come back without their keys: base_result gives them
    results = worker.finish_waits(items, runner.run(items), batch_deadline)
    results = [dict(base_result(item), **result) for item, result in zip(items, results)]
    if module._diff:
        for item, result in zip(items, results):
            diff = machine_diff(result, ("active", "off"), size=item.get("size")) if result.get("changed") else None
            name = (result.get("droplet") or {}).get("name") or item.get("name")
            if diff and name:  # membership items carry no name: the droplet's names the machine
                diff["before_header"] = diff["after_header"] = "%s (resource %s)" % (name, result.get("resource_uuid"))
            if diff:
                result["diff"] = diff
    if not module.params["return_facts"]:
        for result in results:
            result.pop("droplet", None)
    summary, failed = summarize(results)
    if client.auth_error is not None:
        # One line for the whole task (every item failed the same way): no per-item results
        # in the failure, which the default callback would print whole.
        runner.fail(str(client.auth_error), changed=any(result["changed"] for result in results),
                    failed_count=failed, api_retries=client.stats.retries)

    def first_failure(failures, results):
        return "%s; first failure (resource %s): %s" % (summary, failures[0]["resource_uuid"], failures[0]["msg"])

    runner.finish(results, fail_msg=first_failure, failed_count=failed, api_retries=client.stats.retries,
                  msg=summary, packed=module.params["packed"])


if __name__ == "__main__":
    main()
