# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""DigitalOcean's API over one paced, retried HTTP session: every request of the client goes through ``send``.

Every request of the python-digitalocean objects the client builds (see
``binding``) goes through :meth:`Transport.send`, which adds what
python-digitalocean 1.17 lacks:

* one ``requests.Session`` shared by all worker threads (keep-alive; the library
  opens a new connection per object and uses bare ``requests.post``);
* the endpoint of the ``api_url`` option on every request, pagination links
  included (the library passes ``end_point`` to none of the objects it builds);
* a request timeout;
* pacing under DigitalOcean's limits (``pacing``), shared by all threads, that
  backs off as the API says (``Retry-After``, ``ratelimit-remaining``);
* retries of 429, 5xx and connection errors with jittered backoff, bounded by
  ``max_retry_seconds``;
* errors carrying method, path, status and DigitalOcean's message, never the token
  (``errors``); 404 reads as "absent".
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time
from urllib.parse import urljoin, urlsplit, urlunsplit

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.waldur.site_agent.plugins.module_utils.core.http import (
    DONE,
    NOT_RESENDABLE,
    Retry,
    describe_body,
    send_with_retries,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_guard import check_write
from ansible_collections.waldur.site_agent.plugins.module_utils.core.retry import RetryPolicy, parse_retry_after
from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import redact_text
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.binding import HAS_DIGITALOCEAN, LIBRARY_VERSION, build
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.counter import _Counter
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import (
    DigitalOceanError,
    DigitalOceanNotFound,
    DigitalOceanUnproven,
    describe_failure,
    token_source,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.options import DEFAULT_API_URL, TOKEN_ENV_VARS, normalize_endpoint
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.pacing import RequestPacer

try:
    import requests
    from requests.adapters import HTTPAdapter
except ImportError:
    pass  # python-digitalocean needs requests: HAS_DIGITALOCEAN is False then


# DigitalOcean's body of a missing object (``"id": "not_found"``): the only 404 that proves absence.
NOT_FOUND_ID = "not_found"
# A broken connection in the middle of an answer (a reset after the headers): a connection failure.
try:
    BROKEN_ANSWER_ERRORS = (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError)
except NameError:  # pragma: no cover - without requests the client refuses to start
    BROKEN_ANSWER_ERRORS = ()


class Transport:
    """The API access of ``DigitalOceanClient``: session, endpoint, pacing, retries, errors. Thread-safe."""

    USER_AGENT = "waldur.site_agent python-digitalocean"

    def __init__(self, token, api_url=DEFAULT_API_URL, timeout=30, max_retry_seconds=120,
                 max_connections=10, pacer=None, retry_policy=None, sleep=time.sleep,
                 clock=time.monotonic, deadline=None):
        if not HAS_DIGITALOCEAN:
            raise RuntimeError(missing_required_lib("python-digitalocean"))
        if not token:
            raise ValueError("a DigitalOcean token is required")
        self.endpoint = normalize_endpoint(api_url)
        parts = urlsplit(self.endpoint)
        self._origin = (parts.scheme, parts.netloc)
        self._token = token
        self.timeout = timeout
        self._sleep = sleep
        self._clock = clock
        self.pacer = pacer or RequestPacer(sleep=sleep, clock=clock)
        self.retry_policy = retry_policy or RetryPolicy(
            max_attempts=6, max_retry_seconds=max_retry_seconds, sleep=sleep, clock=clock)
        # 429s are the API pacing us, not failing: bounded by time, not by a count
        self.throttle_policy = RetryPolicy(
            max_attempts=10000, max_retry_seconds=self.retry_policy.max_retry_seconds,
            sleep=sleep, clock=clock)
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=max(1, max_connections))
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers.update({
            "Authorization": "Bearer " + token,
            "User-Agent": "%s/%s" % (self.USER_AGENT, LIBRARY_VERSION),
            "Accept": "application/json",
        })
        self.stats = _Counter()
        # clock time no call waits past (the module's deadline), whatever Retry-After says
        self.deadline = deadline
        self.auth_error = None

    @property
    def api_calls(self):
        return self.stats.calls

    def build(self, cls, **attributes):
        """A python-digitalocean object bound to this client (endpoint, session, no token)."""
        return build(self, cls, **attributes)

    def resolve_url(self, url):
        """Absolute URL on the configured endpoint. Pagination links the API builds
        from its own host are moved onto the endpoint, so no request (and no token)
        ever leaves for another host."""
        full = urljoin(self.endpoint, url)
        parts = urlsplit(full)
        if (parts.scheme, parts.netloc) == self._origin:
            return full
        marker = parts.path.find("/v2/")
        if marker < 0:
            raise DigitalOceanError("refusing to follow %s: it is not under the DigitalOcean endpoint"
                                    % urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")))
        relative = parts.path[marker + len("/v2/"):]
        return urlunsplit(self._origin + (urlsplit(self.endpoint).path + relative, parts.query, ""))

    def _scrub(self, text):
        return redact_text(str(text or ""), [self._token] if self._token else ())

    def _service_message(self, response):
        try:
            body = response.json()
        except ValueError:
            body = None
        message = body.get("message") if isinstance(body, dict) else None
        if not message:
            message = response.reason or ""
        message = " ".join(self._scrub(message).split())[:300]
        return message.rstrip("."), (body.get("id") if isinstance(body, dict) else None)

    def send(self, method, url, params=None, retry_writes=False):
        """One API call, paced and retried; returns the 2xx ``requests.Response``.

        Retried: 429 (after ``Retry-After``), and for reads, deletes and
        ``retry_writes`` posts also 5xx and lost connections. Other POSTs are
        retried only when the request surely never reached the API; otherwise
        the error is ``ambiguous`` and the caller re-reads before trying again.
        """
        params = params or {}
        full_url = self.resolve_url(url)
        path = urlsplit(full_url).path
        kwargs = {"timeout": self.timeout}
        if method == "GET":
            kwargs["params"] = params
        elif params or method != "DELETE":
            kwargs["data"] = json.dumps(params)
            kwargs["headers"] = {"Content-Type": "application/json"}
        idempotent = method in ("GET", "PUT", "DELETE") or retry_writes
        throttles = [0]
        deadline = self.call_deadline()

        def past_deadline(wait):
            # status 429: a transient failure, so the item ends ``retry`` and the next pass sends it
            held = " (Retry-After: %.0f more seconds)" % wait if wait > 0 else ""
            return DigitalOceanError(
                "not sent: DigitalOcean's rate limit would hold it past the module's deadline%s: %s %s"
                % (held, method, path), status=429, method=method, path=path)

        def before_attempt(attempt):
            if self.pacer.acquire(deadline) is None:
                raise past_deadline(self.pacer.pause_left())
            if method != "GET":
                check_write()  # a module outliving its pass writes nothing (core/pass_guard.py)
            self.stats.add("calls")
            self.stats.add("reads" if method == "GET" else "writes")

        def classify(response, attempt):
            status = response.status_code
            if status < 400:
                remaining = response.headers.get("ratelimit-remaining")
                if remaining is not None and str(remaining).strip().isdigit():
                    self.pacer.observe_remaining(int(remaining))
                if status != 204:
                    self._expect_json_object(response, method, path)
                return DONE

            def give_up():
                message, error_id = self._service_message(response)
                if status == 404 and error_id != NOT_FOUND_ID:
                    # a proxy's or web server's page, not DigitalOcean saying the object is gone
                    return DigitalOceanUnproven(
                        "DigitalOcean answered %s %s with 404 %s, not its own not_found; whether the object "
                        "exists is not proven" % (method, path, describe_body(response, self._scrub)),
                        status=status, method=method, path=path)
                error_class = DigitalOceanNotFound if status == 404 else DigitalOceanError
                error = error_class(describe_failure(status, message, method, path, attempt,
                                                     token_key=token_source(self._token, os.environ, TOKEN_ENV_VARS)),
                                    status=status, method=method, path=path, error_id=error_id,
                                    service_message=message, ambiguous=status >= 500 and not idempotent)
                if status == 401:
                    self.auth_error = error
                return error

            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            if status == 429:
                throttles[0] += 1
                self.stats.add("throttled")
                pause = retry_after if retry_after is not None else min(30.0, 2.0 ** throttles[0])
                if self.deadline is not None and self._clock() + pause > self.deadline:
                    error = give_up()
                    error.args = ("%s; DigitalOcean asked to wait %.0f seconds (Retry-After), past the module's "
                                  "deadline" % (error, pause),)
                    raise error
                # the pacer waits the pause out, for every thread
                return Retry(give_up, retry_after=pause, policy=self.throttle_policy, count=throttles[0],
                             wait_with=self.pacer.throttled)
            if status >= 500 and idempotent:
                return Retry(give_up, retry_after=retry_after)
            raise give_up()

        def connection_error(failure):
            return DigitalOceanError(
                "cannot reach DigitalOcean at %s after %d attempts (%s): %s %s"
                % (urlunsplit(self._origin + ("", "", "")), failure.attempt, type(failure.exc).__name__,
                   method, path),
                method=method, path=path, ambiguous=failure.reason == NOT_RESENDABLE)

        return send_with_retries(
            lambda attempt: self.session.request(method, full_url, **kwargs), classify, connection_error,
            self.retry_policy, idempotent, connection_errors=(requests.ConnectionError, requests.Timeout)
            + BROKEN_ANSWER_ERRORS, deadline=deadline,
            before_attempt=before_attempt, on_retry=lambda attempt: self.stats.add("retries"), sleep=self._sleep)

    def _expect_json_object(self, response, method, path):
        """A 2xx answer must be the JSON object the API documents: an HTML page (a proxy's or a
        maintenance page), truncated JSON or a bare list is an error, never an empty listing.
        The parsed body is kept on the response, so the library does not parse it again."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise DigitalOceanUnproven(
                "DigitalOcean answered %s %s with %s instead of a JSON object; nothing in it is trusted: %s %s"
                % (response.status_code, response.reason or "", describe_body(response, self._scrub), method, path),
                status=response.status_code, method=method, path=path)
        response.json = lambda *args, **kwargs: body

    def call_deadline(self):
        """When retrying one call stops: ``max_retry_seconds`` from now, never past ``deadline``."""
        deadline = self.retry_policy.start()
        return deadline if self.deadline is None else min(deadline, self.deadline)
