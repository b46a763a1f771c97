"""The Waldur modules in real playbooks (ansible-playbook) against the Waldur simulator."""

from __future__ import annotations

import datetime
import json
import threading
import time

import pytest
import requests

from tests.helpers import run_playbook
from tests.simulators.waldur import presets as P

pytestmark = pytest.mark.integration

WALDUR = "group/waldur.site_agent.waldur"


def play(sim, tasks, token=P.PROVIDER_TOKEN):
    return [{
        "name": "Waldur modules",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "module_defaults": {WALDUR: {"api_url": sim.url + "/api/", "api_token": token}},
        "tasks": tasks,
    }]


def save(register, path):
    """A task writing a registered result to a JSON file the test reads back."""
    return {"name": "Save %s" % register, "check_mode": False, "ansible.builtin.copy": {
        "content": "{{ %s | to_json }}" % register, "dest": str(path), "mode": "0600"}}


def load(path):
    return json.loads(path.read_text())


def submit(name, wait=False):
    return {"name": "Order %s" % name, "waldur.site_agent.waldur_order": {
        "offering": P.DO_OFFERING_UUID, "project": P.PROJECT_UUID, "plan": P.DO_PLAN_UUID,
        "attributes": {"name": name}, "limits": {"cpu": 1, "ram": 1024, "disk": 25600}, "wait": wait}}


# A stand-in for the backend task: orders whose resource is named bad-* fail, the others succeed.
ACT = {"name": "Act (stand-in backend)", "ansible.builtin.set_fact": {"outcomes": (
    "{{ outcomes | default([]) + [{'order_uuid': item.uuid, 'resource_uuid': item.marketplace_resource_uuid, "
    "'failed': item.resource.name.startswith('bad'), "
    "'msg': ('no image for ' ~ item.resource.name) if item.resource.name.startswith('bad') else 'created', "
    "'backend_id': 'droplet-' ~ item.resource.name, 'backend_metadata': {'status': 'active'}, "
    "'changed': true}] }}")}, "loop": "{{ claim.orders }}", "loop_control": {"label": "{{ item.uuid }}"}}


def order_pass(tmp_path, suffix=""):
    return [
        {"name": "Claim", "waldur.site_agent.waldur_orders": {"state": "claimed", "offering_uuid": P.DO_OFFERING_UUID},
         "register": "claim"},
        save("claim", tmp_path / ("claim%s.json" % suffix)),
        ACT,
        {"name": "Settle", "waldur.site_agent.waldur_orders": {
            "state": "settled", "offering_uuid": P.DO_OFFERING_UUID, "outcomes": "{{ outcomes | default([]) }}"},
         "register": "settle"},
        save("settle", tmp_path / ("settle%s.json" % suffix)),
    ]


@pytest.fixture
def consumer_orders(waldur_sim):
    """Three Create orders placed by the consumer with waldur_order (wait: false)."""
    waldur_sim.app.reset("empty")
    run = run_playbook(play(waldur_sim, [submit("good-1"), submit("good-2"), submit("bad-1")], P.CONSUMER_TOKEN))
    assert run.rc == 0, run.output
    orders = {o["attributes"]["name"]: o for o in waldur_sim.app.market.orders.values()}
    assert {name: o["state"] for name, o in orders.items()} == {
        "good-1": "pending-provider", "good-2": "pending-provider", "bad-1": "pending-provider"}
    return {name: o["uuid"] for name, o in orders.items()}


def test_order_pass_claims_settles_and_then_has_nothing_to_do(waldur_sim, tmp_path, consumer_orders):
    other = waldur_sim.app.seed_order(P.AZURE_OFFERING_UUID)  # another offering: never touched
    app = waldur_sim.app
    since = len(app.calls)

    run = run_playbook(play(waldur_sim, order_pass(tmp_path)))

    assert run.rc == 0, run.output
    claim, settle = load(tmp_path / "claim.json"), load(tmp_path / "settle.json")
    approved = {call["path"].split("/")[3] for call in app.calls_of("orders.approve_by_provider", since)}
    assert approved == set(consumer_orders.values()) == set(claim["approved"])
    assert app.order(other["uuid"])["state"] == "pending-provider"
    assert len(claim["ssh_keys"]) == len(P.SSH_KEYS)

    for name in ("good-1", "good-2"):
        order = app.order(consumer_orders[name])
        assert order["state"] == "done"
        resource = app.resource(order["marketplace_resource_uuid"])
        assert resource["backend_id"] == "droplet-" + name and resource["state"] == "OK"
        assert resource["backend_metadata"] == {"status": "active"}
    bad = app.order(consumer_orders["bad-1"])
    assert bad["state"] == "erred" and bad["error_message"] == "no image for bad-1"
    assert (settle["done"], settle["erred"], settle["counts"]["skipped"]) == (2, 1, 0)
    assert "skipped" not in settle  # Ansible's own key: a count there would mark the task skipped
    assert all(call["user_agent"].startswith("waldur-site-agent-ansible/") for call in app.calls[since:])

    since = len(app.calls)
    again = run_playbook(play(waldur_sim, order_pass(tmp_path, "-2")))
    assert again.rc == 0, again.output
    assert app.write_calls(since) == []
    assert load(tmp_path / "claim-2.json")["orders"] == []


