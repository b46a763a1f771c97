"""Issue 37, item 4: one hostile STOMP frame never stops the event source. The body's size
and nesting are limited before json.loads reads it (``"[" * 100000`` raised RecursionError
out of the source, nothing was acknowledged and the frame came back after every restart);
whatever goes wrong with one frame ends with that frame acknowledged, named in one warning
and dropped, while the other frames and the sweeps go on."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import socket
import threading
import types

import pytest

from tests.unit.eda.source_plugin import EVENTS
from tests.unit.eda.test_waldur_stomp import (
    OFFERING,
    ORDER_UUID,
    ORDER_UUIDS,
    TOKEN,
    FakeApi,
    FakeBroker,
    Frame,
    order_message,
    orders_of,
    registration,
    run_source,
    settings,
)

MESSAGES = importlib.import_module(EVENTS + "messages")
SOURCE = importlib.import_module(EVENTS + "source")


def decide(plugin, body):
    return plugin.message_to_event(body, OFFERING, ("order", "resource"))


def order_with(extra):
    """An order message (valid but for ``extra``), its last key's value written as given."""
    return '{"object_type": "order", "order_uuid": "%s", "order_state": "pending-provider", "extra": %s}' % (
        ORDER_UUID, extra)


def nested_array(depth):
    return "[" * depth + "]" * depth


# ------------------------------------------------------------------------------------------ nesting
@pytest.mark.parametrize("text, depth", [
    ("1", 0),
    ("[]", 1),
    ("{}", 1),
    ('{"a": [1, {"b": 2}]}', 3),
    ("[[]][[[]]]", 3),
    ("[" * 100000, 100000),                                   # deep arrays, counted without recursion
    ('{"a":' * 5000 + "1" + "}" * 5000, 5000),                 # deep objects
    ('["[[[[", "{{{{", "]]]]"]', 1),                           # brackets inside strings do not count
    (r'["\"[[[[", "\\\"{{{{"]', 1),                            # nor after an escaped quote
    (r'["a\\", [[[1]]]]', 4),                                  # an escaped backslash ends the string
    (r'["a\\\"", [[[1]]]]', 4),
    ('[["never closed [[[[[[', 2),                             # json.loads stops at the open string
])
def test_nesting_is_counted_without_parsing(plugin, text, depth):
    assert plugin.json_nesting(text) == depth


def test_deeply_nested_arrays_are_malformed_before_json_reads_them(plugin):
    decision = decide(plugin, "[" * 100000)
    assert (decision.event, decision.outcome) == (None, "malformed")
    assert decision.reason == "the body nests 100,000 levels deep, over the 32-level limit"


def test_deeply_nested_objects_are_malformed(plugin):
    decision = decide(plugin, order_with('{"a": ' * 40 + "1" + "}" * 40))
    assert decision.outcome == "malformed" and decision.reason == \
        "the body nests 41 levels deep, over the 32-level limit"


def test_exactly_the_nesting_limit_is_accepted_one_more_is_refused(plugin):
    assert plugin.MAX_NESTING == 32
    # The message object itself is the first level.
    at_limit = decide(plugin, order_with(nested_array(plugin.MAX_NESTING - 1)))
    assert at_limit.outcome == "event" and at_limit.event["waldur"]["order_uuid"] == ORDER_UUID
    over = decide(plugin, order_with(nested_array(plugin.MAX_NESTING)))
    assert over.outcome == "malformed" and over.reason == "the body nests 33 levels deep, over the 32-level limit"
    # Bytes (stomp-py without auto_decode) are held to the same limit.
    assert decide(plugin, order_with(nested_array(plugin.MAX_NESTING)).encode()).outcome == "malformed"


def test_brackets_and_escaped_quotes_inside_strings_are_not_nesting(plugin):
    note = 'say "' + "[" * 100 + '{' * 100 + '" and \\ then ' + "]" * 3
    body = json.dumps({"object_type": "order", "order_uuid": ORDER_UUID, "order_state": "pending-provider",
                       "note": note})
    assert plugin.json_nesting(body) == 1
    decision = decide(plugin, body)
    assert decision.outcome == "event" and decision.event["waldur"]["message"]["note"] == note
    # A string that only seems to end (its quote is escaped) hides nothing either.
    hidden = order_with('"a\\\\", "b": ' + nested_array(40))
    assert decide(plugin, hidden).reason == "the body nests 41 levels deep, over the 32-level limit"


