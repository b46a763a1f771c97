"""The Waldur simulator's site agent identities, event queues and event publishing
(tests/simulators/waldur/events.py), without a broker: a recording stand-in takes the
provisioning and publishing calls."""

from __future__ import annotations

import json

import pytest
from waldur_api_client.models.agent_queue_registration_request import AgentQueueRegistrationRequest
from waldur_api_client.models.agent_queue_registration_response import AgentQueueRegistrationResponse
from werkzeug.test import Client

from tests.contract.waldur_openapi import validate_exchanges
from tests.simulators.waldur import presets as P
from tests.simulators.waldur import WaldurSimulator

IDENTITIES = "/api/marketplace-site-agent-identities/"
ORDERS = "/api/marketplace-orders/"
PRESOURCES = "/api/marketplace-provider-resources/"


class RecordingBroker:
    def __init__(self, fail_publish=False):
        self.provisioned = []
        self.published = []
        self.fail_publish = fail_publish

    def provision(self, vhost, username, password, queue):
        self.provisioned.append((vhost, username, password, queue))

    def publish(self, vhost, queue, body):
        if self.fail_publish:
            raise ConnectionError("broker down")
        self.published.append((vhost, queue, body))


class Api:
    def __init__(self, app):
        self.app = app
        self.client = Client(app)

    def call(self, method, path, token=P.PROVIDER_TOKEN, json=None, query=None):
        headers = {"Authorization": f"Token {token}"} if token else {}
        return self.client.open(path, method=method, json=json, query_string=query, headers=headers)


@pytest.fixture
def broker():
    return RecordingBroker()


@pytest.fixture
def app(broker):
    return WaldurSimulator(preset="empty", broker=broker)


@pytest.fixture
def api(app):
    return Api(app)


def identity_body(offering=P.DO_OFFERING_UUID, **extra):
    body = {"offering": offering, "name": f"agent-{offering}", "version": "0.1.0",
            "last_restarted": "2026-11-29T12:00:00+00:00", "dependencies": [{"package": "stomp-py", "version": "9"}],
            "config_file_path": "", "config_file_content": ""}
    body.update(extra)
    return body


def register(api, object_types=("order", "resource"), offering=P.DO_OFFERING_UUID):
    identity = api.call("POST", IDENTITIES, json=identity_body(offering)).json
    queue = api.call("POST", f"{IDENTITIES}{identity['uuid']}/register_queue/",
                     json={"object_types": list(object_types)})
    return identity, queue


def test_identity_lifecycle(api, app):
    created = api.call("POST", IDENTITIES, json=identity_body())
    assert created.status_code == 201
    uuid = created.json["uuid"]
    assert created.json["name"] == f"agent-{P.DO_OFFERING_UUID}" and created.json["offering"] == P.DO_OFFERING_UUID
    found = api.call("GET", IDENTITIES, query={"name": f"agent-{P.DO_OFFERING_UUID}"})
    assert [i["uuid"] for i in found.json] == [uuid] and found.headers["X-Result-Count"] == "1"
    assert api.call("GET", IDENTITIES, query={"name": "agent-other"}).json == []
    updated = api.call("PUT", f"{IDENTITIES}{uuid}/", json=identity_body(version="0.2.0"))
    assert updated.status_code == 200 and updated.json["version"] == "0.2.0"
    service = api.call("POST", f"{IDENTITIES}{uuid}/register_service/",
                       json={"name": "event_process", "mode": "event_process"})
    again = api.call("POST", f"{IDENTITIES}{uuid}/register_service/", json={"name": "event_process"})
    assert (service.status_code, again.status_code) == (201, 200)
    assert again.json["uuid"] == service.json["uuid"] and again.json["identity_name"] == created.json["name"]
    assert [s["name"] for s in api.call("GET", f"{IDENTITIES}{uuid}/").json["services"]] == ["event_process"]
    # Every exchange so far is what Waldur's 8.0.5 OpenAPI schema describes.
    assert validate_exchanges(app.exchanges) == []


def test_duplicate_names_and_strangers_are_refused(api):
    assert api.call("POST", IDENTITIES, json=identity_body()).status_code == 201
    duplicate = api.call("POST", IDENTITIES, json=identity_body())
    assert duplicate.status_code == 400 and "name" in duplicate.json
    # The consumer manages no offering: it may not register an agent for one, nor see ours.
    assert api.call("POST", IDENTITIES, token=P.CONSUMER_TOKEN,
                    json=identity_body(name="agent-x")).status_code == 403
    assert api.call("GET", IDENTITIES, token=P.CONSUMER_TOKEN).json == []
    bad = api.call("POST", IDENTITIES, json=identity_body(offering="nope", name="agent-nope"))
    assert bad.status_code == 400 and bad.json == {"offering": ["Must be a valid UUID."]}
    assert api.call("GET", f"{IDENTITIES}{'9' * 32}/").status_code == 404


