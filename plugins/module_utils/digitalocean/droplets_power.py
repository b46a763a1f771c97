# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The resize and power steps of do_droplet's worker, which failures a later pass retries, and held items."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import Unproven, is_absent, require
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import resource_tag


class RetryLater(ItemError):
    """A failure a later pass should retry: the droplet exists (or may), only a step failed."""


@contextlib.contextmanager
def outcome_of(result):
    """Around one write: when its answer was lost (``ambiguous``: it may have been carried out), the
    item's ``action`` says ``unknown`` instead of what was asked or nothing. A refusal leaves the
    result as it was: nothing happened."""
    try:
        yield
    except DigitalOceanError as exc:
        if exc.ambiguous:
            result["action"] = "unknown"
        raise


def _retryable(exc):
    """Whether the next pass should retry rather than the order be erred: DigitalOcean
    unreachable, throttling or failing after the retries, a write whose effect is unknown,
    or a step that failed after the droplet exists."""
    if isinstance(exc, (RetryLater, Unproven)):
        return True  # an answer that proves nothing never errs an order: it is left as it is
    if isinstance(exc, DigitalOceanError):
        return exc.ambiguous or exc.status is None or exc.status == 429 or exc.status >= 500
    return False


def held(result, msg, cloud=None):
    """Kept back for the operator: failed and ``retry`` (the order stays alive, nothing is erred)
    and ``held``, which makes the pass exit non-zero."""
    result.update(failed=True, retry=True, held=True, msg=msg)
    if cloud:
        result["cloud"] = cloud


def refuse_foreign(facts, resource_uuid):
    """Ownership before every write: a droplet carrying another resource's owner tag (a copied or
    stale backend id pointing at it) is never resized or powered for this resource; one carrying no
    owner tag at all is an older droplet reached by the exact id Waldur records (legacy)."""
    marks = resource_tags(facts.get("tags"))
    if marks and marks != set([resource_tag(resource_uuid)]):
        raise ItemError("droplet %s carries %s, not this resource's tag %s alone: it is not provably this resource's "
                        "machine, so nothing was done to it; check whose machine it is and correct the resource's "
                        "backend id in Waldur" % (facts.get("id"), ", ".join(sorted(marks)),
                                                  resource_tag(resource_uuid)))