def test_check_mode_writes_nothing(waldur_sim, tmp_path, consumer_orders):
    since = len(waldur_sim.app.calls)

    run = run_playbook(play(waldur_sim, order_pass(tmp_path)), check=True)

    assert run.rc == 0, run.output
    assert waldur_sim.app.write_calls(since) == []
    assert {waldur_sim.app.order(uuid)["state"] for uuid in consumer_orders.values()} == {"pending-provider"}
    settle = load(tmp_path / "settle.json")
    # the orders are still pending, so a real settle would not set them done either; it says so
    assert {result["state"] for result in settle["results"]} == {"pending-provider"}
    # the failed outcome names a machine: its id would be recorded before the order is erred
    assert [r["actions"] for r in settle["results"] if r["order_uuid"] == consumer_orders["bad-1"]] == \
        [["set_backend_id", "set_state_erred"]]


def test_a_503_burst_and_a_429_are_retried_and_the_pass_succeeds(waldur_sim, tmp_path, consumer_orders):
    app = waldur_sim.app
    app.add_fault("orders.list", status=503, times=3)
    app.add_fault("orders.approve_by_provider", status=429, retry_after=1)
    since = len(app.calls)
    started = time.monotonic()

    run = run_playbook(play(waldur_sim, order_pass(tmp_path)))

    assert run.rc == 0, run.output
    statuses = [(call["operation"], call["status"]) for call in app.calls[since:]]
    assert statuses.count(("orders.list", 503)) == 3
    assert ("orders.approve_by_provider", 429) in statuses
    assert {app.order(uuid)["state"] for name, uuid in consumer_orders.items() if name != "bad-1"} == {"done"}
    assert time.monotonic() - started >= 1  # Retry-After: 1 was honoured
    assert load(tmp_path / "claim.json")["api_calls"]["retries"] >= 4


def test_a_wrong_token_fails_clearly_and_never_shows_it(waldur_sim, tmp_path):
    secret = "not-the-provider-token-7c1f2a"
    tasks = [{"name": "Claim", "waldur.site_agent.waldur_orders": {
        "state": "claimed", "offering_uuid": P.DO_OFFERING_UUID}}]

    plays = play(waldur_sim, tasks)
    del plays[0]["module_defaults"][WALDUR]["api_token"]  # from the environment, as an operator would give it

    run = run_playbook(plays, env={"WALDUR_API_TOKEN": secret}, verbosity=3)

    assert run.rc != 0
    assert ("could not list the orders of offering %s: Waldur GET /api/marketplace-orders/ failed (HTTP 401): "
            "Invalid token. (check api_token)" % P.DO_OFFERING_UUID) in run.output
    assert secret not in run.output
    assert waldur_sim.app.write_calls() == []


