# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Settling the marketplace orders of an offering with the backend's outcomes (``waldur_orders`` with state settled)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import BatchRunner, ItemError, count_results
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import require
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import unpack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import duration_words, parse_time, utc_now
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError, error_message
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import (
    IN_FLIGHT_RESOURCE_STATES,
    ORDER_SHAPE,
    RESOURCE_SHAPE,
    TERMINAL_ORDER_STATES,
    find_of_offering,
    normalize_order,
    normalize_resource,
    order_path,
    provider_resource_path,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.order_types import builds

TRACEBACK_LIMIT = 2000
# What settling needs of an order: listed, or read on its own, before its writes.
SETTLE_ORDER_FIELDS = ["uuid", "type", "state", "offering_uuid", "marketplace_resource_uuid", "resource_name", "created",
                       "error_message"]
# diverged: Waldur erred the order after the backend acted on it (or turned it erred once done), so
# Waldur and the cloud disagree; the result says how, and the pass fails.
OUTCOMES = ("done", "erred", "retry", "refused", "failed", "skipped", "diverged")


def _short_traceback(text):
    if not text:
        return ""
    text = str(text)
    return text if len(text) <= TRACEBACK_LIMIT else "...\n" + text[-TRACEBACK_LIMIT:]


def _settle_order(raw):
    """An order as settling reads it: the normalised order and Waldur's error message."""
    order = normalize_order(raw)
    order["error_message"] = (raw or {}).get("error_message") or ""
    return order


class Settle:
    def __init__(self, module, client, offering_uuid, retry_max_age=None, now=None):
        self.module = module
        self.client = client
        self.offering_uuid = offering_uuid
        self.check_mode = module.check_mode
        self.retry_max_age = retry_max_age
        self.now = now or utc_now
        self.listed_orders = {}
        self.listed_resources = {}

    def list_current(self, outcomes):
        """The orders to settle and the resources to record on, from one paged listing each where
        that pays (``WaldurClient.find``): the orders among the offering's executing ones, the
        resources (backend id and metadata) among its in-flight ones. What a listing misses (an
        order already terminal, a resource no longer in flight) or a listing that fails is read
        on its own by the order that needs it."""
        listed = find_of_offering(self.module, self.client, "marketplace-orders/", self.offering_uuid,
                                  [outcome["order_uuid"] for outcome in outcomes], ["executing"], SETTLE_ORDER_FIELDS,
                                  shape=ORDER_SHAPE)
        self.listed_orders = dict((uuid, _settle_order(raw)) for uuid, raw in listed.items())
        recording = []
        for outcome in outcomes:
            order = self.listed_orders.get(outcome["order_uuid"]) or {}
            resource_uuid = outcome["resource_uuid"] or order.get("marketplace_resource_uuid")
            if resource_uuid and (outcome["backend_id"] or outcome["backend_metadata"]):
                recording.append(resource_uuid)
        listed = find_of_offering(self.module, self.client, "marketplace-provider-resources/", self.offering_uuid,
                                  recording, IN_FLIGHT_RESOURCE_STATES, ["uuid", "backend_id", "backend_metadata"],
                                  shape=RESOURCE_SHAPE)
        self.listed_resources = dict((uuid, normalize_resource(raw)) for uuid, raw in listed.items())

    def recheck_done(self, outcomes, results, since):
        """Waldur's worker may err an order after it was set done (its processor ran late): the
        orders set done by this run are read again, from one listing of the offering's orders
        erred since settling started when two or more were (else on their own). One that turned
        erred after the backend acted on it becomes ``diverged``."""
        done = dict((result["order_uuid"], index) for index, result in enumerate(results)
                    if result.get("outcome") == "done")
        if not done:
            return
        fields = ["uuid", "type", "state", "error_message"]
        try:
            if len(done) >= 2:
                listed = self.client.find("marketplace-orders/", list(done), params={
                    "offering_uuid": self.offering_uuid, "state": ["erred"], "field": fields,
                    "modified": since.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}, shape=ORDER_SHAPE)
            else:
                uuid = next(iter(done))
                listed = {uuid: self.client.get(order_path(uuid), params={"field": fields}, shape=ORDER_SHAPE)}
        except WaldurApiError as exc:
            self.module.warn("could not read the orders set done again to see whether Waldur erred them: %s" % exc)
            return
        by_uuid = dict((outcome["order_uuid"], outcome) for outcome in outcomes)
        for uuid, raw in listed.items():
            if (raw or {}).get("state") != "erred" or uuid not in done:
                continue
            index = done[uuid]
            order = dict(self.listed_orders.get(uuid) or {}, **normalize_order(raw))
            order["resource_name"] = order.get("resource_name") or results[index].get("resource_name") or ""
            item = _Item(by_uuid[uuid], order)
            item.actions = list(results[index].get("actions") or [])
            if self.acted(item):
                results[index] = self.diverged(item, raw.get("error_message"))
            else:
                results[index] = dict(results[index], outcome="skipped", state="erred", msg=(
                    "%s; then Waldur erred it (Waldur: %s); nothing had changed in the cloud"
                    % (results[index].get("msg"), " ".join(str(raw.get("error_message") or "").split()))))

    def resource(self, resource_uuid):
        listed = self.listed_resources.get(resource_uuid)
        if listed is not None:
            return listed
        return normalize_resource(self.client.get(provider_resource_path(resource_uuid), shape=RESOURCE_SHAPE))

    def settle_one(self, outcome):
        uuid = outcome["order_uuid"]
        # The one read of the order (listed, or on its own): its state decides (done only from
        # executing, erred only when not terminal). A change after it makes Waldur answer 409,
        # which is read again below.
        order = require(self.listed_orders.get(uuid) or _settle_order(
            self.client.get(order_path(uuid), params={"field": SETTLE_ORDER_FIELDS}, shape=ORDER_SHAPE)),
            "order %s" % uuid)
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
        refused, conflict = self._transition(item, "set_state_done")
        if refused:
            return refused
        if conflict:
            # The order moved after it was read (Waldur's worker erred it, cancelled, settled by
            # another run): look again.
            current = self._current(uuid)
            state = item.state = current["state"]
            if state == "done":
                return item.result("skipped", "order was set done meanwhile")
            if state in (None, "executing"):
                raise ItemError("set_state_done was refused (%s); the order is %s" % (conflict, state))
            if state == "erred" and self.acted(item):
                # erred between our read and our write, after the backend acted: the two sides disagree
                return self.diverged(item, current.get("error_message"))
            return item.result("skipped", "order is %s, not executing; not set done" % state)
        item.state = "done"
        return item.result("done", "set done")

    def _transition(self, item, action, body=None, refused_detail=""):
        """POST an order transition the caller has listed in ``item.actions``. Returns
        ``(refused result, None)`` when Waldur refused it for good, ``(None, conflict error)`` when
        the order moved since it was read (the caller reads it again), ``(None, None)`` when Waldur
        took it; a transient failure raises, so the batch retries the item."""
        try:
            self.client.post(order_path(item.uuid, action), json=body)
        except WaldurApiError as exc:
            item.actions.remove(action)
            if exc.conflict:
                return None, exc
            if exc.transient:
                raise
            return item.result("refused", "Waldur refused %s (%s); the order is left %s%s"
                               % (action, exc, item.order["state"], refused_detail), failed=True), None
        return None, None

    def _state(self, uuid):
        return self._current(uuid)["state"]

    def _current(self, uuid):
        """The order's state (and Waldur's error message) now, read on its own."""
        return self.client.get(order_path(uuid), params={"field": ["uuid", "state", "error_message"]},
                               shape=ORDER_SHAPE)

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
            exc = self._post_to_resource(item, "set_backend_id", {"backend_id": backend_id})
            if exc is not None:
                if exc.transient and not best_effort:
                    raise exc
                refusal = "Waldur refused to record backend id %s (%s)" % (backend_id, exc)
                if best_effort:
                    item.notes.append(refusal)
                    return None
                return refusal
            item.notes.append("backend id %s %s" % (backend_id, "would be recorded" if self.check_mode else "recorded"))
        # an empty mapping means the backend knows nothing new, not "erase what Waldur has"
        if metadata and metadata != resource["backend_metadata"]:
            exc = self._post_to_resource(item, "set_backend_metadata", {"backend_metadata": metadata})
            if exc is not None:  # best effort: the order is done regardless
                item.notes.append("backend metadata not recorded (%s)" % exc)
        return None

    def _post_to_resource(self, item, action, body):
        """Post one of the item's resource's provider actions (named in ``item.actions`` while it
        stands; nothing is sent in check mode). Returns Waldur's failure, or None."""
        item.actions.append(action)
        if self.check_mode:
            return None
        try:
            self.client.post(provider_resource_path(item.resource_uuid, action), json=body)
        except WaldurApiError as exc:
            item.actions.remove(action)
            return exc
        return None

    def _terminal(self, item):
        """The order is done, erred, canceled or rejected already: nothing to settle. A machine the
        backend made for it meanwhile (Waldur erred the order while the pass built) gets its id
        recorded on the resource, so that terminating the resource deletes it. When Waldur erred
        the order after the backend acted on it, Waldur and the cloud disagree: ``diverged``."""
        state = item.order["state"]
        if state != "done" and item.outcome["backend_id"]:
            self._record(item, item.outcome["backend_id"], None, best_effort=True)
        if state == "erred" and self.acted(item):
            return self.diverged(item, item.order.get("error_message"))
        return item.result("skipped", "order is already %s; %s" % (
            state, "nothing else written" if item.actions else "nothing written"))

    @staticmethod
    def acted(item):
        """Whether the backend changed something in the cloud for the order (its result says
        ``changed``), or a machine exists for an order that builds one."""
        outcome = item.outcome
        if outcome["changed"]:
            return True
        return builds(item.order.get("type")) and bool(outcome["backend_id"]) and not outcome["failed"]

    def diverged(self, item, error_message):
        """The ``diverged`` result: what the backend did (its message), and what Waldur keeps for
        the resource (state, limits, backend id; one read, best effort), with what to do."""
        waldur = ""
        if item.resource_uuid:
            try:
                resource = normalize_resource(self.client.get(
                    provider_resource_path(item.resource_uuid),
                    params={"field": ["uuid", "name", "state", "limits", "backend_id"]}, shape=RESOURCE_SHAPE))
                limits = " ".join("%s=%s" % (key, resource["limits"][key]) for key in sorted(resource["limits"]))
                waldur = "; Waldur keeps resource %s %s%s%s" % (
                    resource["name"] or resource["uuid"], resource["state"],
                    " with limits %s" % limits if limits else "",
                    " and backend id %s" % resource["backend_id"] if resource["backend_id"] else "")
            except WaldurApiError as exc:
                waldur = "; the resource could not be read (%s)" % exc
        backend = item.outcome["msg"] or ("machine %s" % item.outcome["backend_id"] if item.outcome["backend_id"]
                                          else "the backend acted")
        item.state = "erred"
        return item.result(
            "diverged", "Waldur erred the order after the backend acted (Waldur: %s): %s%s"
            % (" ".join(str(error_message or "no message").split()), backend, waldur),
            failed=True)

    def _age(self, item):
        created = parse_time(item.order.get("created"))
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
                       % (duration_words(age), duration_words(self.retry_max_age), reason, cloud))
            return self._erred(item, message, item.outcome.get("exception"))
        verb = "would leave" if self.check_mode else "left"
        return item.result("retry", "%s %s for the next pass: %s" % (verb, item.order["state"], reason))

    def _erred(self, item, message, exception):
        message = message or "the backend reported a failure without a message"
        item.actions.append("set_state_erred")
        if self.check_mode:
            return item.result("erred", "would set erred: %s" % message)
        refused, conflict = self._transition(
            item, "set_state_erred", {"error_message": message, "error_traceback": _short_traceback(exception)},
            ": " + message)
        if refused:
            return refused
        if conflict:
            state = self._state(item.uuid)
            item.state = state
            if state not in TERMINAL_ORDER_STATES:
                raise ItemError("set_state_erred was refused (%s); the order is %s" % (conflict, state))
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


