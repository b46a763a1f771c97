# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""What an audit finds when it sets a cloud's objects beside Waldur's resources.

The backend modules (``do_audit``, ``azure_audit``) list their cloud and describe it in two
shapes; everything else is decided here, the same way for every backend:

* a *holding* is an object (a droplet, a dedicated resource group, the objects of one
  machine in a shared group) that carries a Waldur resource's owner mark::

      {"key", "owner" (resource uuid, 32 hex), "object" (what the operator reads),
       "ids" (cloud ids), "created_at", "marked" (provably this offering's mark),
       "match" (set of backend-id keys under which Waldur would record it),
       "youngest_at" (creation time of its youngest object; the age bound is judged on it),
       "unmarked" (labels of what it holds without this mark; a holding with any is never
       deleted by the audit)}

* a *machine* is anything a backend id may name, marked or not, by backend-id key::

      {"object", "power" ("on", "off", "stopped", or None when in between), "size",
       "created_at", "legacy_name" (unmarked, but named the way the agent names machines)}

Findings are ``orphan``, ``vanished``, ``drift`` (``check``: ``power``, ``size``,
``erred_resource``, ``duplicate``, ``backend_id``), ``stuck_order`` and ``orphan_by_name``
(information only: an unmarked machine named like the agent's that nothing in this offering
records).

A holding may carry ``marks``: for each of its objects that carries its owner mark, the values of
the ``waldur-orphan-since`` marks on it (see :data:`ORPHAN_MARK`); a machine may carry ``owners``
(the resource UUIDs its owner marks name) and ``label`` (``droplet 418000014``).

A check may name a repair (``{"size": target, "from": the machine's size}``): ``plan_repair``
decides on evidence whether ``audit_repair`` may bring the machine back to what Waldur records.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import parse_time, utc_now

ORPHAN = "orphan"
VANISHED = "vanished"
DRIFT = "drift"
STUCK_ORDER = "stuck_order"
ORPHAN_BY_NAME = "orphan_by_name"
FINDING_KINDS = (ORPHAN, VANISHED, DRIFT, STUCK_ORDER, ORPHAN_BY_NAME)
# Kinds reported for information: they do not make an audit's status "findings".
INFORMATION_KINDS = (ORPHAN_BY_NAME,)
COUNT_NAMES = {ORPHAN: "orphans", VANISHED: "vanished", DRIFT: "drift", STUCK_ORDER: "stuck_orders",
               ORPHAN_BY_NAME: "orphans_by_name"}

TERMINATED = "Terminated"
# States whose backend object must exist (vanished) and match the resource (drift).
LIVE_STATES = ("OK", "Erred", "Updating")
CLEAN = "clean"
FINDINGS = "findings"
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
# The first sighting of a holding whose resource is proven gone is remembered on the cloud objects
# themselves, where the next pass finds it: passes keep no state of their own (under AWX every job
# runs in a fresh container), and a mark cannot be lost with a host or a volume. A DigitalOcean
# droplet gets the tag ``waldur-orphan-since:20261204T120000Z``, an ARM object the tag
# ``waldur-orphan-since`` with the value ``20261204T120000Z`` (UTC). audit_cleanup deletes only when
# a later pass proves the resource gone again and finds the mark at least the grace period old: one
# answer of a Waldur restored from an older backup (or pointed at the wrong place) deletes nothing.
ORPHAN_MARK = "waldur-orphan-since"
MARK_FORMAT = "%Y%m%dT%H%M%SZ"
DEFAULT_GRACE_HOURS = 24.0
# Clocks of the agent and the cloud may differ this much: a mark further in the future, or older
# than the object it is on, was not written by a pass of the agent (a copied or ordered tag).
MARK_CLOCK_SKEW = datetime.timedelta(minutes=5)
# What plan_cleanup asks finish() to do with a holding's marks.
MARK = "mark"
UNMARK = "unmark"
ERRED = "Erred"
ERRED_RESOURCE = "erred_resource"
# A repair ends in one of these (the text after "refused: " / "failed: " says why).
REPAIRED = "repaired"
WOULD_REPAIR = "would repair"
REFUSED = "refused"
FAILED = "failed"
DEFAULT_REPAIR_MAX = 5
# The only state in which a direct read lets audit_repair act: no order is in flight for the resource.
REPAIRABLE_STATE = "OK"


# ---- time ---------------------------------------------------------------------------------

def age_hours(value, now):
    """Hours since ``value`` (rounded to 0.1), or None when the time is unknown."""
    moment = parse_time(value)
    if moment is None:
        return None
    return round(max(0.0, (now - moment).total_seconds()) / 3600.0, 1)


def iso(moment):
    return moment.astimezone(datetime.timezone.utc).isoformat() if moment else None


def _utc_text(moment):
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- the mark of a first sighting ---------------------------------------------------------

def mark_value(moment):
    """The value of a mark written at ``moment``: ``20261204T120000Z``."""
    return moment.astimezone(datetime.timezone.utc).strftime(MARK_FORMAT)


_COMPACT_MARK = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})?Z$")


def parse_mark(value):
    """The time a mark's value says (``20261204T120000Z``, ``20261204T1200Z`` or ISO 8601), or None."""
    text = str(value or "").strip().upper()
    compact = _COMPACT_MARK.match(text)
    if compact:
        year, month, day, hour, minute, second = compact.groups()
        text = "%s-%s-%sT%s:%s:%sZ" % (year, month, day, hour, minute, second or "00")
    try:
        return parse_time(text)
    except ValueError:  # digits that make no date (month 13)
        return None


def holding_mark(holding, now):
    """``(since, marked)``: when a pass first saw the holding's resource gone, from the marks on its
    objects (None unless every object carries a valid one; the youngest counts), and whether any of
    its objects carries a mark at all. A mark is valid when it is not in the future and not older
    than the holding's youngest object (a mark that came with the object, or a holding that changed
    since, starts the grace period again)."""
    marks = holding.get("marks") or []
    marked = any(values for values in marks)
    youngest = parse_time(holding.get("youngest_at") or holding.get("created_at"))
    if not marks or youngest is None:
        return None, marked
    sightings = []
    for values in marks:
        valid = [moment for moment in (parse_mark(value) for value in values or ())
                 if moment is not None and youngest - MARK_CLOCK_SKEW <= moment <= now + MARK_CLOCK_SKEW]
        if not valid:
            return None, marked
        sightings.append(max(valid))
    return max(sightings), marked


# ---- findings -----------------------------------------------------------------------------

def short_uuid(uuid):
    return (uuid or "")[:8]


def _finding(kind, resource=None, owner=None, obj="", ids=(), age=None, detail="", action="", check=None,
             deletable=False, holding=None, repair=None):
    return {
        "kind": kind,
        "check": check,
        "resource_uuid": (resource or {}).get("uuid") or owner,
        "resource_name": (resource or {}).get("name") or "",
        "resource_state": (resource or {}).get("state") or ("absent" if kind == ORPHAN and owner else ""),
        "object": obj,
        "object_ids": [str(value) for value in ids],
        "age_hours": age,
        "detail": detail,
        "action": action,
        "deletable": bool(deletable),
        "cleanup": "",
        "repair": "",
        # what the backend module needs to delete or repair it (dropped from the report)
        "_holding": holding,
        "_repair": repair,
        "_limits": dict((resource or {}).get("limits") or {}),
    }


class Auditor:
    """Findings of one offering's audit (see the module docstring for the shapes)."""

    def __init__(self, resources, now=None, backend_key=None, checks=(), cloud="the cloud"):
        self.resources = [resource for resource in resources or [] if resource.get("uuid")]
        self.by_uuid = dict((resource["uuid"], resource) for resource in self.resources)
        self.now = now or utc_now()
        # backend id -> the key under which machines are listed; None when it cannot be checked
        self.backend_key = backend_key or (lambda backend_id: str(backend_id).strip() or None)
        self.checks = list(checks)
        self.cloud = cloud
        self.findings = []
        self.notes = []

    def _key(self, resource):
        backend_id = str(resource.get("backend_id") or "").strip()
        return self.backend_key(backend_id) if backend_id else None

    # ---- objects carrying owner marks -------------------------------------------------------
    def holdings(self, holdings):
        by_owner = {}
        for holding in holdings:
            by_owner.setdefault(holding["owner"], []).append(holding)
        for owner in sorted(by_owner):
            self._owner(owner, by_owner[owner])

    def _orphan(self, holding, resource, detail, deletable, action=None):
        unmarked = list(holding.get("unmarked") or ())
        if unmarked and deletable:
            # A group of ours that also holds something else is not an orphan to delete whole:
            # whoever put the rest there may still use it.
            deletable = False
            action = ("it also holds %s, without this mark: check who uses it; delete what is this resource's "
                      "by hand (audit_cleanup deletes only holdings whose every object carries the mark)"
                      % ", ".join(unmarked))
        if action is None:
            action = ("audit_cleanup deletes it once it is older than the threshold and its resource is still "
                      "proven gone a grace period after a pass first saw it gone" if deletable else
                      "check it and delete it by hand if nothing uses it (audit_cleanup leaves it: %s)"
                      % ("it carries no owner mark of this offering" if not holding.get("marked")
                         else "Waldur still has a live resource for its mark"))
        self.findings.append(_finding(
            ORPHAN, resource, holding["owner"], holding["object"], holding.get("ids", ()),
            # the youngest object decides: a machine put in an old group an hour ago is an hour old
            age_hours(holding.get("youngest_at") or holding.get("created_at"), self.now), detail, action,
            deletable=deletable, holding=holding))

    def _owner(self, owner, items):
        resource = self.by_uuid.get(owner)
        if resource is None:
            for holding in items:
                self._orphan(holding, None, "no resource of this offering has UUID %s (it was never made, was "
                             "removed after its order erred, or belongs to another offering)" % owner,
                             deletable=holding.get("marked"),
                             action=None if holding.get("marked") else (
                                 "check whether another offering on the same account has resource %s; if none "
                                 "does, delete it by hand (audit_cleanup only deletes objects provably this "
                                 "offering's)" % owner))
            return
        if resource["state"] == TERMINATED:
            for holding in items:
                self._orphan(holding, resource, "its resource is Terminated", deletable=holding.get("marked"))
            return
        key = self._key(resource)
        if len(items) > 1:
            recorded = [holding["object"] for holding in items if key and key in holding["match"]]
            self.findings.append(_finding(
                DRIFT, resource, owner, "; ".join(holding["object"] for holding in items),
                [value for holding in items for value in holding.get("ids", ())],
                min_age([age_hours(holding.get("created_at"), self.now) for holding in items]),
                "%d objects in %s carry the mark of this one resource; Waldur records %s"
                % (len(items), self.cloud, recorded[0] if recorded else "none of them (backend id %s)"
                   % (resource.get("backend_id") or "empty")),
                "keep the one Waldur records, check which one is in use and delete the other by hand",
                check="duplicate"))
            return
        holding = items[0]
        if key and key in holding["match"]:
            return
        if not resource.get("backend_id"):
            if resource["state"] in ("Creating", "Terminating"):
                return  # its order is in progress: the order pass adopts or deletes it by its mark
            if resource["state"] == "Erred":
                # Erred is not gone: the audit deletes only what Waldur answers 404 or Terminated for.
                self._orphan(holding, resource, "its resource is Erred and records no backend id: Waldur shows "
                             "nothing for it and bills nothing", deletable=False,
                             action="terminate the resource in Waldur (the order pass then deletes what carries its "
                                    "mark), or delete it by hand; audit_cleanup deletes only what belongs to a resource "
                                    "Waldur answers 404 or Terminated for")
                return
            self.findings.append(_finding(
                DRIFT, resource, owner, holding["object"], holding.get("ids", ()),
                age_hours(holding.get("created_at"), self.now),
                "the resource is %s but records no backend id, while this object carries its mark"
                % resource["state"],
                "check that it is the resource's machine and set its id as the resource's backend id",
                check="backend_id"))
            return
        self._orphan(holding, resource, "it carries the mark of a resource that records another backend id (%s)"
                     % resource["backend_id"], deletable=False,
                     action="if it is the resource's machine, set its id as the resource's backend id; otherwise "
                            "delete it by hand (audit_cleanup leaves it: the resource is live)")

    # ---- resources and the machines their backend ids name ---------------------------------
    def machines(self, machines, holdings=()):
        """Vanished machines, drift, and machines only a Terminated resource records."""
        covered = set()
        for holding in holdings:
            covered.update(holding["match"])
        recorded = {}
        for resource in sorted(self.resources, key=lambda item: (item.get("name") or "", item["uuid"])):
            backend_id = str(resource.get("backend_id") or "").strip()
            if not backend_id:
                continue
            key = self.backend_key(backend_id)
            if key is None:
                if resource["state"] in LIVE_STATES:
                    self.notes.append("resource %s (%s): backend id %s cannot be checked in %s; it is left out"
                                      % (resource.get("name"), resource["uuid"], backend_id, self.cloud))
                continue
            machine = machines.get(key)
            if resource["state"] == TERMINATED:
                if machine is not None and key not in covered:
                    self.findings.append(_finding(
                        ORPHAN, resource, None, machine["object"], [backend_id],
                        age_hours(machine.get("created_at"), self.now),
                        "its resource is Terminated but the machine it records still exists; it carries no owner "
                        "mark", "delete it by hand (audit_cleanup never deletes an object without the owner mark)"))
                continue
            recorded.setdefault(key, []).append(resource)
            if resource["state"] not in LIVE_STATES:
                continue
            if machine is None:
                self.findings.append(_finding(
                    VANISHED, resource, None, backend_id, [backend_id], None,
                    "the resource records backend id %s, which no longer exists in %s" % (backend_id, self.cloud),
                    "find out who deleted it; terminate the resource in Waldur (the agent never re-creates a "
                    "machine under its old id) or restore the machine and set its new id"))
                continue
            if resource["state"] == ERRED:
                self._erred(resource, machine, backend_id)
            for check in self.checks:
                problem = check(resource, machine)
                if problem:
                    name, detail, action = problem[:3]
                    repair = dict(problem[3], key=key) if len(problem) > 3 and problem[3] else None
                    if repair is not None:
                        # whose machine it is, as the listing shows it: audit_repair acts only on a
                        # machine carrying this resource's owner mark and no other one
                        repair.update((name, machine[name]) for name in ("owners", "label") if name in machine)
                    self.findings.append(_finding(DRIFT, resource, None, machine["object"], [backend_id],
                                                  age_hours(machine.get("created_at"), self.now), detail, action,
                                                  check=name, repair=repair))
        for key, sharing in sorted(recorded.items()):
            live = [resource for resource in sharing if resource["state"] in LIVE_STATES]
            if len(live) > 1:
                machine = machines.get(key) or {"object": key}
                self.findings.append(_finding(
                    DRIFT, live[0], None, machine["object"], [key], None,
                    "%d resources record this backend id: %s" % (len(live), ", ".join(
                        "%s (%s)" % (resource.get("name"), resource["uuid"]) for resource in live)),
                    "keep the backend id on the resource the machine belongs to and correct the others",
                    check="backend_id"))
        for key in sorted(machines):
            machine = machines[key]
            if machine.get("legacy_name") and key not in recorded and key not in covered and \
                    not any(self._key(resource) == key for resource in self.resources):
                self.findings.append(_finding(
                    ORPHAN_BY_NAME, None, None, machine["object"], [machine.get("id") or key],
                    age_hours(machine.get("created_at"), self.now),
                    "carries no owner mark but is named the way the agent (or Waldur Mastermind) named machines, "
                    "and no resource of this offering records it",
                    "for information: if no other offering or tool owns it, delete it by hand (the audit never "
                    "deletes an object without the owner mark)"))

    def _erred(self, resource, machine, backend_id):
        """A machine that exists behind an Erred resource: the cloud bills it, Waldur shows it failed
        (its processor erred an order after the backend acted, or an order failed half way)."""
        power = {"on": "runs", "off": "is off", "stopped": "is stopped"}.get(machine.get("power"), "exists")
        self.findings.append(_finding(
            DRIFT, resource, None, machine["object"], [backend_id], age_hours(machine.get("created_at"), self.now),
            "the machine exists and %s (%s bills it) while Waldur shows the resource Erred" % (power, self.cloud),
            "if the order's work was done (the machine is what was ordered), set the resource OK in Waldur "
            "(or re-run the order); if it is not wanted, terminate it in Waldur and the order pass deletes it; "
            "the audit never deletes it", check=ERRED_RESOURCE))

    # ---- orders ------------------------------------------------------------------------------
    def stuck_orders(self, orders, holdings=(), machines=None):
        holdings_of = {}
        for holding in holdings:
            holdings_of.setdefault(holding["owner"], []).append(holding["object"])
        machines = machines or {}
        for order in orders or []:
            resource_uuid = order.get("marketplace_resource_uuid") or order.get("resource_uuid")
            resource = self.by_uuid.get(resource_uuid) or {"uuid": resource_uuid, "name": order.get("resource_name")}
            key = self._key(resource)
            if holdings_of.get(resource_uuid):
                cloud = "%s carries its mark" % "; ".join(holdings_of[resource_uuid])
            elif key and key in machines:
                cloud = "the machine it records exists (%s)" % machines[key]["object"]
            elif key:
                cloud = "the machine it records (%s) does not exist" % resource.get("backend_id")
            else:
                cloud = "nothing carries its mark"
            outcome = "Waldur: resource %s, backend id %s; %s: %s" % (
                resource.get("state") or "unknown", resource.get("backend_id") or "none", self.cloud, cloud)
            if order.get("error_message"):
                outcome += "; last error: %s" % order["error_message"]
            self.findings.append(_finding(
                STUCK_ORDER, resource, resource_uuid, "order %s (%s)" % (order.get("uuid"), order.get("type")),
                [order.get("uuid")], order.get("age_hours"),
                "%s order executing for %s h (last change %s). %s" % (
                    order.get("type"), order.get("age_hours"), order.get("modified") or order.get("created"), outcome),
                "run the order pass and read its log for this order: it adopts a machine that exists and settles "
                "the order; if it cannot finish, err the order in Waldur with the reason"))

    # ---- result ------------------------------------------------------------------------------
    def sorted_findings(self):
        order = dict((kind, index) for index, kind in enumerate(FINDING_KINDS))

        def key(item):
            return order[item["kind"]], item["resource_name"] or "", item["resource_uuid"] or "", item["object"]
        return sorted(self.findings, key=key)


def power_check(resource, machine):
    """Drift between a machine's power and the resource's paused/downscaled flags (which the
    membership_sync pass enforces: paused or downscaled means off, anything else running)."""
    power = machine.get("power")
    flags = [flag for flag in ("paused", "downscaled") if resource.get(flag)]
    if flags and power in ("on", "stopped"):
        return ("power", "the resource is %s in Waldur but the machine is %s" % (
            " and ".join(flags), "running" if power == "on" else "stopped, still allocated and billed"),
            "the next membership_sync pass powers it off (or do it by hand); find out who started it")
    if not flags and power in ("off", "stopped"):
        return ("power", "the machine is %s while the resource is neither paused nor downscaled" % (
            "off" if power == "off" else "stopped"),
            "the next membership_sync pass starts it; if it must stay off, pause the resource in Waldur")
    return None


def min_age(ages):
    known = [age for age in ages if age is not None]
    return min(known) if known else None


def _would_text(since, grace_hours):
    if since is None:
        return ("would be deleted with audit_cleanup: marked when a pass proves its resource gone, deleted %g h "
                "later if it is still gone" % grace_hours)
    return "would be deleted with audit_cleanup: first seen gone at %s, deleted %g h later if it is still gone" % (
        _utc_text(since), grace_hours)


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


def first_sighting_text(since, grace_hours, marked):
    """The cleanup of a holding first seen gone in this pass (``marked``: the mark written, else the
    mark check mode would write)."""
    return "kept: first seen gone at %s (%s %s %s); deleted after %g h if still gone" % (
        _utc_text(since), "marked" if marked else "would mark", ORPHAN_MARK, mark_value(since), grace_hours)


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
                _utc_text(since), grace_hours, left)
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


