#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_orders
short_description: Claim and settle the Waldur marketplace orders of an offering
version_added: 0.1.0
description:
  - The first and last task of an order pass (claim, act, settle).
  - With O(state=claimed), lists the offering's orders in C(pending-provider) and C(executing)
    (all pages), approves the pending ones (C(approve_by_provider); a C(409) answer is re-read
    and the order is carried on when it is executing), reads every approved order again (Waldur's
    processor runs on approval and may err it at once, for example a Create without C(name) or an
    Update on Waldur 7.0.7) and returns every actionable order joined with its provider resource.
    An order that is no longer C(executing), and a Create, Restore or Update whose resource Waldur
    already marked C(Erred) or C(Terminated), is returned in RV(skipped_orders) instead, and nothing is
    built for it. Update orders get C(target_limits) (the order's limits, else the plan's quotas).
    When some order is a Create or Restore, the service provider's SSH keys (all pages) are
    returned too.
  - With O(state=settled), takes the per-order outcomes of the backend task (a backend module's
    C(results) can be passed as they are; see O(outcomes) for the contract) and, per order,
    re-reads the order's state and ends it in exactly one of C(done), C(erred), C(retry),
    C(refused), C(failed) or C(skipped) (RV(results[].outcome)).
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
  - The current backend ids and metadata are compared with one paged listing of the offering's
    in-flight (C(Creating), C(Updating), C(Terminating)) resources when two or more outcomes record
    something; other resources are read one by one.
  - Orders are worked on concurrently; one order failing never stops the others. With
    O(fail_on_item_error) the task fails when any order could not be claimed (RV(errors)) or
    settled (RV(results[].failed)).
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.waldur
  - waldur.site_agent.batch
attributes:
  check_mode:
    description: Can run in check mode and return the changes it would make, without making them.
    support: full
    details:
      - With O(state=claimed), lists and reads but approves nothing (pending orders stay C(pending-provider)).
      - With O(state=settled), writes nothing and reports in C(results[].actions) what it would write.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) with C(--diff).
    support: none
options:
  state:
    description:
      - C(claimed) lists, approves and returns the actionable orders.
      - C(settled) records the outcomes of the backend task in Waldur.
    type: str
    choices: [claimed, settled]
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
      - C(cloud) (str) says what exists in the cloud for the order (for example
        C(droplet 418000001 web-1 (active))); it is quoted in the message of an order erred after
        O(retry_max_age). Without it the message names C(backend_id).
    type: list
    elements: dict
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
    items: "{{ claim.orders | waldur.site_agent.droplet_items(backend_settings, claim.ssh_keys) }}"
  register: act

- name: Settle the orders with the backend results
  waldur.site_agent.waldur_orders:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: d0000000000000000000000000000001
    state: settled
    outcomes: "{{ act.results }}"

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
orders:
  description: Claimed orders joined with their provider resources, in listing order (O(state=claimed)).
  returned: when O(state=claimed)
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
approved:
  description: UUIDs of the orders this run approved.
  returned: when O(state=claimed)
  type: list
  elements: str
