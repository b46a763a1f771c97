# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""ARM's write limit kept on this side: a token bucket every write start of a batch takes from."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time

# ARM's documented write bucket per subscription and service principal (Azure Resource Manager
# request limits and throttling, docs/scaling.md): 200 tokens, refilled at 10 a second.
ARM_WRITE_BURST = 200
ARM_WRITES_PER_SECOND = 10.0


class WritePacer:
    """A token bucket on the writes this batch starts, sized like ARM's own (``burst`` tokens,
    ``per_second`` refill), so machines in parallel x branches never outrun the subscription's
    write limit and draw 429s; a write that finds the bucket empty waits its turn here."""

    def __init__(self, burst=ARM_WRITE_BURST, per_second=ARM_WRITES_PER_SECOND, clock=time.monotonic,
                 sleep=time.sleep):
        self.burst = float(burst)
        self.per_second = float(per_second)
        self._clock, self._sleep = clock, sleep
        self._tokens = self.burst
        self._stamp = clock()
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds writes spent waiting for a token (for tests and tuning)

    def take(self):
        """Take one token, waiting until the bucket has refilled enough (reservations queue up)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.per_second)
            self._stamp = now
            self._tokens -= 1
            wait = -self._tokens / self.per_second if self._tokens < 0 else 0.0
            self.waited += wait
        if wait:
            self._sleep(wait)
