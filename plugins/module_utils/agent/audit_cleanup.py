# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""audit_cleanup's plan: which orphans are deleted, marked first seen gone or kept, on evidence."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit import ORPHAN, TERMINATED
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_marks import (
    DEFAULT_GRACE_HOURS,
    MARK,
    UNMARK,
    first_sighting_text,
    holding_mark,
    utc_text,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import utc_now

DELETE = "delete"
DELETED = "deleted"
WOULD_DELETE = "would delete"
# What a direct read of a resource in Waldur answers when the resource is gone: the audit
# deletes a holding only on one of these (never because a listing left the resource out).
NOT_FOUND = "not found"
GONE_ANSWERS = (NOT_FOUND, TERMINATED)
# How a direct read's answer starts when Waldur's answer proves nothing (a 404 that is not Waldur's
# own JSON, an HTML page): never evidence either way.
UNPROVEN_ANSWER = "unproven"
# The resource state of an orphan whose mark names no resource of the listing.
ABSENT = "absent"
DEFAULT_CLEANUP_MAX = 5


def _would_text(since, grace_hours):
    if since is None:
        return ("would be deleted with audit_cleanup: marked when a pass proves its resource gone, deleted %g h "
                "later if it is still gone" % grace_hours)
    return "would be deleted with audit_cleanup: first seen gone at %s, deleted %g h later if it is still gone" % (
        utc_text(since), grace_hours)


def _gone(item, answer):
    """``(True, "")`` when this pass proves the orphan's resource gone: a direct read answered
    Waldur's own not-found for a resource the listing does not hold, or Terminated for one it shows
    Terminated; else ``(False, why it is kept)``."""
    uuid, listed = item["resource_uuid"], item["resource_state"] or ABSENT
    if answer is None:
        return False, "a direct read of resource %s in Waldur was not made" % uuid
    if (answer, listed) in ((NOT_FOUND, ABSENT), (TERMINATED, TERMINATED)):
        return True, ""
    if answer in GONE_ANSWERS:
        # reads of one pass that disagree prove nothing (a listing of another Waldur, a restore meanwhile)
        return False, ("that resource %s is gone could not be proven: Waldur's listing shows it %s, a direct read "
                       "answered %s" % (uuid, listed if listed != ABSENT else "nowhere", answer))
    if answer.startswith(UNPROVEN_ANSWER):
        return False, "that resource %s is gone could not be proven: a direct read in Waldur was %s" % (uuid, answer)
    return False, "a direct read of resource %s in Waldur answered %s" % (uuid, answer)


def _alive(answer):
    """Whether a direct read's answer shows the resource in Waldur (not gone, and proven)."""
    return bool(answer) and answer not in GONE_ANSWERS and not answer.startswith(UNPROVEN_ANSWER)


def plan_cleanup(findings, enabled, min_age_hours, evidence=None, max_deletions=DEFAULT_CLEANUP_MAX,
                 waldur_lists_nothing=False, grace_hours=DEFAULT_GRACE_HOURS, now=None, check_mode=False):
    """Decide the cleanup of every orphan (its ``cleanup`` text) on evidence, never on absence.

    An orphan is a *candidate* when it is deletable (every object carries this offering's mark),
    and its youngest object is older than ``min_age_hours``. A candidate's resource is *proven gone*
    in this pass when ``evidence`` (what a direct read of its resource in Waldur answered, by the
    UUID on the mark: ``{uuid: "not found" | state | "unproven: why"}``) is Waldur's own not-found for
    a resource the listing does not hold, or Terminated for one the listing shows Terminated. Without
    ``evidence`` nothing is deleted: the caller reads the candidates and asks again.

    Proven gone once is not enough: a Waldur restored from an older backup answers 404 for every
    resource made since. The first pass that proves it marks the holding (``_mark``: :data:`MARK`;
    ``finish`` writes ``waldur-orphan-since``); a holding is deleted only when a later pass proves the
    resource gone again and finds the mark at least ``grace_hours`` old. A direct read showing the
    resource alive makes a mark no evidence (``_mark``: :data:`UNMARK`: removed).

    The circuit breaker refuses the whole cleanup (nothing deleted or marked, every candidate kept
    with the reason) when it would delete more than ``max_deletions`` holdings, or when Waldur listed
    no resource at all for an offering whose cloud holds marked objects (an empty, partial or wrong
    view of Waldur is not evidence that everything went).

    Returns ``(to_delete, candidates, refused)``: the findings to delete now, the resource UUIDs
    to read directly, and why the cleanup was refused ("" when it was not).
    """
    now = now or utc_now()
    eligible = []
    for item in findings:
        if item["kind"] != ORPHAN:
            continue
        if not item["deletable"]:
            item["cleanup"] = "kept: not deletable by the audit"
        elif item["age_hours"] is None:
            item["cleanup"] = "kept: its age is unknown"
        elif item["age_hours"] < min_age_hours:
            item["cleanup"] = "kept: younger than %g h" % min_age_hours
        else:
            eligible.append(item)
    refused = ""
    if eligible and waldur_lists_nothing:
        refused = ("Waldur lists no resource of this offering while %d of its holding%s carry its mark; an empty view of "
                   "Waldur is not evidence that they are orphans" % (len(eligible), _plural(len(eligible))))
    elif len(eligible) > max_deletions:
        refused = ("it would delete %d holdings, more than audit_cleanup_max=%d; check the report and raise "
                   "audit_cleanup_max if they are all orphans" % (len(eligible), max_deletions))
    if refused:
        for item in eligible:
            item["cleanup"] = "kept: cleanup refused (%s)" % ("Waldur lists no resource" if waldur_lists_nothing
                                                              else "more than audit_cleanup_max")
        return [], [], refused
    to_delete = []
    for item in eligible:
        uuid = item["resource_uuid"]
        answer = (evidence or {}).get(uuid)
        since, marked = holding_mark(item.get("_holding") or {}, now)
        if not enabled:
            item["cleanup"] = _would_text(since, grace_hours)
            continue
        if evidence is None:
            item["cleanup"] = "kept: resource %s was not read in Waldur directly" % uuid
            continue
        gone, why = _gone(item, answer)
        if not gone:
            item["cleanup"] = "kept: %s" % why
            if marked and _alive(answer):
                item["_mark"] = UNMARK  # the reason of the mark is gone: it is no evidence any more
            continue
        if since is None:
            item["_mark"] = MARK
            item["cleanup"] = first_sighting_text(now, grace_hours, marked=not check_mode)
            continue
        left = grace_hours - (now - since).total_seconds() / 3600.0
        if left > 0:
            item["cleanup"] = "kept: first seen gone at %s; deleted after %g h if still gone (%.1f h left)" % (
                utc_text(since), grace_hours, left)
            continue
        item["cleanup"] = DELETE
        to_delete.append(item)
    return to_delete, sorted(set(item["resource_uuid"] for item in eligible)), refused


def stale_marks(holdings, resources):
    """The holdings carrying a ``waldur-orphan-since`` mark whose resource Waldur's listing shows
    alive (any state but Terminated): the mark's reason is gone, so it is no evidence and
    audit_cleanup removes it. ``resources``: the listing, by UUID."""
    stale = []
    for holding in holdings:
        resource = resources.get(holding["owner"])
        if resource is not None and resource.get("state") != TERMINATED and \
                any(values for values in holding.get("marks") or []):
            stale.append((holding, resource))
    return stale


def _plural(count):
    return "" if count == 1 else "s"
