"""Each offering's summary line counts that offering's work only: with two offerings, the first
doing work and the second none, the second's line shows zeros (the registered results of the
first must not linger into it) and is the same as when neither had anything to do."""

from __future__ import annotations

import re
import uuid

import pytest
import yaml

from tests.helpers import simulator_site_config
from tests.integration.passes import MEMBERSHIP_PASS, ORDER_PASS, assert_done, order_machine, run_pass
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration


def two_offerings(tmp_path, waldur, do, azure):
    """DigitalOcean first, Azure second (the simulators' configuration order)."""
    config = simulator_site_config(waldur.url, do_url=do.url, azure_url=azure.url)
    assert [offering["name"] for offering in config["offerings"]] == ["DigitalOcean VM", "Azure VM"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def summary(output: str, offering: str, pass_name: str) -> dict:
    [text] = re.findall(r'"msg": "offering=%s (pass=%s[^"]*)"' % (re.escape(offering), pass_name), output)
    return dict(pair.split("=", 1) for pair in text.split() if "=" in pair)


def without_seconds(line: dict) -> dict:
    return {key: value for key, value in line.items() if key != "seconds"}


def test_an_order_pass_offering_with_nothing_to_do_shows_zero_after_one_that_worked(
        tmp_path, waldur_sim, do_sim, azure_sim):
    waldur = waldur_sim
    waldur.app.reset("empty")
    config = two_offerings(tmp_path, waldur, do_sim, azure_sim)
    order_uuid, _resource = order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "linger-do", W.DO_PLAN_QUOTAS)

    worked = run_pass(ORDER_PASS, config)
    idle = run_pass(ORDER_PASS, config)

    assert_done(waldur, order_uuid)
    droplets = summary(worked.output, "DigitalOcean VM", "order_process")
    assert (droplets["orders"], droplets["done"], droplets["machines_changed"]) == ("1", "1", "1")
    machines = summary(worked.output, "Azure VM", "order_process")
    assert (machines["orders"], machines["done"], machines["machines_changed"]) == ("0", "0", "0")
    # Not a call of the droplet's act or settle counted either: the same line as a pass where
    # neither offering had anything to do.
    assert without_seconds(machines) == without_seconds(summary(idle.output, "Azure VM", "order_process"))
    assert int(machines["api_calls"]) < int(droplets["api_calls"])


def test_a_membership_pass_offering_without_resources_shows_zero_after_one_that_worked(
        tmp_path, waldur_sim, do_sim, azure_sim):
    waldur = waldur_sim
    waldur.app.reset("empty")
    config = two_offerings(tmp_path, waldur, do_sim, azure_sim)
    resource_uuid = uuid.uuid4().hex
    droplet = do_sim.app.seed_droplet("linger-paused", tags=["waldur", "waldur-resource:" + resource_uuid],
                                      status="active")
    waldur.app.seed_resource(W.DO_OFFERING_UUID, "linger-paused", uuid=resource_uuid, backend_id=str(droplet["id"]),
                             limits=dict(W.DO_PLAN_QUOTAS), paused=True)

    run = run_pass(MEMBERSHIP_PASS, config)

    droplets = summary(run.output, "DigitalOcean VM", "membership_sync")
    assert (droplets["resources"], droplets["machines_changed"]) == ("1", "1")
    machines = summary(run.output, "Azure VM", "membership_sync")
    assert (machines["resources"], machines["machines_changed"], machines["metadata_updated"]) == ("0", "0", "0")
    assert int(machines["api_calls"]) < int(droplets["api_calls"])
