"""The Waldur simulator itself: state machine, auth, paging, filters, faults, usage, control."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid as uuid_lib
from datetime import date, datetime, timezone
from pathlib import Path

import pytest
import requests
from werkzeug.test import Client

from tests.simulators.waldur import WaldurSimulator
from tests.simulators.waldur import presets as P

REPO = Path(__file__).resolve().parents[3]
ORDERS = "/api/marketplace-orders/"
PRESOURCES = "/api/marketplace-provider-resources/"
CRESOURCES = "/api/marketplace-resources/"
SET_USAGE = "/api/marketplace-component-usages/set_usage/"
FORBIDDEN = {"detail": "You do not have permission to perform this action."}


class Api:
    """werkzeug's test client with Waldur's token header."""

    def __init__(self, app: WaldurSimulator):
        self.app = app
        self.client = Client(app)

    def call(self, method, path, token=P.PROVIDER_TOKEN, json=None, query=None, headers=None):
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Token {token}"
        return self.client.open(path, method=method, json=json, query_string=query, headers=headers)

    def get(self, path, **kwargs):
        return self.call("GET", path, **kwargs)

    def post(self, path, json=None, **kwargs):
        return self.call("POST", path, json=json, **kwargs)


@pytest.fixture
def app():
    return WaldurSimulator()


@pytest.fixture
def api(app):
    return Api(app)


def order_state(app, order_uuid):
    return app.order(order_uuid)["state"]


def resource_state(app, resource_uuid):
    return app.resource(resource_uuid)["state"]


def current_month() -> str:
    return datetime.now(timezone.utc).date().replace(day=1).isoformat()


# ---------------------------------------------------------------------------- presets
def test_default_preset_has_the_documented_world(app, api):
    offering = api.get(f"/api/marketplace-provider-offerings/{P.DO_OFFERING_UUID}/").json
    assert offering["type"] == "Marketplace.Slurm"
    assert offering["customer_uuid"] == P.PROVIDER_CUSTOMER_UUID
    assert offering["plugin_options"] == {}
    assert [(c["type"], c["measured_unit"], c["billing_type"], c["unit_factor"]) for c in offering["components"]] == [
        ("cpu", "Cores", "limit", 1), ("ram", "MiB", "limit", 1), ("disk", "MiB", "limit", 1)]
    assert [p["uuid"] for p in offering["plans"]] == [P.DO_PLAN_UUID]
    plan = api.get(f"/api/marketplace-plans/{P.AZURE_PLAN_UUID}/").json
    assert plan["quotas"] == P.AZURE_PLAN_QUOTAS
    pending = api.get(ORDERS, query={"state": "pending-provider"}).json
    assert {o["uuid"] for o in pending} == {P.DO_ORDER_UUID, P.AZURE_ORDER_UUID}
    assert resource_state(app, P.DO_RESOURCE_UUID) == "Creating"
    providers = api.get("/api/marketplace-service-providers/",
                        query={"customer_uuid": P.PROVIDER_CUSTOMER_UUID}).json
    assert [p["uuid"] for p in providers] == [P.SERVICE_PROVIDER_UUID]


def test_ssh_keys_are_twelve_real_public_keys_with_fingerprints():
    assert len(P.SSH_KEYS) == 12
    assert P.SSH_KEYS[0]["uuid"] == "e0000000000000000000000000000001"
    assert len({k["uuid"] for k in P.SSH_KEYS}) == 12
    for key in P.SSH_KEYS:
        assert key["public_key"].split()[0] in ("ssh-ed25519", "ssh-rsa")
        assert key["type"] == key["public_key"].split()[0]
        assert re.fullmatch(r"([0-9a-f]{2}:){15}[0-9a-f]{2}", key["fingerprint_md5"])
        assert re.fullmatch(r"SHA256:[A-Za-z0-9+/]{43}", key["fingerprint_sha256"])
        assert key["fingerprint_sha512"].startswith("SHA512:")
    assert {k["type"] for k in P.SSH_KEYS} == {"ssh-ed25519", "ssh-rsa"}


def test_empty_preset_keeps_the_world_but_no_orders_or_resources(app, api):
    app.reset("empty")
    assert api.get(ORDERS).json == []
    assert api.get(PRESOURCES).json == []
    assert api.get(f"/api/marketplace-provider-offerings/{P.AZURE_OFFERING_UUID}/").status_code == 200
    with pytest.raises(ValueError, match="unknown Waldur preset"):
        app.reset("bogus")


# ---------------------------------------------------------------------------- auth
def test_missing_and_wrong_tokens_are_401(api):
    missing = api.get(ORDERS, token=None)
    assert missing.status_code == 401
    assert missing.json == {"detail": "Authentication credentials were not provided."}
    assert missing.headers["WWW-Authenticate"] == "Token"
    wrong = api.get(ORDERS, token="not-a-token")
    assert wrong.status_code == 401
    assert wrong.json == {"detail": "Invalid token."}
    bearer = api.get(ORDERS, token=None, headers={"Authorization": f"Bearer {P.PROVIDER_TOKEN}"})
    assert bearer.status_code == 401


def test_each_token_is_its_own_user(api):
    provider = api.get("/api/users/me/").json
    consumer = api.get("/api/users/me/", token=P.CONSUMER_TOKEN).json
    staff = api.get("/api/users/me/", token=P.STAFF_TOKEN).json
    assert (provider["is_staff"], consumer["is_staff"], staff["is_staff"]) == (False, False, True)
    assert provider["permissions"][0]["scope_uuid"] == P.PROVIDER_CUSTOMER_UUID
    assert provider["permissions"][0]["role_name"] == "CUSTOMER.OWNER"
    assert consumer["permissions"][0]["scope_uuid"] == P.CONSUMER_CUSTOMER_UUID
    assert len({provider["uuid"], consumer["uuid"], staff["uuid"]}) == 3


def test_consumer_may_not_act_as_provider(app, api):
    response = api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={}, token=P.CONSUMER_TOKEN)
    assert response.status_code == 403
    assert response.json == FORBIDDEN
    assert order_state(app, P.DO_ORDER_UUID) == "pending-provider"
    assert api.get(f"{PRESOURCES}{P.DO_RESOURCE_UUID}/", token=P.CONSUMER_TOKEN).status_code == 404
    assert api.get(f"/api/marketplace-service-providers/{P.SERVICE_PROVIDER_UUID}/keys/",
                   token=P.CONSUMER_TOKEN).status_code == 403
    assert api.post(SET_USAGE, json={"resource": P.DO_RESOURCE_UUID, "usages": []},
                    token=P.CONSUMER_TOKEN).status_code == 403


def test_pause_and_downscale_flags_are_staff_only(app, api):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1")
    path = f"{PRESOURCES}{resource['uuid']}/"
    denied = api.post(path + "set_paused/", json={"paused": True})
    assert denied.status_code == 403
    assert denied.json == FORBIDDEN
    assert app.resource(resource["uuid"])["paused"] is False
    assert api.post(path + "set_paused/", json={"paused": True}, token=P.STAFF_TOKEN).status_code == 200
    staff_set = api.post(path + "set_downscaled/", json={"downscaled": True}, token=P.STAFF_TOKEN)
    assert set(staff_set.json) == {"status"}
    assert (app.resource(resource["uuid"])["paused"], app.resource(resource["uuid"])["downscaled"]) == (True, True)
    assert api.post(path + "set_paused/", json={"paused": "yes"}, token=P.STAFF_TOKEN).status_code == 400


def test_provider_sees_nothing_in_the_consumer_view(app, api):
    app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1")
    listed = api.get(CRESOURCES)
    assert listed.json == []
    assert listed.headers["X-Result-Count"] == "0"
    assert api.get(f"{CRESOURCES}{P.DO_RESOURCE_UUID}/").status_code == 404
    consumer = api.get(CRESOURCES, token=P.CONSUMER_TOKEN).json
    assert len(consumer) == 3  # the seeded one and the two Creating resources of the preset
    assert api.get(PRESOURCES, token=P.CONSUMER_TOKEN).json == []


# ---------------------------------------------------------------------------- order state machine
@pytest.mark.parametrize("start, action, status, end", [
    ("pending-provider", "approve_by_provider", 200, "executing"),
    ("executing", "approve_by_provider", 409, "executing"),
    ("pending-consumer", "approve_by_provider", 409, "pending-consumer"),
    ("pending-consumer", "reject_by_provider", 200, "rejected"),
    ("pending-provider", "reject_by_provider", 200, "rejected"),
    ("executing", "reject_by_provider", 409, "executing"),
    ("pending-consumer", "set_state_executing", 200, "executing"),
    ("pending-provider", "set_state_executing", 200, "executing"),
    ("erred", "set_state_executing", 200, "executing"),
    ("executing", "set_state_executing", 409, "executing"),
    ("done", "set_state_executing", 409, "done"),
    ("executing", "set_state_done", 200, "done"),
    ("pending-provider", "set_state_done", 409, "pending-provider"),
    ("erred", "set_state_done", 409, "erred"),
    ("rejected", "set_state_done", 409, "rejected"),
    ("executing", "set_state_erred", 200, "erred"),
    ("pending-provider", "set_state_erred", 200, "erred"),
])
def test_order_transitions(app, api, start, action, status, end):
    order = app.seed_order(P.DO_OFFERING_UUID, state=start, attributes={"name": "vm"})
    response = api.post(f"{ORDERS}{order['uuid']}/{action}/", json={})
    assert response.status_code == status
    assert order_state(app, order["uuid"]) == end
    if status == 409:
        assert response.json["detail"].startswith("Valid states for operation: ")
    if status == 200:
        assert app.calls[-1]["write"] is True


def test_409_messages_name_the_valid_states(app, api):
    order = app.seed_order(P.DO_OFFERING_UUID, state="executing", attributes={"name": "vm"})
    again = api.post(f"{ORDERS}{order['uuid']}/approve_by_provider/", json={})
    assert again.json == {"detail": "Valid states for operation: pending-provider."}
    executing = api.post(f"{ORDERS}{order['uuid']}/set_state_executing/")
    assert executing.json == {"detail": "Valid states for operation: pending-consumer, pending-provider, erred."}
    done = app.seed_order(P.DO_OFFERING_UUID, state="done", attributes={"name": "vm2"})
    assert api.post(f"{ORDERS}{done['uuid']}/set_state_done/").json == {
        "detail": "Valid states for operation: executing."}


def test_create_order_lifecycle_and_callbacks(app, api):
    order_uuid, resource_uuid = P.DO_ORDER_UUID, P.DO_RESOURCE_UUID
    approved = api.post(f"{ORDERS}{order_uuid}/approve_by_provider/", json={})
    assert approved.json == {"detail": "Order has been approved."}
    order = api.get(f"{ORDERS}{order_uuid}/").json
    assert order["state"] == "executing"
    assert order["marketplace_resource_uuid"] == resource_uuid
    # Like real Waldur: resource_uuid is the plugin's scope, not the marketplace resource.
    assert order["resource_uuid"] and order["resource_uuid"] != resource_uuid
    assert order["provider_reviewed_by"] == "provider-agent"
    assert resource_state(app, resource_uuid) == "Creating"
    backend = api.post(f"{PRESOURCES}{resource_uuid}/set_backend_id/", json={"backend_id": "droplet-1"})
    assert backend.json == {"status": "Resource backend_id has been changed."}
    assert api.post(f"{ORDERS}{order_uuid}/set_state_done/").status_code == 200
    resource = app.resource(resource_uuid)
    assert (resource["state"], resource["backend_id"]) == ("OK", "droplet-1")
    assert resource["creation_order"]["state"] == "done"
    assert resource["order_in_progress"] is None


def test_erred_create_without_backend_id_keeps_its_resource_erred(app, api):
    # Waldur 7.0.7 keeps the resource of an erred Create, in state Erred, with no backend id.
    response = api.post(f"{ORDERS}{P.DO_ORDER_UUID}/set_state_erred/",
                        json={"error_message": "no capacity", "error_traceback": "Traceback: ..."})
    assert response.status_code == 200
    order = app.order(P.DO_ORDER_UUID)
    assert (order["state"], order["error_message"], order["error_traceback"]) == (
        "erred", "no capacity", "Traceback: ...")
    resource = api.get(f"{PRESOURCES}{P.DO_RESOURCE_UUID}/").json
    assert (resource["state"], resource["backend_id"], resource["error_message"]) == ("Erred", "", "no capacity")


def test_a_create_without_name_is_taken_and_erred_by_waldur_at_approval(app, api):
    body = _order_body(attributes={"region": "ams3"})
    created = api.post(ORDERS, json=body, token=P.CONSUMER_TOKEN)
    assert created.status_code == 201 and created.json["state"] == "pending-provider"
    order_uuid, resource_uuid = created.json["uuid"], created.json["marketplace_resource_uuid"]

    assert api.post(f"{ORDERS}{order_uuid}/approve_by_provider/", json={}).status_code == 200

    order = api.get(f"{ORDERS}{order_uuid}/").json
    assert order["state"] == "erred" and "name" in order["error_message"]
    assert resource_state(app, resource_uuid) == "Erred"
    assert api.post(f"{ORDERS}{order_uuid}/set_state_done/").status_code == 409


def test_erred_create_with_backend_id_marks_the_resource_erred(app, api):
    api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={})
    api.post(f"{PRESOURCES}{P.DO_RESOURCE_UUID}/set_backend_id/", json={"backend_id": "droplet-1"})
    api.post(f"{ORDERS}{P.DO_ORDER_UUID}/set_state_erred/", json={"error_message": "boom"})
    resource = app.resource(P.DO_RESOURCE_UUID)
    assert (resource["state"], resource["error_message"]) == ("Erred", "boom")


def test_rejected_create_terminates_its_resource(app, api):
    assert api.post(f"{ORDERS}{P.AZURE_ORDER_UUID}/reject_by_provider/", json={}).status_code == 200
    assert resource_state(app, P.AZURE_RESOURCE_UUID) == "Terminated"


def test_update_and_terminate_orders_from_the_consumer(app, api):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="42", limits={"cpu": 1, "ram": 1024})
    path = f"{CRESOURCES}{resource['uuid']}/"
    update = api.post(path + "update_limits/", json={"limits": {"cpu": 2, "ram": 2048}}, token=P.CONSUMER_TOKEN)
    assert update.status_code == 200
    update_uuid = update.json["order_uuid"]
    order = app.order(update_uuid)
    assert (order["type"], order["state"], order["limits"]) == ("Update", "pending-provider", {"cpu": 2, "ram": 2048})
    second = api.post(path + "terminate/", json={}, token=P.CONSUMER_TOKEN)
    assert second.status_code == 409  # one order in progress per resource
    api.post(f"{ORDERS}{update_uuid}/approve_by_provider/", json={})
    assert resource_state(app, resource["uuid"]) == "Updating"
    api.post(f"{ORDERS}{update_uuid}/set_state_done/")
    after = app.resource(resource["uuid"])
    assert (after["state"], after["limits"]) == ("OK", {"cpu": 2, "ram": 2048})

    terminate = api.post(path + "terminate/", json={"attributes": {"reason": "done"}}, token=P.CONSUMER_TOKEN)
    terminate_uuid = terminate.json["order_uuid"]
    assert app.order(terminate_uuid)["type"] == "Terminate"
    api.post(f"{ORDERS}{terminate_uuid}/approve_by_provider/", json={})
    assert resource_state(app, resource["uuid"]) == "Terminating"
    api.post(f"{ORDERS}{terminate_uuid}/set_state_done/")
    assert resource_state(app, resource["uuid"]) == "Terminated"
    assert api.post(path + "terminate/", json={}, token=P.CONSUMER_TOKEN).json == {
        "detail": "Valid states for operation: OK, Erred."}


def test_erred_terminate_keeps_the_resource_ok(app, api):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="42")
    order = app.seed_order(P.DO_OFFERING_UUID, type="Terminate", state="pending-provider",
                           resource_uuid=resource["uuid"])
    api.post(f"{ORDERS}{order['uuid']}/approve_by_provider/", json={})
    assert resource_state(app, resource["uuid"]) == "Terminating"
    api.post(f"{ORDERS}{order['uuid']}/set_state_erred/", json={"error_message": "busy"})
    assert resource_state(app, resource["uuid"]) == "OK"


def test_approve_by_consumer_moves_to_pending_provider(app, api):
    order = app.seed_order(P.DO_OFFERING_UUID, state="pending-consumer", attributes={"name": "vm"})
    assert api.post(f"{ORDERS}{order['uuid']}/approve_by_consumer/").status_code == 403
    assert api.post(f"{ORDERS}{order['uuid']}/approve_by_consumer/", token=P.CONSUMER_TOKEN).status_code == 200
    assert order_state(app, order["uuid"]) == "pending-provider"


def test_update_limits_rejects_unknown_components(app, api):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="42")
    response = api.post(f"{CRESOURCES}{resource['uuid']}/update_limits/", json={"limits": {"gpu": 1}},
                        token=P.CONSUMER_TOKEN)
    assert response.status_code == 400
    assert response.json == {"limits": ["Invalid components: gpu."]}


# ---------------------------------------------------------------------------- consumer order create
def _order_body(offering_uuid=P.DO_OFFERING_UUID, plan_uuid=P.DO_PLAN_UUID, **extra):
    base = f"http://localhost/api/marketplace-public-offerings/{offering_uuid}/"
    body = {"offering": base, "project": f"http://localhost/api/projects/{P.PROJECT_UUID}/",
            "plan": f"{base}plans/{plan_uuid}/",
            "attributes": {"name": "web-1", "region": "ams3"}, "limits": {"cpu": 2, "ram": 2048, "disk": 1024},
            "type": "Create", "accepting_terms_of_service": True}
    body.update(extra)
    return body


def test_consumer_creates_an_order(app, api):
    response = api.post(ORDERS, json=_order_body(), token=P.CONSUMER_TOKEN)
    assert response.status_code == 201
    order = response.json
    assert (order["type"], order["state"], order["offering_uuid"], order["plan_uuid"]) == (
        "Create", "pending-provider", P.DO_OFFERING_UUID, P.DO_PLAN_UUID)
    resource = app.resource(order["marketplace_resource_uuid"])
    assert (resource["state"], resource["name"]) == ("Creating", "web-1")
    assert resource["attributes"] == {"name": "web-1", "region": "ams3"}
    assert resource["limits"] == {"cpu": 2, "ram": 2048, "disk": 1024}
    assert resource["project_uuid"] == P.PROJECT_UUID
    listed = api.get(ORDERS, query={"offering_uuid": P.DO_OFFERING_UUID, "state": "pending-provider"}).json
    assert order["uuid"] in [o["uuid"] for o in listed]


def test_order_create_accepts_bare_uuids(app, api):
    body = _order_body(P.AZURE_OFFERING_UUID, P.AZURE_PLAN_UUID)
    body.update(offering=P.AZURE_OFFERING_UUID, project=str(uuid_lib.UUID(P.PROJECT_UUID)), plan=P.AZURE_PLAN_UUID)
    response = api.post(ORDERS, json=body, token=P.CONSUMER_TOKEN)
    assert response.status_code == 201
    assert response.json["offering_uuid"] == P.AZURE_OFFERING_UUID


@pytest.mark.parametrize("change, error", [
    ({"attributes": {"name": 7}}, {"attributes": {"name": ["Not a valid string."]}}),
    ({"offering": f"http://localhost/api/marketplace-provider-offerings/{P.DO_OFFERING_UUID}/"},
     {"offering": ["Invalid hyperlink - Incorrect URL match."]}),
    ({"offering": "http://localhost/api/marketplace-public-offerings/" + "9" * 32 + "/"},
     {"offering": ["Invalid hyperlink - Object does not exist."]}),
    ({"plan": P.AZURE_PLAN_UUID}, {"plan": ["This plan is not available for selected offering."]}),
    ({"limits": {"cpu": 1, "gpu": 1}}, {"limits": ["Invalid components: gpu."]}),
    ({"limits": {"cpu": -1}}, {"limits": ["Limit of cpu must be a non-negative integer."]}),
])
def test_order_create_validation(app, api, change, error):
    before = len(app.market.resources)
    response = api.post(ORDERS, json=_order_body(**change), token=P.CONSUMER_TOKEN)
    assert response.status_code == 400
    assert response.json == error
    assert len(app.market.resources) == before


def test_provider_cannot_order_into_a_project_it_does_not_own(api):
    response = api.post(ORDERS, json=_order_body())
    assert response.status_code == 400
    assert response.json == {"project": ["Invalid hyperlink - Object does not exist."]}


# ---------------------------------------------------------------------------- paging, filters, field=
def _links(response) -> dict:
    return {rel: url for url, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', response.headers["Link"])}


def test_paging_link_header_keeps_query_params(app, api):
    app.reset("empty")
    for index in range(25):
        app.seed_order(P.DO_OFFERING_UUID, attributes={"name": f"vm-{index}"})
    app.seed_order(P.AZURE_OFFERING_UUID, attributes={"name": "elsewhere"})
    query = [("offering_uuid", P.DO_OFFERING_UUID), ("state", "pending-provider"), ("state", "executing"),
             ("page_size", "10")]
    first = api.get(ORDERS, query=query)
    assert first.headers["X-Result-Count"] == "25"
    assert len(first.json) == 10
    links = _links(first)
    assert set(links) == {"first", "next", "last"}
    assert links["next"] == (f"http://localhost/api/marketplace-orders/?offering_uuid={P.DO_OFFERING_UUID}"
                             "&page=2&page_size=10&state=pending-provider&state=executing")
    assert "page=" not in links["first"] and "page=3" in links["last"]
    second = api.get(ORDERS, query=query + [("page", "2")])
    assert set(_links(second)) == {"first", "prev", "next", "last"}
    assert "page=" not in _links(second)["prev"]
    third = api.get(ORDERS, query=query + [("page", "3")])
    assert len(third.json) == 5 and "next" not in _links(third)
    seen = [o["uuid"] for page in (first, second, third) for o in page.json]
    assert len(set(seen)) == 25
    # newest first, like Waldur's default ordering
    assert app.order(seen[0])["attributes"]["name"] == "vm-24"
    assert api.get(ORDERS, query=query + [("page", "4")]).status_code == 404


def test_default_page_size_is_10_and_max_is_300(app, api):
    keys = api.get(f"/api/marketplace-service-providers/{P.SERVICE_PROVIDER_UUID}/keys/")
    assert len(keys.json) == 10
    assert keys.headers["X-Result-Count"] == "12"
    assert "page=2" in _links(keys)["next"]
    rest = api.get(_links(keys)["next"].replace("http://localhost", ""))
    assert [k["uuid"] for k in rest.json] == [k["uuid"] for k in P.SSH_KEYS[10:]]
    for index in range(305):
        app.market.seed_resource(P.DO_OFFERING_UUID, f"vm-{index}")
    capped = api.get(PRESOURCES, query={"page_size": "1000"})
    assert len(capped.json) == 300
    assert capped.headers["X-Result-Count"] == "307"


def test_invalid_state_filter_is_400_and_unknown_filters_are_ignored(api):
    bad = api.get(ORDERS, query={"state": "bogus"})
    assert bad.status_code == 400
    assert bad.json == {"state": ["Select a valid choice. bogus is not one of the available choices."]}
    everything = api.get(ORDERS).json
    ignored = api.get(ORDERS, query={"modified_before": "2000-01-01T00:00:00Z"}).json
    assert len(ignored) == len(everything) == 2
    assert api.get(PRESOURCES, query={"state": "Running"}).status_code == 400
    assert api.get(ORDERS, query={"offering_uuid": "not-a-uuid"}).json == {"offering_uuid": ["Enter a valid UUID."]}


def test_field_returns_sparse_objects(app, api):
    listed = api.get(ORDERS, query=[("field", "uuid"), ("field", "state")]).json
    assert all(set(o) == {"uuid", "state"} for o in listed)
    one = api.get(f"{ORDERS}{P.DO_ORDER_UUID}/", query=[("field", "uuid"), ("field", "state"), ("field", "nope")])
    assert one.json == {"uuid": P.DO_ORDER_UUID, "state": "pending-provider"}
    offering = api.get(f"/api/marketplace-provider-offerings/{P.DO_OFFERING_UUID}/",
                       query=[("field", "components"), ("field", "customer_uuid"), ("field", "plugin_options")]).json
    assert set(offering) == {"components", "customer_uuid", "plugin_options"}
    resource = api.get(f"{PRESOURCES}{P.DO_RESOURCE_UUID}/", query=[("field", "backend_id")]).json
    assert resource == {"backend_id": ""}


def test_dashed_and_undashed_uuids(app, api):
    dashed = str(uuid_lib.UUID(P.DO_ORDER_UUID))
    by_dashed = api.get(f"{ORDERS}{dashed}/")
    assert by_dashed.status_code == 200
    assert by_dashed.json["uuid"] == P.DO_ORDER_UUID
    assert api.get(f"{ORDERS}{P.DO_ORDER_UUID.upper()}/").status_code == 200
    listed = api.get(ORDERS, query={"offering_uuid": str(uuid_lib.UUID(P.DO_OFFERING_UUID))}).json
    assert [o["uuid"] for o in listed] == [P.DO_ORDER_UUID]
    assert api.post(f"{ORDERS}{dashed}/approve_by_provider/", json={}).status_code == 200
    assert order_state(app, P.DO_ORDER_UUID) == "executing"
    missing = api.get(f"{ORDERS}{'9' * 32}/")
    assert missing.status_code == 404
    assert missing.json == {"detail": "No Order matches the given query."}
    assert api.get(f"{ORDERS}not-a-uuid/").status_code == 404


def test_repeated_offering_filter_and_consumer_order_view(app, api):
    app.seed_resource(P.DO_OFFERING_UUID, "do", backend_id="1")
    app.seed_resource(P.AZURE_OFFERING_UUID, "az", backend_id="2")
    both = api.get(PRESOURCES, query=[("offering_uuid", P.DO_OFFERING_UUID), ("offering_uuid", P.AZURE_OFFERING_UUID),
                                      ("state", "OK")]).json
    assert sorted(r["name"] for r in both) == ["az", "do"]
    one = api.get(PRESOURCES, query={"offering_uuid": P.AZURE_OFFERING_UUID, "state": "OK"}).json
    assert [r["name"] for r in one] == ["az"]
    mine = api.get(f"{ORDERS}{P.DO_ORDER_UUID}/", token=P.CONSUMER_TOKEN)
    assert (mine.status_code, mine.json["project_uuid"]) == (200, P.PROJECT_UUID)


def test_service_providers_filter_by_customer(api):
    assert api.get("/api/marketplace-service-providers/", query={"customer_uuid": P.CONSUMER_CUSTOMER_UUID}).json == []


def test_team_items_carry_the_required_keys(api):
    team = api.get(f"{PRESOURCES}{P.DO_RESOURCE_UUID}/team/").json
    assert [m["username"] for m in team] == ["alice", "bob"]
    required = {"url", "uuid", "username", "full_name", "role", "expiration_time",
                "offering_user_username", "offering_user_state"}
    assert all(required <= set(member) for member in team)


def test_resource_writes_answer_status(app, api):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1")
    path = f"{PRESOURCES}{resource['uuid']}/"
    assert api.post(path + "set_backend_metadata/", json={"backend_metadata": {"ip": "10.0.0.1"}}).json == {
        "status": "The backend metadata is updated"}
    limits = api.post(path + "set_limits/", json={"limits": {"cpu": 4, "ram": 8192}})
    assert set(limits.json) == {"status"}
    after = app.resource(resource["uuid"])
    assert (after["backend_metadata"], after["limits"]) == ({"ip": "10.0.0.1"}, {"cpu": 4, "ram": 8192})
    assert api.post(path + "set_limits/", json={"limits": {"gpu": 1}}).status_code == 400
    # integer fields, as in Waldur: 2.0 is read as 2, 2.5 is refused
    assert api.post(path + "set_limits/", json={"limits": {"cpu": 2.0}}).status_code == 200
    assert app.resource(resource["uuid"])["limits"] == {"cpu": 2}
    assert api.post(path + "set_limits/", json={"limits": {"cpu": 2.5}}).json == {
        "limits": ["Limit of cpu must be a non-negative integer."]}
    assert api.post(path + "set_backend_metadata/", json={}).status_code == 400


# ---------------------------------------------------------------------------- usage
def test_set_usage_overwrites_the_same_component_and_month(app, api):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1")
    first = api.post(SET_USAGE, json={"resource": resource["uuid"],
                                      "usages": [{"type": "cpu", "amount": "12.5"}, {"type": "ram", "amount": "30"}]})
    assert (first.status_code, first.data) == (201, b"")
    api.post(SET_USAGE, json={"resource": str(uuid_lib.UUID(resource["uuid"])),
                              "usages": [{"type": "cpu", "amount": "15"}]})
    stored = {u["type"]: u for u in app.usages(resource["uuid"])}
    assert {t: u["usage"] for t, u in stored.items()} == {"cpu": "15.00", "ram": "30.00"}
    assert stored["cpu"]["billing_period"] == current_month()
    listed = api.get("/api/marketplace-component-usages/",
                     query={"resource_uuid": resource["uuid"], "billing_period": current_month()}).json
    assert sorted(u["usage"] for u in listed) == ["15.00", "30.00"]


def test_set_usage_uses_the_month_of_date(app, api):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1")
    api.post(SET_USAGE, json={"resource": resource["uuid"], "date": "2025-03-01T00:00:00+02:00",
                              "usages": [{"type": "disk", "amount": "7.25"}]})
    assert [u["billing_period"] for u in app.usages(resource["uuid"])] == ["2025-03-01"]
    assert app.usages(resource["uuid"], billing_period=date(2025, 3, 1))[0]["usage"] == "7.25"
    assert app.usages(resource["uuid"], billing_period=current_month()) == []


def test_set_usage_rejects_unknown_components_and_stores_nothing(app, api):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1")
    response = api.post(SET_USAGE, json={"resource": resource["uuid"],
                                         "usages": [{"type": "cpu", "amount": "1"}, {"type": "gpu", "amount": "1"}]})
    assert response.status_code == 400
    assert response.json == {"non_field_errors": ["These components are invalid: gpu."]}
    assert app.usages(resource["uuid"]) == []


@pytest.mark.parametrize("state, status", [("OK", 201), ("Updating", 201), ("Terminating", 201),
                                           ("Creating", 400), ("Erred", 400), ("Terminated", 400)])
def test_set_usage_needs_a_resource_in_a_usage_state(app, api, state, status):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1", state=state)
    response = api.post(SET_USAGE, json={"resource": resource["uuid"], "usages": [{"type": "cpu", "amount": "1"}]})
    assert response.status_code == status


def test_set_usage_amount_validation(app, api):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="1")
    too_precise = api.post(SET_USAGE, json={"resource": resource["uuid"], "usages": [{"type": "cpu", "amount": "1.234"}]})
    assert too_precise.json == {"usages": [{"amount": ["Ensure that there are no more than 2 decimal places."]}]}
    missing = api.post(SET_USAGE, json={"usages": [{"type": "cpu", "amount": "1"}]})
    assert missing.json == {"non_field_errors": ["Either plan_period or resource should be provided."]}
    assert app.usages() == []


# ---------------------------------------------------------------------------- offering components
def test_offering_components_create_and_update(app, api):
    base = f"/api/marketplace-provider-offerings/{P.AZURE_OFFERING_UUID}/"
    created = api.post(base + "create_offering_component/",
                       json={"type": "gpu", "name": "GPU", "billing_type": "usage", "measured_unit": "hours"})
    assert (created.status_code, created.data) == (201, b"")
    assert api.post(base + "create_offering_component/",
                    json={"type": "gpu", "name": "GPU", "billing_type": "usage"}).status_code == 400
    components = {c["type"]: c for c in api.get(base).json["components"]}
    assert components["gpu"]["billing_type"] == "usage"
    updated = api.post(base + "update_offering_component/",
                       json={"uuid": components["cpu"]["uuid"], "type": "cpu", "name": "vCPU",
                             "billing_type": "limit", "unit_factor": 2})
    assert updated.status_code == 200
    cpu = next(c for c in api.get(base).json["components"] if c["type"] == "cpu")
    assert (cpu["name"], cpu["unit_factor"]) == ("vCPU", 2)
    assert api.post(base + "update_offering_component/",
                    json={"uuid": "9" * 32, "type": "cpu", "name": "x", "billing_type": "limit"}).status_code == 404
    assert api.post(base + "create_offering_component/",
                    json={"type": "x", "name": "X", "billing_type": "bogus"}).status_code == 400
    resource = app.seed_resource(P.AZURE_OFFERING_UUID, "vm", backend_id="1")
    usage = api.post(SET_USAGE, json={"resource": resource["uuid"], "usages": [{"type": "gpu", "amount": "2"}]})
    assert usage.status_code == 201


# ---------------------------------------------------------------------------- faults, call log, quirks
def test_fault_on_the_nth_call(app, api):
    app.add_fault("orders.get", status=500, nth=2)
    statuses = [api.get(f"{ORDERS}{P.DO_ORDER_UUID}/").status_code for _attempt in range(3)]
    assert statuses == [200, 500, 200]
    assert [c["operation"] for c in app.calls] == ["orders.get"] * 3


def test_503_burst_then_recovery(app, api):
    app.add_fault("orders.approve_by_provider", status=503, times=3)
    statuses = [api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={}).status_code for _attempt in range(4)]
    assert statuses == [503, 503, 503, 200]
    assert order_state(app, P.DO_ORDER_UUID) == "executing"


def test_429_with_retry_after(app, api):
    app.add_fault("usages.list", status=429, retry_after=7)
    throttled = api.get("/api/marketplace-component-usages/")
    assert throttled.status_code == 429
    assert throttled.headers["Retry-After"] == "7"
    assert throttled.json == {"detail": "Request was throttled. Expected available in 7 seconds."}
    assert api.get("/api/marketplace-component-usages/").status_code == 200


def test_faults_through_the_control_api(app, api):
    api.client.post("/_sim/faults", json={"operation": "users.me", "status": 502})
    assert api.get("/api/users/me/").status_code == 502
    assert api.get("/api/users/me/").status_code == 200


def test_call_log_write_flags(app, api):
    api.get(ORDERS)
    api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={})
    api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={})  # 409: not a write
    assert [(c["operation"], c["status"], c["write"]) for c in app.calls] == [
        ("orders.list", 200, False), ("orders.approve_by_provider", 200, True),
        ("orders.approve_by_provider", 409, False)]
    assert [c["operation"] for c in app.write_calls()] == ["orders.approve_by_provider"]
    assert app.write_calls(since=2) == []


def test_empty_bodies_quirk(api):
    quirky = Api(WaldurSimulator(empty_bodies=True))
    response = quirky.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={})
    assert (response.status_code, response.data) == (200, b"")
    assert quirky.post(f"{ORDERS}{P.DO_ORDER_UUID}/set_state_done/").data == b""
    # set_backend_id keeps its body: 7.0.7 answered {"status": ...} there too
    assert "status" in quirky.post(f"{PRESOURCES}{P.DO_RESOURCE_UUID}/set_backend_id/", json={"backend_id": "1"}).json
    assert api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={}).json == {
        "detail": "Order has been approved."}
    api.app.set_quirks(empty_bodies=True)
    assert api.post(f"{ORDERS}{P.AZURE_ORDER_UUID}/approve_by_provider/", json={}).data == b""
    api.app.reset()
    assert not any(api.app.quirks.values())
    assert api.client.post("/_sim/quirks", json={"empty_bodies": True}).json == {
        "empty_bodies": True, "usage_ignores_date": False, "no_set_as_ok": False, "no_set_paused": False,
        "processing_delay": 0.0, "processor_errs_updates": False, "future_prices": False,
        "waldur_slugs": False, "no_restore": False}
    assert api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={}).data == b""
    with pytest.raises(ValueError):
        api.app.set_quirks(bogus=True)


def test_reset_restores_state_and_clears_logs(app, api):
    app.add_fault("orders.list", status=500, times=-1)
    api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={})
    app.seed_resource(P.DO_OFFERING_UUID, "extra")
    app.set_quirks(empty_bodies=True)
    app.reset()
    assert (app.calls, app.exchanges, app.faults) == ([], [], [])
    assert order_state(app, P.DO_ORDER_UUID) == "pending-provider"
    assert len(app.market.resources) == 2
    assert app.quirks["empty_bodies"] is False
    assert api.get(ORDERS).status_code == 200


def test_exchanges_record_what_a_validator_needs(app, api):
    api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={"attributes": {}})
    api.get(ORDERS, query=[("state", "executing"), ("field", "uuid")])
    api.client.get("/_sim/state")  # control calls are not exchanges
    assert len(app.exchanges) == 2
    post, get = app.exchanges
    assert (post["method"], post["operation"], post["status"]) == ("POST", "orders.approve_by_provider", 200)
    assert post["request_headers"]["Authorization"] == f"Token {P.PROVIDER_TOKEN}"
    assert json.loads(post["request_body"]) == {"attributes": {}}
    assert json.loads(post["response_body"]) == {"detail": "Order has been approved."}
    assert get["url"] == "http://localhost/api/marketplace-orders/?state=executing&field=uuid"
    assert get["response_headers"]["X-Result-Count"] == "1"
    assert json.loads(get["response_body"]) == [{"uuid": P.DO_ORDER_UUID}]


def test_exchanges_are_bounded_for_long_running_servers():
    small = Api(WaldurSimulator(max_exchanges=3))
    for _attempt in range(5):
        small.get("/api/users/me/")
    assert [e["seq"] for e in small.app.exchanges] == [2, 3, 4]


def test_state_dump_and_seeding_over_the_control_api(app, api):
    seeded = api.client.post("/_sim/seed/resource", json={
        "offering_uuid": P.DO_OFFERING_UUID, "name": "db-1", "backend_id": "77", "limits": {"cpu": 1}})
    assert seeded.status_code == 201
    order = api.client.post("/_sim/seed/order", json={
        "offering_uuid": P.DO_OFFERING_UUID, "type": "Terminate", "resource_uuid": seeded.json["uuid"]}).json
    state = api.client.get("/_sim/state").json
    assert {o["uuid"] for o in state["orders"]} == {P.DO_ORDER_UUID, P.AZURE_ORDER_UUID, order["uuid"]}
    assert seeded.json["uuid"] in [r["uuid"] for r in state["resources"]]
    assert state["usages"] == []
    assert api.client.post("/_sim/seed/order", json={"offering_uuid": P.DO_OFFERING_UUID,
                                                     "type": "Update"}).status_code == 400


def test_command_line_server_starts_and_serves(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "tests.simulators", "waldur", "--port", "0",
                                "--option", "empty_bodies=true"],
                               cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(process.stdout.readline())
        assert info["simulator"] == "waldur"
        response = requests.post(f"{info['url']}/api/marketplace-orders/{P.DO_ORDER_UUID}/approve_by_provider/",
                                 json={}, headers={"Authorization": f"Token {P.PROVIDER_TOKEN}"}, timeout=10)
        assert (response.status_code, response.content) == (200, b"")
    finally:
        process.terminate()
        process.wait(timeout=10)


# ---- 7.0.7's behaviour where the agent meets it (real-waldur-samples.md section 6b) ----------

def _update_order(api, app, limits):
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="droplet-1", plan_uuid=P.DO_PLAN_UUID)
    order_uuid = api.post(f"/api/marketplace-resources/{resource['uuid']}/update_limits/",
                          json={"limits": limits}, token=P.CONSUMER_TOKEN).json["order_uuid"]
    assert api.post(f"{ORDERS}{order_uuid}/approve_by_provider/", json={}).status_code == 200
    return resource["uuid"], order_uuid


def test_erring_an_update_order_marks_its_resource_erred_and_usage_is_refused(app, api):
    resource_uuid, order_uuid = _update_order(api, app, {"cpu": 2, "ram": 4096, "disk": 81920})
    api.post(f"{ORDERS}{order_uuid}/set_state_erred/", json={"error_message": "no size"})
    assert app.resource(resource_uuid)["state"] == "Erred"
    usage = {"resource": resource_uuid, "usages": [{"type": "cpu", "amount": "1.00"}]}
    refused = api.post(SET_USAGE, json=usage)
    assert (refused.status_code, refused.json) == (400, {"resource": ["Resource is not in valid state."]})

    assert api.post(f"{PRESOURCES}{resource_uuid}/set_as_ok/").status_code == 200
    resource = app.resource(resource_uuid)
    assert (resource["state"], resource["error_message"]) == ("OK", "")
    assert api.post(SET_USAGE, json=usage).status_code == 201


def test_plans_price_each_component_and_an_update_on_an_unpriced_one_cannot_finish(app, api):
    offering = api.get(f"/api/marketplace-provider-offerings/{P.DO_OFFERING_UUID}/").json
    assert offering["plans"][0]["prices"] == {"cpu": 4.0, "ram": 0.005, "disk": 0.0001}
    api.post(f"/api/marketplace-provider-offerings/{P.DO_OFFERING_UUID}/create_offering_component/",
             json={"billing_type": "limit", "name": "GPU", "type": "gpu", "measured_unit": "GPUs"})
    plan = api.get(f"/api/marketplace-plans/{P.DO_PLAN_UUID}/").json
    assert "gpu" not in plan["prices"] and "gpu" not in [c["type"] for c in plan["components"]]

    _resource_uuid, order_uuid = _update_order(api, app, {"cpu": 1, "ram": 1024, "disk": 25600, "gpu": 1})
    failed = api.post(f"{ORDERS}{order_uuid}/set_state_done/")
    assert failed.status_code == 500 and failed.content_type.startswith("text/html")
    assert b"PlanComponent matching query does not exist" in failed.data
    assert order_state(app, order_uuid) == "executing"

    bad = api.post(f"/api/marketplace-plans/{P.DO_PLAN_UUID}/update_prices/", json={"prices": {"gpu": -1}})
    assert bad.status_code == 400
    priced = api.post(f"/api/marketplace-plans/{P.DO_PLAN_UUID}/update_prices/", json={"prices": {"gpu": "2.5"}})
    assert (priced.status_code, priced.data) == (200, b"")
    assert api.get(f"/api/marketplace-plans/{P.DO_PLAN_UUID}/").json["prices"]["gpu"] == 2.5
    assert api.post(f"{ORDERS}{order_uuid}/set_state_done/").status_code == 200
    assert order_state(app, order_uuid) == "done"


def test_the_waldur_7_profile_ignores_the_usage_date_and_lacks_set_as_ok_and_set_paused():
    old = Api(WaldurSimulator(profile="waldur_7", preset="empty"))
    resource = old.app.seed_resource(P.DO_OFFERING_UUID, "vm", backend_id="droplet-1", state="Erred")
    missing = old.post(f"{PRESOURCES}{resource['uuid']}/set_as_ok/")
    assert missing.status_code == 404 and missing.content_type.startswith("text/html")
    paused = old.post(f"{PRESOURCES}{resource['uuid']}/set_paused/", json={"paused": True}, token=P.STAFF_TOKEN)
    assert paused.status_code == 404
    old.app.market.resources[resource["uuid"]]["state"] = "OK"
    usage = {"resource": resource["uuid"], "date": "2020-01-01T00:00:00+00:00",
             "usages": [{"type": "cpu", "amount": "3.00"}]}
    assert old.post(SET_USAGE, json=usage).status_code == 201
    this_month = date.today().replace(day=1).isoformat()
    assert [u["billing_period"] for u in old.app.usages(resource["uuid"])] == [this_month]
    with pytest.raises(ValueError, match="unknown Waldur profile"):
        WaldurSimulator(profile="waldur_6")


# ---- Waldur processing an approval later, in its worker (real-waldur-samples.md section 6c) ----

def _wait_for(predicate, seconds=5.0):
    import time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_processing_delay_runs_the_processor_later_in_the_background():
    app = WaldurSimulator(processing_delay="0.3")
    api = Api(app)
    assert app.quirks["processing_delay"] == 0.3
    assert api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={}).status_code == 200
    order = api.get(f"{ORDERS}{P.DO_ORDER_UUID}/").json
    # read right after approving: executing, and the processor has not made the plugin's scope yet
    assert (order["state"], order["resource_uuid"], order["resource_type"]) == ("executing", None, None)
    assert _wait_for(lambda: app.order(P.DO_ORDER_UUID)["resource_uuid"] is not None)
    assert app.order(P.DO_ORDER_UUID)["resource_type"] == "SLURM.Allocation"
    assert app.order(P.DO_ORDER_UUID)["state"] == "executing"


def test_a_nameless_create_is_erred_when_the_processor_runs_even_once_done():
    app = WaldurSimulator(processing_delay=0.3, preset="empty")
    api = Api(app)
    order = app.seed_order(P.DO_OFFERING_UUID, attributes={"name": ""})
    resource_uuid = order["marketplace_resource_uuid"]
    api.post(f"{ORDERS}{order['uuid']}/approve_by_provider/", json={})
    api.post(f"{PRESOURCES}{resource_uuid}/set_backend_id/", json={"backend_id": "418000001"})
    assert api.post(f"{ORDERS}{order['uuid']}/set_state_done/").status_code == 200
    assert (order_state(app, order["uuid"]), resource_state(app, resource_uuid)) == ("done", "OK")
    assert _wait_for(lambda: order_state(app, order["uuid"]) == "erred")
    erred = app.order(order["uuid"])
    resource = app.resource(resource_uuid)
    assert erred["error_message"] == "'name'"
    assert (resource["state"], resource["backend_id"]) == ("Erred", "418000001")


def test_processor_runs_after_an_operation_for_tests(app, api):
    order = app.seed_order(P.DO_OFFERING_UUID, state="executing", attributes={"name": ""})
    app.process_after("orders.set_state_done", order["uuid"])
    assert order_state(app, order["uuid"]) == "executing"
    assert api.post(f"{ORDERS}{order['uuid']}/set_state_done/").status_code == 200
    assert order_state(app, order["uuid"]) == "erred"  # the worker ran right after
    other = app.seed_order(P.DO_OFFERING_UUID, state="executing", attributes={"name": ""})
    assert api.client.post("/_sim/process", json={"order_uuid": other["uuid"]}).status_code == 200
    assert order_state(app, other["uuid"]) == "erred"


def test_reset_cancels_pending_processors_and_resets_quirks():
    app = WaldurSimulator(processing_delay=0.2)
    api = Api(app)
    app.set_quirks(processor_errs_updates=True, processing_delay=0.3)
    api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={})
    app.reset()
    assert app.quirks["processing_delay"] == 0.2 and app.quirks["processor_errs_updates"] is False
    import time
    time.sleep(0.4)
    assert order_state(app, P.DO_ORDER_UUID) == "pending-provider"
    with pytest.raises(ValueError, match="seconds"):
        app.set_quirks(processing_delay="soon")
    assert api.client.post("/_sim/quirks", json={"processing_delay": -1}).status_code == 400


def test_the_processor_errs_updates_unless_the_backing_record_is_ok():
    app = WaldurSimulator(profile="waldur_7", preset="empty")
    api = Api(app)
    assert app.quirks["processor_errs_updates"] is True
    resource_uuid, order_uuid = _update_order(api, app, {"cpu": 2, "ram": 2048, "disk": 25600})
    order = app.order(order_uuid)
    assert (order["state"], order["error_message"]) == (
        "erred", "Can't switch from state '5' using method 'schedule_updating'")
    assert resource_state(app, resource_uuid) == "OK"  # a Waldur-erred Update leaves the resource OK
    assert api.post(f"{ORDERS}{order_uuid}/set_state_done/").status_code == 409

    assert api.client.post("/_sim/backing_state", json={"resource_uuid": resource_uuid}).status_code == 200
    second = api.post(f"{CRESOURCES}{resource_uuid}/update_limits/", token=P.CONSUMER_TOKEN,
                      json={"limits": {"cpu": 2, "ram": 2048, "disk": 25600}}).json["order_uuid"]
    api.post(f"{ORDERS}{second}/approve_by_provider/", json={})
    assert (order_state(app, second), resource_state(app, resource_uuid)) == ("executing", "Updating")
    api.post(f"{ORDERS}{second}/set_state_done/")
    # after an Update the allocation is Update Scheduled (1): the next Update errs again
    third = api.post(f"{CRESOURCES}{resource_uuid}/update_limits/", token=P.CONSUMER_TOKEN,
                     json={"limits": {"cpu": 1, "ram": 1024, "disk": 25600}}).json["order_uuid"]
    api.post(f"{ORDERS}{third}/approve_by_provider/", json={})
    assert app.order(third)["error_message"] == "Can't switch from state '1' using method 'schedule_updating'"
    # a Terminate goes through from state 1
    terminate = api.post(f"{CRESOURCES}{resource_uuid}/terminate/", token=P.CONSUMER_TOKEN).json["order_uuid"]
    api.post(f"{ORDERS}{terminate}/approve_by_provider/", json={})
    assert (order_state(app, terminate), resource_state(app, resource_uuid)) == ("executing", "Terminating")
    # the default profile (current Waldur) takes every Update
    current = Api(WaldurSimulator(preset="empty"))
    _resource, order_uuid = _update_order(current, current.app, {"cpu": 2, "ram": 2048, "disk": 25600})
    assert order_state(current.app, order_uuid) == "executing"


def test_update_prices_on_a_plan_in_use_writes_future_prices():
    app = WaldurSimulator(profile="waldur_7", preset="empty")
    api = Api(app)
    plan_path = f"/api/marketplace-plans/{P.DO_PLAN_UUID}/"
    # no resource on the plan: the prices themselves
    assert api.post(plan_path + "update_prices/", json={"prices": {"disk": "0.0002"}}).status_code == 200
    assert api.get(plan_path).json["prices"]["disk"] == 0.0002
    app.seed_resource(P.DO_OFFERING_UUID, "vm", plan_uuid=P.DO_PLAN_UUID)
    assert api.post(plan_path + "update_prices/", json={"prices": {"disk": "0.0003"}}).status_code == 200
    plan = api.get(plan_path).json
    assert plan["prices"]["disk"] == 0.0002 and plan["future_prices"] == {"disk": 0.0003}
    disk = next(c for c in plan["components"] if c["type"] == "disk")
    assert (disk["price"], disk["future_price"]) == ("0.0002000000", "0.0003000000")
    # the default profile changes the prices themselves
    current = Api(WaldurSimulator())
    current.app.seed_resource(P.DO_OFFERING_UUID, "vm", plan_uuid=P.DO_PLAN_UUID)
    current.post(plan_path + "update_prices/", json={"prices": {"disk": "0.0003"}})
    assert current.get(plan_path).json["prices"]["disk"] == 0.0003
    assert current.get(plan_path).json["future_prices"] == {}


def test_waldur_7_slugs_and_no_restore():
    app = WaldurSimulator(profile="waldur_7", preset="empty")
    api = Api(app)
    assert app.seed_resource(P.DO_OFFERING_UUID, "alloc-one")["slug"] == "alloc-on-1"
    assert app.seed_resource(P.DO_OFFERING_UUID, "Consumer Project")["slug"] == "consumer-1"
    assert app.seed_resource(P.DO_OFFERING_UUID, "")["slug"] == "-3"
    refused = api.post(ORDERS, json=_order_body(type="Restore"), token=P.CONSUMER_TOKEN)
    assert (refused.status_code, refused.json) == (400, {"type": ['"Restore" is not a valid choice.']})
    with pytest.raises(ValueError, match="not a valid choice"):
        app.seed_order(P.DO_OFFERING_UUID, type="Restore", resource_uuid=P.DO_RESOURCE_UUID)
    assert WaldurSimulator(preset="empty").seed_resource(P.DO_OFFERING_UUID, "")["slug"] == "resource"


def test_orders_filter_modified_after(app, api):
    stamp = datetime.now(timezone.utc).isoformat()
    api.post(f"{ORDERS}{P.DO_ORDER_UUID}/approve_by_provider/", json={})
    listed = api.get(ORDERS, query={"modified": stamp}).json
    assert [o["uuid"] for o in listed] == [P.DO_ORDER_UUID]
    assert api.get(ORDERS, query={"modified": "yesterday"}).status_code == 400
