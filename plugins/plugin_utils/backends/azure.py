# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Azure in the backend registry: virtual machines (each with its network chain) from a location, a
size and a marketplace image, in the offering's own subscription. Its modules are ``azure_vm_chain``
(the act), ``azure_vm_chain_info`` (the probe and the report), ``azure_catalogue_info`` and
``azure_audit``; its planning and its health and diagnostics judgements are here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.auth import (
    SECRET_SETTINGS,
    settings_problems,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.endpoints import plain_http_endpoints
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import credential_key
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.subscription import (
    UNUSABLE_SUBSCRIPTION_STATES,
    subscription_hint,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.http import shorten
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends import Backend
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends.answers import (
    MISSING,
    dig,
    http_failure,
    or_default,
    settings_of,
    status_of,
    text,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends.planning import (
    as_list,
    first,
    order_items,
    provider_key,
    unpacked,
)

ARM_ENDPOINT = "https://management.azure.com"
AUTHORITY_HOST = "https://login.microsoftonline.com"


# ---------------------------------------------------------------- planning: orders -> azure_vm_chain items

def plan(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """Claimed orders -> planned ``azure_vm_chain`` items, with ``error``/``skip`` (behaviour page, Azure)."""
    orders = unpacked(orders, "orders")

    def create(order, resource, settings):
        params = _vm_create_params(order, resource, settings, ssh_keys)
        if resource.get("backend_id"):
            # The machine exists: a Create or Restore only checks it (azure_vm_chain reads it by its
            # backend id); what a new machine would need (an SSH key, a location) is not asked for.
            params.pop("error", None)
        return params

    # Azure machines are not resized (set_resource_limits refuses upstream too).
    items = order_items(orders, backend_settings, create,
                        lambda *order_resource_settings_backend_id: {"error": "resizing is not supported on Azure"})
    for order, item in zip(orders, items):
        offering = offering_uuid or order.get("offering_uuid")
        if offering:
            try:
                item["offering_uuid"] = normalize_uuid(offering)
            except ValueError:
                raise AnsibleFilterError("offering_uuid: %r is not a UUID" % (offering,))
    return items


def _vm_create_params(order, resource, settings, ssh_keys):
    attributes = resource.get("attributes") or {}
    params = {
        "state": "present",
        "name": resource.get("name") or order.get("resource_name") or attributes.get("name") or resource.get("slug") or "",
        "location": first(attributes, "location") or settings.get("default_location"),
        "size": first(attributes, "size") or settings.get("default_size"),
        "image": first(attributes, "image") or settings.get("default_image"),
        "admin_username": first(attributes, "username") or "waldur",
        "custom_data": first(attributes, "user_data", "cloud_init"),
        "resource_group": settings.get("default_resource_group") or None,
        "network_cidr": settings.get("network_cidr") or "10.0.0.0/16",
        "subnet_cidr": settings.get("subnet_cidr") or "10.0.0.0/24",
        "allowed_ssh_ranges": [str(r) for r in as_list(settings.get("allowed_ssh_ranges"))],
    }
    for what in ("location", "size", "image"):
        if not params[what]:
            params["error"] = "Azure %s is set neither on the order nor in backend_settings" % what
            return params
    if ssh_keys is None:
        return params  # the catalogue check (no keys read yet) judges the location, size and image only
    public_key = first(attributes, "ssh_public_key")
    if not public_key:
        key_uuid = first(attributes, "ssh_key", "ssh_key_uuid")
        if not key_uuid:
            params["error"] = ("the order carries no SSH key (ssh_public_key, or ssh_key naming a service "
                               "provider key); a machine without one would admit nobody")
            return params
        key = provider_key(ssh_keys, key_uuid)
        if not key or not key.get("public_key"):
            params["error"] = ("the order carries no SSH key: %s is not an SSH key of the service provider"
                               % key_uuid)
            return params
        public_key = key["public_key"]
    params["ssh_public_key"] = public_key
    return params


# ---------------------------------------------------------------- configuration, health, diagnostics

def check_settings(path, settings, problems):
    """The sign-in keys as azure/auth.py reads them; endpoints over plain HTTP are named."""
    for key, message in settings_problems(settings):
        problems.error("%s.%s" % (path, key), message)
    for warning in plain_http_endpoints(settings):
        key, _sep, message = warning.partition(": ")
        problems.warn("%s.%s" % (path, key), message)


def probe_failure(result):
    """azure_vm_chain_info's result (read_subscription): the subscription read, or why not."""
    if "subscription" in result:
        return ""
    return "Azure cannot be worked with: %s" % (result.get("msg") or "the subscription could not be read")


def sign_in_refusal(token, authority_host):
    """Why Microsoft Entra gave no token (its first line), and the backend_settings key it asks to fix."""
    reason = re.sub(r"(?s)[\r\n].*", "", str(or_default(dig(token, "json", "error_description"), "")))
    reason = reason or http_failure(token, "Azure AD", authority_host)
    key = credential_key(reason)
    return reason, "; check backend_settings.%s" % key if key else ""


def _health_azure_probe(probe, notes):
    """The sign-in of the passes (azure_vm_chain_info): its message names the subscription and the
    identity, or both subscriptions of a conflict."""
    subscription = dig(probe, "subscription")
    if subscription is MISSING:
        return or_default(dig(probe, "msg"), "the Azure sign-in failed")
    notes.append("Azure subscription %s %s (signed in as %s)" % (
        or_default(dig(subscription, "display_name"), "?", True), or_default(dig(subscription, "state"), "?", True),
        text(dig(probe, "azure_sign_in"))))
    return ""


def _health_azure_plain(offering, token, subscription, named, notes):
    """A client secret of backend_settings, checked with two plain requests."""
    settings = settings_of(offering)
    wanted = str(or_default(dig(settings, "subscription_id"), "")).strip()
    body = dig(subscription, "json")
    error = or_default(dig(body, "error"), {}) if isinstance(body, Mapping) else {}
    code = or_default(dig(error, "code"), "")
    identity = "service principal %s (auth_source auto)" % text(dig(settings, "client_id"))
    # the rule of module_utils/azure/auth.py: AZURE_SUBSCRIPTION_ID may only name the offering's
    if named and named.lower() != wanted.lower():
        return ("subscription_id is %s but AZURE_SUBSCRIPTION_ID in the environment names %s: an offering works only "
                "in its own subscription, so nothing is done; make AZURE_SUBSCRIPTION_ID the same or remove it"
                % (wanted, named))
    if dig(token, "json", "access_token") is MISSING:
        reason, fix = sign_in_refusal(token, or_default(dig(settings, "authority_host"), AUTHORITY_HOST, True))
        return "Azure AD refused the service principal: " + reason + fix
    state = dig(body, "state")
    if status_of(subscription) == 200 and str(or_default(state, "")).lower() in UNUSABLE_SUBSCRIPTION_STATES:
        return ("subscription_id %s (%s) is %s: ARM creates nothing in it; enable it, or check "
                "backend_settings.subscription_id" % (wanted, text(dig(body, "displayName"), "no name"), state))
    if status_of(subscription) == 200:
        notes.append("Azure subscription %s %s" % (text(dig(body, "displayName")), text(state)))
        return ""
    # the probe's table (azure/subscription.py): by ARM's code, else by status (a 403 without one); a
    # 404 without ARM's code is a proxy's page (below)
    hint = subscription_hint(code, status_of(subscription))
    if hint:
        return "subscription_id %s: ARM answered %s(HTTP %s) to %s: %s" % (
            wanted, "%s " % (code,) if code else "", text(dig(subscription, "status")), identity, hint)
    return "subscription_id %s could not be read as %s: %s" % (
        wanted, identity, http_failure(subscription, "Azure Resource Manager",
                                       or_default(dig(settings, "arm_endpoint"), ARM_ENDPOINT, True)))


def health(offering, reads, notes):
    """``reads``: ``probe`` (azure_vm_chain_info's sign-in, for every sign-in but a client secret of
    backend_settings), else ``token`` and ``subscription`` (two plain requests); ``quota``
    (azure_catalogue_info's headroom) and ``subscription_env`` (the controller's AZURE_SUBSCRIPTION_ID)."""
    probe = reads.get("probe", {})
    if "skipped" not in probe:
        problem = _health_azure_probe(probe, notes)
    else:
        problem = _health_azure_plain(offering, reads.get("token", {}), reads.get("subscription", {}),
                                      str(reads.get("subscription_env") or "").strip(), notes)
    if problem:
        return problem
    # the vCPU headroom of an Azure offering that is otherwise ready: never a fault
    quota = reads.get("quota", {})
    if or_default(dig(quota, "headroom"), ""):
        notes.append(quota["headroom"])
    elif "skipped" not in quota:
        reason = shorten(" ".join(str(or_default(dig(quota, "msg"), "no answer")).split()), 300)[:200]
        notes.append("vCPU headroom not read: " + reason)
    return ""


def diagnose(offering, reads, lines, problems):
    """``reads``: ``token`` and ``subscription``, for a client secret of backend_settings."""
    settings = settings_of(offering)
    token, subscription = reads.get("token", {}), reads.get("subscription", {})
    if not or_default(dig(settings, "client_secret"), ""):
        lines.append("Azure: signs in without a client secret (auth_source %s); not checked here, the order pass "
                     "probes it" % or_default(dig(settings, "auth_source"), "auto"))
        return
    where = or_default(dig(settings, "arm_endpoint"), ARM_ENDPOINT)
    body = dig(subscription, "json")
    if dig(token, "json", "access_token") is MISSING:
        reason, fix = sign_in_refusal(token, None)
        lines.append("Azure AD: no token for the service principal: " + reason + fix)
        problems.append("Azure AD refused the service principal" + fix)
    elif status_of(subscription) == 200:
        lines.append("Azure %s: reachable, subscription %s (%s) %s" % (
            where, text(dig(body, "displayName")), text(dig(body, "subscriptionId")), text(dig(body, "state"))))
    else:
        lines.append("Azure %s: %s" % (where, http_failure(subscription, "Azure Resource Manager")))
        problems.append(http_failure(subscription, "Azure Resource Manager"))


BACKEND = Backend(
    name="azure",
    title="Azure",
    machine="virtual machine",
    # the sign-in keys (azure/auth.py says which are required for which auth_source)
    credentials=("subscription_id", "tenant_id", "client_id", "client_secret"),
    settings={
        "auth_source": "str", "profile": "str", "x509_certificate_path": "str", "x509_certificate": "str",
        "x509_certificate_password": "str", "federated_token_file": "str", "cloud_environment": "str",
        "default_location": "str", "default_size": "str", "default_image": "image",
        "default_resource_group": "str", "network_cidr": "cidr", "subnet_cidr": "cidr",
        "allowed_ssh_ranges": "str_or_list", "arm_endpoint": "url", "authority_host": "url",
        "polling_interval": "number",
    },
    secret_settings=SECRET_SETTINGS,
    # the variables AWX's built-in Azure credential injects
    environment={"subscription_id": ("AZURE_SUBSCRIPTION_ID",), "tenant_id": ("AZURE_TENANT", "AZURE_TENANT_ID"),
                 "client_id": ("AZURE_CLIENT_ID",), "client_secret": ("AZURE_SECRET",),
                 "federated_token_file": ("AZURE_FEDERATED_TOKEN_FILE",)},
    secret_environment=("AZURE_SECRET", "AZURE_PASSWORD"),
    create_inputs=(
        ("location", ("default_location",), ("location",)),
        ("size", ("default_size",), ("size",)),
        ("image", ("default_image",), ("image",)),
    ),
    catalogue_keys=("location", "size", "image"),
    plan=plan,
    power_states=("deallocated", "running"),
    check_settings=check_settings,
    probe_failure=probe_failure,
    health=health,
    diagnose=diagnose,
)
