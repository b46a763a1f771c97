# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Accounting of the order pass: every order ends in exactly one outcome, counted and named.

``order_pass_report`` joins what the claim set aside (``skipped_orders``, ``errors``) with
what settling did (``results[].outcome``) into the counts of the pass summary and one line
per order that did not end ``done`` (in check mode, per order); ``unfinished_outcomes`` turns
the claimed orders into ``retry`` outcomes when the backend task failed as a whole, so
settling leaves them for the next pass with one short reason instead of leaving them without
a word.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.filter.site_agent import listed, unpacked
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import like
from ansible_collections.waldur.site_agent.plugins.module_utils.core.http import shorten

# rejected: turned down before approval, the cloud would refuse what the order names (the claim's
# rejected_orders; one already executing is erred instead)
OUTCOMES = ("done", "erred", "rejected", "retry", "refused", "failed", "skipped", "diverged")
# held: left pending-provider because it does not fit in the cloud's quota (the claim's skipped_orders
# with outcome held); counted after the others, and in the summary only when there are some, so the
# summary of a pass without any reads as before
HELD = "held"
REASON_LIMIT = 300


def one_line(text, limit=REASON_LIMIT):
    """``text`` on one line, at most ``limit`` characters."""
    return shorten(" ".join(str(text or "").split()), limit)


def unfinished_outcomes(orders, reason):
    """Claimed orders -> ``retry`` outcomes for ``waldur_orders`` (state settled), all with
    ``reason`` (the backend task's failure, on one line); packed when the orders were."""
    message = "the backend task failed as a whole: %s" % one_line(reason)
    outcomes = []
    for order in unpacked(orders, "orders"):
        if not isinstance(order, dict) or not order.get("uuid"):
            raise AnsibleFilterError("unfinished_outcomes expects the claimed orders (waldur_orders' orders)")
        resource = order.get("resource") or {}
        outcomes.append({"order_uuid": order["uuid"], "resource_uuid": order.get("marketplace_resource_uuid"),
                         "resource_name": order.get("resource_name") or resource.get("name") or "",
                         "failed": True, "retry": True, "msg": message,
                         "backend_id": resource.get("backend_id") or None})
    return like(outcomes, orders)


def _line(outcome, entry, check_mode, limit=REASON_LIMIT):
    name = entry.get("resource_name") or "(no name)"
    word = ("would_" + outcome) if check_mode and outcome in ("done", "erred") else outcome
    if check_mode and outcome == "rejected":
        word = "would_reject"
    if check_mode and outcome == HELD:
        word = "would_hold"
    return "%s: %s (order %s): %s" % (word, name, entry.get("order_uuid") or entry.get("uuid"),
                                      one_line(entry.get("msg") or outcome, limit))


