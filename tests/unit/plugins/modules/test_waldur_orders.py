"""waldur_orders: claim and settle, run in-process against the Waldur simulator."""

from __future__ import annotations

import datetime
import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import ProvenObject
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.claim import Claim
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.settle import Settle
from ansible_collections.waldur.site_agent.plugins.modules import waldur_orders
from tests.simulators.waldur import presets as P


def run(sim, capsys, **args):
    args.setdefault("api_url", sim.url)
    args.setdefault("api_token", P.PROVIDER_TOKEN)
    args.setdefault("offering_uuid", P.DO_OFFERING_UUID)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            waldur_orders.main()
    return json.loads(capsys.readouterr().out)


def state_of(sim, order_uuid):
    return sim.app.order(order_uuid)["state"]


@pytest.fixture
def offering_with_orders(waldur_sim):
    """The default pending Create plus an executing Update without limits (plan quotas apply),
    a pending Terminate and a done Create, all on the DigitalOcean offering."""
    app = waldur_sim.app
    running = app.seed_resource(P.DO_OFFERING_UUID, "db-1", backend_id="401", limits={"cpu": 1})
    doomed = app.seed_resource(P.DO_OFFERING_UUID, "old-1", backend_id="402")
    update = app.seed_order(P.DO_OFFERING_UUID, type="Update", state="executing", resource_uuid=running["uuid"])
    terminate = app.seed_order(P.DO_OFFERING_UUID, type="Terminate", resource_uuid=doomed["uuid"])
    done = app.seed_order(P.DO_OFFERING_UUID, state="done")
    app.calls.clear()
    return {"update": update["uuid"], "terminate": terminate["uuid"], "done": done["uuid"],
            "running": running["uuid"]}


def test_claim_approves_exactly_the_pending_orders_of_the_offering(waldur_sim, capsys, offering_with_orders):
    result = run(waldur_sim, capsys, state="claimed")

    assert sorted(result["approved"]) == sorted([P.DO_ORDER_UUID, offering_with_orders["terminate"]])
    assert state_of(waldur_sim, P.DO_ORDER_UUID) == "executing"
    assert state_of(waldur_sim, offering_with_orders["terminate"]) == "executing"
    assert state_of(waldur_sim, P.AZURE_ORDER_UUID) == "pending-provider"  # another offering
    assert state_of(waldur_sim, offering_with_orders["done"]) == "done"
    approvals = waldur_sim.app.calls_of("orders.approve_by_provider")
    assert len(approvals) == 2
    assert result["changed"] is True

    orders = {order["uuid"]: order for order in result["orders"]}
    assert set(orders) == {P.DO_ORDER_UUID, offering_with_orders["update"], offering_with_orders["terminate"]}
    assert all(order["state"] == "executing" for order in orders.values())
    create = orders[P.DO_ORDER_UUID]
    assert create["marketplace_resource_uuid"] == P.DO_RESOURCE_UUID
    assert create["resource"]["uuid"] == P.DO_RESOURCE_UUID
    assert create["resource"]["attributes"] == {"name": "do-vm-1"}
    update = orders[offering_with_orders["update"]]
    assert update["target_limits"] == P.DO_PLAN_QUOTAS  # the order has no limits: the plan's quotas
    assert update["resource"]["backend_id"] == "401"
    assert "target_limits" not in create
    # a Create is claimed, so the provider's keys come along, every one of them
    assert len(result["ssh_keys"]) == len(P.SSH_KEYS)
    first = result["ssh_keys"][0]
    assert first == {"uuid": P.SSH_KEYS[0]["uuid"], "name": "ops-alice", "public_key": P.SSH_KEYS[0]["public_key"],
                     "fingerprint": P.SSH_KEYS[0]["fingerprint_md5"]}
    assert result["api_calls"]["writes"] == 2


def test_claim_in_check_mode_approves_nothing(waldur_sim, capsys, offering_with_orders):
    result = run(waldur_sim, capsys, state="claimed", _ansible_check_mode=True)

    assert waldur_sim.app.write_calls() == []
    assert result["approved"] == [] and result["changed"] is False
    states = {order["uuid"]: order["state"] for order in result["orders"]}
    assert states[P.DO_ORDER_UUID] == "pending-provider"
    assert states[offering_with_orders["update"]] == "executing"
    assert state_of(waldur_sim, P.DO_ORDER_UUID) == "pending-provider"


def test_claim_reads_no_keys_when_nothing_is_created(waldur_sim, capsys):
    app = waldur_sim.app
    app.reset("empty")
    resource = app.seed_resource(P.DO_OFFERING_UUID, "web-1", backend_id="77", limits={"cpu": 1})
    order = app.seed_order(P.DO_OFFERING_UUID, type="Update", resource_uuid=resource["uuid"],
                           limits={"cpu": 2, "ram": 2048, "disk": 25600})

    result = run(waldur_sim, capsys, state="claimed")

    assert result["ssh_keys"] == []
    assert app.calls_of("service_provider.keys") == [] and app.calls_of("plans.get") == []
    assert result["orders"][0]["target_limits"] == {"cpu": 2, "ram": 2048, "disk": 25600}
    assert result["approved"] == [order["uuid"]]


