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
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends import backend
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends.answers import (  # pylint: disable=unused-import  # re-exported
    MISSING,
    as_int,
    dig,
    http_failure,
    malformed,
    or_default,
    result_at,
    status_of,
    text,
)

ERRED_WARNING = ("%s resource(s) Erred in Waldur (Waldur gave up on them; a machine may still run behind one: "
                 "waldur.site_agent.audit names them)")


def _api_root(url):
    """waldur_api_url as the playbooks call it: without trailing slashes or ``/api``."""
    return re.sub(r"/api$", "", re.sub(r"/+$", "", str(url)))


def _not_waldur(offering, identity, path):
    """users/me/ answered 404 or JSON without a user: another service (or a wrong path) answers at
    waldur_api_url, not an offering problem. None when it answered as Waldur (or not at all)."""
    status, body = status_of(identity), or_default(dig(identity, "json"), None)
    if status == 404 or (status == 200 and isinstance(body, Mapping) and "username" not in body):
        return ("waldur_api_url %s does not answer as the Waldur API: GET %susers/me/ answered %s; set it to the "
                "API root of Waldur" % (offering["waldur_api_url"], path,
                                        "HTTP 404" if status == 404 else "JSON that is not a Waldur user"))
    return None


def _health_waldur(offering, identity, read, gaps, notes):
    """The first Waldur problem of a health check, or '' (and the notes of what Waldur said)."""
    waldur = _api_root(offering["waldur_api_url"]) + "/api/"
    path = urlsplit(waldur).path
    uuid = offering["waldur_offering_uuid"]
    if status_of(identity) == 401:
        return "Waldur rejected the token (HTTP 401)"
    stranger = _not_waldur(offering, identity, path)
    if stranger:
        return stranger
    if status_of(identity) != 200:
        return http_failure(identity, "Waldur", waldur + " (waldur_api_url)")
    if not isinstance(dig(identity, "json"), Mapping):
        return malformed(identity, "GET %susers/me/" % path) + "; is waldur_api_url %s the Waldur API?" % (
            offering["waldur_api_url"],)
    if status_of(read) == 404:
        return ("offering %s (waldur_offering_uuid) is not an offering of this token's provider in Waldur (HTTP 404): "
                "check the UUID and that the token's user manages the offering" % uuid)
    if status_of(read) != 200:
        return "reading offering %s: %s" % (uuid, http_failure(read, "Waldur", waldur))
    if not isinstance(dig(read, "json"), Mapping):
        return malformed(read, "GET %smarketplace-provider-offerings/%s/" % (path, uuid))
    if gaps:
        # a provider-side gap: no Create order could be built (the order pass fails the offering for it)
        return "the offering cannot build a machine: " + "; ".join(gaps)
    notes.append("Waldur answers as %s" % or_default(dig(identity, "json", "username"), "the agent user"))
    notes.append("offering %s (%s)" % (text(dig(read, "json", "name")), text(dig(read, "json", "state"))))
    return ""


def _cloud_reads(clouds, kind, index):
    """The registered reads of the offering ``index``'s backend, by name: a loop's item, or a value
    that is not a loop (the controller's environment) as it is."""
    reads = {}
    for name, value in ((clouds or {}).get(kind) or {}).items():
        is_loop = isinstance(value, Mapping) and isinstance(value.get("results"), (list, tuple))
        reads[name] = result_at(value, index) if is_loop else value
    return reads


def health_verdicts(offerings, identity, offering_read, clouds=None):
    """One verdict per offering of site_config's ``offerings``: ``{offering, ready, reason}``, the
    reason being the first problem found, or what the offering has when it is ready (who Waldur says
    the agent is, the offering, the cloud account or subscription, the headroom under the quota).

    ``identity`` and ``offering_read`` are the playbook's registered loops, one item per offering, in
    its order; ``clouds`` maps each backend's name to its reads (registered loops by name), which its
    registry entry judges (``health``)."""
    verdicts = []
    for index, offering in enumerate(offerings or []):
        read = result_at(offering_read, index)
        notes = []
        gaps = create_gaps(offering, or_default(dig(read, "json", "options"), None))
        problem = _health_waldur(offering, result_at(identity, index), read, gaps, notes)
        kind = str(offering.get("backend_type", "")).lower()
        entry = backend(kind)
        if not problem and entry is not None:
            problem = entry.health(offering, _cloud_reads(clouds, kind, index), notes)
        verdicts.append({"offering": offering.get("name"), "ready": not problem,
                         "reason": problem if problem else ", ".join(str(note) for note in notes)})
    return verdicts


def _is_list(value):
    return isinstance(value, (list, tuple))


