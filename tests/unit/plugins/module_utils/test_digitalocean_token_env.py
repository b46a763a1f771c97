"""The DigitalOcean modules read the token from the environment as community.digitalocean
does: DIGITALOCEAN_ACCESS_TOKEN (doctl's), then DO_API_TOKEN, DO_API_KEY, DO_OAUTH_TOKEN and
OAUTH_TOKEN, the first set winning; the option's documentation says so in that order."""

from __future__ import annotations

import re

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.waldur.site_agent.plugins.doc_fragments.digitalocean import ModuleDocFragment
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean import options

ORDER = ["DIGITALOCEAN_ACCESS_TOKEN", "DO_API_TOKEN", "DO_API_KEY", "DO_OAUTH_TOKEN", "OAUTH_TOKEN"]


def token(params=None):
    result = ArgumentSpecValidator(options.digitalocean_argument_spec()).validate(dict(params or {}))
    assert result.error_messages == []
    return result.validated_parameters["token"]


@pytest.fixture(autouse=True)
def no_token_in_the_environment(monkeypatch):
    for name in ORDER:
        monkeypatch.delenv(name, raising=False)


def test_the_order_is_community_digitalocean_s_after_doctl_s():
    assert list(options.TOKEN_ENV_VARS) == ORDER
    # community.digitalocean's module_utils: fallback=(env_fallback, [DO_API_TOKEN, DO_API_KEY, DO_OAUTH_TOKEN, OAUTH_TOKEN])
    assert list(options.TOKEN_ENV_VARS[1:]) == ["DO_API_TOKEN", "DO_API_KEY", "DO_OAUTH_TOKEN", "OAUTH_TOKEN"]


@pytest.mark.parametrize("name", ORDER)
def test_each_variable_alone_gives_the_token(monkeypatch, name):
    monkeypatch.setenv(name, "token-from-" + name)
    assert token() == "token-from-" + name


def test_the_first_variable_set_wins(monkeypatch):
    for name in ORDER:
        monkeypatch.setenv(name, "token-from-" + name)
    for index, name in enumerate(ORDER):
        assert token() == "token-from-" + name, ORDER[index:]
        monkeypatch.delenv(name)


def test_the_option_beats_the_environment(monkeypatch):
    monkeypatch.setenv("DO_API_KEY", "from-env")
    assert token({"token": "given"}) == "given"


def test_the_documentation_names_them_in_that_order():
    text = " ".join(ModuleDocFragment.DOCUMENTATION.split())
    named = re.findall(r"E\((\w*TOKEN\w*|DO_API_KEY)\)", text)
    assert named == ORDER
