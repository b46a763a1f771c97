"""playbooks/health.yml and playbooks/diagnostics.yml against the simulators."""

from __future__ import annotations

import os
import socket
import sys
import time

import pytest
import yaml

from tests.helpers import REPO, run_playbook
from tests.simulators.azure import presets as azure_presets
from tests.simulators.digitalocean import presets as do_presets
from tests.simulators.waldur import presets as waldur_presets

pytestmark = pytest.mark.integration

HEALTH = REPO / "playbooks" / "health.yml"
DIAGNOSTICS = REPO / "playbooks" / "diagnostics.yml"
COMPONENTS = {
    name: {"measured_unit": unit, "accounting_type": "limit", "label": name.upper(), "unit_factor": 1}
    for name, unit in (("cpu", "Cores"), ("ram", "MiB"), ("disk", "MiB"))
}
SECRETS = (waldur_presets.PROVIDER_TOKEN, do_presets.DO_TOKEN, azure_presets.CLIENT_SECRET)


def site_config(waldur_url: str, do_url: str | None = None, azure_url: str | None = None) -> dict:
    """The DigitalOcean and Azure offerings of the Waldur simulator's default preset."""
    return {"offerings": [
        {
            "name": "DigitalOcean VM",
            "waldur_api_url": waldur_url + "/api/",
            "waldur_api_token": waldur_presets.PROVIDER_TOKEN,
            "waldur_offering_uuid": waldur_presets.DO_OFFERING_UUID,
            "backend_type": "digitalocean",
            "order_processing_backend": "digitalocean",
            "backend_settings": {"token": do_presets.DO_TOKEN,
                                 "api_url": (do_url or "http://127.0.0.1:9") + "/v2/",
                                 "default_region": "ams3", "default_image": "ubuntu-22-04-x64",
                                 "default_size": "s-1vcpu-1gb"},
            "backend_components": dict(COMPONENTS),
        },
        {
            "name": "Azure VM",
            "waldur_api_url": waldur_url,
            "waldur_api_token": waldur_presets.PROVIDER_TOKEN,
            "waldur_offering_uuid": waldur_presets.AZURE_OFFERING_UUID,
            "backend_type": "azure",
            "order_processing_backend": "azure",
            "backend_settings": {
                "subscription_id": azure_presets.SUBSCRIPTION_ID,
                "tenant_id": azure_presets.TENANT_ID,
                "client_id": azure_presets.CLIENT_ID,
                "client_secret": azure_presets.CLIENT_SECRET,
                "arm_endpoint": azure_url or "https://127.0.0.1:9",
                "authority_host": azure_url or "https://127.0.0.1:9",
                "default_location": "westeurope", "default_size": "Standard_B2s",
                "default_image": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest",
            },
            "backend_components": dict(COMPONENTS),
        },
    ]}


def write_config(tmp_path, config: dict):
    path = tmp_path / "site-agent.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def closed_port_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def report_section(output: str) -> str:
    """The diagnostics report as printed (-vvv also shows the facts it was built from)."""
    return output.split("TASK [Show the report of each offering]", 1)[1]


def assert_no_secret(output: str, *extra: str):
    for secret in SECRETS + extra:
        assert secret not in output


# ---------------------------------------------------------------------------------- health
def test_health_passes_when_waldur_the_offerings_and_the_clouds_accept_their_credentials(
        tmp_path, waldur_sim, do_sim, azure_sim):
    config = write_config(tmp_path, site_config(waldur_sim.url, do_sim.url, azure_sim.url))

    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(config)}, verbosity=3)

    assert run.rc == 0, run.output
    assert ("offering DigitalOcean VM: ready, Waldur answers as provider-agent, offering DigitalOcean droplets "
            "(Active), DigitalOcean account active") in run.output
    assert ("offering Azure VM: ready, Waldur answers as provider-agent, offering Azure virtual machines (Active), "
            "Azure subscription %s Enabled" % azure_presets.SUBSCRIPTION_NAME) in run.output
    probes = waldur_sim.app.calls_of("users.me")
    assert [(c["status"], c["user_agent"]) for c in probes] == [(200, "waldur-site-agent-health")] * 2
    assert [c["status"] for c in waldur_sim.app.calls_of("offering.get")] == [200, 200]
    assert [c["status"] for c in do_sim.app.calls_of("account.get")] == [200]
    assert [c["status"] for c in azure_sim.app.calls_of("subscriptions.get")] == [200]
    assert_no_secret(run.output)


def test_health_reads_the_config_from_the_environment(tmp_path, waldur_sim, do_sim, azure_sim):
    config = write_config(tmp_path, site_config(waldur_sim.url, do_sim.url, azure_sim.url))

    run = run_playbook(HEALTH, env={"WALDUR_SITE_AGENT_CONFIG": str(config)})

    assert run.rc == 0, run.output
    assert len(waldur_sim.app.calls_of("users.me")) == 2


