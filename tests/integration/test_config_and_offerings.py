"""The configuration file as operators use it: validation before any call, vault,
and several offerings run through the inventory, one failing alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ansible_env, run_playbook, simulator_site_config
from tests.simulators.digitalocean import presets as do_presets
from tests.simulators.waldur import presets as waldur_presets

pytestmark = pytest.mark.integration

ORDER_PASS = REPO / "playbooks" / "order_process.yml"


def write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_ten_mistakes_are_reported_at_once_and_nothing_is_called(tmp_path, waldur_sim, do_sim):
    config = simulator_site_config(waldur_sim.url, do_sim.url)
    offering = config["offerings"][0]
    second = json.loads(json.dumps(offering))
    second["name"] = "Second DigitalOcean"
    config["offerings"].append(second)
    # Ten distinct mistakes, each in its own key.
    config["log_level"] = "CHATTY"                                            # 1
    config["reporting_periods"] = 40                                          # 2
    offering["waldur_api_url"] = "waldur.example.com/api/"                   # 3
    offering["waldur_offering_uuid"] = "offering-one"                         # 4
    offering["reporting_backend"] = "azure"                                   # 5
    offering["backend_settings"]["network_cidr"] = "everything"               # not a DO setting: a warning
    offering["backend_settings"]["size_mapping"] = {"s-1vcpu-1gb": {"cpu": "one"}}  # 6
    offering["backend_components"]["cpu"]["accounting_type"] = "sometimes"    # 7
    offering["backend_components"]["ram"]["unit_factor"] = 0                  # 8
    del second["backend_settings"]["token"]                                   # 9
    second["verify_ssl"] = "sometimes"                                        # 10
    path = write(tmp_path / "config.yaml", config)
    waldur_calls, do_calls = len(waldur_sim.app.calls), len(do_sim.app.calls)

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(path)})

    assert run.rc != 0
    for expected in ("log_level:", "reporting_periods:", "offerings[0].waldur_api_url:",
                     "offerings[0].waldur_offering_uuid:", "offerings[0].reporting_backend:",
                     "offerings[0].backend_settings.size_mapping:",
                     "offerings[0].backend_components.cpu.accounting_type:",
                     "offerings[0].backend_components.ram.unit_factor:",
                     "offerings[1].backend_settings.token: required", "offerings[1].verify_ssl:"):
        assert expected in run.output, expected
    assert "10 problems in" in run.output
    assert "offerings[0].backend_settings.network_cidr: unknown digitalocean setting" in run.output
    assert len(waldur_sim.app.calls) == waldur_calls and len(do_sim.app.calls) == do_calls
    assert do_presets.DO_TOKEN not in run.output and waldur_presets.PROVIDER_TOKEN not in run.output


def _vault(tmp_path):
    password = tmp_path / "vault-pass"
    password.write_text("correct horse battery staple\n")
    return password


def test_a_vault_encrypted_config_file_works(tmp_path, waldur_sim, do_sim):
    path = write(tmp_path / "config.yaml", simulator_site_config(waldur_sim.url, do_sim.url))
    password = _vault(tmp_path)
    subprocess.run([str(Path(sys.executable).parent / "ansible-vault"), "encrypt", str(path),
                    "--vault-password-file", str(password)], check=True, env=ansible_env(), capture_output=True)
    assert path.read_text().startswith("$ANSIBLE_VAULT")

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(path)},
                       args=["--vault-password-file", str(password)])

    assert run.rc == 0, run.output
    assert waldur_sim.app.order(waldur_presets.DO_ORDER_UUID)["state"] == "done"


def test_inline_vault_values_work(tmp_path, waldur_sim, do_sim):
    password = _vault(tmp_path)
    config = simulator_site_config(waldur_sim.url, do_sim.url)
    encrypted = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-vault"), "encrypt_string", "--vault-password-file",
         str(password), do_presets.DO_TOKEN, "--name", "token"],
        check=True, env=ansible_env(), capture_output=True, text=True).stdout
    text = yaml.safe_dump(config, sort_keys=False)
    text = text.replace("    token: %s\n" % do_presets.DO_TOKEN,
                        "\n".join("    " + line for line in encrypted.strip().splitlines()) + "\n")
    assert do_presets.DO_TOKEN not in text
    path = tmp_path / "config.yaml"
    path.write_text(text)

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(path)},
                       args=["--vault-password-file", str(password)])

    assert run.rc == 0, run.output
    assert waldur_sim.app.order(waldur_presets.DO_ORDER_UUID)["state"] == "done"


def test_offerings_run_in_parallel_and_a_dead_one_fails_alone(tmp_path, waldur_sim, do_sim, azure_sim):
    config = simulator_site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    dead = json.loads(json.dumps(config["offerings"][0]))
    dead["name"] = "Dead Waldur"
    dead["waldur_api_url"] = "http://127.0.0.1:9/api/"  # discard port: nothing listens
    config["offerings"].append(dead)
    path = write(tmp_path / "config.yaml", config)

    run = run_playbook(ORDER_PASS, args=["-i", str(path), "--forks", "3"],
                       env={"ANSIBLE_INVENTORY_ENABLED": "waldur.site_agent.offerings",
                            "ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"})

    assert run.rc != 0
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    finished = [line for line in lines if line["event"] == "playbook finished"]
    assert finished, run.output
    failed_hosts = {line.get("host") for line in lines if line["level"] == "error" and line.get("host")}
    assert failed_hosts == {"Dead_Waldur"}, failed_hosts
    assert waldur_sim.app.order(waldur_presets.DO_ORDER_UUID)["state"] == "done"
    assert waldur_sim.app.order(waldur_presets.AZURE_ORDER_UUID)["state"] == "done"
    for secret in (do_presets.DO_TOKEN, waldur_presets.PROVIDER_TOKEN):
        assert secret not in run.output