# ------------------------------------------------------------------------------------------ size
def padded(size, fill="x"):
    """An order message of exactly ``size`` bytes of UTF-8 (``fill`` one or two bytes long)."""
    empty = order_with('""')
    width = len(fill.encode())
    count, rest = divmod(size - len(empty.encode()), width)
    body = order_with('"%s"' % (fill * count + "y" * rest))
    assert len(body.encode()) == size
    return body


def test_exactly_the_size_limit_is_accepted_one_byte_more_is_refused(plugin):
    assert plugin.MAX_BODY_BYTES == 1024 * 1024
    assert decide(plugin, padded(plugin.MAX_BODY_BYTES)).outcome == "event"
    over = decide(plugin, padded(plugin.MAX_BODY_BYTES + 1))
    assert over.outcome == "malformed" and over.reason == "the body is 1,048,577 bytes, over the 1,048,576-byte limit"
    assert decide(plugin, padded(plugin.MAX_BODY_BYTES + 1).encode()).outcome == "malformed"


def test_the_size_is_counted_in_bytes_of_utf8(plugin):
    # Fewer characters than the limit, more bytes.
    body = padded(2 * 1024 * 1024, fill="\u00e9")
    assert len(body) < 2 * 1024 * 1024
    assert decide(plugin, body).reason == "the body is 2,097,152 bytes, over the 1,048,576-byte limit"


def test_the_limits_come_before_json_reads_the_body(plugin, monkeypatch):
    read = []
    monkeypatch.setattr(MESSAGES, "json", types.SimpleNamespace(loads=read.append))
    decide(plugin, "x" * (plugin.MAX_BODY_BYTES + 1))
    decide(plugin, "[" * 33)
    assert read == []


# ------------------------------------------------------------------------------------------ last defence
def test_recursion_error_deciding_a_message_is_a_malformed_message(plugin, monkeypatch):
    def recurse(body):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(MESSAGES, "json", types.SimpleNamespace(loads=recurse))
    decision = decide(plugin, order_message())
    assert (decision.event, decision.outcome) == (None, "malformed")
    assert decision.reason == "the body nests too deeply to be read"


def test_any_exception_deciding_a_message_is_a_malformed_message(plugin, monkeypatch):
    def broken(value):
        raise KeyError(value)

    monkeypatch.setattr(MESSAGES, "uuid_or_none", broken)
    decision = decide(plugin, order_message())
    assert decision.outcome == "malformed" and decision.reason == "the body could not be read (KeyError)"


# ------------------------------------------------------------------------------------------ the source
def dropped_warnings(caplog):
    return [record.getMessage() for record in caplog.records
            if record.levelno >= logging.WARNING and record.name == MESSAGES.LOGGER_NAME]


def an_order_then_a_sweep(events, sleeps):
    kinds = [(event["waldur"]["type"], event["waldur"].get("reason")) for event in events]
    return ("order", None) in kinds and ("sweep", "interval") in kinds[kinds.index(("order", None)):]


def test_a_hostile_frame_is_acked_and_logged_and_the_stream_goes_on(plugin, caplog):
    broker = FakeBroker([("receipt",), ("message", "[" * 100000), ("message", order_message())])
    with caplog.at_level(logging.INFO, logger=plugin.LOGGER_NAME):
        run = run_source(plugin, broker, FakeApi(registration(plugin)), sweep_interval=0.05,
                         until=an_order_then_a_sweep)
    # Acknowledged (never redelivered), and the good frame after it is an event.
    assert [ack for ack, _queued in broker.acks] == ["ack-1", "ack-2"]
    assert orders_of(run.events) == [[ORDER_UUID]]
    assert run.source.counts["malformed"] == 1 and run.source.counts["event"] == 1
    assert len(broker.made) == 1  # the same connection: nothing restarted
    (warning,) = dropped_warnings(caplog)
    assert warning.startswith("Malformed message on queue consumer_q of offering %s (message-id m-1) "
                              "acknowledged and dropped: the body nests 100,000 levels deep, over the "
                              "32-level limit (the body starts '%s'..." % (OFFERING, "[" * 40))
    assert "[" * 41 not in caplog.text  # of the body, only the short prefix


