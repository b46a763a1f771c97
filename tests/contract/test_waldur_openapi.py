"""The Waldur simulator against Waldur's official OpenAPI schema, over real HTTP.

Every endpoint the simulator serves is driven the way the site agent and a consumer use it;
each recorded exchange must validate. The negative tests prove the validator notices a
wrong shape, so a passing run means something.
"""

from __future__ import annotations

import copy
import json
import re
import uuid as uuid_lib

import pytest
import requests

from tests.contract.waldur_openapi import (
    SPEC_PATH, apis, load_spec, mock_request, validate_exchange, validate_exchanges)
from tests.simulators.waldur import WaldurSimulator
from tests.simulators.waldur import presets as P


class Session:
    """requests with one Waldur token."""

    def __init__(self, base_url: str, token: str | None):
        self.base_url = base_url
        self.http = requests.Session()
        if token:
            self.http.headers["Authorization"] = f"Token {token}"

    def get(self, path, params=None):
        return self.http.get(self.base_url + path, params=params, timeout=10)

    def post(self, path, body=None):
        return self.http.post(self.base_url + path, json=body, timeout=10)

    def put(self, path, body=None):
        return self.http.put(self.base_url + path, json=body, timeout=10)

    def follow(self, url):
        return self.http.get(url, timeout=10)


@pytest.fixture
def provider(waldur_sim):
    return Session(waldur_sim.url, P.PROVIDER_TOKEN)


@pytest.fixture
def consumer(waldur_sim):
    return Session(waldur_sim.url, P.CONSUMER_TOKEN)


@pytest.fixture
def staff(waldur_sim):
    return Session(waldur_sim.url, P.STAFF_TOKEN)


def _ok(response, status=200):
    """The JSON body of a successful answer; ``status=None`` accepts any 2xx."""
    if status is None:
        assert 200 <= response.status_code < 300, (response.status_code, response.text)
    else:
        assert response.status_code == status, (response.status_code, response.text)
    return response.json() if response.content else None


def _route_operations() -> set[str]:
    return {operation for _method, _rule, operation, _handler in WaldurSimulator(preset="empty").routes()}


def test_spec_is_the_official_schema_with_the_documented_patches():
    spec = load_spec()
    assert SPEC_PATH.name == "waldur-openapi.yaml"
    assert (spec["info"]["title"], spec["info"]["version"]) == ("Waldur API", "8.0.5")
    in_progress = spec["components"]["schemas"]["Resource"]["properties"]["order_in_progress"]
    assert in_progress["anyOf"][1] == {"nullable": True, "enum": [None]}  # null is valid
    assert spec["components"]["schemas"]["BackendMetadata"]["additionalProperties"] is True


def test_every_simulator_route_is_an_operation_of_the_schema():
    request_api = apis()[0]
    missing = []
    for method, rule, operation, _handler in WaldurSimulator(preset="empty").routes():
        if operation == "agent_identities.register_queue":
            continue  # newer than the 8.0.5 schema: checked against the generated client (deviation 5)
        if operation == "plans.update_prices":
            continue  # not in the reduced copy of the schema: checked by hand (deviation 6)
        path = rule.replace("<uuid>", P.DO_ORDER_UUID)
        request = mock_request({"url": "http://127.0.0.1" + path, "method": method, "request_headers": {
            "Authorization": "Token x"}, "request_body": b"{}"})
        errors = [type(e).__name__ for e in request_api.iter_request_errors(request)]
        if {"PathNotFound", "OperationNotFound"} & set(errors):
            missing.append(f"{operation}: {method} {rule}")
    assert missing == []


