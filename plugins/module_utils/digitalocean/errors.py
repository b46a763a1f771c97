# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Errors of DigitalOcean calls, worded for the operator (never the token)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import Unproven


class DigitalOceanError(Exception):
    """A failed call. ``str()`` is a message for the operator: method, path, status,
    DigitalOcean's message; never headers or the token."""

    def __init__(self, message, status=None, method=None, path=None, error_id=None,
                 service_message=None, ambiguous=False):
        super(DigitalOceanError, self).__init__(message)
        self.status = status
        self.method = method
        self.path = path
        self.error_id = error_id
        self.service_message = service_message
        # a write that may or may not have happened (5xx, lost connection after sending)
        self.ambiguous = ambiguous


class DigitalOceanNotFound(DigitalOceanError):
    """DigitalOcean's own not-found (a 404 whose JSON body says ``"id": "not_found"``): the object
    does not exist (reads turn this into ``ProvenAbsence``)."""


class DigitalOceanUnproven(DigitalOceanError, Unproven):
    """An answer of DigitalOcean that is not proof: a 2xx body that is not the JSON object the API
    documents (an HTML page, truncated, an empty body), a listing of another shape or whose items do
    not add up to its ``meta.total``, a 404 that is not DigitalOcean's own. Not transient, never a
    reason to err an order: the item is left as it is (``retry``) and the pass fails."""

    def __init__(self, message, status=None, method=None, path=None):
        DigitalOceanError.__init__(self, message, status=status, method=method, path=path)
        self.message = message
        self.call = "%s %s" % (method, path) if method else None
        self.args = ("unproven: %s" % message,)

    def __str__(self):
        return "unproven: %s" % self.message


# Where the token comes from, for the message that asks to fix it (see token_source).
TOKEN_KEY = "backend_settings.token"


def token_source(token, environ, names):
    """The key an operator fixes when DigitalOcean rejects ``token``: the offering's
    ``backend_settings.token``, and the environment variable (of ``names``, in order) that holds
    the same token when it came from there (the configuration's loader fills a missing token from
    it). Compares the values only; names, never the token."""
    for name in names:
        if token and environ.get(name) == token:
            return "%s (taken from the environment variable %s)" % (TOKEN_KEY, name)
    return TOKEN_KEY


def describe_failure(status, service_message, method, path, attempts=1, token_key=TOKEN_KEY):
    reason = service_message or "no message"
    if status == 401:
        return "DigitalOcean rejected the token (401 %s): %s %s; check the offering's %s" % (
            reason, method, path, token_key)
    elif status == 403:
        summary = "the DigitalOcean token lacks the scope for this call (403 %s)" % reason
    elif status == 404:
        summary = "not found on DigitalOcean (404 %s)" % reason
    elif status == 422:
        summary = "DigitalOcean refused the request (422 %s)" % reason
    elif status == 429:
        summary = "DigitalOcean rate limit still exceeded after %d attempts (429 %s)" % (attempts, reason)
    elif status is not None and status >= 500:
        summary = "DigitalOcean server error after %d attempts (%d %s)" % (attempts, status, reason)
    else:
        summary = "DigitalOcean answered %s %s" % (status, reason)
    return "%s: %s %s" % (summary, method, path)
