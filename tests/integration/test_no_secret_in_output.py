"""No secret in any output, ever: every playbook of the collection x {default, -v, -vvv, the
JSON callback} x {success, failure}, each run grepped (stdout, stderr and every file it wrote)
for the Waldur token, the DigitalOcean token, the Azure client secret, the Sentry DSN, the AWX
controller token and the admin passwords of the machines it made.

The simulators are the session's (reset per test); the failing runs use wrong credentials, which
are secrets too and are grepped as well."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, collection_path, run_playbook, simulator_site_config
from tests.integration.awx_standin import make_awx_standin
from tests.simulators.azure import presets as AZ
from tests.simulators.digitalocean import presets as DO
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

# A DSN whose server does not listen: the JSON callback's Sentry client fails fast, quietly.
SENTRY_KEY = "5f3c2a1b9d8e7f60sentrykey"
SENTRY_DSN = "http://%s@127.0.0.1:9/42" % SENTRY_KEY
WRONG_WALDUR_TOKEN = "wrong-waldur-token-7d1e"
WRONG_DO_TOKEN = "wrong-do-token-3a9c"
WRONG_AZURE_SECRET = "wrong-azure-secret-b44f"
CONTROLLER_TOKEN = "controller-token-8c2d"
SECRETS = (W.PROVIDER_TOKEN, DO.DO_TOKEN, AZ.CLIENT_SECRET, SENTRY_KEY, WRONG_WALDUR_TOKEN, WRONG_DO_TOKEN,
           WRONG_AZURE_SECRET, CONTROLLER_TOKEN)

MODES = {
    "default": {},
    "-v": {"verbosity": 1},
    "-vvv": {"verbosity": 3},
    "json": {"env": {"ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"}},
}
PASSES = ("order_process", "report", "membership_sync")
PLAYBOOKS = PASSES + ("load_components", "health", "diagnostics", "awx_configure", "schedule")


def site_config(waldur, do, azure, outcome: str) -> dict:
    config = simulator_site_config(waldur.url, do_url=do.url, azure_url=azure.url)
    config["sentry_dsn"] = SENTRY_DSN
    if outcome == "failure":
        # The cloud rejects one offering's credentials, Waldur the other's token.
        config["offerings"][0]["backend_settings"]["token"] = WRONG_DO_TOKEN
        config["offerings"][1]["waldur_api_token"] = WRONG_WALDUR_TOKEN
        config["offerings"][1]["backend_settings"]["client_secret"] = WRONG_AZURE_SECRET
    return config


def seed_machines(waldur, do, azure) -> None:
    """A resource with a machine per offering, so report and membership have work."""
    droplet = do.app.seed_droplet("metered-droplet", tags=["waldur", "waldur-resource:" + "e" * 32])
    waldur.app.seed_resource(W.DO_OFFERING_UUID, "metered-droplet", uuid="e" * 32, backend_id=str(droplet["id"]))
    vm = azure.app.seed_vm("metered-vm", admin_password="Seeded-Adm1n-Passw0rd!")
    waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "metered-vm", backend_id=vm)


def run(playbook: str, outcome: str, mode: str, tmp_path: Path, config: Path):
    kwargs = {key: dict(value) if isinstance(value, dict) else value for key, value in MODES[mode].items()}
    env = kwargs.pop("env", {})
    env["WALDUR_SITE_AGENT_CONFIG"] = str(config)
    if playbook == "awx_configure":
        standin = make_awx_standin(tmp_path / "awx-standin")
        env["ANSIBLE_COLLECTIONS_PATH"] = "%s%s%s" % (standin, os.pathsep, collection_path())
        if outcome == "failure":
            env["AWX_STANDIN_FAIL"] = "credential"
        return run_playbook(REPO / "playbooks" / "awx_configure.yml", env=env, extra_vars={
            "awx_site_agent_config_file": str(config),
            "awx_execution_environment_image": "registry.example.com/waldur-site-agent-ee:1.0.0",
            "controller_host": "https://awx.example.com", "controller_oauthtoken": CONTROLLER_TOKEN,
            "awx_waldur_api_url": "https://waldur.example.com/api/", "awx_waldur_api_token": W.PROVIDER_TOKEN,
            "awx_digitalocean_token": DO.DO_TOKEN, "awx_azure_client_secret": AZ.CLIENT_SECRET}, **kwargs)
    if playbook == "schedule":
        settings = {"schedule_config_path": str(config), "schedule_systemd_dir": str(tmp_path / "units"),
                    "schedule_systemd_manage": False, "schedule_venv": str(Path(sys.executable).parent.parent),
                    "schedule_flock": shutil.which("flock") or "/usr/bin/flock",
                    "schedule_lock_dir": str(tmp_path / "lock"),
                    "schedule_environment": {"HTTPS_PROXY": "http://proxy.example.com:3128"}}
        if outcome == "failure":  # a secret where it would be written in clear: refused, never shown
            settings["schedule_environment"] = {"SENTRY_DSN": SENTRY_DSN, "WALDUR_API_TOKEN": W.PROVIDER_TOKEN}
        (tmp_path / "units").mkdir()
        play = [{"name": "Schedule the passes", "hosts": "localhost", "connection": "local", "gather_facts": False,
                 "roles": [{"role": "waldur.site_agent.schedule"}]}]
        return run_playbook(play, extra_vars=settings, env=env, **kwargs)
    return run_playbook(REPO / "playbooks" / ("%s.yml" % playbook), env=env, **kwargs)


def written_files(tmp_path: Path):
    for path in tmp_path.rglob("*"):
        if path.is_file() and "awx-standin" not in path.parts:
            yield path


@pytest.mark.parametrize("outcome", ["success", "failure"])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_no_secret_in_any_output(playbook, mode, outcome, tmp_path, waldur_sim, do_sim, azure_sim):
    waldur_sim.app.reset("default" if playbook == "order_process" else "empty")
    if playbook in ("report", "membership_sync"):
        seed_machines(waldur_sim, do_sim, azure_sim)
    workdir = tmp_path / "run"
    workdir.mkdir()
    config = workdir / "waldur-site-agent-config.yaml"
    config.write_text(yaml.safe_dump(site_config(waldur_sim, do_sim, azure_sim, outcome), sort_keys=False))
    config.chmod(0o600)

    result = run(playbook, outcome, mode, workdir, config)

    # The outcome is what the scenario says, so both paths really ran.
    assert (result.rc == 0) == (outcome == "success"), result.output[-4000:]
    if playbook == "order_process" and outcome == "success":
        assert azure_sim.app.resources(), "the success run made no machine"
    passwords = {azure_sim.app.vm_admin_password(arm_id) for arm_id in azure_sim.app.resources()
                 if "/virtualMachines/" in arm_id}
    secrets = set(SECRETS) | {SENTRY_DSN} | {password for password in passwords if password}
    leaks = [secret for secret in secrets if secret in result.stdout or secret in result.stderr]
    assert leaks == [], "%s printed %s:\n%s" % (playbook, leaks, result.output[-4000:])
    for path in written_files(workdir):
        if path == config:
            continue
        text = path.read_text(errors="replace")
        assert [secret for secret in secrets if secret in text] == [], path
