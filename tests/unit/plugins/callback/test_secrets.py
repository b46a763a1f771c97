"""module_utils/core/secrets.py: what the callback (and anything printing data) masks."""

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import (
    MASK,
    collect_secret_values,
    is_secret_key,
    redact,
    redact_text,
    secret_values_from_environment,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils import backends
from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import SECRET_KEYS

CONFIG = {
    "sentry_dsn": "https://key@sentry.example.com/3",
    "offerings": [
        {"name": "DO", "waldur_api_token": "waldur-token-abcdef", "waldur_api_url": "https://w/api/",
         "backend_settings": {"token": "dop_v1_123456", "default_region": "ams3"}},
        {"name": "Az", "waldur_api_token": "", "oidc_client_secret": "oidc-secret-9",
         "backend_settings": {"client_secret": "az-secret-77", "client_id": "client-id-is-public",
                              "credentials": {"nested": "nested-secret-1", "count": 3}}},
    ],
}


def test_secret_key_names():
    for name in ("waldur_api_token", "token", "client_secret", "secret", "password", "sentry_dsn", "api_key",
                 "X-Api-Key", "Authorization", "private_key", "oidc_client_secret", "db_passwd"):
        assert is_secret_key(name), name
    for name in ("name", "client_id", "ssh_public_key", "backend_id", "description", "changed", 3, None):
        assert not is_secret_key(name), name


def test_collect_secret_values_from_a_site_config():
    assert collect_secret_values(CONFIG, extra_keys=SECRET_KEYS) == {
        "https://key@sentry.example.com/3", "waldur-token-abcdef", "dop_v1_123456", "oidc-secret-9",
        "az-secret-77", "nested-secret-1"}


def test_short_and_non_text_values_are_not_collected():
    assert collect_secret_values({"token": "abc", "password": 12345678, "secret": True, "api_key": None}) == set()
    assert collect_secret_values({"token": " abcd "}) == {"abcd"}


def test_redact_masks_secret_keys_at_any_depth_and_keeps_the_rest():
    cleaned = redact(CONFIG)
    assert cleaned["sentry_dsn"] == MASK
    assert cleaned["offerings"][0] == {"name": "DO", "waldur_api_token": MASK, "waldur_api_url": "https://w/api/",
                                       "backend_settings": {"token": MASK, "default_region": "ams3"}}
    azure = cleaned["offerings"][1]
    assert azure["waldur_api_token"] == ""  # "not set" stays visible
    assert azure["backend_settings"]["credentials"] == MASK
    assert azure["backend_settings"]["client_id"] == "client-id-is-public"
    assert CONFIG["offerings"][0]["waldur_api_token"] == "waldur-token-abcdef"  # the input is not changed


def test_redact_replaces_known_values_inside_text():
    secrets = {"waldur-token-abcdef", "waldur-token-abcdef-longer"}
    assert redact(["sent waldur-token-abcdef-longer and waldur-token-abcdef", 7], secrets) == [
        "sent %s and %s" % (MASK, MASK), 7]


def test_redact_text_patterns():
    assert redact_text("GET https://h/api/?page=2&token=abc123&x=1") == "GET https://h/api/?page=2&token=%s&x=1" % MASK
    assert redact_text("https://h/?apiKey=a1&secret_key=b2") == "https://h/?apiKey=%s&secret_key=%s" % (MASK, MASK)
    assert redact_text("proxy socks5://user:hunter22@proxy:1080") == "proxy socks5://user:%s@proxy:1080" % MASK
    assert redact_text("header Authorization: Token 0123abcd") == "header Authorization: Token %s" % MASK
    assert redact_text("""{'password': 'pw', "api_token": "t0k", 'name': 'x'}""") == (
        """{'password': '%s', "api_token": "%s", 'name': 'x'}""" % (MASK, MASK))


def test_redact_text_leaves_validation_messages_readable():
    message = "offerings[1].backend_settings.client_secret: required; waldur_api_token: required"
    assert redact_text(message, {"abcd"}) == message
    assert redact_text("http://127.0.0.1:8080/api/ answered 404") == "http://127.0.0.1:8080/api/ answered 404"


def test_secret_values_from_the_environment():
    environ = {"WALDUR_API_TOKEN": "env-token-1", "AZURE_SECRET": "env-secret-2", "DO_API_TOKEN": "x",
               "HOME": "/root", "SOME_TOKEN_ENABLED": "true"}
    # the clouds' variables are the backend registry's, which the callback passes
    assert secret_values_from_environment(environ) == {"env-token-1"}
    assert secret_values_from_environment(environ, backends.secret_environment()) == {"env-token-1", "env-secret-2"}
