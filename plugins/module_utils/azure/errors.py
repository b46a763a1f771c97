# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The collection's Azure error model: :class:`AzureError` and :class:`OperationStillRunning`.

``clients.translate_error`` turns any exception of an SDK call into one of these."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


class AzureError(Exception):
    """An Azure failure in the service's own words: HTTP status, ARM error code, message."""

    def __init__(self, message, status=None, code=None):
        super(AzureError, self).__init__(message)
        self.message = message
        self.status = status
        self.code = code

    @property
    def not_found(self):
        return self.status == 404

    def retitled(self, message):
        """The same error (same class) with another message."""
        return type(self)(message, status=self.status, code=self.code)

    def __str__(self):
        details = ", ".join(part for part in (
            "HTTP %s" % self.status if self.status else "", self.code or "") if part)
        return "%s (%s)" % (self.message, details) if details else self.message


class OperationStillRunning(AzureError):
    """A long-running operation ARM accepted that had not finished by the deadline.

    ARM carries it on: nothing may be rolled back while it runs, and the next pass
    finds its object and looks at its provisioning state."""


def outcome_unknown(error):
    """Whether a write's failure leaves its outcome unknown or is transient (no answer, a timeout,
    throttling, a 5xx), as against a refusal that says nothing was done (another 4xx)."""
    return error.status is None or error.status in (408, 429) or error.status >= 500


# Microsoft Entra's sign-in errors (AADSTS codes) and the backend_settings key each one asks to fix.
CREDENTIAL_KEYS = (
    ("AADSTS7000215", "client_secret"),  # invalid client secret (often the secret's id, not its value)
    ("AADSTS7000222", "client_secret"),  # the client secret has expired
    ("AADSTS700016", "client_id"),       # no application with this id in the tenant
    ("AADSTS90002", "tenant_id"),        # no such tenant
    ("AADSTS900023", "tenant_id"),       # not a valid tenant id or name
)


def credential_hint(message):
    """``message`` of a failed sign-in followed by the ``backend_settings`` key it asks to fix
    (``; check the offering's backend_settings.client_secret``), when Entra's answer names one."""
    for code, key in CREDENTIAL_KEYS:
        if re.search(r"\b%s\b" % code, message or ""):  # the code itself, not a longer one
            return "%s; check the offering's backend_settings.%s" % (message, key)
    return message