def test_provider_and_consumer_flows_conform(waldur_sim, provider, consumer, staff):
    app = waldur_sim.app
    # --- what the agent reads first
    me = _ok(provider.get("/api/users/me/"))
    assert me["username"] == "provider-agent"
    providers = _ok(provider.get("/api/marketplace-service-providers/",
                                 {"customer_uuid": P.PROVIDER_CUSTOMER_UUID, "field": "uuid"}))
    assert providers == [{"uuid": P.SERVICE_PROVIDER_UUID}]
    _ok(provider.get(f"/api/marketplace-service-providers/{P.SERVICE_PROVIDER_UUID}/"))
    offering = _ok(provider.get(f"/api/marketplace-provider-offerings/{P.DO_OFFERING_UUID}/"))
    assert offering["plans"][0]["quotas"] == P.DO_PLAN_QUOTAS
    sparse = _ok(provider.get(f"/api/marketplace-provider-offerings/{P.DO_OFFERING_UUID}/",
                              [("field", "components"), ("field", "customer_uuid"), ("field", "plugin_options")]))
    assert set(sparse) == {"components", "customer_uuid", "plugin_options"}
    _ok(provider.get(f"/api/marketplace-plans/{P.DO_PLAN_UUID}/"))
    keys_page = provider.get(f"/api/marketplace-service-providers/{P.SERVICE_PROVIDER_UUID}/keys/")
    keys = _ok(keys_page)
    next_url = re.search(r'<([^>]+)>; rel="next"', keys_page.headers["Link"]).group(1)
    keys += _ok(provider.follow(next_url))
    assert [k["uuid"] for k in keys] == [k["uuid"] for k in P.SSH_KEYS]

    # --- the consumer orders a machine (seed 003), the agent provisions it
    base = f"{waldur_sim.url}/api/marketplace-public-offerings/{P.DO_OFFERING_UUID}/"
    order = _ok(consumer.post("/api/marketplace-orders/", {
        "offering": base, "project": f"{waldur_sim.url}/api/projects/{P.PROJECT_UUID}/",
        "plan": f"{base}plans/{P.DO_PLAN_UUID}/", "type": "Create", "accepting_terms_of_service": True,
        "attributes": {"name": "web-1"}, "limits": {"cpu": 1, "ram": 1024, "disk": 25600}}), 201)
    resource_uuid = order["marketplace_resource_uuid"]
    pending = _ok(provider.get("/api/marketplace-orders/", [
        ("offering_uuid", P.DO_OFFERING_UUID), ("state", "pending-provider"), ("state", "executing"),
        ("page_size", "100")]))
    assert order["uuid"] in [o["uuid"] for o in pending]
    _ok(provider.post(f"/api/marketplace-orders/{order['uuid']}/approve_by_provider/", {}))
    _ok(provider.get(f"/api/marketplace-orders/{order['uuid']}/"))
    _ok(provider.get(f"/api/marketplace-provider-resources/{str(uuid_lib.UUID(resource_uuid))}/"))
    _ok(provider.get(f"/api/marketplace-provider-resources/{resource_uuid}/team/"))
    _ok(provider.post(f"/api/marketplace-provider-resources/{resource_uuid}/set_backend_id/",
                      {"backend_id": "314159"}))
    _ok(provider.post(f"/api/marketplace-provider-resources/{resource_uuid}/set_limits/",
                      {"limits": {"cpu": 1, "ram": 1024, "disk": 25600}}))
    _ok(provider.post(f"/api/marketplace-provider-resources/{resource_uuid}/set_backend_metadata/",
                      {"backend_metadata": {"droplet_id": 314159, "ip_address": "203.0.113.7"}}))
    state = _ok(provider.get(f"/api/marketplace-orders/{order['uuid']}/", [("field", "uuid"), ("field", "state")]))
    assert state == {"uuid": order["uuid"], "state": "executing"}
    _ok(provider.post(f"/api/marketplace-orders/{order['uuid']}/set_state_done/"))
    listed = _ok(provider.get("/api/marketplace-provider-resources/", [
        ("offering_uuid", P.DO_OFFERING_UUID), ("state", "OK"), ("state", "Erred"), ("field", "uuid"),
        ("field", "backend_id"), ("field", "backend_metadata"), ("field", "limits"), ("field", "paused")]))
    assert {"uuid": resource_uuid, "backend_id": "314159", "paused": False, "limits": {
        "cpu": 1, "ram": 1024, "disk": 25600}, "backend_metadata": {
        "droplet_id": 314159, "ip_address": "203.0.113.7"}} in listed

    # --- usage reporting
    _ok(provider.post("/api/marketplace-component-usages/set_usage/", {
        "resource": resource_uuid, "date": "2026-01-01T00:00:00+00:00",
        "usages": [{"type": "cpu", "amount": "1.00"}, {"type": "ram", "amount": "1024.00", "description": "MiB"}]}),
        201)
    _ok(provider.post("/api/marketplace-component-usages/set_usage/", {
        "resource": resource_uuid, "usages": [{"type": "disk", "amount": "25600"}]}), 201)
    usages = _ok(provider.get("/api/marketplace-component-usages/", [
        ("resource_uuid", resource_uuid), ("billing_period", "2026-01-01"), ("field", "uuid"), ("field", "type"),
        ("field", "usage")]))
    assert sorted((u["type"], u["usage"]) for u in usages) == [("cpu", "1.00"), ("ram", "1024.00")]
    _ok(provider.get(f"/api/marketplace-component-usages/{usages[0]['uuid']}/"))
    everything = _ok(provider.get("/api/marketplace-component-usages/", {"offering_uuid": P.DO_OFFERING_UUID}))
    assert len(everything) == 3
    _ok(provider.get(f"/api/marketplace-provider-resources/{resource_uuid}/"))  # current_usages filled

    # --- the consumer's view, an Update and a Terminate
    _ok(consumer.get(f"/api/marketplace-resources/{resource_uuid}/"))
    assert resource_uuid in [r["uuid"] for r in _ok(consumer.get("/api/marketplace-resources/"))]
    assert _ok(provider.get("/api/marketplace-resources/")) == []
    update = _ok(consumer.post(f"/api/marketplace-resources/{resource_uuid}/update_limits/",
                               {"limits": {"cpu": 2, "ram": 2048, "disk": 51200}}))
    _ok(provider.post(f"/api/marketplace-orders/{update['order_uuid']}/approve_by_provider/", {}))
    _ok(provider.post(f"/api/marketplace-orders/{update['order_uuid']}/set_state_done/"))
    terminate = _ok(consumer.post(f"/api/marketplace-resources/{resource_uuid}/terminate/", {}))
    _ok(provider.post(f"/api/marketplace-orders/{terminate['order_uuid']}/approve_by_provider/", {}))
    _ok(provider.post(f"/api/marketplace-orders/{terminate['order_uuid']}/set_state_done/"))
    assert app.resource(resource_uuid)["state"] == "Terminated"

    # --- the other transitions
    waiting = app.seed_order(P.AZURE_OFFERING_UUID, state="pending-consumer", attributes={"name": "vm-2"})
    _ok(consumer.post(f"/api/marketplace-orders/{waiting['uuid']}/approve_by_consumer/"))
    _ok(provider.post(f"/api/marketplace-orders/{waiting['uuid']}/reject_by_provider/", {}))
    _ok(provider.post(f"/api/marketplace-orders/{P.AZURE_ORDER_UUID}/set_state_executing/"))
    _ok(provider.post(f"/api/marketplace-orders/{P.AZURE_ORDER_UUID}/set_state_erred/",
                      {"error_message": "Azure said no", "error_traceback": "Traceback (most recent call last): ..."}))

    # --- components (load_components) and the staff-only flags
    offering_path = f"/api/marketplace-provider-offerings/{P.AZURE_OFFERING_UUID}/"
    _ok(provider.post(offering_path + "create_offering_component/", {
        "type": "gpu", "name": "GPU", "measured_unit": "hours", "billing_type": "usage"}), 201)
    cpu = next(c for c in _ok(provider.get(offering_path))["components"] if c["type"] == "cpu")
    _ok(provider.post(offering_path + "update_offering_component/", {
        "uuid": cpu["uuid"], "type": "cpu", "name": "vCPU", "measured_unit": "Cores", "billing_type": "limit",
        "unit_factor": 1, "limit_period": "total"}))
    # a price for the new component in the offering's plan (update_prices: deviation 6)
    assert _ok(provider.post(f"/api/marketplace-plans/{P.AZURE_PLAN_UUID}/update_prices/",
                             {"prices": {"gpu": "1.25", "cpu": 7.5}})) is None
    # an Erred resource whose machine is healthy is set OK again
    erred = app.seed_resource(P.AZURE_OFFERING_UUID, "vm-erred", backend_id="/subscriptions/x/vm-e", state="Erred")
    assert _ok(provider.post(f"/api/marketplace-provider-resources/{erred['uuid']}/set_as_ok/")) is None
    flagged = app.seed_resource(P.AZURE_OFFERING_UUID, "vm-3", backend_id="/subscriptions/x/vm-3")
    _ok(staff.post(f"/api/marketplace-provider-resources/{flagged['uuid']}/set_paused/", {"paused": True}))
    _ok(staff.post(f"/api/marketplace-provider-resources/{flagged['uuid']}/set_downscaled/", {"downscaled": True}))

    # --- the event mode's site agent identity and queue (register_queue: deviation 5)
    name = "agent-" + P.DO_OFFERING_UUID
    identity = _ok(provider.post("/api/marketplace-site-agent-identities/", {
        "offering": P.DO_OFFERING_UUID, "name": name, "version": "0.1.0",
        "last_restarted": "2026-11-29T12:00:00+00:00", "dependencies": [], "config_file_path": "",
        "config_file_content": ""}), 201)
    assert [i["uuid"] for i in _ok(provider.get("/api/marketplace-site-agent-identities/", {"name": name}))] == [
        identity["uuid"]]
    identity_path = f"/api/marketplace-site-agent-identities/{identity['uuid']}/"
    _ok(provider.get(identity_path))
    _ok(provider.put(identity_path, {"offering": P.DO_OFFERING_UUID, "name": name, "version": "0.1.1"}))
    _ok(provider.post(identity_path + "register_service/", {"name": "event_process", "mode": "event_process"}), None)
    queue = _ok(provider.post(identity_path + "register_queue/", {"object_types": ["order", "resource"]}), None)
    assert queue["queue_name"] and queue["vhost"]

    # --- refusals: their requests are checked too (a 403/409 request must still be valid)
    assert provider.post(f"/api/marketplace-provider-resources/{flagged['uuid']}/set_paused/",
                         {"paused": False}).status_code == 403
    assert provider.post(f"/api/marketplace-orders/{order['uuid']}/set_state_done/").status_code == 409
    assert Session(waldur_sim.url, None).get("/api/users/me/").status_code == 401
    assert provider.get("/api/marketplace-orders/", {"state": "bogus"}).status_code == 400

    assert validate_exchanges(app.exchanges) == []
    assert _route_operations() - {e["operation"] for e in app.exchanges} == set()


