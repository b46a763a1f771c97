"""The membership pass tells the truth: an Erred resource whose machine it just found healthy
is set OK again (where Waldur offers set_as_ok); an offering without membership_sync_backend is
named, not silently left out."""

from __future__ import annotations

import uuid

import pytest
import yaml

from tests.helpers import run_playbook, simulator_site_config
from tests.integration.passes import MEMBERSHIP_PASS, run_pass, set_flag, waldur_writes, write_config
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration


def tag(resource_uuid: str) -> str:
    return "waldur-resource:" + resource_uuid


def seed_droplet_resource(waldur, do, name: str, state: str = "OK") -> str:
    resource_uuid = uuid.uuid4().hex
    droplet = do.app.seed_droplet(name, tags=["waldur", tag(resource_uuid)], status="active")
    waldur.app.seed_resource(W.DO_OFFERING_UUID, name, uuid=resource_uuid, backend_id=str(droplet["id"]),
                             limits=dict(W.DO_PLAN_QUOTAS), state=state)
    return resource_uuid


def test_an_erred_resource_with_a_running_droplet_is_set_ok(tmp_path, waldur_sim, do_sim):
    waldur = waldur_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do_sim)
    erred = seed_droplet_resource(waldur, do_sim, "erred-vm", state="Erred")
    steady = seed_droplet_resource(waldur, do_sim, "steady-vm")

    run = run_pass(MEMBERSHIP_PASS, config)

    assert waldur.app.resource(erred)["state"] == "OK"
    assert waldur.app.resource(steady)["state"] == "OK"
    assert waldur_writes(waldur).count("resources.set_as_ok") == 1
    assert "set_ok=1 still_erred=0" in run.output

    since = len(waldur.app.calls)
    run_pass(MEMBERSHIP_PASS, config)
    assert waldur_writes(waldur, since) == []


def test_a_dry_run_names_each_change_it_would_make_and_makes_none(tmp_path, waldur_sim, do_sim):
    waldur = waldur_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do_sim)
    erred = seed_droplet_resource(waldur, do_sim, "erred-vm", state="Erred")
    since = len(waldur.app.calls), len(do_sim.app.calls)

    run = run_pass(MEMBERSHIP_PASS, config, check=True)

    assert waldur_writes(waldur, since[0]) == []
    assert do_sim.app.write_calls(since[1]) == []
    assert waldur.app.resource(erred)["state"] == "Erred"
    # the modules' results are packed; the pass says per resource what it would do
    assert '"erred-vm (resource %s): would set OK (Erred; its machine is healthy)"' % erred in run.output
    assert '"erred-vm (resource %s): would update backend metadata"' % erred in run.output


def test_without_set_as_ok_the_resource_is_named_on_every_pass(tmp_path, waldur_sim, do_sim):
    waldur = waldur_sim
    waldur.app.reset("empty")
    waldur.app.set_quirks(no_set_as_ok=True)
    config = write_config(tmp_path, waldur, do_sim)
    erred = seed_droplet_resource(waldur, do_sim, "erred-vm", state="Erred")

    for _pass in range(2):
        run = run_pass(MEMBERSHIP_PASS, config)
        assert ("resource erred-vm (%s) is Erred in Waldur although its machine is healthy, and this Waldur has "
                "no set_as_ok" % erred) in run.output
        assert "set_ok=0 still_erred=1" in run.output
    assert waldur.app.resource(erred)["state"] == "Erred"


def test_an_offering_without_membership_sync_backend_is_named(tmp_path, waldur_sim, do_sim, azure_sim):
    config = simulator_site_config(waldur_sim.url, do_url=do_sim.url, azure_url=azure_sim.url)
    del config["offerings"][1]["membership_sync_backend"]  # the upstream Azure example has none
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)

    run = run_pass(MEMBERSHIP_PASS, path)

    assert "offering 'Azure VM' has no membership_sync_backend: left out of the membership_sync pass" in run.output
    assert "offering=DigitalOcean VM pass=membership_sync" in run.output
    assert "offering=Azure VM" not in run.output


def test_a_pass_that_serves_no_offering_fails_naming_the_misspelt_key(tmp_path, waldur_sim, do_sim):
    config = simulator_site_config(waldur_sim.url, do_url=do_sim.url)
    offering = config["offerings"][0]
    offering["membership_sync_backnd"] = offering.pop("membership_sync_backend")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)

    run = run_playbook(MEMBERSHIP_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(path)})

    assert run.rc != 0
    assert ("no offering takes part in the membership_sync pass: none of the offerings in %s sets "
            "membership_sync_backend (offerings[0].membership_sync_backnd looks like a misspelling of it)"
            % path) in run.output
    assert waldur_sim.app.calls == [] and do_sim.app.calls == []


def test_a_power_change_digitalocean_refuses_is_not_counted_as_a_machine_changed(tmp_path, waldur_sim, do_sim):
    """Counts are true (issue 24): a refused power action changed nothing, so machines_changed says 0."""
    waldur = waldur_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do_sim)
    paused = [seed_droplet_resource(waldur, do_sim, "paused-%d" % index) for index in range(2)]
    for resource_uuid in paused:
        set_flag(waldur, resource_uuid, "paused", True)
    do_sim.app.add_fault("droplet_actions.create", status=422, times=-1)

    run = run_playbook(MEMBERSHIP_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)})

    assert len(do_sim.app.calls_of("droplet_actions.create")) >= 2  # asked, and refused
    assert all(droplet["status"] == "active" for droplet in do_sim.app.droplets())
    assert "machines_changed=0" in run.output, run.output[-3000:]
