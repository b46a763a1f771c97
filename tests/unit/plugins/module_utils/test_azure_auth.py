"""Which identity a run signs in as (azure/auth.py): auth_source, the order of ``auto``, the
credential file, sovereign clouds, and the backend_settings check. The sign-ins themselves run
the real azure-identity classes against the simulator in tests/integration/test_azure_sign_in.py."""

from __future__ import annotations

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.auth import (
    SignInProblem,
    cloud_endpoints,
    resolve_sign_in,
    settings_problems,
)

SUB, TENANT, CLIENT, SECRET = "sub-1", "tenant-1", "client-1", "s3cr3t-value"


def resolve(params, environ=None, az=None):
    return resolve_sign_in(params, environ=environ or {}, which=lambda name: az)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def credential_file(home, text):
    (home / ".azure").mkdir(exist_ok=True)
    (home / ".azure" / "credentials").write_text(text)


def test_auto_takes_the_service_principal_of_the_options(home):
    sign_in = resolve(dict(subscription_id=SUB, tenant=TENANT, client_id=CLIENT, secret=SECRET), az="/usr/bin/az")
    assert (sign_in.kind, sign_in.secret, sign_in.subscription_id) == ("secret", SECRET, SUB)
    assert "service principal client-1 in tenant tenant-1 with a client secret" in sign_in.describe()
    assert SECRET not in sign_in.describe()


def test_auto_prefers_a_secret_to_a_certificate_and_says_so(home, tmp_path):
    pem = tmp_path / "sp.pem"
    pem.write_text("x")
    sign_in = resolve(dict(subscription_id=SUB, tenant=TENANT, client_id=CLIENT, secret=SECRET,
                           x509_certificate_path=str(pem)))
    assert sign_in.kind == "secret"
    assert sign_in.warnings == [
        "x509_certificate_path (env AZURE_X509_CERTIFICATE_PATH or AZURE_CLIENT_CERTIFICATE_PATH) is also given "
        "and is not used: the service principal signs in with secret (env AZURE_SECRET) (auth_source auto takes a "
        "client secret, then a certificate, then a federated token file)"]


def test_workload_identity_needs_its_token_file_and_names_the_variable(tmp_path):
    with pytest.raises(SignInProblem) as problem:
        resolve(dict(subscription_id=SUB, tenant=TENANT, client_id=CLIENT,
                     federated_token_file=str(tmp_path / "missing")))
    assert problem.value.message.startswith("federated_token_file (env AZURE_FEDERATED_TOKEN_FILE): no such file: ")
    token = tmp_path / "token"
    token.write_text("eyJ.header.sig\n")
    sign_in = resolve(dict(subscription_id=SUB, tenant=TENANT, client_id=CLIENT, federated_token_file=str(token)))
    assert sign_in.kind == "workload_identity" and sign_in.token_file == str(token)
    assert "eyJ.header.sig" in sign_in.secrets  # blanked from any SDK message


def test_a_client_id_without_any_credential_names_what_is_missing_not_another_identity():
    with pytest.raises(SignInProblem) as problem:
        resolve(dict(client_id=CLIENT), environ={"IDENTITY_ENDPOINT": "http://127.0.0.1:1/msi"}, az="/usr/bin/az")
    message = problem.value.message
    assert "subscription_id (env AZURE_SUBSCRIPTION_ID)" in message and "tenant (env AZURE_TENANT" in message
    assert "secret (env AZURE_SECRET)" in message


def test_auto_order_credential_file_then_managed_identity_then_cli(home):
    params = dict(subscription_id=SUB)
    with pytest.raises(SignInProblem) as problem:
        resolve(params)
    assert "set auth_source (msi on an Azure VM)" in problem.value.message
    assert resolve(params, az="/opt/az/bin/az").kind == "cli"
    assert resolve(params, environ={"IDENTITY_ENDPOINT": "http://x"}, az="/opt/az/bin/az").kind == "msi"
    credential_file(home, "[default]\nsubscription_id=%s\ntenant=t9\nclient_id=c9\nsecret=%s\n" % (SUB, SECRET))
    sign_in = resolve(params, environ={"IDENTITY_ENDPOINT": "http://x"}, az="/opt/az/bin/az")
    assert (sign_in.kind, sign_in.client_id, sign_in.subscription_id) == ("secret", "c9", SUB)
    assert "the default profile, profile [default] of %s/.azure/credentials" % home in sign_in.describe()


def test_credential_file_profile_is_read_as_azure_azcollection_reads_it(home):
    credential_file(home, "[default]\ntenant=t\n\n[prod]\nsubscription_id=sub-p\ntenant=tp\nclient_id=cp\n"
                          "secret=%s\n" % SECRET)
    sign_in = resolve(dict(auth_source="credential_file", profile="prod"))
    assert (sign_in.tenant, sign_in.client_id, sign_in.secret) == ("tp", "cp", SECRET)
    with pytest.raises(SignInProblem) as problem:
        resolve(dict(auth_source="credential_file", profile="staging", subscription_id=SUB))
    assert problem.value.message.startswith("profile: %s/.azure/credentials has no profile [staging] (it has: "
                                            "default, prod)" % home)
    with pytest.raises(SignInProblem) as problem:
        resolve(dict(auth_source="credential_file", subscription_id=SUB))  # [default] has no secret
    assert "no service principal credential" in problem.value.message and "secret in profile [default]" in problem.value.message