def parse_outcomes(module, outcomes, packed=None):
    """The outcomes of O(outcomes), then those of O(outcomes_packed), checked; bad input fails naming
    the entry and key (``outcomes_packed[3].failed``)."""
    try:
        more = unpack(packed, "outcomes_packed")
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    parsed = []
    positions = {}
    entries = [("outcomes[%d]" % index, raw) for index, raw in enumerate(outcomes or [])]
    entries += [("outcomes_packed[%d]" % index, raw) for index, raw in enumerate(more)]
    for where, raw in entries:
        if not isinstance(raw, dict):
            module.fail_json(msg="%s must be a mapping, got %s" % (where, type(raw).__name__))
        if raw.get("order_uuid") in (None, ""):
            module.fail_json(msg="%s.order_uuid is required (the order this outcome settles)" % where)
        uuid = module.uuid_param(raw["order_uuid"], "%s.order_uuid" % where)
        if uuid in positions:
            module.fail_json(msg="%s.order_uuid repeats %s.order_uuid (%s); give one outcome per order"
                             % (where, positions[uuid], uuid))
        positions[uuid] = where
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
            # what the backend changed in the cloud (a backend module's result), for diverged
            "changed": bool(raw.get("changed")) and not failed,
        })
    return parsed


def run_settle(module, client, offering_uuid, params):
    if params["outcomes"] is None and params["outcomes_packed"] is None:
        module.fail_json(msg="outcomes (or outcomes_packed) is required when state is settled: a list of "
                             "{order_uuid, failed, retry, msg, backend_id, backend_metadata} (a backend module's results)")
    if params["retry_max_age"] is not None and params["retry_max_age"] <= 0:
        module.fail_json(msg="retry_max_age must be a positive number of seconds, got %s" % params["retry_max_age"])
    outcomes = parse_outcomes(module, params["outcomes"], params["outcomes_packed"])
    settle = Settle(module, client, offering_uuid, retry_max_age=params["retry_max_age"])
    settle.list_current(outcomes)

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
    started = utc_now()
    results = runner.run(outcomes)
    if not module.check_mode:
        settle.recheck_done(outcomes, results, started)
    for result in results:
        result.setdefault("state", None)
        result.setdefault("actions", [])
        if "outcome" not in result:  # not finished within the deadline: the next pass settles it
            result.update(outcome="retry", failed=False)
        result["retry"] = result["outcome"] == "retry"
    counts = count_results(results, **dict((name, _outcome_is(name)) for name in OUTCOMES))
    # "failed" and "skipped" are Ansible's own result keys (a non-zero "skipped" would mark the
    # task skipped): their counts live in counts only.
    runner.finish(results, failed=lambda result: result["outcome"] in ("failed", "refused", "diverged"),
                  packed=params["packed"],
                  fail_msg=lambda failures, results: "%d of %d order(s) could not be settled" % (
                      len(failures), len(results)),
                  counts=counts, done=counts["done"], erred=counts["erred"], retry=counts["retry"],
                  refused=counts["refused"], diverged=counts["diverged"],
                  unsettled=counts["failed"] + counts["refused"])


def _outcome_is(name):
    return lambda result: result["outcome"] == name
