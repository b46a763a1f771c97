# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The value checks of the site agent configuration's validation (``site_config.validate``):
simple kinds, secrets, URLs and hosts, time zones; problems collected with their key paths."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

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


def _type_name(value):
    return {dict: "a mapping", list: "a list", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), "a string" if isinstance(value, str) else type(value).__name__)


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
        problems.error(path, "expected %s, got %s" % (expected, _type_name(value)))
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