def test_empty_bodies_quirk_is_tolerated_only_when_active(waldur_sim, provider):
    waldur_sim.app.set_quirks(empty_bodies=True)
    response = provider.post(f"/api/marketplace-orders/{P.DO_ORDER_UUID}/approve_by_provider/", {})
    assert (response.status_code, response.content) == (200, b"")
    exchange = waldur_sim.app.exchanges[-1]
    assert validate_exchange(exchange) == []
    without_quirk = dict(exchange, quirks=[])
    problems = validate_exchange(without_quirk)
    assert len(problems) == 1 and "MissingData" in problems[0]


# ---------------------------------------------------------------------------- the validator bites
@pytest.fixture
def recorded(waldur_sim, provider):
    """A few real exchanges to corrupt (copies: the fixture validates the originals)."""
    resource = waldur_sim.app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1")
    provider.get(f"/api/marketplace-orders/{P.DO_ORDER_UUID}/")
    provider.post(f"/api/marketplace-provider-resources/{resource['uuid']}/set_backend_id/", {"backend_id": "2"})
    provider.post("/api/marketplace-component-usages/set_usage/",
                  {"resource": resource["uuid"], "usages": [{"type": "cpu", "amount": "3.50"}]})
    provider.get("/api/marketplace-component-usages/", {"resource_uuid": resource["uuid"]})
    provider.get(f"/api/marketplace-provider-resources/{resource['uuid']}/")
    exchanges = {e["operation"]: copy.deepcopy(e) for e in waldur_sim.app.exchanges}
    assert all(validate_exchange(e) == [] for e in exchanges.values())
    return exchanges


