# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The value checks of the site agent configuration's validation (``site_config.validate``):
simple kinds, secrets, URLs and hosts, time zones; problems collected with their key paths."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import is_secret_key
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import UUID_FULL_PATTERN


LOOPBACK_HOSTS = ("localhost", "::1", "[::1]")
_URL = re.compile(r"^https?://[^\s/:]+(:\d+)?(/\S*)?$")
_UUID = UUID_FULL_PATTERN
_CIDR = re.compile(r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$")


class ConfigProblems:
    """Collects errors and warnings with their key paths."""

    def __init__(self):
        self.errors = []
        self.warnings = []

    def error(self, path, message):
        self.errors.append("%s: %s" % (path, message))

    def warn(self, path, message):
        self.warnings.append("%s: %s" % (path, message))


# The kinds whose given value is quoted: a word where a number or a flag was wanted ("five",
# "yes please") says what went wrong; a string where a mapping, URL or UUID was wanted may be a
# token pasted one line off, so it is never quoted.
_QUOTED_KINDS = ("int", "number", "bool")
# Longer strings are not quoted: a number or flag written as a word is short, a secret is not.
_QUOTED_MAX = 20


def _type_name(value):
    """The kind of a configuration value in the words of the YAML file: ``an integer``, ``a
    number``, ``a string``, ``a boolean``, ``a list``, ``a mapping``, ``null`` (or ``a date``).
    Never a Python class: ansible-core 2.19+ hands over tagged subclasses (``_AnsibleTaggedInt``),
    older releases ``AnsibleUnicode``, so the kind is decided by isinstance, bool before int."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return "a date"  # YAML reads 2024-01-01 unquoted as a date
    if hasattr(value, "keys") and hasattr(value, "items"):
        return "a mapping"
    if hasattr(value, "__iter__") and not isinstance(value, bytes):
        return "a list"
    return "a value of another kind"


def describe_value(value, quote=True):
    """What was given, for ``expected ..., got <this>``: its kind, with the value itself when it
    is a number or a flag, or a short one-line string (``a string ("five")``). ``quote=False``
    for a secret's key or a kind where a misplaced token could land: then the kind alone."""
    kind = _type_name(value)
    if not quote or value is None:
        return kind
    if isinstance(value, bool):
        return "%s (%s)" % (kind, "true" if value else "false")
    if isinstance(value, (int, float)):
        return "%s (%s)" % (kind, repr(float(value)) if isinstance(value, float) else int(value))
    if isinstance(value, str) and len(value) <= _QUOTED_MAX and value.isprintable() and '"' not in value:
        return '%s ("%s")' % (kind, value)
    return kind


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _expect(problems, path, value, kind):
    """Check ``value`` against a simple kind; return True when it is acceptable."""
    if kind == "str":
        ok = isinstance(value, str)
        expected = "a string"
    elif kind == "bool":
        ok = isinstance(value, bool)
        expected = "true or false"
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
        expected = "an integer"
    elif kind == "number":
        ok = _is_number(value)
        expected = "a number"
    elif kind == "url":
        ok = isinstance(value, str) and bool(_URL.match(value))
        expected = "a URL starting with http:// or https://"
    elif kind == "uuid":
        ok = isinstance(value, str) and bool(_UUID.match(value))
        expected = "a UUID (32 hex digits, dashes optional)"
    elif kind == "cidr":
        ok = isinstance(value, str) and bool(_CIDR.match(value))
        expected = "an IPv4 CIDR such as 10.0.0.0/16"
    elif kind == "str_or_list":
        ok = isinstance(value, str) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value))
        expected = "a string or a list of strings"
    elif kind == "image":
        ok = (isinstance(value, str) and len(value.split(":")) == 4 and all(value.split(":"))) or (
            isinstance(value, dict) and all(value.get(k) for k in ("publisher", "offer", "sku", "version")))
        expected = "publisher:offer:sku:version"
    elif kind == "size_mapping":
        ok = isinstance(value, dict) and all(
            isinstance(limits, dict) and all(_is_number(v) for v in limits.values()) for limits in value.values())
        expected = "a mapping of size slug to {component: number}"
    else:  # pragma: no cover - programming error
        raise ValueError(kind)
    if not ok:
        # A secret's value is never quoted, whatever its kind (a numeric password is a password).
        secret = is_secret_key(path.rsplit(".", 1)[-1])
        quote = not secret and (kind in _QUOTED_KINDS or not isinstance(value, str))
        problems.error(path, "expected %s, got %s" % (expected, describe_value(value, quote)))
    return ok


def _secret_present(value):
    return isinstance(value, str) and value.strip() != ""


def _url_host(url):
    rest = url.split("://", 1)[-1]
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.split(":", 1)[0].lower()


def _is_loopback(host):
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def is_time_zone(name):
    """True for UTC and for the IANA names this Python knows (zoneinfo)."""
    if name in ("UTC", "Etc/UTC", "utc"):
        return True
    try:
        from zoneinfo import ZoneInfo
    except ImportError:  # Python < 3.9: only UTC is known
        return False
    try:
        ZoneInfo(name)
    except Exception:  # pylint: disable=broad-except
        return False
    return True
