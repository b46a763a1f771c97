"""The waldur_stomp event source without a broker: arguments, message filtering, backoff,
registration against local HTTP servers, and the connection loop driven by a scripted
stand-in for stomp-py's connection."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections import namedtuple

import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from tests.simulators.common import SimulatorServer
from tests.simulators.waldur import presets as P
from tests.simulators.waldur import WaldurSimulator

OFFERING = P.DO_OFFERING_UUID
TOKEN = P.PROVIDER_TOKEN
ORDER_UUID = "0123456789abcdef0123456789abcdef"
RESOURCE_UUID = "fedcba9876543210fedcba9876543210"


def settings(plugin, **overrides):
    args = dict(waldur_api_url="https://waldur.example.com/api/", waldur_api_token=TOKEN, offering_uuid=OFFERING)
    args.update(overrides)
    return plugin.parse_args(args)


# ------------------------------------------------------------------------------------------ arguments
def test_defaults_follow_the_upstream_agent(plugin):
    parsed = settings(plugin)
    assert parsed.api_root == "https://waldur.example.com/"
    assert parsed.stomp_host == "waldur.example.com"
    assert (parsed.stomp_port, parsed.stomp_ws_path, parsed.use_websocket, parsed.use_tls) == \
        (443, "/rmqws-stomp", True, True)
    assert parsed.object_types == ("order", "resource")
    assert parsed.sweep_interval == 3600
    assert parsed.heartbeat == 10 and parsed.verify_ssl is True


@pytest.mark.parametrize("use_websocket, use_tls, port", [
    (True, True, 443), (True, False, 80), (False, True, 61614), (False, False, 61613)])
def test_default_port_depends_on_transport(plugin, use_websocket, use_tls, port):
    assert settings(plugin, use_websocket=use_websocket, websocket_use_tls=use_tls).stomp_port == port


@pytest.mark.parametrize("url", ["https://waldur.example.com", "https://waldur.example.com/api",
                                 "https://waldur.example.com/api/", " https://waldur.example.com/ "])
def test_api_url_with_or_without_api_suffix(plugin, url):
    assert settings(plugin, waldur_api_url=url).api_root == "https://waldur.example.com/"


def test_values_rendered_as_strings_by_jinja_are_accepted(plugin):
    parsed = settings(plugin, stomp_port="15674", use_websocket="false", websocket_use_tls="False",
                      verify_ssl="no", sweep_interval="30", object_types="order", stomp_host="",
                      offering_uuid="D0000000-0000-0000-0000-000000000001")
    assert (parsed.stomp_port, parsed.use_websocket, parsed.use_tls, parsed.verify_ssl) == (15674, False, False, False)
    assert parsed.sweep_interval == 30 and parsed.object_types == ("order",)
    assert parsed.stomp_host == "waldur.example.com"  # empty means "not given"
    assert parsed.offering_uuid_hex == OFFERING
    assert parsed.offering_uuid == "D0000000-0000-0000-0000-000000000001"  # the identity name keeps it as given


@pytest.mark.parametrize("overrides, named", [
    ({"waldur_api_token": None}, "waldur_api_token"),
    ({"waldur_api_url": "waldur.example.com"}, "waldur_api_url"),
    ({"offering_uuid": "not-a-uuid"}, "offering_uuid"),
    ({"object_types": ["order", "user_role"]}, "object_types: user_role"),
    ({"object_types": []}, "object_types"),
    ({"stomp_port": 70000}, "stomp_port"),
    ({"stomp_port": "https"}, "stomp_port"),
    ({"use_websocket": "maybe"}, "use_websocket"),
    ({"sweep_interval": -1}, "sweep_interval"),
])
def test_bad_arguments_are_named(plugin, overrides, named):
    with pytest.raises(ValueError, match=named):
        settings(plugin, **overrides)


# ------------------------------------------------------------------------------------------ messages
def order_message(**fields):
    message = dict(object_type="order", order_uuid=ORDER_UUID, order_state="pending-provider",
                   offering_uuid=OFFERING)
    message.update(fields)
    return json.dumps(message)


def decide(plugin, body, object_types=("order", "resource")):
    return plugin.message_to_event(body, OFFERING, object_types)


@pytest.mark.parametrize("state", ["pending-provider", "executing"])
def test_actionable_order_message_becomes_an_event(plugin, state):
    decision = decide(plugin, order_message(order_state=state, order_type="Create",
                                            marketplace_resource_uuid=RESOURCE_UUID.upper()))
    assert decision.outcome == "event"
    event = decision.event["waldur"]
    assert event["type"] == event["object_type"] == "order"
    assert (event["order_uuid"], event["order_state"], event["order_type"]) == (ORDER_UUID, state, "Create")
    assert event["resource_uuid"] == RESOURCE_UUID and event["offering_uuid"] == OFFERING
    assert event["message"]["order_state"] == state


def test_dashed_order_uuid_is_normalised(plugin):
    dashed = "01234567-89AB-CDEF-0123-456789ABCDEF"
    assert decide(plugin, order_message(order_uuid=dashed)).event["waldur"]["order_uuid"] == ORDER_UUID


@pytest.mark.parametrize("state", ["done", "erred", "canceled", "rejected", "pending-consumer",
                                   "pending-project", "pending-start-date"])
def test_orders_needing_nothing_from_the_provider_are_dropped(plugin, state):
    decision = decide(plugin, order_message(order_state=state))
    assert (decision.event, decision.outcome) == (None, "ignored")
    assert state in decision.reason


def test_order_in_an_unknown_state_is_processed(plugin):
    # A newer Waldur state: the order pass reads the order and decides.
    decision = decide(plugin, order_message(order_state=None))
    assert decision.outcome == "event" and decision.event["waldur"]["order_state"] is None


def test_resource_message_becomes_an_event(plugin):
    decision = decide(plugin, json.dumps({"object_type": "resource", "resource_uuid": RESOURCE_UUID, "paused": True}))
    assert decision.outcome == "event"
    assert decision.event["waldur"]["type"] == "resource"
    assert decision.event["waldur"]["resource_uuid"] == RESOURCE_UUID


@pytest.mark.parametrize("body, reason", [
    ("this is not json", "not JSON"),
    (b"\xff\xfe", "not UTF-8"),
    ("[1, 2]", "not an object"),
    ('{"order_uuid": "%s"}' % ORDER_UUID, "no object_type"),
    ('{"object_type": "bogus"}', "unknown object_type"),
    ('{"object_type": "order", "order_state": "executing"}', "valid order_uuid"),
    ('{"object_type": "order", "order_uuid": "nope"}', "valid order_uuid"),
    ('{"object_type": "resource"}', "valid resource_uuid"),
    ('{"object_type": "order", "order_uuid": "%s", "offering_uuid": "x"}' % ORDER_UUID, "offering_uuid"),
])
def test_malformed_messages(plugin, body, reason):
    decision = decide(plugin, body)
    assert (decision.event, decision.outcome) == (None, "malformed")
    assert reason in decision.reason


def test_types_not_asked_for_and_other_offerings_are_ignored(plugin):
    assert decide(plugin, json.dumps({"object_type": "user_role", "user_uuid": ORDER_UUID})).outcome == "ignored"
    resource = json.dumps({"object_type": "resource", "resource_uuid": RESOURCE_UUID})
    assert decide(plugin, resource, object_types=("order",)).outcome == "ignored"
    other = decide(plugin, order_message(offering_uuid=P.AZURE_OFFERING_UUID))
    assert other.outcome == "ignored" and P.AZURE_OFFERING_UUID in other.reason


def test_broker_error_frames(plugin):
    assert plugin.is_not_found({"message": "not_found"}, "NOT_FOUND - no queue 'consumer_x' in vhost 'v'")
    assert not plugin.is_not_found({"message": "access_refused"}, "ACCESS_REFUSED - access to queue 'x'")
    assert plugin.is_cancelled({"message": "Server cancelled subscription", "subscription": "q"}, "q")
    assert not plugin.is_cancelled({"message": "Bad CONNECT"}, "q")


# ------------------------------------------------------------------------------------------ backoff
def test_backoff_doubles_from_one_second_up_to_two_minutes(plugin):
    delays = [plugin.backoff_delay(attempt, rand=lambda: 0.0) for attempt in range(10)]
    assert delays == [1, 2, 4, 8, 16, 32, 64, 120, 120, 120]


def test_backoff_jitter_shortens_by_at_most_a_quarter(plugin):
    assert plugin.backoff_delay(3, rand=lambda: 1.0) == pytest.approx(6.0)
    assert plugin.backoff_delay(3, rand=lambda: 0.5) == pytest.approx(7.0)
    samples = [plugin.backoff_delay(attempt) for attempt in range(0, 40) for _sample in range(5)]
    assert max(samples) <= 120 and min(samples) >= 0.75
    assert plugin.backoff_delay(10 ** 6, rand=lambda: 0.0) == 120  # no overflow however long it fails


# ------------------------------------------------------------------------------------------ secrets
def test_token_is_masked_in_log_records(plugin, caplog):
    chatty = logging.getLogger("stomp.py")
    guard = plugin.RedactingFilter(TOKEN)
    chatty.addFilter(guard)
    try:
        with caplog.at_level(logging.DEBUG, logger="stomp.py"):
            chatty.debug("sending frame: %s", [b"passcode:" + TOKEN.encode()])
    finally:
        chatty.removeFilter(guard)
    assert "passcode" in caplog.text and TOKEN not in caplog.text


# ------------------------------------------------------------------------------------------ registration
@pytest.fixture(scope="module")
def waldur_server():
    server = SimulatorServer(WaldurSimulator(preset="empty")).start()
    yield server
    server.stop()


@pytest.fixture
def waldur(waldur_server):
    waldur_server.app.reset("empty")
    return waldur_server


def api_for(plugin, url, retry_seconds=0, **overrides):
    # retry_seconds=0: one attempt per call (the client's retries are the collection's, tested there)
    return plugin.WaldurEventsApi(settings(plugin, waldur_api_url=url + "/api/", **overrides),
                                  retry_seconds=retry_seconds)


def test_registration_creates_the_identity_then_the_queue(plugin, waldur):
    registration = api_for(plugin, waldur.url).register()
    events = waldur.app.events
    (identity,) = events.identities.values()
    assert identity["name"] == "agent-%s" % OFFERING and identity["offering_uuid"] == OFFERING
    assert [s["name"] for s in events.services.values()] == ["event_process"]
    queue = events.queues[identity["uuid"]]
    assert registration.queue_name == queue["queue_name"] and registration.queue_name.startswith("consumer_")
    assert registration.rmq_username == registration.vhost == P.PROVIDER_USER_UUID
    assert queue["object_types"] == ["order", "resource"]
    # none listed, and a second listing agrees before one is created
    assert [c["operation"] for c in waldur.app.calls] == [
        "agent_identities.list", "agent_identities.list", "agent_identities.create",
        "agent_identities.register_service", "agent_identities.register_queue"]
    assert waldur.app.calls[0]["query"].startswith("name=agent-%s" % OFFERING)


def test_an_empty_listing_of_the_identities_never_makes_a_second_agent(plugin, waldur):
    api_for(plugin, waldur.url).register()
    waldur.app.add_fault("agent_identities.list", kind="empty_items")  # a stale page: none listed
    with pytest.raises(plugin.WaldurApiError, match="two reads of the listing disagree"):
        api_for(plugin, waldur.url).register()
    assert len(waldur.app.events.identities) == 1


def test_registering_again_updates_the_identity_and_keeps_the_queue(plugin, waldur):
    first = api_for(plugin, waldur.url).register()
    second = api_for(plugin, waldur.url, object_types=["order"]).register()
    assert second.queue_name == first.queue_name
    assert len(waldur.app.events.identities) == 1 and len(waldur.app.events.services) == 1
    assert [c["operation"] for c in waldur.app.calls][5:] == [
        "agent_identities.list", "agent_identities.update", "agent_identities.register_service",
        "agent_identities.register_queue"]
    assert second.object_types == ("order",)


def test_wrong_token_is_a_permanent_error_without_the_token(plugin, waldur):
    api = plugin.WaldurEventsApi(plugin.parse_args(dict(
        waldur_api_url=waldur.url, waldur_api_token="wrong-secret-token", offering_uuid=OFFERING)))
    with pytest.raises(plugin.WaldurApiError) as caught:
        api.register()
    assert caught.value.status == 401 and not caught.value.transient
    assert "Waldur GET /api/marketplace-site-agent-identities/ failed (HTTP 401): Invalid token." == str(caught.value)
    assert "wrong-secret-token" not in str(caught.value)


class ScriptedWaldur:
    """A tiny HTTP server answering ``(status, body)`` per ``METHOD path`` (default 404)."""

    def __init__(self, answers):
        self.answers = answers
        self.requests = []
        self.server = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.url = "http://127.0.0.1:%d" % self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    def app(self, environ, start_response):
        request = Request(environ)
        key = "%s %s" % (request.method, request.path)
        self.requests.append((key, request.get_data(as_text=True), dict(request.headers)))
        status, body = self.answers.get(key, (404, {"detail": "Not found."}))
        text = body if isinstance(body, str) else json.dumps(body)
        # a listing carries its count, as Waldur's every paged listing does
        headers = {"X-Result-Count": str(len(body))} if isinstance(body, list) else {}
        return Response(text, status=status, content_type="application/json", headers=headers)(environ, start_response)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()


IDENTITIES = "/api/marketplace-site-agent-identities/"
IDENTITY_UUID = "1" * 32
KNOWN_IDENTITY = {"uuid": IDENTITY_UUID, "name": "agent-%s" % OFFERING, "offering": OFFERING}
QUEUE = {"queue_name": "consumer_abc", "rmq_username": "u1", "vhost": "v1", "observable_object_types": ["order"]}


def test_service_registration_failure_is_only_logged(plugin, caplog):
    answers = {"GET " + IDENTITIES: (200, [KNOWN_IDENTITY]),
               "PUT %s%s/" % (IDENTITIES, IDENTITY_UUID): (200, KNOWN_IDENTITY),
               "POST %s%s/register_queue/" % (IDENTITIES, IDENTITY_UUID): (201, QUEUE)}
    with ScriptedWaldur(answers) as server, caplog.at_level(logging.WARNING):
        registration = api_for(plugin, server.url).register()
    assert registration.queue_name == "consumer_abc" and registration.identity_uuid == IDENTITY_UUID
    assert "register_service/ failed (HTTP 404)" in caplog.text
    sent = {key: (body, headers) for key, body, headers in server.requests}
    assert json.loads(sent["POST %s%s/register_queue/" % (IDENTITIES, IDENTITY_UUID)][0]) == \
        {"object_types": ["order", "resource"]}
    assert sent["GET " + IDENTITIES][1]["Authorization"] == "Token %s" % TOKEN


@pytest.mark.parametrize("status, transient", [(500, True), (503, True), (429, True), (400, False), (403, False)])
def test_transient_and_permanent_failures(plugin, status, transient):
    with ScriptedWaldur({"GET " + IDENTITIES: (status, {"detail": "echo %s" % TOKEN})}) as server:
        with pytest.raises(plugin.WaldurApiError) as caught:
            api_for(plugin, server.url).register()
    assert caught.value.transient is transient and caught.value.status == status
    assert TOKEN not in str(caught.value) and "echo ********" in str(caught.value)


def test_unreachable_waldur_is_transient(plugin):
    # A port bound but never listening refuses connections, and no other test can take it
    # meanwhile (a closed server's port could be reused by a parallel test's server).
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:%d" % held.getsockname()[1]
        with pytest.raises(plugin.WaldurApiError) as caught:
            api_for(plugin, url, request_timeout=2).register()
    assert caught.value.transient and str(caught.value).startswith("cannot reach Waldur at %s/api/" % url)


def test_queue_answer_without_credentials_is_an_error(plugin):
    answers = {"GET " + IDENTITIES: (200, []), "POST " + IDENTITIES: (201, KNOWN_IDENTITY),
               "POST %s%s/register_service/" % (IDENTITIES, IDENTITY_UUID): (201, {}),
               "POST %s%s/register_queue/" % (IDENTITIES, IDENTITY_UUID): (200, {"queue_name": "q"})}
    with ScriptedWaldur(answers) as server:
        with pytest.raises(plugin.WaldurApiError, match="answered without rmq_username, vhost"):
            api_for(plugin, server.url).register()


# ------------------------------------------------------------------------------------------ the loop
Frame = namedtuple("Frame", "headers body")


class FakeConnection:
    """Plays one scripted broker session through the plugin's listener, as stomp-py's
    receiver thread would. Delivers messages as RabbitMQ does: at most prefetch-count of them
    unacknowledged, the next after an ACK. Script steps: ("receipt",), ("message", body),
    ("error", headers, body), ("disconnect",)."""

    def __init__(self, broker, script):
        self.broker = broker
        self.script = list(script)
        self.listener = None
        self.connected = False
        self.acks = []
        self.subscriptions = []
        self.transport = self
        self.prefetch = 1
        self.unacked = 0

    def set_listener(self, name, listener):
        self.listener = listener

    def connect(self, username, passcode, wait=False, headers=None):
        self.broker.logins.append((username, passcode, headers))
        if self.script and self.script[0][0] == "refuse":
            raise ConnectionRefusedError("connection to %s refused" % passcode)
        self.connected = True
        self.listener.on_connected(Frame({}, ""))

    def subscribe(self, destination, id, ack, headers):
        self.subscriptions.append((destination, id, ack, dict(headers)))
        self.receipt = headers["receipt"]
        self.prefetch = int(headers["prefetch-count"])
        self._play()

    def _play(self):
        while self.script:
            step = self.script.pop(0)
            if step[0] == "receipt":
                self.listener.on_receipt(Frame({"receipt-id": self.receipt}, ""))
            elif step[0] == "message":
                number = len(self.broker.delivered) + 1
                self.broker.delivered.append(step[1])
                self.listener.on_message(Frame({"ack": "ack-%d" % number, "message-id": "m-%d" % number,
                                                "subscription": "q"}, step[1]))
                self.unacked += 1
                if self.unacked >= self.prefetch:
                    return  # the next step waits for an ACK
            elif step[0] == "error":
                self.listener.on_error(Frame(step[1], step[2]))
            elif step[0] == "disconnect":
                self.connected = False
                self.listener.on_disconnected()
                return

    def ack(self, ack_id):
        if not self.connected:
            raise ConnectionError("not connected")  # stomp-py raises NotConnectedException
        self.acks.append(ack_id)
        self.broker.acks.append((ack_id, self.broker.queue.qsize()))
        self.unacked -= 1
        self._play()

    def is_connected(self):
        return self.connected

    def disconnect(self):
        self.connected = False

    def disconnect_socket(self):
        self.connected = False


class FakeBroker:
    def __init__(self, *sessions):
        self.sessions = list(sessions)
        self.made = []
        self.logins = []
        self.delivered = []
        self.acks = []
        self.queue = None

    def factory(self, settings, registration):
        script = self.sessions.pop(0) if self.sessions else []
        connection = FakeConnection(self, script)
        self.made.append(connection)
        return connection


class FakeApi:
    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)
        self.calls = 0

    def register(self):
        self.calls += 1
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


REGISTRATION_ARGS = ("1" * 32, "consumer_q", "u1", "v1", ("order", "resource"))


SourceRun = namedtuple("SourceRun", "events sleeps source")


def run_source(plugin, broker, api, until, sweep_interval=0, timeout=10, reload=None, before_put=None, **overrides):
    """Run the source until ``until(events, sleeps)`` holds (``overrides``: source arguments;
    ``before_put(event)`` sees each event before the rulebook's queue takes it, and may raise)."""
    events, sleeps = [], []

    class RecordingQueue:
        async def put(self, event):
            if before_put is not None:
                before_put(event)
            events.append(event)

        def qsize(self):
            return len(events)

    async def fast_sleep(delay):
        sleeps.append(delay)
        await asyncio.sleep(0)

    broker.queue = RecordingQueue()
    source = plugin.WaldurStompSource(broker.queue, settings(plugin, sweep_interval=sweep_interval, connect_timeout=2,
                                                             **overrides),
                                      api=api, connection_factory=broker.factory, sleep=fast_sleep,
                                      rand=lambda: 0.0, reload=reload)

    async def drive():
        task = asyncio.ensure_future(source.run())
        try:
            for _attempt in range(int(timeout / 0.01)):
                if task.done():
                    task.result()
                if until(events, sleeps):
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("timed out; events=%r sleeps=%r" % (events, sleeps))
        finally:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    asyncio.run(drive())
    return SourceRun(events, sleeps, source)


def registration(plugin):
    return plugin.QueueRegistration(*REGISTRATION_ARGS)


def test_messages_become_events_acked_after_they_are_queued(plugin):
    broker = FakeBroker([("receipt",), ("message", order_message()), ("message", "garbage"),
                         ("message", order_message(order_state="done")),
                         ("message", json.dumps({"object_type": "resource", "resource_uuid": RESOURCE_UUID}))])
    run = run_source(plugin, broker, FakeApi(registration(plugin)), until=lambda events, sleeps: len(broker.acks) == 4)
    assert [e["waldur"]["type"] for e in run.events] == ["sweep", "order", "resource"]
    assert run.events[0]["waldur"]["reason"] == "startup"
    # Each ACK went out after its event was queued; malformed and dropped ones are acked too.
    assert broker.acks == [("ack-1", 2), ("ack-2", 2), ("ack-3", 2), ("ack-4", 3)]
    assert run.source.counts == {"event": 2, "ignored": 1, "malformed": 1, "sweep": 1}
    ((destination, sub_id, ack, headers),) = [s for connection in broker.made for s in connection.subscriptions]
    assert (destination, sub_id, ack) == ("/amq/queue/consumer_q", "consumer_q", "client-individual")
    # Enough unacknowledged messages for a whole batch (each waits for its batch's event).
    assert headers["prefetch-count"] == "100"
    assert broker.logins == [("u1", TOKEN, {"accept-version": "1.2"})]


ORDER_UUIDS = ["%032x" % number for number in range(1, 6)]


def orders_of(events):
    return [event["waldur"].get("order_uuids") for event in events if event["waldur"]["type"] == "order"]


def test_a_burst_of_orders_is_one_event_after_the_first(plugin):
    # The first order after a quiet spell is an event at once; the orders after it are held
    # (no run was seen claiming the first, so for claim_wait) and are one event, acknowledged
    # only once it is queued.
    broker = FakeBroker([("receipt",)] + [("message", order_message(order_uuid=uuid)) for uuid in ORDER_UUIDS])
    run = run_source(plugin, broker, FakeApi(registration(plugin)), claim_wait=0.3,
                     until=lambda events, sleeps: len(orders_of(events)) == 2)
    assert orders_of(run.events) == [ORDER_UUIDS[:1], ORDER_UUIDS[1:]]
    batch = run.events[-1]["waldur"]
    assert batch["order_uuid"] == ORDER_UUIDS[1] and len(batch["messages"]) == 4
    assert [ack for ack, queued in broker.acks] == ["ack-1", "ack-2", "ack-3", "ack-4", "ack-5"]
    # ack-2..5 went out after the batch event was queued (sweep + 2 order events).
    assert [queued for ack, queued in broker.acks[1:]] == [3, 3, 3, 3]


def test_the_held_orders_are_an_event_once_the_run_before_claims_its_order(plugin):
    first, second, third = ORDER_UUIDS[:3]
    broker = FakeBroker([("receipt",), ("message", order_message(order_uuid=first)),
                         ("message", order_message(order_uuid=second)), ("message", order_message(order_uuid=third)),
                         # the run of the first event approves its order: Waldur says it is executing
                         ("message", order_message(order_uuid=first, order_state="executing")),
                         ("message", order_message(order_uuid=ORDER_UUIDS[3]))])
    run = run_source(plugin, broker, FakeApi(registration(plugin)), timeout=5,
                     until=lambda events, sleeps: len(orders_of(events)) == 2)
    # Long before claim_wait (30 s): the second event waits behind the running first one.
    assert orders_of(run.events) == [[first], [second, third]]
    # The order after it waits for the claim of the second event's run.
    assert run.source.batches["order"][0][0]["waldur"]["order_uuid"] == ORDER_UUIDS[3]
    assert run.source.unclaimed == {second, third}


def test_a_batch_is_at_most_batch_max_orders(plugin):
    broker = FakeBroker([("receipt",)] + [("message", order_message(order_uuid=uuid)) for uuid in ORDER_UUIDS])
    run = run_source(plugin, broker, FakeApi(registration(plugin)), batch_max=2,
                     until=lambda events, sleeps: len(orders_of(events)) == 3)
    # Full batches go at once, whatever is left of the window (the last one waits for it).
    assert orders_of(run.events) == [ORDER_UUIDS[:1], ORDER_UUIDS[1:3], ORDER_UUIDS[3:5]]
    assert broker.made[0].subscriptions[0][3]["prefetch-count"] == "2"


@pytest.mark.parametrize("overrides, prefetch", [({"batch_max": 1}, "1"), ({"claim_wait": 0}, "100")])
def test_without_batches_every_message_is_an_event(plugin, overrides, prefetch):
    broker = FakeBroker([("receipt",)] + [("message", order_message(order_uuid=uuid)) for uuid in ORDER_UUIDS[:3]])
    run = run_source(plugin, broker, FakeApi(registration(plugin)), **overrides,
                     until=lambda events, sleeps: len(orders_of(events)) == 3)
    assert orders_of(run.events) == [[uuid] for uuid in ORDER_UUIDS[:3]]
    assert broker.made[0].subscriptions[0][3]["prefetch-count"] == prefetch


def test_the_executing_echo_of_an_orders_own_event_is_ignored(plugin, caplog):
    first, other = ORDER_UUIDS[:2]
    broker = FakeBroker([("receipt",), ("message", order_message(order_uuid=first)),
                         ("message", order_message(order_uuid=first, order_state="executing")),
                         ("message", order_message(order_uuid=other, order_state="executing"))])
    with caplog.at_level(logging.INFO, logger=plugin.LOGGER_NAME):
        run = run_source(plugin, broker, FakeApi(registration(plugin)), batch_max=1,
                         until=lambda events, sleeps: len(broker.acks) == 3)
    # An executing order no event of ours named (a pass that died after its claim) is work.
    assert orders_of(run.events) == [[first], [other]]
    assert run.source.counts["ignored"] == 1
    assert "order %s is executing: the claim of the run its event started" % first in caplog.text


def test_the_echo_window_can_be_closed(plugin):
    broker = FakeBroker([("receipt",), ("message", order_message()),
                         ("message", order_message(order_state="executing"))])
    run = run_source(plugin, broker, FakeApi(registration(plugin)), batch_max=1, repeat_window=0,
                     until=lambda events, sleeps: len(orders_of(events)) == 2)
    assert orders_of(run.events) == [[ORDER_UUID], [ORDER_UUID]]


def test_orders_gathered_when_the_connection_drops_are_still_an_event(plugin):
    broker = FakeBroker([("receipt",)] + [("message", order_message(order_uuid=uuid)) for uuid in ORDER_UUIDS[:3]]
                        + [("disconnect",)], [("receipt",)])
    run = run_source(plugin, broker, FakeApi(registration(plugin)),
                     until=lambda events, sleeps: len(orders_of(events)) == 2)
    assert orders_of(run.events) == [ORDER_UUIDS[:1], ORDER_UUIDS[1:3]]
    # Their connection was gone before they were queued: none is acknowledged on it (the broker
    # delivers them again, and the passes find them done).
    assert broker.acks == []


def test_resource_events_are_gathered_apart_from_orders(plugin):
    resource = json.dumps({"object_type": "resource", "resource_uuid": RESOURCE_UUID})
    other = json.dumps({"object_type": "resource", "resource_uuid": ORDER_UUIDS[4]})
    broker = FakeBroker([("receipt",), ("message", resource), ("message", order_message()), ("message", other),
                         ("message", resource)])
    run = run_source(plugin, broker, FakeApi(registration(plugin)), batch_window=0.3,
                     until=lambda events, sleeps: len(events) == 4)
    kinds = [(event["waldur"]["type"], event["waldur"].get("resource_uuids") or event["waldur"].get("order_uuids"))
             for event in run.events[1:]]
    # One resource named twice in a batch is named once; both messages are kept.
    assert kinds == [("resource", [RESOURCE_UUID]), ("order", [ORDER_UUID]), ("resource", [ORDER_UUIDS[4], RESOURCE_UUID])]
    assert len(run.events[-1]["waldur"]["messages"]) == 2


def test_malformed_message_is_logged_as_a_warning(plugin, caplog):
    broker = FakeBroker([("receipt",), ("message", "{not json")])
    with caplog.at_level(logging.INFO, logger=plugin.LOGGER_NAME):
        run_source(plugin, broker, FakeApi(registration(plugin)), until=lambda events, sleeps: broker.acks)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("Malformed message on queue consumer_q" in r.getMessage() and "not JSON" in r.getMessage()
               for r in warnings)


def test_not_found_error_registers_the_queue_again(plugin):
    broker = FakeBroker(
        [("error", {"message": "not_found"}, "NOT_FOUND - no queue 'consumer_q' in vhost 'v1'")],
        [("receipt",), ("message", order_message())])
    api = FakeApi(registration(plugin))
    run = run_source(plugin, broker, api, until=lambda events, sleeps: len(events) == 2)
    assert api.calls == 2 and run.source.registrations == 2
    assert len(broker.made) == 2
    assert run.sleeps == [1.0]
    assert run.events[1]["waldur"]["order_uuid"] == ORDER_UUID


@pytest.mark.parametrize("headers, body, registrations", [
    ({"message": "not_found"}, "NOT_FOUND - no queue 'consumer_q' in vhost 'v1'", 2),
    ({"message": "access_refused"}, "ACCESS_REFUSED - operation not permitted", 1),
])
def test_only_queue_errors_after_subscribing_register_again(plugin, headers, body, registrations):
    broker = FakeBroker([("receipt",), ("error", headers, body)], [("receipt",), ("message", order_message())])
    api = FakeApi(registration(plugin))
    run = run_source(plugin, broker, api, until=lambda events, sleeps: len(events) == 2)
    assert api.calls == registrations
    assert len(broker.made) == 2 and run.sleeps == [1.0]  # either way the session starts over


def test_cancelled_subscription_registers_the_queue_again(plugin):
    broker = FakeBroker(
        [("receipt",), ("error", {"message": "Server cancelled subscription", "subscription": "consumer_q"}, "")],
        [("receipt",), ("message", order_message())])
    api = FakeApi(registration(plugin))
    run = run_source(plugin, broker, api, until=lambda events, sleeps: len(events) == 2)
    assert api.calls == 2 and run.sleeps == [1.0]


def test_closed_before_the_subscription_receipt_registers_again(plugin):
    # RabbitMQ's web-STOMP closes the WebSocket without an ERROR frame when it refuses a SUBSCRIBE.
    broker = FakeBroker([("disconnect",)], [("receipt",), ("message", order_message())])
    api = FakeApi(registration(plugin))
    run_source(plugin, broker, api, until=lambda events, sleeps: len(events) == 2)
    assert api.calls == 2


def test_lost_connection_reconnects_without_registering_again(plugin):
    broker = FakeBroker([("receipt",), ("disconnect",)], [("receipt",), ("disconnect",)],
                        [("receipt",), ("message", order_message())])
    api = FakeApi(registration(plugin))
    run = run_source(plugin, broker, api, until=lambda events, sleeps: len(events) == 2)
    assert api.calls == 1
    # The subscription had been accepted each time: the backoff starts over at 1 s.
    assert run.sleeps == [1.0, 1.0]


def test_failed_connections_back_off_exponentially(plugin):
    broker = FakeBroker([("refuse",)], [("refuse",)], [("refuse",)], [("receipt",), ("message", order_message())])
    run = run_source(plugin, broker, FakeApi(registration(plugin)), until=lambda events, sleeps: len(events) == 2)
    assert run.sleeps == [1.0, 2.0, 4.0]


def test_connection_errors_never_log_the_token(plugin, caplog):
    broker = FakeBroker([("refuse",)], [("receipt",), ("message", order_message())])
    with caplog.at_level(logging.DEBUG):
        run_source(plugin, broker, FakeApi(registration(plugin)), until=lambda events, sleeps: len(events) == 2)
    assert "connection to ******** refused" in caplog.text
    assert TOKEN not in caplog.text


def test_bad_credentials_at_startup_stop_the_source(plugin):
    api = FakeApi(plugin.WaldurApiError(401, "GET", "/api/marketplace-site-agent-identities/", "Invalid token."))
    events = []
    with pytest.raises(RuntimeError, match="Cannot register the event queue of offering %s: .*401" % OFFERING):
        run_source(plugin, FakeBroker(), api, until=lambda seen, sleeps: events.extend(seen))
    assert events == []  # not even the startup sweep: its pass would fail the same way


def test_waldur_briefly_down_at_startup_is_retried(plugin):
    api = FakeApi(plugin.WaldurApiError(503, "GET", "/api/marketplace-site-agent-identities/", "Service Unavailable"),
                  plugin.WaldurApiError(None, "GET", "/api/marketplace-site-agent-identities/", "connection refused"),
                  registration(plugin))
    broker = FakeBroker([("receipt",), ("message", order_message())])
    run = run_source(plugin, broker, api, until=lambda events, sleeps: len(events) == 2)
    assert api.calls == 3 and run.sleeps == [1.0, 2.0]


def test_sweeps_at_startup_and_every_interval(plugin):
    broker = FakeBroker([("receipt",)])
    events = run_source(plugin, broker, FakeApi(registration(plugin)), sweep_interval=0.05,
                        until=lambda events, sleeps: len(events) >= 3).events
    assert [e["waldur"]["reason"] for e in events[:3]] == ["startup", "interval", "interval"]
    assert all(e == {"waldur": {"type": "sweep", "pass_name": "order_process", "offering_uuid": OFFERING,
                                "reason": e["waldur"]["reason"]}}
               for e in events)


def test_sweeps_continue_while_the_broker_is_unreachable(plugin):
    broker = FakeBroker(*[[("refuse",)]] * 50)
    events = run_source(plugin, broker, FakeApi(registration(plugin)), sweep_interval=0.05,
                        until=lambda events, sleeps: len(events) >= 3).events
    assert {e["waldur"]["type"] for e in events} == {"sweep"}


def test_main_rejects_bad_arguments_before_connecting(plugin):
    with pytest.raises(ValueError, match="offering_uuid"):
        asyncio.run(plugin.main(asyncio.Queue(), {"waldur_api_url": "https://w.example.com",
                                                  "waldur_api_token": TOKEN, "eda_feedback_queue": None}))


# ------------------------------------------------------------------------------------------ the configuration file
def site_offering(**overrides):
    offering = {"name": "DigitalOcean VM", "waldur_api_url": "https://waldur.example.com/api/",
                "waldur_api_token": TOKEN, "waldur_offering_uuid": OFFERING, "backend_type": "digitalocean",
                "order_processing_backend": "digitalocean", "membership_sync_backend": "digitalocean",
                "stomp_enabled": True, "backend_settings": {"token": "do-token-for-the-tests"}}
    offering.update(overrides)
    return {key: value for key, value in offering.items() if value is not None}


def test_stomp_endpoint_defaults_follow_the_upstream_agent(plugin):
    (parsed,), notes = plugin.stomp_offerings({"offerings": [site_offering()]}, environ={})
    assert (parsed.api_root, parsed.token, parsed.offering_uuid_hex, parsed.offering_name) == \
        ("https://waldur.example.com/", TOKEN, OFFERING, "DigitalOcean VM")
    assert (parsed.stomp_host, parsed.stomp_port, parsed.stomp_ws_path, parsed.use_websocket, parsed.use_tls) == \
        ("waldur.example.com", 443, "/rmqws-stomp", True, True)
    assert parsed.object_types == ("order", "resource") and notes == []
    (plain,), _notes = plugin.stomp_offerings({"offerings": [site_offering(websocket_use_tls=False)]}, environ={})
    assert (plain.stomp_port, plain.use_tls) == (80, False)


def test_stomp_keys_of_the_file_give_the_endpoint(plugin):
    offering = site_offering(stomp_ws_host="mq.example.com", stomp_ws_port=15674, stomp_ws_path="ws",
                             websocket_use_tls=False, verify_ssl=False)
    (parsed,), _notes = plugin.stomp_offerings({"offerings": [offering]}, environ={})
    assert (parsed.stomp_host, parsed.stomp_port, parsed.stomp_ws_path, parsed.use_tls, parsed.verify_ssl) == \
        ("mq.example.com", 15674, "/ws", False, False)


def test_only_stomp_enabled_offerings_are_served_and_the_others_named(plugin):
    config = {"offerings": [
        site_offering(),
        site_offering(name="Polled", waldur_offering_uuid="e" * 32, stomp_enabled=None),
        site_offering(name="Azure VM", waldur_offering_uuid="a" * 32, membership_sync_backend=None),
    ]}
    served, notes = plugin.stomp_offerings(config, environ={})
    assert [(s.offering_name, s.object_types) for s in served] == \
        [("DigitalOcean VM", ("order", "resource")), ("Azure VM", ("order",))]
    assert notes == ["Offering Polled: stomp_enabled is not true, left to the polling passes",
                     "Offering Azure VM: no membership_sync_backend (or stomp_membership_sync_enabled is false): "
                     "resource events (pause, downscale, restore) are not subscribed"]
    (only,), _notes = plugin.stomp_offerings(config, "A" * 32, environ={})
    assert only.offering_name == "Azure VM"
    (membership_off,), _notes = plugin.stomp_offerings(
        {"offerings": [site_offering(stomp_membership_sync_enabled=False)]}, environ={})
    assert membership_off.object_types == ("order",)


@pytest.mark.parametrize("config, wanted, message", [
    ({"offerings": [site_offering(stomp_enabled=False)]}, None,
     "no offering of the configuration file has stomp_enabled: true"),
    ({"offerings": [site_offering()]}, "Nope", "offering: no offering named or with UUID 'Nope'"),
    ({"offerings": [site_offering(waldur_api_token=None)]}, None, "stomp_enabled needs waldur_api_token"),
    ({"offerings": [site_offering(stomp_ws_port="x")]}, None, "offering DigitalOcean VM: stomp_port must be"),
])
def test_configuration_problems_are_named(plugin, config, wanted, message):
    with pytest.raises(ValueError, match=message):
        plugin.stomp_offerings(config, wanted, environ={})


def test_token_from_the_environment_when_the_file_has_none(plugin):
    (parsed,), _notes = plugin.stomp_offerings({"offerings": [site_offering(waldur_api_token=None)]},
                                               environ={"WALDUR_API_TOKEN": "from-env"})
    assert parsed.token == "from-env"


def test_config_file_errors_name_the_file(plugin, tmp_path):
    with pytest.raises(ValueError, match="cannot read .*missing.yaml"):
        plugin.read_site_config(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("offerings: [")
    with pytest.raises(ValueError, match="is not valid YAML"):
        plugin.read_site_config(str(bad))


def test_the_file_is_validated_as_the_passes_validate_it(plugin, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"offerings": [site_offering(backend_settings={}, waldur_offering_uuid="nope")]}))
    with pytest.raises(ValueError) as caught:
        plugin.config_settings(str(path), environ={})
    assert "2 problems in %s" % path in str(caught.value)
    assert "offerings[0].waldur_offering_uuid: " in str(caught.value)
    assert "offerings[0].backend_settings.token: required" in str(caught.value)
    # a secret the file leaves out is taken from the environment, as the passes take it
    path.write_text(json.dumps({"offerings": [site_offering(backend_settings={}, waldur_api_token=None)]}))
    (parsed,), _notes = plugin.config_settings(str(path), environ={"DIGITALOCEAN_ACCESS_TOKEN": "do-token",
                                                                   "WALDUR_API_TOKEN": "from-env"})
    assert parsed.token == "from-env"


