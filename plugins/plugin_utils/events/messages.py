# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""What the event source makes of Waldur's queue messages: the decision per message (event,
ignored, malformed), one event for a gathered batch, the sweep events, the broker's error
frames and the reconnection backoff. Pure functions, no I/O."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import logging
import random
import re
from collections import namedtuple
from itertools import accumulate

from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import uuid_or_none

LOGGER_NAME = "waldur.site_agent.waldur_stomp"
logger = logging.getLogger(LOGGER_NAME)

SUPPORTED_OBJECT_TYPES = ("order", "resource")
# Every object type Waldur's event queues know (ObservableObjectTypeEnum of the 8.x API):
# a message of one of these that we did not ask for is ignored, anything else is malformed.
KNOWN_OBJECT_TYPES = frozenset((
    "call", "course_account", "importable_resources", "offering_resources_sync", "offering_user",
    "order", "proposal", "resource", "resource_api_key_rotation", "resource_end_date_change_request",
    "resource_periodic_limits", "service_account", "service_provider_account",
    "service_provider_project_group", "user_lifecycle", "user_profile", "user_role", "user_ssh_key",
))
# Order states in which the provider has nothing to do (yet, or any more).
NOT_ACTIONABLE_ORDER_STATES = frozenset((
    "pending-consumer", "pending-project", "pending-start-date",
    "done", "erred", "canceled", "rejected",
))
BACKOFF_INITIAL = 1.0
BACKOFF_FACTOR = 2.0
BACKOFF_MAX = 120.0
BACKOFF_JITTER = 0.25
# The rulebook runs one pass at a time, so one event per order would queue a burst of orders
# behind each other. The first message after a quiet spell is an event at once; later order
# messages are gathered until the run of the previous order event is seen claiming its orders
# (Waldur's message that one of them is executing), so exactly one event waits behind the
# running pass and holds every order that arrived meanwhile - at most DEFAULT_CLAIM_WAIT
# seconds, for a run that claims nothing. Resource messages (no such sign) are gathered for
# DEFAULT_BATCH_WINDOW seconds after the previous resource event. At most DEFAULT_BATCH_MAX each.
DEFAULT_CLAIM_WAIT = 30.0
DEFAULT_BATCH_WINDOW = 5.0
DEFAULT_BATCH_MAX = 100
# An order's "executing" message within this many seconds of its event is the echo of the
# claim by the run that event started (the upstream agent re-reads the order and skips it).
DEFAULT_REPEAT_WINDOW = 300.0
# Waldur's messages are small flat objects (a few hundred bytes, one level). A body over
# either limit is malformed before json.loads sees it: its C scanner recurses once per level,
# so "[" * 100000 raised RecursionError out of the source, and the frame, never acknowledged,
# came back after every restart.
MAX_BODY_BYTES = 1024 * 1024
MAX_NESTING = 32
# order_uuid: the order a valid order message is about, events and ignored ones alike (its
# later messages tell the source that a run has claimed or settled it).
Decision = namedtuple("Decision", ["event", "outcome", "reason", "order_uuid"], defaults=(None,))
EVENT, IGNORED, MALFORMED = "event", "ignored", "malformed"


def backoff_delay(attempt, rand=random.random, initial=BACKOFF_INITIAL, factor=BACKOFF_FACTOR,
                  maximum=BACKOFF_MAX, jitter=BACKOFF_JITTER):
    """Seconds before reconnect attempt ``attempt`` (0 = the first after a failure):
    ``min(maximum, initial * factor ** attempt)``, shortened by up to ``jitter`` at random
    so agents disconnected together do not reconnect together. Never above ``maximum``."""
    exponent = min(max(int(attempt), 0), 64)
    base = min(maximum, initial * factor ** exponent)
    return base * (1.0 - jitter * rand())


def sweep_event(offering_uuid_hex, reason, pass_name="order_process"):
    """A sweep: the full ``pass_name`` pass (order_process or membership_sync) of the offering."""
    return {"waldur": {"type": "sweep", "pass_name": pass_name, "offering_uuid": offering_uuid_hex,
                       "reason": reason}}


_STEPS = {"[": 1, "{": 1, "]": -1, "}": -1}
_BRACKETS = re.compile(r"[\[\]{}]")


def _string_end(text, start):
    """The index after the quote closing the JSON string whose text starts at ``start``
    (just after its opening quote), or -1 when it is never closed."""
    position = start
    while True:
        quote = text.find('"', position)
        if quote < 0:
            return -1
        # A quote after an odd run of backslashes is part of the string. The run cannot
        # reach back past ``position``: the character before it is a quote.
        before = quote
        while before > position and text[before - 1] == "\\":
            before -= 1
        if (quote - before) % 2 == 0:
            return quote + 1
        position = quote + 1


def json_nesting(text):
    """How deep the arrays and objects of JSON ``text`` nest (``[]`` is 1, ``{"a": [1]}`` 2),
    counted in one pass without recursion and without parsing it; brackets inside strings
    (escaped quotes and all) do not count. Text that is not JSON gets a number too, never
    below the depth json.loads would reach in it."""
    depth = deepest = 0
    position = 0
    while True:
        quote = text.find('"', position)
        segment = text[position:] if quote < 0 else text[position:quote]
        steps = [_STEPS[bracket] for bracket in _BRACKETS.findall(segment)]
        if steps:
            # Below zero only once the first value has closed; json.loads reads nothing after
            # it (extra data), so an undercount there is harmless.
            deepest = max(deepest, depth + max(accumulate(steps)))
            depth += sum(steps)
        if quote < 0:
            return deepest
        position = _string_end(text, quote + 1)
        if position < 0:  # an unclosed string: json.loads stops there
            return deepest


