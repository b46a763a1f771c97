"""The subscription an Azure offering works in is its backend_settings.subscription_id, always
(issue 37, item 2), on the real order pass and health playbook against the simulators.

The attack: with an identity that can reach two subscriptions, AZURE_SUBSCRIPTION_ID (what AWX's
Azure credential injects, auth_source env) or the credential file's profile won over the offering's
subscription_id; the machine was built in that other subscription, the order set done and the report
billed it. Here the offering names a subscription the simulator does not know and the environment
(or the profile) names the simulator's: before the fix, the pass built the machine there and set the
order done. And a typo'd subscription_id erred every customer order with exit 0: the probe read a
machine that does not exist and took ARM's "not found" (SubscriptionNotFound) for success."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, run_playbook
from tests.integration.passes import ORDER_PASS, assert_done, call_waldur, order_machine, waldur_writes, write_config
from tests.simulators.azure import presets as AZ
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

HEALTH = REPO / "playbooks" / "health.yml"
# a well-formed subscription the simulator's ARM does not know (another customer's, or a typo)
OTHER = "0dd5c71d-0000-4000-a000-0000000000ff"
SP_ENV = {"AZURE_TENANT": AZ.TENANT_ID, "AZURE_CLIENT_ID": AZ.CLIENT_ID, "AZURE_SECRET": AZ.CLIENT_SECRET}
SP_KEYS = {"tenant_id": None, "client_id": None, "client_secret": None}  # None removes the key


AAD = ("openid", "token", "msi.app_service", "msi.imds")


def arm_calls(azure, writes=False) -> list[str]:
    """The ARM operations called (writes only), leaving out Entra ID's token requests."""
    return [call["operation"] for call in (azure.app.write_calls(0) if writes else azure.app.calls)
            if call["operation"] not in AAD]


def assert_nothing_touched(waldur, azure, order_state="pending-provider"):
    """No order approved, rejected or erred; nothing written in Azure."""
    assert waldur.app.order(W.AZURE_ORDER_UUID)["state"] == order_state
    assert waldur_writes(waldur) == []
    assert arm_calls(azure, writes=True) == []


def env_conflict(tmp_path, waldur, azure):
    """auth_source env with AZURE_SUBSCRIPTION_ID naming the simulator's subscription, while the
    offering's subscription_id is another one."""
    config = write_config(tmp_path, waldur, azure=azure, auth_source="env", subscription_id=OTHER, **SP_KEYS)
    return dict(SP_ENV, AZURE_SUBSCRIPTION_ID=AZ.SUBSCRIPTION_ID, WALDUR_SITE_AGENT_CONFIG=str(config))


def profile_conflict(tmp_path, waldur, azure):
    """auth_source credential_file whose profile names the simulator's subscription, while the
    offering's subscription_id is another one."""
    (tmp_path / ".azure").mkdir()
    (tmp_path / ".azure" / "credentials").write_text(
        "[waldur]\nsubscription_id=%s\ntenant=%s\nclient_id=%s\nsecret=%s\n"
        % (AZ.SUBSCRIPTION_ID, AZ.TENANT_ID, AZ.CLIENT_ID, AZ.CLIENT_SECRET))
    config = write_config(tmp_path, waldur, azure=azure, auth_source="credential_file", profile="waldur",
                          subscription_id=OTHER, **SP_KEYS)
    return {"HOME": str(tmp_path), "WALDUR_SITE_AGENT_CONFIG": str(config)}


@pytest.mark.parametrize("case, source", [
    (env_conflict, "AZURE_SUBSCRIPTION_ID in the environment"),
    (profile_conflict, "profile [waldur] of ~/.azure/credentials"),
])
def test_a_sign_in_naming_another_subscription_builds_nothing_and_fails_naming_both(
        case, source, tmp_path, waldur_sim, azure_sim):
    env = case(tmp_path, waldur_sim, azure_sim)

    run = run_playbook(ORDER_PASS, env=env)

    assert run.rc != 0
    assert_nothing_touched(waldur_sim, azure_sim)
    assert arm_calls(azure_sim) == []  # refused before any call
    assert ("The order_process pass failed for: Azure VM (Azure cannot be worked with: subscription_id is %s but %s "
            "names %s: an offering works only in its own subscription, so nothing is done"
            % (OTHER, source, AZ.SUBSCRIPTION_ID)) in run.output, run.output[-3000:]
    assert AZ.CLIENT_SECRET not in run.output


AUTHORIZATION_FAILED = {"error": {"code": "AuthorizationFailed", "message": (
    "The client '%s' with object id '%s' does not have authorization to perform action "
    "'Microsoft.Resources/subscriptions/read' over scope '/subscriptions/%s' or the scope is invalid."
    % (AZ.CLIENT_ID, AZ.SERVICE_PRINCIPAL_OBJECT_ID, AZ.SUBSCRIPTION_ID))}}