def test_unreadable_keys_hold_back_only_the_creates(waldur_sim, capsys, offering_with_orders):
    waldur_sim.app.add_fault("service_provider.keys", status=403, times=-1)

    result = run(waldur_sim, capsys, state="claimed")

    assert [error["uuid"] for error in result["errors"]] == [P.DO_ORDER_UUID]
    assert "SSH keys could not be read" in result["errors"][0]["msg"]
    assert "HTTP 403" in result["errors"][0]["msg"]
    assert state_of(waldur_sim, P.DO_ORDER_UUID) == "pending-provider"  # left for the next pass
    assert state_of(waldur_sim, offering_with_orders["terminate"]) == "executing"
    assert P.DO_ORDER_UUID not in [order["uuid"] for order in result["orders"]]


def test_claim_only_the_named_orders(waldur_sim, capsys, offering_with_orders):
    dashed = "-".join((offering_with_orders["terminate"][:8], offering_with_orders["terminate"][8:12],
                       offering_with_orders["terminate"][12:16], offering_with_orders["terminate"][16:20],
                       offering_with_orders["terminate"][20:]))
    result = run(waldur_sim, capsys, state="claimed",
                 order_uuids=[dashed.upper(), offering_with_orders["done"], P.AZURE_ORDER_UUID])

    assert [order["uuid"] for order in result["orders"]] == [offering_with_orders["terminate"]]
    skipped = {entry["uuid"]: entry["msg"] for entry in result["skipped_orders"]}
    assert "not pending-provider or executing" in skipped[offering_with_orders["done"]]
    assert "belongs to offering %s" % P.AZURE_OFFERING_UUID in skipped[P.AZURE_ORDER_UUID]
    assert state_of(waldur_sim, P.DO_ORDER_UUID) == "pending-provider"  # not named, not touched
    assert waldur_sim.app.calls_of("orders.list") == []


def test_claim_the_named_orders_and_every_other_pending_one_with_pending(waldur_sim, capsys, offering_with_orders):
    result = run(waldur_sim, capsys, state="claimed", with_pending=True,
                 order_uuids=[offering_with_orders["terminate"], offering_with_orders["done"]])

    claimed = sorted(order["uuid"] for order in result["orders"])
    # the named one, and the pending Create and the executing Update of the offering
    assert claimed == sorted([offering_with_orders["terminate"], P.DO_ORDER_UUID, offering_with_orders["update"]])
    skipped = {entry["uuid"]: entry["msg"] for entry in result["skipped_orders"]}
    assert "not pending-provider or executing" in skipped[offering_with_orders["done"]]
    assert waldur_sim.app.calls_of("orders.list")  # the offering's orders listed, beside the named reads


class StubClient:
    """Waldur answering approve_by_provider with 409 (someone approved or cancelled it meanwhile)."""

    def __init__(self, state_after):
        self.state_after = state_after
        self.posts = []

    def post(self, path, json=None, params=None, idempotent=True):
        self.posts.append(path)
        raise WaldurApiError(409, "POST", "/api/" + path, "Valid states for operation: pending-provider.")

    def get(self, path, params=None, shape=None):  # noqa: ARG002 (the read layer's own)
        # the read layer's answers are proof (core/evidence.py): so are the stub's
        if path.startswith("marketplace-orders/"):
            # resource_uuid: the plugin object Waldur's processor made (its work is done)
            return ProvenObject({"uuid": "1" * 32, "state": self.state_after, "type": "Create",
                                 "marketplace_resource_uuid": "2" * 32, "resource_uuid": "3" * 32}, "stub")
        return ProvenObject({"uuid": "2" * 32, "name": "vm", "backend_id": ""}, "stub")


class StubModule:
    check_mode = False


@pytest.mark.parametrize("state_after, claimed", [("executing", True), ("canceled", False)])
def test_a_409_on_approval_is_re_read_not_an_error(state_after, claimed):
    client = StubClient(state_after)
    claim = Claim(StubModule(), client, "d" * 32)
    order = {"uuid": "1" * 32, "type": "Create", "state": "pending-provider", "limits": {}, "plan_uuid": None,
             "marketplace_resource_uuid": "2" * 32}

    result = claim.claim_one(dict(order, reread=claim.approve(order)), {})

    assert client.posts == ["marketplace-orders/%s/approve_by_provider/" % ("1" * 32)]
    assert claim.approved == []
    if claimed:
        assert result["order"]["state"] == "executing"
        assert result["order"]["resource"]["uuid"] == "2" * 32
    else:
        assert result["skip"]["state"] == "canceled"


