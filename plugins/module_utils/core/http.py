# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The one HTTP retry loop of the collection's clients (Waldur and DigitalOcean).

The loop knows the rules every client follows: transient failures are retried with the
waits of a :class:`retry.RetryPolicy` (jittered backoff, ``Retry-After``, a deadline); a
request that surely never reached the service is safe to send again, while a
non-idempotent write whose reply was lost is not (it may have been applied). What a
response means, which error to raise and how to word it stay with each client, through
hooks:

* ``send_once(attempt)`` sends one attempt and returns the response;
* ``classify(response, attempt)`` returns :data:`DONE`, a :class:`Retry`, or raises the
  client's own error;
* ``connection_error(failure)`` returns the client's exception for a failed connection
  (a :class:`ConnectionFailure` says why the loop stops);
* ``before_attempt(attempt)`` and ``on_retry(attempt)`` keep the client's counters (and pacing).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from dataclasses import dataclass
from typing import Any, Callable, Optional

try:
    import requests
    import urllib3
except ImportError:  # the clients report the missing library themselves
    requests = urllib3 = None

DONE = "done"
# Why the loop stops on a connection failure (ConnectionFailure.reason).
NOT_RESENDABLE = "not_resendable"  # a write whose reply was lost: it may have been applied
EXHAUSTED = "exhausted"  # attempts or time used up
FATAL = "fatal"  # the client's ``fatal`` test said retrying cannot help (a certificate)


def request_never_sent(exc):
    """True when a requests exception happened before the request left: the connection (or
    its TLS handshake) could not be opened, so nothing reached the service and even a
    non-idempotent write is safe to send again."""
    if requests is None:
        return False
    if isinstance(exc, (requests.exceptions.ConnectTimeout, requests.exceptions.SSLError)):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, (urllib3.exceptions.NewConnectionError, urllib3.exceptions.SSLError))


@dataclass
class Retry:
    """``classify``'s answer for a response worth another attempt.

    ``policy``/``count``: the policy and attempt number that decide the wait (default: the
    loop's policy and the attempt number); ``retry_after``: the service's ``Retry-After``;
    ``wait_with``: what waits (default: the loop's sleep; e.g. a pacer that holds every
    thread); ``give_up``: returns the exception to raise when no retry is left.
    """

    give_up: Callable
    retry_after: Optional[float] = None
    policy: Any = None
    count: Optional[int] = None
    wait_with: Optional[Callable] = None


@dataclass
class ConnectionFailure:
    """A failed connection the loop gives up on, as ``connection_error`` sees it: ``reason``
    says why (:data:`NOT_RESENDABLE`, :data:`EXHAUSTED` or :data:`FATAL`); ``started`` is the
    loop's first attempt on ``clock``."""

    exc: BaseException
    attempt: int
    never_sent: bool
    started: float
    clock: Callable
    reason: Optional[str] = None

    @property
    def elapsed(self):
        return self.clock() - self.started


def send_with_retries(send_once, classify, connection_error, policy, idempotent,
                      connection_errors=None, deadline=None, connection_deadline=None, fatal=None,
                      before_attempt=None, on_retry=None, sleep=None):
    """Send until ``classify`` says :data:`DONE` (the response is returned) or raises, or no
    retry is left. ``deadline`` defaults to ``policy.start()``; ``connection_deadline`` bounds
    retrying a service that cannot be reached at all (never past ``deadline``);
    ``fatal(exc)`` marks connection errors not worth retrying; ``connection_errors`` are the
    exceptions of ``send_once`` that mean a failed connection (default: any requests error)."""
    if connection_errors is None:
        connection_errors = (requests.exceptions.RequestException,)
    sleep = sleep or policy.sleep
    started = policy.clock()
    deadline = policy.start() if deadline is None else deadline
    reach_deadline = deadline if connection_deadline is None else min(deadline, connection_deadline)
    attempt = 0
    while True:
        attempt += 1
        if before_attempt is not None:
            before_attempt(attempt)
        try:
            response = send_once(attempt)
        except connection_errors as exc:
            failure = ConnectionFailure(exc, attempt, request_never_sent(exc), started, policy.clock)
            wait = None
            if fatal is not None and fatal(exc):
                failure.reason = FATAL
            elif not (idempotent or failure.never_sent):
                failure.reason = NOT_RESENDABLE
            elif failure.never_sent and policy.clock() >= reach_deadline:
                failure.reason = EXHAUSTED
            else:
                wait = policy.delay(attempt, reach_deadline if failure.never_sent else deadline)
                if wait is None:
                    failure.reason = EXHAUSTED
            if wait is None:
                raise connection_error(failure)
            if on_retry is not None:
                on_retry(attempt)
            sleep(wait)
            continue
        verdict = classify(response, attempt)
        if verdict == DONE:
            return response
        retry_policy = verdict.policy or policy
        wait = retry_policy.delay(attempt if verdict.count is None else verdict.count, deadline,
                                  retry_after=verdict.retry_after)
        if wait is None:
            raise verdict.give_up()
        if on_retry is not None:
            on_retry(attempt)
        (verdict.wait_with or sleep)(wait)


# Characters of an unexpected body an error quotes.
BODY_SNIPPET = 80


def shorten(text, limit):
    """``text`` in at most ``limit`` characters: whole when it fits, else cut at the last word
    boundary that leaves room for ``...`` (mid-word only when one word is longer than the limit), so
    a message never ends in half a word an operator might take for a real one."""
    text = str(text)
    if len(text) <= limit:
        return text
    room = max(0, limit - 3)
    cut = text[:room + 1].rsplit(" ", 1)[0] if " " in text[:room + 1] else ""
    cut = cut.rstrip(" ,;:") if cut else text[:room]
    return cut + "..."


def describe_body(response, scrub=None):
    """``text/html; charset=utf-8 '<!DOCTYPE html><html>...'``: what came back, for an error about
    a body that is not the JSON a call expects: its content type and first characters on one
    line (never a header, and short enough that no page of data is copied into a log).
    ``scrub`` masks secrets in the whole text before it is cut, so no part of one can show."""
    text = " ".join((response.text or "").split())
    text = scrub(text) if scrub else text
    snippet = shorten(text, BODY_SNIPPET + 3)
    kind = response.headers.get("Content-Type") or "no content type"
    return "%s %r" % (kind, snippet) if snippet else "%s, an empty body" % kind
