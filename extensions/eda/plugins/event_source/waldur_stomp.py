# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Event-Driven Ansible source: the Waldur offering's event queue over STOMP.

ansible-rulebook loads this file with ``runpy.run_path``, outside any package, so
it cannot import the collection's ``module_utils``; it talks to Waldur with
``requests`` directly and keeps its pure helpers (argument parsing, message
filtering, backoff) at module level where the unit tests reach them.
"""

import asyncio
import functools
import json
import logging
import os
import random
import re
import ssl
import time
from collections import namedtuple
from datetime import datetime, timezone
from urllib.parse import urlsplit

try:
    import requests
except ImportError:  # pragma: no cover - reported by main()
    requests = None

try:
    import stomp
except ImportError:  # pragma: no cover - reported by main()
    stomp = None

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-rulebook depends on PyYAML
    yaml = None

DOCUMENTATION = r"""
---
short_description: Receive the marketplace events of Waldur offerings over STOMP
description:
  - An ansible-rulebook event source for the offerings of a site agent configuration file
    (O(config)) that have C(stomp_enabled) true, read as the upstream agent reads them - the
    Waldur URL (C(waldur_api_url)), token (C(waldur_api_token), else E(WALDUR_API_TOKEN)),
    offering (C(waldur_offering_uuid)), C(verify_ssl), and the broker at C(stomp_ws_host)
    (default the Waldur host), C(stomp_ws_port) (default 443, or 80 without TLS),
    C(stomp_ws_path) (default C(/rmqws-stomp)) and C(websocket_use_tls) (default true).
    Order events are asked for when C(order_processing_backend) is set, resource events when
    C(membership_sync_backend) is set (and C(stomp_membership_sync_enabled) is not false);
    a line at startup names each offering left out and why.
  - The file is read again before every registration and connection, so a token rotated in
    the file is used from the next reconnection on (the queue is then registered again with it).
  - Without O(config), O(waldur_api_url), O(waldur_api_token) and O(offering_uuid) give one
    offering directly.
  - For each offering, the source registers the offering's site agent identity
    (C(agent-<offering uuid>)) and its event queue with Waldur, connects to Waldur's
    RabbitMQ over STOMP (web-STOMP over a WebSocket by default, or plain STOMP over TCP),
    subscribes to the queue and turns each message into an event.
  - Events are dictionaries with one key, C(waldur). C(waldur.type) is C(order),
    C(resource) or C(sweep). Order and resource events carry C(offering_uuid),
    C(order_uuid), C(order_state), C(order_type), C(resource_uuid) (UUIDs as 32 lower-case
    hex digits) and the original C(message) of their first message; C(order_uuids) (order
    events) or C(resource_uuids) (resource events) name every order or resource of the event
    once, and C(messages) holds all its messages. Sweep events carry C(offering_uuid),
    C(pass_name) (C(order_process) or C(membership_sync)) and C(reason) (C(startup) or
    C(interval)) and ask for the full pass of the offering.
  - Batches - the rulebook runs one pass at a time, so one event per order would queue a burst
    of orders behind each other. The first order (resource) message after a quiet spell is an
    event at once. Later order messages are gathered until the run of the previous order event
    is seen claiming its orders (Waldur's message that one of them is C(executing)), at most
    O(claim_wait) seconds. One event then waits behind the running pass, holding every order
    that arrived meanwhile. Resource messages are gathered for O(batch_window) seconds after
    the previous resource event. A batch of O(batch_max) is an event at once, and a connection
    that ends turns what it gathered into an event.
  - Order messages whose state needs nothing from the provider (C(pending-consumer),
    C(pending-project), C(pending-start-date), C(done), C(erred), C(canceled),
    C(rejected)) are dropped, and so is an order's C(executing) message within
    O(repeat_window) seconds of an event naming it (the claim by the run that event started).
    Each message is acknowledged after its event is on the rulebook's queue; malformed
    messages are logged and acknowledged.
  - An order sweep event is emitted once the queue is registered at startup, then every
    O(sweep_interval) seconds, so orders whose message was lost are still processed, even
    while the broker is unreachable. A membership sweep event (offerings with resource events)
    every O(membership_sweep_interval) seconds re-applies the paused and downscaled flags.
  - On a lost connection the source reconnects after 1 s, doubling up to 120 s, each delay
    shortened by up to 25 % at random. A subscription the broker refuses or cancels (an ERROR
    frame with C(NOT_FOUND), a cancelled subscription, or the connection closed before the
    subscription receipt) makes the source register the queue again before the next attempt.
  - The Waldur token is the STOMP passcode. It never appears in logs or events.
options:
  config:
    description:
      - The site agent configuration file. Default E(WALDUR_SITE_AGENT_CONFIG). Ignored when
        O(waldur_api_url) is given.
    type: str
  offering:
    description:
      - Serve only this offering of O(config) (its C(name) or C(waldur_offering_uuid)).
    type: str
  waldur_api_url:
    description:
      - Without O(config) - Waldur API URL, with or without the trailing C(/api/).
    type: str
  waldur_api_token:
    description:
      - Without O(config) - token of the offering's service provider user (OFFERING.MANAGER).
        Also the STOMP passcode.
    type: str
  offering_uuid:
    description:
      - Without O(config) - UUID of the offering, dashed or not. The identity is named
        C(agent-<offering_uuid>) with the value as given, as the upstream agent names it.
    type: str
  offering_name:
    description:
      - Without O(config) - the offering's name in log lines. Default O(offering_uuid).
    type: str
  verify_ssl:
    description:
      - Without O(config) - verify TLS certificates of Waldur and of the broker.
    type: bool
    default: true
  ca_path:
    description:
      - CA bundle for Waldur and the broker. Default the system trust store
        (E(REQUESTS_CA_BUNDLE) is honoured for Waldur, E(SSL_CERT_FILE) for the broker).
    type: str
  object_types:
    description:
      - Without O(config) - event types to register the queue for.
    type: list
    elements: str
    choices: [order, resource]
    default: [order, resource]
  stomp_host:
    description:
      - Without O(config) - broker host. Default the host of O(waldur_api_url).
    type: str
  stomp_port:
    description:
      - Without O(config) - broker port. Default 443 (WebSocket with TLS), 80 (WebSocket), 61614 (TCP with TLS)
        or 61613 (TCP).
    type: int
  stomp_ws_path:
    description:
      - Without O(config) - path of the web-STOMP endpoint.
    type: str
    default: /rmqws-stomp
  use_websocket:
    description:
      - Without O(config) - speak STOMP over a WebSocket (RabbitMQ web-STOMP, as Waldur publishes it). False
        speaks plain STOMP over TCP.
    type: bool
    default: true
  websocket_use_tls:
    description:
      - Without O(config) - use TLS to the broker (C(wss://) for the WebSocket, TLS on the TCP socket otherwise).
    type: bool
    default: true
  sweep_interval:
    description:
      - Seconds between order sweep events. C(0) emits only the startup sweep. Default
        E(WALDUR_SITE_AGENT_RECONCILIATION_PERIOD_MINUTES) (minutes, as for the upstream agent), else 3600.
    type: float
    default: 3600
  membership_sweep_interval:
    description:
      - Seconds between membership sweep events (offerings with resource events). C(0) emits none.
        Default E(WALDUR_SITE_AGENT_RESOURCE_STATUS_RECONCILIATION_MINUTES) (minutes), else 3600.
    type: float
    default: 3600
  claim_wait:
    description:
      - Longest seconds order messages are gathered after an order event whose run has not been
        seen claiming its orders (a run that claims nothing, or a Waldur that publishes no
        C(executing) message). C(0) gathers none - every order message is an event.
    type: float
    default: 30
  batch_window:
    description:
      - Seconds after a resource event during which further resource messages are gathered into
        the next event. C(0) makes every resource message an event.
    type: float
    default: 5
  batch_max:
    description:
      - Most orders (resources) in one event; a full batch is an event at once. Also the
        broker's prefetch count (messages delivered before their acknowledgement). C(1) makes
        every message an event of its own.
    type: int
    default: 100
  repeat_window:
    description:
      - Seconds after an order event during which that order's C(executing) message is dropped
        as the echo of the run's own claim. C(0) keeps every such message.
    type: float
    default: 300
  heartbeat:
    description:
      - STOMP heart-beat interval in seconds, both ways.
    type: float
    default: 10
  connect_timeout:
    description:
      - Seconds to wait for the broker to accept the connection and the subscription.
    type: float
    default: 30
  request_timeout:
    description:
      - Seconds per Waldur API request.
    type: float
    default: 30
notes:
  - Requires the C(stomp-py) and C(requests) Python packages in the decision environment.
  - Registers with C(GET/POST/PUT /api/marketplace-site-agent-identities/),
    C(POST .../register_service/) (best effort) and C(POST .../register_queue/).
"""

EXAMPLES = r"""
- name: Every stomp_enabled offering of the site agent configuration
  hosts: all
  sources:
    - waldur.site_agent.waldur_stomp:
        config: /etc/waldur/waldur-site-agent-config.yaml
  rules:
    - name: Process the order the event names
      condition: event.waldur.type == "order"
      action:
        run_playbook:
          name: waldur.site_agent.order_process
          extra_vars:
            agent_pass_config: /etc/waldur/waldur-site-agent-config.yaml
            waldur_offering_name: "{{ event.waldur.offering_uuid }}"
            order_process_order_uuids: "{{ event.waldur.order_uuids }}"

- name: Orders of one Waldur offering given without a configuration file
  hosts: all
  sources:
    - waldur.site_agent.waldur_stomp:
        waldur_api_url: https://waldur.example.com/api/
        waldur_api_token: "{{ waldur_api_token }}"
        offering_uuid: d0000000000000000000000000000001
  rules:
    - name: Process the order the event names
      condition: event.waldur.type == "order"
      action:
        run_playbook:
          name: waldur.site_agent.order_process
          extra_vars:
            waldur_offering_name: d0000000000000000000000000000001
            order_process_order_uuids: "{{ event.waldur.order_uuids }}"

- name: Plain STOMP over TCP to a broker on the same network, hourly sweeps off
  hosts: all
  sources:
    - waldur.site_agent.waldur_stomp:
        waldur_api_url: https://waldur.example.com/
        waldur_api_token: "{{ waldur_api_token }}"
        offering_uuid: d0000000-0000-0000-0000-000000000001
        use_websocket: false
        websocket_use_tls: false
        stomp_host: rabbitmq.internal
        stomp_port: 61613
        sweep_interval: 0
  rules:
    - name: Print the events
      condition: event.waldur is defined
      action:
        print_event:
"""

VERSION = "0.1.0"
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
DEFAULT_WS_PATH = "/rmqws-stomp"
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
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

Settings = namedtuple("Settings", [
    "api_root", "token", "offering_uuid", "offering_uuid_hex", "verify_ssl", "ca_path", "object_types",
    "stomp_host", "stomp_port", "stomp_ws_path", "use_websocket", "use_tls", "sweep_interval",
    "heartbeat", "connect_timeout", "request_timeout", "offering_name", "membership_sweep_interval",
    "batch_window", "batch_max", "repeat_window", "claim_wait",
])
QueueRegistration = namedtuple("QueueRegistration", ["identity_uuid", "queue_name", "rmq_username", "vhost",
                                                     "object_types"])
# order_uuid: the order a valid order message is about, events and ignored ones alike (its
# later messages tell the source that a run has claimed or settled it).
Decision = namedtuple("Decision", ["event", "outcome", "reason", "order_uuid"], defaults=(None,))
EVENT, IGNORED, MALFORMED = "event", "ignored", "malformed"


# ---------------------------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------------------------
# The helpers below copy the collection's rules (module_utils core/uuids.uuid_or_none,
# waldur/client.normalize_api_root, core/secrets.redact_text for known values): this file is
# loaded on its own and cannot import them. tests/unit/eda/test_parity.py keeps them equal.
def normalize_uuid(value):
    """32 lower-case hex digits for a dashed or undashed UUID (braces or ``urn:uuid:``
    allowed), else None."""
    if value is None:
        return None
    text = str(value).strip().lower().replace("-", "").replace("{", "").replace("}", "")
    if text.startswith("urn:uuid:"):
        text = text[len("urn:uuid:"):]
    return text if _HEX32.match(text) else None


def api_root(url):
    """``https://host/`` for ``https://host``, ``https://host/api``, ``https://host/api/``."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("waldur_api_url is required: an http(s) URL such as https://waldur.example.com/api/")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("waldur_api_url must be an http(s) URL such as https://waldur.example.com/api/, "
                         "got %r" % url)
    path = parts.path.rstrip("/")
    if path.endswith("/api"):
        path = path[:-len("/api")]
    return "%s://%s%s/" % (parts.scheme, parts.netloc, path)


def _given(args, name):
    value = args.get(name)
    return None if value is None or (isinstance(value, str) and not value.strip()) else value


def _bool(args, name, default):
    value = _given(args, name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("%s must be a boolean, got %r" % (name, value))


def _number(args, name, default, minimum, kind=float):
    value = _given(args, name)
    if value is None:
        return default
    try:
        if isinstance(value, bool):
            raise ValueError
        number = kind(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be a number, got %r" % (name, value)) from None
    if number < minimum:
        raise ValueError("%s must be at least %s, got %r" % (name, minimum, value))
    return number


def parse_args(args):
    """The plugin's arguments as :class:`Settings`; ValueError names the bad argument."""
    args = dict(args or {})
    root = api_root(_given(args, "waldur_api_url"))
    token = _given(args, "waldur_api_token")
    if not isinstance(token, str):
        raise ValueError("waldur_api_token is required: the token of the offering's service provider user")
    offering_uuid = _given(args, "offering_uuid")
    offering_hex = normalize_uuid(offering_uuid)
    if offering_hex is None:
        raise ValueError("offering_uuid is required: the offering's UUID (dashed or not), got %r"
                         % (offering_uuid,))
    object_types = _given(args, "object_types")
    if object_types is None:
        object_types = list(SUPPORTED_OBJECT_TYPES)
    if isinstance(object_types, str):
        object_types = [item.strip() for item in object_types.split(",") if item.strip()]
    if not isinstance(object_types, (list, tuple)) or not object_types:
        raise ValueError("object_types must be a non-empty list of %s" % ", ".join(SUPPORTED_OBJECT_TYPES))
    unknown = [item for item in object_types if item not in SUPPORTED_OBJECT_TYPES]
    if unknown:
        raise ValueError("object_types: %s not supported; choose from %s"
                         % (", ".join(map(str, unknown)), ", ".join(SUPPORTED_OBJECT_TYPES)))
    use_websocket = _bool(args, "use_websocket", True)
    use_tls = _bool(args, "websocket_use_tls", True)
    if use_websocket:
        default_port = 443 if use_tls else 80
    else:
        default_port = 61614 if use_tls else 61613
    port = _number(args, "stomp_port", default_port, 1, int)
    if port > 65535:
        raise ValueError("stomp_port must be a TCP port (1-65535), got %r" % port)
    ws_path = _given(args, "stomp_ws_path") or DEFAULT_WS_PATH
    if not str(ws_path).startswith("/"):
        ws_path = "/" + str(ws_path)
    ca_path = _given(args, "ca_path")
    return Settings(
        api_root=root,
        token=token.strip(),
        offering_uuid=offering_uuid.strip(),
        offering_uuid_hex=offering_hex,
        verify_ssl=_bool(args, "verify_ssl", True),
        ca_path=str(ca_path) if ca_path else None,
        object_types=tuple(dict.fromkeys(object_types)),
        stomp_host=str(_given(args, "stomp_host") or urlsplit(root).hostname),
        stomp_port=port,
        stomp_ws_path=str(ws_path),
        use_websocket=use_websocket,
        use_tls=use_tls,
        sweep_interval=_number(args, "sweep_interval", 3600.0, 0),
        heartbeat=_number(args, "heartbeat", 10.0, 0),
        connect_timeout=_number(args, "connect_timeout", 30.0, 0.1),
        request_timeout=_number(args, "request_timeout", 30.0, 0.1),
        offering_name=str(_given(args, "offering_name") or offering_uuid.strip()),
        membership_sweep_interval=_number(args, "membership_sweep_interval", 3600.0, 0),
        batch_window=_number(args, "batch_window", DEFAULT_BATCH_WINDOW, 0),
        batch_max=_number(args, "batch_max", DEFAULT_BATCH_MAX, 1, int),
        repeat_window=_number(args, "repeat_window", DEFAULT_REPEAT_WINDOW, 0),
        claim_wait=_number(args, "claim_wait", DEFAULT_CLAIM_WAIT, 0),
    )


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


# ---------------------------------------------------------------------------------------------
# The site agent configuration file
# ---------------------------------------------------------------------------------------------
# Source options that are not in the configuration file (timers, timeouts, a CA bundle):
# they apply to every offering the file gives.
TUNING_OPTIONS = ("ca_path", "sweep_interval", "membership_sweep_interval", "heartbeat", "connect_timeout",
                  "request_timeout", "batch_window", "batch_max", "repeat_window", "claim_wait")
CONFIG_ENVIRONMENT = "WALDUR_SITE_AGENT_CONFIG"
# The upstream agent's timers (minutes), for the sweeps when the source options do not set them.
PERIOD_ENVIRONMENT = (("sweep_interval", "WALDUR_SITE_AGENT_RECONCILIATION_PERIOD_MINUTES"),
                      ("membership_sweep_interval", "WALDUR_SITE_AGENT_RESOURCE_STATUS_RECONCILIATION_MINUTES"))


def tuning_options(args, environ=None):
    """The tuning options of the source arguments, the sweep periods defaulting to the
    upstream agent's environment variables (in minutes)."""
    environ = os.environ if environ is None else environ
    tuning = {key: args[key] for key in TUNING_OPTIONS if _given(args, key) is not None}
    for key, variable in PERIOD_ENVIRONMENT:
        if key not in tuning and _given(environ, variable) is not None:
            tuning[key] = _number(environ, variable, None, 0) * 60
    return tuning


def read_site_config(path):
    """The site agent configuration file as a mapping; ValueError says what is wrong."""
    if yaml is None:
        raise ValueError("reading %s needs PyYAML in the decision environment" % path)
    try:
        with open(path) as handle:
            config = yaml.safe_load(handle)
    except OSError as exc:
        raise ValueError("config: cannot read %s: %s" % (path, exc.strerror or exc)) from None
    except yaml.YAMLError as exc:
        raise ValueError("config: %s is not valid YAML: %s" % (path, str(exc).splitlines()[0])) from None
    if not isinstance(config, dict) or not isinstance(config.get("offerings"), list):
        raise ValueError("config: %s has no offerings list" % path)
    return config


def _matches(offering, wanted):
    if wanted is None:
        return True
    return (offering.get("name") == wanted
            or normalize_uuid(str(offering.get("waldur_offering_uuid") or "")) == normalize_uuid(str(wanted)))


def _flag(offering, key, default):
    value = offering.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def offering_source_args(offering, environ=None):
    """The source arguments for one offering of the configuration file, read as the upstream
    agent reads them: the Waldur URL, token (else E(WALDUR_API_TOKEN)), offering UUID and
    verify_ssl; the broker from stomp_ws_host (default the Waldur host), stomp_ws_port
    (default 443 with TLS, 80 without), stomp_ws_path and websocket_use_tls (default true);
    the object types from the role backends that are set."""
    environ = os.environ if environ is None else environ
    name = str(offering.get("name") or offering.get("waldur_offering_uuid") or "?")
    token = offering.get("waldur_api_token")
    if token in (None, ""):
        token = environ.get("WALDUR_API_TOKEN")
    if token in (None, ""):
        raise ValueError("offering %s: stomp_enabled needs waldur_api_token (it is the STOMP passcode; "
                         "OIDC alone cannot log in to the broker)" % name)
    object_types = []
    if offering.get("order_processing_backend"):
        object_types.append("order")
    if offering.get("membership_sync_backend") and _flag(offering, "stomp_membership_sync_enabled",
                                                         _flag(offering, "stomp_enabled", False)):
        object_types.append("resource")
    return dict(
        offering_name=name,
        waldur_api_url=offering.get("waldur_api_url"),
        waldur_api_token=str(token),
        offering_uuid=offering.get("waldur_offering_uuid"),
        verify_ssl=offering.get("verify_ssl"),
        stomp_host=offering.get("stomp_ws_host"),
        stomp_port=offering.get("stomp_ws_port"),
        stomp_ws_path=offering.get("stomp_ws_path"),
        websocket_use_tls=offering.get("websocket_use_tls"),
        use_websocket=True,
        object_types=object_types,
    )


def stomp_offerings(config, wanted=None, environ=None):
    """``(settings list, notes)`` for the stomp_enabled offerings of ``config`` (only the one
    named or with the UUID ``wanted`` when given). ``notes`` are the lines to log about
    offerings left out, with the reason. ValueError when nothing is left to serve."""
    settings, notes = [], []
    offerings = [item for item in config.get("offerings") or [] if isinstance(item, dict)]
    chosen = [item for item in offerings if _matches(item, wanted)]
    if wanted is not None and not chosen:
        raise ValueError("offering: no offering named or with UUID %r in the configuration file" % (wanted,))
    for offering in chosen:
        name = offering.get("name") or offering.get("waldur_offering_uuid")
        if not _flag(offering, "stomp_enabled", False):
            notes.append("Offering %s: stomp_enabled is not true, left to the polling passes" % name)
            continue
        args = offering_source_args(offering, environ)
        if not args["object_types"]:
            notes.append("Offering %s: stomp_enabled but neither order_processing_backend nor "
                         "membership_sync_backend is set, nothing to receive" % name)
            continue
        if "resource" not in args["object_types"]:
            notes.append("Offering %s: no membership_sync_backend (or stomp_membership_sync_enabled is false): "
                         "resource events (pause, downscale, restore) are not subscribed" % name)
        try:
            settings.append(parse_args(args))
        except ValueError as exc:
            raise ValueError("offering %s: %s" % (name, exc)) from None
    if not settings:
        raise ValueError("no offering of the configuration file has stomp_enabled: true%s with an order or "
                         "membership backend" % ("" if wanted is None else " and matches %r" % (wanted,)))
    return settings, notes


def config_settings(path, wanted=None, tuning=None, environ=None):
    """:func:`stomp_offerings` of the file at ``path``, with the tuning options applied."""
    config = read_site_config(path)
    settings, notes = stomp_offerings(config, wanted, environ)
    if tuning:
        settings = [parse_args(dict(_settings_args(item), **tuning)) for item in settings]
    return settings, notes


def _settings_args(settings):
    """parse_args arguments that give ``settings`` back."""
    return dict(offering_name=settings.offering_name, waldur_api_url=settings.api_root,
                waldur_api_token=settings.token, offering_uuid=settings.offering_uuid,
                verify_ssl=settings.verify_ssl, ca_path=settings.ca_path, object_types=list(settings.object_types),
                stomp_host=settings.stomp_host, stomp_port=settings.stomp_port, stomp_ws_path=settings.stomp_ws_path,
                use_websocket=settings.use_websocket, websocket_use_tls=settings.use_tls,
                sweep_interval=settings.sweep_interval, membership_sweep_interval=settings.membership_sweep_interval,
                heartbeat=settings.heartbeat, connect_timeout=settings.connect_timeout,
                request_timeout=settings.request_timeout, batch_window=settings.batch_window,
                batch_max=settings.batch_max, repeat_window=settings.repeat_window,
                claim_wait=settings.claim_wait)


def reread_offering(path, offering_uuid_hex, tuning=None, environ=None):
    """The current settings of one offering from the file (the token may have been rotated)."""
    settings, _notes = config_settings(path, offering_uuid_hex, tuning, environ)
    return settings[0]


def message_to_event(body, offering_uuid_hex, object_types):
    """Decide what one queue message becomes: ``Decision(event, outcome, reason)`` where
    outcome is ``event`` (put ``event`` on the rulebook queue), ``ignored`` (valid, nothing
    to do) or ``malformed`` (logged as a warning). Either way the message is acknowledged."""
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
        message_offering = normalize_uuid(message["offering_uuid"])
        if message_offering is None:
            return Decision(None, MALFORMED, "offering_uuid is not a UUID")
        if message_offering != offering_uuid_hex:
            return Decision(None, IGNORED, "the message is for offering %s" % message_offering)
    event = {"type": object_type, "object_type": object_type, "offering_uuid": offering_uuid_hex,
             "message": message}
    if object_type == "order":
        order_uuid = normalize_uuid(message.get("order_uuid"))
        if order_uuid is None:
            return Decision(None, MALFORMED, "order message without a valid order_uuid")
        state = message.get("order_state")
        state = state if isinstance(state, str) and state else None
        if state in NOT_ACTIONABLE_ORDER_STATES:
            return Decision(None, IGNORED, "order %s is %s" % (order_uuid, state), order_uuid)
        order_type = message.get("order_type")
        event.update(order_uuid=order_uuid, order_state=state,
                     order_type=order_type if isinstance(order_type, str) else None,
                     resource_uuid=normalize_uuid(message.get("marketplace_resource_uuid"))
                     or normalize_uuid(message.get("resource_uuid")),
                     order_uuids=[order_uuid], messages=[message])
        return Decision({"waldur": event}, EVENT, "order %s is %s" % (order_uuid, state or "in an unnamed state"),
                        order_uuid)
    resource_uuid = normalize_uuid(message.get("resource_uuid"))
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


def redact(text, secrets):
    """``text`` with every known secret value masked, the longest first (so a secret that
    contains another one is masked whole)."""
    text = str(text)
    for secret in sorted(secrets, key=len, reverse=True):
        if secret and secret in text:
            text = text.replace(secret, "********")
    return text


class _RedactingFilter(logging.Filter):
    """Masks the token in every record of a logger (stomp.py logs whole frames at DEBUG)."""

    def __init__(self, *secrets):
        super().__init__()
        self.secrets = set(secret for secret in secrets if secret)

    def add(self, secret):
        if secret:
            self.secrets.add(secret)

    def filter(self, record):
        try:
            message = record.getMessage()
        except Exception:  # a record with bad args: leave it to the handler
            return True
        if any(secret in message for secret in self.secrets):
            record.msg = redact(message, sorted(self.secrets, key=len, reverse=True))
            record.args = ()
        return True


# ---------------------------------------------------------------------------------------------
# Waldur: identity and queue registration
# ---------------------------------------------------------------------------------------------
class WaldurApiError(Exception):
    """A failed Waldur call. ``transient``: worth retrying later (connection, 5xx, 429)."""

    def __init__(self, message, transient=False, status=None):
        super().__init__(message)
        self.transient = transient
        self.status = status


def _detail(response):
    try:
        body = response.json()
    except ValueError:
        return (response.text or "").strip()[:300]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])[:300]
    return json.dumps(body)[:300]


class WaldurEventsApi:
    """The Waldur calls of event mode, with ``requests``. Messages carry the method, path,
    status and Waldur's message, never the token."""

    def __init__(self, settings, session=None):
        self.settings = settings
        self.session = session or requests.Session()
        self.session.headers.update({
            "Accept": "application/json",
            "User-Agent": "waldur-site-agent-ansible/%s event_process" % VERSION,
        })

    @property
    def verify(self):
        return (self.settings.ca_path or True) if self.settings.verify_ssl else False

    def call(self, method, path, params=None, body=None, ok=(200,)):
        path = path.lstrip("/")
        url = self.settings.api_root + path
        path = "/" + path  # as messages show it
        try:
            # The token of the current settings: the source may have read a rotated one.
            headers = {"Authorization": "Token %s" % self.settings.token}
            response = self.session.request(method, url, params=params, json=body, headers=headers,
                                            verify=self.verify,
                                            timeout=self.settings.request_timeout, allow_redirects=False)
        except requests.RequestException as exc:
            detail = redact("%s: %s" % (type(exc).__name__, exc), [self.settings.token])
            raise WaldurApiError("%s %s failed: %s" % (method, path, detail), transient=True) from None
        if response.status_code not in ok:
            status = response.status_code
            raise WaldurApiError("%s %s returned %s: %s" % (method, path, status,
                                                            redact(_detail(response), [self.settings.token])),
                                 transient=status == 429 or status >= 500, status=status)
        try:
            return response.json()
        except ValueError:
            raise WaldurApiError("%s %s returned %s with a body that is not JSON"
                                 % (method, path, response.status_code), transient=True) from None

    def identity_body(self):
        return {
            "offering": self.settings.offering_uuid_hex,
            "name": "agent-%s" % self.settings.offering_uuid,
            "version": VERSION,
            "last_restarted": datetime.now(timezone.utc).isoformat(),
            "dependencies": [{"package": "stomp-py", "version": getattr(stomp, "__version__", "")},
                             {"package": "requests", "version": getattr(requests, "__version__", "")}],
            "config_file_path": "",
            "config_file_content": "",
        }

    def ensure_identity(self):
        """The offering's agent identity: found by name (and offering) and refreshed with
        PUT, or created."""
        body = self.identity_body()
        path = "api/marketplace-site-agent-identities/"
        found = self.call("GET", path, params={"name": body["name"]})
        if not isinstance(found, list):
            raise WaldurApiError("GET /%s answered %s instead of a list" % (path, type(found).__name__))
        for identity in found:
            if (isinstance(identity, dict) and identity.get("name") == body["name"]
                    and normalize_uuid(identity.get("offering")) in (None, self.settings.offering_uuid_hex)
                    and normalize_uuid(identity.get("uuid"))):
                identity_uuid = normalize_uuid(identity["uuid"])
                return self.call("PUT", "%s%s/" % (path, identity_uuid), body=body)
        return self.call("POST", path, body=body, ok=(200, 201))

    def register_service(self, identity_uuid):
        """Telemetry only (as upstream): a failure is logged, never fatal."""
        try:
            self.call("POST", "api/marketplace-site-agent-identities/%s/register_service/" % identity_uuid,
                      body={"name": "event_process", "mode": "event_process"}, ok=(200, 201))
        except WaldurApiError as exc:
            logger.warning("Could not register the event_process service (continuing): %s", exc)

    def register_queue(self, identity_uuid):
        path = "api/marketplace-site-agent-identities/%s/register_queue/" % identity_uuid
        data = self.call("POST", path, body={"object_types": list(self.settings.object_types)}, ok=(200, 201))
        missing = [key for key in ("queue_name", "rmq_username", "vhost")
                   if not isinstance(data, dict) or not isinstance(data.get(key), str) or not data.get(key)]
        if missing:
            raise WaldurApiError("POST /%s answered without %s" % (path, ", ".join(missing)))
        return QueueRegistration(identity_uuid, data["queue_name"], data["rmq_username"], data["vhost"],
                                 tuple(data.get("observable_object_types") or ()))

    def register(self):
        identity = self.ensure_identity()
        identity_uuid = normalize_uuid(identity.get("uuid")) if isinstance(identity, dict) else None
        if identity_uuid is None:
            raise WaldurApiError("the site agent identity has no uuid in Waldur's answer")
        self.register_service(identity_uuid)
        return self.register_queue(identity_uuid)


# ---------------------------------------------------------------------------------------------
# STOMP
# ---------------------------------------------------------------------------------------------
class StompConnectError(Exception):
    pass


def tls_context(settings):
    context = ssl.create_default_context(cafile=settings.ca_path)
    if not settings.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def stomp_connection(settings, registration):
    """A stomp-py 1.2 connection for the settings (not yet connected). Reconnecting is ours,
    so the transport tries exactly once."""
    host_port = (settings.stomp_host, settings.stomp_port)
    beat = int(settings.heartbeat * 1000)
    common = dict(prefer_localhost=False, try_loopback_connect=False, reconnect_attempts_max=1,
                  timeout=settings.connect_timeout, heartbeats=(beat, beat), vhost=registration.vhost)
    if settings.use_websocket:
        connection = stomp.WSConnection([host_port], ws_path=settings.stomp_ws_path, **common)
        if settings.use_tls:
            connection.set_ssl(for_hosts=[host_port])
            # websocket-client takes a ready SSLContext from the transport's per-host options.
            connection.transport.get_ssl(host_port)["context"] = tls_context(settings)
    else:
        connection = stomp.Connection12([host_port], **common)
        if settings.use_tls:
            connection.set_ssl(for_hosts=[host_port], ca_certs=settings.ca_path, verify=settings.verify_ssl)
    return connection


def close_connection(connection):
    """Say DISCONNECT if still connected, then drop the socket without waiting on threads."""
    if connection is None:
        return
    try:
        if connection.is_connected():
            connection.disconnect()
    except Exception:  # the socket is going away anyway
        pass
    try:
        connection.transport.disconnect_socket()
    except Exception:
        pass


class _Listener(object):
    """Forwards stomp-py callbacks (its receiver thread) to the event loop, tagged with
    the connection's generation so frames of a dropped connection are never acked.
    stomp-py skips the ``on_*`` hooks a listener does not define."""

    def __init__(self, loop, inbox, generation):
        self.loop = loop
        self.inbox = inbox
        self.generation = generation

    def _post(self, kind, frame=None):
        try:
            self.loop.call_soon_threadsafe(self.inbox.put_nowait, (self.generation, kind, frame))
        except RuntimeError:  # the loop is closed: the source is shutting down
            pass

    def on_connecting(self, host_and_port):
        pass

    def on_connected(self, frame):
        self._post("connected", frame)

    def on_message(self, frame):
        self._post("message", frame)

    def on_receipt(self, frame):
        self._post("receipt", frame)

    def on_error(self, frame):
        self._post("error", frame)

    def on_disconnected(self):
        self._post("disconnected")

    def on_heartbeat_timeout(self):
        logger.warning("No heart-beat from the STOMP broker: reconnecting")


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
                           "before): %s", self.settings.offering_name, redact(exc, [self.settings.token]))
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
                raise StompConnectError(redact(detail, [self.settings.token])) from None
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
        return redact(" - ".join(part for part in (message, body) if part) or "no details", [self.settings.token])

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
        decision = message_to_event(frame.body, self.settings.offering_uuid_hex, self.settings.object_types)
        if decision.outcome == EVENT:
            decision = self._unless_echo(decision)
        if decision.order_uuid in self.unclaimed and not (decision.event and decision.event["waldur"].get(
                "order_state") == "pending-provider"):
            # The run of the last order event has claimed (or settled) one of its orders: it
            # is running, and the orders gathered since are the next event, queued behind it.
            self.unclaimed = set()
        self.counts[decision.outcome] += 1
        ack_id = headers.get("ack") or headers.get("message-id")
        if decision.outcome == EVENT:
            logger.info("Event: %s", decision.reason)
            kind = decision.event["waldur"]["type"]
            self.batches.setdefault(kind, []).append((decision.event, ack_id))
            if self._due(kind):
                await self._flush(kind, connection, generation)
            return
        if decision.outcome == IGNORED:
            logger.info("Ignored a message: %s", decision.reason)
        else:
            logger.warning("Malformed message on queue %s acknowledged and dropped: %s",
                           registration.queue_name, decision.reason)
        self._ack(connection, generation, [ack_id])
        await self._flush_due(connection, generation)

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
        gathered = self.batches.pop(kind, [])
        event = merge_events([item[0] for item in gathered])
        await self.queue.put(event)
        now = time.monotonic()
        self.last_emitted[kind] = now
        if kind == "order":
            self._remember_orders(event["waldur"]["order_uuids"], now)
            self.unclaimed = set(event["waldur"]["order_uuids"]) if self.settings.claim_wait > 0 else set()
        if len(gathered) > 1:
            logger.info("One %s event for %d messages: %s", kind, len(gathered),
                        ", ".join(event["waldur"].get("order_uuids") or event["waldur"].get("resource_uuids")))
        self._ack(connection, generation, [item[1] for item in gathered])

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


async def _serve(source):
    try:
        await source.run()
    except RuntimeError as exc:
        logger.error("Offering %s is not served: %s", source.settings.offering_name, exc)
        raise


async def main(queue, args):
    """ansible-rulebook entry point: with O(waldur_api_url) one offering given by the
    arguments; otherwise every stomp_enabled offering of the configuration file."""
    if stomp is None or requests is None:
        raise ImportError("waldur.site_agent.waldur_stomp needs the Python packages stomp-py and requests "
                          "in the decision environment")
    args = {key: value for key, value in (args or {}).items() if not key.startswith("eda_")}
    secret_filter = _RedactingFilter()
    guarded = [logging.getLogger(name) for name in (LOGGER_NAME, "stomp.py", "websocket")]
    if _given(args, "waldur_api_url") is not None:
        settings = parse_args(args)
        sources = [WaldurStompSource(queue, settings)]
    else:
        path = _given(args, "config") or os.environ.get(CONFIG_ENVIRONMENT)
        if not path:
            raise ValueError("config is required (or set %s): the site agent configuration file"
                             % CONFIG_ENVIRONMENT)
        path = os.path.abspath(os.path.expanduser(str(path)))
        tuning = tuning_options(args)
        offering = _given(args, "offering")
        all_settings, notes = config_settings(path, offering, tuning)
        for note in notes:
            logger.info("%s", note)
        sources = []
        for settings in all_settings:
            logger.info("Offering %s (%s): events from %s://%s:%s%s, object types %s", settings.offering_name,
                        settings.offering_uuid_hex, "wss" if settings.use_tls else "ws", settings.stomp_host,
                        settings.stomp_port, settings.stomp_ws_path, ", ".join(settings.object_types))
            sources.append(WaldurStompSource(
                queue, settings, on_token=secret_filter.add,
                reload=functools.partial(reread_offering, path, settings.offering_uuid_hex, tuning)))
    for source in sources:
        secret_filter.add(source.settings.token)
    for guarded_logger in guarded:
        guarded_logger.addFilter(secret_filter)
    try:
        results = await asyncio.gather(*(_serve(source) for source in sources), return_exceptions=True)
        failures = [result for result in results if isinstance(result, BaseException)]
        if failures:
            raise failures[0]
    finally:
        for guarded_logger in guarded:
            guarded_logger.removeFilter(secret_filter)


if __name__ == "__main__":
    import sys

    class MockQueue:
        async def put(self, event):
            print(json.dumps(event), flush=True)

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    asyncio.run(main(MockQueue(), {"config": sys.argv[1] if len(sys.argv) > 1 else "",
                                   "offering": sys.argv[2] if len(sys.argv) > 2 else ""}))