@pytest.fixture
def executing_create(waldur_sim):
    app = waldur_sim.app
    app.reset("empty")
    order = app.seed_order(P.DO_OFFERING_UUID, state="executing", attributes={"name": "web-9"})
    app.calls.clear()
    return order


def test_settle_records_the_backend_id_and_sets_done(waldur_sim, capsys, executing_create):
    outcome = {"order_uuid": executing_create["uuid"], "resource_uuid": executing_create["marketplace_resource_uuid"],
               "failed": False, "changed": True, "msg": "created", "backend_id": "412345678",
               "backend_metadata": {"status": "active", "region": "ams3"}, "action": "created"}

    result = run(waldur_sim, capsys, state="settled", outcomes=[outcome])

    assert result["done"] == 1 and result["erred"] == 0 and result["changed"] is True
    assert result["results"][0]["actions"] == ["set_backend_id", "set_backend_metadata", "set_state_done"]
    assert result["results"][0]["state"] == "done"
    assert state_of(waldur_sim, executing_create["uuid"]) == "done"
    resource = waldur_sim.app.resource(executing_create["marketplace_resource_uuid"])
    assert resource["backend_id"] == "412345678" and resource["state"] == "OK"
    assert resource["backend_metadata"] == {"status": "active", "region": "ams3"}

    since = len(waldur_sim.app.calls)
    again = run(waldur_sim, capsys, state="settled", outcomes=[outcome])
    assert waldur_sim.app.write_calls(since) == []
    assert again["changed"] is False and again["counts"]["skipped"] == 1 and "skipped" not in again and again["done"] == 0


def test_settle_errs_a_failed_order_with_its_message(waldur_sim, capsys, executing_create):
    outcome = {"order_uuid": executing_create["uuid"], "failed": True,
               "msg": "DigitalOcean droplet region is not specified",
               "exception": "Traceback (most recent call last):\n" + "  frame\n" * 2000 + "ItemError: boom"}

    result = run(waldur_sim, capsys, state="settled", outcomes=[outcome])

    assert result["erred"] == 1 and result["results"][0]["actions"] == ["set_state_erred"]
    order = waldur_sim.app.order(executing_create["uuid"])
    assert order["state"] == "erred"
    assert order["error_message"] == "DigitalOcean droplet region is not specified"
    assert 0 < len(order["error_traceback"]) <= 2100 and order["error_traceback"].endswith("ItemError: boom")

    since = len(waldur_sim.app.calls)
    again = run(waldur_sim, capsys, state="settled", outcomes=[outcome])
    assert waldur_sim.app.write_calls(since) == []
    assert again["results"][0]["msg"] == "order is already erred; nothing written"


def test_settle_in_check_mode_writes_nothing_and_says_what_it_would_do(waldur_sim, capsys, executing_create):
    other = waldur_sim.app.seed_order(P.DO_OFFERING_UUID, state="executing")
    outcomes = [{"order_uuid": executing_create["uuid"], "failed": False, "backend_id": "9"},
                {"order_uuid": other["uuid"], "failed": True, "msg": "no image"}]

    result = run(waldur_sim, capsys, state="settled", outcomes=outcomes, _ansible_check_mode=True)

    assert waldur_sim.app.write_calls() == []
    assert result["done"] == 1 and result["erred"] == 1 and result["changed"] is True
    assert result["results"][0]["actions"] == ["set_backend_id", "set_state_done"]
    assert result["results"][0]["msg"].startswith("would set done")
    assert result["results"][1]["msg"] == "would set erred: no image"
    assert state_of(waldur_sim, executing_create["uuid"]) == "executing"


def test_check_mode_settle_of_a_pending_order_says_it_would_approve_and_set_done(waldur_sim, capsys):
    """A --check pass does not approve, so settle sees pending-provider orders; it reports what
    the real pass would do instead of "not executing"."""
    outcomes = [{"order_uuid": P.DO_ORDER_UUID, "failed": False, "backend_id": "9"}]

    checked = run(waldur_sim, capsys, state="settled", outcomes=outcomes, _ansible_check_mode=True)
    real = run(waldur_sim, capsys, state="settled", outcomes=outcomes)

    assert checked["results"][0]["msg"].startswith("would approve and set done")
    assert checked["done"] == 1
    assert real["results"][0]["msg"] == "order is pending-provider, not executing; not set done"
    assert state_of(waldur_sim, P.DO_ORDER_UUID) == "pending-provider"


