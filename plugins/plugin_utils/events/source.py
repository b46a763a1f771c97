# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""One offering's event stream: registration, connection, subscription, reconnection with
backoff, sweeps, and the batching of order and resource messages into events (see the
source's documentation for the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import functools
import logging
import random
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import redact_text
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.errors import WaldurApiError
from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.messages import (
    EVENT,
    IGNORED,
    LOGGER_NAME,
    MALFORMED,
    Decision,
    backoff_delay,
    is_cancelled,
    is_not_found,
    merge_events,
    message_to_event,
    sweep_event,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.registration import WaldurEventsApi
from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.stomp_link import (
    StompConnectError,
    _Listener,
    close_connection,
    stomp_connection,
)

logger = logging.getLogger(LOGGER_NAME)
# Of a dropped message's body the log shows this many characters, masked over the first
# BODY_PREFIX_WINDOW (a frame may be 1 MiB of anything; the line must stay short and secret-free).
BODY_PREFIX = 40
BODY_PREFIX_WINDOW = 256


class WaldurStompSource:
    """Registration, connection, subscription and reconnection for one offering.

    ``api`` (``register()`` -> :class:`QueueRegistration`), ``connection_factory``
    (settings, registration -> stomp-py connection) and ``sleep`` are injectable so the
    unit tests can drive every path without a broker.
    """

    def __init__(self, queue, settings, api=None, connection_factory=stomp_connection, sleep=asyncio.sleep,
                 rand=random.random, reload=None, on_token=None):
        self.queue = queue
        self.settings = settings
        # reload() -> fresh Settings of this offering (the configuration file read again)
        # before each registration and connection; on_token(token) learns every token seen.
        self.reload = reload
        self.on_token = on_token
        self.api = api or WaldurEventsApi(settings)
        self.connection_factory = connection_factory
        self.sleep = sleep
        self.rand = rand
        self.registration = None
        self.registration_stale = True
        self.registrations = 0
        self.connection = None
        self.generation = 0
        self.inbox = None
        self.loop = None
        self.registered = None
        self.counts = {EVENT: 0, IGNORED: 0, MALFORMED: 0, "sweep": 0}
        # kind (order, resource) -> [(event, ack id)] gathered for its next event
        self.batches = {}
        self.last_emitted = {}
        # order uuid -> when an event named it (monotonic): what its executing echo is
        self.emitted_orders = {}
        # the orders of the last order event while its run has not been seen claiming them
        self.unclaimed = set()

    def _reload(self):
        """Read the offering's settings again; a rotated token means a new registration and
        connection with it. A file that cannot be read keeps the settings read before."""
        if self.reload is None:
            return
        try:
            settings = self.reload()
        except Exception as exc:
            logger.warning("Could not read the configuration of offering %s again (keeping what was read "
                           "before): %s", self.settings.offering_name, redact_text(str(exc), [self.settings.token]))
            return
        if self.on_token is not None:
            self.on_token(settings.token)
        if settings.token != self.settings.token:
            logger.info("The Waldur token of offering %s changed in the configuration file: registering "
                        "the event queue with the new one", settings.offering_name)
            self.registration_stale = True
        self.settings = settings
        self.api.settings = settings

    async def run(self):
        self.loop = asyncio.get_running_loop()
        self.inbox = asyncio.Queue()
        self.registered = asyncio.Event()
        sweepers = [asyncio.ensure_future(self._sweep_loop())]
        if "resource" in self.settings.object_types and self.settings.membership_sweep_interval > 0:
            sweepers.append(asyncio.ensure_future(self._membership_sweep_loop()))
        try:
            await self._consume_forever()
        finally:
            for sweeper in sweepers:
                sweeper.cancel()
            close_connection(self.connection)
            self.connection = None

    # -- sweeps --------------------------------------------------------------------------
    async def _sweep_loop(self):
        # After the first registration: a pass before it would fail the same way it did.
        await self.registered.wait()
        await self._emit_sweep("startup")
        interval = self.settings.sweep_interval
        if interval <= 0:
            return
        while True:
            await asyncio.sleep(interval)
            await self._emit_sweep("interval")

    async def _membership_sweep_loop(self):
        # The reconciliation of paused/downscaled flags whose resource event was lost.
        await self.registered.wait()
        while True:
            await asyncio.sleep(self.settings.membership_sweep_interval)
            await self._emit_sweep("interval", "membership_sync")

    async def _emit_sweep(self, reason, pass_name="order_process"):
        logger.info("Sweep (%s): a full %s pass for offering %s", reason, pass_name, self.settings.offering_uuid_hex)
        await self.queue.put(sweep_event(self.settings.offering_uuid_hex, reason, pass_name))
        self.counts["sweep"] += 1

    # -- the connection loop ---------------------------------------------------------------
    async def _consume_forever(self):
        failures = 0
        while True:
            self._reload()
            try:
                if self.registration is None or self.registration_stale:
                    await self._register()
                if await self._session(self.registration):
                    failures = 0
            except WaldurApiError as exc:
                if self.registration is None and not exc.transient:
                    # Wrong URL, token or offering: stop with the reason rather than retry forever.
                    raise RuntimeError("Cannot register the event queue of offering %s: %s"
                                       % (self.settings.offering_uuid_hex, exc)) from None
                logger.warning("Event queue registration failed: %s", exc)
            except StompConnectError as exc:
                logger.warning("STOMP connection to %s:%s failed: %s", self.settings.stomp_host,
                               self.settings.stomp_port, exc)
            delay = backoff_delay(failures, rand=self.rand)
            failures += 1
            logger.info("Reconnecting to the STOMP broker in %.1f s", delay)
            await self.sleep(delay)

    async def _register(self):
        registration = await self.loop.run_in_executor(None, self.api.register)
        self.registration, self.registration_stale = registration, False
        self.registrations += 1
        self.registered.set()
        logger.info("Registered event queue %s (vhost %s, object types %s) for offering %s",
                    registration.queue_name, registration.vhost,
                    ", ".join(registration.object_types) or "-", self.settings.offering_uuid_hex)

    async def _next(self, generation, timeout=None):
        """The next callback of this connection; older connections' callbacks are dropped."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                item = await asyncio.wait_for(self.inbox.get(), remaining)
            except asyncio.TimeoutError:
                return None
            if item[0] == generation:
                return item[1], item[2]

    async def _session(self, registration):
        """One connection: connect, subscribe, consume until it ends. Returns True when the
        broker accepted the subscription (the backoff starts over)."""
        self.generation += 1
        generation = self.generation
        connection = self.connection_factory(self.settings, registration)
        connection.set_listener("waldur", _Listener(self.loop, self.inbox, generation))
        self.connection = connection
        try:
            try:
                await self.loop.run_in_executor(None, functools.partial(
                    connection.connect, registration.rmq_username, self.settings.token, wait=False,
                    headers={"accept-version": "1.2"}))
            except Exception as exc:
                detail = "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
                raise StompConnectError(redact_text(str(detail), [self.settings.token])) from None
            item = await self._next(generation, self.settings.connect_timeout)
            if item is None:
                raise StompConnectError("no CONNECTED frame within %s s" % self.settings.connect_timeout)
            kind, frame = item
            if kind != "connected":
                raise StompConnectError("the broker refused the connection: %s" % self._frame_text(frame))
            return await self._consume(connection, generation, registration)
        finally:
            # In a worker thread: a DISCONNECT on a half-dead socket must not stall the loop.
            await self.loop.run_in_executor(None, close_connection, connection)
            if self.connection is connection:
                self.connection = None

    def _frame_text(self, frame):
        if frame is None:
            return "the connection closed"
        message = (frame.headers or {}).get("message", "")
        body = (frame.body or "").strip() if isinstance(frame.body, str) else ""
        return redact_text(" - ".join(part for part in (message, body) if part) or "no details", [self.settings.token])

    async def _consume(self, connection, generation, registration):
        subscribed = await self._consume_frames(connection, generation, registration)
        # The connection ended: what was gathered is still work to do. Its messages may not
        # be acknowledged any more and come again; the passes are idempotent.
        await self._flush_due(connection, generation, every=True)
        return subscribed

    async def _consume_frames(self, connection, generation, registration):
        destination = "/amq/queue/%s" % registration.queue_name
        receipt = "subscribe-%s-%d" % (registration.queue_name, generation)
        # A message is acknowledged once the event that names it is on the rulebook's queue,
        # so a batch needs the broker to deliver that many before the first ACK.
        prefetch = self.settings.batch_max
        connection.subscribe(destination, id=registration.queue_name, ack="client-individual",
                             headers={"prefetch-count": str(prefetch), "receipt": receipt})
        subscribed = False
        while True:
            timeout = self._batch_timeout() if subscribed else self.settings.connect_timeout
            item = await self._next(generation, timeout)
            if item is None:
                if subscribed:
                    await self._flush_due(connection, generation)
                    continue
                logger.warning("No receipt for the subscription to %s within %s s", destination,
                               self.settings.connect_timeout)
                self.registration_stale = True
                return False
            kind, frame = item
            if kind == "receipt" and (frame.headers or {}).get("receipt-id") == receipt:
                subscribed = True
                logger.info("Subscribed to %s on %s:%s", destination, self.settings.stomp_host,
                            self.settings.stomp_port)
            elif kind == "message":
                subscribed = True
                await self._handle_message(connection, generation, frame, registration)
            elif kind == "error":
                # After an ERROR the subscription is gone even when the socket stays open
                # (RabbitMQ cancels it when the queue is deleted): always start over.
                text = self._frame_text(frame)
                if is_not_found(frame.headers, frame.body):
                    logger.warning("The broker does not know queue %s (%s): registering it again",
                                   registration.queue_name, text)
                    self.registration_stale = True
                elif is_cancelled(frame.headers, registration.queue_name):
                    logger.warning("The broker cancelled the subscription to %s (%s): registering the queue again",
                                   destination, text)
                    self.registration_stale = True
                else:
                    logger.warning("STOMP ERROR frame: %s", text)
                    if not subscribed:
                        self.registration_stale = True
                return subscribed
            elif kind == "disconnected":
                if not subscribed:
                    # web-STOMP may close without an ERROR frame when it refuses a subscription.
                    logger.warning("The broker closed the connection before accepting the subscription to %s",
                                   destination)
                    self.registration_stale = True
                else:
                    logger.warning("Lost the connection to the STOMP broker")
                return subscribed

    async def _handle_message(self, connection, generation, frame, registration):
        headers = frame.headers or {}
        ack_id = headers.get("ack") or headers.get("message-id")
        try:
            decision = self._decide(frame)
        except Exception as exc:  # the last line of defence: one frame must not stop the stream
            decision = Decision(None, MALFORMED, "the message could not be read (%s)" % type(exc).__name__)
        self.counts[decision.outcome] += 1
        entry = None
        try:
            if decision.outcome == EVENT:
                logger.info("Event: %s", decision.reason)
                kind = decision.event["waldur"]["type"]
                entry = (decision.event, ack_id)
                self.batches.setdefault(kind, []).append(entry)
                if self._due(kind):
                    await self._flush(kind, connection, generation)
                return
            if decision.outcome == IGNORED:
                logger.info("Ignored a message: %s", decision.reason)
            else:
                self._log_dropped(frame, registration, decision.reason)
            self._ack(connection, generation, [ack_id])
            await self._flush_due(connection, generation)
        except Exception as exc:
            # Batching it failed: a frame still waiting in its batch is taken out and dropped
            # (it would fail again), so the stream and the sweeps go on. Acked ones stay acked
            # (RabbitMQ closes the connection on a second ACK).
            if entry is not None and self._unbatch(entry):
                self.counts[EVENT] -= 1
                self.counts[MALFORMED] += 1
                self._log_dropped(frame, registration, "its event could not be queued (%s)" % type(exc).__name__)
                self._ack(connection, generation, [ack_id])
            else:
                logger.warning("Handling message %s on queue %s failed after it was acknowledged (%s)",
                               headers.get("message-id") or "without message-id", registration.queue_name,
                               type(exc).__name__)

    def _decide(self, frame):
        decision = message_to_event(frame.body, self.settings.offering_uuid_hex, self.settings.object_types)
        if decision.outcome == EVENT:
            decision = self._unless_echo(decision)
        if decision.order_uuid in self.unclaimed and not (decision.event and decision.event["waldur"].get(
                "order_state") == "pending-provider"):
            # The run of the last order event has claimed (or settled) one of its orders: it
            # is running, and the orders gathered since are the next event, queued behind it.
            self.unclaimed = set()
        return decision

    def _log_dropped(self, frame, registration, reason):
        """One warning naming the frame (queue, offering, message-id) and why it is dropped;
        of the body only a short prefix, secrets masked, control characters escaped."""
        body = frame.body if isinstance(frame.body, (str, bytes)) else ""
        text = body[:BODY_PREFIX_WINDOW]
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        # Masked over a longer window first, so a secret cut by the prefix is masked whole.
        prefix = redact_text(text, [self.settings.token])[:BODY_PREFIX]
        logger.warning("Malformed message on queue %s of offering %s (message-id %s) acknowledged and dropped: %s "
                       "(the body starts %s%s)", registration.queue_name, self.settings.offering_uuid_hex,
                       (frame.headers or {}).get("message-id") or "-", reason, ascii(prefix),
                       "..." if len(body) > BODY_PREFIX else "")

    def _unbatch(self, entry):
        """Take ``entry`` out of the batch holding it; False when it is in none (flushed)."""
        for gathered in self.batches.values():
            for index, item in enumerate(gathered):
                if item is entry:
                    del gathered[index]
                    return True
        return False

    # -- batches -----------------------------------------------------------------------------
    def _unless_echo(self, decision):
        """An order's ``executing`` message soon after its event is the echo of the claim by
        the run that event started: a second run would find nothing to do."""
        event = decision.event["waldur"]
        if event["type"] != "order" or event.get("order_state") != "executing":
            return decision
        emitted = self.emitted_orders.get(event["order_uuid"])
        if emitted is None or time.monotonic() - emitted > self.settings.repeat_window:
            return decision
        return Decision(None, IGNORED, "order %s is executing: the claim of the run its event started %.0f s ago"
                        % (event["order_uuid"], time.monotonic() - emitted), event["order_uuid"])

    def _hold(self, kind):
        """How long a batch of ``kind`` is held after the previous event of its kind: orders
        until that event's run is seen claiming (then 0), resources a fixed window."""
        if kind == "order":
            return self.settings.claim_wait if self.unclaimed else 0.0
        return self.settings.batch_window

    def _due(self, kind):
        gathered = self.batches.get(kind) or []
        if not gathered:
            return False
        if len(gathered) >= self.settings.batch_max:
            return True
        last = self.last_emitted.get(kind)
        return last is None or time.monotonic() - last >= self._hold(kind)

    def _batch_timeout(self):
        """Seconds until the first gathered batch is due; None with nothing gathered."""
        waits = [max(0.0, self.last_emitted.get(kind, 0.0) + self._hold(kind) - time.monotonic())
                 for kind, gathered in self.batches.items() if gathered]
        return min(waits) if waits else None

    async def _flush_due(self, connection, generation, every=False):
        """The gathered batches that are due (``every``: all gathered ones) become events."""
        for kind in list(self.batches):
            if self._due(kind) or (every and self.batches.get(kind)):
                await self._flush(kind, connection, generation)

    async def _flush(self, kind, connection, generation):
        gathered = self.batches.get(kind) or []
        if not gathered:
            return
        try:
            events = [merge_events([item[0] for item in gathered])]
        except Exception as exc:  # never expected: each event still goes, on its own
            logger.warning("Could not merge %d %s events (%s): queued one by one", len(gathered), kind,
                           type(exc).__name__)
            events = [item[0] for item in gathered]
        for event in events:
            await self.queue.put(event)
        # Out of the batch only once queued, and acknowledged at once: what is still in a
        # batch is exactly what is not acknowledged yet.
        self.batches.pop(kind, None)
        self._ack(connection, generation, [item[1] for item in gathered])
        now = time.monotonic()
        self.last_emitted[kind] = now
        if kind == "order":
            uuids = list(dict.fromkeys(uuid for event in events for uuid in event["waldur"]["order_uuids"]))
            self._remember_orders(uuids, now)
            self.unclaimed = set(uuids) if self.settings.claim_wait > 0 else set()
        if len(gathered) > 1:
            logger.info("One %s event for %d messages: %s", kind, len(gathered),
                        ", ".join(events[0]["waldur"].get("order_uuids") or events[0]["waldur"].get("resource_uuids")))

    def _remember_orders(self, order_uuids, now):
        for uuid in order_uuids:
            self.emitted_orders[uuid] = now
        if len(self.emitted_orders) > 4 * self.settings.batch_max:
            horizon = now - self.settings.repeat_window
            self.emitted_orders = {uuid: moment for uuid, moment in self.emitted_orders.items() if moment >= horizon}

    def _ack(self, connection, generation, ack_ids):
        if generation != self.generation:
            return  # its connection is gone: the broker redelivers them
        for ack_id in ack_ids:
            if ack_id is None:
                continue
            try:
                connection.ack(ack_id)
            except Exception as exc:  # the connection dropped meanwhile: redelivered later
                logger.info("Could not acknowledge a message (%s); the broker will redeliver it", type(exc).__name__)
                return
