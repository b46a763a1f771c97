# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Claiming the marketplace orders of an offering (``waldur_orders`` with state claimed)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import BatchRunner, ItemError, run_batch
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import pack, unpack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.ssh_keys import ssh_key_fingerprint
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import duration_words, parse_time, utc_now
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import hex_uuid, normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import (
    WaldurApiError,
    WaldurUnproven,
    error_message,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import (
    ACTIONABLE_ORDER_STATES,
    IN_FLIGHT_RESOURCE_STATES,
    ORDER_SHAPE,
    PLAN_SHAPE,
    RESOURCE_SHAPE,
    SERVICE_PROVIDER_SHAPE,
    SSH_KEY_SHAPE,
    find_of_offering,
    normalize_order,
    normalize_resource,
    order_path,
    provider_offering_path,
    provider_resource_path,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.order_types import (
    CHANGE,
    action_of,
    builds,
    needs_a_live_resource,
    processing_signal,
    processing_trace,
)

DEAD_RESOURCE_STATES = ("Erred", "Terminated")
MESSAGE_LIMIT = 500
# How often the claim looks again while Waldur's worker has not finished processing approvals.
PROCESSING_POLL_SECONDS = 0.5
# How long an order may wait for Waldur's worker before the pass fails (O(order_processing_stuck_seconds)).
DEFAULT_STUCK_SECONDS = 3600.0


def _one_line(text, limit=MESSAGE_LIMIT):
    """A message on one line of at most ``limit`` characters (pass output, Waldur's error_message)."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Claim:
    def __init__(self, module, client, offering_uuid, settle_seconds=1.0, wait_seconds=30.0, clock=time.monotonic,
                 stuck_seconds=DEFAULT_STUCK_SECONDS):
        self.module = module
        self.client = client
        self.offering_uuid = offering_uuid
        self.check_mode = module.check_mode
        self.approved = []
        self.listed_orders = {}
        self.listed_resources = {}
        # Waldur's processing of an approval (its background worker): the time of each approve
        # call, the orders' raw fields the processor changes, the least wait after an approval
        # and the most the claim waits for the processor's trace.
        self.settle_seconds = settle_seconds
        self.wait_seconds = wait_seconds
        # past this wait for the processor's trace, an order still waiting fails the pass
        self.stuck_seconds = stuck_seconds
        self.clock = clock
        self.approved_at = {}
        self.raw_orders = {}
        self._lock = threading.Lock()

    def candidates(self, order_uuids, max_workers, deadline, with_pending=False):
        """Actionable raw orders of the offering, plus the ones set aside as skipped/errors.
        ``with_pending``: the named orders and every other actionable order the listing finds
        (an event's run takes the orders of a burst that were placed while it started)."""
        skipped, errors = [], []
        raws = []
        if order_uuids:
            def read(uuid):
                try:
                    return {"order": self.client.get(order_path(uuid), shape=ORDER_SHAPE)}
                except WaldurApiError as exc:
                    if exc.not_found:
                        return {"skip": {"uuid": uuid, "state": None, "type": None, "resource_uuid": None,
                                         "resource_name": "", "msg": "order not found"}}
                    raise
            fetched = run_batch(order_uuids, read, max_workers=max_workers, deadline_seconds=deadline,
                                on_error=lambda uuid, exc: {"failed": True, "msg": error_message(exc)})
            for uuid, result in zip(order_uuids, fetched):
                if result.get("failed"):
                    errors.append({"uuid": uuid, "msg": result["msg"]})
                elif "skip" in result:
                    skipped.append(result["skip"])
                else:
                    raws.append(result["order"])
        if not order_uuids or with_pending:
            # a named order the listing finds again is dropped below, as a repeat
            raws += self.client.list("marketplace-orders/", params={
                "offering_uuid": self.offering_uuid, "state": list(ACTIONABLE_ORDER_STATES)}, shape=ORDER_SHAPE)
        orders = []
        seen = set()
        for raw in raws:
            order = normalize_order(raw)
            self.raw_orders[order["uuid"]] = raw
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
            if action_of(order["type"]) != CHANGE or order["limits"] or not plan or plan in quotas:
                continue
            try:
                body = self.client.get("marketplace-plans/%s/" % plan, shape=PLAN_SHAPE)
                quotas[plan] = body.get("quotas") if isinstance(body.get("quotas"), dict) else {}
            except WaldurApiError as exc:
                self.module.warn("could not read the quotas of plan %s: %s" % (plan, exc))
                quotas[plan] = {}
        return quotas

    def ssh_keys(self):
        """The service provider's keys, all pages (offering -> customer -> service provider -> keys)."""
        offering = self.client.get(provider_offering_path(self.offering_uuid), params={"field": ["customer_uuid"]})
        customer_uuid = hex_uuid(offering.get("customer_uuid"))
        if not customer_uuid:
            raise ItemError("the offering does not name its customer (customer_uuid)")
        providers = self.client.get("marketplace-service-providers/", params={"customer_uuid": customer_uuid},
                                    expect=list, shape=SERVICE_PROVIDER_SHAPE)
        if not providers:
            raise ItemError("customer %s is not a service provider" % customer_uuid)
        provider_uuid = normalize_uuid(providers[0]["uuid"])
        keys = []
        for raw in self.client.list("marketplace-service-providers/%s/keys/" % provider_uuid, shape=SSH_KEY_SHAPE):
            public_key = raw.get("public_key") or ""
            keys.append({
                "uuid": hex_uuid(raw.get("uuid")),
                "name": raw.get("name") or "",
                "public_key": public_key,
                "fingerprint": raw.get("fingerprint_md5") or raw.get("fingerprint")
                or ssh_key_fingerprint(public_key),
            })
        return keys

    def approve(self, order):
        """Approve a pending order (not in check mode); True when its state must be read again."""
        if order["state"] != "pending-provider" or self.check_mode:
            return False
        try:
            self.client.post(order_path(order["uuid"], "approve_by_provider"), json={})
            with self._lock:
                self.approved.append(order["uuid"])
        except WaldurApiError as exc:
            if not exc.conflict:  # 409: approved meanwhile (or cancelled); the re-read tells
                raise
        with self._lock:
            self.approved_at[order["uuid"]] = self.clock()
        return True

    def list_current(self, orders):
        """The approved orders and the resources of all, from one paged listing each where that
        pays (``WaldurClient.find``): the approved orders among the offering's executing ones,
        the resources among its in-flight ones. What a listing misses (an order Waldur erred at
        approval, a resource Waldur gave up on) or a listing that fails is read on its own."""
        self.listed_orders = find_of_offering(
            self.module, self.client, "marketplace-orders/", self.offering_uuid,
            [order["uuid"] for order in orders if order["reread"]], ["executing"], shape=ORDER_SHAPE)
        self.listed_resources = find_of_offering(
            self.module, self.client, "marketplace-provider-resources/", self.offering_uuid,
            [order["marketplace_resource_uuid"] for order in orders if order["marketplace_resource_uuid"]],
            IN_FLIGHT_RESOURCE_STATES, shape=RESOURCE_SHAPE)

    def claim_one(self, order, quotas):
        if order.pop("reread"):
            # Waldur's processor runs after the approval, in a background worker, and may err the
            # order (a Create without a name, an Update on Waldur 7.0.7): the order is read again
            # before anything is built.
            raw = self.listed_orders.get(order["uuid"]) or self.client.get(order_path(order["uuid"]), shape=ORDER_SHAPE)
            self.raw_orders[order["uuid"]] = raw
            order = dict(order, **{key: value for key, value in normalize_order(raw).items() if value is not None})
            if order["state"] == "erred":
                return {"skip": self._skipped(order, "order erred by Waldur after approval: %s"
                                              % (_one_line(raw.get("error_message")) or "(no message)"))}
            if order["state"] != "executing":
                reason = " (Waldur: %s)" % _one_line(raw["error_message"]) if raw.get("error_message") else ""
                return {"skip": self._skipped(order, "order is %s after approval, not executing%s"
                                              % (order["state"], reason))}
        if not order["marketplace_resource_uuid"]:
            raise ItemError("the order names no marketplace resource")
        resource = normalize_resource(self.listed_resources.get(order["marketplace_resource_uuid"])
                                      or self.client.get(provider_resource_path(order["marketplace_resource_uuid"]),
                                                         shape=RESOURCE_SHAPE))
        order["resource_name"] = order["resource_name"] or resource["name"]
        if needs_a_live_resource(order["type"]) and resource["state"] in DEAD_RESOURCE_STATES:
            # Waldur gave up on the resource (erred it at approval, or it is gone): a machine
            # built now would be recorded nowhere.
            return {"skip": self._skipped(order, "resource %s is %s in Waldur; nothing is built for it"
                                          % (resource["name"] or resource["uuid"], resource["state"]))}
        if not self.check_mode and order["state"] == "executing" and not self.processed(order, resource):
            # Waldur's worker has not finished with the approval: nothing is built yet; the claim
            # looks again (the order is read again then).
            return {"wait": dict(order, reread=True)}
        order["resource"] = resource
        if action_of(order["type"]) == CHANGE:
            order["target_limits"] = dict(order["limits"] or quotas.get(order["plan_uuid"]) or {})
        return {"order": order}

    def processed(self, order, resource):
        """Positive evidence that Waldur's processing of the order's approval has finished: the
        processor's trace (``processing_signal``), whenever and by whoever the order was approved;
        time since an approval is never taken for it (a backlogged worker may run an hour late).
        Only a type the processor leaves no trace of (Restore) counts as processed
        O(order_processing_settle_seconds) after this run's approve call, or at once when an
        earlier run approved it (that run waited the settle time; the order, read again now, is
        still executing)."""
        raw = self.raw_orders.get(order["uuid"]) or {}
        signal = processing_signal(order["type"], raw, resource)
        if signal is not None:
            return signal
        approved_at = self.approved_at.get(order["uuid"])
        return approved_at is None or self.clock() - approved_at >= self.settle_seconds

    def waiting_since(self, order):
        """When the order started waiting for Waldur's worker (its approval: ``provider_reviewed_at``,
        else ``consumer_reviewed_at`` or ``created`` for an order Waldur approved itself), as
        ``(datetime, seconds ago)``, or ``(None, None)`` when Waldur gives no time."""
        raw = self.raw_orders.get(order["uuid"]) or {}
        for key in ("provider_reviewed_at", "consumer_reviewed_at", "created"):
            moment = parse_time(raw.get(key))
            if moment is not None:
                return moment, max(0.0, (utc_now() - moment).total_seconds())
        return None, None

    def waiting_until(self, orders):
        """When to look again at the orders waiting for Waldur's worker: in one poll interval when
        some wait for the processor's trace, else when the last of them has been approved for
        O(order_processing_settle_seconds)."""
        now = self.clock()
        settled = [self.approved_at.get(order["uuid"], now) + self.settle_seconds for order in orders
                   if processing_signal(order["type"], {}, {}) is None]
        if len(settled) < len(orders):
            return now + PROCESSING_POLL_SECONDS
        return max(settled + [now])

    def unprocessed(self, order):
        """The entry of an order Waldur's worker has not processed yet: skipped, with since when the
        agent waits and for what; failed (the pass exits non-zero) once that wait is over
        O(order_processing_stuck_seconds)."""
        trace = processing_trace(order["type"]) or "the processor's trace"
        moment, waited = self.waiting_since(order)
        since = ("since %s (%s)" % (moment.strftime("%Y-%m-%d %H:%M:%S UTC"), duration_words(waited))
                 if moment is not None else "since an unknown time")
        message = ("waiting for Waldur to process the approval %s: %s is not seen yet; left executing, nothing "
                   "built" % (since, trace))
        if waited is not None and waited > self.stuck_seconds:
            return "error", ("%s; that is over order_processing_stuck_seconds (%s): check that Waldur's background "
                             "worker (Celery) runs" % (message, duration_words(self.stuck_seconds)))
        return "skip", message

    def turn_down(self, order, reason):
        """An order whose own input the cloud would refuse, before anything is approved or built: a
        pending one is rejected (``reject_by_provider``, the reason as ``provider_rejection_comment``,
        which the customer sees), one already executing (approved by an earlier pass) is erred with
        the reason. Check mode writes nothing and says what it would write."""
        entry = self._skipped(order, reason)
        if order["state"] == "pending-provider":
            entry["outcome"] = "rejected"
            if not self.check_mode:
                try:
                    self.client.post(order_path(order["uuid"], "reject_by_provider"),
                                     json={"provider_rejection_comment": reason})
                except WaldurApiError as exc:
                    if not exc.conflict:
                        raise
                    # it moved meanwhile (approved by another run, cancelled): look again
                    order = dict(order, state=self.client.get(order_path(order["uuid"]), params={
                        "field": ["uuid", "state"]}, shape=ORDER_SHAPE)["state"])
                    if order["state"] != "executing":
                        return {"skip": self._skipped(order, "order is %s, not pending-provider; not rejected (%s)"
                                                      % (order["state"], reason))}
                else:
                    entry["state"] = "rejected"
                    return {"rejected": entry}
        if order["state"] != "executing":
            return {"rejected": entry}  # check mode: what it would reject
        entry["outcome"] = "erred"
        if not self.check_mode:
            self.client.post(order_path(order["uuid"], "set_state_erred"),
                             json={"error_message": reason, "error_traceback": ""})
            entry["state"] = "erred"
        return {"rejected": entry}

    @staticmethod
    def _skipped(order, msg):
        return {"uuid": order["uuid"], "state": order["state"], "type": order.get("type"),
                "resource_uuid": order.get("marketplace_resource_uuid"),
                "resource_name": order.get("resource_name") or "", "msg": msg}


def _reasons(module, params, option):
    """``{order uuid: reason}`` of a list option of ``order_uuid`` and ``msg`` mappings (O(reject), O(hold))."""
    reasons = {}
    for index, entry in enumerate(params.get(option) or []):
        if not isinstance(entry, dict) or not entry.get("order_uuid") or not entry.get("msg"):
            module.fail_json(msg="%s[%d] must be a mapping with order_uuid and msg (the reason), got %r"
                             % (option, index, entry))
        reasons[module.uuid_param(entry["order_uuid"], "%s[%d].order_uuid" % (option, index))] = _one_line(entry["msg"])
    return reasons


def _verdicts(module, params):
    """``{order uuid: reason}`` of O(reject), and the set of O(judged_orders) (None when not given)."""
    verdicts = _reasons(module, params, "reject")
    judged = None
    if params.get("judged_orders") is not None:
        try:
            listed = unpack(params["judged_orders"], "judged_orders")
        except ValueError as exc:
            module.fail_json(msg=str(exc))
        # the UUIDs, or the listed orders themselves (``waldur_orders`` state listed)
        judged = set(module.uuid_param(entry.get("uuid") if isinstance(entry, dict) else entry,
                                       "judged_orders[%d]" % index) for index, entry in enumerate(listed))
    return verdicts, judged


def _sort_out(orders, results, skipped, errors, waiting=None):
    """The orders a batch step kept; the ones it skipped or could not do go to their lists (and
    the ones waiting for Waldur's worker to ``waiting``)."""
    kept = []
    for order, result in zip(orders, results):
        if "order" in result:
            kept.append(result["order"])
        elif "wait" in result and waiting is not None:
            waiting.append(result["wait"])
        elif "skip" in result:
            skipped.append(result["skip"])
        elif "error" in result:
            errors.append(result["error"])
        else:  # not finished within the deadline
            errors.append({"uuid": order["uuid"], "msg": result.get("msg")})
    return kept


def run_list(module, client, offering_uuid, params):
    """``waldur_orders`` with state listed: the offering's actionable orders (O(order_uuids) only,
    when given) joined with the provider resources of the Creates and Restores, read only - what
    the orders name is checked against the cloud's catalogue before the claim approves any."""
    claim = Claim(module, client, offering_uuid)
    order_uuids = [module.uuid_param(value, "order_uuids[%d]" % index)
                   for index, value in enumerate(params["order_uuids"] or [])]
    try:
        orders, skipped, errors = claim.candidates(order_uuids, params["max_workers"], params["deadline"],
                                                   with_pending=params["with_pending"])
        building = [order for order in orders if builds(order["type"])]
        listed = find_of_offering(module, client, "marketplace-provider-resources/", offering_uuid,
                                  [order["marketplace_resource_uuid"] for order in building
                                   if order["marketplace_resource_uuid"]], IN_FLIGHT_RESOURCE_STATES, shape=RESOURCE_SHAPE)
    except WaldurApiError as exc:
        module.fail_from_error(exc, msg="could not list the orders of offering %s" % offering_uuid)

    def joined(order):
        if builds(order["type"]) and order["marketplace_resource_uuid"]:
            raw = listed.get(order["marketplace_resource_uuid"]) or client.get(
                provider_resource_path(order["marketplace_resource_uuid"]), shape=RESOURCE_SHAPE)
            order = dict(order, resource=normalize_resource(raw))
        return {"order": order}

    runner = BatchRunner(module, None, echo=(), on_error=lambda order, exc: {
        "error": {"uuid": order["uuid"], "msg": error_message(exc)}})
    kept = _sort_out(orders, runner.run(orders, joined), skipped, errors)
    result = dict(changed=False, count=len(kept), skipped_orders=skipped, errors=errors)
    if params["packed"]:
        result["orders_packed"] = pack(kept)
    else:
        result["orders"] = kept
    module.exit_json(**result)


def run_claim(module, client, offering_uuid, params):
    for name in ("order_processing_settle_seconds", "order_processing_wait_seconds"):
        if not 0 <= params[name] <= 3600:
            module.fail_json(msg="%s must be between 0 and 3600 seconds, got %s" % (name, params[name]))
    if params["order_processing_stuck_seconds"] <= 0:
        module.fail_json(msg="order_processing_stuck_seconds must be a positive number of seconds, got %s"
                         % params["order_processing_stuck_seconds"])
    claim = Claim(module, client, offering_uuid, settle_seconds=params["order_processing_settle_seconds"],
                  wait_seconds=max(params["order_processing_wait_seconds"], params["order_processing_settle_seconds"]),
                  stuck_seconds=params["order_processing_stuck_seconds"])
    order_uuids = [module.uuid_param(value, "order_uuids[%d]" % index)
                   for index, value in enumerate(params["order_uuids"] or [])]
    try:
        orders, skipped, errors = claim.candidates(order_uuids, params["max_workers"], params["deadline"],
                                                   with_pending=params["with_pending"])
    except WaldurApiError as exc:
        module.fail_from_error(exc, msg="could not list the orders of offering %s" % offering_uuid)
    verdicts, judged = _verdicts(module, params)
    holds = _reasons(module, params, "hold")
    rejected, unjudged = [], []
    for order in orders:
        if order["uuid"] in verdicts:
            rejected.append(order)
        elif judged is not None and order["state"] == "pending-provider" and order["uuid"] not in judged:
            skipped.append(claim._skipped(order, "placed after the check against the cloud's catalogue; left "
                                                 "pending-provider for the next pass"))
        elif order["uuid"] in holds and order["state"] == "pending-provider":
            # past the cloud's quota: not approved, so nothing is built for it; a later pass approves it once
            # there is room (an executing order is never held: its machine may exist already)
            held = claim._skipped(order, holds[order["uuid"]])
            held["outcome"] = "held"
            skipped.append(held)
        else:
            unjudged.append(order)
    orders = unjudged
    rejected_orders = []
    if rejected:
        # Turned down before anything is approved or built: the cloud would refuse them.
        turned = BatchRunner(module, None, echo=(), on_error=lambda order, exc: {
            "error": {"uuid": order["uuid"], "msg": "could not be turned down (%s): %s"
                      % (verdicts[order["uuid"]], error_message(exc))}}).run(
            rejected, lambda order: claim.turn_down(order, verdicts[order["uuid"]]))
        for order, result in zip(rejected, turned):
            if "rejected" in result:
                rejected_orders.append(result["rejected"])
            elif "skip" in result:
                skipped.append(result["skip"])
            else:
                errors.append(result.get("error") or {"uuid": order["uuid"], "msg": result.get("msg")})

    ssh_keys = []
    if any(builds(order["type"]) for order in orders):
        try:
            ssh_keys = claim.ssh_keys()
            named = set(key for key in (hex_uuid((order.get("attributes") or {}).get(field))
                                        for order in orders if builds(order["type"])
                                        for field in ("ssh_key", "ssh_key_uuid")) if key)
            if named - set(key["uuid"] for key in ssh_keys):
                # An order naming a key the listing lacks is erred for it: only when a second
                # listing agrees (one answer that lost the keys never errs a customer's order).
                again = claim.ssh_keys()
                if sorted(key["uuid"] for key in again) != sorted(key["uuid"] for key in ssh_keys):
                    raise WaldurUnproven(200, "GET", "marketplace-service-providers/keys/", (
                        "two listings of the service provider's SSH keys disagree (%d and %d keys); no Create "
                        "is carried out on them" % (len(ssh_keys), len(again))))
        except (WaldurApiError, ItemError) as exc:
            # Without the keys a Create could not be carried out correctly: leave those orders
            # untouched for the next pass, go on with the others.
            message = "service provider SSH keys could not be read: %s" % exc
            errors.extend({"uuid": order["uuid"], "msg": message}
                          for order in orders if builds(order["type"]))
            orders = [order for order in orders if not builds(order["type"])]

    quotas = claim.plan_quotas(orders)

    def on_error(order, exc):
        return {"error": {"uuid": order["uuid"], "msg": error_message(exc)}}

    # Every approval first, then the listings that replace a read per order, then each order.
    runner = BatchRunner(module, None, echo=(), on_error=on_error)
    approvals = runner.run(orders, lambda order: {"order": dict(order, reread=claim.approve(order))})
    approved_orders = _sort_out(orders, approvals, skipped, errors)
    claim.list_current(approved_orders)
    claims = runner.run(approved_orders, lambda order: claim.claim_one(dict(order), quotas))
    waiting = []
    claimed = _sort_out(approved_orders, claims, skipped, errors, waiting)
    # Waldur processes an approval in a background worker, which may err the order after it
    # answered: nothing is built before the worker is seen to have finished. One wait for the
    # whole batch, then one listing of the orders still waiting, until wait_seconds have passed.
    started = claim.clock()
    waited = 0.0
    while waiting:
        if claim.clock() - started >= claim.wait_seconds:
            for order in waiting:
                kind, message = claim.unprocessed(order)
                if kind == "error":
                    errors.append({"uuid": order["uuid"], "msg": message})
                else:
                    skipped.append(claim._skipped(order, message))
            break
        pause = min(claim.waiting_until(waiting), started + claim.wait_seconds) - claim.clock()
        if pause > 0:
            time.sleep(pause)
            waited += pause
        claim.list_current(waiting)
        again = runner.run(waiting, lambda order: claim.claim_one(dict(order), quotas))
        still = []
        claimed.extend(_sort_out(waiting, again, skipped, errors, still))
        waiting = still
    position = dict((order["uuid"], index) for index, order in enumerate(orders))
    claimed.sort(key=lambda order: position.get(order["uuid"], len(position)))  # listing order
    for order in claimed:
        # approved by this pass: no earlier pass can have acted on it (the backend needs one read less)
        order["approved_now"] = order["uuid"] in claim.approved

    approved = [uuid for uuid in (order["uuid"] for order in orders) if uuid in claim.approved]
    turned_down = bool(rejected_orders) and not module.check_mode
    result = dict(changed=bool(approved) or turned_down, ssh_keys=ssh_keys, approved=approved, count=len(claimed),
                  skipped_orders=skipped, errors=errors, rejected_orders=rejected_orders,
                  processing_wait=round(waited, 2))
    if params["packed"]:
        result["orders_packed"] = pack(claimed)
    else:
        result["orders"] = claimed
    if errors and params["fail_on_item_error"]:
        module.fail_json(msg="%d order(s) could not be claimed: %s" % (
            len(errors), "; ".join("%s: %s" % (e["uuid"], e["msg"]) for e in errors)), **result)
    module.exit_json(**result)