def test_settle_names_the_bad_outcome(waldur_sim, capsys):
    outcomes = [{"order_uuid": P.DO_ORDER_UUID}] * 1 + [{"order_uuid": "e%031d" % i} for i in (1, 2)] + \
        [{"order_uuid": "not-a-uuid", "failed": False}]
    with patch_module_args(dict(api_url=waldur_sim.url, api_token=P.PROVIDER_TOKEN, offering_uuid=P.DO_OFFERING_UUID,
                                state="settled", outcomes=outcomes)):
        with pytest.raises(SystemExit) as exit_info:
            waldur_orders.main()
    result = json.loads(capsys.readouterr().out)
    assert exit_info.value.code == 1
    assert result["msg"] == ("outcomes[3].order_uuid must be a UUID (32 hex digits, dashes optional), "
                             "got 'not-a-uuid'")
    assert waldur_sim.app.calls == []


def test_settle_requires_outcomes(waldur_sim, capsys):
    result = run(waldur_sim, capsys, state="settled")
    assert result["failed"] is True and result["msg"].startswith("outcomes (or outcomes_packed) is required when state is settled")


def test_one_failing_order_does_not_stop_the_others(waldur_sim, capsys, executing_create):
    foreign = waldur_sim.app.seed_order(P.AZURE_OFFERING_UUID, state="executing")
    outcomes = [{"order_uuid": foreign["uuid"], "failed": False, "backend_id": "x"},
                {"order_uuid": executing_create["uuid"], "failed": False, "backend_id": "500"}]

    result = run(waldur_sim, capsys, state="settled", outcomes=outcomes)

    assert "failed" not in result or result["failed"] is False
    assert result["results"][0]["failed"] is True
    assert "belongs to offering %s" % P.AZURE_OFFERING_UUID in result["results"][0]["msg"]
    assert result["results"][1]["state"] == "done" and result["unsettled"] == 1
    assert state_of(waldur_sim, foreign["uuid"]) == "executing"

    strict = run(waldur_sim, capsys, state="settled", outcomes=outcomes[:1], fail_on_item_error=True)
    assert strict["failed"] is True and "1 of 1 order(s) could not be settled" in strict["msg"]


def test_waldur_unavailable_never_errs_an_order(waldur_sim, capsys, executing_create):
    waldur_sim.app.add_fault("orders.set_state_done", status=503, times=-1)

    result = run(waldur_sim, capsys, state="settled", max_retry_seconds=0.3,
                 outcomes=[{"order_uuid": executing_create["uuid"], "failed": False}])

    entry = result["results"][0]
    assert (entry["outcome"], entry["failed"]) == ("retry", False)
    assert "left as it is for the next pass" in entry["msg"] and "HTTP 503" in entry["msg"]
    assert result["retry"] == 1 and result["counts"]["retry"] == 1 and result["unsettled"] == 0
    assert state_of(waldur_sim, executing_create["uuid"]) == "executing"
    assert waldur_sim.app.calls_of("orders.set_state_erred") == []


def test_a_refused_backend_id_leaves_the_order_for_the_next_pass(waldur_sim, capsys, executing_create):
    """The machine exists, so the order is not erred: the next pass adopts it by its tag and
    tries again."""
    waldur_sim.app.add_fault("resources.set_backend_id", status=400, body={"backend_id": ["Too long."]})
    outcome = {"order_uuid": executing_create["uuid"], "failed": False, "backend_id": "1" * 300,
               "resource_name": "web-9"}

    result = run(waldur_sim, capsys, state="settled", outcomes=[outcome])

    entry = result["results"][0]
    assert (entry["outcome"], entry["state"], entry["resource_name"]) == ("retry", "executing", "web-9")
    assert entry["msg"].startswith("left executing for the next pass: Waldur refused to record backend id 111")
    assert "backend_id: Too long." in entry["msg"]
    assert state_of(waldur_sim, executing_create["uuid"]) == "executing"
    assert waldur_sim.app.calls_of("orders.set_state_done") == []
    assert result["retry"] == 1 and result["erred"] == 0


def test_an_order_retried_past_retry_max_age_is_erred_naming_what_exists(waldur_sim, capsys, executing_create):
    waldur_sim.app.market.orders[executing_create["uuid"]]["created"] -= datetime.timedelta(hours=30)
    outcome = {"order_uuid": executing_create["uuid"], "failed": True, "retry": True,
               "msg": "DigitalOcean server error after 6 attempts (503 busy): GET /v2/droplets/77",
               "backend_id": "77", "cloud": "droplet 77 web-9 (active)"}

    result = run(waldur_sim, capsys, state="settled", outcomes=[outcome], retry_max_age=86400)

    order = waldur_sim.app.order(executing_create["uuid"])
    assert order["state"] == "erred" and result["erred"] == 1
    assert order["error_message"] == (
        "retried for 30 hours since the order was placed (retry_max_age 24 hours): DigitalOcean server error "
        "after 6 attempts (503 busy): GET /v2/droplets/77; in the cloud: droplet 77 web-9 (active)")
    # the Erred resource names the machine, so terminating it deletes the droplet
    resource = waldur_sim.app.resource(executing_create["marketplace_resource_uuid"])
    assert (resource["state"], resource["backend_id"]) == ("Erred", "77")
    assert result["results"][0]["actions"] == ["set_backend_id", "set_state_erred"]


