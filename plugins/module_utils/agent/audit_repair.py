# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""audit_repair's plan: which size drifts are resized back to what Waldur records, on evidence."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit import DRIFT
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import limits_equal

# A repair ends in one of these (the text after "refused: " / "failed: " says why).
REPAIRED = "repaired"
WOULD_REPAIR = "would repair"
REFUSED = "refused"
FAILED = "failed"
DEFAULT_REPAIR_MAX = 5
# The only state in which a direct read lets audit_repair act: no order is in flight for the resource.
REPAIRABLE_STATE = "OK"


def limits_text(limits):
    """``cpu=1 ram=1024``: a resource's limits as the lines of the passes show them."""
    return " ".join("%s=%s" % (key, (limits or {})[key]) for key in sorted(limits or {})) or "none"


def not_owned_text(label, owners, resource_uuid):
    """Why a machine is not this resource's to repair (its owner marks are ``owners``), or ""."""
    owners = sorted(set(owners or ()))
    if owners == [resource_uuid]:
        return ""
    if not owners:
        why = "it carries no owner mark"
    elif resource_uuid not in owners:
        why = "it carries the owner mark of another resource (%s)" % ", ".join(owners)
    else:
        why = "it carries the owner marks of %d resources (%s)" % (len(owners), ", ".join(owners))
    return ("%s is not provably this resource's: %s; audit_repair acts only on a machine carrying this "
            "resource's owner mark and no other" % (label, why))


def _not_owned(item):
    plan = item["_repair"]
    if "owners" not in plan:
        # the backend did not say whose machine it is: that is no proof it is this resource's
        return "%s: whose machine it is is unknown; audit_repair acts only on a machine carrying this " \
               "resource's owner mark" % plan.get("label", plan.get("key"))
    return not_owned_text(plan.get("label", plan.get("key")), plan["owners"], item["resource_uuid"])


def plan_repair(findings, enabled, evidence=None, max_repairs=DEFAULT_REPAIR_MAX, unsupported=""):
    """Decide which machines ``audit_repair`` brings back to what Waldur records (each finding's
    ``repair`` text), on evidence, and never by deleting anything.

    A *candidate* is a size drift whose check named a repair (the size Waldur's limits map to).
    The machine must carry this resource's owner mark and no other (``owners`` of the listing; the
    backend checks it again on a fresh read before it acts): never an unmarked machine, never
    another resource's that a backend id points at.
    It is repaired only when ``evidence`` (what a direct read of its resource in Waldur answered,
    by UUID: ``{uuid: {"state", "limits"}}``, or a text such as ``not found`` or the state when
    the read returned nothing) shows the resource OK with the very limits the audit judged on.
    Power drift is not repaired here: the membership_sync pass enforces power.

    The circuit breaker refuses the whole repair (nothing resized) above ``max_repairs``.
    ``unsupported`` (why this backend cannot repair) refuses every candidate with that reason.

    Returns ``(to_repair, candidates, refused)`` as ``plan_cleanup`` does.
    """
    eligible = []
    for item in findings:
        if item["kind"] != DRIFT or item["check"] != "size":
            continue
        if not item.get("_repair"):
            item["repair"] = "%s: Waldur's limits map to no size to resize it to" % REFUSED if enabled else ""
        elif unsupported:
            item["repair"] = "%s: %s" % (REFUSED, unsupported) if enabled else ""
        elif _not_owned(item):
            item["repair"] = "%s: %s" % (REFUSED, _not_owned(item)) if enabled else ""
        else:
            eligible.append(item)
    refused = ""
    if enabled and len(eligible) > max_repairs:
        refused = ("it would resize %d machines, more than audit_repair_max=%d; check the report and raise "
                   "audit_repair_max if they all diverged" % (len(eligible), max_repairs))
        for item in eligible:
            item["repair"] = "%s: more than audit_repair_max" % REFUSED
        return [], [], refused
    to_repair = []
    for item in eligible:
        uuid, target = item["resource_uuid"], item["_repair"]["size"]
        answer = (evidence or {}).get(uuid)
        if not enabled:
            item["repair"] = "audit_repair would resize it to %s" % target
        elif evidence is None:
            item["repair"] = "kept: resource %s was not read in Waldur directly" % uuid
        elif not isinstance(answer, dict):
            item["repair"] = "%s: a direct read of resource %s in Waldur %s" % (
                REFUSED, uuid, "answered %s" % answer if answer else "was not made")
        elif answer.get("state") != REPAIRABLE_STATE:
            item["repair"] = "%s: a direct read of resource %s in Waldur shows it %s (only an OK resource is " \
                             "repaired: no order may be in flight)" % (REFUSED, uuid, answer.get("state"))
        elif not limits_equal(answer.get("limits"), item["_limits"]):
            item["repair"] = "%s: Waldur's limits changed since the listing (now %s)" % (
                REFUSED, limits_text(answer.get("limits")))
        else:
            item["repair"] = "resize to %s" % target
            to_repair.append(item)
    return to_repair, sorted(set(item["resource_uuid"] for item in eligible)), refused
