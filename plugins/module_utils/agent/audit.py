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

A check may name a repair (``{"size": target, "from": the machine's size}``): ``audit_repair.plan_repair``
decides on evidence whether ``audit_repair`` may bring the machine back to what Waldur records;
``audit_cleanup.plan_cleanup`` which orphans ``audit_cleanup`` deletes (the marks it reads are
``audit_marks``').
"""


from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_marks import age_hours
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import utc_now

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
ERRED = "Erred"
ERRED_RESOURCE = "erred_resource"


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


def status(findings):
    return FINDINGS if any(item["kind"] not in INFORMATION_KINDS for item in findings) else CLEAN


def public(findings):
    """The findings as the report shows them (without what the module kept for deleting)."""
    return [dict((key, value) for key, value in item.items() if not key.startswith("_")) for item in findings]