def test_the_logged_prefix_never_shows_a_secret(plugin, caplog):
    leaky = ["x" * 30 + TOKEN + " and then garbage",
             '{"object_type": "order", "password": "s3cr3t-value-123", ' + "[" * 50]
    broker = FakeBroker([("receipt",)] + [("message", body) for body in leaky])
    with caplog.at_level(logging.INFO, logger=plugin.LOGGER_NAME):
        run_source(plugin, broker, FakeApi(registration(plugin)), until=lambda events, sleeps: len(broker.acks) == 2)
    first, second = dropped_warnings(caplog)
    # The prefix would cut both secrets; they are masked over a longer window first.
    assert TOKEN[:8] not in first and "the body is not JSON" in first and "*" in first
    assert "s3" not in second and '"password": "**' in second and "message-id m-2" in second


def test_an_unexpected_failure_deciding_a_frame_drops_only_that_frame(plugin, monkeypatch, caplog):
    real = SOURCE.message_to_event

    def flaky(body, *args):
        if body == "boom":
            raise KeyError("a bug")
        return real(body, *args)

    monkeypatch.setattr(SOURCE, "message_to_event", flaky)
    broker = FakeBroker([("receipt",), ("message", "boom"), ("message", order_message())])
    with caplog.at_level(logging.INFO, logger=plugin.LOGGER_NAME):
        run = run_source(plugin, broker, FakeApi(registration(plugin)), sweep_interval=0.05,
                         until=an_order_then_a_sweep)
    assert [ack for ack, _queued in broker.acks] == ["ack-1", "ack-2"]
    assert orders_of(run.events) == [[ORDER_UUID]]
    (warning,) = dropped_warnings(caplog)
    assert "(message-id m-1)" in warning and "the message could not be read (KeyError)" in warning


def test_a_frame_whose_event_cannot_be_queued_is_dropped_and_the_rest_go_on(plugin, caplog):
    first, second = ORDER_UUIDS[:2]

    def before_put(event):
        if event["waldur"].get("order_uuids") == [first]:
            raise ValueError("the rulebook refused it")

    broker = FakeBroker([("receipt",), ("message", order_message(order_uuid=first)),
                         ("message", order_message(order_uuid=second))])
    with caplog.at_level(logging.INFO, logger=plugin.LOGGER_NAME):
        run = run_source(plugin, broker, FakeApi(registration(plugin)), batch_max=1, before_put=before_put,
                         until=lambda events, sleeps: len(broker.acks) == 2)
    assert orders_of(run.events) == [[second]]
    assert [ack for ack, _queued in broker.acks] == ["ack-1", "ack-2"]
    assert not any(run.source.batches.values())  # not held for a retry that would fail again
    assert run.source.counts["malformed"] == 1 and run.source.counts["event"] == 1
    (warning,) = dropped_warnings(caplog)
    assert "(message-id m-1)" in warning and "its event could not be queued (ValueError)" in warning


def test_a_batch_that_cannot_be_merged_is_queued_one_event_each(plugin, monkeypatch):
    def broken(events):
        raise TypeError("a bug")

    monkeypatch.setattr(SOURCE, "merge_events", broken)
    broker = FakeBroker([("receipt",)] + [("message", order_message(order_uuid=uuid)) for uuid in ORDER_UUIDS])
    run = run_source(plugin, broker, FakeApi(registration(plugin)), claim_wait=0.2,
                     until=lambda events, sleeps: len(broker.acks) == 5)
    assert orders_of(run.events) == [[uuid] for uuid in ORDER_UUIDS]
    assert run.source.unclaimed == set(ORDER_UUIDS[1:])


# ------------------------------------------------------------------------------------------ stomp-py's thread
class BrokenLoop:
    """An event loop whose hand-over of the first ``kind`` frame from stomp-py's thread fails."""

    def __init__(self, error, loop=None, kind="message"):
        self.error, self.loop, self.kind = error, loop, kind

    def call_soon_threadsafe(self, callback, item):
        if self.kind == item[1]:
            self.kind = None
            raise self.error
        return self.loop.call_soon_threadsafe(callback, item)


def test_the_listener_never_raises_into_stomp_pys_thread(plugin, caplog):
    frame = Frame({"message-id": "m-1", "ack": "a-1"}, "[" * 10)
    inbox = types.SimpleNamespace(put_nowait=None)
    with caplog.at_level(logging.WARNING, logger=plugin.LOGGER_NAME):
        plugin._Listener(BrokenLoop(ValueError("boom")), inbox, 1).on_message(frame)
        plugin._Listener(BrokenLoop(RuntimeError("Event loop is closed")), inbox, 1).on_message(frame)
    assert [record.getMessage() for record in caplog.records if record.name == plugin.LOGGER_NAME] == [
        "Could not pass a message frame to the event source (ValueError): it stays unacknowledged until "
        "the next connection"]


