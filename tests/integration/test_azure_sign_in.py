"""Every Azure sign-in an operator uses, each creating the default preset's machine through the
real order pass: the site agent configuration's backend_settings (or the environment an AWX
credential or the host injects) -> the agent's module_defaults -> the real azure-identity class
-> the simulator's token endpoint (certificate assertions checked against the registered
certificate, federated tokens against the trusted issuer, managed identities from the App
Service or IMDS endpoint, the Azure CLI's account from ``az account get-access-token``) -> ARM,
which records who called it. Nothing of azure-identity is patched; the only stand-in is a fake
``az`` executable, as the Azure CLI is a program the credential runs."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.helpers import assert_verbose_module_output, run_playbook
from tests.integration.passes import ORDER_PASS, assert_done, write_config
from tests.simulators.azure import presets as AZ
from tests.simulators.azure.aad import client_certificate
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

SP_KEYS = {"tenant_id": None, "client_id": None, "client_secret": None}  # None removes the key


def fake_az(directory, azure) -> str:
    """An ``az`` that answers ``account get-access-token`` as the Azure CLI does for a signed-in user."""
    token = azure.app.tokens.user_token(AZ.TENANT_ID, AZ.CLI_USER, AZ.CLI_USER_OBJECT_ID)
    answer = {"accessToken": token["access_token"], "expiresOn": "2099-01-01 00:00:00.000000",
              "expires_on": token["expires_on"], "subscription": AZ.SUBSCRIPTION_ID, "tenant": AZ.TENANT_ID,
              "tokenType": "Bearer"}
    script = directory / "az"
    script.write_text("#!/bin/sh\n[ \"$1 $2\" = \"account get-access-token\" ] || exit 2\ncat <<'EOF'\n%s\nEOF\n"
                      % json.dumps(answer))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return token["access_token"]


def sign_in_case(path, tmp_path, azure):
    """``(backend_settings changes, environment, identity object id, words of the sign-in, secrets)``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pem = azure.app.client_certificate
    if path == "env":
        env = {"AZURE_TENANT": AZ.TENANT_ID, "AZURE_CLIENT_ID": AZ.CLIENT_ID, "AZURE_SECRET": AZ.CLIENT_SECRET}
        return (dict(SP_KEYS, auth_source="env"), env, AZ.SERVICE_PRINCIPAL_OBJECT_ID,
                "with a client secret (the AZURE_* environment variables (auth_source env))", [AZ.CLIENT_SECRET])
    if path == "credential_file":
        (tmp_path / ".azure").mkdir()
        (tmp_path / ".azure" / "credentials").write_text(
            "[waldur]\nsubscription_id=%s\ntenant=%s\nclient_id=%s\nsecret=%s\n"
            % (AZ.SUBSCRIPTION_ID, AZ.TENANT_ID, AZ.CLIENT_ID, AZ.CLIENT_SECRET))
        return (dict(SP_KEYS, auth_source="credential_file", profile="waldur"), {"HOME": str(tmp_path)},
                AZ.SERVICE_PRINCIPAL_OBJECT_ID, "profile [waldur] of %s/.azure/credentials" % tmp_path,
                [AZ.CLIENT_SECRET])
    if path == "msi_app_service":
        env = {"IDENTITY_ENDPOINT": azure.url + "/msi/token", "IDENTITY_HEADER": AZ.IDENTITY_HEADER}
        return (dict(SP_KEYS, auth_source="msi", client_id=AZ.USER_IDENTITY_CLIENT_ID), env,
                AZ.USER_IDENTITY_OBJECT_ID, "the user-assigned managed identity %s (auth_source msi, endpoint from "
                "IDENTITY_ENDPOINT)" % AZ.USER_IDENTITY_CLIENT_ID, [AZ.IDENTITY_HEADER])
    if path == "workload_identity":
        # what the AKS workload identity webhook injects into an AWX execution pod
        token = azure.app.tokens.federated_token(AZ.FEDERATED_ISSUER, AZ.FEDERATED_SUBJECT)
        (tmp_path / "azure-identity-token").write_text(token)
        env = {"AZURE_FEDERATED_TOKEN_FILE": str(tmp_path / "azure-identity-token"), "AZURE_TENANT_ID": AZ.TENANT_ID,
               "AZURE_CLIENT_ID": AZ.CLIENT_ID}
        return (dict(SP_KEYS), env, AZ.SERVICE_PRINCIPAL_OBJECT_ID,
                "the federated token of federated_token_file (%s; workload identity)" % env["AZURE_FEDERATED_TOKEN_FILE"],
                [token])
    if path == "certificate_path":
        (tmp_path / "sp.pem").write_bytes(pem)
        return (dict(SP_KEYS, tenant_id=AZ.TENANT_ID, client_id=AZ.CLIENT_ID,
                     x509_certificate_path=str(tmp_path / "sp.pem")), {}, AZ.SERVICE_PRINCIPAL_OBJECT_ID,
                "the client certificate of x509_certificate_path (%s)" % (tmp_path / "sp.pem"), [])
    assert path == "cli"
    access_token = fake_az(bin_dir, azure)
    return (dict(SP_KEYS, auth_source="cli"), {"PATH": "%s%s%s" % (bin_dir, os.pathsep, os.environ["PATH"])},
            AZ.CLI_USER_OBJECT_ID, "the Azure CLI's signed-in account (auth_source cli, %s)" % (bin_dir / "az"),
            [access_token])


