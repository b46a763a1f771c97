# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The upstream site agent's configuration file: schema and validation.

``validate(config)`` returns every problem at once, each as
``<key path>: <what is wrong, what was expected>`` (for example
``offerings[1].backend_settings.client_secret: required``), plus warnings for
keys the agent does not know, for offerings of other backends (left to another
agent) and for a token sent over plain HTTP. Messages never contain the value of
a secret.

``yaml_bound_problem(text)`` refuses a file whose YAML aliases would expand it
beyond a bound before anything walks the data (a few hundred bytes of nested
aliases expand to billions of values); ``yaml_error_text(path, exc)`` is the one wording of
a file that is not valid YAML (file, line, column, problem). ``select_offerings()`` picks the
offerings of a pass and names those it leaves out.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import secret_text_problem
from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config_checks import (  # pylint: disable=unused-import  # re-exported
    LOOPBACK_HOSTS,
    ConfigProblems,
    _expect,
    _is_loopback,
    _is_number,
    _secret_present,
    _type_name,
    _url_host,
    describe_value,
    _URL,
    _UUID,
    _CIDR,
    is_time_zone,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config_load import (  # pylint: disable=unused-import  # re-exported
    MAX_CONFIG_BYTES,
    MAX_YAML_NODES,
    config_file_problem,
    yaml_bound_problem,
    yaml_error_text,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils import backends


# the backend registry's (plugin_utils/backends): one entry per cloud; the checks below ask the
# registry itself
SUPPORTED_BACKENDS = backends.names()
ROLE_KEYS = ("order_processing_backend", "reporting_backend", "membership_sync_backend")
PASS_ROLES = {"order_process": "order_processing_backend", "report": "reporting_backend",
              "membership_sync": "membership_sync_backend", "audit": "order_processing_backend"}
SECRET_KEYS = frozenset(("waldur_api_token", "oidc_client_secret", "token", "client_secret", "secret",
                         "password", "sentry_dsn") + backends.secret_settings())
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
ACCOUNTING_TYPES = ("usage", "limit", "one")
LIMIT_PERIODS = ("annual", "month", "quarterly", "total")

ROOT_KEYS = {
    "offerings", "sentry_dsn", "elastic_apm_server_url", "timezone", "global_proxy", "log_level",
    "reporting_periods", "api_key_final_report_days", "expose_backend_error_details", "log_shipping",
}
OFFERING_KEYS = {
    "name", "waldur_api_url", "waldur_api_token", "waldur_offering_uuid", "oidc_token_url", "oidc_client_id",
    "oidc_client_secret", "backend_type", "backend_settings", "backend_components", "verify_ssl",
    "order_processing_backend", "membership_sync_backend", "reporting_backend", "username_management_backend",
    "stomp_enabled", "stomp_membership_sync_enabled", "stomp_ws_host", "stomp_ws_port", "stomp_ws_path",
    "websocket_use_tls", "resource_import_enabled", "username_reconciliation_enabled",
    "preserve_unmanaged_backend_users", "omit_anomalous_usage_components", "request_timeout",
}
COMPONENT_KEYS = {
    "measured_unit", "accounting_type", "label", "unit_factor", "unit_factor_reporting", "limit",
    "description", "min_value", "max_value", "max_available_limit", "default_limit", "limit_period",
    "article_code", "is_boolean", "is_prepaid", "min_prepaid_duration", "max_prepaid_duration",
    "prepaid_duration_step", "min_renewal_duration", "max_renewal_duration", "renewal_duration_step",
    "backend_name", "price",
}
COMMON_BACKEND_SETTINGS = {
    "allocation_prefix", "project_prefix", "customer_prefix", "default_account", "soft_delete",
    "check_backend_id_uniqueness", "check_all_offerings", "backend_id_max_retries", "periodic_limits",
}
# How close (difflib ratio) an unknown key must be to a known one to count as its misspelling:
# default_regoin, defualt_size and unitfactor are; a key of another tool or of a later release is not.
TYPO_CUTOFF = 0.8


def backend_settings_read(backend_type):
    """The ``backend_settings`` keys the passes of ``backend_type`` read: its credentials and its
    schema (the one list; tests/unit checks every ``backend_settings.<key>`` read against it)."""
    return backends.backend(backend_type).settings_read()


def misspelling_of(key, known):
    """The known key ``key`` looks like a misspelling of, or None."""
    import difflib

    close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=TYPO_CUTOFF)
    return close[0] if close else None


def backend_of(offering):
    """The offering's ``backend_type`` in lower case ("" when missing or not a string)."""
    backend_type = offering.get("backend_type") if isinstance(offering, dict) else None
    return backend_type.strip().lower() if isinstance(backend_type, str) else ""


def is_foreign(offering):
    """True for an offering of another backend (SLURM, MOAB, ...): another agent serves it."""
    backend_type = backend_of(offering)
    return bool(backend_type) and backend_type not in backends.names()


def supported_offerings(config):
    """The offerings this collection serves (Azure and DigitalOcean), in file order."""
    return [offering for offering in (config.get("offerings") or [])
            if isinstance(offering, dict) and not is_foreign(offering)]


def validate(config):
    """Validate a parsed config. Returns ``(errors, warnings)`` (lists of strings)."""
    problems = ConfigProblems()
    if not isinstance(config, dict):
        problems.error("(root)", "expected a mapping with an 'offerings' list, got %s" % _type_name(config))
        return problems.errors, problems.warnings
    for key in sorted(set(config) - ROOT_KEYS):
        problems.warn(key, _unknown_key_warning(key, ROOT_KEYS))
    _validate_root_options(config, problems)
    offerings = config.get("offerings")
    if offerings is None:
        problems.error("offerings", "required")
    elif not isinstance(offerings, list):
        problems.error("offerings", "expected a list of offerings, got %s" % _type_name(offerings))
    elif not offerings:
        problems.error("offerings", "expected at least one offering")
    else:
        names, uuids, foreign = {}, {}, []
        for index, offering in enumerate(offerings):
            path = "offerings[%d]" % index
            if not isinstance(offering, dict):
                problems.error(path, "expected a mapping, got %s" % _type_name(offering))
                continue
            if is_foreign(offering):
                # The migration guide promises the upstream file as it is: another agent serves these.
                foreign.append("%s %r (backend_type %s)" % (path, offering.get("name"), offering["backend_type"]))
                continue
            _validate_offering(path, offering, problems)
            name = offering.get("name")
            if isinstance(name, str):
                if name in names:
                    problems.error(path + ".name", "duplicate offering name (also offerings[%d])" % names[name])
                names.setdefault(name, index)
            uuid = offering.get("waldur_offering_uuid")
            if isinstance(uuid, str) and _UUID.match(uuid):
                key = uuid.replace("-", "").lower()
                if key in uuids:
                    problems.error(path + ".waldur_offering_uuid", "the same offering as offerings[%d] (UUIDs are "
                                   "compared without dashes and case); each offering may appear once, or two "
                                   "passes would work on its orders at once" % uuids[key])
                uuids.setdefault(key, index)
        if foreign:
            problems.warn("offerings", "skipped, not Azure or DigitalOcean (left to the agent of their backend): "
                          + ", ".join(foreign))
            if len(foreign) == len(offerings):
                problems.error("offerings", "none is an Azure or DigitalOcean offering: this collection has "
                               "nothing to do (backend_type must be %s)" % " or ".join(backends.names()))
    return problems.errors, problems.warnings


def _validate_root_options(config, problems):
    _check_secret_texts("", config, ("sentry_dsn",), problems)
    for key in ("sentry_dsn", "elastic_apm_server_url", "global_proxy"):
        value = config.get(key)
        if value not in (None, ""):
            if key == "global_proxy":
                if not (isinstance(value, str) and re.match(r"^(https?|socks5h?)://\S+$", value)):
                    problems.error(key, "expected an http, https, socks5 or socks5h URL")
            elif not (isinstance(value, str) and _URL.match(value)):
                problems.error(key, "expected a URL starting with http:// or https://")
    if "timezone" in config and _expect(problems, "timezone", config["timezone"], "str"):
        if not is_time_zone(config["timezone"]):
            problems.error("timezone", "expected an IANA time zone name such as UTC or Europe/Tallinn, got %r"
                           % config["timezone"])
    if "log_level" in config and config["log_level"] not in LOG_LEVELS:
        problems.error("log_level", "expected one of %s" % ", ".join(LOG_LEVELS))
    for key, low, high in (("reporting_periods", 1, 12), ("api_key_final_report_days", 0, 28)):
        if key in config:
            value = config[key]
            if _expect(problems, key, value, "int") and not low <= value <= high:
                problems.error(key, "expected an integer from %d to %d, got %d" % (low, high, value))
    if "expose_backend_error_details" in config:
        _expect(problems, "expose_backend_error_details", config["expose_backend_error_details"], "bool")
    if "log_shipping" in config and not isinstance(config["log_shipping"], dict):
        problems.error("log_shipping", "expected a mapping, got %s" % _type_name(config["log_shipping"]))


def _unknown_key_warning(key, known, what="key"):
    close = misspelling_of(key, known)
    return "unknown %s, ignored (did you mean %s?)" % (what, close) if close else "unknown %s, ignored" % what


def _unknown_keys(path, mapping, known, problems, what="key", ignored=frozenset()):
    """Unknown keys of a mapping the passes read: one that looks like a misspelling of a key they
    read is an error naming that key (the setting it was meant to be would silently not apply, and
    the customers' orders would pay for it); any other is a warning, so a file that carries keys of
    a later release or of another tool still loads. ``ignored``: keys accepted without effect."""
    for key in sorted(set(mapping) - set(known) - set(ignored), key=str):
        close = misspelling_of(key, known)
        if close:
            problems.error("%s.%s" % (path, key), "unknown %s; did you mean %s? (as written it would be ignored)"
                           % (what, close))
        else:
            problems.warn("%s.%s" % (path, key), _unknown_key_warning(key, ignored, what))


def _validate_offering(path, offering, problems):
    for key in sorted(set(offering) - OFFERING_KEYS):
        problems.warn("%s.%s" % (path, key), _unknown_key_warning(key, OFFERING_KEYS))
    for key, kind in (("name", "str"), ("waldur_api_url", "url"), ("waldur_offering_uuid", "uuid"),
                      ("backend_type", "str")):
        if offering.get(key) in (None, ""):
            problems.error("%s.%s" % (path, key), "required")
        else:
            _expect(problems, "%s.%s" % (path, key), offering[key], kind)
    oidc = [offering.get(k) for k in ("oidc_token_url", "oidc_client_id", "oidc_client_secret")]
    if any(oidc) and not all(oidc):
        problems.error(path, "oidc_token_url, oidc_client_id and oidc_client_secret go together: set all or none")
    if not _secret_present(offering.get("waldur_api_token")):
        if all(oidc):
            problems.error(path + ".waldur_api_token", "required: this collection authenticates to Waldur with a "
                           "static token only; OIDC (oidc_token_url, oidc_client_id, oidc_client_secret) is not "
                           "supported, so give the offering's waldur_api_token (or set WALDUR_API_TOKEN)")
        else:
            problems.error(path + ".waldur_api_token", "required")
    _check_secret_texts(path, offering, SECRET_KEYS, problems)
    for key in ("stomp_enabled", "websocket_use_tls", "omit_anomalous_usage_components"):
        if key in offering:
            _expect(problems, "%s.%s" % (path, key), offering[key], "bool")
    if "verify_ssl" in offering:
        _validate_verify_ssl(path + ".verify_ssl", offering["verify_ssl"], problems)
    if "request_timeout" in offering:
        timeout = offering["request_timeout"]
        if _expect(problems, path + ".request_timeout", timeout, "number") and timeout <= 0:
            problems.error(path + ".request_timeout", "expected a number of seconds greater than 0, got %s" % timeout)
    if isinstance(offering.get("waldur_api_url"), str) and _URL.match(offering["waldur_api_url"]):
        host = _url_host(offering["waldur_api_url"])
        if offering["waldur_api_url"].lower().startswith("http://") and not _is_loopback(host):
            problems.warn(path + ".waldur_api_url", "plain http:// to %s: the Waldur token crosses the network "
                          "unencrypted; use https://" % host)

    backend_type = offering.get("backend_type")
    known = isinstance(backend_type, str) and backend_type.lower() in backends.names()
    if isinstance(backend_type, str) and backend_type and not known:
        problems.error(path + ".backend_type", "unknown backend %r; this collection supports %s"
                       % (backend_type, " and ".join(backends.names())))
    for role_key in ROLE_KEYS:
        role_backend = offering.get(role_key)
        if role_backend in (None, ""):
            continue
        if not isinstance(role_backend, str):
            problems.error("%s.%s" % (path, role_key), "expected a backend name, got %s" % _type_name(role_backend))
        elif known and role_backend.lower() != backend_type.lower():
            problems.error("%s.%s" % (path, role_key), "is %r but backend_type is %r; an offering has one set of "
                           "backend_settings, so its role backends must match backend_type"
                           % (role_backend, backend_type))
    settings = offering.get("backend_settings", {})
    if not isinstance(settings, dict):
        problems.error(path + ".backend_settings", "expected a mapping, got %s" % _type_name(settings))
        settings = {}
    if known:
        _validate_backend_settings(path + ".backend_settings", backend_type.lower(), settings, problems)
    components = offering.get("backend_components", {})
    if not isinstance(components, dict):
        problems.error(path + ".backend_components", "expected a mapping, got %s" % _type_name(components))
    else:
        for name, component in components.items():
            _validate_component("%s.backend_components.%s" % (path, name), component, problems)
        # a backend whose settings map sizes to limits (size_mapping): its entries name components
        schema = backends.backend(backend_type).settings if known else {}
        mapping = settings.get("size_mapping") if schema.get("size_mapping") == "size_mapping" else None
        if components and isinstance(mapping, dict):
            # An entry matches an order's limits, which Waldur keys by the offering's components.
            for slug, limits in mapping.items():
                if isinstance(limits, dict):
                    _unknown_keys("%s.backend_settings.size_mapping.%s" % (path, slug), limits, components, problems,
                                  what="component of backend_components")


def _validate_backend_settings(path, backend_type, settings, problems):
    entry = backends.backend(backend_type)
    entry.check_settings(path, settings, problems)
    # PEM text is lines by nature: only one-line secrets are checked for stray whitespace.
    _check_secret_texts(path, settings, (SECRET_KEYS | set(entry.credentials)) - {"x509_certificate"}, problems)
    for key, value in settings.items():
        if key in entry.settings and value not in (None, ""):
            _expect(problems, "%s.%s" % (path, key), value, entry.settings[key])
    _unknown_keys(path, settings, entry.settings_read(), problems, what="%s setting" % backend_type,
                  ignored=COMMON_BACKEND_SETTINGS)


def _check_secret_texts(path, mapping, keys, problems):
    """Refuse a secret (token, client secret, password) with stray whitespace or a control
    character, naming its key and never its value: a trailing newline from ``echo token > file``
    or a YAML ``|`` block would otherwise reach an HTTP header, whose error quotes it whole."""
    for key in sorted(set(mapping) & set(keys)):
        problem = secret_text_problem(mapping[key])
        if problem:
            problems.error("%s.%s" % (path, key) if path else key, problem)


def _validate_component(path, component, problems):
    if not isinstance(component, dict):
        problems.error(path, "expected a mapping, got %s" % _type_name(component))
        return
    for key in ("measured_unit", "accounting_type", "label"):
        if component.get(key) in (None, ""):
            problems.error("%s.%s" % (path, key), "required")
    accounting_type = component.get("accounting_type")
    if accounting_type not in (None, "") and accounting_type not in ACCOUNTING_TYPES:
        problems.error(path + ".accounting_type", "expected one of %s, got %r"
                       % (", ".join(ACCOUNTING_TYPES), accounting_type))
    if "unit_factor" in component:
        factor = component["unit_factor"]
        if _expect(problems, path + ".unit_factor", factor, "number") and factor <= 0:
            problems.error(path + ".unit_factor", "expected a number greater than 0, got %s" % factor)
    for key in ("limit", "min_value", "max_value", "max_available_limit", "default_limit"):
        if component.get(key) is not None:
            _expect(problems, "%s.%s" % (path, key), component[key], "number")
    if component.get("price") is not None:
        price = component["price"]
        if _expect(problems, path + ".price", price, "number") and price < 0:
            problems.error(path + ".price", "expected a price of 0 or more, got %s" % price)
    if component.get("limit_period") not in (None, "") and component["limit_period"] not in LIMIT_PERIODS:
        problems.error(path + ".limit_period", "expected one of %s" % ", ".join(LIMIT_PERIODS))
    _unknown_keys(path, component, COMPONENT_KEYS, problems, what="component key")


def _validate_verify_ssl(path, value, problems):
    if isinstance(value, bool):
        return
    if isinstance(value, str) and value.strip() and os.path.isfile(os.path.expanduser(value)):
        return
    if isinstance(value, str) and value.strip():
        problems.error(path, "expected true, false or the path of a CA bundle file; %s is not a file" % value)
    else:
        problems.error(path, "expected true, false or the path of a CA bundle file, got %s" % _type_name(value))


# Secrets an operator may keep out of the file: AWX/AAP credentials inject these variables (each
# backend's own are its registry entry's ``environment``).
WALDUR_ENVIRONMENT = {"waldur_api_token": ("WALDUR_API_TOKEN",)}


def apply_environment(config, environ):
    """Fill secrets missing from the file from the environment (never override the file).

    Returns the list of ``<key path> <- <variable>`` it filled, for the log."""
    filled = []
    if not isinstance(config, dict) or not isinstance(config.get("offerings"), list):
        return filled

    def fill(target, path, key, names):
        if _secret_present(target.get(key)):
            return
        for name in names:
            if _secret_present(environ.get(name)):
                target[key] = environ[name]
                filled.append("%s.%s <- %s" % (path, key, name))
                return

    for index, offering in enumerate(config["offerings"]):
        if not isinstance(offering, dict):
            continue
        path = "offerings[%d]" % index
        for key, names in WALDUR_ENVIRONMENT.items():
            fill(offering, path, key, names)
        entry = backends.backend(offering.get("backend_type"))
        if entry is not None:
            settings = offering.setdefault("backend_settings", {})
            if isinstance(settings, dict):
                for key, names in entry.environment.items():
                    fill(settings, path + ".backend_settings", key, names)
    return filled


def _matches(item, offering):
    wanted = str(offering).replace("-", "").lower()
    return item.get("name") == offering or \
        str(item.get("waldur_offering_uuid", "")).replace("-", "").lower() == wanted


def offerings_for(config, pass_role=None, offering=None):
    """The offerings a pass works on: those of this collection's backends with the pass's
    role backend set, optionally just the one named by ``offering`` (name or UUID)."""
    return select_offerings(config, pass_role, offering)[0]


def select_offerings(config, pass_role=None, offering=None):
    """``(selected, left_out)``: the offerings a pass works on, and the names of the
    offerings (of this collection's backends, matching ``offering`` when given) that are
    left out because their role backend for ``pass_role`` is not set."""
    selected, left_out = [], []
    for item in supported_offerings(config):
        if offering is not None and not _matches(item, offering):
            continue
        if pass_role and not item.get(PASS_ROLES[pass_role]):
            left_out.append(str(item.get("name")))
            continue
        selected.append(item)
    return selected, left_out


def role_key_typos(config, pass_role):
    """Offering keys that look like a misspelt role key of ``pass_role`` (for example
    ``order_procesing_backend``), as ``offerings[i].<key>``."""
    import difflib

    wanted = PASS_ROLES[pass_role]
    typos = []
    for index, item in enumerate(config.get("offerings") or []):
        if not isinstance(item, dict):
            continue
        for key in sorted(set(item) - OFFERING_KEYS):
            if difflib.get_close_matches(str(key), [wanted], n=1, cutoff=0.75):
                typos.append("offerings[%d].%s" % (index, key))
    return typos
