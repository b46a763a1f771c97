# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The backend registry: what the controller knows of each cloud, one entry per cloud.

Each cloud is one module of this package declaring a :class:`Backend`: its settings schema and
credentials, the environment variables that may carry its secrets, what a Create needs, how claimed
orders become its module's items (planning), and how ``health`` and ``diagnostics`` judge its reads.
site_config, the inventory, the callback's secret masking, the planning filters, ``health_verdicts``
and ``diagnostics_reports`` read it from here; the roles name a backend's task files by its name
(``probe_<name>.yml``, ``catalogue_<name>.yml``, ``<name>.yml``). docs/extending.md says how a third
cloud joins: a module here, a line in :data:`BACKEND_MODULES`, its modules and its task files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.buildable import order_form_fields

# The registry: backend name -> the module of this package that declares it (``BACKEND``).
BACKEND_MODULES = {
    "azure": "azure",
    "digitalocean": "digitalocean",
}
PACKAGE = "ansible_collections.waldur.site_agent.plugins.plugin_utils.backends"
_LOADED = {}


class Backend:
    """One cloud as the controller sees it (every attribute is data or a function; see docs/extending.md).

    * ``name``: the ``backend_type`` of its offerings; ``title``: its name in messages; ``machine``:
      what it builds (``droplet``), in messages.
    * ``credentials``: the ``backend_settings`` keys of its sign-in; ``settings``: the other keys it
      reads, with their kinds (site_config_checks' ``_expect``); ``secret_settings``: the keys whose
      values are secrets (masked, checked for stray whitespace).
    * ``environment``: ``backend_settings`` key -> the environment variables that may supply it when
      the file does not (AWX credentials inject them); ``secret_environment``: the variables whose
      values the output never shows.
    * ``create_inputs``: ``(input, the settings keys that can supply it, the attributes that can carry
      it)`` for every input a Create needs; ``catalogue_keys``: what its catalogue check judges.
    * ``plan(orders, settings, ssh_keys, offering_uuid)``: claimed orders -> planned items (with
      ``error``/``skip``/``comment``; planning.py); ``power_states``: (stopped, running) of its
      membership items.
    * ``check_settings(path, settings, problems)``: its own configuration checks beyond the schema.
    * ``probe_failure(result)``: why its cloud cannot be worked with ("" when it can), from the
      registered result of the order pass's probe (``probe_<name>.yml``); the orders stay pending.
    * ``health(offering, reads, notes)`` -> the first problem or "" (appending what it has to
      ``notes``); ``diagnose(offering, reads, lines, problems)``; ``reads``: its registered reads of
      the health and diagnostics playbooks for this offering, by name.
    """

    def __init__(self, name, title, machine, credentials, settings, secret_settings=(), environment=None,
                 secret_environment=(), create_inputs=(), catalogue_keys=(), plan=None,
                 power_states=("off", "on"), check_settings=None, probe_failure=None, health=None, diagnose=None):
        self.name = name
        self.title = title
        self.machine = machine
        self.credentials = tuple(credentials)
        self.settings = dict(settings)
        self.secret_settings = tuple(secret_settings)
        self.environment = dict(environment or {})
        self.secret_environment = tuple(secret_environment)
        self.create_inputs = tuple(create_inputs)
        self.catalogue_keys = tuple(catalogue_keys)
        self.plan = plan
        self.power_states = tuple(power_states)
        self.check_settings = check_settings or (lambda path, settings, problems: None)
        self.probe_failure = probe_failure or (lambda result: str(result.get("msg") or "the probe failed")
                                               if result.get("failed") else "")
        self.health = health or (lambda offering, reads, notes: "")
        self.diagnose = diagnose or (lambda offering, reads, lines, problems: None)

    def settings_read(self):
        """Every ``backend_settings`` key its passes read: credentials and schema."""
        return frozenset(self.credentials) | frozenset(self.settings)


def names():
    """The registered backend names, sorted."""
    return tuple(sorted(BACKEND_MODULES))


def backend(name):
    """The :class:`Backend` registered as ``name`` (any case), or None."""
    name = str(name or "").strip().lower()
    if name not in BACKEND_MODULES:
        return None
    if name not in _LOADED:
        _LOADED[name] = importlib.import_module("%s.%s" % (PACKAGE, BACKEND_MODULES[name])).BACKEND
    return _LOADED[name]


def every():
    """Every registered :class:`Backend`, by name."""
    return [backend(name) for name in names()]


def secret_environment():
    """The environment variables of every backend whose values are secrets."""
    return tuple(variable for entry in every() for variable in entry.secret_environment)


def secret_settings():
    """The ``backend_settings`` keys of every backend whose values are secrets."""
    return tuple(key for entry in every() for key in entry.secret_settings)


def _set(value):
    if isinstance(value, str):
        return bool(value.strip())
    return bool(value)


def create_gaps(backend_type, settings, order_form):
    """What no Create order of the offering could be built without: one line per missing input,
    naming the ``backend_settings`` key to set. Empty when every input has a source, and when the
    order form is unknown (``order_form`` None: nothing to judge by)."""
    fields = order_form_fields(order_form)
    entry = backend(backend_type)
    if fields is None or entry is None:
        return []
    settings = settings if isinstance(settings, dict) else {}
    gaps = []
    for name, keys, attributes in entry.create_inputs:
        if any(_set(settings.get(key)) for key in keys) or fields.intersection(attributes):
            continue
        gaps.append("backend_settings.%s is not set and the offering's order form in Waldur has no %s field (%s): "
                    "no Create order could name the %s of its %s; set backend_settings.%s%s"
                    % (keys[0], name, " or ".join(attributes), name, entry.machine, keys[0],
                       " (or %s)" % " or ".join(keys[1:]) if len(keys) > 1 else ""))
    return gaps


def attribute_names(backend_type, wanted):
    """The resource attributes that carry ``wanted`` (``region``, ``image`` ...) for the backend."""
    for name, _settings, attributes in backend(backend_type).create_inputs:
        if name == wanted:
            return attributes
    raise KeyError(wanted)
