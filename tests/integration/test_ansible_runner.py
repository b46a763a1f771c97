"""The passes run through ansible-runner, the engine AWX and Automation Platform use."""

from __future__ import annotations

import os

import ansible_runner
import pytest
import yaml

from tests.helpers import REPO, ansible_env, simulator_site_config
from tests.simulators.digitalocean import presets as do_presets
from tests.simulators.waldur import presets as waldur_presets

pytestmark = pytest.mark.integration


def run_pass(tmp_path, playbook, config_path):
    env = ansible_env({"WALDUR_SITE_AGENT_CONFIG": str(config_path)})
    (tmp_path / "runner").mkdir(exist_ok=True)
    return ansible_runner.run(
        private_data_dir=str(tmp_path / "runner"),
        playbook=str(REPO / "playbooks" / playbook),
        envvars={key: env[key] for key in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_PYTHON_INTERPRETER",
                                           "WALDUR_SITE_AGENT_CONFIG", "PATH")},
        quiet=True,  # the runner starts ansible-playbook from PATH, which begins with this venv's bin
    )


def test_order_and_membership_passes_run_through_ansible_runner(tmp_path, waldur_sim, do_sim):
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(simulator_site_config(waldur_sim.url, do_sim.url)))

    order_run = run_pass(tmp_path, "order_process.yml", config_path)

    assert (order_run.status, order_run.rc) == ("successful", 0)
    assert order_run.stats["failures"] == {}
    order = waldur_sim.app.order(waldur_presets.DO_ORDER_UUID)
    resource = waldur_sim.app.resource(order["marketplace_resource_uuid"])
    assert order["state"] == "done" and resource["backend_id"]
    assert do_sim.app.droplet(int(resource["backend_id"]))["status"] == "active"
    summaries = [event["event_data"]["res"]["msg"] for event in order_run.events
                 if event.get("event") == "runner_on_ok"
                 and event["event_data"].get("task") == "Summarise the pass"]
    assert summaries and "done=1" in summaries[0] and "erred=0" in summaries[0]
    stdout = order_run.stdout.read()
    assert do_presets.DO_TOKEN not in stdout and waldur_presets.PROVIDER_TOKEN not in stdout

    membership_run = run_pass(tmp_path, "membership_sync.yml", config_path)
    assert (membership_run.status, membership_run.rc) == ("successful", 0)
    assert os.path.isdir(tmp_path / "runner" / "artifacts")
