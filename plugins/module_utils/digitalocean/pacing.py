# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Pacing under DigitalOcean's rate limits, shared by every thread of a run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time

# DigitalOcean's documented limits: a burst of 250 requests per minute and 5,000 per hour.
DIGITALOCEAN_RATE_LIMITS = ((250, 60.0), (5000, 3600.0))


class TokenBucket:
    """``capacity`` requests per ``period`` seconds: full at start, refilling steadily."""

    def __init__(self, capacity, period, now):
        self.capacity = float(capacity)
        self.period = float(period)
        self.rate = self.capacity / self.period
        self.tokens = self.capacity
        self.stamp = now

    def refill(self, now):
        if now > self.stamp:
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait_time(self, now):
        """Seconds until one token is available."""
        self.refill(now)
        # a hair of tolerance: float rounding must not leave a waiter sleeping 1e-14 s forever
        return 0.0 if self.tokens >= 1 - 1e-9 else (1 - self.tokens) / self.rate

    def take(self):
        self.tokens -= 1

    def limit_to(self, now, tokens):
        self.refill(now)
        self.tokens = min(self.tokens, float(tokens))


class RequestPacer:
    """Keeps all threads of a run under the API's limits.

    Every request takes a token from each bucket (by default 250/minute and
    5,000/hour). A 429 pauses everyone for its ``Retry-After`` and leaves the
    per-minute bucket empty at the end of the pause, so requests resume at the
    sustained rate instead of bursting into the limit again; ``ratelimit-remaining`` caps the hourly bucket
    when other clients share the token.
    """

    def __init__(self, limits=DIGITALOCEAN_RATE_LIMITS, clock=time.monotonic, sleep=time.sleep):
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        now = clock()
        self.buckets = [TokenBucket(capacity, period, now) for capacity, period in limits]
        self.paused_until = now
        self.waited = 0.0

    def acquire(self, deadline=None):
        """Block until a request may be sent; return the seconds waited. With ``deadline`` (clock
        time), None at once when the request could not be sent before it: a long ``Retry-After``
        must not hold a caller past its deadline."""
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                wait = max([self.paused_until - now] + [bucket.wait_time(now) for bucket in self.buckets])
                if wait <= 0:
                    for bucket in self.buckets:
                        bucket.take()
                    self.waited += waited
                    return waited
                if deadline is not None and now + wait > deadline:
                    return None
            self._sleep(wait)
            waited += wait

    def pause_left(self):
        """Seconds until requests may be sent again after a 429 (0 when not paused)."""
        with self._lock:
            return max(0.0, self.paused_until - self._clock())

    def throttled(self, retry_after):
        """The API answered 429: nobody sends before ``retry_after`` seconds from now."""
        with self._lock:
            now = self._clock()
            self.paused_until = max(self.paused_until, now + retry_after)
            # empty when the pause ends: what it would refill meanwhile is not a burst to spend
            burst = self.buckets[0]
            burst.limit_to(now, -(self.paused_until - now) * burst.rate)

    def observe_remaining(self, remaining):
        """The API's count of requests left in its longest window."""
        with self._lock:
            self.buckets[-1].limit_to(self._clock(), remaining)

    def sustained_rate(self):
        """Requests per second the run can keep sending: the per-minute bucket's refill, or the
        hourly one's once what is left of the hour (``ratelimit-remaining`` caps it) is less
        than a minute at the per-minute rate. (DigitalOcean's ``ratelimit-reset`` is when the
        oldest request of its sliding window expires, which frees one request, not the window:
        it says nothing about the rate.)"""
        with self._lock:
            now = self._clock()
            burst, longest = self.buckets[0], self.buckets[-1]
            longest.refill(now)
            if longest is not burst and longest.tokens < burst.capacity:
                return longest.rate
            return burst.rate

    def poll_interval(self, calls, share):
        """Seconds between polls of ``calls`` requests each so that polling spends at most
        ``share`` of the sustained rate, leaving the rest to the writes of the run."""
        return float(calls) / (share * self.sustained_rate())