def test_a_retry_within_retry_max_age_records_the_machine_and_leaves_the_order(waldur_sim, capsys,
                                                                               executing_create):
    outcome = {"order_uuid": executing_create["uuid"], "failed": True, "retry": True,
               "msg": "not finished within the deadline of 900 seconds", "backend_id": "77"}

    result = run(waldur_sim, capsys, state="settled", outcomes=[outcome])

    assert result["results"][0]["msg"] == ("left executing for the next pass: not finished within the deadline "
                                           "of 900 seconds; backend id 77 recorded")
    assert state_of(waldur_sim, executing_create["uuid"]) == "executing"
    assert waldur_sim.app.resource(executing_create["marketplace_resource_uuid"])["backend_id"] == "77"
    assert waldur_sim.app.calls_of("orders.set_state_erred") == []


def test_a_machine_built_for_an_order_waldur_erred_meanwhile_is_recorded_on_its_resource(
        waldur_sim, capsys, executing_create):
    waldur_sim.app.market.set_state_erred(waldur_sim.app.market.orders[executing_create["uuid"]], "'name'", "")

    result = run(waldur_sim, capsys, state="settled",
                 outcomes=[{"order_uuid": executing_create["uuid"], "failed": False, "backend_id": "78"}])

    entry = result["results"][0]
    # a machine exists behind a resource Waldur erred: they disagree, and the result says how
    assert (entry["outcome"], entry["actions"], entry["failed"]) == ("diverged", ["set_backend_id"], True)
    assert entry["msg"] == ("Waldur erred the order after the backend acted (Waldur: 'name'): machine 78; Waldur "
                            "keeps resource web-9 Erred and backend id 78; backend id 78 recorded")
    assert (result["counts"]["diverged"], result["diverged"]) == (1, 1)
    assert waldur_sim.app.resource(executing_create["marketplace_resource_uuid"])["backend_id"] == "78"


def test_metadata_is_best_effort(waldur_sim, capsys, executing_create):
    waldur_sim.app.add_fault("resources.set_backend_metadata", status=400, body={"detail": "nope"})

    result = run(waldur_sim, capsys, state="settled",
                 outcomes=[{"order_uuid": executing_create["uuid"], "failed": False, "backend_id": "88",
                            "backend_metadata": {"status": "active"}}])

    assert state_of(waldur_sim, executing_create["uuid"]) == "done"
    assert result["results"][0]["actions"] == ["set_backend_id", "set_state_done"]
    assert "backend metadata not recorded" in result["results"][0]["msg"]


def test_an_order_cancelled_meanwhile_is_not_set_done(waldur_sim, capsys, executing_create):
    pending = waldur_sim.app.seed_order(P.DO_OFFERING_UUID, state="pending-provider")

    result = run(waldur_sim, capsys, state="settled", outcomes=[{"order_uuid": pending["uuid"], "failed": False}])

    assert result["results"][0]["msg"] == "order is pending-provider, not executing; not set done"
    assert waldur_sim.app.write_calls() == []


BATCH = 20


def test_a_batch_of_creates_costs_four_waldur_writes_per_order_and_a_few_listings(waldur_sim, capsys):
    """Claim + settle of N Create orders: approve per order when claiming; set_backend_id,
    set_backend_metadata and set_state_done per order when settling. The orders' states after
    approval and before settling, and their resources, come from listings paid once per batch,
    as do the SSH keys: no order or resource is read on its own."""
    app = waldur_sim.app
    app.reset("empty")
    seeded = [app.seed_order(P.DO_OFFERING_UUID, attributes={"name": "web-%d" % index}) for index in range(BATCH)]
    app.calls.clear()

    claim = run(waldur_sim, capsys, state="claimed")
    assert sorted(order["uuid"] for order in claim["orders"]) == sorted(order["uuid"] for order in seeded)
    assert all(order["state"] == "executing" for order in claim["orders"])
    outcomes = [{"order_uuid": order["uuid"], "resource_uuid": order["marketplace_resource_uuid"], "failed": False,
                 "backend_id": str(500 + index), "backend_metadata": {"status": "active", "region": "ams3"}}
                for index, order in enumerate(claim["orders"])]
    settle = run(waldur_sim, capsys, state="settled", outcomes=outcomes)

    assert settle["done"] == BATCH
    assert all(state_of(waldur_sim, order["uuid"]) == "done" for order in seeded)
    per_operation = {}
    for call in app.calls:
        per_operation[call["operation"]] = per_operation.get(call["operation"], 0) + 1
    assert per_operation == {
        # per order
        "orders.approve_by_provider": BATCH,
        "resources.set_backend_id": BATCH, "resources.set_backend_metadata": BATCH, "orders.set_state_done": BATCH,
        # per batch: the actionable orders, then the executing ones after approval and before
        # settling, and the ones erred since settling started (none turned erred once done);
        # offering -> service provider -> keys; the in-flight resources, twice
        "orders.list": 4, "offering.get": 1, "service_provider.list": 1, "service_provider.keys": 1,
        "resources.list": 2,
    }
    assert len(app.calls) == 4 * BATCH + 9
    assert claim["api_calls"]["reads"] + settle["api_calls"]["reads"] + claim["api_calls"]["writes"] \
        + settle["api_calls"]["writes"] == len(app.calls)


