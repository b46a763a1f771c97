# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Many threads waiting for their machines, one read for all of them: the engine of the
DigitalOcean droplet waiter and the Azure power waiter.

Each waiting thread registers its entries (dicts with ``done`` and ``error``) and blocks. One of
them at a time refreshes: it reads every registered entry not yet settled with the cheapest read
the backend has (a shared listing, or one read each), outside the lock, and wakes the others.
When the next refresh is due is the backend's (``next_refresh``), and so is what a read means
for an entry (``settle``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading


class SharedWait(object):
    """Subclasses set ``read_error`` (the exception a failed read raises: it ends every entry of
    that read) and implement ``read(batch)``, ``next_refresh()`` and ``settle(batch, found, error,
    before)``; ``before_read()`` may take a measure before a read that ``settle`` is given."""

    read_error = Exception

    def __init__(self, clock):
        self._clock = clock
        self._cond = threading.Condition()
        self._entries = []
        self._refreshing = False
        self._last_refresh = None  # clock time the last refresh ended
        self.refreshes = 0

    def wait_for(self, entries, wake_at):
        """Register ``entries`` and block until ``wake_at(now)`` says None (nothing left to wait
        for), refreshing when it is this thread's turn; ``wake_at`` gives the clock time to look
        again at the latest."""
        with self._cond:
            self._entries.extend(entries)
            try:
                while True:
                    now = self._clock()
                    wake = wake_at(now)
                    if wake is None:
                        break
                    if self._refreshing:  # another thread reads for everyone; it wakes us
                        self._cond.wait(max(0.01, wake - now))
                        continue
                    due = self.next_refresh()
                    if due > now:
                        self._cond.wait(max(0.01, min(due, wake) - now))
                        continue
                    self._refresh()
            finally:
                for entry in entries:
                    self._entries.remove(entry)

    def _refresh(self):
        """Read every registered entry once and wake the waiting threads. Called holding the
        lock; releases it while reading."""
        self._refreshing = True
        batch = [entry for entry in self._entries if not entry["done"] and entry["error"] is None]
        found, error = {}, None
        before = self.before_read()
        self._cond.release()
        try:
            found = self.read(batch)
        except self.read_error as exc:  # pylint: disable=catching-non-exception
            error = exc
        finally:
            self._cond.acquire()
            self._refreshing = False
            self._last_refresh = self._clock()
            self.refreshes += 1
            self.settle(batch, found, error, before)
            self._cond.notify_all()

    def before_read(self):
        return None

    def read(self, batch):
        raise NotImplementedError

    def next_refresh(self):
        raise NotImplementedError

    def settle(self, batch, found, error, before):
        raise NotImplementedError