def pem_lines(pem: bytes) -> list[str]:
    return [line for line in pem.decode().splitlines() if line and not line.startswith("-----")]


@pytest.mark.parametrize("path", ["env", "credential_file", "msi_app_service", "workload_identity", "certificate_path",
                                  "cli"])
def test_each_sign_in_creates_the_machine_through_the_order_pass(path, tmp_path, waldur_sim, azure_sim):
    settings, env, identity, words, secrets = sign_in_case(path, tmp_path, azure_sim)
    config = write_config(tmp_path, waldur_sim, azure=azure_sim, **settings)
    env = dict(env, WALDUR_SITE_AGENT_CONFIG=str(config))

    run = run_playbook(ORDER_PASS, env=env, verbosity=3)

    assert run.rc == 0, run.output[-6000:]
    assert_done(waldur_sim, W.AZURE_ORDER_UUID)
    assert waldur_sim.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"].lower().endswith(
        "/providers/microsoft.compute/virtualmachines/azure-vm-1")
    # ARM was called by that identity and no other (the simulator's service principal secret was not used)
    assert azure_sim.app.callers == {identity}
    # -v says which identity signed in and from where
    assert words in run.output
    assert_verbose_module_output(run.output)
    for secret in secrets + pem_lines(azure_sim.app.client_certificate):
        assert secret not in run.output


def test_imds_found_by_auto_and_a_certificate_given_as_pem_text_sign_in(tmp_path, azure_sim):
    """The other forms of two paths, in one cheap playbook of the order pass's probe: auth_source
    auto finding the system-assigned identity through IMDS (AZURE_POD_IDENTITY_AUTHORITY_HOST, as
    AAD pod identity sets it), and the certificate given as PEM text (an AWX credential's field)."""
    pem = azure_sim.app.client_certificate.decode()
    probe = {"backend_ids": ["/subscriptions/%s/resourceGroups/waldur-site-agent-probe/providers/Microsoft.Compute/"
                             "virtualMachines/probe" % AZ.SUBSCRIPTION_ID],
             "subscription_id": AZ.SUBSCRIPTION_ID, "arm_endpoint": azure_sim.url, "authority_host": azure_sim.url}
    out = tmp_path / "results.json"
    tasks = [
        {"name": "Sign in with the managed identity IMDS serves", "waldur.site_agent.azure_vm_chain_info": probe,
         "environment": {"AZURE_POD_IDENTITY_AUTHORITY_HOST": azure_sim.url}, "register": "imds"},
        {"name": "Sign in with a certificate given as PEM text", "waldur.site_agent.azure_vm_chain_info": dict(
            probe, tenant=AZ.TENANT_ID, client_id=AZ.CLIENT_ID, x509_certificate=pem), "register": "pem"},
        {"name": "Save the results", "ansible.builtin.copy": {
            "content": "{{ [imds, pem] | to_json }}", "dest": str(out), "mode": "0600"}},
    ]
    play = [{"name": "Sign in", "hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}]

    run = run_playbook(play, verbosity=3)

    assert run.rc == 0, run.output[-4000:]
    imds, pem_result = json.loads(out.read_text())
    assert imds["azure_sign_in"] == ("the system-assigned managed identity (auth_source auto, endpoint from "
                                     "AZURE_POD_IDENTITY_AUTHORITY_HOST)")
    assert pem_result["azure_sign_in"].endswith("with the client certificate of x509_certificate (PEM text) "
                                                "(auth_source auto, the module options or AZURE_* variables)")
    assert azure_sim.app.callers == {AZ.SYSTEM_IDENTITY_OBJECT_ID, AZ.SERVICE_PRINCIPAL_OBJECT_ID}
    assert_verbose_module_output(run.output)
    for line in pem_lines(azure_sim.app.client_certificate):
        assert line not in run.output


def test_a_certificate_azure_does_not_know_is_refused_naming_the_option(tmp_path, waldur_sim, azure_sim):
    (tmp_path / "other.pem").write_bytes(client_certificate("someone-else"))
    config = write_config(tmp_path, waldur_sim, azure=azure_sim, client_secret=None,
                          x509_certificate_path=str(tmp_path / "other.pem"))

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)}, verbosity=3)

    assert run.rc != 0
    assert "AADSTS700027" in run.output and "x509_certificate_path (%s)" % (tmp_path / "other.pem") in run.output
    assert waldur_sim.app.order(W.AZURE_ORDER_UUID)["state"] != "done"
    assert azure_sim.app.resources() == [] and azure_sim.app.callers == set()
    for line in pem_lines((tmp_path / "other.pem").read_bytes()):
        assert line not in run.output


def test_a_missing_federated_token_file_is_named_with_its_variable(tmp_path, waldur_sim, azure_sim):
    config = write_config(tmp_path, waldur_sim, azure=azure_sim, **SP_KEYS)
    env = {"WALDUR_SITE_AGENT_CONFIG": str(config), "AZURE_FEDERATED_TOKEN_FILE": str(tmp_path / "gone"),
           "AZURE_TENANT_ID": AZ.TENANT_ID, "AZURE_CLIENT_ID": AZ.CLIENT_ID}

    run = run_playbook(ORDER_PASS, env=env)

    assert run.rc != 0
    assert "backend_settings.federated_token_file" in run.output and "AZURE_FEDERATED_TOKEN_FILE" in run.output
    assert "%s is not a file" % (tmp_path / "gone") in run.output
    assert waldur_sim.app.order(W.AZURE_ORDER_UUID)["state"] != "done"
    assert azure_sim.app.resources() == []
