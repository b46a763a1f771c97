# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The run's subscription read directly (the order pass's probe), and what ARM's refusal asks to fix."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError

# Subscription states in which ARM creates nothing (Warned and PastDue still work).
UNUSABLE_SUBSCRIPTION_STATES = ("disabled", "deleted")

# What a failed read of the subscription asks the operator to do, by ARM's code (else by status; a
# 404 without ARM's code is a proxy's page, not ARM's word, and is named as it came).
SUBSCRIPTION_HINTS = (
    ("InvalidSubscriptionId", None, "a malformed id; check backend_settings.subscription_id"),
    ("SubscriptionNotFound", None, "no such subscription, or no role on it; check backend_settings.subscription_id"),
    ("AuthorizationFailed", 403, "no role that may read it; give the identity Contributor on the subscription"),
    ("InvalidAuthenticationTokenTenant", None, "a subscription of another tenant; check "
                                               "backend_settings.subscription_id and tenant_id"),
)


def subscription_hint(code, status):
    """What ARM's refusal of a subscription read asks to fix: by its code, else by its status; None."""
    for known, _status, hint in SUBSCRIPTION_HINTS:
        if code == known:
            return hint
    for _code, known, hint in SUBSCRIPTION_HINTS:
        if known is not None and status == known:
            return hint
    return None


def read_subscription(clients):
    """``{subscription_id, display_name, state, tenant_id}`` of the run's subscription, read directly
    (:meth:`AzureClients.subscription`). Raises :class:`AzureError` with one line naming the
    subscription, where it came from, ARM's answer and the identity that signed in (never a secret),
    and what to do when ARM does not know it or refuses this identity; a Disabled or Deleted
    subscription, in which ARM creates nothing, fails as well. The subscription and ARM's code come
    first: the pass's line of an offering is cut at 300 characters."""
    sign_in = clients.sign_in
    subscription = ("subscription_id %s" % clients.subscription_id if sign_in.subscription_from == "subscription_id"
                    else "subscription %s (%s)" % (clients.subscription_id, sign_in.subscription_from))
    try:
        body = clients.subscription()
    except AzureError as error:
        hint = subscription_hint(error.code, error.status)
        if hint:
            answer = " ".join(part for part in (error.code, "(HTTP %s)" % error.status if error.status else "")
                              if part)
            raise AzureError("%s: ARM answered %s to %s: %s" % (subscription, answer, sign_in.identity(), hint))
        raise AzureError("%s could not be read as %s: %s" % (subscription, sign_in.identity(), error))
    state = body.get("state")
    if str(state or "").lower() in UNUSABLE_SUBSCRIPTION_STATES:
        raise AzureError("%s (%s) is %s: ARM creates nothing in it; enable it, or check "
                         "backend_settings.subscription_id" % (subscription, body.get("displayName") or "no name",
                                                               state))
    return {"subscription_id": body.get("subscriptionId"), "display_name": body.get("displayName"), "state": state,
            "tenant_id": body.get("tenantId")}
