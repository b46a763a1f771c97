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
from dataclasses import dataclass
from typing import Callable

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


@dataclass
class RetryPolicy:
    """Decides how long to wait before the next attempt, or that there is none.

    ``delay(attempt, retry_after)`` returns the seconds to sleep before attempt
    ``attempt + 1`` (attempt counts from 1), or None when retries are exhausted
    or the deadline would be passed.
    """

    max_attempts: int = 8
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_seconds: float = 120.0
    sleep: Callable = time.sleep
    clock: Callable = time.monotonic

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
