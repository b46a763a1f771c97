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
    and the order is carried on when it is executing; an approved Update is re-read too, as Waldur
    may err it on approval), and returns every actionable order joined with its provider resource.
    Update orders get C(target_limits) (the order's limits, else the plan's quotas). When some
    order is a Create or Restore, the service provider's SSH keys (all pages) are returned too.
  - With O(state=settled), takes the per-order outcomes of the backend task (a backend module's
    C(results) can be passed as they are) and, per order, re-reads the order's state, records the
    backend id and backend metadata on the resource when they differ and sets it C(done) (only from
    C(executing); an order that moved meanwhile makes Waldur refuse, and is read again), or sets it
    C(erred) with the outcome's message (only when it is not already terminal).
  - The current backend ids and metadata are compared with one paged listing of the offering's
    in-flight (C(Creating), C(Updating), C(Terminating)) resources when two or more outcomes record
    something; other resources are read one by one.
  - Orders are worked on concurrently; one order failing never stops the others.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.waldur
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
      - Required with O(state=settled). One entry per order; other keys are ignored.
      - C(order_uuid) (required) is the order.
      - C(failed) (bool) says whether the backend failed, C(msg) is the message (stored as the order's
        C(error_message) when failed) and C(exception) an optional traceback, shortened into
        C(error_traceback).
      - C(retry) (bool) marks a failure a later pass should retry (the backend did not finish in
        time or was unavailable); such an order is left as it is, not set erred.
      - C(backend_id) is the id to record on the resource, C(backend_metadata) (dict) the metadata to
        record (an empty one is not written), C(resource_uuid) the provider resource (default the
        order's).
    type: list
    elements: dict
  max_workers:
    description:
      - Orders worked on at the same time.
    type: int
    default: 8
  deadline:
    description:
      - Seconds for the whole batch. Orders not finished by then are reported as failed and are
        picked up by the next pass.
    type: int
    default: 900
  fail_on_item_error:
    description:
      - Fail the task when any order could not be claimed or settled. By default such orders are
        reported (RV(errors), RV(results[].failed)) and the task succeeds.
    type: bool
    default: false
notes:
  - Settling is idempotent. A second run with the same outcomes finds the orders terminal and
    writes nothing.
  - A failure to reach Waldur never marks an order erred. The order stays C(executing) and the next
    pass settles it.
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
    Orders not claimed because they are not actionable (another state or offering, not found, or
    no longer executing after approval), as C(uuid), C(state), C(msg).
  returned: when O(state=claimed)
  type: list
  elements: dict
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
    state:
      description: The order's state after this run (its current state in check mode).
      type: str
    changed:
      description: Whether something was (or in check mode would be) written for this order.
      type: bool
    failed:
      description: Whether the order could not be settled (it is left for the next pass).
      type: bool
    actions:
      description: >-
        Calls made (or that would be made) for this order, among C(set_backend_id),
        C(set_backend_metadata), C(set_state_done), C(set_state_erred).
      type: list
      elements: str
    msg:
      description: What happened.
      type: str
  sample:
    - order_uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
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
skipped:
  description: Orders left alone because they were not in a state to settle (already terminal, not executing).
  returned: when O(state=settled)
  type: int
unsettled:
  description: Orders that could not be settled this run (RV(results[].failed)); the next pass retries them.
  returned: when O(state=settled)
  type: int
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
  sample: {reads: 12, writes: 3, retries: 0}
"""

import threading

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.waldur.site_agent.plugins.module_utils.batch import ItemError, run_batch
from ansible_collections.waldur.site_agent.plugins.module_utils.naming import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur_api import (
    ACTIONABLE_ORDER_STATES,
    TERMINAL_ORDER_STATES,
    WaldurApiError,
    WaldurModule,
    error_message,
    hex_uuid,
    normalize_order,
    normalize_resource,
    order_path,
    provider_offering_path,
    provider_resource_path,
    ssh_key_fingerprint,
)

CREATE_TYPES = ("Create", "Restore")
TRACEBACK_LIMIT = 2000
# What settling needs of an order; one read of these per order, right before its writes.
SETTLE_ORDER_FIELDS = ["uuid", "state", "offering_uuid", "marketplace_resource_uuid"]
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
                        return {"skip": {"uuid": uuid, "state": None, "msg": "order not found"}}
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
                skipped.append({"uuid": order["uuid"], "state": order["state"],
                                "msg": "order belongs to offering %s" % order["offering_uuid"]})
            elif order["state"] not in ACTIONABLE_ORDER_STATES:
                skipped.append({"uuid": order["uuid"], "state": order["state"],
                                "msg": "order is %s, not pending-provider or executing" % order["state"]})
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
                approved = True
            except WaldurApiError as exc:
                if not exc.conflict:  # 409: approved meanwhile (or cancelled); the re-read tells
                    raise
                approved = False
            # A 200 moved the order to executing. After a 409, and after approving an Update (Waldur's
            # Update processor runs on approval and may err the order at once), the state is read again.
            if approved and order["type"] != "Update":
                order = dict(order, state="executing")
            else:
                order = dict(order, **{key: value for key, value in
                                       normalize_order(self.client.get(order_path(order["uuid"]))).items()
                                       if value is not None})
            if order["state"] != "executing":
                return {"skip": {"uuid": order["uuid"], "state": order["state"],
                                 "msg": "order is %s after approval, not executing" % order["state"]}}
        if not order["marketplace_resource_uuid"]:
            raise ItemError("the order names no marketplace resource")
        resource = self.client.get(provider_resource_path(order["marketplace_resource_uuid"]))
        order["resource"] = normalize_resource(resource)
        if order["type"] == "Update":
            order["target_limits"] = dict(order["limits"] or quotas.get(order["plan_uuid"]) or {})
        return {"order": order}


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
    results = run_batch(orders, lambda order: claim.claim_one(order, quotas), max_workers=params["max_workers"],
                        deadline_seconds=params["deadline"], on_error=on_error)
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


class Settle:
    def __init__(self, module, client, offering_uuid):
        self.module = module
        self.client = client
        self.offering_uuid = offering_uuid
        self.check_mode = module.check_mode
        self.listed_resources = {}

    def list_resources(self, outcomes):
        """Backend ids and metadata of the offering's in-flight resources, in one paged listing.

        Only worth it when two or more outcomes record something; a resource missing from the
        listing (or a listing that fails) is read on its own by the order that needs it."""
        recording = [outcome for outcome in outcomes
                     if not outcome["failed"] and (outcome["backend_id"] or outcome["backend_metadata"])]
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
        if outcome["failed"] and outcome["retry"]:
            return self._skip(uuid, order["state"], "left %s for the next pass: %s" % (order["state"], outcome["msg"]))
        if outcome["failed"]:
            return self._erred(uuid, order["state"], outcome["msg"], outcome["exception"], [])
        # In check mode the claim did not approve, so a pending order stands for the executing one it would be.
        settleable = ("executing", "pending-provider") if self.check_mode else ("executing",)
        if order["state"] not in settleable:
            return self._skip(uuid, order["state"], "order is %s, not executing; not set done" % order["state"])

        actions, notes = [], []
        resource_uuid = outcome["resource_uuid"] or order["marketplace_resource_uuid"]
        if resource_uuid and (outcome["backend_id"] or outcome["backend_metadata"]):
            resource = self.resource(resource_uuid)
            backend_id = outcome["backend_id"]
            if backend_id and backend_id != resource["backend_id"]:
                actions.append("set_backend_id")
                if not self.check_mode:
                    try:
                        self.client.post(provider_resource_path(resource_uuid, "set_backend_id"),
                                         json={"backend_id": backend_id})
                    except WaldurApiError as exc:
                        if exc.transient:
                            raise
                        # Waldur refused the id: without it Waldur cannot track the machine.
                        return self._erred(uuid, "executing", "the backend succeeded (backend id %s) but "
                                           "Waldur refused to record the backend id: %s" % (backend_id, exc),
                                           None, actions)
                notes.append("backend id %s recorded" % backend_id)
            metadata = outcome["backend_metadata"]
            # an empty mapping means the backend knows nothing new, not "erase what Waldur has"
            if metadata and metadata != resource["backend_metadata"]:
                actions.append("set_backend_metadata")
                if not self.check_mode:
                    try:
                        self.client.post(provider_resource_path(resource_uuid, "set_backend_metadata"),
                                         json={"backend_metadata": metadata})
                    except WaldurApiError as exc:  # best effort: the order is done regardless
                        actions.remove("set_backend_metadata")
                        notes.append("backend metadata not recorded (%s)" % exc)

        state = order["state"]
        actions.append("set_state_done")
        if self.check_mode:
            verb = "would approve and set done" if state == "pending-provider" else "would set done"
            return self._result(uuid, state, actions, "%s%s" % (verb, self._suffix(notes)))
        try:
            self.client.post(order_path(uuid, "set_state_done"))
        except WaldurApiError as exc:
            if not exc.conflict:
                raise
            # The order moved after it was read (cancelled, settled by another run): look again.
            state = (self.client.get(order_path(uuid), params={"field": ["uuid", "state"]}) or {}).get("state")
            actions.remove("set_state_done")
            if state == "done":
                return self._result(uuid, state, actions, "order was set done meanwhile%s" % self._suffix(notes))
            if state in (None, "executing"):
                raise ItemError("set_state_done was refused (%s); the order is %s" % (exc, state))
            return self._result(uuid, state, actions, "order is %s, not executing; not set done%s"
                                % (state, self._suffix(notes)))
        return self._result(uuid, "done", actions, "set done%s" % self._suffix(notes))

    def _erred(self, uuid, state, message, exception, actions):
        if state in TERMINAL_ORDER_STATES:
            return self._skip(uuid, state, "order is already %s; nothing written" % state)
        message = message or "the backend reported a failure without a message"
        actions = actions + ["set_state_erred"]
        if self.check_mode:
            return self._result(uuid, state, actions, "would set erred: %s" % message)
        try:
            self.client.post(order_path(uuid, "set_state_erred"),
                             json={"error_message": message, "error_traceback": _short_traceback(exception)})
        except WaldurApiError as exc:
            if not exc.conflict:
                raise
            state = (self.client.get(order_path(uuid), params={"field": ["uuid", "state"]}) or {}).get("state")
            if state not in TERMINAL_ORDER_STATES:
                raise ItemError("set_state_erred was refused (%s); the order is %s" % (exc, state))
            return self._skip(uuid, state, "order became %s meanwhile; nothing written" % state)
        return self._result(uuid, "erred", actions, "set erred: %s" % message)

    @staticmethod
    def _suffix(notes):
        return "; " + "; ".join(notes) if notes else ""

    @staticmethod
    def _skip(uuid, state, msg):
        return {"order_uuid": uuid, "state": state, "changed": False, "failed": False,
                "actions": [], "msg": msg, "outcome": "skipped"}

    def _result(self, uuid, state, actions, msg):
        outcome = "skipped"
        if "set_state_done" in actions:
            outcome = "done"
        elif "set_state_erred" in actions:
            outcome = "erred"
        return {"order_uuid": uuid, "state": state, "changed": bool(actions), "failed": False,
                "actions": actions, "msg": msg, "outcome": outcome}


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
        try:
            failed = boolean(raw.get("failed", False), strict=True)
        except TypeError:
            module.fail_json(msg="%s.failed must be a boolean, got %r" % (where, raw.get("failed")))
        try:
            retry = boolean(raw.get("retry", False), strict=True)
        except TypeError:
            module.fail_json(msg="%s.retry must be a boolean, got %r" % (where, raw.get("retry")))
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
            "exception": raw.get("exception"),
        })
    return parsed


def run_settle(module, client, offering_uuid, params):
    if params["outcomes"] is None:
        module.fail_json(msg="outcomes is required when state is settled: a list of {order_uuid, failed, msg, "
                             "backend_id, backend_metadata} (a backend module's results)")
    outcomes = parse_outcomes(module, params["outcomes"])
    settle = Settle(module, client, offering_uuid)
    settle.list_resources(outcomes)

    def on_error(outcome, exc):
        message = error_message(exc)
        if isinstance(exc, WaldurApiError) and exc.transient:
            message += "; the order is left as it is for the next pass"
        return {"order_uuid": outcome["order_uuid"], "state": None, "changed": False, "failed": True,
                "actions": [], "msg": message}

    results = run_batch(outcomes, settle.settle_one, max_workers=params["max_workers"],
                        deadline_seconds=params["deadline"], on_error=on_error)
    counts = {"done": 0, "erred": 0, "skipped": 0, "failed": 0}
    for outcome, result in zip(outcomes, results):
        result.setdefault("order_uuid", outcome["order_uuid"])
        result.setdefault("state", None)
        result.setdefault("actions", [])
        if result.get("failed"):
            counts["failed"] += 1
        else:
            counts[result.pop("outcome")] += 1
    changed = any(result.get("changed") for result in results)
    summary = dict(changed=changed, results=results, done=counts["done"], erred=counts["erred"],
                   skipped=counts["skipped"], unsettled=counts["failed"])
    if counts["failed"] and params["fail_on_item_error"]:
        module.fail_json(msg="%d of %d order(s) could not be settled" % (counts["failed"], len(results)), **summary)
    module.exit_json(**summary)


def main():
    argument_spec = dict(
        state=dict(type="str", default="claimed", choices=["claimed", "settled"]),
        offering_uuid=dict(type="str", required=True),
        order_uuids=dict(type="list", elements="str"),
        outcomes=dict(type="list", elements="dict"),
        max_workers=dict(type="int", default=8),
        deadline=dict(type="int", default=900),
        fail_on_item_error=dict(type="bool", default=False),
    )
    module = WaldurModule(argument_spec=argument_spec)
    params = module.params
    if params["max_workers"] < 1:
        module.fail_json(msg="max_workers must be at least 1, got %d" % params["max_workers"])
    offering_uuid = module.uuid_param(params["offering_uuid"], "offering_uuid")
    client = module.client(pool_size=params["max_workers"])
    if params["state"] == "claimed":
        run_claim(module, client, offering_uuid, params)
    else:
        run_settle(module, client, offering_uuid, params)


if __name__ == "__main__":
    main()