class DropletPowerSteps:
    """Resize, power off and power on, for ``DropletWorker``."""

    # ---- resize -----------------------------------------------------------------------
    def resize(self, result, facts, size, deadline, running=None):
        """Resize to ``size`` (CPU and RAM only). The droplet is powered off for it and then left
        as ``running`` says (on when true), or as it was when ``running`` is None. ``facts``: the
        droplet as a checked read showed it."""
        require(facts, "droplet %s" % facts.get("id"))
        droplet_id = facts["id"]
        old_size = facts["size_slug"]
        self._describe(result, facts)
        was_running = facts["status"] != "off"
        power_on = was_running if running is None else bool(running)
        if self.check_mode:
            steps = []
            if was_running:
                steps.append("powered off for it")
            if power_on:
                steps.append("powered on afterwards")
            result.update(action="resized", changed=True, msg="would resize droplet %s from %s to %s (CPU and RAM only%s)"
                          % (droplet_id, old_size, size, "".join("; " + step for step in steps)))
            return None
        if facts["status"] == "new":
            facts = self.waiter.wait(facts, ("active", "off"), deadline) or facts
            was_running = facts["status"] != "off"
        steps = []
        if was_running:
            facts, how = self._power_off(droplet_id, deadline)
            result["changed"] = True  # it is off now, whatever the resize does
            steps.append(how)
        try:
            with outcome_of(result):
                action = self.client.droplet_action(droplet_id, "resize", size=size)
            result.update(action="resized", changed=True)  # accepted; a refused resize changed no size
            status = self.client.wait_for_action(droplet_id, action, deadline)
            if status == "errored":
                raise ItemError("resize of droplet %s to %s failed" % (droplet_id, size))
            if status != "completed":
                raise RetryLater("resize of droplet %s to %s did not finish within %s seconds"
                                 % (droplet_id, size, self.wait_timeout))
        except (DigitalOceanError, ItemError) as exc:
            if power_on:
                error = RetryLater if _retryable(exc) else ItemError
                raise error("%s; %s" % (exc, self._power_on_after_failure(droplet_id, deadline)))
            raise
        steps.append("resized")
        if power_on:
            action = self.client.droplet_action(droplet_id, "power_on")
            if self.wait:
                status = self.client.wait_for_action(droplet_id, action, deadline)
                steps.append("powered on" if status == "completed" else "power on %s" % status)
            else:
                steps.append("power on requested")
        self._describe(result, self.client.get_droplet(droplet_id) or facts)
        result["msg"] = "resized droplet %s from %s to %s (%s)" % (droplet_id, old_size, size, ", ".join(steps))
        return None

    def _power_on_after_resize(self, result, facts, deadline):
        droplet_id = facts["id"]
        if self.check_mode:
            result.update(action="powered_on", changed=True)
            result["msg"] += "; would power it on (a resize left it off)"
            return None
        with outcome_of(result):
            action = self.client.droplet_action(droplet_id, "power_on")
        result.update(action="powered_on", changed=True)
        status = self.client.wait_for_action(droplet_id, action, deadline) if self.wait else "requested"
        self._describe(result, self.client.get_droplet(droplet_id) or facts)
        result["msg"] = "droplet %s has size %s; powered it on (an interrupted resize had left it off)%s" % (
            droplet_id, facts["size_slug"], "" if status in ("completed", "requested") else ": power on %s" % status)
        if status not in ("completed", "requested"):
            raise RetryLater(result["msg"])
        return None

    def _power_on_after_failure(self, droplet_id, deadline):
        try:
            action = self.client.droplet_action(droplet_id, "power_on")
            self.client.wait_for_action(droplet_id, action, deadline)
        except DigitalOceanError as exc:
            return "powering it back on failed too: %s" % exc
        return "powered it back on"

    def _power_off(self, droplet_id, deadline):
        """Graceful shutdown for half the time left, then a hard power off. Returns
        ``(facts, how)`` with the droplet off, or raises."""
        now = self.clock()
        grace_deadline = now + max(0.0, deadline - now) / 2
        try:
            action = self.client.droplet_action(droplet_id, "shutdown")
            status = self.client.wait_for_action(droplet_id, action, grace_deadline)
        except DigitalOceanError as exc:
            if exc.status != 422:
                raise
            status = "refused (%s)" % exc.service_message
        if status == "completed":
            facts = self.client.get_droplet(droplet_id)
            if facts and facts["status"] == "off":
                return facts, "shut down"
        action = self.client.droplet_action(droplet_id, "power_off")
        status = self.client.wait_for_action(droplet_id, action, deadline)
        facts = self.client.get_droplet(droplet_id)
        if not facts:
            raise ItemError("droplet %s disappeared while powering off" % droplet_id)
        if status != "completed" or facts["status"] != "off":
            raise self._not_off(droplet_id, "power_off", status, facts["status"])
        return facts, "graceful shutdown did not finish; powered off"

    def _not_off(self, droplet_id, step, step_status, droplet_status):
        return RetryLater("droplet %s did not power off within %s seconds (%s %s, status %s)"
                          % (droplet_id, self.wait_timeout, step, step_status, droplet_status))

    # ---- power changes waited for together (``finish_waits``) ---------------------------
    def _defer_power_off(self, item, result, droplet_id, facts, deadline):
        """Ask for a graceful shutdown and leave the wait to ``finish_waits``: the droplets of
        the batch are then waited for together, with shared listings, not a poll per action."""
        now = self.clock()
        pending = {"step": "shutdown", "facts": facts, "deadline": now + max(0.0, deadline - now) / 2,
                   "final_deadline": deadline}
        try:
            pending["action"] = self.client.droplet_action(droplet_id, "shutdown")
        except DigitalOceanError as exc:
            if exc.status != 422:
                raise
            # refused (e.g. no agent able to shut it down): straight to the hard power off
            pending.update(step="power_off", deadline=deadline,
                           action=self.client.droplet_action(droplet_id, "power_off"))
        result["msg"] = "shutdown of droplet %s requested" % droplet_id
        self.deferred[id(item)] = pending

    @staticmethod
    def _statuses(pending):
        """The droplet statuses that end a deferred wait."""
        return ("active", "off") if pending.get("step", "create") == "create" else (
            ("active",) if pending["step"] == "power_on" else ("off",))

    def _hard_power_off(self, late):
        """Power off, at once, the droplets whose graceful shutdown did not finish in its grace
        time; returns the waits to go on with (each until its item's own deadline)."""
        going_on = []
        for index, pending in late:
            droplet_id = pending["facts"]["id"]
            try:
                pending["action"] = self.client.droplet_action(droplet_id, "power_off")
            except DigitalOceanError as exc:
                pending["error"] = exc
                continue
            pending.update(step="power_off", deadline=pending["final_deadline"])
            going_on.append((index, pending))
        return going_on

    def _powered(self, pending, latest):
        """The deferred power change's end: ``(facts, msg)``, or raises why it did not happen."""
        droplet_id = pending["facts"]["id"]
        step = pending["step"]
        if pending.get("error") is not None:
            raise RetryLater("graceful shutdown of droplet %s did not finish, and the power off failed: %s"
                             % (droplet_id, pending["error"]))
        if latest is None:
            raise ItemError("droplet %s disappeared while powering %s" % (droplet_id, "on" if step == "power_on" else "off"))
        if step == "power_on":
            if latest["status"] != "active":
                status = self.client.action_status(droplet_id, pending["action"])
                raise ItemError("power on of droplet %s %s" % (
                    droplet_id, "failed" if status == "errored" else
                    "did not finish within %s seconds" % self.wait_timeout))
            return latest, "powered on droplet %s" % droplet_id
        if latest["status"] != "off":
            raise self._not_off(droplet_id, step, self.client.action_status(droplet_id, pending["action"]),
                                latest["status"])
        how = "shut down" if step == "shutdown" else "graceful shutdown did not finish; powered off"
        return latest, "droplet %s %s" % (droplet_id, how)

    # ---- off / active -----------------------------------------------------------------
    def _locate(self, item):
        backend_id = item.get("backend_id")
        if backend_id:
            facts = require(self.read(backend_id), "droplet %s" % backend_id)
            if is_absent(facts):
                raise ItemError("droplet %s no longer exists" % backend_id)
            return facts
        tag = resource_tag(item["resource_uuid"])
        own = [d for d in require(self.tagged(tag), "the droplets carrying tag %s" % tag)
               if resource_tags(d["tags"]) == set([tag])]
        if len(own) != 1:
            raise ItemError("no backend_id given and %d droplets carry tag %s" % (len(own), tag))
        return own[0]

    def power(self, item, result, notes, state, deadline):
        facts = require(self._locate(item), "the droplet of resource %s" % item["resource_uuid"])
        refuse_foreign(facts, item["resource_uuid"])
        droplet_id = facts["id"]
        self._describe(result, facts)
        if facts["status"] == "new":
            if not self.wait or self.check_mode:
                raise ItemError("droplet %s is still being created; try again when it is active" % droplet_id)
            facts = self._wait_started(facts, deadline, notes)
            self._describe(result, facts)
        if facts["status"] not in ("active", "off"):
            raise ItemError("droplet %s is %s and cannot be powered %s" % (
                droplet_id, facts["status"], "off" if state == "off" else "on"))
        if facts["status"] == state:
            result["msg"] = "droplet %s is already %s" % (droplet_id, state)
            return None
        if state == "off":
            if self.check_mode:
                result["msg"] = "would shut down droplet %s" % droplet_id
            elif self.wait:
                with outcome_of(result):
                    self._defer_power_off(item, result, droplet_id, facts, deadline)
            else:
                with outcome_of(result):
                    self.client.droplet_action(droplet_id, "shutdown")
                result["msg"] = "shutdown of droplet %s requested" % droplet_id
            # only once DigitalOcean accepted it (a refused action changed nothing)
            result.update(action="powered_off", changed=True)
            return None
        if self.check_mode:
            result.update(action="powered_on", changed=True, msg="would power on droplet %s" % droplet_id)
            return None
        with outcome_of(result):
            action = self.client.droplet_action(droplet_id, "power_on")
        result.update(action="powered_on", changed=True)
        result["msg"] = "power on of droplet %s requested" % droplet_id
        if self.wait:
            self.deferred[id(item)] = {"step": "power_on", "facts": facts, "deadline": deadline, "action": action}
        return None
