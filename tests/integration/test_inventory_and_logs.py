"""The site agent configuration as inventory, with the JSON-lines log and Sentry reporting:
real ansible-playbook runs, one host per offering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import ansible_env, run_playbook
from tests.unit.plugins.callback.sentry_recorder import SentryRecorder

pytestmark = pytest.mark.integration

PLAYBOOK = Path(__file__).parent / "playbooks" / "offerings_inventory.yml"
WALDUR_TOKEN = "waldur-provider-token-1c9e47"
OTHER_WALDUR_TOKEN = "waldur-provider-token-77ab03"
DO_TOKEN = "dop_v1_98af3c10e2b4d5"
CLIENT_SECRET = "azure-sp-secret-J7~k2"
SENTRY_KEY = "sentrypublickey42"
SECRETS = (WALDUR_TOKEN, OTHER_WALDUR_TOKEN, DO_TOKEN, CLIENT_SECRET)
OFFERINGS = {"DigitalOcean": "DigitalOcean", "Azure_VMs": "Azure VMs", "Lab_6_7": "Lab {{ 6 * 7 }}"}


def site_config(sentry_dsn=""):
    waldur = "https://waldur.example.com/api/"
    return {
        "sentry_dsn": sentry_dsn,
        "offerings": [
            {"name": "DigitalOcean", "waldur_api_url": waldur, "waldur_api_token": WALDUR_TOKEN,
             "waldur_offering_uuid": "d0000000000000000000000000000001", "backend_type": "digitalocean",
             "order_processing_backend": "digitalocean", "reporting_backend": "digitalocean",
             "backend_settings": {"token": DO_TOKEN}},
            {"name": "Azure VMs", "waldur_api_url": waldur, "waldur_api_token": WALDUR_TOKEN,
             "waldur_offering_uuid": "a0000000-0000-0000-0000-000000000001", "backend_type": "azure",
             "order_processing_backend": "azure", "membership_sync_backend": "azure",
             "backend_settings": {"subscription_id": "sub", "tenant_id": "tenant", "client_id": "client",
                                  "client_secret": CLIENT_SECRET}},
            # A name that looks like a template must stay a name.
            {"name": "Lab {{ 6 * 7 }}", "waldur_api_url": waldur, "waldur_api_token": OTHER_WALDUR_TOKEN,
             "waldur_offering_uuid": "d0000000000000000000000000000002", "backend_type": "digitalocean",
             "reporting_backend": "digitalocean", "backend_settings": {"token": DO_TOKEN}},
        ],
    }


def environment(**extra):
    env = {
        "ANSIBLE_INVENTORY_ENABLED": "waldur.site_agent.offerings",
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1",
        "ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json",
        "SENTRY_DSN": "",
        "WALDUR_SITE_AGENT_SENTRY_DSN": "",
    }
    env.update(extra)
    return env


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "waldur-site-agent-config.yaml"
    path.write_text(yaml.safe_dump(site_config()))
    return path


def records_of(run):
    records = []
    for line in run.stdout.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON line on stdout: {line!r}\n{run.output}")
    return records


def assert_no_secret(*texts):
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


def summaries(records):
    return {record["host"]: record for record in records if record["event"] == "pass summary"}


def test_each_offering_is_a_host_that_runs_with_json_logs(config_file):
    run = run_playbook(PLAYBOOK, args=["-i", str(config_file)], env=environment())
    assert run.rc == 0, run.output
    records = records_of(run)
    assert records[0]["event"] == "playbook started" and records[-1]["event"] == "playbook finished"
    assert sorted(records[-1]["hosts"]) == sorted(OFFERINGS)
    # show, read, count and summarise
    assert all(counts["failed"] == 0 and counts["ok"] == 4 for counts in records[-1]["hosts"].values())

    by_host = summaries(records)
    assert sorted(by_host) == sorted(OFFERINGS)
    for host, name in OFFERINGS.items():
        # The site_config action found exactly the offering the host stands for, by its name.
        assert by_host[host]["offering"] == name and by_host[host]["offerings"] == 1
    assert by_host["Azure_VMs"]["roles"] == "audit,membership_sync,order_process"
    shown = {r["host"]: r["msg"] for r in records if r.get("task") == "Show the offering this host stands for"}
    assert shown["Lab_6_7"] == "Lab {{ 6 * 7 }} (digitalocean, d0000000000000000000000000000002)"
    assert shown["Azure_VMs"] == "Azure VMs (azure, a0000000000000000000000000000001)"
    assert_no_secret(run.stdout, run.stderr)


def test_limit_runs_one_offering(config_file):
    run = run_playbook(PLAYBOOK, args=["-i", str(config_file), "--limit", "Azure_VMs"], env=environment())
    assert run.rc == 0, run.output
    assert list(summaries(records_of(run))) == ["Azure_VMs"]


def test_a_vault_encrypted_config_end_to_end(tmp_path, config_file):
    password_file = tmp_path / "vault-password"
    password_file.write_text("integration-vault-password\n")
    encrypt = subprocess.run([str(Path(sys.executable).parent / "ansible-vault"), "encrypt",
                              "--vault-password-file", str(password_file), str(config_file)],
                             env=ansible_env(), capture_output=True, text=True, check=False)
    assert encrypt.returncode == 0, encrypt.stderr

    run = run_playbook(PLAYBOOK, args=["-i", str(config_file), "--vault-password-file", str(password_file)],
                       env=environment())
    assert run.rc == 0, run.output
    assert sorted(summaries(records_of(run))) == sorted(OFFERINGS)
    assert_no_secret(run.stdout, run.stderr)


def test_failures_are_logged_and_sent_to_sentry_without_secrets(tmp_path):
    with SentryRecorder() as sentry:
        dsn = sentry.dsn(5).replace("public5", SENTRY_KEY)
        config_file = tmp_path / "config.yaml"
        config_file.write_text(yaml.safe_dump(site_config(sentry_dsn=dsn)))
        run = run_playbook(PLAYBOOK, args=["-i", str(config_file)], extra_vars={"inventory_check_fail": True},
                           env=environment(SENTRY_ENVIRONMENT="integration"))
    assert run.rc == 2, run.output
    records = records_of(run)
    errors = {r["host"]: r for r in records if r["level"] == "error" and r.get("status") == "failed"}
    assert sorted(errors) == sorted(OFFERINGS)
    assert errors["DigitalOcean"]["event"] == (
        "Waldur at https://waldur.example.com/api/ refused token ******** for offering "
        "d0000000000000000000000000000001")
    assert errors["Lab_6_7"]["offering"] == "Lab {{ 6 * 7 }}"
    assert records[-1]["failed"] == 3 and records[-1]["level"] == "error"

    events = sentry.events()
    assert sorted(event["tags"]["offering"] for event in events) == sorted(OFFERINGS.values())
    assert {event["environment"] for event in events} == {"integration"}
    # One group for the same failure of different offerings: the UUID does not split it.
    assert len({json.dumps(event["fingerprint"]) for event in events}) == 1
    assert events[0]["fingerprint"][-1].endswith("refused token ******** for offering <uuid>")
    assert_no_secret(run.stdout, run.stderr, sentry.raw())
    assert SENTRY_KEY not in run.stdout + run.stderr


def test_an_invalid_config_stops_the_run_before_any_task(tmp_path):
    config = site_config()
    del config["offerings"][1]["backend_settings"]["client_secret"]
    config["offerings"][2]["reporting_backend"] = "azure"
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    run = run_playbook(PLAYBOOK, args=["-i", str(config_file)], env=environment())
    assert run.rc != 0
    assert "offerings[1].backend_settings.client_secret: required" in run.stderr
    assert "offerings[2].reporting_backend:" in run.stderr
    assert not [r for r in records_of(run) if r.get("task")]
    assert_no_secret(run.stdout, run.stderr)