# subscription_id -> (what ARM answers, the operator's hint); None: the simulator's own subscription
UNUSABLE = {
    "typo": (OTHER, "SubscriptionNotFound (HTTP 404)",
             "no such subscription, or no role on it; check backend_settings.subscription_id)"),
    "malformed": (AZ.SUBSCRIPTION_ID[:-1], "InvalidSubscriptionId (HTTP 400)",
                  "a malformed id; check backend_settings.subscription_id)"),
    "no_role": (AZ.SUBSCRIPTION_ID, "AuthorizationFailed (HTTP 403)",
                "no role that may read it; give the identity Contributor on the subscription)"),
}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_a_subscription_the_identity_cannot_use_touches_no_order(case, tmp_path, waldur_sim, azure_sim):
    """No order approved, rejected or erred: the pending one stays pending-provider, one an
    earlier pass approved stays executing; the offering fails naming the subscription."""
    subscription, answer, hint = UNUSABLE[case]
    if case == "no_role":
        azure_sim.app.add_fault("subscriptions.get", status=403, body=AUTHORIZATION_FAILED, times=10)
    config = write_config(tmp_path, waldur_sim, azure=azure_sim, subscription_id=subscription)
    executing = order_machine(waldur_sim, W.AZURE_OFFERING_UUID, W.AZURE_PLAN_UUID, "approved-earlier",
                              W.AZURE_PLAN_QUOTAS)[0]
    call_waldur(waldur_sim, "/api/marketplace-orders/%s/approve_by_provider/" % executing, {}, token=W.PROVIDER_TOKEN)
    since = len(waldur_sim.app.calls)

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)})

    assert run.rc != 0
    assert waldur_sim.app.order(W.AZURE_ORDER_UUID)["state"] == "pending-provider"
    assert waldur_sim.app.order(executing)["state"] == "executing"
    assert waldur_writes(waldur_sim, since) == []
    assert arm_calls(azure_sim, writes=True) == []
    # the probe read the subscription itself, and nothing else in ARM
    assert arm_calls(azure_sim) == ["subscriptions.get"]
    assert ("The order_process pass failed for: Azure VM (Azure cannot be worked with: subscription_id %s: ARM "
            "answered %s to service principal %s (auth_source auto): %s" % (subscription, answer, AZ.CLIENT_ID, hint)
            ) in run.output, run.output[-3000:]
    assert AZ.CLIENT_SECRET not in run.output


def test_health_names_both_subscriptions_of_a_conflict_and_the_identity_of_an_unknown_one(
        tmp_path, waldur_sim, azure_sim):
    conflict = run_playbook(HEALTH, env=env_conflict(tmp_path, waldur_sim, azure_sim))

    assert conflict.rc != 0
    assert ("offering Azure VM: NOT READY, subscription_id is %s but AZURE_SUBSCRIPTION_ID in the environment names "
            "%s: an offering works only in its own subscription, so nothing is done; make AZURE_SUBSCRIPTION_ID the "
            "same or remove it" % (OTHER, AZ.SUBSCRIPTION_ID)) in conflict.output, conflict.output[-3000:]
    assert arm_calls(azure_sim) == []

    # the same conflict beside a sign-in health checks with plain requests (the offering's own secret)
    config = write_config(tmp_path, waldur_sim, azure=azure_sim, subscription_id=OTHER)
    plain = run_playbook(HEALTH, env={"WALDUR_SITE_AGENT_CONFIG": str(config),
                                      "AZURE_SUBSCRIPTION_ID": AZ.SUBSCRIPTION_ID})
    assert plain.rc != 0
    assert ("offering Azure VM: NOT READY, subscription_id is %s but AZURE_SUBSCRIPTION_ID in the environment names "
            "%s" % (OTHER, AZ.SUBSCRIPTION_ID)) in plain.output, plain.output[-3000:]

    # a typo'd subscription_id: the subscription, ARM's answer and the identity that asked
    unknown = run_playbook(HEALTH, env={"WALDUR_SITE_AGENT_CONFIG": str(config)})
    assert unknown.rc != 0
    assert ("offering Azure VM: NOT READY, subscription_id %s: ARM answered SubscriptionNotFound (HTTP 404) to service "
            "principal %s (auth_source auto): no such subscription, or no role on it; check "
            "backend_settings.subscription_id" % (OTHER, AZ.CLIENT_ID)) in unknown.output, unknown.output[-3000:]
    # and the same through the passes' sign-in (auth_source env, no conflict)
    env = env_conflict(tmp_path, waldur_sim, azure_sim)
    env.pop("AZURE_SUBSCRIPTION_ID")
    probed = run_playbook(HEALTH, env=env)
    assert probed.rc != 0
    assert ("offering Azure VM: NOT READY, subscription_id %s: ARM answered SubscriptionNotFound (HTTP 404) to service "
            "principal %s (auth_source env): no such subscription, or no role on it" % (OTHER, AZ.CLIENT_ID)) in probed.output, \
        probed.output[-3000:]
    for run in (conflict, plain, unknown, probed):
        assert AZ.CLIENT_SECRET not in run.output


def test_the_same_subscription_in_the_environment_as_in_the_offering_works(tmp_path, waldur_sim, azure_sim):
    """AWX's Azure credential naming the offering's own subscription (in another case) is no conflict."""
    config = write_config(tmp_path, waldur_sim, azure=azure_sim, auth_source="env", **SP_KEYS)
    env = dict(SP_ENV, AZURE_SUBSCRIPTION_ID=AZ.SUBSCRIPTION_ID.upper(), WALDUR_SITE_AGENT_CONFIG=str(config))

    health = run_playbook(HEALTH, env=env)
    assert health.rc == 0, health.output[-3000:]
    assert ("offering Azure VM: ready, Waldur answers as provider-agent, offering Azure virtual machines (Active), "
            "Azure subscription %s Enabled (signed in as service principal %s in tenant %s with a client secret (the "
            "AZURE_* environment variables (auth_source env)))" % (AZ.SUBSCRIPTION_NAME, AZ.CLIENT_ID, AZ.TENANT_ID)
            ) in health.output

    run = run_playbook(ORDER_PASS, env=env)

    assert run.rc == 0, run.output[-6000:]
    assert_done(waldur_sim, W.AZURE_ORDER_UUID)
    assert waldur_sim.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"].lower().startswith(
        "/subscriptions/%s/" % AZ.SUBSCRIPTION_ID)
    assert len(azure_sim.app.calls_of("subscriptions.get")) == 2  # health's read and the pass's probe
