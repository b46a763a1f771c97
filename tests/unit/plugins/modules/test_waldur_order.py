"""waldur_order: the consumer's order flow (submit, wait, get the resource)."""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import waldur_order
from tests.simulators.waldur import presets as P


def run(sim, capsys, **args):
    args.setdefault("api_url", sim.url + "/api/")
    args.setdefault("api_token", P.CONSUMER_TOKEN)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            waldur_order.main()
    return json.loads(capsys.readouterr().out)


def orders_named(sim, name):
    return [order for order in sim.app.market.orders.values() if order["attributes"].get("name") == name]


def provider_settles(sim, name, outcome):
    """The provider's side, in the background: approve the named order, then set it done or erred."""
    def work():
        headers = {"Authorization": "Token " + P.PROVIDER_TOKEN}
        deadline = time.monotonic() + 30
        found = orders_named(sim, name)
        while not found and time.monotonic() < deadline:
            time.sleep(0.02)
            found = orders_named(sim, name)
        order_url = "%s/api/marketplace-orders/%s/" % (sim.url, found[0]["uuid"])
        time.sleep(0.2)  # let the module poll at least once while the order is pending
        requests.post(order_url + "approve_by_provider/", json={}, headers=headers, timeout=5).raise_for_status()
        if outcome == "done":
            requests.post(order_url + "set_state_done/", headers=headers, timeout=5).raise_for_status()
        else:
            requests.post(order_url + "set_state_erred/", json={"error_message": outcome, "error_traceback": ""},
                          headers=headers, timeout=5).raise_for_status()
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_present_without_wait_submits_a_create_order(waldur_sim, capsys):
    result = run(waldur_sim, capsys, offering=P.DO_OFFERING_UUID, project=P.PROJECT_UUID, plan=P.DO_PLAN_UUID,
                 attributes={"name": "web-1", "region": "ams3"}, limits={"cpu": 1, "ram": 1024, "disk": 25600},
                 wait=False)

    assert result["changed"] is True
    [order] = orders_named(waldur_sim, "web-1")
    assert result["order_uuid"] == order["uuid"] and result["order"]["state"] == "pending-provider"
    assert order["type"] == "Create" and order["limits"] == {"cpu": 1, "ram": 1024, "disk": 25600}
    base = waldur_sim.url + "/api/"
    assert result["request"] == {
        "offering": base + "marketplace-public-offerings/%s/" % P.DO_OFFERING_UUID,
        "project": base + "projects/%s/" % P.PROJECT_UUID,
        "plan": base + "marketplace-public-offerings/%s/plans/%s/" % (P.DO_OFFERING_UUID, P.DO_PLAN_UUID),
        "attributes": {"name": "web-1", "region": "ams3"},
        "limits": {"cpu": 1, "ram": 1024, "disk": 25600},
        "accepting_terms_of_service": True,
    }
    assert result["resource"] is None


def test_urls_of_other_views_become_the_public_ones_waldur_requires(waldur_sim, capsys):
    base = waldur_sim.url + "/api/"
    result = run(waldur_sim, capsys, wait=False, attributes={"name": "url-1"},
                 offering=base + "marketplace-provider-offerings/%s/" % P.DO_OFFERING_UUID,
                 project=base + "projects/c0000000-0000-0000-0000-000000000001/",
                 plan=base + "marketplace-plans/%s/" % P.DO_PLAN_UUID)
    assert result["changed"] is True and orders_named(waldur_sim, "url-1")
    assert result["request"]["plan"].endswith("marketplace-public-offerings/%s/plans/%s/"
                                              % (P.DO_OFFERING_UUID, P.DO_PLAN_UUID))


def test_check_mode_returns_the_body_and_submits_nothing(waldur_sim, capsys):
    result = run(waldur_sim, capsys, offering=P.DO_OFFERING_UUID, project=P.PROJECT_UUID,
                 attributes={"name": "dry-1"}, _ansible_check_mode=True)
    assert result["changed"] is True and result["request"]["attributes"] == {"name": "dry-1"}
    assert waldur_sim.app.calls == [] and not orders_named(waldur_sim, "dry-1")


