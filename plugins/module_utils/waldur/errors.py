# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Waldur's error model: :class:`WaldurApiError`, the text of an error body and the
cause of a failed connection in a few words. The transport is in ``client.py``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import Unproven
from ansible_collections.waldur.site_agent.plugins.module_utils.core.retry import RETRYABLE_STATUSES

try:
    import requests
except ImportError:
    HAS_REQUESTS = False
else:
    HAS_REQUESTS = True


def _error_text(body):
    """Waldur's message from an error body: ``detail``, ``non_field_errors`` or per-field errors."""
    if body is None:
        return ""
    if isinstance(body, str):
        return body
    if isinstance(body, list):
        return "; ".join(_error_text(item) for item in body if item not in (None, ""))
    if isinstance(body, dict):
        parts = []
        if body.get("detail") not in (None, ""):
            parts.append(_error_text(body["detail"]))
        if body.get("non_field_errors"):
            parts.append(_error_text(body["non_field_errors"]))
        for key in sorted(body):
            if key in ("detail", "non_field_errors"):
                continue
            parts.append("%s: %s" % (key, _error_text(body[key])))
        return "; ".join(part for part in parts if part)
    return str(body)


class WaldurApiError(Exception):
    """A Waldur call that failed for good. ``status`` is None for connection failures;
    ``api_url`` is set when Waldur could not be reached at all."""

    def __init__(self, status, method, path, message, api_url=None, body=None):
        self.status = status
        self.method = method
        self.path = path
        self.message = message
        self.api_url = api_url
        # Waldur's parsed JSON error body, so callers can tell refusals apart by field, not by words.
        self.body = body
        super(WaldurApiError, self).__init__(str(self))

    def fields(self):
        """The field names of a 400's JSON body (``{"date": [...]}`` -> ``{"date"}``)."""
        return set(self.body) if isinstance(self.body, dict) else set()

    def __str__(self):
        if self.api_url:
            # One line an operator can act on: where (the configured waldur_api_url) and why.
            return "cannot reach Waldur at %s (waldur_api_url): %s (%s %s)" % (
                self.api_url, self.message, self.method, self.path)
        status = "HTTP %s" % self.status if self.status is not None else "no response"
        text = "Waldur %s %s failed (%s)" % (self.method, self.path, status)
        return "%s: %s" % (text, self.message) if self.message else text

    @property
    def transient(self):
        """True when the failure says nothing about the request itself (retry in the next pass)."""
        return self.status is None or self.status in RETRYABLE_STATUSES

    @property
    def not_found(self):
        """Waldur's own not-found: a 404 whose body is Waldur's JSON error (``{"detail": ...}``). A 404
        that is an HTML page (a proxy's, a wrong ``api_url``) or empty proves nothing about the object."""
        return self.status == 404 and isinstance(self.body, dict)

    @property
    def conflict(self):
        return self.status == 409

    @property
    def unproven(self):
        """True for an answer that proves nothing (``WaldurUnproven``)."""
        return False


class WaldurUnproven(WaldurApiError, Unproven):
    """A 2xx answer of Waldur that is not proof (not JSON, the wrong shape, a listing whose pages do
    not add up to its ``X-Result-Count``): the item it was for is left as it is, never erred."""

    def __init__(self, status, method, path, message, body=None):
        WaldurApiError.__init__(self, status, method, path, message, body=body)
        self.message = message  # Unproven's constructor, reached through super(), set it to the whole text
        self.call = "%s %s" % (method, path)
        self.args = (str(self),)

    def __str__(self):
        return "Waldur %s %s (HTTP %s) is not proof: %s" % (self.method, self.path, self.status, self.message)

    @property
    def transient(self):
        return False

    @property
    def unproven(self):
        return True


_ERRNO_TEXT = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")
_SSL_TEXT = re.compile(r"\[SSL: [A-Z0-9_]+\] ([^('\"]+)")


def describe_connection_error(exc):
    """The cause of a failed connection in a few words (``connection refused``, ``Name or
    service not known``, ``TLS: certificate verify failed: ...``, ``no answer within 10 s``),
    without the reprs of urllib3's pool and connection objects."""
    text = str(exc)
    if HAS_REQUESTS and isinstance(exc, requests.exceptions.SSLError):
        match = _SSL_TEXT.search(text)
        return "TLS: %s" % (match.group(1).strip() if match else "handshake failed")
    if HAS_REQUESTS and isinstance(exc, requests.exceptions.ConnectTimeout):
        return "no answer to the connection attempt (timed out)"
    if HAS_REQUESTS and isinstance(exc, requests.exceptions.ReadTimeout):
        return "no answer within the request timeout (read timed out)"
    match = _ERRNO_TEXT.search(text)
    if match:
        return match.group(1).strip().rstrip(".").lower() if "refused" in match.group(1).lower() \
            else match.group(1).strip().rstrip(".")
    if "RemoteDisconnected" in text or "Connection aborted" in text:
        return "the connection was closed without an answer"
    # Last resort: the exception's words without object reprs and the URL urllib3 repeats.
    text = re.sub(r"<[^>]*>:?\s*", "", text)
    text = re.sub(r"\(Caused by \w+\(", "(", text)
    return "%s: %s" % (type(exc).__name__, text[:200])


def not_waldur(client):
    """Why ``client``'s API root is not the Waldur API, or None when it is (or cannot be told now).

    One read of ``users/me/``, which every Waldur answers, for any valid token, with the token's
    user: a JSON object with its ``uuid`` and ``username``. Another service (a 404 of its own, a web
    site's HTML page, JSON of another shape) does not. A rejected token (401) and a transient failure
    say nothing about the URL: None. Used when a call failed in a way a wrong ``waldur_api_url`` and
    a wrong argument (an offering UUID) would both explain."""
    try:
        me = client.get("users/me/", params={"field": ["uuid", "username"]})
    except WaldurApiError as exc:
        if exc.status == 401 or exc.transient:
            return None
        return str(exc)
    if isinstance(me, dict) and me.get("uuid") and me.get("username"):
        return None
    return "Waldur GET %s answered JSON that is not a Waldur user (no uuid and username)" % client.api_path("users/me/")
