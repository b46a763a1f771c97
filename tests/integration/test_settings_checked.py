"""A provider's mistake in the configuration fails the offering before any order is approved,
naming the key to fix, in the order pass, in health and in diagnostics (issue 24)."""

from __future__ import annotations

import pytest
import yaml

from tests.helpers import REPO, run_playbook
from tests.integration.passes import ORDER_PASS, order_form_with, write_config
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

HEALTH = REPO / "playbooks" / "health.yml"
DIAGNOSTICS = REPO / "playbooks" / "diagnostics.yml"


def run(playbook, config, check=False):
    return run_playbook(playbook, extra_vars={"agent_pass_config": str(config)}, check=check)


def assert_refused_everywhere(config, problem, waldur, do):
    """The order pass, health and diagnostics all fail naming ``problem``; the order stays pending
    and nothing is written anywhere. Returns the order pass's run."""
    order_pass = run(ORDER_PASS, config)
    for played in (order_pass, run(HEALTH, config), run(DIAGNOSTICS, config)):
        assert played.rc != 0 and problem in played.output, played.output[-3000:]
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"
    assert waldur.app.write_calls() == [] and do.app.write_calls() == []
    return order_pass


def test_a_misspelt_setting_leaves_the_order_pending_and_nothing_green(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do, default_region=None, default_regoin="ams3")
    problem = ("offerings[0].backend_settings.default_regoin: unknown digitalocean setting; did you mean "
               "default_region? (as written it would be ignored)")

    # before: a warning, a green health and diagnostics, and the customer's order erred
    assert_refused_everywhere(config, problem, waldur, do)


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

    # before: the order was approved and then erred "DigitalOcean droplet region is not specified"
    order_pass = assert_refused_everywhere(config, gap, waldur, do)
    assert "cannot build a machine" in order_pass.output

    # The evidence is the order form: once it has a region field, the offering is ready again.
    order_form_with(waldur, W.DO_OFFERING_UUID, "region")
    health = run(HEALTH, config)
    assert health.rc == 0 and gap not in health.output, health.output[-3000:]