def test_wait_returns_the_done_order_and_its_resource(waldur_sim, capsys):
    worker = provider_settles(waldur_sim, "waited-1", "done")
    result = run(waldur_sim, capsys, offering=P.DO_OFFERING_UUID, project=P.PROJECT_UUID, plan=P.DO_PLAN_UUID,
                 attributes={"name": "waited-1"}, interval=0.1)
    worker.join(5)

    assert result["order"]["state"] == "done"
    assert result["resource"]["name"] == "waited-1" and result["resource"]["state"] == "OK"
    assert result["resource"]["uuid"] == result["order"]["marketplace_resource_uuid"]
    assert len(waldur_sim.app.calls_of("orders.get")) >= 2  # it polled


def test_an_erred_order_fails_with_its_error_message(waldur_sim, capsys):
    worker = provider_settles(waldur_sim, "doomed-1", "Region ams9 is not available")
    result = run(waldur_sim, capsys, offering=P.DO_OFFERING_UUID, project=P.PROJECT_UUID, plan=P.DO_PLAN_UUID,
                 attributes={"name": "doomed-1"}, interval=0.1)
    worker.join(5)

    assert result["failed"] is True
    assert result["msg"] == "order %s is erred: Region ams9 is not available" % result["order_uuid"]


def test_timing_out_says_the_order_goes_on(waldur_sim, capsys):
    result = run(waldur_sim, capsys, offering=P.DO_OFFERING_UUID, project=P.PROJECT_UUID, plan=P.DO_PLAN_UUID,
                 attributes={"name": "slow-1"}, wait_timeout=1, interval=0.2)
    assert result["failed"] is True
    assert "is still pending-provider after 1 seconds; it was not cancelled" in result["msg"]
    [order] = orders_named(waldur_sim, "slow-1")
    assert order["state"] == "pending-provider"


@pytest.fixture
def running_vm(waldur_sim):
    resource = waldur_sim.app.seed_resource(P.DO_OFFERING_UUID, "vm-7", backend_id="707",
                                            limits={"cpu": 1, "ram": 1024, "disk": 25600})
    waldur_sim.app.calls.clear()
    return resource["uuid"]


def test_updated_submits_only_when_limits_change(waldur_sim, capsys, running_vm):
    same = run(waldur_sim, capsys, state="updated", resource=running_vm, limits={"cpu": 1, "ram": 1024, "disk": 25600})
    assert same["changed"] is False and same["msg"] == "the resource already has these limits"
    assert waldur_sim.app.write_calls() == []

    bigger = run(waldur_sim, capsys, state="updated", resource=running_vm, wait=False,
                 limits={"cpu": 2, "ram": 2048, "disk": 25600})
    order = waldur_sim.app.order(bigger["order_uuid"])
    assert order["type"] == "Update" and order["limits"] == {"cpu": 2, "ram": 2048, "disk": 25600}


def test_absent_terminates_and_is_idempotent(waldur_sim, capsys, running_vm):
    result = run(waldur_sim, capsys, state="absent", resource_uuid=running_vm, wait=False)
    assert waldur_sim.app.order(result["order_uuid"])["type"] == "Terminate"

    gone = run(waldur_sim, capsys, state="absent", resource="f" * 32)
    assert gone["changed"] is False and "does not exist" in gone["msg"]


def test_a_wrong_token_fails_clearly_without_showing_it(waldur_sim, capsys):
    secret = "wrong-token-5d1e"
    result = run(waldur_sim, capsys, api_token=secret, offering=P.DO_OFFERING_UUID, project=P.PROJECT_UUID)
    assert result["failed"] is True
    assert result["msg"] == ("Waldur POST /api/marketplace-orders/ failed (HTTP 401): Invalid token. "
                             "(check api_token)")
    assert secret not in json.dumps(result)


def test_required_options_per_state(waldur_sim, capsys):
    result = run(waldur_sim, capsys, state="updated", resource=P.DO_RESOURCE_UUID)
    assert result["failed"] is True and "limits" in result["msg"]
