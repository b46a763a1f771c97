# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The azure-core policies of every ARM request: call counter and pass guard, JSON answers, retries.

Transient failures are retried by azure-core's own RetryPolicy, which every
client carries: 408/429/500/502/503/504 on GET/HEAD/PUT/DELETE, 500/503/504 on
POST, and any error response with a ``Retry-After`` header, which ARM puts on
every 429, so throttling is retried whatever the method, after the time the
service asks for, but never past the run's deadline (:class:`DeadlineRetryPolicy`):
a wait that would end after it is not started, and the call fails with the
service's answer (a 429 or 5xx), which the caller leaves for the next pass.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import threading
import time
from urllib.parse import urlsplit

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.sdk import DecodeError, RetryPolicy, SansIOHTTPPolicy
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_guard import check_write

# azure-core's default is 3 status retries; a throttled subscription can need a few more.
RETRY_STATUS = 5
RETRY_BACKOFF_MAX = 60
# Seconds kept free before the deadline when deciding whether to wait for a retry: the item
# still has to say what it did, and the pass to release its lock.
RETRY_DEADLINE_MARGIN = 5.0


class CallCounter(SansIOHTTPPolicy):
    """Counts the ARM requests sent (retries and LRO polls included) for the pass summary, and
    lets no write out once the pass that started this run has ended (``core/pass_guard.py``)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.calls = 0
        self.reads = 0  # calls split by method, for the batch modules' api_calls
        self.writes = 0

    def on_request(self, request):
        write = request.http_request.method != "GET"
        if write:
            check_write()  # raises PassEnded, which call() lets through untranslated
        with self._lock:
            self.calls += 1
            if write:
                self.writes += 1
            else:
                self.reads += 1


# The reads ARM answers with a bare JSON array rather than an object (Virtual Machine Images - List).
ARRAY_ANSWER = re.compile(r"/artifacttypes/vmimage/offers/[^/]+/skus/[^/]+/versions/?$", re.IGNORECASE)


class JsonAnswers(SansIOHTTPPolicy):
    """A read that ARM answers 2xx with a body that is not a JSON object (an HTML page from a
    proxy, a truncated page) is an error, so the SDK never takes it for an empty listing or an
    object without properties. The check is cheap (the body's first and last characters): the
    SDK parses the body itself."""

    def on_response(self, request, response):
        http_request, http_response = request.http_request, response.http_response
        if http_request.method != "GET" or not 200 <= http_response.status_code < 300:
            return
        body = http_response.body() or b""
        text = body.strip()
        if not text or (text[:1] == b"{" and text[-1:] == b"}"):
            return  # an empty body (a finished operation's poll) or an object
        if text[:1] == b"[" and text[-1:] == b"]" and ARRAY_ANSWER.search(urlsplit(http_request.url).path):
            return  # a listing ARM documents as a bare JSON array (a marketplace image's versions)
        content_type = (http_response.headers.get("Content-Type") or "no content type").split(";")[0].strip()
        shown = " ".join(text[:200].decode("utf-8", "replace").split())
        raise DecodeError("ARM answered GET %s with %s %r instead of a JSON object; nothing in it is trusted"
                          % (urlsplit(http_request.url).path, content_type,
                             shown[:80] + ("..." if len(shown) > 80 or len(text) > 200 else "")),
                          response=http_response)


class DeadlineRetryPolicy(RetryPolicy):
    """azure-core's RetryPolicy that never waits past the run's deadline.

    azure-core sleeps whatever ``Retry-After`` asks (ARM may say 900 seconds on a throttled
    write) inside the SDK call, where no deadline of ours reaches. Here a retry whose wait would
    end less than RETRY_DEADLINE_MARGIN seconds before the deadline is not made: the call ends
    with the service's answer, and the item is a ``retry`` for the next pass. ``deadline_of``
    gives the current deadline (a ``time.monotonic()`` value) or None (no bound)."""

    def __init__(self, deadline_of, **kwargs):
        super(DeadlineRetryPolicy, self).__init__(**kwargs)
        self._deadline_of = deadline_of

    def increment(self, settings, response=None, error=None):
        if not super(DeadlineRetryPolicy, self).increment(settings, response=response, error=error):
            return False
        deadline = self._deadline_of()
        if deadline is None:
            return True
        wait = None
        if error is None and response is not None:  # with an error, ``response`` is the request
            wait = self.get_retry_after(response)
        if wait is None:
            wait = self.get_backoff_time(settings)
        return time.monotonic() + wait + RETRY_DEADLINE_MARGIN < deadline