def test_claim_and_settle_hand_their_lists_over_packed(waldur_sim, capsys):
    """The order pass's way: the claimed orders as one JSON text, the backend's results settled as
    outcomes_packed together with the orders set aside (outcomes), the results packed back."""
    app = waldur_sim.app
    app.reset("empty")
    seeded = [app.seed_order(P.DO_OFFERING_UUID, attributes={"name": "web-%d" % index}) for index in range(3)]

    claim = run(waldur_sim, capsys, state="claimed", packed=True)
    assert "orders" not in claim and claim["count"] == 3
    orders = json.loads(claim["orders_packed"])
    assert sorted(order["uuid"] for order in orders) == sorted(order["uuid"] for order in seeded)
    assert all(order["state"] == "executing" and order["resource"]["uuid"] for order in orders)

    backend = [{"order_uuid": order["uuid"], "failed": False, "backend_id": "70%d" % index}
               for index, order in enumerate(orders[:2])]
    set_aside = [{"order_uuid": orders[2]["uuid"], "failed": True, "msg": "region ams9 is not available"}]
    settle = run(waldur_sim, capsys, state="settled", outcomes_packed=json.dumps(backend), outcomes=set_aside,
                 packed=True)
    assert "results" not in settle and settle["failures"] == []
    results = json.loads(settle["results_packed"])
    assert [(entry["order_uuid"], entry["outcome"]) for entry in results] == [
        (orders[2]["uuid"], "erred"), (orders[0]["uuid"], "done"), (orders[1]["uuid"], "done")]
    assert (settle["done"], settle["erred"]) == (2, 1)
    assert app.order(orders[2]["uuid"])["error_message"] == "region ams9 is not available"


@pytest.mark.parametrize("outcomes_packed, message", [
    ('[{"order_uuid": "%s", "failed": "maybe"}]' % ("1" * 32), "outcomes_packed[0].failed must be a boolean"),
    ('[{"failed": true}]', "outcomes_packed[0].order_uuid is required"),
    ('["done"]', "outcomes_packed[0] must be a mapping, got str"),
    ('{"order_uuid": "x"}', "outcomes_packed must pack a JSON list, got dict"),
])
def test_packed_outcomes_are_checked_naming_the_entry(waldur_sim, capsys, outcomes_packed, message):
    result = run(waldur_sim, capsys, state="settled", outcomes_packed=outcomes_packed)
    assert result["failed"] is True and result["msg"].startswith(message)
    assert waldur_sim.app.write_calls() == []


def test_an_order_given_twice_across_both_lists_is_refused(waldur_sim, capsys):
    outcome = {"order_uuid": "1" * 32, "failed": False}
    result = run(waldur_sim, capsys, state="settled", outcomes=[outcome], outcomes_packed=json.dumps([outcome]))
    assert result["failed"] is True
    assert result["msg"].startswith("outcomes_packed[0].order_uuid repeats outcomes[0].order_uuid")


def test_settle_compares_with_listed_resources_and_reads_the_others_alone(waldur_sim, capsys):
    """Two or more outcomes to record: the offering's in-flight resources come from one listing.
    Values already recorded are not written again; a resource outside the listing (here an
    executing Update on a resource still OK) is read on its own."""
    app = waldur_sim.app
    app.reset("empty")
    recorded = app.seed_resource(P.DO_OFFERING_UUID, "web-1", state="Creating", backend_id="601",
                                 backend_metadata={"status": "active"})
    create = app.seed_order(P.DO_OFFERING_UUID, state="executing", resource_uuid=recorded["uuid"])
    running = app.seed_resource(P.DO_OFFERING_UUID, "web-2", backend_id="602")
    # (as before Waldur's worker processed it: the resource is still OK, outside the in-flight listing)
    update = app.seed_order(P.DO_OFFERING_UUID, type="Update", state="executing", resource_uuid=running["uuid"],
                            processed=False)
    app.calls.clear()
    outcomes = [{"order_uuid": create["uuid"], "failed": False, "backend_id": "601",
                 "backend_metadata": {"status": "active"}},
                {"order_uuid": update["uuid"], "failed": False, "backend_id": "602",
                 "backend_metadata": {"status": "active", "size": "s-2vcpu-4gb"}}]

    result = run(waldur_sim, capsys, state="settled", outcomes=outcomes)

    assert [entry["actions"] for entry in result["results"]] == [
        ["set_state_done"], ["set_backend_metadata", "set_state_done"]]
    assert app.resource(running["uuid"])["backend_metadata"] == {"status": "active", "size": "s-2vcpu-4gb"}
    listing = app.calls_of("resources.list")
    assert len(listing) == 1
    assert [call["path"] for call in app.calls_of("resources.get")] == [
        "/api/marketplace-provider-resources/%s/" % running["uuid"]]
    assert app.calls_of("resources.set_backend_id") == []


