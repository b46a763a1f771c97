"""--diff through the shipped playbooks shows what changed per offering and resource: a changed
price (load_components), a sent usage (report) and a power change (membership_sync); and the
membership pass names, at default verbosity, each machine it changed."""

from __future__ import annotations

import uuid

import pytest
import yaml

from tests.helpers import REPO, run_playbook
from tests.integration.passes import MEMBERSHIP_PASS, REPORT_PASS, write_config
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

LOAD_COMPONENTS = REPO / "playbooks" / "load_components.yml"


def run_with_diff(playbook, config):
    run = run_playbook(playbook, env={"WALDUR_SITE_AGENT_CONFIG": str(config)}, args=["--diff"])
    assert run.rc == 0, run.output[-6000:]
    return run


def test_load_components_diff_shows_the_changed_price_of_each_plan(tmp_path, waldur_sim, do_sim):
    config = write_config(tmp_path, waldur_sim, do_sim)
    settings = yaml.safe_load(config.read_text())
    settings["offerings"] = settings["offerings"][:1]
    before = waldur_sim.app.market.plans[W.DO_PLAN_UUID]["prices"]["disk"]
    settings["offerings"][0]["backend_components"]["disk"]["price"] = 0.003
    config.write_text(yaml.safe_dump(settings, sort_keys=False))

    run = run_with_diff(LOAD_COMPONENTS, config)

    header = "offering %s plan Droplet s-1vcpu-1gb (%s) prices" % (W.DO_OFFERING_UUID, W.DO_PLAN_UUID)
    assert "--- before: %s" % header in run.stdout and "+++ after: %s" % header in run.stdout
    assert '-    "disk": %s' % float(before) in run.stdout, run.stdout
    assert '+    "disk": 0.003' in run.stdout


def test_report_diff_shows_the_usage_sent_for_each_resource(tmp_path, waldur_sim, azure_sim):
    waldur_sim.app.reset("empty")
    config = write_config(tmp_path, waldur_sim, azure=azure_sim)
    machine = azure_sim.app.seed_vm("measured", size="Standard_B2s")
    resource = waldur_sim.app.seed_resource(W.AZURE_OFFERING_UUID, "measured", backend_id=machine,
                                            limits=dict(W.AZURE_PLAN_QUOTAS))["uuid"]

    run = run_with_diff(REPORT_PASS, config)

    assert "+++ after: usage of measured (%s) for " % resource in run.stdout, run.stdout
    assert '+    "cpu": "2.00",' in run.stdout
    # and at default verbosity the pass names what it changed
    assert '"measured (resource %s): sent cpu, disk, ram"' % resource in run.stdout


def test_membership_diff_shows_the_power_change_and_names_the_machine(tmp_path, waldur_sim, do_sim):
    waldur_sim.app.reset("empty")
    config = write_config(tmp_path, waldur_sim, do_sim)
    resource = uuid.uuid4().hex
    droplet = do_sim.app.seed_droplet("paused-vm", tags=["waldur", "waldur-resource:" + resource], status="active")
    waldur_sim.app.seed_resource(W.DO_OFFERING_UUID, "paused-vm", uuid=resource, backend_id=str(droplet["id"]),
                                 limits=dict(W.DO_PLAN_QUOTAS), paused=True)

    run = run_with_diff(MEMBERSHIP_PASS, config)

    assert do_sim.app.droplet(droplet["id"])["status"] == "off"
    assert "+++ after: paused-vm (resource %s)" % resource in run.stdout, run.stdout  # named by its droplet
    assert '-    "power": "active"' in run.stdout and '+    "power": "off"' in run.stdout
    # the metadata Waldur keeps, before and after
    assert "--- before: resource %s" % resource in run.stdout
    # named at default verbosity outside check mode too
    assert "paused-vm (resource %s): " % resource in run.stdout.split("Name each change the pass made")[1]