def _with_body(exchange, mutate):
    body = json.loads(exchange["response_body"])
    mutate(body)
    return dict(exchange, response_body=json.dumps(body).encode())


def test_wrong_enum_value_is_caught(recorded):
    broken = _with_body(recorded["orders.get"], lambda b: b.update(state="approved"))
    problems = validate_exchange(broken)
    assert len(problems) == 1
    assert "at state" in problems[0] and "'approved'" in problems[0]


def test_invented_field_is_caught(recorded):
    problems = validate_exchange(_with_body(recorded["orders.get"], lambda b: b.update(resource_state="OK")))
    assert any("'resource_state' was unexpected" in p for p in problems)


def test_listing_without_a_true_result_count_is_caught(recorded):
    listing = recorded["usages.list"]
    headers = {k: v for k, v in listing["response_headers"].items() if k.lower() != "x-result-count"}
    assert validate_exchange(dict(listing, response_headers=headers)) == [
        "GET %s -> 200: response: a listing without X-Result-Count" % listing["url"]]
    short = dict(headers, **{"X-Result-Count": "0"})
    assert "X-Result-Count '0' for a page of 1 item(s)" in validate_exchange(dict(listing, response_headers=short))[0]


def test_missing_required_key_is_caught(recorded):
    problems = validate_exchange(_with_body(recorded["resources.set_backend_id"], lambda b: b.clear()))
    assert any("'status' is a required property" in p for p in problems)