def test_health_fails_naming_the_offering_whose_token_is_rejected(tmp_path, waldur_sim, do_sim, azure_sim):
    config = site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    config["offerings"][1]["waldur_api_token"] = "rejected-token-4f1c9e"
    path = write_config(tmp_path, config)

    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(path)}, verbosity=3)

    assert run.rc != 0
    assert "Not ready: Azure VM (Waldur rejected the token (HTTP 401))" in run.output
    assert "offering DigitalOcean VM: ready" in run.output
    assert "DigitalOcean VM (" not in run.output.split("Not ready:", 1)[1]
    assert_no_secret(run.output, "rejected-token-4f1c9e")
    assert sorted(c["status"] for c in waldur_sim.app.calls_of("users.me")) == [200, 401]


def test_health_fails_fast_naming_the_offering_whose_waldur_is_unreachable(tmp_path, waldur_sim, do_sim, azure_sim):
    config = site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    down = closed_port_url()
    config["offerings"][0]["waldur_api_url"] = down + "/api/"
    path = write_config(tmp_path, config)

    started = time.monotonic()
    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(path)})

    assert time.monotonic() - started < 60
    assert run.rc != 0
    assert ("Not ready: DigitalOcean VM (Waldur is unreachable at %s/api/ (waldur_api_url): Connection refused)"
            % down) in run.output
    assert "offering Azure VM: ready" in run.output
    assert do_sim.app.calls == []  # nothing more is asked for an offering whose Waldur is down
    assert_no_secret(run.output)


def test_health_reports_a_waldur_server_error(tmp_path, waldur_sim, do_sim, azure_sim):
    waldur_sim.app.add_fault("users.me", status=503, times=1)
    path = write_config(tmp_path, site_config(waldur_sim.url, do_sim.url, azure_sim.url))

    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(path)})

    assert run.rc != 0
    assert "Not ready: DigitalOcean VM (Waldur answered HTTP 503)" in run.output


def test_health_says_not_ready_for_a_wrong_offering_uuid(tmp_path, waldur_sim, do_sim, azure_sim):
    """A wrong waldur_offering_uuid gave orders=0 and a green health forever: now one line."""
    config = site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    wrong = "d0000000000000000000000000000999"
    config["offerings"][0]["waldur_offering_uuid"] = wrong
    path = write_config(tmp_path, config)

    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(path)})

    assert run.rc != 0
    assert ("Not ready: DigitalOcean VM (offering %s (waldur_offering_uuid) is not an offering of this token's "
            "provider in Waldur (HTTP 404)" % wrong) in run.output
    assert "offering Azure VM: ready" in run.output


def test_health_proves_the_cloud_credentials(tmp_path, waldur_sim, do_sim, azure_sim):
    """A wrong DigitalOcean token or Azure secret was invisible until an order arrived."""
    config = site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    config["offerings"][0]["backend_settings"]["token"] = "wrong-do-token-5150"
    config["offerings"][1]["backend_settings"]["client_secret"] = "wrong-azure-secret-6502"
    path = write_config(tmp_path, config)

    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(path)}, verbosity=3)

    assert run.rc != 0
    assert ("Not ready: DigitalOcean VM (DigitalOcean rejected the token (HTTP 401); check backend_settings.token); "
            "Azure VM (Azure AD refused the service principal: AADSTS7000215: Invalid client secret provided.") in run.output
    assert "for a secret added to app '%s'.; check backend_settings.client_secret)" % azure_presets.CLIENT_ID in run.output
    assert azure_sim.app.calls_of("subscriptions.get") == []
    assert_no_secret(run.output, "wrong-do-token-5150", "wrong-azure-secret-6502")


def test_health_and_diagnostics_tell_the_truth_under_check_mode(tmp_path, waldur_sim, do_sim, azure_sim):
    """uri does not support check mode: its reads ran skipped and gave a false outage."""
    path = write_config(tmp_path, site_config(waldur_sim.url, do_sim.url, azure_sim.url))

    health = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(path)}, check=True)
    diagnostics = run_playbook(DIAGNOSTICS, extra_vars={"agent_pass_config": str(path)}, check=True)

    assert health.rc == 0, health.output
    assert "offering DigitalOcean VM: ready" in health.output and "offering Azure VM: ready" in health.output
    assert diagnostics.rc == 0, diagnostics.output
    assert report_section(diagnostics.output).count("no problems found") == 2
    assert waldur_sim.app.write_calls() == [] and do_sim.app.write_calls() == []
    bad = site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    bad["offerings"][0]["backend_settings"]["token"] = "wrong-do-token-5150"
    checked = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(write_config(tmp_path, bad))}, check=True)
    assert checked.rc != 0 and "DigitalOcean rejected the token (HTTP 401)" in checked.output


