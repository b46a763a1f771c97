# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Waiting for many machines' power changes at once, with shared reads (as DigitalOcean's
``DropletWaiter`` does for droplets).

A deallocation or start is sent without waiting on its own long-running operation; its item
then waits here. One waiting thread at a time reads the power state of every machine still
waited for - the subscription's ``statusOnly`` listing from LISTING_THRESHOLD machines on
(stopped at the page where the last of them is seen), else one instance view each - and wakes
the items whose machines have settled. So a hundred deallocations cost a listing per round,
not a poll of each operation per round.

A machine still in the power state it had is either an operation not yet started or one that
failed and put the machine back: for those only, the operation's own status is read once
(``Azure-AsyncOperation``), which tells the two apart - ``Failed`` (with Azure's reason) ends
the item as failed, ``InProgress`` keeps it waiting."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.listings import LISTING_THRESHOLD, MachineListings, power_of
from ansible_collections.waldur.site_agent.plugins.module_utils.core.shared_wait import SharedWait

# The power state a change passes through on its way.
TRANSITIONAL = {"deallocated": "deallocating", "running": "starting"}


class PowerChangeFailed(Exception):
    """Azure ran the power change and it failed (the operation's status says ``Failed``)."""


class PowerWaiter(SharedWait):
    """Waits for the power changes of one batch together, for all its threads.

    :meth:`wait` blocks one item until its machine is in one of ``settled``, the change failed,
    or the deadline came. The first read is due ``min_interval`` after the first change was
    sent; the interval then grows by half (up to ``max_interval``) while no machine settles."""

    MIN_INTERVAL = 1.0
    MAX_INTERVAL = 5.0

    read_error = AzureError

    def __init__(self, clients, deadline=None, min_interval=MIN_INTERVAL, max_interval=MAX_INTERVAL,
                 clock=time.monotonic):
        SharedWait.__init__(self, clock)
        self.clients = clients
        self.deadline = deadline
        self.min_interval = min_interval
        self.max_interval = max(min_interval, max_interval)
        self._interval = min_interval

    def wait(self, machine_id, key, settled, previous, operation_url=None):
        """The power state ``machine_id`` (ARM id; ``key`` its lower-cased form) settled in, or the
        last one seen when the deadline came. Raises :class:`PowerChangeFailed` when the change
        failed, :class:`AzureError` when the machine could not be read or is gone."""
        entry = {"id": machine_id, "key": key, "settled": tuple(settled), "previous": previous,
                 "transitional": TRANSITIONAL.get(settled[0]), "operation": operation_url, "power": previous,
                 "moved": False, "done": False, "error": None, "since": self._clock()}

        def wake_at(now):
            if entry["done"] or entry["error"] is not None or (self.deadline is not None and now >= self.deadline):
                return None
            return self.deadline if self.deadline is not None else now + self.max_interval

        self.wait_for([entry], wake_at)
        if entry["error"] is not None:
            raise entry["error"]  # pylint: disable=raising-bad-type  # an exception once set, never None here
        return entry["power"]

    def next_refresh(self):
        first = min(entry["since"] for entry in self._entries)
        if self._last_refresh is None or self._last_refresh < first:
            return first + self.min_interval
        return self._last_refresh + self._interval

    def settle(self, batch, found, error, before):
        """What one refresh read: the settled machines woken, the interval grown by half while none is."""
        settled = False
        for entry in batch:
            if error is not None:
                entry["error"] = error
            elif entry["key"] in found:
                outcome = found[entry["key"]]
                if isinstance(outcome, Exception):
                    entry["error"] = outcome
                else:
                    entry["power"] = outcome
                    entry["done"] = outcome in entry["settled"]
                    settled = settled or entry["done"]
        self._interval = self.min_interval if settled else min(self.max_interval, self._interval * 1.5)

    def read(self, batch):
        """``{key: power state or exception}`` for the machines of ``batch``."""
        keys = sorted(set(entry["key"] for entry in batch))
        if len(keys) >= LISTING_THRESHOLD:
            powers = MachineListings(self.clients, self.deadline).power_states(keys)
        else:
            powers = {}
        found = {}
        for entry in batch:
            try:
                power = powers.get(entry["key"])
                if power is None:  # one machine, or one the listing missed: its own instance view
                    power = power_of(self.clients.read(
                        "reading the instance view of virtual machine %s" % entry["id"].rsplit("/", 1)[-1],
                        self.clients.json_get, "compute", entry["id"], "/instanceView", deadline=self.deadline))
                    if power is None:
                        raise AzureError("virtual machine %s is gone or shows no power state"
                                         % entry["id"].rsplit("/", 1)[-1], status=404)
                if power == entry["transitional"]:
                    entry["moved"] = True  # only this refresh writes it, the lock released
                elif power not in entry["settled"]:
                    self._judge_unmoved(entry, power)
                found[entry["key"]] = power
            except (AzureError, PowerChangeFailed) as exc:
                found[entry["key"]] = exc
        return found

    def _judge_unmoved(self, entry, power):
        """A machine not (or no longer) changing: ask its operation whether it failed or has not
        started yet. Without an operation to ask, one seen moving and back again failed."""
        status, reason = "", None
        if entry["operation"]:
            body = self.clients.read("reading the operation of virtual machine %s" % entry["id"].rsplit("/", 1)[-1],
                                     self.clients.json_at, entry["operation"], deadline=self.deadline) or {}
            status = str(body.get("status") or "")
            error = body.get("error") if isinstance(body.get("error"), dict) else {}
            reason = error.get("message") or error.get("code")
        if status.lower() in ("failed", "canceled") or (not status and entry["moved"]):
            raise PowerChangeFailed("the change to %s %s; the machine is %s" % (
                entry["settled"][0], "failed: %s" % reason if reason else "did not complete", power))
