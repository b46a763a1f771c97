# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The event source's settings: its arguments, or the stomp_enabled offerings of the site agent
configuration file, read and validated as the passes read it (``plugin_utils/site_config.py``), with
the collection's UUID, API-root and flag rules."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
from collections import namedtuple
from urllib.parse import urlsplit

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import uuid_or_none
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import normalize_api_root
from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import (
    MAX_CONFIG_BYTES,
    apply_environment,
    describe_value,
    is_foreign,
    select_offerings,
    validate,
    yaml_bound_problem,
    yaml_error_text,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.messages import (
    DEFAULT_BATCH_MAX,
    DEFAULT_BATCH_WINDOW,
    DEFAULT_CLAIM_WAIT,
    DEFAULT_REPEAT_WINDOW,
    SUPPORTED_OBJECT_TYPES,
)

try:
    import yaml
except ImportError:  # ansible-core and ansible-rulebook both depend on PyYAML
    yaml = None

DEFAULT_WS_PATH = "/rmqws-stomp"
Settings = namedtuple("Settings", [
    "api_root", "token", "offering_uuid", "offering_uuid_hex", "verify_ssl", "ca_path", "object_types",
    "stomp_host", "stomp_port", "stomp_ws_path", "use_websocket", "use_tls", "sweep_interval",
    "heartbeat", "connect_timeout", "request_timeout", "offering_name", "membership_sweep_interval",
    "batch_window", "batch_max", "repeat_window", "claim_wait",
])


def api_root(url):
    """``https://host/`` for ``https://host``, ``https://host/api``, ``https://host/api/``: the
    collection's rule (``waldur/client.normalize_api_root``), its error naming the argument."""
    try:
        return normalize_api_root(url)
    except ValueError as exc:
        raise ValueError("waldur_%s" % exc) from None


def _given(args, name):
    value = args.get(name)
    return None if value is None or (isinstance(value, str) and not value.strip()) else value


def _bool(args, name, default):
    value = _given(args, name)
    if value is None:
        return default
    try:
        return boolean(value, strict=True)  # Ansible's rule, as for a module's bool option
    except TypeError:
        raise ValueError("%s must be a boolean, got %s" % (name, describe_value(value))) from None


def _number(args, name, default, minimum, kind=float):
    value = _given(args, name)
    if value is None:
        return default
    try:
        if isinstance(value, bool):
            raise ValueError
        number = kind(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be a number, got %s" % (name, describe_value(value))) from None
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
    offering_hex = uuid_or_none(offering_uuid)
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


def read_site_config(path, environ=None):
    """The site agent configuration file as a mapping, bounded, with the secrets it leaves out
    filled from the environment and validated as the passes validate it (``site_config``);
    ValueError says what is wrong, naming the key paths."""
    environ = os.environ if environ is None else environ
    if yaml is None:
        raise ValueError("reading %s needs PyYAML in the decision environment" % path)
    try:
        if os.path.getsize(path) > MAX_CONFIG_BYTES:
            raise ValueError("config: %s is more than the %d bytes a site agent configuration may have"
                             % (path, MAX_CONFIG_BYTES))
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ValueError("config: cannot read %s: %s" % (path, exc.strerror or exc)) from None
    except UnicodeDecodeError:
        raise ValueError("config: %s is not UTF-8 text" % path) from None
    problem = yaml_bound_problem(text)
    if problem:
        raise ValueError("config: %s was not read: %s" % (path, problem))
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # The position and the problem, never PyYAML's snippet of the line (it may hold a token).
        raise ValueError("config: %s" % yaml_error_text(path, exc)) from None
    if not isinstance(config, dict) or not isinstance(config.get("offerings"), list):
        raise ValueError("config: %s has no offerings list" % path)
    apply_environment(config, environ)
    errors, _warnings = validate(config)
    if errors:
        raise ValueError("config: %d problem%s in %s:\n%s" % (len(errors), "" if len(errors) == 1 else "s", path,
                                                              "\n".join("  " + error for error in errors)))
    return config


def _flag(offering, key, default):
    value = offering.get(key)
    if value is None:
        return default
    return boolean(value, strict=False)


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
    chosen = select_offerings(config, None, wanted)[0]
    notes.extend("Offering %s: backend_type %s, left to the agent of its backend" % (
        item.get("name") or item.get("waldur_offering_uuid"), item.get("backend_type"))
        for item in config.get("offerings") or [] if is_foreign(item) and _flag(item, "stomp_enabled", False))
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
    config = read_site_config(path, environ)
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
