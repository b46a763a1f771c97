"""The subscription an Azure run works in (issue 37, item 2): the ``subscription_id`` option (the
offering's backend_settings.subscription_id), whatever the sign-in; a source naming another one is
refused before any call (azure/auth.py), and the subscription is read directly, ARM's "not found"
of it failing the read (azure/subscription.py). The real playbooks run in
tests/integration/test_azure_subscription_pinned.py."""

from __future__ import annotations

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.auth import (
    SignInProblem,
    resolve_sign_in,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.subscription import read_subscription
from tests.unit.plugins.module_utils.test_azure_clients import ScriptedClients, arm_error

OFFERING = "11111111-1111-4111-a111-111111111111"
OTHER = "22222222-2222-4222-a222-222222222222"
TENANT, CLIENT, SECRET = "tenant-1", "client-1", "s3cr3t-value"
SP_ENV = {"AZURE_TENANT": TENANT, "AZURE_CLIENT_ID": CLIENT, "AZURE_SECRET": SECRET}


def resolve(params, environ=None, az=None):
    return resolve_sign_in(params, environ=environ or {}, which=lambda name: az)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def profile(home, subscription=None, name="waldur"):
    (home / ".azure").mkdir(exist_ok=True)
    (home / ".azure" / "credentials").write_text(
        "[%s]\n%stenant=%s\nclient_id=%s\nsecret=%s\n"
        % (name, "subscription_id=%s\n" % subscription if subscription else "", TENANT, CLIENT, SECRET))


def refused(params, environ=None, az=None):
    with pytest.raises(SignInProblem) as problem:
        resolve(params, environ, az)
    assert SECRET not in problem.value.message
    return problem.value.message


# ---- the environment ---------------------------------------------------------------------------

def test_auth_source_env_naming_another_subscription_is_refused_naming_both():
    message = refused(dict(auth_source="env", subscription_id=OFFERING), dict(SP_ENV, AZURE_SUBSCRIPTION_ID=OTHER))
    assert message == (
        "subscription_id is %s but AZURE_SUBSCRIPTION_ID in the environment names %s: an offering works only in its "
        "own subscription, so nothing is done; make AZURE_SUBSCRIPTION_ID the same or remove it" % (OFFERING, OTHER))


@pytest.mark.parametrize("params, az", [
    (dict(tenant=TENANT, client_id=CLIENT, secret=SECRET), None),  # the offering's own service principal
    (dict(auth_source="msi"), None),
    (dict(auth_source="cli"), "/usr/bin/az"),
])
def test_every_sign_in_refuses_an_environment_naming_another_subscription(params, az):
    """AWX's Azure credential injects AZURE_SUBSCRIPTION_ID whatever the offering signs in with."""
    message = refused(dict(params, subscription_id=OFFERING), {"AZURE_SUBSCRIPTION_ID": OTHER}, az)
    assert message.startswith("subscription_id is %s but AZURE_SUBSCRIPTION_ID in the environment names %s: "
                              % (OFFERING, OTHER))


def test_the_same_subscription_in_the_environment_is_no_conflict_whatever_its_case_and_spaces():
    sign_in = resolve(dict(auth_source="env", subscription_id=" %s " % OFFERING),
                      dict(SP_ENV, AZURE_SUBSCRIPTION_ID=OFFERING.upper() + "\n"))
    assert (sign_in.subscription_id, sign_in.subscription_from) == (OFFERING, "subscription_id")
    assert sign_in.identity() == "service principal %s (auth_source env)" % CLIENT


def test_auth_source_env_without_the_option_takes_the_environments_subscription():
    """A module used on its own with AWX's credential: nothing else names a subscription."""
    sign_in = resolve(dict(auth_source="env"), dict(SP_ENV, AZURE_SUBSCRIPTION_ID=OTHER))
    assert (sign_in.subscription_id, sign_in.subscription_from) == (OTHER, "AZURE_SUBSCRIPTION_ID in the environment")


def test_no_subscription_anywhere_is_missing():
    message = refused(dict(auth_source="env"), SP_ENV)
    assert message == "Azure credentials missing: subscription_id (env AZURE_SUBSCRIPTION_ID)"


# ---- the credential file -------------------------------------------------------------------

@pytest.mark.parametrize("params", [
    dict(auth_source="credential_file", profile="waldur"),
    dict(profile="waldur"),  # auth_source auto takes a profile that is given
])
def test_a_profile_naming_another_subscription_is_refused_naming_both(home, params):
    profile(home, OTHER)
    message = refused(dict(params, subscription_id=OFFERING))
    assert message.startswith("subscription_id is %s but profile [waldur] of ~/.azure/credentials names %s: an "
                              "offering works only in its own subscription, so nothing is done; make its "
                              "subscription_id the same or remove it" % (OFFERING, OTHER))


def test_the_default_profile_found_by_auto_is_held_to_the_option_too(home):
    profile(home, OTHER, name="default")
    message = refused(dict(subscription_id=OFFERING))
    assert "but profile [default] of ~/.azure/credentials names %s" % OTHER in message


def test_a_profile_without_a_subscription_or_with_the_same_signs_in_to_the_option(home):
    profile(home)
    sign_in = resolve(dict(auth_source="credential_file", profile="waldur", subscription_id=OFFERING))
    assert (sign_in.kind, sign_in.client_id, sign_in.subscription_id) == ("secret", CLIENT, OFFERING)
    profile(home, OFFERING.upper())
    assert resolve(dict(auth_source="credential_file", profile="waldur", subscription_id=OFFERING)
                   ).subscription_id == OFFERING


def test_a_profile_that_does_not_sign_in_is_not_compared(home):
    """auth_source auto with the offering's service principal never reads the default profile."""
    profile(home, OTHER, name="default")
    sign_in = resolve(dict(subscription_id=OFFERING, tenant=TENANT, client_id=CLIENT, secret=SECRET))
    assert sign_in.subscription_id == OFFERING and "the module options" in sign_in.describe()


def test_without_the_option_the_profile_and_the_environment_must_agree(home):
    profile(home, OTHER)
    sign_in = resolve(dict(auth_source="credential_file", profile="waldur"))
    assert sign_in.subscription_id == OTHER
    message = refused(dict(auth_source="credential_file", profile="waldur"), {"AZURE_SUBSCRIPTION_ID": OFFERING})
    assert message.startswith("profile [waldur] of ~/.azure/credentials names %s but AZURE_SUBSCRIPTION_ID in the "
                              "environment names %s" % (OTHER, OFFERING))


# ---- the direct read of the subscription ---------------------------------------------------

def subscription_body(subscription="sub-1", state="Enabled"):
    return {"id": "/subscriptions/%s" % subscription, "subscriptionId": subscription, "tenantId": "tenant-1",
            "displayName": "Production", "state": state}


def test_the_subscription_is_read_directly():
    clients = ScriptedClients([("GET", 200, {}, subscription_body())])
    assert read_subscription(clients) == {"subscription_id": "sub-1", "display_name": "Production",
                                          "state": "Enabled", "tenant_id": "tenant-1"}
    assert clients.transport.requests == [("GET", "https://arm.test/subscriptions/sub-1?api-version=2022-12-01")]


@pytest.mark.parametrize("status, code, words", [
    (404, "SubscriptionNotFound", "SubscriptionNotFound (HTTP 404) to service principal client-1: no such "
                                  "subscription, or no role on it; check backend_settings.subscription_id"),
    (400, "InvalidSubscriptionId", "InvalidSubscriptionId (HTTP 400) to service principal client-1: a malformed id; "
                                   "check backend_settings.subscription_id"),
    (403, "AuthorizationFailed", "AuthorizationFailed (HTTP 403) to service principal client-1: no role that may "
                                 "read it; give the identity Contributor on the subscription"),
    (401, "InvalidAuthenticationTokenTenant", "InvalidAuthenticationTokenTenant (HTTP 401) to service principal "
                                              "client-1: a subscription of another tenant; check "
                                              "backend_settings.subscription_id and tenant_id"),
])
def test_a_subscription_arm_does_not_know_or_refuses_fails_naming_it_and_the_identity(status, code, words):
    """ARM's "not found" of the subscription is a failure here, never an absence."""
    clients = ScriptedClients([("GET", status, {}, arm_error(code, "The subscription 'sub-1' ..."))])
    with pytest.raises(AzureError) as error:
        read_subscription(clients)
    assert str(error.value) == "subscription_id sub-1: ARM answered %s" % words
    assert SECRET not in str(error.value)


def test_a_disabled_subscription_or_an_answer_about_another_one_fails():
    with pytest.raises(AzureError) as error:
        read_subscription(ScriptedClients([("GET", 200, {}, subscription_body(state="Disabled"))]))
    assert str(error.value) == ("subscription_id sub-1 (Production) is Disabled: ARM creates nothing in it; enable "
                                "it, or check backend_settings.subscription_id")
    with pytest.raises(AzureError) as error:
        read_subscription(ScriptedClients([("GET", 200, {}, subscription_body(subscription=OTHER))]))
    assert str(error.value) == ("subscription_id sub-1 could not be read as service principal client-1: ARM answered "
                                "GET /subscriptions/sub-1 with subscription '%s', not this one; the answer is not "
                                "trusted" % OTHER)


def test_a_404_without_arms_code_is_named_as_it_came_not_as_an_unknown_subscription():
    """A proxy's page is not ARM saying the subscription does not exist; the read fails all the same."""
    with pytest.raises(AzureError) as error:
        read_subscription(ScriptedClients([("GET", 404, {}, None)]))
    message = str(error.value)
    assert message.startswith("subscription_id sub-1 could not be read as service principal client-1: unproven: "
                              "GET /subscriptions/sub-1: ")
    assert "no such subscription" not in message and "not proven" in message


def test_arms_own_code_comes_before_the_status():
    """A 403 answering InvalidAuthenticationTokenTenant asks for the tenant, not for a role."""
    clients = ScriptedClients([("GET", 403, {}, arm_error("InvalidAuthenticationTokenTenant", "another tenant"))])
    with pytest.raises(AzureError) as error:
        read_subscription(clients)
    assert str(error.value).endswith("a subscription of another tenant; check backend_settings.subscription_id and "
                                     "tenant_id")