def order_pass_report(claim, settle=None, check_mode=False, act=None, listing=None):
    """``{counts, lines}`` of an order pass: the counts of the outcomes over every order
    the pass listed, and one line (outcome, resource name, order UUID, reason) per order that
    did not end done. The claim's ``rejected_orders`` (turned down before approval) count as
    ``rejected`` (``erred`` for one already executing). In check mode ``done``, ``erred`` and
    ``rejected`` are what the pass would do, and are counted as ``would_done``, ``would_erred`` and
    ``would_reject``; a dry run is read for what it would do,
    so every order gets its line there, and the backend's own words (``act``'s results, what it
    would build or change) lead the reason. ``listing``: the listing before the catalogue check, whose
    ``errors`` (an order whose resource could not be read) count as ``failed``: the claim leaves such
    an order pending, as one placed after the check, but the pass must not look green. The claim's
    ``skipped_orders`` with outcome ``held`` (past the cloud's quota, left ``pending-provider``) count as
    ``held`` (``would_hold`` in check mode), a key of the counts and of the summary only when there are
    some; ``held_for_quota`` says how many, and the order pass then ends with exit status 4 (work left for a
    later run), as for ``retry``."""
    claim = claim or {}
    unlisted = dict((entry.get("uuid"), entry) for entry in (listing or {}).get("errors") or [] if entry.get("uuid"))
    settle = settle or {}
    backend_says = {}
    if check_mode:
        for item in listed(act, "results"):
            if isinstance(item, dict) and item.get("order_uuid") and item.get("msg"):
                backend_says[item["order_uuid"]] = one_line(item["msg"])
    names = dict((order.get("uuid"), order.get("resource_name") or (order.get("resource") or {}).get("name"))
                 for order in listed(claim, "orders"))
    counts = dict((outcome, 0) for outcome in OUTCOMES)
    lines = []
    for uuid, entry in sorted(unlisted.items()):
        counts["failed"] += 1
        reason = "could not be judged before approval, left as it is: %s" % entry.get("msg")
        lines.append(_line("failed", dict(entry, order_uuid=uuid, msg=reason), check_mode))
    quota_held = 0
    for entry in claim.get("skipped_orders") or []:
        if entry.get("uuid") in unlisted:
            continue  # counted above, with the reason the listing gave
        if entry.get("outcome") == HELD:
            quota_held += 1
            lines.append(_line(HELD, dict(entry, order_uuid=entry.get("uuid")), check_mode))
            continue
        counts["skipped"] += 1
        lines.append(_line("skipped", dict(entry, order_uuid=entry.get("uuid")), check_mode))
    for entry in claim.get("rejected_orders") or []:
        outcome = "erred" if entry.get("outcome") == "erred" else "rejected"
        counts[outcome] += 1
        lines.append(_line(outcome, dict(entry, order_uuid=entry.get("uuid")), check_mode))
    for entry in claim.get("errors") or []:
        counts["failed"] += 1
        lines.append(_line("failed", dict(entry, order_uuid=entry.get("uuid"),
                                          msg="could not be claimed: %s" % entry.get("msg")), check_mode))
    for entry in listed(settle, "results"):
        outcome = entry.get("outcome") or ("failed" if entry.get("failed") else "skipped")
        if outcome not in counts:
            outcome = "failed"
        counts[outcome] += 1
        if outcome != "done" or check_mode:
            entry = dict(entry, resource_name=entry.get("resource_name") or names.get(entry.get("order_uuid")))
            backend, limit = backend_says.get(entry.get("order_uuid")), REASON_LIMIT
            if outcome == "diverged":  # what each side holds: both halves are the point
                limit = 2 * REASON_LIMIT
            if backend and backend != one_line(entry.get("msg")):
                # each part on its own limit: the backend's plan alone can be long (Azure's chain)
                entry["msg"] = "%s; %s" % (backend, one_line(entry.get("msg") or outcome))
                limit = 2 * REASON_LIMIT + 2
            lines.append(_line(outcome, entry, check_mode, limit))
    order = list(OUTCOMES)
    if check_mode:
        counts["would_done"] = counts.pop("done")
        counts["would_erred"] = counts.pop("erred")
        counts["would_reject"] = counts.pop("rejected")
        order = ["would_done", "would_erred", "would_reject"] + order[3:]
    if quota_held:
        held_key = "would_hold" if check_mode else HELD
        counts[held_key] = quota_held
        order.append(held_key)
    # Orders the backend held for the operator (``held``: e.g. two droplets carry one resource's
    # tag and none is provably a copy) stay alive as retry, yet the pass must not look green.
    held = set(result.get("order_uuid") for result in _act_failures(act) if result.get("held"))
    held = len(held & set(entry.get("order_uuid") for entry in listed(settle, "results")
                          if entry.get("outcome") == "retry"))
    counts = dict((key, counts[key]) for key in order)  # in the order of the summary
    return {"counts": counts, "lines": lines, "orders": sum(counts.values()),
            "summary": " ".join("%s=%d" % (key, value) for key, value in counts.items()),
            # held: kept alive as retry for the operator; diverged: Waldur erred the order after the
            # backend acted. Either way Waldur and the cloud disagree, so the pass fails.
            "held": held, "unfinished": counts["failed"] + counts["refused"] + counts["diverged"] + held,
            "diverged": counts["diverged"], "held_for_quota": quota_held}


def _act_failures(act):
    """The backend's failed results: its ``failures`` (a packed run names them there) or its results."""
    if not isinstance(act, dict):
        return []
    if isinstance(act.get("failures"), list):
        return [result for result in act["failures"] if isinstance(result, dict)]
    return [result for result in listed(act, "results") if isinstance(result, dict) and result.get("failed")]


class FilterModule(object):
    """Accounting of the order pass."""

    def filters(self):
        return {
            "order_pass_report": order_pass_report,
            "unfinished_outcomes": unfinished_outcomes,
            "one_line": one_line,
        }