class MiniStompBroker:
    """Just enough of a STOMP 1.2 broker over TCP for stomp-py: CONNECTED, the RECEIPTs asked
    for, the given bodies as MESSAGE frames once subscribed (all in one write, as a busy
    queue delivers them), and the ACKs received."""

    def __init__(self, bodies):
        self.bodies = list(bodies)
        self.acks = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            connection, _address = self.server.accept()
        except OSError:
            return
        with connection:
            buffer = b""
            while True:
                try:
                    data = connection.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buffer += data
                while b"\0" in buffer:
                    raw, buffer = buffer.split(b"\0", 1)
                    raw = raw.lstrip(b"\r\n")
                    if raw:
                        self._answer(connection, raw.decode())

    def _answer(self, connection, raw):
        command, _newline, rest = raw.partition("\n")
        headers = dict(line.split(":", 1) for line in rest.split("\n\n", 1)[0].split("\n") if ":" in line)
        out = b""
        if command in ("CONNECT", "STOMP"):
            out += b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0"
        if "receipt" in headers:
            out += ("RECEIPT\nreceipt-id:%s\n\n" % headers["receipt"]).encode() + b"\0"
        if command == "SUBSCRIBE":
            for number, body in enumerate(self.bodies, 1):
                data = body.encode()
                out += ("MESSAGE\nsubscription:%s\ndestination:/amq/queue/consumer_q\nmessage-id:m-%d\nack:a-%d\n"
                        "content-type:application/json\ncontent-length:%d\n\n"
                        % (headers["id"], number, number, len(data))).encode() + data + b"\0"
        elif command == "ACK":
            self.acks.append(headers["id"])
        if out:
            connection.sendall(out)

    def close(self):
        self.server.close()


def plain_stomp(plugin, port, **overrides):
    return settings(plugin, use_websocket=False, websocket_use_tls=False, stomp_host="127.0.0.1", stomp_port=port,
                    connect_timeout=5, **overrides)


def test_a_failed_hand_over_does_not_end_stomp_pys_delivery(plugin):
    # stomp-py closes the socket when a listener raises: the frames after it would be lost.
    broker = MiniStompBroker(["first", "second"])
    connection = plugin.stomp_connection(plain_stomp(plugin, broker.port), registration(plugin))

    async def listen():
        inbox = asyncio.Queue()
        loop = BrokenLoop(ValueError("boom"), asyncio.get_running_loop())  # fails to pass "first"
        connection.set_listener("waldur", plugin._Listener(loop, inbox, 1))
        await asyncio.get_running_loop().run_in_executor(None, lambda: connection.connect(
            "u1", TOKEN, wait=True, headers={"accept-version": "1.2"}))
        connection.subscribe("/amq/queue/consumer_q", id="consumer_q", ack="client-individual")
        while True:
            item = await asyncio.wait_for(inbox.get(), 5)
            if item[1] == "message":
                return item

    try:
        generation, kind, frame = asyncio.run(listen())
        assert (kind, frame.body, frame.headers["message-id"]) == ("message", "second", "m-2")
        assert connection.is_connected()
    finally:
        plugin.close_connection(connection)
        broker.close()


def test_a_hostile_frame_through_stomp_py_is_acked_and_the_stream_goes_on(plugin, caplog):
    # The real stomp-py connection and receiver thread, a broker speaking STOMP 1.2 on a socket.
    broker = MiniStompBroker(["[" * 100000, order_message()])

    class Real:
        queue = None

        @staticmethod
        def factory(settings, registration):
            return plugin.stomp_connection(settings, registration)

    try:
        with caplog.at_level(logging.INFO, logger=plugin.LOGGER_NAME):
            run = run_source(plugin, Real, FakeApi(registration(plugin)), sweep_interval=0.05,
                             use_websocket=False, websocket_use_tls=False, stomp_host="127.0.0.1",
                             stomp_port=broker.port, until=lambda events, sleeps: an_order_then_a_sweep(
                                 events, sleeps) and len(broker.acks) == 2)
    finally:
        broker.close()
    assert broker.acks == ["a-1", "a-2"]
    assert orders_of(run.events) == [[ORDER_UUID]]
    (warning,) = dropped_warnings(caplog)
    assert "(message-id m-1)" in warning and "100,000 levels deep, over the 32-level limit" in warning
    assert run.sleeps == []  # no reconnection was ever scheduled
