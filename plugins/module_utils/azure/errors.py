# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The collection's Azure error model: :class:`AzureError` and :class:`OperationStillRunning`.

``sdk.translate_error`` turns any exception of an SDK call into one of these."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import Unproven

# ARM's error codes of a 404 that say the object itself does not exist (ResourceNotFound,
# ResourceGroupNotFound, NotFound, ParentResourceNotFound, ...). A subscription ARM does not know
# says nothing about the objects in it: it is a setting to fix, never evidence that an object is gone.
NOT_OBJECT_NOT_FOUND_CODES = frozenset(("subscriptionnotfound", "invalidsubscriptionid"))


class AzureError(Exception):
    """An Azure failure in the service's own words: HTTP status, ARM error code, message."""

    def __init__(self, message, status=None, code=None):
        super(AzureError, self).__init__(message)
        self.message = message
        self.status = status
        self.code = code

    @property
    def not_found(self):
        """ARM's own not-found of the object: a 404 carrying an ARM error code ending in ``NotFound``
        (a 404 without one, an HTML page of a proxy, proves nothing: ``AzureUnproven``)."""
        code = str(self.code or "").lower()
        return self.status == 404 and code.endswith("notfound") and code not in NOT_OBJECT_NOT_FOUND_CODES

    def retitled(self, message):
        """The same error (same class) with another message."""
        return type(self)(message, status=self.status, code=self.code)

    def __str__(self):
        details = ", ".join(part for part in (
            "HTTP %s" % self.status if self.status else "", self.code or "") if part)
        return "%s (%s)" % (self.message, details) if details else self.message


class AzureUnproven(AzureError, Unproven):
    """An answer of ARM that is not proof: a 2xx body that is not the JSON the call expects, a listing
    without its ``value``, a 404 without ARM's error code. The item is left as it is (``retry``),
    never erred, and the pass fails."""

    def __init__(self, message, status=None, code=None):
        AzureError.__init__(self, message, status=status, code=code)
        self.message = message
        self.call = None
        self.args = (message,)

    def __str__(self):
        return "unproven: %s" % AzureError.__str__(self)


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


def credential_key(message):
    """The ``backend_settings`` key a failed sign-in's ``message`` asks to fix, when it names one of
    Entra's codes of ``CREDENTIAL_KEYS``; else None. (The health and diagnostics playbooks' filters
    read it too.)"""
    for code, key in CREDENTIAL_KEYS:
        if re.search(r"\b%s\b" % code, message or ""):  # the code itself, not a longer one
            return key
    return None


def credential_hint(message):
    """``message`` of a failed sign-in followed by the ``backend_settings`` key it asks to fix
    (``; check the offering's backend_settings.client_secret``), when Entra's answer names one."""
    key = credential_key(message)
    return "%s; check the offering's backend_settings.%s" % (message, key) if key else message