def test_usage_is_reported_idempotently(waldur_sim, tmp_path):
    app = waldur_sim.app
    app.reset("empty")
    vm = app.seed_resource(P.AZURE_OFFERING_UUID, "vm-1", backend_id="/subscriptions/s/vm-1")["uuid"]
    month = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m")

    def report(amounts, name):
        return [{"name": "Report", "waldur.site_agent.waldur_usage": {
            "offering_uuid": P.AZURE_OFFERING_UUID, "usages": [{"resource_uuid": vm, "usages": amounts}]},
            "register": "usage"}, save("usage", tmp_path / name)]

    first = run_playbook(play(waldur_sim, report({"cpu": 2, "ram": 4096, "disk": 30720}, "1.json")))
    assert first.rc == 0, first.output
    since = len(app.calls)
    second = run_playbook(play(waldur_sim, report({"cpu": 1, "ram": 4096, "disk": 40960, "gpu": 1}, "2.json")))
    assert second.rc == 0, second.output

    result = load(tmp_path / "2.json")["results"][0]
    assert result["unchanged"] == ["ram"]
    assert result["sent"] == {"disk": "40960.00"}
    assert [(r["component"], r["stored"]) for r in result["refused"]] == [("cpu", "2.00")]
    assert result["omitted"] == [{"component": "gpu", "reason": "the offering has no component gpu"}]
    [post] = app.calls_of("usages.set_usage", since)
    body = json.loads(next(e for e in reversed(app.exchanges) if e["url"].endswith("/set_usage/"))["request_body"])
    assert body == {"usages": [{"type": "disk", "amount": "40960.00"}], "resource": vm,
                    "date": month + "-01T00:00:00+00:00"}
    assert post["status"] == 201
    assert {u["type"]: u["usage"] for u in app.usages(vm, month + "-01")} == {
        "cpu": "2.00", "ram": "4096.00", "disk": "40960.00"}
    assert "usage of resource %s not sent" % vm in second.output  # the refusal is a visible warning


def test_components_are_created_then_left_alone(waldur_sim, tmp_path):
    components = {"cpu": {"measured_unit": "Cores", "accounting_type": "limit", "label": "CPU", "unit_factor": 1},
                  "gpu": {"measured_unit": "GPU hours", "accounting_type": "usage", "label": "GPU", "limit": 8}}
    tasks = [{"name": "Load components", "waldur.site_agent.waldur_components": {
        "offering_uuid": P.DO_OFFERING_UUID, "components": components}, "register": "loaded"},
        save("loaded", tmp_path / "components.json")]

    first = run_playbook(play(waldur_sim, tasks))
    assert first.rc == 0, first.output
    actions = {row["type"]: row["action"] for row in load(tmp_path / "components.json")["results"]}
    assert actions == {"cpu": "updated", "gpu": "created"}
    stored = {c["type"]: c for c in waldur_sim.app.market.offerings[P.DO_OFFERING_UUID]["components"]}
    assert stored["gpu"]["limit_amount"] == 8 and stored["cpu"]["name"] == "CPU"

    since = len(waldur_sim.app.calls)
    second = run_playbook(play(waldur_sim, tasks))
    assert second.rc == 0, second.output
    assert waldur_sim.app.write_calls(since) == []
    assert load(tmp_path / "components.json")["changed"] is False


def settle_in_background(sim, name, error_message=None):
    """The provider, meanwhile: approve the consumer's order and set it done (or erred)."""
    def work():
        headers = {"Authorization": "Token " + P.PROVIDER_TOKEN}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = [o for o in sim.app.market.orders.values() if o["attributes"].get("name") == name]
            if found:
                break
            time.sleep(0.05)
        url = "%s/api/marketplace-orders/%s/" % (sim.url, found[0]["uuid"])
        requests.post(url + "approve_by_provider/", json={}, headers=headers, timeout=5).raise_for_status()
        if error_message:
            requests.post(url + "set_state_erred/", json={"error_message": error_message, "error_traceback": ""},
                          headers=headers, timeout=5).raise_for_status()
        else:
            requests.post(url + "set_state_done/", headers=headers, timeout=5).raise_for_status()
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_waldur_order_waits_for_done(waldur_sim, tmp_path):
    worker = settle_in_background(waldur_sim, "waited-1")
    task = submit("waited-1", wait=True)
    task["waldur.site_agent.waldur_order"]["interval"] = 0.2
    task["register"] = "ordered"

    run = run_playbook(play(waldur_sim, [task, save("ordered", tmp_path / "order.json")], P.CONSUMER_TOKEN))
    worker.join(10)

    assert run.rc == 0, run.output
    result = load(tmp_path / "order.json")
    assert result["order"]["state"] == "done"
    assert result["resource"]["name"] == "waited-1" and result["resource"]["state"] == "OK"


def test_waldur_order_fails_with_the_error_message(waldur_sim, tmp_path):
    worker = settle_in_background(waldur_sim, "doomed-1", "Region ams9 is not available")
    task = submit("doomed-1", wait=True)
    task["waldur.site_agent.waldur_order"]["interval"] = 0.2

    run = run_playbook(play(waldur_sim, [task], P.CONSUMER_TOKEN))
    worker.join(10)

    assert run.rc != 0
    assert "is erred: Region ams9 is not available" in run.output