def _diagnose_offering(offering, read, api_path, lines, problems):
    """The offering as Waldur has it: state, components (and those the configuration has that
    Waldur lacks), and what no Create order could be built without."""
    read_call = "GET %smarketplace-provider-offerings/%s/" % (api_path, offering["waldur_offering_uuid"])
    body = dig(read, "json")
    if status_of(read) == 200 and not isinstance(body, Mapping):
        lines.append("offering in Waldur: " + malformed(read, read_call))
        problems.append("offering not readable: " + malformed(read, read_call))
        return
    if status_of(read) != 200:
        lines.append("offering in Waldur: " + http_failure(read, "Waldur"))
        problems.append("offering not readable: " + http_failure(read, "Waldur"))
        return
    components = or_default(dig(body, "components"), [])
    components = [component if isinstance(component, Mapping) else {}
                  for component in (components if _is_list(components) else [])]
    types = [component.get("type") for component in components]
    lines.append("offering in Waldur: %s, state %s, type %s" % (
        text(dig(body, "name")), text(dig(body, "state")), text(dig(body, "type"))))
    lines.append("components in Waldur: " + (", ".join(
        "%s (%s)" % (component.get("type"), component.get("billing_type")) for component in components) or "none"))
    missing = [str(name) for name in list(or_default(dig(offering, "backend_components"), {}) or []) if name not in types]
    if missing:
        lines.append("components of the configuration missing in Waldur: %s (run waldur.site_agent.load_components)"
                     % ", ".join(missing))
        problems.append("components missing in Waldur: " + ", ".join(missing))
    for gap in create_gaps(offering, or_default(dig(body, "options"), None)):
        lines.append("cannot build a machine: " + gap)
        problems.append("the offering cannot build a machine: " + gap)


def _diagnose_counts(counts, count_results, index, api_path, problems, warnings):
    """One ``label: number`` per count of ``counts`` (a 200 must be a JSON list with X-Result-Count)."""
    found = []
    for number, count in enumerate(counts):
        result = result_at(count_results, index * len(counts) + number)
        status, total = status_of(result), dig(result, "x_result_count")
        if status == 200 and (not _is_list(or_default(dig(result, "json"), None)) or total is MISSING):
            wrong = malformed(result, "GET " + api_path + str(count["path"]), "a JSON list with X-Result-Count")
            found.append("%s: unknown (%s)" % (count["label"], wrong))
            problems.append("%s unknown: %s" % (count["label"], wrong))
            continue
        found.append("%s: %s" % (count["label"], total if status == 200 and total is not MISSING
                                 else "unknown (%s)" % http_failure(result, "Waldur")))
        if count.get("state") == "Erred" and status == 200 and as_int(or_default(total, 0)) > 0:
            warnings.append(ERRED_WARNING % (total,))
    return ", ".join(found)


def diagnostics_reports(offerings, counts, identity, offering_read, count_results, clouds=None):
    """One report per offering of site_config's ``offerings``: ``{offering, lines, problems, warnings}``.

    ``counts`` are the playbook's counts (``label``, ``path``, ``state``); ``count_results`` its
    registered loop of one item per offering and count (offering-major); ``identity`` and
    ``offering_read`` its registered loops of one item per offering; ``clouds`` each backend's reads
    by name, which its registry entry judges (``diagnose``)."""
    reports = []
    for index, offering in enumerate(offerings or []):
        lines, problems, warnings = [], [], []
        identity_read = result_at(identity, index)
        url = offering["waldur_api_url"]
        lines.append("offering UUID %s, backend %s" % (offering["waldur_offering_uuid"], offering["backend_type"]))
        api_path = urlsplit(_api_root(url)).path + "/api/"
        stranger = _not_waldur(offering, identity_read, api_path)
        user = dig(identity_read, "json")
        if stranger:
            lines.append("Waldur %s: %s" % (url, stranger))
            problems.append(stranger)
        elif status_of(identity_read) == 200 and not isinstance(user, Mapping):
            page = malformed(identity_read, "GET %susers/me/" % api_path) + (
                "; is waldur_api_url %s the Waldur API?" % (url,))
            lines.append("Waldur %s: %s" % (url, page))
            problems.append(page)
        elif status_of(identity_read) == 200:
            lines.append("Waldur %s: reachable, the agent is user %s%s" % (
                url, user["username"], " (staff)" if user.get("is_staff", False) else ""))
            _diagnose_offering(offering, result_at(offering_read, index), api_path, lines, problems)
            lines.append(_diagnose_counts(counts or [], count_results, index, api_path, problems, warnings))
        else:
            lines.append("Waldur %s: %s" % (url, http_failure(identity_read, "Waldur")))
            problems.append(http_failure(identity_read, "Waldur"))
        kind = str(offering.get("backend_type", "")).lower()
        entry = backend(kind)
        if entry is not None:
            entry.diagnose(offering, _cloud_reads(clouds, kind, index), lines, problems)
        reports.append({"offering": offering.get("name"), "lines": lines, "problems": problems,
                        "warnings": warnings})
    return reports


class FilterModule(object):
    def filters(self):
        return {"health_verdicts": health_verdicts, "diagnostics_reports": diagnostics_reports}
