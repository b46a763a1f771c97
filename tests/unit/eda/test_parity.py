"""The event source stands alone (ansible-rulebook loads it with runpy, it cannot import
module_utils), so it keeps its own copies of the collection's UUID, API-root and secret
rules. These tests run both over the same inputs: a rule changed on one side only fails here."""

from __future__ import annotations

import uuid

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import redact_text
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import uuid_or_none
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import normalize_api_root

HEX = "d0000000000000000000000000000001"

UUID_INPUTS = [
    HEX, HEX.upper(), "d0000000-0000-0000-0000-000000000001", "  D0000000-0000-0000-0000-000000000001\n",
    "{d0000000-0000-0000-0000-000000000001}", "urn:uuid:d0000000-0000-0000-0000-000000000001",
    uuid.UUID(HEX), None, "", " ", "d000", HEX + "0", HEX[:-1] + "g", "not-a-uuid", 12, 0, True, False, [HEX],
]

API_URL_INPUTS = [
    "https://waldur.example.com", "https://waldur.example.com/", "https://waldur.example.com/api",
    "https://waldur.example.com/api/", " https://waldur.example.com/api/ ", "http://127.0.0.1:8000/api/",
    "https://example.com/waldur/api/", "https://example.com/waldur/", "https://example.com/api/api/",
    "https://u:p@waldur.example.com/api/",
]
BAD_API_URLS = [None, "", "   ", "waldur.example.com/api/", "ftp://waldur.example.com/api/", "https://", "http://:80/api/",
                "/api/", 42]

SECRET_CASES = [
    ("nothing secret here", ["s3cr3t-token"]),
    ("token s3cr3t-token in a message", ["s3cr3t-token"]),
    ("twice: s3cr3t-token and s3cr3t-token", ["s3cr3t-token"]),
    ("nested: abcd-1234-long and abcd-1234", ["abcd-1234", "abcd-1234-long"]),
    ("nested: abcd-1234-long and abcd-1234", ["abcd-1234-long", "abcd-1234"]),
    ("two: first-secret, second-secret", ["first-secret", "second-secret"]),
    ("no secrets known", []),
    ("an empty secret is ignored", [""]),
]


@pytest.mark.parametrize("value", UUID_INPUTS, ids=repr)
def test_uuid_rule_is_the_same(plugin, value):
    assert plugin.normalize_uuid(value) == uuid_or_none(value)


@pytest.mark.parametrize("url", API_URL_INPUTS)
def test_api_root_rule_is_the_same(plugin, url):
    assert plugin.api_root(url) == normalize_api_root(url)


@pytest.mark.parametrize("url", BAD_API_URLS, ids=repr)
def test_both_refuse_the_same_api_urls(plugin, url):
    with pytest.raises(ValueError):
        plugin.api_root(url)
    with pytest.raises(ValueError):
        normalize_api_root(url)


@pytest.mark.parametrize("text, secrets", SECRET_CASES)
def test_known_secret_values_are_masked_the_same(plugin, text, secrets):
    # redact_text masks more (secret URL parameters, Authorization values); for known
    # values, all the event source masks, both must give the same text
    assert plugin.redact(text, secrets) == redact_text(text, secrets)
    for secret in secrets:
        if secret:
            assert secret not in plugin.redact(text, secrets)