def test_offerings_of_other_backends_are_left_to_their_agent(plugin):
    config = {"offerings": [site_offering(), site_offering(name="HPC", backend_type="slurm",
                                                           waldur_offering_uuid="e" * 32)]}
    served, notes = plugin.stomp_offerings(config, environ={})
    assert [item.offering_name for item in served] == ["DigitalOcean VM"]
    assert notes == ["Offering HPC: backend_type slurm, left to the agent of its backend"]


def test_main_needs_a_config_file_when_no_offering_is_given(plugin, monkeypatch):
    monkeypatch.delenv("WALDUR_SITE_AGENT_CONFIG", raising=False)
    with pytest.raises(ValueError, match="config is required .*WALDUR_SITE_AGENT_CONFIG"):
        asyncio.run(plugin.main(asyncio.Queue(), {"config": "", "offering": ""}))


def test_a_rotated_token_is_read_again_and_registers_with_it(plugin, tmp_path, caplog):
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"offerings": [site_offering()]}))
    reads = []

    def reload():
        reads.append(path.read_text())
        if len(reads) == 2:  # the operator rotates the token while the first session runs
            path.write_text(json.dumps({"offerings": [site_offering(waldur_api_token="rotated-token")]}))
        return plugin.reread_offering(str(path), OFFERING, {"connect_timeout": 2})

    api = FakeApi(registration(plugin))
    broker = FakeBroker([("receipt",), ("disconnect",)], [("receipt",), ("message", order_message())])

    with caplog.at_level(logging.INFO):
        run = run_source(plugin, broker, api, reload=reload,
                         until=lambda events, sleeps: any(e["waldur"]["type"] == "order" for e in events))
    assert [login[1] for login in broker.logins] == [TOKEN, "rotated-token"]
    assert api.calls == 2 and run.source.settings.token == "rotated-token"
    assert "token of offering DigitalOcean VM changed in the configuration file" in caplog.text
    assert "rotated-token" not in caplog.text


def test_sweep_periods_default_to_the_upstream_environment_in_minutes(plugin):
    environ = {"WALDUR_SITE_AGENT_RECONCILIATION_PERIOD_MINUTES": "0.5",
               "WALDUR_SITE_AGENT_RESOURCE_STATUS_RECONCILIATION_MINUTES": "2"}
    assert plugin.tuning_options({}, environ) == {"sweep_interval": 30.0, "membership_sweep_interval": 120.0}
    assert plugin.tuning_options({"sweep_interval": 5}, environ)["sweep_interval"] == 5
    with pytest.raises(ValueError, match="WALDUR_SITE_AGENT_RECONCILIATION_PERIOD_MINUTES must be a number"):
        plugin.tuning_options({}, {"WALDUR_SITE_AGENT_RECONCILIATION_PERIOD_MINUTES": "hourly"})