def test_settle_reads_resources_alone_when_the_listing_fails(waldur_sim, capsys):
    app = waldur_sim.app
    app.reset("empty")
    orders = [app.seed_order(P.DO_OFFERING_UUID, state="executing") for _index in range(2)]
    app.add_fault("resources.list", status=403, times=-1)
    app.calls.clear()

    result = run(waldur_sim, capsys, state="settled",
                 outcomes=[{"order_uuid": order["uuid"], "failed": False, "backend_id": "7%d" % index}
                           for index, order in enumerate(orders)])

    assert result["done"] == 2
    assert len(app.calls_of("resources.get")) == 2
    assert [app.resource(order["marketplace_resource_uuid"])["backend_id"] for order in orders] == ["70", "71"]
    assert "reading them one by one" in json.dumps(result["warnings"])  # the 2.19 warning shape nests the text


def test_claim_reads_orders_and_resources_alone_when_the_listings_fail(waldur_sim, capsys):
    app = waldur_sim.app
    app.reset("empty")
    orders = [app.seed_order(P.DO_OFFERING_UUID, attributes={"name": "web-%d" % index}) for index in range(3)]
    # the first listing (of the actionable orders) answers; the later ones do not
    app.add_fault("orders.list", status=403, nth=2, times=-1)
    app.add_fault("resources.list", status=403, times=-1)
    app.calls.clear()

    result = run(waldur_sim, capsys, state="claimed")

    assert sorted(order["uuid"] for order in result["orders"]) == sorted(order["uuid"] for order in orders)
    assert all(order["state"] == "executing" and order["resource"]["name"] for order in result["orders"])
    assert len(app.calls_of("orders.get")) == 3 and len(app.calls_of("resources.get")) == 3
    warnings = json.dumps(result["warnings"])
    assert "could not list marketplace-orders of offering" in warnings
    assert "could not list marketplace-provider-resources of offering" in warnings


def test_settle_reads_alone_the_orders_the_listing_of_executing_ones_does_not_hold(waldur_sim, capsys):
    app = waldur_sim.app
    app.reset("empty")
    executing = [app.seed_order(P.DO_OFFERING_UUID, state="executing") for _index in range(2)]
    done = app.seed_order(P.DO_OFFERING_UUID, state="done")
    app.calls.clear()

    result = run(waldur_sim, capsys, state="settled",
                 outcomes=[{"order_uuid": order["uuid"], "failed": False} for order in executing + [done]])

    assert [entry["outcome"] for entry in result["results"]] == ["done", "done", "skipped"]
    assert result["results"][2]["msg"] == "order is already done; nothing written"
    assert [call["path"] for call in app.calls_of("orders.get")] == ["/api/marketplace-orders/%s/" % done["uuid"]]
    # the executing ones, then the two set done looked for among the orders erred since settling began
    assert len(app.calls_of("orders.list")) == 2
    assert "state=erred" in app.calls_of("orders.list")[1]["query"]