def test_register_queue_provisions_the_broker_and_keeps_the_queue(api, app, broker):
    identity, queue = register(api)
    assert queue.status_code == 201
    data = AgentQueueRegistrationResponse.from_dict(queue.json)  # the shape Waldur's client parses
    assert data.queue_name.startswith("consumer_") and data.rmq_username == data.vhost == P.PROVIDER_USER_UUID
    assert data.observable_object_types == ["order", "resource"]
    assert broker.provisioned == [(P.PROVIDER_USER_UUID, P.PROVIDER_USER_UUID, P.PROVIDER_TOKEN, data.queue_name)]
    again = api.call("POST", f"{IDENTITIES}{identity['uuid']}/register_queue/", json={})
    assert again.status_code == 200 and again.json["queue_name"] == data.queue_name
    assert again.json["observable_object_types"] == ["order", "resource"]  # omitted: unchanged
    assert len(broker.provisioned) == 2  # each registration re-provisions: heals a lost queue
    AgentQueueRegistrationRequest.from_dict({"object_types": ["order", "resource"]})
    bad = api.call("POST", f"{IDENTITIES}{identity['uuid']}/register_queue/", json={"object_types": ["nope"]})
    assert bad.status_code == 400 and bad.json == {"object_types": {"0": ['"nope" is not a valid choice.']}}


def submit_order(api, name="vm-1"):
    response = api.call("POST", ORDERS, token=P.CONSUMER_TOKEN, json={
        "offering": P.DO_OFFERING_UUID, "project": P.PROJECT_UUID, "plan": P.DO_PLAN_UUID,
        "attributes": {"name": name}, "limits": {"cpu": 1}})
    assert response.status_code == 201
    return response.json["uuid"]


def test_order_transitions_are_published(api, app, broker):
    queue = register(api)[1]
    order_uuid = submit_order(api)
    api.call("POST", f"{ORDERS}{order_uuid}/approve_by_provider/", json={})
    api.call("POST", f"{ORDERS}{order_uuid}/set_state_done/")
    bodies = [published[2] for published in broker.published]
    assert [(b["object_type"], b["order_uuid"], b["order_state"]) for b in bodies] == [
        ("order", order_uuid, "pending-provider"), ("order", order_uuid, "executing"), ("order", order_uuid, "done")]
    resource_uuid = app.order(order_uuid)["marketplace_resource_uuid"]
    assert bodies[0] == {"object_type": "order", "order_uuid": order_uuid, "order_state": "pending-provider",
                         "order_type": "Create", "offering_uuid": P.DO_OFFERING_UUID,
                         "marketplace_resource_uuid": resource_uuid, "project_uuid": P.PROJECT_UUID}
    assert {published[:2] for published in broker.published} == \
        {(P.PROVIDER_USER_UUID, queue.json["queue_name"])}
    assert [r["delivered"] for r in app.events.published] == [True, True, True]


def test_other_offerings_and_unregistered_types_are_not_published(api, app, broker):
    register(api, object_types=("order",))
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm")
    api.call("POST", f"{PRESOURCES}{resource['uuid']}/set_paused/", token=P.STAFF_TOKEN, json={"paused": True})
    app.seed_order(P.AZURE_OFFERING_UUID)
    assert broker.published == []


def test_resource_flag_changes_are_published_once(api, app, broker):
    register(api)
    resource = app.seed_resource(P.DO_OFFERING_UUID, "vm")
    for flag, value in (("paused", True), ("paused", True), ("downscaled", True), ("paused", False)):
        assert api.call("POST", f"{PRESOURCES}{resource['uuid']}/set_{flag}/", token=P.STAFF_TOKEN,
                        json={flag: value}).status_code == 200
    bodies = [published[2] for published in broker.published]
    assert [(b["object_type"], b["resource_uuid"], b["paused"], b["downscaled"]) for b in bodies] == [
        ("resource", resource["uuid"], True, False), ("resource", resource["uuid"], True, True),
        ("resource", resource["uuid"], False, True)]


def test_dropped_messages_are_recorded_and_never_sent(api, app, broker):
    register(api)
    first = submit_order(api, "a")
    app.events.drop_events(count=1, object_type="order")
    second = submit_order(api, "b")
    third = submit_order(api, "c")
    assert [published[2]["order_uuid"] for published in broker.published] == [first, third]
    lost = [r for r in app.events.published if r["dropped"]]
    assert [(r["uuid"], r["delivered"]) for r in lost] == [(second, False)]


def test_publish_failures_do_not_fail_the_api_call(app):
    app.events.broker = RecordingBroker(fail_publish=True)
    api = Api(app)
    register(api)
    order_uuid = submit_order(api)
    (record,) = app.events.published
    assert record["uuid"] == order_uuid and not record["delivered"] and "broker down" in record["error"]


def test_control_api(api, app, broker):
    register(api)
    client = Client(app)
    assert client.post("/_sim/events/drop", json={"count": 1, "object_type": "order"}).status_code == 201
    raw = client.post("/_sim/events/publish_raw", json={"offering_uuid": P.DO_OFFERING_UUID, "body": "not json"})
    assert raw.status_code == 201 and broker.published[-1][2] == "not json"
    submit_order(api)
    records = client.get("/_sim/events").json
    assert [(r["object_type"], r["dropped"], r["delivered"]) for r in records] == [
        (None, False, True), ("order", True, False)]
    assert client.delete("/_sim/events").json == {"cleared": True} and app.events.published == []
    assert json.loads(client.get("/_sim/state").data)["orders"]  # the base control API still answers


def test_reset_forgets_identities_and_queues(api, app, broker):
    register(api)
    app.reset("default")
    assert app.events.identities == {} and app.events.queues == {}
    app.seed_order(P.DO_OFFERING_UUID)
    assert len(broker.published) == 0
