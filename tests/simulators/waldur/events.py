"""Waldur's site agent identities, event queues and event publishing, for the Waldur simulator.

Real Waldur lets a site agent register an identity per offering
(``/api/marketplace-site-agent-identities/``, named ``agent-<offering uuid>``), a service per
agent mode (``register_service``) and one RabbitMQ queue per identity (``register_queue``,
answering ``queue_name``, ``rmq_username``, ``vhost``, ``observable_object_types``). It then
publishes a JSON message to that queue whenever an order or a resource of the offering
changes; the agent consumes it over STOMP with ``rmq_username`` and its API token.

This module gives the simulator the same:

* :class:`SiteAgentEvents`: the identity/service/queue state, the route handlers
  (:meth:`SiteAgentEvents.routes`), the publishing hooks :meth:`publish_order_event` and
  :meth:`publish_resource_event`, fault injection (:meth:`drop_events`: the next matching
  messages are lost) and a control API under ``/_sim/events``;
* :class:`StompPublisher`: publishes JSON to ``/amq/queue/<queue>`` of a vhost over STOMP
  (stomp-py), persistent, each send confirmed by a broker receipt;
* the Waldur simulator (:mod:`tests.simulators.waldur.simulator`) wires all of the above in
  (routes, hooks at every order transition and resource flag change, control paths).

Without a broker (``events.broker is None``) registration still answers and every message
is recorded in ``events.published`` with ``delivered: False``. With one, registration
provisions the vhost, the user (password = the caller's token, as Waldur's RabbitMQ
authenticates agents with their API token) and the durable queue, and messages go to the
broker. A broker is any object with ``provision(vhost, username, password, queue)`` and
``publish(vhost, queue, body)`` (``tests/integration/broker.py``: ``RabbitBroker``).

Operation names (call log, ``add_fault``):

=========================================  ==================================================
``agent_identities.list``                  GET  /api/marketplace-site-agent-identities/
``agent_identities.create``                POST /api/marketplace-site-agent-identities/ (201)
``agent_identities.get``                   GET  .../{uuid}/
``agent_identities.update``                PUT  .../{uuid}/
``agent_identities.register_service``      POST .../{uuid}/register_service/ (201 new, 200 known)
``agent_identities.register_queue``        POST .../{uuid}/register_queue/ (201 new, 200 known)
=========================================  ==================================================

Control API: ``GET /_sim/events`` (published messages), ``POST /_sim/events/drop``
(``{"count": 1, "object_type": "order"}``), ``POST /_sim/events/publish_raw``
(``{"offering_uuid": ..., "body": "<text>"}``: an arbitrary, possibly malformed, message
to every queue of the offering), ``DELETE /_sim/events`` (forget the record).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid as uuid_lib
from datetime import datetime, timezone
from typing import Any, Callable

from werkzeug.wrappers import Request, Response

from tests.simulators.common import json_response
from tests.simulators.waldur.model import ApiError, Marketplace, iso, new_uuid, normalize_uuid, not_found, now

IDENTITIES = "/api/marketplace-site-agent-identities/"
SERVICES = "/api/marketplace-site-agent-services/"
# ObservableObjectTypeEnum of Waldur's 8.x API.
OBSERVABLE_OBJECT_TYPES = (
    "call", "course_account", "importable_resources", "offering_resources_sync", "offering_user",
    "order", "proposal", "resource", "resource_api_key_rotation", "resource_end_date_change_request",
    "resource_periodic_limits", "service_account", "service_provider_account",
    "service_provider_project_group", "user_lifecycle", "user_profile", "user_role", "user_ssh_key",
)
_IDENTITY_FIELDS = ("version", "config_file_path", "config_file_content")


class PublishError(Exception):
    pass


class StompPublisher:
    """Publish JSON messages to RabbitMQ queues over plain STOMP (TCP), one connection per
    vhost, each SEND confirmed by a receipt. A failed send reconnects once and retries, so
    a broker restart between two publishes is invisible to the caller."""

    def __init__(self, host: str, port: int, login: str, passcode: str, timeout: float = 5.0):
        self.host, self.port, self.login, self.passcode, self.timeout = host, port, login, passcode, timeout
        self._connections: dict[str, Any] = {}
        self._lock = threading.Lock()

    def publish(self, vhost: str, queue: str, body: Any) -> None:
        """``body``: a dict/list (sent as JSON) or a str (sent as it is)."""
        text = body if isinstance(body, str) else json.dumps(body)
        with self._lock:
            try:
                self._send(vhost, queue, text)
            except Exception:  # stale connection (broker restarted): one fresh try
                self._drop(vhost)
                try:
                    self._send(vhost, queue, text)
                except Exception as exc:
                    self._drop(vhost)
                    raise PublishError(f"publishing to {vhost}/{queue} failed: {type(exc).__name__}: {exc}") from None

    def _connection(self, vhost: str):
        import stomp

        connection = self._connections.get(vhost)
        if connection is not None and connection.is_connected():
            return connection
        self._drop(vhost)
        connection = stomp.Connection12([(self.host, self.port)], vhost=vhost, reconnect_attempts_max=1,
                                        timeout=self.timeout, prefer_localhost=False, try_loopback_connect=False)
        listener = _ReceiptListener()
        connection.set_listener("receipts", listener)
        connection.connect(self.login, self.passcode, wait=False)
        if not listener.connected.wait(self.timeout):
            _close(connection)
            raise PublishError(f"the broker did not accept the publisher on vhost {vhost}: {listener.error}")
        connection.receipts = listener
        self._connections[vhost] = connection
        return connection

    def _send(self, vhost: str, queue: str, text: str) -> None:
        connection = self._connection(vhost)
        receipt = uuid_lib.uuid4().hex
        waiter = connection.receipts.expect(receipt)
        connection.send(f"/amq/queue/{queue}", text, content_type="application/json",
                        headers={"persistent": "true", "receipt": receipt})
        if not waiter.wait(self.timeout):
            raise PublishError(f"no receipt from the broker for a message to {vhost}/{queue}")

    def _drop(self, vhost: str) -> None:
        _close(self._connections.pop(vhost, None))

    def close(self) -> None:
        with self._lock:
            for vhost in list(self._connections):
                self._drop(vhost)


class _ReceiptListener:
    def __init__(self):
        self.connected = threading.Event()
        self.error = ""
        self._waiting: dict[str, threading.Event] = {}

    def expect(self, receipt: str) -> threading.Event:
        event = threading.Event()
        self._waiting[receipt] = event
        return event

    def on_connected(self, frame):
        self.connected.set()

    def on_error(self, frame):
        self.error = f"{frame.headers.get('message', '')} {frame.body or ''}".strip()

    def on_receipt(self, frame):
        event = self._waiting.pop(frame.headers.get("receipt-id", ""), None)
        if event is not None:
            event.set()


def _close(connection) -> None:
    if connection is None:
        return
    try:
        if connection.is_connected():
            connection.disconnect()
    except Exception:
        pass
    try:
        connection.transport.disconnect_socket()
    except Exception:
        pass


class SiteAgentEvents:
    """Identities, services and event queues of one simulated Waldur, and its publisher."""

    def __init__(self, simulator, broker: Any = None):
        self.simulator = simulator
        self.broker = broker
        self.identities: dict[str, dict] = {}
        self.services: dict[str, dict] = {}
        self.queues: dict[str, dict] = {}  # by identity uuid
        self.published: list[dict] = []
        self.drops: list[dict] = []
        self._seq = itertools.count(1)

    @property
    def market(self) -> Marketplace:
        return self.simulator.market

    def reset(self) -> None:
        """Forget identities, queues, the record and pending drops (not the broker)."""
        self.identities.clear()
        self.services.clear()
        self.queues.clear()
        self.published.clear()
        self.drops.clear()

    # ------------------------------------------------------------------ routes
    def routes(self, endpoint: Callable[[Callable], Callable]) -> list[tuple[str, str, str, Callable]]:
        """Route tuples for ``Simulator.routes()``; ``endpoint`` is the simulator's
        authenticating wrapper (``WaldurSimulator._endpoint``)."""
        identity = IDENTITIES + "<uuid>/"
        return [
            ("GET", IDENTITIES, "agent_identities.list", endpoint(self.identities_list)),
            ("POST", IDENTITIES, "agent_identities.create", endpoint(self.identities_create)),
            ("GET", identity, "agent_identities.get", endpoint(self.identities_get)),
            ("PUT", identity, "agent_identities.update", endpoint(self.identities_update)),
            ("POST", identity + "register_service/", "agent_identities.register_service",
             endpoint(self.identities_register_service)),
            ("POST", identity + "register_queue/", "agent_identities.register_queue",
             endpoint(self.identities_register_queue)),
        ]

    def _manages(self, user: dict, offering_uuid: str) -> bool:
        offering = self.market.offerings.get(offering_uuid)
        return offering is not None and (user["is_staff"] or offering["customer_uuid"] in user["owner_of"])

    def _identity(self, user: dict, uuid: str) -> dict:
        identity = self.identities.get(normalize_uuid(uuid) or "")
        if identity is None or not self._manages(user, identity["offering_uuid"]):
            raise not_found("AgentIdentity")
        return identity

    def _identity_data(self, request: Request, user: dict) -> dict:
        body = self.simulator._json(request)
        errors: dict = {}
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            errors["name"] = ["This field is required."]
        elif len(name) > 150:
            errors["name"] = ["Ensure this field has no more than 150 characters."]
        offering_uuid = None
        if body.get("offering") in (None, ""):
            errors["offering"] = ["This field is required."]
        else:
            offering_uuid = normalize_uuid(body["offering"]) if isinstance(body["offering"], str) else None
            if offering_uuid is None:
                errors["offering"] = ["Must be a valid UUID."]
            elif offering_uuid not in self.market.offerings:
                errors["offering"] = [f"Offering with uuid {body['offering']} does not exist."]
        for key in _IDENTITY_FIELDS:
            if body.get(key) is not None and not isinstance(body[key], str):
                errors[key] = ["Not a valid string."]
        last_restarted = body.get("last_restarted")
        if last_restarted is not None:
            try:
                last_restarted = datetime.fromisoformat(str(last_restarted).replace("Z", "+00:00"))
            except ValueError:
                errors["last_restarted"] = ["Datetime has wrong format."]
            else:
                if last_restarted.tzinfo is None:
                    last_restarted = last_restarted.replace(tzinfo=timezone.utc)
        if errors:
            raise ApiError(400, errors)
        if not self._manages(user, offering_uuid):
            raise self.simulator._forbidden()
        data = {key: body.get(key) for key in _IDENTITY_FIELDS}
        data.update(name=name.strip(), offering_uuid=offering_uuid, dependencies=body.get("dependencies", []),
                    last_restarted=last_restarted or now())
        return data

    def identities_list(self, request: Request, user: dict) -> Response:
        name = request.args.get("name")
        offering_uuid = self.simulator._uuid_arg(request, "offering_uuid")
        found = [i for i in sorted(self.identities.values(), key=lambda i: i["seq"])
                 if self._manages(user, i["offering_uuid"])
                 and (name is None or i["name"] == name)
                 and (offering_uuid is None or i["offering_uuid"] == offering_uuid)]
        return self.simulator._page(request, found, self.identity_repr)

    def identities_create(self, request: Request, user: dict) -> Response:
        data = self._identity_data(request, user)
        if any(i["name"] == data["name"] for i in self.identities.values()):
            raise ApiError(400, {"name": ["Agent identity with this name already exists."]})
        stamp = now()
        identity = dict(data, uuid=new_uuid(), seq=next(self._seq), created=stamp, modified=stamp,
                        created_by=user["uuid"])
        self.identities[identity["uuid"]] = identity
        return json_response(self.identity_repr(identity), 201)

    def identities_get(self, request: Request, user: dict, uuid: str) -> Response:
        return json_response(self.identity_repr(self._identity(user, uuid)))

    def identities_update(self, request: Request, user: dict, uuid: str) -> Response:
        identity = self._identity(user, uuid)
        data = self._identity_data(request, user)
        identity.update(data, modified=now())
        return json_response(self.identity_repr(identity))

    def identities_register_service(self, request: Request, user: dict, uuid: str) -> Response:
        identity = self._identity(user, uuid)
        body = self.simulator._json(request)
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ApiError(400, {"name": ["This field is required."]})
        mode = body.get("mode")
        if mode is not None and not isinstance(mode, str):
            raise ApiError(400, {"mode": ["Not a valid string."]})
        for service in self.services.values():
            if service["identity_uuid"] == identity["uuid"] and service["name"] == name:
                service.update(mode=mode, modified=now())
                return json_response(self.service_repr(service), 200)
        stamp = now()
        service = dict(uuid=new_uuid(), seq=next(self._seq), identity_uuid=identity["uuid"], name=name, mode=mode,
                       state="Active", statistics={}, created=stamp, modified=stamp)
        self.services[service["uuid"]] = service
        return json_response(self.service_repr(service), 201)

    def identities_register_queue(self, request: Request, user: dict, uuid: str) -> Response:
        """One queue per identity, kept across calls; each call (re)provisions it on the
        broker, which is what heals a queue the broker lost."""
        identity = self._identity(user, uuid)
        body = self.simulator._json(request)
        object_types = body.get("object_types")
        if object_types is not None:
            if not isinstance(object_types, list):
                raise ApiError(400, {"object_types": ['Expected a list of items but got type "%s".'
                                                      % type(object_types).__name__]})
            invalid = {str(i): [f'"{value}" is not a valid choice.'] for i, value in enumerate(object_types)
                       if value not in OBSERVABLE_OBJECT_TYPES}
            if invalid:
                raise ApiError(400, {"object_types": invalid})
        queue = self.queues.get(identity["uuid"])
        created = queue is None
        if created:
            queue = dict(identity_uuid=identity["uuid"], offering_uuid=identity["offering_uuid"],
                         queue_name=f"consumer_{new_uuid()}", vhost=user["uuid"], rmq_username=user["uuid"],
                         password=user["token"], object_types=list(object_types or []))
            self.queues[identity["uuid"]] = queue
        elif object_types is not None:
            queue["object_types"] = list(object_types)
        # The broker authenticates the agent with its current API token: a rotated token
        # is the queue user's password from its next registration on.
        queue["password"] = user["token"]
        if self.broker is not None:
            try:
                self.broker.provision(queue["vhost"], queue["rmq_username"], queue["password"], queue["queue_name"])
            except Exception as exc:
                raise ApiError(500, {"detail": f"Could not set up the event queue: {exc}"}) from None
        return json_response(self.queue_repr(queue), 201 if created else 200)

    # ------------------------------------------------------------------ representations
    def identity_repr(self, identity: dict) -> dict:
        services = sorted((s for s in self.services.values() if s["identity_uuid"] == identity["uuid"]),
                          key=lambda s: s["seq"])
        return dict(
            uuid=identity["uuid"], url=self.simulator.url(f"{IDENTITIES}{identity['uuid']}/"),
            offering=identity["offering_uuid"], name=identity["name"], version=identity["version"],
            dependencies=identity["dependencies"], config_file_path=identity["config_file_path"],
            config_file_content=identity["config_file_content"], last_restarted=iso(identity["last_restarted"]),
            created=iso(identity["created"]), modified=iso(identity["modified"]),
            services=[self._nested_service_repr(s) for s in services],
            # Required by waldur-api-client 8.x's AgentIdentity (the upstream agent's client fails
            # on their absence with KeyError); newer than the vendored spec, which has neither.
            created_by=identity.get("created_by"),
            compatibility=self.compatibility(identity))

    @staticmethod
    def compatibility(identity: dict) -> dict:
        """Waldur's verdict on the agent's version: this simulator sets no minimum version."""
        if not identity.get("version"):
            return dict(status="unknown", message="The agent did not report its version.")
        return dict(status="compatible", message="No minimum agent version is required.")

    def _nested_service_repr(self, service: dict) -> dict:
        return dict(uuid=service["uuid"], url=self.simulator.url(f"{SERVICES}{service['uuid']}/"),
                    name=service["name"], mode=service["mode"], state=service["state"],
                    statistics=service["statistics"], created=iso(service["created"]),
                    modified=iso(service["modified"]))

    def service_repr(self, service: dict) -> dict:
        identity = self.identities[service["identity_uuid"]]
        data = self._nested_service_repr(service)
        data.update(identity=identity["uuid"], identity_name=identity["name"], processors=[])
        return data

    @staticmethod
    def queue_repr(queue: dict) -> dict:
        return dict(queue_name=queue["queue_name"], rmq_username=queue["rmq_username"], vhost=queue["vhost"],
                    observable_object_types=list(queue["object_types"]))

    # ------------------------------------------------------------------ publishing
    def drop_events(self, count: int = 1, object_type: str | None = None, uuid: str | None = None) -> None:
        """Lose the next ``count`` messages (of ``object_type``, about the order or resource
        ``uuid``): recorded with ``dropped: True`` and never sent."""
        with self.simulator.lock:
            self.drops.append(dict(count=int(count), object_type=object_type, uuid=normalize_uuid(uuid)))

    def _should_drop(self, object_type: str, subject_uuid: str) -> bool:
        for rule in self.drops:
            if rule["count"] > 0 and rule["object_type"] in (None, object_type) \
                    and rule["uuid"] in (None, subject_uuid):
                rule["count"] -= 1
                if rule["count"] == 0:
                    self.drops.remove(rule)
                return True
        return False

    def publish_order_event(self, order: dict) -> None:
        """Hook: an order (a ``Marketplace.orders`` record) was created or changed state."""
        body = dict(object_type="order", order_uuid=order["uuid"], order_state=order["state"],
                    order_type=order["type"], offering_uuid=order["offering_uuid"],
                    marketplace_resource_uuid=order["resource_uuid"], project_uuid=order["project_uuid"])
        self._publish(order["offering_uuid"], "order", order["uuid"], body)

    def publish_resource_event(self, resource: dict) -> None:
        """Hook: a resource (a ``Marketplace.resources`` record) changed what the agent applies
        (paused, downscaled)."""
        body = dict(object_type="resource", resource_uuid=resource["uuid"], offering_uuid=resource["offering_uuid"],
                    project_uuid=resource["project_uuid"], state=resource["state"], paused=resource["paused"],
                    downscaled=resource["downscaled"])
        self._publish(resource["offering_uuid"], "resource", resource["uuid"], body)

    def publish_raw(self, offering_uuid: str, body: Any) -> list[dict]:
        """Send ``body`` (any text or JSON value) to every queue of the offering, as it is."""
        return self._publish(normalize_uuid(offering_uuid) or "", None, None, body)

    def _publish(self, offering_uuid: str, object_type: str | None, subject_uuid: str | None,
                 body: Any) -> list[dict]:
        records = []
        with self.simulator.lock:
            queues = [q for q in self.queues.values() if q["offering_uuid"] == offering_uuid
                      and (object_type is None or not q["object_types"] or object_type in q["object_types"])]
            for queue in queues:
                record = dict(seq=next(self._seq), object_type=object_type, uuid=subject_uuid,
                              vhost=queue["vhost"], queue=queue["queue_name"], body=body, delivered=False,
                              dropped=False, error=None, time=time.time())
                if object_type is not None and self._should_drop(object_type, subject_uuid):
                    record["dropped"] = True
                elif self.broker is not None:
                    try:
                        self.broker.publish(queue["vhost"], queue["queue_name"], body)
                        record["delivered"] = True
                    except Exception as exc:  # Waldur logs a failed publish; the API call still succeeds
                        record["error"] = f"{type(exc).__name__}: {exc}"
                self.published.append(record)
                records.append(record)
        return records

    # ------------------------------------------------------------------ control API
    def control(self, request: Request) -> Response | None:
        """``/_sim/events...`` control paths; None for any other path."""
        path = request.path.rstrip("/")
        if not path.startswith("/_sim/events"):
            return None
        payload = request.get_json(silent=True) or {}
        if path == "/_sim/events":
            if request.method == "DELETE":
                with self.simulator.lock:
                    self.published.clear()
                return json_response({"cleared": True})
            with self.simulator.lock:
                return json_response([dict(r) for r in self.published])
        if path == "/_sim/events/drop" and request.method == "POST":
            self.drop_events(payload.get("count", 1), payload.get("object_type"), payload.get("uuid"))
            return json_response({"dropping": payload}, 201)
        if path == "/_sim/events/publish_raw" and request.method == "POST":
            records = self.publish_raw(payload.get("offering_uuid", ""), payload.get("body", ""))
            return json_response(records, 201)
        return json_response({"detail": f"unknown control path {request.path}"}, 404)


class EventingMarketplace(Marketplace):
    """The marketplace model publishing an order event at every order creation and state
    change (as Waldur does), to the queues registered for the order's offering."""

    def __init__(self, url, events: SiteAgentEvents):
        super().__init__(url)
        self.events = events

    def _published(self, order: dict) -> dict:
        self.events.publish_order_event(order)
        return order

    def seed_order(self, offering_uuid, **kwargs) -> dict:
        return self._published(super().seed_order(offering_uuid, **kwargs))

    def create_order(self, *args, **kwargs) -> dict:
        return self._published(super().create_order(*args, **kwargs))

    def update_limits(self, *args, **kwargs) -> dict:
        return self._published(super().update_limits(*args, **kwargs))

    def terminate(self, *args, **kwargs) -> dict:
        return self._published(super().terminate(*args, **kwargs))

    def approve_by_consumer(self, order: dict, user: dict) -> None:
        super().approve_by_consumer(order, user)
        self._published(order)

    def approve_by_provider(self, order: dict, user: dict) -> None:
        super().approve_by_provider(order, user)
        self._published(order)

    def reject_by_provider(self, order: dict, user: dict, comment: str | None = None) -> None:
        super().reject_by_provider(order, user, comment)
        self._published(order)

    def set_state_executing(self, order: dict) -> None:
        super().set_state_executing(order)
        self._published(order)

    def set_state_done(self, order: dict) -> None:
        super().set_state_done(order)
        self._published(order)

    def set_state_erred(self, order: dict, error_message: str, error_traceback: str) -> None:
        super().set_state_erred(order, error_message, error_traceback)
        self._published(order)

    def process_order(self, order: dict) -> bool:
        """Published when the processor changed the order's state (it erred it), as any state change."""
        state = order["state"]
        ran = super().process_order(order)
        if ran and order["state"] != state:
            self._published(order)
        return ran


__all__ = ["EventingMarketplace", "PublishError", "SiteAgentEvents", "StompPublisher",
           "OBSERVABLE_OBJECT_TYPES"]
