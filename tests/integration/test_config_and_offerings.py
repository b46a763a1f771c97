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
    dead["waldur_offering_uuid"] = "d00000000000000000000000000000dd"  # one offering, one UUID
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


# ---- configuration as the migration guide promises it -------------------------------------------

SLURM_OFFERING = {
    "name": "HPC cluster", "waldur_api_url": "https://waldur.example.com/api/", "waldur_api_token": "slurm-token-0451",
    "waldur_offering_uuid": "5000000000000000000000000000000f", "backend_type": "slurm",
    "order_processing_backend": "slurm", "reporting_backend": "slurm",
    "backend_settings": {"default_account": "root", "customer_prefix": "hpc_"},
    "backend_components": {"cpu": {"measured_unit": "k-Hours", "accounting_type": "usage", "label": "CPU",
                                   "unit_factor": 60000}},
}


def test_a_slurm_offering_beside_ours_is_left_to_its_agent_with_one_warning(tmp_path, waldur_sim, do_sim):
    config = simulator_site_config(waldur_sim.url, do_sim.url)
    config["offerings"].insert(0, dict(SLURM_OFFERING))
    path = write(tmp_path / "config.yaml", config)
    path.chmod(0o600)

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(path)})

    assert run.rc == 0, run.output
    warning = ("offerings: skipped, not Azure or DigitalOcean (left to the agent of their backend): offerings[0] "
               "'HPC cluster' (backend_type slurm)")
    assert run.output.count(warning) == 1
    assert waldur_sim.app.order(waldur_presets.DO_ORDER_UUID)["state"] == "done"
    assert "slurm-token-0451" not in run.output


def test_file_warnings_come_once_per_run_even_with_one_host_per_offering(tmp_path, waldur_sim, do_sim, azure_sim):
    """A config readable by every local user, and a token over plain http to another host:
    one warning each per run, not one per offering host."""
    config = simulator_site_config(waldur_sim.url, do_sim.url, azure_sim.url)
    config["offerings"].append(dict(config["offerings"][0], name="Remote DigitalOcean",
                                    waldur_offering_uuid="d00000000000000000000000000000ff",
                                    waldur_api_url="http://waldur.example.com/api/"))
    path = write(tmp_path / "config.yaml", config)
    path.chmod(0o644)
    inventory = tmp_path / "site.waldur_offerings.yml"
    inventory.write_text(yaml.safe_dump({"plugin": "waldur.site_agent.offerings", "config_path": str(path)}))

    run = run_playbook(REPO / "playbooks" / "health.yml", args=["-i", str(inventory), "--limit", "DigitalOcean_VM:Azure_VM"])

    mode_warning = "%s is readable by its group and every local user (mode 0644)" % path
    http_warning = ("offerings[2].waldur_api_url: plain http:// to waldur.example.com: the Waldur token crosses the "
                    "network unencrypted; use https://")
    assert run.output.count(mode_warning) == 1, run.output
    assert run.output.count(http_warning) == 1, run.output
    assert run.rc == 0, run.output


@pytest.mark.parametrize("callback", ["default", "waldur.site_agent.waldur_json"])
def test_an_alias_bomb_is_refused_with_a_clear_message_and_nothing_called(tmp_path, waldur_sim, callback):
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi"):
        levels.append("%s: &%s [%s]" % (name, name, ",".join(["*" + previous] * 9)))
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(levels) + "\nofferings: []\n")
    path.chmod(0o600)
    assert path.stat().st_size < 600

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(path), "ANSIBLE_STDOUT_CALLBACK": callback},
                       timeout=120)

    assert run.rc != 0
    assert ("%s was not read: its YAML aliases expand to more than 100000 values (an alias bomb?)" % path) in run.output
    assert waldur_sim.app.calls == []


def test_oidc_only_and_duplicate_offerings_are_refused_before_any_call(tmp_path, waldur_sim, do_sim):
    config = simulator_site_config(waldur_sim.url, do_sim.url)
    first = config["offerings"][0]
    twin = dict(first, name="The same offering again", waldur_offering_uuid=first["waldur_offering_uuid"].upper())
    del first["waldur_api_token"]
    first.update(oidc_token_url="https://sso.example.com/token", oidc_client_id="agent",
                 oidc_client_secret="oidc-secret-31337")
    config["offerings"].append(twin)
    path = write(tmp_path / "config.yaml", config)
    path.chmod(0o600)

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(path)})

    assert run.rc != 0
    assert "offerings[0].waldur_api_token: required: this collection authenticates to Waldur with a static token" \
        in run.output
    assert "offerings[1].waldur_offering_uuid: the same offering as offerings[0]" in run.output
    assert "'dict' has no attribute" not in run.output
    assert waldur_sim.app.calls == [] and do_sim.app.calls == []
    assert "oidc-secret-31337" not in run.output