def test_health_checks_one_offering_per_host_with_the_offerings_inventory(tmp_path, waldur_sim, do_sim, azure_sim):
    """With the waldur.site_agent.offerings inventory each host probes only its own offering;
    the failing one is named, the other passes."""
    config = site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    config["offerings"][1]["waldur_api_token"] = "rejected-token-77aa"
    path = write_config(tmp_path, config)
    inventory = tmp_path / "site.waldur_offerings.yml"
    inventory.write_text(yaml.safe_dump({"plugin": "waldur.site_agent.offerings", "config_path": str(path)}))

    run = run_playbook(HEALTH, args=["-i", str(inventory)])

    assert run.rc != 0
    assert "fatal: [Azure_VM]" in run.output
    assert "Not ready: Azure VM (Waldur rejected the token (HTTP 401))" in run.output
    assert "fatal: [DigitalOcean_VM]" not in run.output
    assert "offering DigitalOcean VM: ready" in run.output
    assert len(waldur_sim.app.calls_of("users.me")) == 2
    assert_no_secret(run.output, "rejected-token-77aa")


# ---------------------------------------------------------------------------------- diagnostics
def test_diagnostics_reports_waldur_offering_orders_and_backends(tmp_path, waldur_sim, do_sim, azure_sim):
    path = write_config(tmp_path, site_config(waldur_sim.url, do_sim.url, azure_sim.url))

    run = run_playbook(DIAGNOSTICS, extra_vars={"agent_pass_config": str(path)}, verbosity=3)

    assert run.rc == 0, run.output
    out = report_section(run.output)
    assert f"Waldur {waldur_sim.url}/api/: reachable, the agent is user provider-agent" in out
    assert "offering in Waldur: DigitalOcean droplets, state Active, type Marketplace.Slurm" in out
    assert "offering in Waldur: Azure virtual machines, state Active" in out
    assert "components in Waldur: cpu (limit), ram (limit), disk (limit)" in out
    # The default preset has one Create order per offering waiting for the provider.
    assert out.count("orders pending-provider: 1, orders executing: 0, resources OK: 0, resources Erred: 0") == 2
    assert f"DigitalOcean {do_sim.url}/v2/: reachable, account active, droplet limit 100" in out
    assert (f"reachable, subscription {azure_presets.SUBSCRIPTION_NAME} ({azure_presets.SUBSCRIPTION_ID}) Enabled"
            in out)
    assert out.count("no problems found") == 2
    assert do_sim.app.calls_of("account.get")[0]["status"] == 200
    assert [c["status"] for c in azure_sim.app.calls_of("token")] == [200]
    assert [c["status"] for c in azure_sim.app.calls_of("subscriptions.get")] == [200]
    order_counts = waldur_sim.app.calls_of("orders.list")
    assert {c["query"].split("state=")[1].split("&")[0] for c in order_counts} == {"pending-provider", "executing"}
    assert_no_secret(run.output)


def test_diagnostics_never_says_no_problems_beside_erred_resources(tmp_path, waldur_sim, do_sim, azure_sim):
    for name in ("gone-1", "gone-2"):
        waldur_sim.app.seed_resource(waldur_presets.DO_OFFERING_UUID, name, backend_id="41800000%s" % name[-1],
                                     state="Erred")
    path = write_config(tmp_path, site_config(waldur_sim.url, do_sim.url, azure_sim.url))

    run = run_playbook(DIAGNOSTICS, extra_vars={"agent_pass_config": str(path)})

    assert run.rc == 0, run.output  # nothing is broken: the provider has resources to look at
    out = report_section(run.output)
    assert "resources Erred: 2" in out
    assert ("TO LOOK AT: 2 resource(s) Erred in Waldur (Waldur gave up on them; a machine may still run behind "
            "one: waldur.site_agent.audit names them)") in out
    assert out.count("no problems found") == 1  # the Azure offering's only


def test_diagnostics_fails_naming_each_problem_without_showing_secrets(tmp_path, waldur_sim, do_sim, azure_sim):
    config = site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    config["offerings"][0]["backend_settings"]["token"] = "bad-do-token-31337"
    config["offerings"][0]["backend_components"]["gpu"] = {
        "measured_unit": "GPU", "accounting_type": "limit", "label": "GPU"}
    config["offerings"][1]["backend_settings"]["client_secret"] = "bad-azure-secret-8086"
    path = write_config(tmp_path, config)

    run = run_playbook(DIAGNOSTICS, extra_vars={"agent_pass_config": str(path)}, verbosity=3)

    assert run.rc != 0
    out = report_section(run.output)
    assert "components of the configuration missing in Waldur: gpu (run waldur.site_agent.load_components)" in out
    assert "DigitalOcean rejected the credentials (HTTP 401)" in out
    assert "Azure AD: no token for the service principal: AADSTS7000215: Invalid client secret provided." in out
    assert ("Problems found: DigitalOcean VM (components missing in Waldur: gpu; DigitalOcean rejected the "
            "credentials (HTTP 401); check backend_settings.token); Azure VM (Azure AD refused the service principal; "
            "check backend_settings.client_secret)") in out
    assert azure_sim.app.calls_of("subscriptions.get") == []
    assert_no_secret(run.output, "bad-do-token-31337", "bad-azure-secret-8086")


