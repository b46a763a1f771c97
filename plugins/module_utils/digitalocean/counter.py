# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Thread-safe counts of the API calls a client sent, for the batch modules' ``api_calls``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading


class _Counter:
    def __init__(self):
        self._lock = threading.Lock()
        self.calls = 0
        self.reads = 0  # calls split by method, for the batch modules' api_calls
        self.writes = 0
        self.retries = 0
        self.throttled = 0
        # the calls of each thread apart: a waiter measuring its own reads must not count
        # the creates other threads send meanwhile
        self._thread = threading.local()

    def add(self, name):
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)
        if name == "calls":
            self._thread.calls = self.thread_calls() + 1

    def thread_calls(self):
        """Calls the current thread has sent through this client."""
        return getattr(self._thread, "calls", 0)
