# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The judgements of the ``health`` and ``diagnostics`` playbooks, from their registered reads.

Both playbooks read each offering's Waldur and cloud with ``ansible.builtin.uri`` (and the Azure
probe modules), one loop item per offering, and hand the registered results here:
``health_verdicts`` says for each offering whether it is ready and why (or what it has), and
``diagnostics_reports`` gives each offering's report lines, problems and things to look at.
Operators and the tests read these texts, so their wording is fixed here; what both say the same
way (a failed HTTP call, a 200 that is not JSON, Entra's sign-in refusals) is said once.

A read that did not run (a skipped loop item) has no ``status``: it counts as no answer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from collections.abc import Mapping
from urllib.parse import urlsplit

from ansible_collections.waldur.site_agent.plugins.filter.agent_pass import create_gaps
from ansible_collections.waldur.site_agent.plugins.filter.order_pass import one_line
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import credential_key

_MISSING = object()
DO_API_URL = "https://api.digitalocean.com/v2/"
ARM_ENDPOINT = "https://management.azure.com"
AUTHORITY_HOST = "https://login.microsoftonline.com"

# ARM's answers to a subscription read the identity may fix, and what each asks for.
SUBSCRIPTION_HINTS = {
    "InvalidSubscriptionId": "a malformed id; check backend_settings.subscription_id",
    "SubscriptionNotFound": "no such subscription, or no role on it; check backend_settings.subscription_id",
    "AuthorizationFailed": "no role that may read it; give the identity Contributor on the subscription",
    "InvalidAuthenticationTokenTenant": "a subscription of another tenant; check backend_settings.subscription_id "
                                        "and tenant_id",
}

ERRED_WARNING = ("%s resource(s) Erred in Waldur (Waldur gave up on them; a machine may still run behind one: "
                 "waldur.site_agent.audit names them)")


def _dig(value, *keys):
    """``value[k1][k2]...``, or ``_MISSING`` when a step is not a mapping holding the key."""
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            return _MISSING
        value = value[key]
    return value


def _or(value, default, falsy=False):
    """Jinja's ``default``: ``default`` for a missing value (and, with ``falsy``, for a false one)."""
    return default if value is _MISSING or (falsy and not value) else value


def _text(value, missing="?"):
    return missing if value is _MISSING else str(value)


def _int(value):
    """Jinja's ``int``: the number, or 0 when the value is none."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _result(registered, index):
    """The loop item ``index`` of a registered loop (or of a plain list of results); {} when absent."""
    results = registered.get("results") if isinstance(registered, Mapping) else registered
    if isinstance(results, (list, tuple)) and 0 <= index < len(results) and isinstance(results[index], Mapping):
        return results[index]
    return {}


def _status(result):
    return _or(_dig(result, "status"), -1)


def _api_root(url):
    """waldur_api_url as the playbooks call it: without trailing slashes or ``/api``."""
    return re.sub(r"/api$", "", re.sub(r"/+$", "", str(url)))


def _settings(offering):
    settings = _dig(offering, "backend_settings")
    return settings if isinstance(settings, Mapping) else {}


def http_failure(result, what, where=None):
    """Why an ``ansible.builtin.uri`` call got no usable answer from ``what`` (the service's name).

    A refusal of the credentials (401, 403), another status, or no answer. With ``where`` (the
    health verdict) no answer names where and the cause alone (``Connection refused``); without it
    (the diagnostics report) an answer adds the service's ``detail`` and no answer the module's
    message."""
    status = _int(_status(result))
    if status in (401, 403):
        return "%s rejected the credentials (HTTP %s)" % (what, status)
    detail = _dig(result, "json", "detail")
    if status > 0:
        return "%s answered HTTP %s%s" % (what, status, "" if where is not None or detail is _MISSING
                                          else ": %s" % (detail,))
    text = re.sub(r"^Status code was -1 and not .[0-9]+.: ", "", str(_or(_dig(result, "msg"), "no answer")))
    if where is None:
        return "%s is unreachable: %s" % (what, text)
    errno = re.search(r"\[Errno -?\d+\] ([^>]+)", text)
    cause = errno.group(1) if errno else re.sub(r"^Request failed: ", "", text)
    return "%s is unreachable at %s: %s" % (what, where, cause.strip())


def malformed(result, call, wanted="a JSON object"):
    """A 200 that is not the JSON asked for (Waldur's maintenance page, another site at a wrong
    waldur_api_url, truncated JSON): no answer to trust. Names it by its type and first characters."""
    content = " ".join(str(_or(_dig(result, "content"), "")).split())[:80]
    return "Waldur %s answered HTTP 200 with %s '%s' instead of %s" % (
        call, _text(_dig(result, "content_type"), "no content type"), content, wanted)


def _not_waldur(offering, identity, path):
    """users/me/ answered 404 or JSON without a user: another service (or a wrong path) answers at
    waldur_api_url, not an offering problem. None when it answered as Waldur (or not at all)."""
    status, body = _status(identity), _or(_dig(identity, "json"), None)
    if status == 404 or (status == 200 and isinstance(body, Mapping) and "username" not in body):
        return ("waldur_api_url %s does not answer as the Waldur API: GET %susers/me/ answered %s; set it to the "
                "API root of Waldur" % (offering["waldur_api_url"], path,
                                        "HTTP 404" if status == 404 else "JSON that is not a Waldur user"))
    return None


def _sign_in_refusal(token, authority_host):
    """Why Microsoft Entra gave no token (its first line), and the backend_settings key it asks to fix."""
    reason = re.sub(r"(?s)[\r\n].*", "", str(_or(_dig(token, "json", "error_description"), "")))
    reason = reason or http_failure(token, "Azure AD", authority_host)
    key = credential_key(reason)
    return reason, "; check backend_settings.%s" % key if key else ""


def _health_waldur(offering, identity, read, gaps, notes):
    """The first Waldur problem of a health check, or '' (and the notes of what Waldur said)."""
    waldur = _api_root(offering["waldur_api_url"]) + "/api/"
    path = urlsplit(waldur).path
    uuid = offering["waldur_offering_uuid"]
    if _status(identity) == 401:
        return "Waldur rejected the token (HTTP 401)"
    stranger = _not_waldur(offering, identity, path)
    if stranger:
        return stranger
    if _status(identity) != 200:
        return http_failure(identity, "Waldur", waldur + " (waldur_api_url)")
    if not isinstance(_dig(identity, "json"), Mapping):
        return malformed(identity, "GET %susers/me/" % path) + "; is waldur_api_url %s the Waldur API?" % (
            offering["waldur_api_url"],)
    if _status(read) == 404:
        return ("offering %s (waldur_offering_uuid) is not an offering of this token's provider in Waldur (HTTP 404): "
                "check the UUID and that the token's user manages the offering" % uuid)
    if _status(read) != 200:
        return "reading offering %s: %s" % (uuid, http_failure(read, "Waldur", waldur))
    if not isinstance(_dig(read, "json"), Mapping):
        return malformed(read, "GET %smarketplace-provider-offerings/%s/" % (path, uuid))
    if gaps:
        # a provider-side gap: no Create order could be built (the order pass fails the offering for it)
        return "the offering cannot build a machine: " + "; ".join(gaps)
    notes.append("Waldur answers as %s" % _or(_dig(identity, "json", "username"), "the agent user"))
    notes.append("offering %s (%s)" % (_text(_dig(read, "json", "name")), _text(_dig(read, "json", "state"))))
    return ""


def _health_digitalocean(offering, account, count, notes):
    where = _or(_dig(_settings(offering), "api_url"), DO_API_URL)
    if _status(account) != 200:
        return (http_failure(account, "DigitalOcean", where).replace("the credentials", "the token")
                + ("; check backend_settings.token" if _status(account) == 401 else ""))
    notes.append("DigitalOcean account %s" % _text(_dig(account, "json", "account", "status")))
    # headroom, never a fault: the order pass holds the orders past the droplet limit
    limit = _dig(account, "json", "account", "droplet_limit")
    total = (_dig(count, "json", "meta", "total")
             if _status(count) == 200 and isinstance(_dig(count, "json"), Mapping) else None)
    if _is_int(limit) and _is_int(total):
        notes.append("droplets %s of %s used" % (total, limit))
    else:
        notes.append("droplet headroom not read (%s)" % (
            "no droplet_limit in the account" if not _is_int(limit)
            else "GET droplets answered HTTP %s" % _text(_dig(count, "status"), "nothing")))
    return ""


def _health_azure_probe(probe, notes):
    """The sign-in of the passes (azure_vm_chain_info): its message names the subscription and the
    identity, or both subscriptions of a conflict."""
    subscription = _dig(probe, "subscription")
    if subscription is _MISSING:
        return _or(_dig(probe, "msg"), "the Azure sign-in failed")
    notes.append("Azure subscription %s %s (signed in as %s)" % (
        _or(_dig(subscription, "display_name"), "?", True), _or(_dig(subscription, "state"), "?", True),
        _text(_dig(probe, "azure_sign_in"))))
    return ""


def _health_azure_plain(offering, token, subscription, named, notes):
    """A client secret of backend_settings, checked with two plain requests."""
    settings = _settings(offering)
    wanted = str(_or(_dig(settings, "subscription_id"), "")).strip()
    body = _dig(subscription, "json")
    error = _or(_dig(body, "error"), {}) if isinstance(body, Mapping) else {}
    code = _or(_dig(error, "code"), "")
    identity = "service principal %s (auth_source auto)" % _text(_dig(settings, "client_id"))
    # the rule of module_utils/azure/auth.py: AZURE_SUBSCRIPTION_ID may only name the offering's
    if named and named.lower() != wanted.lower():
        return ("subscription_id is %s but AZURE_SUBSCRIPTION_ID in the environment names %s: an offering works only "
                "in its own subscription, so nothing is done; make AZURE_SUBSCRIPTION_ID the same or remove it"
                % (wanted, named))
    if _dig(token, "json", "access_token") is _MISSING:
        reason, fix = _sign_in_refusal(token, _or(_dig(settings, "authority_host"), AUTHORITY_HOST, True))
        return "Azure AD refused the service principal: " + reason + fix
    state = _dig(body, "state")
    if _status(subscription) == 200 and str(_or(state, "")).lower() in ("disabled", "deleted"):
        return ("subscription_id %s (%s) is %s: ARM creates nothing in it; enable it, or check "
                "backend_settings.subscription_id" % (wanted, _text(_dig(body, "displayName"), "no name"), state))
    if _status(subscription) == 200:
        notes.append("Azure subscription %s %s" % (_text(_dig(body, "displayName")), _text(state)))
        return ""
    # by ARM's code, or a 403 without one; a 404 without ARM's code is a proxy's page (below)
    known = isinstance(code, str) and code in SUBSCRIPTION_HINTS
    if known or _status(subscription) == 403:
        return "subscription_id %s: ARM answered %s(HTTP %s) to %s: %s" % (
            wanted, "%s " % (code,) if code else "", _text(_dig(subscription, "status")), identity,
            SUBSCRIPTION_HINTS[code] if known else SUBSCRIPTION_HINTS["AuthorizationFailed"])
    return "subscription_id %s could not be read as %s: %s" % (
        wanted, identity, http_failure(subscription, "Azure Resource Manager",
                                       _or(_dig(settings, "arm_endpoint"), ARM_ENDPOINT, True)))


def health_verdicts(offerings, identity, offering_read, digitalocean=None, droplet_count=None, azure_token=None,
                    azure_subscription=None, azure_probe=None, azure_quota=None, azure_subscription_env=""):
    """One verdict per offering of site_config's ``offerings``: ``{offering, ready, reason}``, the
    reason being the first problem found, or what the offering has when it is ready (who Waldur says
    the agent is, the offering, the cloud account or subscription, the headroom under the quota).

    The other arguments are the playbook's registered loops, one item per offering, in its order;
    ``azure_subscription_env`` the controller's AZURE_SUBSCRIPTION_ID."""
    named = str(azure_subscription_env or "").strip()
    verdicts = []
    for index, offering in enumerate(offerings or []):
        read = _result(offering_read, index)
        notes = []
        gaps = create_gaps(offering, _or(_dig(read, "json", "options"), None))
        problem = _health_waldur(offering, _result(identity, index), read, gaps, notes)
        kind = str(offering.get("backend_type", "")).lower()
        probe = _result(azure_probe, index)
        if not problem and kind == "digitalocean":
            problem = _health_digitalocean(offering, _result(digitalocean, index), _result(droplet_count, index),
                                           notes)
        elif not problem and kind == "azure" and "skipped" not in probe:
            problem = _health_azure_probe(probe, notes)
        elif not problem and kind == "azure":
            problem = _health_azure_plain(offering, _result(azure_token, index), _result(azure_subscription, index),
                                          named, notes)
        if not problem and kind == "azure":
            # the vCPU headroom of an Azure offering that is otherwise ready: never a fault
            quota = _result(azure_quota, index)
            if _or(_dig(quota, "headroom"), ""):
                notes.append(quota["headroom"])
            elif "skipped" not in quota:
                notes.append("vCPU headroom not read: " + one_line(_or(_dig(quota, "msg"), "no answer"))[:200])
        verdicts.append({"offering": offering.get("name"), "ready": not problem,
                         "reason": problem if problem else ", ".join(str(note) for note in notes)})
    return verdicts


def _is_list(value):
    return isinstance(value, (list, tuple))


def _diagnose_offering(offering, read, api_path, lines, problems):
    """The offering as Waldur has it: state, components (and those the configuration has that
    Waldur lacks), and what no Create order could be built without."""
    read_call = "GET %smarketplace-provider-offerings/%s/" % (api_path, offering["waldur_offering_uuid"])
    body = _dig(read, "json")
    if _status(read) == 200 and not isinstance(body, Mapping):
        lines.append("offering in Waldur: " + malformed(read, read_call))
        problems.append("offering not readable: " + malformed(read, read_call))
        return
    if _status(read) != 200:
        lines.append("offering in Waldur: " + http_failure(read, "Waldur"))
        problems.append("offering not readable: " + http_failure(read, "Waldur"))
        return
    components = _or(_dig(body, "components"), [])
    components = [component if isinstance(component, Mapping) else {}
                  for component in (components if _is_list(components) else [])]
    types = [component.get("type") for component in components]
    lines.append("offering in Waldur: %s, state %s, type %s" % (
        _text(_dig(body, "name")), _text(_dig(body, "state")), _text(_dig(body, "type"))))
    lines.append("components in Waldur: " + (", ".join(
        "%s (%s)" % (component.get("type"), component.get("billing_type")) for component in components) or "none"))
    missing = [str(name) for name in list(_or(_dig(offering, "backend_components"), {}) or []) if name not in types]
    if missing:
        lines.append("components of the configuration missing in Waldur: %s (run waldur.site_agent.load_components)"
                     % ", ".join(missing))
        problems.append("components missing in Waldur: " + ", ".join(missing))
    for gap in create_gaps(offering, _or(_dig(body, "options"), None)):
        lines.append("cannot build a machine: " + gap)
        problems.append("the offering cannot build a machine: " + gap)


def _diagnose_counts(counts, count_results, index, api_path, problems, warnings):
    """One ``label: number`` per count of ``counts`` (a 200 must be a JSON list with X-Result-Count)."""
    found = []
    for number, count in enumerate(counts):
        result = _result(count_results, index * len(counts) + number)
        status, total = _status(result), _dig(result, "x_result_count")
        if status == 200 and (not _is_list(_or(_dig(result, "json"), None)) or total is _MISSING):
            wrong = malformed(result, "GET " + api_path + str(count["path"]), "a JSON list with X-Result-Count")
            found.append("%s: unknown (%s)" % (count["label"], wrong))
            problems.append("%s unknown: %s" % (count["label"], wrong))
            continue
        found.append("%s: %s" % (count["label"], total if status == 200 and total is not _MISSING
                                 else "unknown (%s)" % http_failure(result, "Waldur")))
        if count.get("state") == "Erred" and status == 200 and _int(_or(total, 0)) > 0:
            warnings.append(ERRED_WARNING % (total,))
    return ", ".join(found)


def _diagnose_cloud(offering, account, token, subscription, lines, problems):
    kind = str(offering.get("backend_type", "")).lower()
    settings = _settings(offering)
    if kind == "digitalocean":
        where = _or(_dig(settings, "api_url"), DO_API_URL)
        if _status(account) == 200:
            lines.append("DigitalOcean %s: reachable, account %s, droplet limit %s" % (
                where, _text(_dig(account, "json", "account", "status")),
                _text(_dig(account, "json", "account", "droplet_limit"))))
        else:
            fix = "; check backend_settings.token" if _status(account) == 401 else ""
            lines.append("DigitalOcean %s: %s%s" % (where, http_failure(account, "DigitalOcean"), fix))
            problems.append(http_failure(account, "DigitalOcean") + fix)
    elif kind == "azure" and not _or(_dig(settings, "client_secret"), ""):
        lines.append("Azure: signs in without a client secret (auth_source %s); not checked here, the order pass "
                     "probes it" % _or(_dig(settings, "auth_source"), "auto"))
    elif kind == "azure":
        where = _or(_dig(settings, "arm_endpoint"), ARM_ENDPOINT)
        body = _dig(subscription, "json")
        if _dig(token, "json", "access_token") is _MISSING:
            reason, fix = _sign_in_refusal(token, None)
            lines.append("Azure AD: no token for the service principal: " + reason + fix)
            problems.append("Azure AD refused the service principal" + fix)
        elif _status(subscription) == 200:
            lines.append("Azure %s: reachable, subscription %s (%s) %s" % (
                where, _text(_dig(body, "displayName")), _text(_dig(body, "subscriptionId")),
                _text(_dig(body, "state"))))
        else:
            lines.append("Azure %s: %s" % (where, http_failure(subscription, "Azure Resource Manager")))
            problems.append(http_failure(subscription, "Azure Resource Manager"))


def diagnostics_reports(offerings, counts, identity, offering_read, count_results, digitalocean=None,
                        azure_token=None, azure_subscription=None):
    """One report per offering of site_config's ``offerings``: ``{offering, lines, problems, warnings}``.

    ``counts`` are the playbook's counts (``label``, ``path``, ``state``); ``count_results`` its
    registered loop of one item per offering and count (offering-major); the other arguments its
    registered loops of one item per offering."""
    reports = []
    for index, offering in enumerate(offerings or []):
        lines, problems, warnings = [], [], []
        identity_read = _result(identity, index)
        url = offering["waldur_api_url"]
        lines.append("offering UUID %s, backend %s" % (offering["waldur_offering_uuid"], offering["backend_type"]))
        api_path = urlsplit(_api_root(url)).path + "/api/"
        stranger = _not_waldur(offering, identity_read, api_path)
        user = _dig(identity_read, "json")
        if stranger:
            lines.append("Waldur %s: %s" % (url, stranger))
            problems.append(stranger)
        elif _status(identity_read) == 200 and not isinstance(user, Mapping):
            page = malformed(identity_read, "GET %susers/me/" % api_path) + (
                "; is waldur_api_url %s the Waldur API?" % (url,))
            lines.append("Waldur %s: %s" % (url, page))
            problems.append(page)
        elif _status(identity_read) == 200:
            lines.append("Waldur %s: reachable, the agent is user %s%s" % (
                url, user["username"], " (staff)" if user.get("is_staff", False) else ""))
            _diagnose_offering(offering, _result(offering_read, index), api_path, lines, problems)
            lines.append(_diagnose_counts(counts or [], count_results, index, api_path, problems, warnings))
        else:
            lines.append("Waldur %s: %s" % (url, http_failure(identity_read, "Waldur")))
            problems.append(http_failure(identity_read, "Waldur"))
        _diagnose_cloud(offering, _result(digitalocean, index), _result(azure_token, index),
                        _result(azure_subscription, index), lines, problems)
        reports.append({"offering": offering.get("name"), "lines": lines, "problems": problems,
                        "warnings": warnings})
    return reports


class FilterModule(object):
    def filters(self):
        return {"health_verdicts": health_verdicts, "diagnostics_reports": diagnostics_reports}
