# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Retry policy shared by every HTTP client of the collection.

Transient failures (connection errors, 5xx, 429) are retried with jittered
exponential backoff; a ``Retry-After`` header is honoured; the whole sequence
is bounded by ``max_retry_seconds`` so a pass never hangs on a dead service.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random
import time

RETRYABLE_STATUSES = frozenset((429, 500, 502, 503, 504))


def parse_retry_after(value):
    """Seconds from a ``Retry-After`` header (delta-seconds form); None if absent or odd."""
    if value is None:
        return None
    try:
        seconds = float(str(value).strip())
    except ValueError:
        return None
    return max(0.0, seconds)


class RetryPolicy:
    """Decides how long to wait before the next attempt, or that there is none.

    ``delay(attempt, retry_after)`` returns the seconds to sleep before attempt
    ``attempt + 1`` (attempt counts from 1), or None when retries are exhausted
    or the deadline would be passed.
    """

    def __init__(self, max_attempts=8, base_delay=0.5, max_delay=30.0, max_retry_seconds=120.0,
                 sleep=time.sleep, clock=time.monotonic):
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_retry_seconds = max_retry_seconds
        self.sleep = sleep
        self.clock = clock

    def start(self):
        return self.clock() + self.max_retry_seconds

    def delay(self, attempt, deadline, retry_after=None):
        if attempt >= self.max_attempts:
            return None
        if retry_after is not None:
            wait = retry_after
        else:
            # "full jitter": spreads concurrent workers so they do not retry in lockstep
            wait = random.uniform(0, min(self.max_delay, self.base_delay * (2 ** (attempt - 1))))
        if self.clock() + wait > deadline:
            return None
        return wait
