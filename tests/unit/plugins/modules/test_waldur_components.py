"""waldur_components: load backend_components into the offering, idempotently."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import waldur_components
from tests.simulators.waldur import presets as P

CONFIG = {
    "cpu": {"measured_unit": "Cores", "accounting_type": "limit", "label": "vCPU", "unit_factor": 1,
            "backend_name": "cores", "limit": 64},
    "gpu": {"measured_unit": "GPU", "accounting_type": "usage", "label": "GPU", "description": "A100 hours",
            "limit_period": "month", "unit_factor": 3600},
    "licence": {"measured_unit": "seat", "accounting_type": "one", "label": "Licence"},
}


def run(sim, capsys, **args):
    args.setdefault("api_url", sim.url)
    args.setdefault("api_token", P.PROVIDER_TOKEN)
    args.setdefault("offering_uuid", P.DO_OFFERING_UUID)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            waldur_components.main()
    return json.loads(capsys.readouterr().out)


def components(sim):
    return {c["type"]: c for c in sim.app.market.offerings[P.DO_OFFERING_UUID]["components"]}


def test_components_are_created_and_updated_then_left_alone(waldur_sim, capsys):
    original_cpu = dict(components(waldur_sim)["cpu"])

    result = run(waldur_sim, capsys, components=CONFIG, _ansible_diff=True)

    actions = {row["type"]: row["action"] for row in result["results"]}
    assert actions == {"cpu": "updated", "gpu": "created", "licence": "created"}
    assert result["results"][0]["changes"] == {"limit_amount": {"before": None, "after": 64},
                                               "name": {"before": original_cpu["name"], "after": "vCPU"}}
    stored = components(waldur_sim)
    assert stored["cpu"]["name"] == "vCPU" and stored["cpu"]["limit_amount"] == 64
    assert stored["cpu"]["uuid"] == original_cpu["uuid"]
    assert stored["cpu"]["limit_period"] == original_cpu["limit_period"]  # none configured: kept
    assert stored["cpu"]["unit_factor"] == original_cpu["unit_factor"]  # unit_factor is never sent
    assert stored["gpu"]["billing_type"] == "usage" and stored["gpu"]["description"] == "A100 hours"
    assert stored["gpu"]["limit_period"] == "month" and stored["gpu"]["unit_factor"] == 1
    assert stored["licence"]["is_prepaid"] is True
    gpu = [diff for diff in result["diff"] if diff["after_header"].endswith("component gpu")]
    assert gpu[0]["before"] == {} and gpu[0]["after"]["name"] == "GPU"  # one headed entry per component
    assert "unit_factor" not in str(result["diff"]) and "backend_name" not in str(result["diff"])

    since = len(waldur_sim.app.calls)
    again = run(waldur_sim, capsys, components=CONFIG)
    assert waldur_sim.app.write_calls(since) == []
    assert again["changed"] is False
    assert {row["action"] for row in again["results"]} == {"unchanged"}


def test_check_mode_writes_nothing(waldur_sim, capsys):
    result = run(waldur_sim, capsys, components=CONFIG, _ansible_check_mode=True)
    assert result["changed"] is True
    assert [row["msg"] for row in result["results"]] == ["would be updated: limit_amount, name", "would be created",
                                                         "would be created"]
    assert waldur_sim.app.write_calls() == []
    assert "gpu" not in components(waldur_sim)


def test_a_refused_component_fails_the_task_after_the_others(waldur_sim, capsys):
    waldur_sim.app.add_fault("offering.create_offering_component", status=400,
                             body={"type": ["Component with type gpu already exists."]})
    result = run(waldur_sim, capsys, components=CONFIG)
    assert result["failed"] is True
    assert "component gpu: create_offering_component failed" in result["msg"]
    assert "HTTP 400" in result["msg"]
    assert components(waldur_sim)["licence"]["name"] == "Licence"


@pytest.mark.parametrize("config, message", [
    ({"cpu": {"measured_unit": "Cores", "accounting_type": "limit"}},
     "components.cpu is missing label (required: measured_unit, accounting_type, label)"),
    ({"cpu": {"measured_unit": "Cores", "accounting_type": "hourly", "label": "CPU"}},
     "components.cpu.accounting_type must be one of usage, limit, one, fixed, few, got 'hourly'"),
    ({"cpu": {"measured_unit": "Cores", "accounting_type": "limit", "label": "CPU", "limit": 1.5}},
     "components.cpu.limit must be a whole number, got 1.5"),
    ({"cpu": {"measured_unit": "Cores", "accounting_type": "limit", "label": "CPU", "limit_period": "weekly"}},
     "components.cpu.limit_period must be one of month, quarterly, annual, total, got 'weekly'"),
])
def test_bad_configuration_names_the_key(waldur_sim, capsys, config, message):
    result = run(waldur_sim, capsys, components=config)
    assert result["failed"] is True and result["msg"] == message
    assert waldur_sim.app.calls == []


def plan_prices(sim, plan_uuid=P.DO_PLAN_UUID):
    return {key: str(value) for key, value in sim.app.market.plans[plan_uuid]["prices"].items()}


def test_every_plan_prices_every_component_then_is_left_alone(waldur_sim, capsys):
    """Components created by load_components get a price in the offering's plans (the
    configured one, else 0); existing prices are kept unless configured."""
    config = dict(CONFIG, cpu=dict(CONFIG["cpu"], price=5))
    before = plan_prices(waldur_sim)

    result = run(waldur_sim, capsys, components=config, _ansible_diff=True)

    assert result["plans"] == [{
        "uuid": P.DO_PLAN_UUID, "name": "Droplet s-1vcpu-1gb", "action": "priced", "changed": True,
        "failed": False, "msg": "priced: cpu 4 -> 5, gpu none -> 0, licence none -> 0", "next_period": False,
        "changes": {"cpu": {"before": 4.0, "after": 5.0}, "gpu": {"before": None, "after": 0.0},
                    "licence": {"before": None, "after": 0.0}}}]
    prices = plan_prices(waldur_sim)
    assert prices["cpu"] == "5" and prices["gpu"] == "0" and prices["licence"] == "0"
    assert prices["ram"] == before["ram"] and prices["disk"] == before["disk"]
    priced = [diff for diff in result["diff"] if diff["before_header"].endswith("(%s) prices" % P.DO_PLAN_UUID)]
    assert priced[0]["before"]["cpu"] == 4.0 and priced[0]["after"]["gpu"] == 0.0
    assert len(waldur_sim.app.calls_of("plans.update_prices")) == 1
    assert len(waldur_sim.app.calls_of("offering.get")) == 1  # components and plans in one read
    # the plan to price, for its future prices, and after the write, for where Waldur put them
    assert len(waldur_sim.app.calls_of("plans.get")) == 2

    since = len(waldur_sim.app.calls)
    again = run(waldur_sim, capsys, components=config)
    assert waldur_sim.app.write_calls(since) == []
    assert again["changed"] is False and again["plans"][0]["action"] == "unchanged"


def test_a_plan_with_resources_takes_future_prices_and_a_second_run_writes_nothing(waldur_sim, capsys):
    """Waldur 7.0.7 writes update_prices on a plan that has resources as future prices (prices
    stay): the plan's future prices are compared, the result says the new price applies from the
    next period, and a second run converges."""
    app = waldur_sim.app
    app.set_quirks(future_prices=True)
    app.seed_resource(P.DO_OFFERING_UUID, "vm", plan_uuid=P.DO_PLAN_UUID)
    config = {"disk": {"measured_unit": "MiB", "accounting_type": "limit", "label": "Disk", "price": 0.0003}}

    first = run(waldur_sim, capsys, components=config)

    [plan] = first["plans"]
    assert (plan["action"], plan["next_period"]) == ("priced", True)
    assert plan["msg"] == ("priced from the next billing period: disk 0.0001 -> 0.0003 (the plan has resources: "
                           "Waldur keeps the current prices until then)")
    stored = app.market.plans[P.DO_PLAN_UUID]
    assert str(stored["prices"]["disk"]) == "0.0001" and str(stored["future_prices"]["disk"]) == "0.0003"

    since = len(app.calls)
    again = run(waldur_sim, capsys, components=config)
    assert app.write_calls(since) == []
    assert again["changed"] is False and again["plans"][0]["action"] == "unchanged"


def test_an_update_order_on_a_loaded_component_can_be_finished(waldur_sim, capsys):
    """The failure it prevents: Waldur answers 500 to set_state_done of an Update whose limits
    name a component without a plan price."""
    app = waldur_sim.app
    run(waldur_sim, capsys, components=CONFIG)
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1", limits={"cpu": 1})
    order = app.seed_order(P.DO_OFFERING_UUID, type="Update", state="executing", resource_uuid=resource["uuid"],
                           limits={"cpu": 2, "gpu": 1})
    import requests

    answer = requests.post("%s/api/marketplace-orders/%s/set_state_done/" % (waldur_sim.url, order["uuid"]),
                           headers={"Authorization": "Token " + P.PROVIDER_TOKEN}, timeout=10)
    assert answer.status_code == 200, answer.text
    assert app.order(order["uuid"])["state"] == "done"


def test_check_mode_prices_nothing_and_a_refused_price_fails_naming_the_plan(waldur_sim, capsys):
    checked = run(waldur_sim, capsys, components=CONFIG, _ansible_check_mode=True)
    assert checked["plans"][0]["msg"] == "would be priced: gpu none -> 0, licence none -> 0"
    assert waldur_sim.app.write_calls() == []

    waldur_sim.app.add_fault("plans.update_prices", status=403,
                             body={"detail": "You do not have permission to perform this action."})
    result = run(waldur_sim, capsys, components=CONFIG)
    assert result["failed"] is True
    assert result["msg"].startswith("plan Droplet s-1vcpu-1gb (%s): update_prices failed: " % P.DO_PLAN_UUID)
    assert "HTTP 403" in result["msg"]


def test_a_negative_price_names_the_key(waldur_sim, capsys):
    config = {"cpu": dict(CONFIG["cpu"], price=-1)}
    result = run(waldur_sim, capsys, components=config)
    assert result["msg"] == "components.cpu.price must be a number of 0 or more, got -1"
    assert waldur_sim.app.calls == []