def limits_text(limits):
    """``cpu=1 ram=1024``: a resource's limits as the lines of the passes show them."""
    return " ".join("%s=%s" % (key, (limits or {})[key]) for key in sorted(limits or {})) or "none"


def _same_limits(first, second):
    def number(value):
        try:
            return float(value)
        except (TypeError, ValueError):
            return value
    first, second = first or {}, second or {}
    return set(first) == set(second) and all(number(first[key]) == number(second[key]) for key in first)


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
        elif not _same_limits(answer.get("limits"), item["_limits"]):
            item["repair"] = "%s: Waldur's limits changed since the listing (now %s)" % (
                REFUSED, limits_text(answer.get("limits")))
        else:
            item["repair"] = "resize to %s" % target
            to_repair.append(item)
    return to_repair, sorted(set(item["resource_uuid"] for item in eligible)), refused


def _plural(count):
    return "" if count == 1 else "s"


def counts(findings):
    totals = dict((name, 0) for name in COUNT_NAMES.values())
    for item in findings:
        totals[COUNT_NAMES[item["kind"]]] += 1
    totals["deleted"] = sum(1 for item in findings if item["cleanup"] == DELETED)
    totals["would_delete"] = sum(1 for item in findings if item["cleanup"] == WOULD_DELETE)
    totals["cleanup_failed"] = sum(1 for item in findings if item["cleanup"].startswith("failed"))
    totals["marked"] = sum(1 for item in findings if "(marked %s " % ORPHAN_MARK in item["cleanup"])
    totals["would_mark"] = sum(1 for item in findings if "(would mark %s " % ORPHAN_MARK in item["cleanup"])
    totals["repaired"] = sum(1 for item in findings if item["repair"].startswith(REPAIRED))
    totals["would_repair"] = sum(1 for item in findings if item["repair"].startswith(WOULD_REPAIR))
    totals["repair_failed"] = sum(1 for item in findings if item["repair"].startswith(FAILED))
    return totals


def status(findings):
    return FINDINGS if any(item["kind"] not in INFORMATION_KINDS for item in findings) else CLEAN


def public(findings):
    """The findings as the report shows them (without what the module kept for deleting)."""
    return [dict((key, value) for key, value in item.items() if not key.startswith("_")) for item in findings]