def body_problem(body):
    """Why the body ``body`` (bytes or text) is refused before json.loads reads it (over
    :data:`MAX_BODY_BYTES`, or nested deeper than :data:`MAX_NESTING`), or None."""
    if isinstance(body, bytes):
        size = len(body)
    else:
        size = len(body.encode("utf-8", "surrogatepass"))
    if size > MAX_BODY_BYTES:
        return "the body is {0:,} bytes, over the {1:,}-byte limit".format(size, MAX_BODY_BYTES)
    # Decoding cannot change the brackets and quotes: UTF-8 never hides ASCII in a sequence.
    depth = json_nesting(body.decode("utf-8", "replace") if isinstance(body, bytes) else body)
    if depth > MAX_NESTING:
        return "the body nests {0:,} levels deep, over the {1:,}-level limit".format(depth, MAX_NESTING)
    return None


def message_to_event(body, offering_uuid_hex, object_types):
    """Decide what one queue message becomes: ``Decision(event, outcome, reason)`` where
    outcome is ``event`` (put ``event`` on the rulebook queue), ``ignored`` (valid, nothing
    to do) or ``malformed`` (logged as a warning). Either way the message is acknowledged.
    Never raises: a body that breaks the decision is malformed too."""
    try:
        return _decide(body, offering_uuid_hex, object_types)
    except RecursionError:
        return Decision(None, MALFORMED, "the body nests too deeply to be read")
    except Exception as exc:  # the last line of defence: one message must not stop the source
        return Decision(None, MALFORMED, "the body could not be read (%s)" % type(exc).__name__)


def _decide(body, offering_uuid_hex, object_types):
    if not isinstance(body, (bytes, str)):
        return Decision(None, MALFORMED, "the body is not text")
    problem = body_problem(body)
    if problem:
        return Decision(None, MALFORMED, problem)
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError:
            return Decision(None, MALFORMED, "the body is not UTF-8 text")
    try:
        message = json.loads(body)
    except (TypeError, ValueError):
        return Decision(None, MALFORMED, "the body is not JSON")
    if not isinstance(message, dict):
        return Decision(None, MALFORMED, "the body is JSON but not an object")
    object_type = message.get("object_type")
    if not isinstance(object_type, str) or not object_type:
        return Decision(None, MALFORMED, "the message has no object_type")
    if object_type not in KNOWN_OBJECT_TYPES:
        return Decision(None, MALFORMED, "unknown object_type %r" % object_type[:64])
    if object_type not in object_types:
        return Decision(None, IGNORED, "object_type %s was not asked for" % object_type)
    if "offering_uuid" in message and message["offering_uuid"] not in (None, ""):
        message_offering = uuid_or_none(message["offering_uuid"])
        if message_offering is None:
            return Decision(None, MALFORMED, "offering_uuid is not a UUID")
        if message_offering != offering_uuid_hex:
            return Decision(None, IGNORED, "the message is for offering %s" % message_offering)
    event = {"type": object_type, "object_type": object_type, "offering_uuid": offering_uuid_hex,
             "message": message}
    if object_type == "order":
        order_uuid = uuid_or_none(message.get("order_uuid"))
        if order_uuid is None:
            return Decision(None, MALFORMED, "order message without a valid order_uuid")
        state = message.get("order_state")
        state = state if isinstance(state, str) and state else None
        if state in NOT_ACTIONABLE_ORDER_STATES:
            return Decision(None, IGNORED, "order %s is %s" % (order_uuid, state), order_uuid)
        order_type = message.get("order_type")
        event.update(order_uuid=order_uuid, order_state=state,
                     order_type=order_type if isinstance(order_type, str) else None,
                     resource_uuid=uuid_or_none(message.get("marketplace_resource_uuid"))
                     or uuid_or_none(message.get("resource_uuid")),
                     order_uuids=[order_uuid], messages=[message])
        return Decision({"waldur": event}, EVENT, "order %s is %s" % (order_uuid, state[:64] if state else "in an unnamed state"),
                        order_uuid)
    resource_uuid = uuid_or_none(message.get("resource_uuid"))
    if resource_uuid is None:
        return Decision(None, MALFORMED, "resource message without a valid resource_uuid")
    event.update(resource_uuid=resource_uuid, order_uuid=None, order_state=None, order_type=None,
                 resource_uuids=[resource_uuid], messages=[message])
    return Decision({"waldur": event}, EVENT, "resource %s changed" % resource_uuid)


def merge_events(events):
    """One event for the events of one kind gathered together: the first one's keys, with
    ``order_uuids`` (order events) or ``resource_uuids`` (resource events) naming every
    order or resource once, in arrival order, and ``messages`` every original message."""
    if len(events) == 1:
        return events[0]
    first = dict(events[0]["waldur"])
    key = "order_uuids" if first["type"] == "order" else "resource_uuids"
    first[key] = list(dict.fromkeys(uuid for event in events for uuid in event["waldur"][key]))
    first["messages"] = [message for event in events for message in event["waldur"]["messages"]]
    return {"waldur": first}


def is_not_found(headers, body):
    """A broker ERROR frame saying the subscribed queue does not exist."""
    text = " ".join(str(part) for part in ((headers or {}).get("message", ""), body or ""))
    return "NOT_FOUND" in text.upper().replace("NOT FOUND", "NOT_FOUND")


def is_cancelled(headers, subscription_id):
    """A broker ERROR frame cancelling our subscription (RabbitMQ: the queue was deleted)."""
    headers = headers or {}
    if headers.get("subscription") == subscription_id:
        return True
    return "cancel" in str(headers.get("message", "")).lower()
