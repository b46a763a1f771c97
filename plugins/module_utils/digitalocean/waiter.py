# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Waiting for many droplets at once, with the cheapest reads."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import PER_PAGE
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError


class DropletWaiter:
    """Waits for many droplets together, for all worker threads of one run.

    A worker calls :meth:`wait` with the facts it has (a create's answer says
    ``new``) and blocks. One waiting thread at a time refreshes every registered
    droplet with the cheapest read: a GET when one droplet is waited for, else the
    account's paged listing when it takes fewer pages than there are droplets (and
    only a consistent one, see ``scan_droplets``); then it wakes the threads whose
    droplet reached a wanted status or is gone. A droplet not yet refreshed is
    refreshed at once (or ``min_interval`` after the previous refresh); while no
    droplet finishes the interval doubles up to ``max_interval``. So a pass of 200
    creates spends a few dozen reads on waiting instead of a poll per droplet.
    """

    MIN_INTERVAL = 0.25
    MAX_INTERVAL = 10.0

    def __init__(self, client, min_interval=MIN_INTERVAL, max_interval=MAX_INTERVAL, clock=time.monotonic):
        self.client = client
        self.min_interval = min_interval
        self.max_interval = max_interval
        self._clock = clock
        self._cond = threading.Condition()
        self._entries = []
        self._refreshing = False
        self._last_refresh = None  # clock time the last refresh ended
        self._interval = min_interval
        self.refreshes = 0

    def wait(self, facts, statuses, deadline):
        """Block until the droplet of ``facts`` has one of ``statuses`` or is gone, or until
        ``deadline`` (clock time). Returns its latest facts: None when it is gone, the last
        ones seen at the deadline. A failed read raises its DigitalOceanError."""
        if facts["status"] in statuses:
            return facts
        entry = {"id": int(facts["id"]), "statuses": tuple(statuses), "facts": facts,
                 "done": False, "seen": False, "error": None}
        with self._cond:
            self._entries.append(entry)
            try:
                while True:
                    if entry["error"] is not None:
                        raise entry["error"]  # pylint: disable=raising-bad-type  # set by a failed refresh
                    if entry["done"]:
                        return entry["facts"]
                    now = self._clock()
                    if now >= deadline:
                        return entry["facts"]
                    if self._refreshing:  # another thread reads for everyone; it wakes us
                        self._cond.wait(deadline - now)
                        continue
                    due = self._next_refresh()
                    if due > now:
                        self._cond.wait(min(due, deadline) - now)
                        continue
                    self._refresh()
            finally:
                self._entries.remove(entry)

    def _next_refresh(self):
        if self._last_refresh is None:
            return float("-inf")  # the first refresh is due at once
        unseen = any(not entry["seen"] for entry in self._entries)
        return self._last_refresh + (self.min_interval if unseen else self._interval)

    def _refresh(self):
        """Read every registered droplet once and wake the finished ones. Called holding
        the lock; releases it while reading."""
        self._refreshing = True
        batch = list(self._entries)
        found, error = {}, None
        self._cond.release()
        try:
            found = self._read(sorted(set(entry["id"] for entry in batch)))
        except DigitalOceanError as exc:
            error = exc
        finally:
            self._cond.acquire()
            self._refreshing = False
            self._last_refresh = self._clock()
            self.refreshes += 1
            finished = False
            for entry in batch:
                entry["seen"] = True
                if error is not None:
                    entry["error"] = error
                elif entry["id"] in found:
                    entry["facts"] = found[entry["id"]]
                    if entry["facts"] is None or entry["facts"]["status"] in entry["statuses"]:
                        entry["done"] = finished = True
            self._interval = self.min_interval if finished else min(self.max_interval, self._interval * 2)
            self._cond.notify_all()

    def _read(self, ids):
        """``{id: facts or None}``. Ids a listing did not show are confirmed with a GET: a
        droplet just created may not be listed yet."""
        droplets = None
        total = self.client.droplet_total
        if len(ids) > 1 and (total is None or -(-total // PER_PAGE) < len(ids)):
            droplets = self.client.scan_droplets(max_pages=len(ids) - 1)
        wanted = set(ids)
        found = dict((facts["id"], facts) for facts in droplets or [] if facts["id"] in wanted)
        for droplet_id in ids:
            if droplet_id not in found:
                found[droplet_id] = self.client.get_droplet(droplet_id)
        return found
