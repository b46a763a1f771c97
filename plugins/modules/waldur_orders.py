#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_orders
short_description: Claim and settle the Waldur marketplace orders of an offering
version_added: 1.0.0
description:
  - The first and last task of an order pass (claim, act, settle).
  - With O(state=claimed), lists the offering's orders in C(pending-provider) and C(executing)
    (all pages), approves the pending ones (C(approve_by_provider); a C(409) answer is re-read
    and the order is carried on when it is executing), reads every approved order again (Waldur's
    processor runs on approval and may err it at once, for example a Create without C(name) or an
    Update on Waldur 7.0.7) and returns every actionable order joined with its provider resource.
    The approved orders are read again from one paged listing of the offering's C(executing)
    orders, and the resources from one of its C(Creating), C(Updating) and C(Terminating) ones,
    when two or more are wanted; a listing stops once it has them all and never takes more pages
    than there are items. What a listing does not hold (an order Waldur erred, a resource it gave up
    on), or everything when a listing fails (with a warning), is read on its own.
    An order that is no longer C(executing), and a Create, Restore or Update whose resource Waldur
    already marked C(Erred) or C(Terminated), is returned in RV(skipped_orders) instead, and nothing is
    built for it. Update orders get C(target_limits) (the order's limits, else the plan's quotas).
    When some order is a Create or Restore, the service provider's SSH keys (all pages) are
    returned too.
  - Waldur's processor runs after the approval in a background worker (a Celery task), possibly
    seconds later. Nothing is returned for building before the worker is seen to have finished (see
    O(order_processing_settle_seconds) and O(order_processing_wait_seconds)); an order it erred
    is returned in RV(skipped_orders) with Waldur's message.
  - With O(state=listed), only reads - the offering's C(pending-provider) and C(executing) orders (O(order_uuids)
    only, when given), each Create and Restore joined with its provider resource (from one paged listing of the
    offering's in-flight resources where that pays). The order pass checks what they name against the cloud's
    catalogue before the claim approves any.
  - With O(state=claimed), an order of O(reject) (a verdict of the catalogue check, such as
    C(waldur.site_agent.do_catalogue_info)'s) is turned down before anything is approved - rejected with
    C(reject_by_provider) and the reason as C(provider_rejection_comment), which the customer sees; one already
    C(executing) (approved by an earlier pass) is set C(erred) with the reason instead. They are returned in
    RV(rejected_orders), never in RV(orders). With O(judged_orders), a C(pending-provider) order not among them
    (placed after the check) is left pending for the next pass and returned in RV(skipped_orders).
  - With O(state=claimed), a C(pending-provider) order of O(hold) (past the cloud's quota, such as
    C(waldur.site_agent.do_catalogue_info)'s RV(waldur.site_agent.do_catalogue_info#module:held)) is neither
    approved nor returned in RV(orders); it stays C(pending-provider) for a later pass and is returned in
    RV(skipped_orders) with C(outcome) C(held) and the reason. An order already C(executing) is never held.
  - With O(state=settled), takes the per-order outcomes of the backend task (a backend module's
    C(results) can be passed as they are; see O(outcomes) for the contract) and, per order,
    reads the order's state again (from one paged listing of the offering's C(executing) orders
    when two or more are settled, else on its own; an order not in the listing is read on its own)
    and ends it in exactly one of C(done), C(erred), C(retry), C(refused), C(failed), C(skipped) or
    C(diverged) (RV(results[].outcome)).
  - C(done) records the backend id and backend metadata on the resource when they differ and sets
    the order C(done) (only from C(executing); an order that moved meanwhile makes Waldur refuse,
    and is read again).
  - C(erred) sets the order C(erred) with the outcome's message (only when it is not already
    terminal), after recording the outcome's backend id on the resource (best effort), so that the
    C(Erred) resource still names the machine and a Terminate deletes it.
  - C(retry) leaves the order as it is for the next pass, recording the backend id when the
    outcome carries one. After the machine exists nothing errs its order (a failed read, a
    deadline, a transient failure, Waldur refusing C(set_backend_id), Waldur unreachable while
    settling). Only an order retried for longer than O(retry_max_age) since Waldur created it is
    set C(erred), with a message saying what exists in the cloud.
  - C(refused) means Waldur answered C(set_state_done) or C(set_state_erred) with an error other
    than a conflict or a transient one; the order is left as it is, and RV(results[].failed) is set.
    C(failed) is any other order that could not be settled (RV(results[].failed) set).
    C(skipped) is an order that was not in a state to settle (already terminal, not executing); a
    machine made for an order Waldur erred meanwhile gets its backend id recorded on the resource.
  - C(diverged) is an order Waldur erred after the backend acted on it (the outcome says C(changed),
    or a machine exists for a Create or Restore), found erred when settling or turned erred once set
    C(done) (the orders set done are read again, from one listing of the offering's orders erred since
    settling started when two or more were, else on their own). Waldur and the cloud disagree; the
    result says what the backend did and what Waldur keeps for the resource (state, limits, backend
    id), and RV(results[].failed) is set.
  - The current backend ids and metadata are compared with one paged listing of the offering's
    in-flight (C(Creating), C(Updating), C(Terminating)) resources when two or more outcomes record
    something; other resources are read one by one.
  - A pass of N Create orders thus costs Waldur about 4 calls per order (approve, C(set_backend_id),
    C(set_backend_metadata), C(set_state_done)) plus a few listings.
  - Orders are worked on concurrently; one order failing never stops the others. With
    O(fail_on_item_error) the task fails when any order could not be claimed (RV(errors)) or
    settled (RV(results[].failed)).
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.waldur
  - waldur.site_agent.batch
  - waldur.site_agent.packed
attributes:
  check_mode:
    support: full
    details:
      - With O(state=claimed), lists and reads but approves nothing (pending orders stay C(pending-provider))
        and rejects or errs nothing (RV(rejected_orders) says what it would).
      - With O(state=settled), writes nothing and reports in C(results[].actions) what it would write.
  diff_mode:
    support: none
options:
  state:
    description:
      - C(listed) lists and returns the actionable orders, writing nothing.
      - C(claimed) lists, approves and returns the actionable orders.
      - C(settled) records the outcomes of the backend task in Waldur.
    type: str
    choices: [listed, claimed, settled]
    default: claimed
  offering_uuid:
    description:
      - UUID of the Waldur offering whose orders are processed.
    type: str
    required: true
  order_uuids:
    description:
      - With O(state=claimed), only these orders (for example the order an event named) instead of
        listing the offering's orders. Orders of another offering or not in an actionable state are
        returned in RV(skipped_orders).
    type: list
    elements: str
  with_pending:
    description:
      - With O(order_uuids), also every other C(pending-provider) and C(executing) order of the offering (one
        listing). The event rulebook sets it so that the run an order's event starts also takes the orders of the
        same burst placed while it started, instead of leaving them to the next run; with O(state=claimed) and
        O(judged_orders), an order placed after the listing still waits for the next pass.
    type: bool
    default: false
  reject:
    description:
      - With O(state=claimed), orders to turn down before any is approved, each C(order_uuid) and C(msg) (the
        reason; other keys are ignored, so the verdicts of a catalogue check can be passed as they are).
    type: list
    elements: dict
  hold:
    description:
      - With O(state=claimed), C(pending-provider) orders to leave pending this pass, each C(order_uuid) and C(msg)
        (the reason, such as the quota it would exceed; other keys are ignored, so the RV(waldur.site_agent.do_catalogue_info#module:held)
        of a catalogue check can be passed as they are). An order of O(reject) is rejected instead; one already
        C(executing) is claimed as any other.
    type: list
    elements: dict
  judged_orders:
    description:
      - With O(state=claimed), the orders the catalogue check judged - their UUIDs, or the orders of O(state=listed)
        (a list, or packed as one JSON text); a C(pending-provider) order not among them is not approved this pass.
    type: raw
  outcomes:
    description:
      - Required with O(state=settled). One entry per order, the contract between the backend
        modules (C(do_droplet), C(azure_vm_chain)) and settling; other keys are ignored.
      - C(order_uuid) (required) is the order; C(resource_uuid) the provider resource (default the
        order's); C(resource_name) (or C(name)) the resource's name, for the pass output.
      - C(failed) (bool) says the backend did not finish the order; C(msg) is the message (the
        order's C(error_message) when it is erred) and C(exception) an optional traceback,
        shortened into C(error_traceback).
      - C(retry) (bool, with C(failed)) marks a failure a later pass should retry. A backend sets it
        for a transient failure that outlasted its own retries, for a deadline, and for B(every)
        failure after the machine exists (a failed read, a wait that timed out). Once the machine
        exists its order is never erred by the backend, only retried. The next pass finds the
        machine by its owner tag and settles the order.
      - C(backend_id) is the id of the machine that exists for the order, also on a failure (then
        it is recorded on the resource, best effort, so Waldur tracks the machine). A backend must
        give it whenever a machine exists.
      - C(backend_metadata) (dict) is the metadata to record (an empty one is not written).
      - C(changed) (bool) says the backend changed something in the cloud for the order (a backend
        module's result says so); an order Waldur erred meanwhile then ends C(diverged).
      - C(cloud) (str) says what exists in the cloud for the order (for example
        C(droplet 418000001 web-1 (active))); it is quoted in the message of an order erred after
        O(retry_max_age). Without it the message names C(backend_id).
    type: list
    elements: dict
  outcomes_packed:
    description:
      - With O(state=settled), more outcomes, packed as one JSON text (see the description). The
        outcomes of O(outcomes) and of this one are settled together. The order pass gives the
        backend module's RV(waldur.site_agent.do_droplet#module:results_packed) here and the orders it set aside in
        O(outcomes).
    type: raw
  order_processing_settle_seconds:
    description:
      - With O(state=claimed), Waldur processes an approval later, in a background worker, which
        may err the order after C(approve_by_provider) answered. An order is returned only on
        positive evidence that the worker has finished with it and the order is still
        C(executing) - the processor's trace (a Create's C(resource_uuid), the plugin object, is
        set; an Update's resource is C(Updating); a Terminate's is C(Terminating)).
      - For an order type the processor leaves no trace of (Restore), this many seconds after the
        approve call instead (waited once for the whole batch, then the orders are read again in
        one listing).
      - Time is never taken for the trace of a Create, Update or Terminate, however long ago the
        order was approved. A Restore approved by an earlier run (which waited this long after its
        approve call) is processed when, read again, it is still C(executing).
    type: float
    default: 1.0
  order_processing_stuck_seconds:
    description:
      - With O(state=claimed), how long an order may wait for the trace of Waldur's worker (since
        its approval, C(provider_reviewed_at)) before it is returned in RV(errors) instead of
        RV(skipped_orders), which fails the order pass (Waldur's background worker is probably not
        running). The order is left C(executing) either way; nothing is built for it.
    type: float
    default: 3600
  order_processing_wait_seconds:
    description:
      - With O(state=claimed), the most the claim waits for Waldur's worker (looking again every
        half second, one listing each time). An order still without the processor's trace then is
        returned in RV(skipped_orders), left C(executing) for the next pass; nothing is built for it.
      - An order that Waldur errs meanwhile is returned in RV(skipped_orders) as
        C(order erred by Waldur after approval) with Waldur's C(error_message).
    type: float
    default: 30.0
  retry_max_age:
    description:
      - With O(state=settled), seconds after the order's creation in Waldur (its C(created)) past
        which an order still given C(retry) is set C(erred) instead of being left for the next pass.
        The message says why it was retried and what exists in the cloud.
    type: float
    default: 86400
notes:
  - Settling is idempotent. A second run with the same outcomes finds the orders terminal and
    writes nothing.
  - A failure to reach Waldur never marks an order erred. The order stays C(executing) (outcome
    C(retry)) and the next pass settles it.
"""

EXAMPLES = r"""
- name: Claim the offering's orders
  waldur.site_agent.waldur_orders:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: d0000000000000000000000000000001
    state: claimed
  register: claim

- name: Act on the droplets
  waldur.site_agent.do_droplet:
    droplets: "{{ claim.orders | waldur.site_agent.droplet_items(backend_settings, claim.ssh_keys) }}"
  register: act

- name: Settle the orders with the backend results
  waldur.site_agent.waldur_orders:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: d0000000000000000000000000000001
    state: settled
    outcomes: "{{ act.results }}"

- name: Claim, act and settle with the lists handed over packed (as the order pass does)
  waldur.site_agent.waldur_orders:
    offering_uuid: d0000000000000000000000000000001
    state: claimed
    packed: true
  register: claim

- name: One planning of the claimed orders (its backend items are packed too)
  ansible.builtin.set_fact:
    plan: "{{ claim.orders_packed | waldur.site_agent.droplet_plan(backend_settings, claim.ssh_keys) }}"

- name: The droplets
  waldur.site_agent.do_droplet:
    droplets_packed: "{{ plan.backend_items }}"
    packed: true
  register: act

- name: Settle the backend's results and the orders set aside without a backend call
  waldur.site_agent.waldur_orders:
    offering_uuid: d0000000000000000000000000000001
    state: settled
    outcomes_packed: "{{ act.results_packed }}"
    outcomes: "{{ plan.set_aside }}"
    packed: true

- name: Settle one order by hand
  waldur.site_agent.waldur_orders:
    offering_uuid: d0000000000000000000000000000001
    state: settled
    outcomes:
      - order_uuid: 3a7e2f1c-0d4b-4c38-9b5e-2f0e8d1c6a11
        failed: true
        msg: "Region ams9 is not available"
"""

RETURN = r"""
orders_packed:
  description: RV(orders) packed, as one JSON text of the same orders.
  returned: when O(state=claimed) or O(state=listed), and O(packed) is true
  type: str
  sample: '[{"uuid": "5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b", "type": "Create", "state": "executing"}]'
count:
  description: How many orders were claimed or listed (the length of RV(orders)).
  returned: when O(state=claimed) or O(state=listed)
  type: int
  sample: 1
results_packed:
  description: RV(results) packed, as one JSON text of the same results.
  returned: when O(state=settled) and O(packed) is true
  type: str
  sample: '[{"order_uuid": "5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b", "outcome": "done", "changed": true}]'
failures:
  description: The results that could not be settled (outcome C(refused) or C(failed)) or diverged, as in RV(results).
  returned: when O(state=settled) and O(packed) is true
  type: list
  elements: dict
orders:
  description: Claimed (or listed) orders joined with their provider resources, in listing order.
  returned: when O(state=claimed) or O(state=listed), and O(packed) is false
  type: list
  elements: dict
  contains:
    uuid:
      description: Order UUID (32 hex).
      type: str
    type:
      description: C(Create), C(Update), C(Terminate) or C(Restore).
      type: str
    state:
      description: C(executing) after approval; C(pending-provider) in check mode.
      type: str
    approved_now:
      description:
        - With O(state=claimed), whether this run approved the order (no earlier pass can have acted on
          it; the backend modules take it as O(waldur.site_agent.do_droplet#module:droplets[].approved_now)).
      type: bool
    offering_uuid:
      description: Offering UUID.
      type: str
    marketplace_resource_uuid:
      description: UUID of the marketplace (provider) resource.
      type: str
    resource_name:
      description: Resource name as the order gives it.
      type: str
    project_uuid:
      description: Project UUID.
      type: str
    project_slug:
      description: Project slug.
      type: str
    plan_uuid:
      description: Plan UUID, or null.
      type: str
    attributes:
      description: The order's attributes.
      type: dict
    limits:
      description: The order's limits.
      type: dict
    created:
      description: Creation time (ISO 8601).
      type: str
    modified:
      description: Last modification time (ISO 8601).
      type: str
    target_limits:
      description: Update orders only. The order's limits, else the quotas of its plan.
      type: dict
      returned: for Update orders
    resource:
      description: >-
        The provider resource: C(uuid), C(name), C(slug), C(state), C(backend_id), C(limits),
        C(attributes), C(options), C(paused), C(downscaled), C(backend_metadata), C(project_uuid),
        C(project_slug), C(customer_uuid), C(customer_slug), C(offering_uuid), C(plan_uuid),
        C(offering_plugin_options).
      type: dict
  sample:
    - uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
      type: Create
      state: executing
      offering_uuid: d0000000000000000000000000000001
      marketplace_resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      resource_name: web-1
      project_uuid: c0000000000000000000000000000001
      project_slug: consumer-1
      plan_uuid: d0000000000000000000000000000002
      attributes: {name: web-1, region: ams3}
      limits: {cpu: 2, ram: 2048, disk: 50}
      created: "2026-11-29T12:00:00Z"
      modified: "2026-11-29T12:00:05Z"
      resource:
        uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
        name: web-1
        state: Creating
        backend_id: ""
ssh_keys:
  description: >-
    The service provider's SSH keys (all pages) when some claimed order is a Create or Restore;
    empty otherwise. C(fingerprint) is Waldur's MD5 fingerprint, computed from the key when Waldur
    gives none.
  returned: when O(state=claimed)
  type: list
  elements: dict
  sample:
    - uuid: e0000000000000000000000000000001
      name: alice
      public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG... alice@example.com
      fingerprint: "9d:3c:1a:8e:53:5b:0d:2f:61:4f:aa:01:7e:22:c9:10"
processing_wait:
  description: >-
    Seconds the claim waited for Waldur's worker to finish processing approvals
    (O(order_processing_wait_seconds)); 0 when every order showed the processor's trace at once.
  returned: when O(state=claimed)
  type: float
  sample: 0.5
approved:
  description: UUIDs of the orders this run approved.
  returned: when O(state=claimed)
  type: list
  elements: str
skipped_orders:
  description: >-
    Orders not claimed because they are not actionable (another state or offering, not found, no
    longer executing after approval, or a resource Waldur marked C(Erred) or C(Terminated)), or left
    pending (placed after the check, or held by O(hold)), as C(uuid), C(state), C(type),
    C(resource_uuid), C(resource_name) and C(msg) (the reason, with Waldur's error message when it
    erred the order); an order of O(hold) also has C(outcome) C(held).
  returned: when O(state=claimed) or O(state=listed)
  type: list
  elements: dict
  sample:
    - uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
      state: erred
      type: Create
      resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      resource_name: ""
      msg: "order erred by Waldur after approval: 'name'"
rejected_orders:
  description: >-
    The orders of O(reject) turned down (in check mode, that would be), as C(uuid), C(state) (after this run),
    C(type), C(resource_uuid), C(resource_name), C(outcome) (C(rejected) for a pending order, C(erred) for one
    already executing) and C(msg) (the reason).
  returned: when O(state=claimed)
  type: list
  elements: dict
  sample:
    - uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
      state: rejected
      type: Create
      resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      resource_name: web-1
      outcome: rejected
      msg: "DigitalOcean would refuse this droplet: size 'huge-999' is not a DigitalOcean droplet size (sizes: ...)"
errors:
  description: >-
    Orders that could not be claimed this pass (for example their resource or the SSH keys could
    not be read), as C(uuid), C(msg). They are left as they are for the next pass.
  returned: when O(state=claimed) or O(state=listed)
  type: list
  elements: dict
results:
  description: One result per outcome, in input order (O(state=settled)); the outcomes of O(outcomes) first, then those of O(outcomes_packed).
  returned: when O(state=settled) and O(packed) is false
  type: list
  elements: dict
  contains:
    order_uuid:
      description: Order UUID (32 hex).
      type: str
    resource_uuid:
      description: The provider resource's UUID (32 hex), when known.
      type: str
    resource_name:
      description: The resource's name, when known.
      type: str
    outcome:
      description: How the order ended in this run.
      type: str
      choices: [done, erred, retry, refused, failed, skipped, diverged]
    state:
      description: The order's state after this run (its current state in check mode).
      type: str
    changed:
      description: Whether something was (or in check mode would be) written for this order.
      type: bool
    failed:
      description: >-
        Whether the order could not be settled (outcome C(refused) or C(failed)), left for the next
        pass, or Waldur and the cloud disagree about it (outcome C(diverged)).
      type: bool
    retry:
      description: Whether the order is left for the next pass (outcome C(retry)).
      type: bool
    actions:
      description: >-
        Calls made (or that would be made) for this order, among C(set_backend_id),
        C(set_backend_metadata), C(set_state_done), C(set_state_erred).
      type: list
      elements: str
    msg:
      description: What happened, or why not.
      type: str
  sample:
    - order_uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
      resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      resource_name: web-1
      outcome: done
      state: done
      changed: true
      failed: false
      actions: [set_backend_id, set_backend_metadata, set_state_done]
      msg: "set done; backend id 412345678 recorded"
done:
  description: Orders set C(done) (or that would be, in check mode).
  returned: when O(state=settled)
  type: int
erred:
  description: Orders set C(erred) (or that would be, in check mode).
  returned: when O(state=settled)
  type: int
retry:
  description: Orders left for the next pass (outcome C(retry)).
  returned: when O(state=settled)
  type: int
refused:
  description: Orders whose state Waldur refused to record (outcome C(refused)).
  returned: when O(state=settled)
  type: int
diverged:
  description: Orders Waldur erred after the backend acted on them (outcome C(diverged)).
  returned: when O(state=settled)
  type: int
counts:
  description:
    - How many orders ended in each outcome.
    - C(failed) and C(skipped) (orders left alone because they were not in a state to settle) are here only,
      not top-level keys, because both are Ansible's own result keys.
  returned: when O(state=settled)
  type: dict
  sample: {done: 17, erred: 1, retry: 1, refused: 0, failed: 1, skipped: 0, diverged: 0}
unsettled:
  description: Orders refused plus orders failed (RV(results[].failed)); the next pass retries them.
  returned: when O(state=settled)
  type: int
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
  sample: {reads: 12, writes: 3, retries: 0}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.orders import orders_argument_spec, run_orders


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    run_orders(WaldurModule(build=build, argument_spec=orders_argument_spec()))


if __name__ == "__main__":
    main()