def test_approved_orders_are_read_again_and_dropped_when_waldur_erred_them(waldur_sim, capsys, monkeypatch):
    """Waldur's processor runs on approval and may err the order at once: an Update on Waldur
    7.0.7, a Create without a name. Every approved order is read again before anything is built."""
    app = waldur_sim.app
    app.reset("empty")
    running = app.seed_resource(P.DO_OFFERING_UUID, "db-1", backend_id="401", limits={"cpu": 1})
    update = app.seed_order(P.DO_OFFERING_UUID, type="Update", resource_uuid=running["uuid"], limits={"cpu": 2})
    create = app.seed_order(P.DO_OFFERING_UUID)
    nameless = app.seed_order(P.DO_OFFERING_UUID, attributes={"region": "ams3"})
    app.market.orders[nameless["uuid"]]["attributes"].pop("name")
    original = app.market.approve_by_provider

    def approve_and_err_updates(order, user):
        original(order, user)
        if order["type"] == "Update":
            app.market.set_state_erred(order, "Can't switch from state '5' using method 'schedule_updating'", "")
    # the simulator's marketplace outlives this test (the server is session-wide): patch, then restore
    monkeypatch.setattr(app.market, "approve_by_provider", approve_and_err_updates)
    app.calls.clear()

    result = run(waldur_sim, capsys, state="claimed")

    assert [order["uuid"] for order in result["orders"]] == [create["uuid"]]
    assert result["orders"][0]["state"] == "executing"
    skipped = {entry["uuid"]: entry for entry in result["skipped_orders"]}
    assert skipped[update["uuid"]] == {
        "uuid": update["uuid"], "state": "erred", "type": "Update", "resource_uuid": running["uuid"],
        "resource_name": "db-1", "msg": "order erred by Waldur after approval: "
                                        "Can't switch from state '5' using method 'schedule_updating'"}
    assert skipped[nameless["uuid"]]["msg"] == "order erred by Waldur after approval: 'name'"
    assert app.resource(nameless["marketplace_resource_uuid"])["state"] == "Erred"
    # the one still executing is seen in the listing of executing orders; the two Waldur erred
    # are not in it, and are read on their own for their state and message
    assert "state=executing" in app.calls_of("orders.list")[1]["query"]
    assert sorted(call["path"] for call in app.calls_of("orders.get")) == sorted(
        "/api/marketplace-orders/%s/" % order["uuid"] for order in (update, nameless))


@pytest.mark.parametrize("order_type, resource_state", [("Create", "Erred"), ("Restore", "Terminated"),
                                                        ("Update", "Erred")])
def test_nothing_is_built_for_a_resource_waldur_gave_up_on(waldur_sim, capsys, order_type, resource_state):
    app = waldur_sim.app
    app.reset("empty")
    resource = app.seed_resource(P.DO_OFFERING_UUID, "gone-1", state=resource_state)
    order = app.seed_order(P.DO_OFFERING_UUID, type=order_type, state="executing", resource_uuid=resource["uuid"],
                           limits={"cpu": 2})

    result = run(waldur_sim, capsys, state="claimed")

    assert result["orders"] == []
    assert result["skipped_orders"][0]["msg"] == "resource gone-1 is %s in Waldur; nothing is built for it" \
        % resource_state
    assert result["skipped_orders"][0]["uuid"] == order["uuid"]


def test_a_terminate_of_an_erred_resource_is_claimed(waldur_sim, capsys):
    app = waldur_sim.app
    app.reset("empty")
    resource = app.seed_resource(P.DO_OFFERING_UUID, "broken", state="Erred", backend_id="9")
    order = app.seed_order(P.DO_OFFERING_UUID, type="Terminate", state="executing", resource_uuid=resource["uuid"])

    result = run(waldur_sim, capsys, state="claimed")

    assert [claimed["uuid"] for claimed in result["orders"]] == [order["uuid"]]


class DoneRefusedClient:
    """Waldur that reads the order executing, then answers set_state_done with 409 because the
    order moved meanwhile to ``state_after``."""

    def __init__(self, state_after):
        self.state_after = state_after
        self.reads = 0

    def get(self, path, params=None, shape=None):  # noqa: ARG002 (the read layer's own)
        self.reads += 1
        return ProvenObject({"uuid": "1" * 32, "state": "executing" if self.reads == 1 else self.state_after,
                             "offering_uuid": "d" * 32, "marketplace_resource_uuid": "2" * 32}, "stub")

    def post(self, path, json=None, params=None, idempotent=True):
        raise WaldurApiError(409, "POST", "/api/" + path, "Valid states for operation: executing.")


@pytest.mark.parametrize("state_after, msg", [
    ("done", "order was set done meanwhile"),
    ("canceled", "order is canceled, not executing; not set done"),
])
def test_an_order_that_moved_before_done_is_left_as_it_is(state_after, msg):
    settle = Settle(StubModule(), DoneRefusedClient(state_after), "d" * 32)
    outcome = {"order_uuid": "1" * 32, "failed": False, "retry": False, "msg": "", "backend_id": None,
               "backend_metadata": None, "resource_uuid": None, "exception": None}

    result = settle.settle_one(outcome)

    assert (result["state"], result["actions"], result["msg"]) == (state_after, [], msg)


def test_a_409_on_done_for_an_order_still_executing_is_an_error():
    settle = Settle(StubModule(), DoneRefusedClient("executing"), "d" * 32)
    outcome = {"order_uuid": "1" * 32, "failed": False, "retry": False, "msg": "", "backend_id": None,
               "backend_metadata": None, "resource_uuid": None, "exception": None}

    with pytest.raises(ItemError, match="set_state_done was refused"):
        settle.settle_one(outcome)