def test_env_reads_the_variables_only(home):
    environ = {"AZURE_SUBSCRIPTION_ID": SUB, "AZURE_TENANT_ID": TENANT, "AZURE_CLIENT_ID": CLIENT,
               "AZURE_SECRET": SECRET}
    sign_in = resolve(dict(auth_source="env", secret="from-the-options"), environ=environ)
    assert (sign_in.kind, sign_in.secret, sign_in.tenant) == ("secret", SECRET, TENANT)
    with pytest.raises(SignInProblem) as problem:
        resolve(dict(auth_source="env", subscription_id=SUB), environ={"AZURE_CLIENT_ID": CLIENT})
    assert "give AZURE_SECRET, AZURE_X509_CERTIFICATE_PATH or AZURE_CLIENT_CERTIFICATE_PATH or " \
           "AZURE_FEDERATED_TOKEN_FILE" in problem.value.message


def test_msi_with_and_without_a_client_id():
    system = resolve(dict(auth_source="msi", subscription_id=SUB))
    assert (system.kind, system.client_id) == ("msi", None)
    assert system.describe() == ("the system-assigned managed identity (auth_source msi, the instance metadata "
                                 "service (IMDS))")
    user = resolve(dict(auth_source="msi", subscription_id=SUB, client_id="mi-1"),
                   environ={"IDENTITY_ENDPOINT": "http://127.0.0.1:41741/msi/token"})
    assert user.describe() == ("the user-assigned managed identity mi-1 (auth_source msi, endpoint from "
                               "IDENTITY_ENDPOINT)")


def test_cli_needs_az_on_path():
    with pytest.raises(SignInProblem) as problem:
        resolve(dict(auth_source="cli", subscription_id=SUB))
    assert problem.value.message == "auth_source cli: the Azure CLI (az) is not on PATH"


def test_certificate_pem_text_and_path_are_one_or_the_other(tmp_path):
    base = dict(subscription_id=SUB, tenant=TENANT, client_id=CLIENT)
    with pytest.raises(SignInProblem) as problem:
        resolve(dict(base, x509_certificate="not a pem"))
    assert problem.value.message == "x509_certificate: expected PEM text holding the private key and its certificate"
    with pytest.raises(SignInProblem) as problem:
        resolve(dict(base, x509_certificate_path=str(tmp_path / "nope.pem")))
    assert problem.value.message.startswith("x509_certificate_path (env AZURE_X509_CERTIFICATE_PATH or "
                                            "AZURE_CLIENT_CERTIFICATE_PATH): no such file: ")
    pem = "-----BEGIN PRIVATE KEY-----\nAAA\n-----END PRIVATE KEY-----\n-----BEGIN CERTIFICATE-----\nBBB\n" \
          "-----END CERTIFICATE-----\n"
    sign_in = resolve(dict(base, x509_certificate=pem, x509_certificate_password="pw-1234"))
    assert (sign_in.kind, sign_in.certificate_data) == ("certificate", pem.encode())
    assert set(sign_in.secrets) == {pem.encode(), "pw-1234"}
    assert "PRIVATE" not in sign_in.describe()


def test_cloud_environment_gives_the_sovereign_endpoints_unless_they_are_given():
    assert cloud_endpoints({}) == ("https://login.microsoftonline.com", "https://management.azure.com")
    assert cloud_endpoints({"cloud_environment": "AzureUSGovernment"}) == (
        "https://login.microsoftonline.us", "https://management.usgovcloudapi.net")
    assert cloud_endpoints({"cloud_environment": "azurechinacloud", "arm_endpoint": "https://arm.local/"}) == (
        "https://login.chinacloudapi.cn", "https://arm.local")
    with pytest.raises(SignInProblem) as problem:
        cloud_endpoints({"cloud_environment": "AzureGermanCloud"})
    assert problem.value.message == ("cloud_environment: expected one of AzureCloud, AzureUSGovernment, "
                                     "AzureChinaCloud, got 'AzureGermanCloud'")


def test_backend_settings_problems_name_the_key(tmp_path):
    assert settings_problems({"subscription_id": SUB}) == []  # auto: msi, cli or a credential file at run time
    assert settings_problems({"subscription_id": SUB, "auth_source": "msi", "client_id": "mi"}) == []
    assert settings_problems({"subscription_id": SUB, "auth_source": "managed"}) == [
        ("auth_source", "expected one of auto, cli, credential_file, env, msi, got 'managed'")]
    problems = dict(settings_problems({"subscription_id": SUB, "tenant_id": TENANT, "client_id": CLIENT,
                                       "x509_certificate_path": str(tmp_path / "no.pem"),
                                       "cloud_environment": "Mars"}))
    assert problems["x509_certificate_path"].endswith("no.pem is not a file")
    assert problems["cloud_environment"].startswith("expected one of AzureCloud")
    assert dict(settings_problems({"subscription_id": SUB, "tenant_id": TENANT}))["client_id"] == "required"
    assert dict(settings_problems({"subscription_id": SUB, "x509_certificate": "-----BEGIN x"}))[
        "x509_certificate"] == "expected PEM text holding the private key and its certificate"