skipped_orders:
  description: >-
    Orders not claimed because they are not actionable (another state or offering, not found, no
    longer executing after approval, or a resource Waldur marked C(Erred) or C(Terminated)), as
    C(uuid), C(state), C(type), C(resource_uuid), C(resource_name) and C(msg) (the reason, with
    Waldur's error message when it erred the order).
  returned: when O(state=claimed)
  type: list
  elements: dict
  sample:
    - uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
      state: erred
      type: Create
      resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      resource_name: ""
      msg: "order is erred after approval, not executing (Waldur: 'name')"
errors:
  description: >-
    Orders that could not be claimed this pass (for example their resource or the SSH keys could
    not be read), as C(uuid), C(msg). They are left as they are for the next pass.
  returned: when O(state=claimed)
  type: list
  elements: dict
results:
  description: One result per outcome, in input order (O(state=settled)).
  returned: when O(state=settled)
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
      choices: [done, erred, retry, refused, failed, skipped]
    state:
      description: The order's state after this run (its current state in check mode).
      type: str
    changed:
      description: Whether something was (or in check mode would be) written for this order.
      type: bool
    failed:
      description: Whether the order could not be settled (outcome C(refused) or C(failed)); it is left for the next pass.
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
counts:
  description:
    - How many orders ended in each outcome.
    - C(failed) and C(skipped) (orders left alone because they were not in a state to settle) are here only,
      not top-level keys, because both are Ansible's own result keys.
  returned: when O(state=settled)
  type: dict
  sample: {done: 17, erred: 1, retry: 1, refused: 0, failed: 1, skipped: 0}
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

import datetime
import threading

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import (
    BatchRunner,
    ItemError,
    batch_argument_spec,
    count_results,
    run_batch,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.ssh_keys import ssh_key_fingerprint
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import hex_uuid, normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError, error_message
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import (
    ACTIONABLE_ORDER_STATES,
    TERMINAL_ORDER_STATES,
    normalize_order,
    normalize_resource,
    order_path,
    provider_offering_path,
    provider_resource_path,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule

CREATE_TYPES = ("Create", "Restore")
# Orders that build or change a machine: never carried out for a resource Waldur gave up on.
BUILD_TYPES = ("Create", "Restore", "Update")
DEAD_RESOURCE_STATES = ("Erred", "Terminated")
TRACEBACK_LIMIT = 2000
MESSAGE_LIMIT = 500
# What settling needs of an order; one read of these per order, right before its writes.
SETTLE_ORDER_FIELDS = ["uuid", "state", "offering_uuid", "marketplace_resource_uuid", "resource_name", "created"]
OUTCOMES = ("done", "erred", "retry", "refused", "failed", "skipped")
# Provider resource states while an order on them is executing (Create, Update, Terminate).
IN_FLIGHT_RESOURCE_STATES = ["Creating", "Updating", "Terminating"]


# ---------------------------------------------------------------------------- claim

class Claim:
    def __init__(self, module, client, offering_uuid):
        self.module = module
        self.client = client
        self.offering_uuid = offering_uuid
        self.check_mode = module.check_mode
        self.approved = []
        self._lock = threading.Lock()

    def candidates(self, order_uuids, max_workers, deadline):
        """Actionable raw orders of the offering, plus the ones set aside as skipped/errors."""
        skipped, errors = [], []
        if order_uuids:
            def read(uuid):
                try:
                    return {"order": self.client.get(order_path(uuid))}
                except WaldurApiError as exc:
                    if exc.not_found:
                        return {"skip": {"uuid": uuid, "state": None, "type": None, "resource_uuid": None,
                                         "resource_name": "", "msg": "order not found"}}
                    raise
            fetched = run_batch(order_uuids, read, max_workers=max_workers, deadline_seconds=deadline,
                                on_error=lambda uuid, exc: {"failed": True, "msg": error_message(exc)})
            raws = []
            for uuid, result in zip(order_uuids, fetched):
                if result.get("failed"):
                    errors.append({"uuid": uuid, "msg": result["msg"]})
                elif "skip" in result:
                    skipped.append(result["skip"])
                else:
                    raws.append(result["order"])
        else:
            raws = self.client.list("marketplace-orders/", params={
                "offering_uuid": self.offering_uuid, "state": list(ACTIONABLE_ORDER_STATES)})
        orders = []
        seen = set()
        for raw in raws:
            order = normalize_order(raw)
            if order["uuid"] in seen:  # a listing that shifted between pages may repeat an order
                continue
            seen.add(order["uuid"])
            if order["offering_uuid"] and order["offering_uuid"] != self.offering_uuid:
                skipped.append(self._skipped(order, "order belongs to offering %s" % order["offering_uuid"]))
            elif order["state"] not in ACTIONABLE_ORDER_STATES:
                skipped.append(self._skipped(order, "order is %s, not pending-provider or executing"
                                             % order["state"]))
            else:
                orders.append(order)
        return orders, skipped, errors

    def plan_quotas(self, orders):
        """Quotas of the plans of Update orders without limits, one read per plan (best effort)."""
        quotas = {}
        for order in orders:
            plan = order["plan_uuid"]
            if order["type"] != "Update" or order["limits"] or not plan or plan in quotas:
                continue
            try:
                body = self.client.get("marketplace-plans/%s/" % plan) or {}
                quotas[plan] = body.get("quotas") if isinstance(body.get("quotas"), dict) else {}
            except WaldurApiError as exc:
                self.module.warn("could not read the quotas of plan %s: %s" % (plan, exc))
                quotas[plan] = {}
        return quotas

    def ssh_keys(self):
        """The service provider's keys, all pages (offering -> customer -> service provider -> keys)."""
        offering = self.client.get(provider_offering_path(self.offering_uuid),
                                   params={"field": ["customer_uuid"]}) or {}
        customer_uuid = hex_uuid(offering.get("customer_uuid"))
        if not customer_uuid:
            raise ItemError("the offering does not name its customer (customer_uuid)")
        providers = self.client.get("marketplace-service-providers/",
                                    params={"customer_uuid": customer_uuid}) or []
        if not providers:
            raise ItemError("customer %s is not a service provider" % customer_uuid)
        provider_uuid = normalize_uuid(providers[0]["uuid"])
        keys = []
        for raw in self.client.list("marketplace-service-providers/%s/keys/" % provider_uuid):
            public_key = raw.get("public_key") or ""
            keys.append({
                "uuid": hex_uuid(raw.get("uuid")),
                "name": raw.get("name") or "",
                "public_key": public_key,
                "fingerprint": raw.get("fingerprint_md5") or raw.get("fingerprint")
                or ssh_key_fingerprint(public_key),
            })
        return keys

    def claim_one(self, order, quotas):
        if order["state"] == "pending-provider" and not self.check_mode:
            try:
                self.client.post(order_path(order["uuid"], "approve_by_provider"), json={})
                with self._lock:
                    self.approved.append(order["uuid"])
            except WaldurApiError as exc:
                if not exc.conflict:  # 409: approved meanwhile (or cancelled); the re-read tells
                    raise
            # Waldur's processor runs on approval and may err the order at once (a Create without
            # a name, an Update on Waldur 7.0.7): the order is read again before anything is built.
            raw = self.client.get(order_path(order["uuid"])) or {}
            order = dict(order, **{key: value for key, value in normalize_order(raw).items() if value is not None})
            if order["state"] != "executing":
                reason = " (Waldur: %s)" % _one_line(raw["error_message"]) if raw.get("error_message") else ""
                return {"skip": self._skipped(order, "order is %s after approval, not executing%s"
                                              % (order["state"], reason))}
        if not order["marketplace_resource_uuid"]:
            raise ItemError("the order names no marketplace resource")
        resource = normalize_resource(self.client.get(provider_resource_path(order["marketplace_resource_uuid"])))
        order["resource"] = resource
        order["resource_name"] = order["resource_name"] or resource["name"]
        if order["type"] in BUILD_TYPES and resource["state"] in DEAD_RESOURCE_STATES:
            # Waldur gave up on the resource (erred it at approval, or it is gone): a machine
            # built now would be recorded nowhere.
            return {"skip": self._skipped(order, "resource %s is %s in Waldur; nothing is built for it"
                                          % (resource["name"] or resource["uuid"], resource["state"]))}
        if order["type"] == "Update":
            order["target_limits"] = dict(order["limits"] or quotas.get(order["plan_uuid"]) or {})
        return {"order": order}

    @staticmethod
    def _skipped(order, msg):
        return {"uuid": order["uuid"], "state": order["state"], "type": order.get("type"),
                "resource_uuid": order.get("marketplace_resource_uuid"),
                "resource_name": order.get("resource_name") or "", "msg": msg}


def run_claim(module, client, offering_uuid, params):
    claim = Claim(module, client, offering_uuid)
    order_uuids = [module.uuid_param(value, "order_uuids[%d]" % index)
                   for index, value in enumerate(params["order_uuids"] or [])]
    try:
        orders, skipped, errors = claim.candidates(order_uuids, params["max_workers"], params["deadline"])
    except WaldurApiError as exc:
        module.fail_from_error(exc, msg="could not list the orders of offering %s" % offering_uuid)

    ssh_keys = []
    if any(order["type"] in CREATE_TYPES for order in orders):
        try:
            ssh_keys = claim.ssh_keys()
        except (WaldurApiError, ItemError) as exc:
            # Without the keys a Create could not be carried out correctly: leave those orders
            # untouched for the next pass, go on with the others.
            message = "service provider SSH keys could not be read: %s" % exc
            errors.extend({"uuid": order["uuid"], "msg": message}
                          for order in orders if order["type"] in CREATE_TYPES)
            orders = [order for order in orders if order["type"] not in CREATE_TYPES]

    quotas = claim.plan_quotas(orders)

    def on_error(order, exc):
        return {"error": {"uuid": order["uuid"], "msg": error_message(exc)}}

    claimed = []
    results = BatchRunner(module, None, echo=(), on_error=on_error).run(
        orders, lambda order: claim.claim_one(order, quotas))
    for order, result in zip(orders, results):
        if "order" in result:
            claimed.append(result["order"])
        elif "skip" in result:
            skipped.append(result["skip"])
        elif "error" in result:
            errors.append(result["error"])
        else:  # not finished within the deadline
            errors.append({"uuid": order["uuid"], "msg": result.get("msg")})

    approved = [uuid for uuid in (order["uuid"] for order in orders) if uuid in claim.approved]
    result = dict(changed=bool(approved), orders=claimed, ssh_keys=ssh_keys, approved=approved,
                  skipped_orders=skipped, errors=errors)
    if errors and params["fail_on_item_error"]:
        module.fail_json(msg="%d order(s) could not be claimed: %s" % (
            len(errors), "; ".join("%s: %s" % (e["uuid"], e["msg"]) for e in errors)), **result)
    module.exit_json(**result)


# ---------------------------------------------------------------------------- settle

def _short_traceback(text):
    if not text:
        return ""
    text = str(text)
    return text if len(text) <= TRACEBACK_LIMIT else "...\n" + text[-TRACEBACK_LIMIT:]


def _one_line(text, limit=MESSAGE_LIMIT):
    """A message on one line of at most ``limit`` characters (pass output, Waldur's error_message)."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _parse_time(text):
    """A Waldur timestamp (``2026-11-29T12:04:26.244102Z``) as an aware datetime, or None."""
    if not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def _duration(seconds):
    seconds = int(seconds)
    if seconds >= 2 * 3600:
        return "%d hours" % (seconds // 3600)
    if seconds >= 120:
        return "%d minutes" % (seconds // 60)
    return "%d seconds" % seconds


class Settle:
    def __init__(self, module, client, offering_uuid, retry_max_age=None, now=None):
        self.module = module
        self.client = client
        self.offering_uuid = offering_uuid
        self.check_mode = module.check_mode
        self.retry_max_age = retry_max_age
        self.now = now or (lambda: datetime.datetime.now(datetime.timezone.utc))
        self.listed_resources = {}

    def list_resources(self, outcomes):
        """Backend ids and metadata of the offering's in-flight resources, in one paged listing.

        Only worth it when two or more outcomes record something; a resource missing from the
        listing (or a listing that fails) is read on its own by the order that needs it."""
        recording = [outcome for outcome in outcomes if outcome["backend_id"] or outcome["backend_metadata"]]
        if len(recording) < 2:
            return
        try:
            raws = self.client.list("marketplace-provider-resources/", params={
                "offering_uuid": self.offering_uuid, "state": IN_FLIGHT_RESOURCE_STATES,
                "field": ["uuid", "backend_id", "backend_metadata"]})
        except WaldurApiError as exc:
            self.module.warn("could not list the resources of offering %s, reading them one by one: %s"
                             % (self.offering_uuid, exc))
            return
        for raw in raws:
            resource = normalize_resource(raw)
            if resource["uuid"]:
                self.listed_resources[resource["uuid"]] = resource

    def resource(self, resource_uuid):
        listed = self.listed_resources.get(resource_uuid)
        if listed is not None:
            return listed
        return normalize_resource(self.client.get(provider_resource_path(resource_uuid)))

    def settle_one(self, outcome):
        uuid = outcome["order_uuid"]
        # The one read of the order: its state decides (done only from executing, erred only when not
        # terminal), and it is taken right before the writes. A change after it makes Waldur answer
        # 409, which is read again below.
        order = normalize_order(self.client.get(order_path(uuid), params={"field": SETTLE_ORDER_FIELDS}))
        if order["offering_uuid"] and order["offering_uuid"] != self.offering_uuid:
            raise ItemError("order %s belongs to offering %s, not %s"
                            % (uuid, order["offering_uuid"], self.offering_uuid))
        item = _Item(outcome, order)
        if order["state"] in TERMINAL_ORDER_STATES:
            return self._terminal(item)
        if outcome["failed"] and outcome["retry"]:
            return self._retry(item, outcome["msg"])
        if outcome["failed"]:
            # An erred order keeps its resource (Erred): with the machine's id recorded on it, a
            # Terminate can still delete what exists.
            self._record(item, outcome["backend_id"], None, best_effort=True)
            return self._erred(item, outcome["msg"], outcome["exception"])
        # In check mode the claim did not approve, so a pending order stands for the executing one it would be.
        settleable = ("executing", "pending-provider") if self.check_mode else ("executing",)
        if order["state"] not in settleable:
            return item.result("skipped", "order is %s, not executing; not set done" % order["state"])

        refused = self._record(item, outcome["backend_id"], outcome["backend_metadata"])
        if refused:
            # The machine exists but Waldur would not take its id: the next pass finds the machine
            # by its owner tag and tries again (up to retry_max_age).
            return self._retry(item, refused)
        item.actions.append("set_state_done")
        if self.check_mode:
            verb = "would approve and set done" if order["state"] == "pending-provider" else "would set done"
            return item.result("done", verb)
        try:
            self.client.post(order_path(uuid, "set_state_done"))
        except WaldurApiError as exc:
            item.actions.remove("set_state_done")
            if not exc.conflict:
                if exc.transient:
                    raise
                return item.result("refused", "Waldur refused set_state_done (%s); the order is left %s"
                                   % (exc, order["state"]), failed=True)
            # The order moved after it was read (cancelled, settled by another run): look again.
            state = self._state(uuid)
            item.state = state
            if state == "done":
                return item.result("skipped", "order was set done meanwhile")
            if state in (None, "executing"):
                raise ItemError("set_state_done was refused (%s); the order is %s" % (exc, state))
            return item.result("skipped", "order is %s, not executing; not set done" % state)
        item.state = "done"
        return item.result("done", "set done")

    def _state(self, uuid):
        return (self.client.get(order_path(uuid), params={"field": ["uuid", "state"]}) or {}).get("state")

    def _record(self, item, backend_id, metadata, best_effort=False):
        """Record the backend id and metadata on the resource where they differ. Returns why Waldur
        refused the backend id (None when it took it); a transient failure raises, unless
        ``best_effort`` (then it is a note)."""
        resource_uuid = item.resource_uuid
        if not resource_uuid or not (backend_id or metadata):
            return None
        try:
            resource = self.resource(resource_uuid)
        except WaldurApiError as exc:
            if best_effort:
                item.notes.append("the resource could not be read to record backend id %s (%s)" % (backend_id, exc))
                return None
            raise
        if backend_id and backend_id != resource["backend_id"]:
            item.actions.append("set_backend_id")
            if not self.check_mode:
                try:
                    self.client.post(provider_resource_path(resource_uuid, "set_backend_id"),
                                     json={"backend_id": backend_id})
                except WaldurApiError as exc:
                    item.actions.remove("set_backend_id")
                    if exc.transient and not best_effort:
                        raise
                    refusal = "Waldur refused to record backend id %s (%s)" % (backend_id, exc)
                    if best_effort:
                        item.notes.append(refusal)
                        return None
                    return refusal
            item.notes.append("backend id %s %s" % (backend_id, "would be recorded" if self.check_mode else "recorded"))
        # an empty mapping means the backend knows nothing new, not "erase what Waldur has"
        if metadata and metadata != resource["backend_metadata"]:
            item.actions.append("set_backend_metadata")
            if not self.check_mode:
                try:
                    self.client.post(provider_resource_path(resource_uuid, "set_backend_metadata"),
                                     json={"backend_metadata": metadata})
                except WaldurApiError as exc:  # best effort: the order is done regardless
                    item.actions.remove("set_backend_metadata")
                    item.notes.append("backend metadata not recorded (%s)" % exc)
        return None

    def _terminal(self, item):
        """The order is done, erred, canceled or rejected already: nothing to settle. A machine the
        backend made for it meanwhile (Waldur erred the order while the pass built) gets its id
        recorded on the resource, so that terminating the resource deletes it."""
        state = item.order["state"]
        if state != "done" and item.outcome["backend_id"]:
            self._record(item, item.outcome["backend_id"], None, best_effort=True)
        return item.result("skipped", "order is already %s; %s" % (
            state, "nothing else written" if item.actions else "nothing written"))

    def _age(self, item):
        created = _parse_time(item.order.get("created"))
        return None if created is None else (self.now() - created).total_seconds()

    def _retry(self, item, reason):
        """Leave the order for the next pass, recording the machine's id if there is one; past
        ``retry_max_age`` err it instead, saying what exists in the cloud."""
        reason = reason or "the backend asked for a retry without saying why"
        backend_id = item.outcome["backend_id"]
        if not reason.startswith("Waldur refused to record backend id"):
            self._record(item, backend_id, None, best_effort=True)
        age = self._age(item)
        if self.retry_max_age is not None and age is not None and age > self.retry_max_age:
            cloud = item.outcome.get("cloud") or (
                "the machine with backend id %s exists" % backend_id if backend_id else
                "nothing is known to exist for it")
            message = ("retried for %s since the order was placed (retry_max_age %s): %s; in the cloud: %s"
                       % (_duration(age), _duration(self.retry_max_age), reason, cloud))
            return self._erred(item, message, item.outcome.get("exception"))
        verb = "would leave" if self.check_mode else "left"
        return item.result("retry", "%s %s for the next pass: %s" % (verb, item.order["state"], reason))

    def _erred(self, item, message, exception):
        message = message or "the backend reported a failure without a message"
        item.actions.append("set_state_erred")
        if self.check_mode:
            return item.result("erred", "would set erred: %s" % message)
        try:
            self.client.post(order_path(item.uuid, "set_state_erred"),
                             json={"error_message": message, "error_traceback": _short_traceback(exception)})
        except WaldurApiError as exc:
            item.actions.remove("set_state_erred")
            if not exc.conflict:
                if exc.transient:
                    raise
                return item.result("refused", "Waldur refused set_state_erred (%s); the order is left %s: %s"
                                   % (exc, item.order["state"], message), failed=True)
            state = self._state(item.uuid)
            item.state = state
            if state not in TERMINAL_ORDER_STATES:
                raise ItemError("set_state_erred was refused (%s); the order is %s" % (exc, state))
            return item.result("skipped", "order became %s meanwhile; nothing written" % state)
        item.state = "erred"
        return item.result("erred", "set erred: %s" % message)


class _Item:
    """One order being settled: what was written for it and what is worth saying."""

    def __init__(self, outcome, order):
        self.outcome = outcome
        self.order = order
        self.uuid = outcome["order_uuid"]
        self.resource_uuid = outcome["resource_uuid"] or order["marketplace_resource_uuid"]
        self.state = order["state"]
        self.actions = []
        self.notes = []

    def result(self, outcome, msg, failed=False):
        if self.notes:
            msg = "%s; %s" % (msg, "; ".join(self.notes))
        return {"order_uuid": self.uuid, "resource_uuid": self.resource_uuid,
                "resource_name": self.order.get("resource_name") or self.outcome.get("resource_name") or "",
                "state": self.state, "changed": bool(self.actions), "failed": failed,
                "actions": list(self.actions), "outcome": outcome, "msg": msg}


def _boolean(module, raw, key, where):
    try:
        return boolean(raw.get(key, False), strict=True)
    except TypeError:
        module.fail_json(msg="%s.%s must be a boolean, got %r" % (where, key, raw.get(key)))


def parse_outcomes(module, outcomes):
    parsed = []
    positions = {}
    for index, raw in enumerate(outcomes):
        where = "outcomes[%d]" % index
        if raw.get("order_uuid") in (None, ""):
            module.fail_json(msg="%s.order_uuid is required (the order this outcome settles)" % where)
        uuid = module.uuid_param(raw["order_uuid"], "%s.order_uuid" % where)
        if uuid in positions:
            module.fail_json(msg="%s.order_uuid repeats outcomes[%d].order_uuid (%s); give one outcome per order"
                             % (where, positions[uuid], uuid))
        positions[uuid] = index
        failed = _boolean(module, raw, "failed", where)
        retry = _boolean(module, raw, "retry", where)
        resource_uuid = raw.get("resource_uuid")
        if resource_uuid not in (None, ""):
            resource_uuid = module.uuid_param(resource_uuid, "%s.resource_uuid" % where)
        metadata = raw.get("backend_metadata")
        if metadata is not None and not isinstance(metadata, dict):
            module.fail_json(msg="%s.backend_metadata must be a mapping, got %s" % (where, type(metadata).__name__))
        backend_id = raw.get("backend_id")
        parsed.append({
            "order_uuid": uuid,
            "failed": failed,
            "retry": retry,
            "msg": str(raw.get("msg") or ""),
            "backend_id": str(backend_id) if backend_id not in (None, "") else None,
            "backend_metadata": metadata,
            "resource_uuid": resource_uuid or None,
            "resource_name": str(raw.get("resource_name") or raw.get("name") or ""),
            "cloud": str(raw.get("cloud") or ""),
            "exception": raw.get("exception"),
        })
    return parsed


def run_settle(module, client, offering_uuid, params):
    if params["outcomes"] is None:
        module.fail_json(msg="outcomes is required when state is settled: a list of {order_uuid, failed, retry, "
                             "msg, backend_id, backend_metadata} (a backend module's results)")
    if params["retry_max_age"] is not None and params["retry_max_age"] <= 0:
        module.fail_json(msg="retry_max_age must be a positive number of seconds, got %s" % params["retry_max_age"])
    outcomes = parse_outcomes(module, params["outcomes"])
    settle = Settle(module, client, offering_uuid, retry_max_age=params["retry_max_age"])
    settle.list_resources(outcomes)

    def on_error(outcome, exc):
        message = error_message(exc)
        transient = isinstance(exc, WaldurApiError) and exc.transient
        if transient:
            # Waldur unreachable or failing: the order stays as it is, and the next pass settles it.
            message = "could not settle (%s); the order is left as it is for the next pass" % message
        return {"order_uuid": outcome["order_uuid"], "resource_uuid": outcome["resource_uuid"],
                "resource_name": outcome["resource_name"], "state": None, "changed": False,
                "failed": not transient, "actions": [], "outcome": "retry" if transient else "failed",
                "msg": message}

    runner = BatchRunner(module, settle.settle_one, echo=("order_uuid", "resource_uuid", "resource_name"),
                         on_error=on_error)
    results = runner.run(outcomes)
    for result in results:
        result.setdefault("state", None)
        result.setdefault("actions", [])
        if "outcome" not in result:  # not finished within the deadline: the next pass settles it
            result.update(outcome="retry", failed=False)
        result["retry"] = result["outcome"] == "retry"
    counts = count_results(results, **dict((name, _outcome_is(name)) for name in OUTCOMES))
    # "failed" and "skipped" are Ansible's own result keys (a non-zero "skipped" would mark the
    # task skipped): their counts live in counts only.
    runner.finish(results, failed=lambda result: result["outcome"] in ("failed", "refused"),
                  fail_msg=lambda failures, results: "%d of %d order(s) could not be settled" % (
                      len(failures), len(results)),
                  counts=counts, done=counts["done"], erred=counts["erred"], retry=counts["retry"],
                  refused=counts["refused"], unsettled=counts["failed"] + counts["refused"])


def _outcome_is(name):
    return lambda result: result["outcome"] == name


def main():
    argument_spec = dict(
        state=dict(type="str", default="claimed", choices=["claimed", "settled"]),
        offering_uuid=dict(type="str", required=True),
        order_uuids=dict(type="list", elements="str"),
        outcomes=dict(type="list", elements="dict"),
        retry_max_age=dict(type="float", default=86400),
    )
    argument_spec.update(batch_argument_spec())
    module = WaldurModule(argument_spec=argument_spec)
    params = module.params
    BatchRunner(module, None)  # fails on batch options out of range before any call
    offering_uuid = module.uuid_param(params["offering_uuid"], "offering_uuid")
    client = module.client(pool_size=params["max_workers"])
    if params["state"] == "claimed":
        run_claim(module, client, offering_uuid, params)
    else:
        run_settle(module, client, offering_uuid, params)


if __name__ == "__main__":
    main()