def test_usage_must_be_a_decimal_string_not_anything(recorded):
    def corrupt(body):
        body[0]["usage"] = "three and a half"
    problems = validate_exchange(_with_body(recorded["usages.list"], corrupt))
    assert any("at 0/usage" in p for p in problems)


def test_current_usages_tolerance_is_limited_to_decimal_strings(recorded):
    assert json.loads(recorded["resources.get"]["response_body"])["current_usages"] == {"cpu": "3.50"}
    problems = validate_exchange(_with_body(recorded["resources.get"],
                                            lambda b: b.update(current_usages={"cpu": [3.5]})))
    assert any("current_usages/cpu" in p for p in problems)


def test_request_without_credentials_answered_200_is_caught(recorded):
    exchange = copy.deepcopy(recorded["orders.get"])
    exchange["request_headers"] = {k: v for k, v in exchange["request_headers"].items() if k != "Authorization"}
    problems = validate_exchange(exchange)
    assert len(problems) == 1 and "SecurityValidationError" in problems[0]


def test_unknown_path_answered_200_is_caught(recorded):
    url = recorded["orders.get"]["url"].replace("marketplace-orders", "marketplace-order")
    exchange = dict(recorded["orders.get"], url=url)
    assert any("PathNotFound" in p for p in validate_exchange(exchange))


def test_numeric_usage_amount_accepted_by_the_simulator_is_flagged(waldur_sim, provider):
    """Waldur 7.0.7 (and the simulator) accept ``"amount": 12``, but 8.x declares a decimal
    string: a module sending numbers is caught here."""
    resource = waldur_sim.app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1")
    response = provider.post("/api/marketplace-component-usages/set_usage/",
                             {"resource": resource["uuid"], "usages": [{"type": "cpu", "amount": 12}]})
    assert response.status_code == 201
    problems = validate_exchange(waldur_sim.app.exchanges[-1])
    assert len(problems) == 1
    assert "request: InvalidRequestBody at usages/0/amount" in problems[0]
    waldur_sim.app.exchanges.clear()  # deliberate violation: keep the fixture's check green


def test_invalid_request_refused_by_an_injected_fault_is_still_caught(waldur_sim, provider):
    waldur_sim.app.add_fault("orders.list", status=503)
    assert provider.get("/api/marketplace-orders/", {"state": "bogus"}).status_code == 503
    problems = validate_exchange(waldur_sim.app.exchanges[-1])
    assert len(problems) == 1 and "query parameter 'state'" in problems[0]
    waldur_sim.app.exchanges.clear()


def test_update_prices_is_checked_by_hand(waldur_sim, provider):
    """Deviation 6 still bites: a negative or non-numeric price answered 2xx is flagged."""
    assert provider.post(f"/api/marketplace-plans/{P.DO_PLAN_UUID}/update_prices/",
                         {"prices": {"cpu": "2.00"}}).status_code == 200
    good = copy.deepcopy(waldur_sim.app.exchanges[-1])
    assert validate_exchange(good) == []
    bad = dict(good, request_body=json.dumps({"prices": {"cpu": "free", "ram": -1}}).encode())
    problems = validate_exchange(bad)
    assert len(problems) == 2 and all("request: prices." in problem for problem in problems)
    assert any("response: expected no body" in p for p in validate_exchange(dict(good, response_body=b"{}")))
