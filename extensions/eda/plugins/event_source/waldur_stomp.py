# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Event-Driven Ansible source: the Waldur offering's event queue over STOMP.

ansible-rulebook loads this file with ``runpy.run_path``, outside any package and without
the collection loader. The source is built from the collection's parts (``plugin_utils/events/``
for the STOMP side, ``plugin_utils/site_config.py`` the site configuration reader and
validator, ``module_utils`` the Waldur client and the UUID, flag and secret rules):
``_collection_importable()`` makes ``ansible_collections.waldur.site_agent`` importable from
the collections root this file is installed under, else from the configured collections paths.
"""

import asyncio
import functools
import json
import logging
import os
import sys


def _collections_roots(here, environ):
    """Directories that may hold ``ansible_collections/waldur/site_agent``: the root this file
    is installed under (``<root>/ansible_collections/waldur/site_agent/extensions/eda/plugins/
    event_source/``), then the collections paths Ansible reads."""
    roots = []
    parts = os.path.abspath(here).split(os.sep)  # not realpath: a linked collection is used where it is linked
    if len(parts) > 8 and parts[-8] == "ansible_collections":
        roots.append(os.sep.join(parts[:-8]) or os.sep)
    configured = environ.get("ANSIBLE_COLLECTIONS_PATH") or environ.get("ANSIBLE_COLLECTIONS_PATHS") or ""
    roots.extend(item for item in configured.split(os.pathsep) if item)
    roots.extend([os.path.expanduser("~/.ansible/collections"), "/usr/share/ansible/collections"])
    return [os.path.expanduser(root) for root in roots]


def _collection_importable(here, environ=None):
    """Put the first collections root holding this collection at the front of ``sys.path``
    (``ansible_collections`` is a namespace package there); None when found, else why not."""
    environ = os.environ if environ is None else environ
    for root in _collections_roots(here, environ):
        if os.path.isdir(os.path.join(root, "ansible_collections", "waldur", "site_agent", "plugins", "plugin_utils")):
            if root not in sys.path:
                sys.path.insert(0, root)
            return None
    try:
        import ansible_collections.waldur.site_agent.plugins.plugin_utils.events  # noqa: F401  (already importable)
    except ImportError:
        return ("the collection waldur.site_agent is not installed on a collections path (ANSIBLE_COLLECTIONS_PATH, "
                "~/.ansible/collections or /usr/share/ansible/collections); the event source is built from its "
                "plugin_utils and module_utils")
    return None


_IMPORT_PROBLEM = _collection_importable(globals().get("__file__", ""))
if _IMPORT_PROBLEM is None:
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.messages import LOGGER_NAME
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.settings import (
        CONFIG_ENVIRONMENT,
        _given,
        config_settings,
        parse_args,
        reread_offering,
        tuning_options,
    )
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.source import WaldurStompSource
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.stomp_link import RedactingFilter, stomp
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.registration import requests
else:  # main() says why
    LOGGER_NAME = "waldur.site_agent.waldur_stomp"
    stomp = requests = None


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
  - Requires the C(stomp-py) and C(requests) Python packages in the decision environment, and
    the collection installed where ansible-rulebook finds the source (a collections path, or
    the decision environment's C(/usr/share/ansible/collections)), as the source is built from the
    collection's C(plugin_utils) and C(module_utils) (its Waldur client, site configuration reader
    and validator, UUID, flag and secret rules).
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

logger = logging.getLogger(LOGGER_NAME)


async def _serve(source):
    try:
        await source.run()
    except RuntimeError as exc:
        logger.error("Offering %s is not served: %s", source.settings.offering_name, exc)
        raise


async def main(queue, args):
    """ansible-rulebook entry point: with O(waldur_api_url) one offering given by the
    arguments; otherwise every stomp_enabled offering of the configuration file."""
    if _IMPORT_PROBLEM is not None:
        raise ImportError("waldur.site_agent.waldur_stomp: %s" % _IMPORT_PROBLEM)
    if stomp is None or requests is None:
        raise ImportError("waldur.site_agent.waldur_stomp needs the Python packages stomp-py and requests "
                          "in the decision environment")
    args = {key: value for key, value in (args or {}).items() if not key.startswith("eda_")}
    secret_filter = RedactingFilter()
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
    class MockQueue:
        async def put(self, event):
            print(json.dumps(event), flush=True)

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    asyncio.run(main(MockQueue(), {"config": sys.argv[1] if len(sys.argv) > 1 else "",
                                   "offering": sys.argv[2] if len(sys.argv) > 2 else ""}))
