"""A provider's mistake in the configuration fails the offering before any order is approved,
naming the key to fix, in the order pass, in health and in diagnostics (issue 24)."""

from __future__ import annotations

import pytest
import yaml

from tests.helpers import REPO, run_playbook
from tests.integration.passes import ORDER_PASS, write_config
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

HEALTH = REPO / "playbooks" / "health.yml"
DIAGNOSTICS = REPO / "playbooks" / "diagnostics.yml"


def run(playbook, config, check=False):
    return run_playbook(playbook, extra_vars={"agent_pass_config": str(config)}, check=check)


def test_a_misspelt_setting_leaves_the_order_pending_and_nothing_green(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do, default_region=None, default_regoin="ams3")
    problem = ("offerings[0].backend_settings.default_regoin: unknown digitalocean setting; did you mean "
               "default_region? (as written it would be ignored)")

    order_pass = run(ORDER_PASS, config)
    health = run(HEALTH, config)
    diagnostics = run(DIAGNOSTICS, config)

    for played in (order_pass, health, diagnostics):
        assert played.rc != 0 and problem in played.output, played.output[-3000:]
    # before: a warning, a green health and diagnostics, and the customer's order erred
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"
    assert waldur.app.write_calls() == [] and do.app.write_calls() == []


def test_a_waldur_api_url_of_another_service_is_named_not_the_offering(tmp_path, waldur_sim, do_sim):
    """The URL reaches a service that answers 404 for everything of Waldur's (here DigitalOcean's API)."""
    config = write_config(tmp_path, waldur_sim, do_sim)
    data = yaml.safe_load(config.read_text())
    data["offerings"][0]["waldur_api_url"] = do_sim.url + "/api/"
    config.write_text(yaml.safe_dump(data))

    health = run(HEALTH, config)
    order_pass = run(ORDER_PASS, config)

    wrong = "waldur_api_url %s/api/ does not answer as the Waldur API" % do_sim.url
    assert health.rc != 0 and wrong + ": GET /api/users/me/ answered HTTP 404" in health.output, health.output[-3000:]
    assert order_pass.rc != 0 and wrong in order_pass.output, order_pass.output[-3000:]
    assert "check waldur_offering_uuid" not in order_pass.output
    assert waldur_sim.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"
    assert do_sim.app.write_calls() == []


def test_an_offering_that_cannot_build_a_machine_fails_before_approving(tmp_path, waldur_sim, do_sim):
    """No default_region, and the offering's order form in Waldur has no region field: no Create
    order could be built, which is the provider's settings, not the customer's order."""
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do, default_region=None)
    gap = ("backend_settings.default_region is not set and the offering's order form in Waldur has no region "
           "field (backend_region_id or region)")

    order_pass = run(ORDER_PASS, config)
    health = run(HEALTH, config)
    diagnostics = run(DIAGNOSTICS, config)

    for played in (order_pass, health, diagnostics):
        assert played.rc != 0 and gap in played.output, played.output[-3000:]
    assert "cannot build a machine" in order_pass.output
    # before: the order was approved and then erred "DigitalOcean droplet region is not specified"
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"
    assert waldur.app.write_calls() == [] and do.app.write_calls() == []

    # The evidence is the order form: once it has a region field, the offering is ready again.
    waldur.app.set_order_form(W.DO_OFFERING_UUID, {"order": ["region"], "options": {
        "region": {"type": "select_string", "label": "Region", "required": True, "choices": ["ams3", "fra1"]}}})
    health = run(HEALTH, config)
    assert health.rc == 0 and gap not in health.output, health.output[-3000:]
