# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Every rule the passes depend on has one definition, in one home.

A second copy of a rule drifts (the reserved-tag rule once was case-sensitive in the
filter and case-insensitive in the module). Each case imports the rule from its home
and then searches ``plugins/`` for the tell-tale of a second definition. The event
source (``extensions/eda``) imports these homes too (``plugins/plugin_utils/events/``);
``tests/unit/eda/test_parity.py`` checks that it holds no copy.
"""

import re
from pathlib import Path

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.agent import components
from ansible_collections.waldur.site_agent.plugins.module_utils.azure import errors as azure_errors
from ansible_collections.waldur.site_agent.plugins.module_utils.core import http, secrets, ssh_keys, times, uuids
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean import naming
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur import order_types

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"

# rule -> (its home relative to plugins/, a regex whose match outside the home is a second definition)
RULES = {
    "uuid": ("module_utils/core/uuids.py", r"\{8\}-\?\[0-9a-fA-F\]\{4\}"),
    "fingerprint": ("module_utils/core/ssh_keys.py", r"hashlib\.md5|\bmd5\("),
    "never sent": ("module_utils/core/http.py", r"def \w*never_sent"),
    "retry loop": ("module_utils/core/http.py", r"\.delay\(\s*attempt"),
    "scrubber": ("module_utils/core/secrets.py", r"\.replace\(\s*[\w.]*(token|secret)\w*\s*,"),
    "reserved tag": ("module_utils/digitalocean/naming.py", r"def is_resource_tag|def _is_reserved_tag"),
    "limits": ("module_utils/agent/components.py", r"def _?limits_equal"),
    "timestamps": ("module_utils/core/times.py", r"fromisoformat|strptime"),
    # what an order type asks of the backend: claim, settle and the planning filters read one table
    "order types": ("module_utils/waldur/order_types.py",
                    r"""["']Restore["']|[!=]= *["'](Create|Update|Terminate)["']"""),
    # Microsoft Entra's sign-in refusals and the backend_settings key each asks to fix: the modules'
    # sign-in and the health and diagnostics filters read one table
    "entra sign-in codes": ("module_utils/azure/errors.py", r"AADSTS7000215"),
}


# Look-alikes that are not a second definition, each with the reason.
NOT_A_COPY = {
    # create_droplet re-reads the droplets by tag before it posts again: a create loop above HTTP,
    # whose every request goes through the one HTTP retry loop.
    ("retry loop", "module_utils/digitalocean/client.py"),
}


def plugin_sources():
    for path in sorted(PLUGINS.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path.relative_to(PLUGINS).as_posix(), path.read_text(encoding="utf-8")


@pytest.mark.parametrize("rule", sorted(RULES))
def test_a_rule_is_defined_only_in_its_home(rule):
    home, tell_tale = RULES[rule]
    pattern = re.compile(tell_tale)
    sources = dict(plugin_sources())
    assert pattern.search(sources[home]), "the %s rule is no longer in %s" % (rule, home)
    elsewhere = sorted(path for path, text in sources.items()
                       if path != home and (rule, path) not in NOT_A_COPY and pattern.search(text))
    assert elsewhere == [], "a second definition of the %s rule: %s" % (rule, elsewhere)


def test_the_homes_answer_as_the_passes_expect():
    # one call of each rule from its home, so a rename or a changed meaning fails here
    assert uuids.normalize_uuid("0F8B3C1A-1D2E-4F60-9A7B-8C9D0E1F2A3B") == "0f8b3c1a1d2e4f609a7b8c9d0e1f2a3b"
    assert not uuids.is_uuid("not-a-uuid")
    key = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBq1YGLK5sE0Pq1u8P0oKPbYb8XVZ5M6QZB1Xx9iRk0m "
           "someone@example.org")
    assert re.match(r"^([0-9a-f]{2}:){15}[0-9a-f]{2}$", ssh_keys.ssh_key_fingerprint(key))
    assert "s3cret-token" not in secrets.redact_text("Authorization: Token s3cret-token", ["s3cret-token"])
    assert callable(http.send_with_retries) and callable(http.request_never_sent)
    assert naming.is_resource_tag("Waldur-Resource:0f8b3c1a1d2e4f609a7b8c9d0e1f2a3b")
    assert components.limits_equal({"cores": 2}, {"cores": "2"})
    assert times.oldest(["2026-11-29T12:04:26.244102Z", "2026-11-29T13:00:00+02:00", "never"]) == times.parse_time(
        "2026-11-29T11:00:00Z")
    assert [order_types.action_of(name) for name in ("Create", "Restore", "Update", "Terminate", "Pause")] == [
        "build", "build", "change", "remove", None]
    assert [azure_errors.credential_key("AADSTS%s: refused" % code) for code in ("7000215", "700016", "90002")] == [
        "client_secret", "client_id", "tenant_id"]
    assert azure_errors.credential_key("AADSTS70002150: a longer code") is None
    assert order_types.processing_signal("Update", {}, {"state": "Updating"}) is True
    assert order_types.processing_signal("Restore", {"resource_uuid": "x"}, {}) is None