def test_diagnostics_skips_waldur_details_when_waldur_rejects_the_token(tmp_path, waldur_sim, do_sim, azure_sim):
    config = site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    config["offerings"][0]["waldur_api_token"] = "bad-waldur-token-2718"
    path = write_config(tmp_path, config)

    run = run_playbook(DIAGNOSTICS, extra_vars={"agent_pass_config": str(path)})

    assert run.rc != 0
    assert f"Waldur {waldur_sim.url}/api/: Waldur rejected the credentials (HTTP 401)" in run.output
    assert "Problems found: DigitalOcean VM (Waldur rejected the credentials (HTTP 401))" in run.output
    # Only the Azure offering's Waldur details were read.
    offering_reads = waldur_sim.app.calls_of("offering.get")
    assert [c["path"].split("/")[3] for c in offering_reads] == [waldur_presets.AZURE_OFFERING_UUID]
    assert_no_secret(run.output, "bad-waldur-token-2718")


# ---------------------------------------------------------------------------------- verify_ssl
@pytest.fixture
def tls_waldur(tls_waldur_server):
    return tls_waldur_server


@pytest.mark.parametrize("verify_ssl, environment, ready", [
    (False, {"REQUESTS_CA_BUNDLE": "other", "CURL_CA_BUNDLE": "other"}, True),   # false is false
    ("ca", {"REQUESTS_CA_BUNDLE": "other"}, True),                                # a CA path wins
    (True, {"REQUESTS_CA_BUNDLE": "ca"}, True),                                   # true: the variable's CA
    (True, {"REQUESTS_CA_BUNDLE": "other"}, False),                               # ... and only that one
    (None, {"WALDUR_VERIFY_SSL": "false", "REQUESTS_CA_BUNDLE": "other"}, True),  # unset: WALDUR_VERIFY_SSL
])
def test_health_verifies_waldur_as_verify_ssl_says_whatever_the_environment(
        tmp_path, tls_waldur, do_sim, verify_ssl, environment, ready):
    paths = {"ca": tls_waldur.ca_bundle, "other": tls_waldur.other_ca}
    config = site_config(tls_waldur.url, do_sim.url)
    config["offerings"] = config["offerings"][:1]
    if verify_ssl is not None:
        config["offerings"][0]["verify_ssl"] = paths.get(verify_ssl, verify_ssl)
    path = write_config(tmp_path, config)
    env = {name: paths.get(value, value) for name, value in environment.items()}

    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(path)}, env=env)

    if ready:
        assert run.rc == 0, run.output
        assert "offering DigitalOcean VM: ready" in run.output
    else:
        assert run.rc != 0
        assert "Not ready: DigitalOcean VM (Waldur is unreachable at %s/api/ (waldur_api_url): " % tls_waldur.url \
            in run.output
        assert "CERTIFICATE_VERIFY_FAILED" in run.output or "certificate verify failed" in run.output


@pytest.mark.parametrize("auth_source", ["auto", "env", "cli", "msi"])
def test_health_is_not_ready_for_an_azure_offering_that_cannot_sign_in(
        tmp_path, waldur_sim, do_sim, azure_sim, monkeypatch, auth_source):
    """Every sign-in source is proven by a token and a read of the subscription: an Azure offering
    with no credentials at all (no secret, no CLI on PATH, no managed identity on this host) was
    reported ready before (issue 38), and its first order pass then failed."""
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_SECRET", "AZURE_CLIENT_SECRET", "IDENTITY_ENDPOINT",
                 "MSI_ENDPOINT", "IMDS_ENDPOINT", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_SUBSCRIPTION_ID"):
        monkeypatch.delenv(name, raising=False)
    config = site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    settings = config["offerings"][1]["backend_settings"]
    for key in ("tenant_id", "client_id", "client_secret"):
        settings.pop(key, None)
    settings["auth_source"] = auth_source
    path = write_config(tmp_path, config)

    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(path)},
                       env={"PATH": "/usr/bin:/bin:%s" % os.path.dirname(sys.executable), "HOME": str(tmp_path)})

    assert run.rc != 0, run.output[-4000:]
    assert "NOT READY" in run.output and "Azure VM" in run.output.split("Not ready:", 1)[-1], run.output[-4000:]
    assert "offering Azure VM: ready" not in run.output
