# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Reading what the ``health`` and ``diagnostics`` playbooks registered, for the judgements of
``filter/readiness.py`` and of each backend: a value that may be missing at any depth, a loop's
item, and what a failed ``ansible.builtin.uri`` call means, said the same way everywhere.

A read that did not run (a skipped loop item) has no ``status``: it counts as no answer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from collections.abc import Mapping

MISSING = object()


def dig(value, *keys):
    """``value[k1][k2]...``, or ``MISSING`` when a step is not a mapping holding the key."""
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            return MISSING
        value = value[key]
    return value


def or_default(value, default, falsy=False):
    """Jinja's ``default``: ``default`` for a missing value (and, with ``falsy``, for a false one)."""
    return default if value is MISSING or (falsy and not value) else value


def text(value, missing="?"):
    """The value as text, or ``missing`` when it is missing."""
    return missing if value is MISSING else str(value)


def as_int(value):
    """Jinja's ``int``: the number, or 0 when the value is none."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def is_int(value):
    """An integer, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def result_at(registered, index):
    """The loop item ``index`` of a registered loop (or of a plain list of results); {} when absent."""
    results = registered.get("results") if isinstance(registered, Mapping) else registered
    if isinstance(results, (list, tuple)) and 0 <= index < len(results) and isinstance(results[index], Mapping):
        return results[index]
    return {}


def status_of(result):
    """The HTTP status of a registered ``uri`` result; -1 when it has none (no answer, or not run)."""
    return or_default(dig(result, "status"), -1)


def settings_of(offering):
    """The offering's ``backend_settings`` ({} when missing or not a mapping)."""
    settings = dig(offering, "backend_settings")
    return settings if isinstance(settings, Mapping) else {}


def http_failure(result, what, where=None):
    """Why an ``ansible.builtin.uri`` call got no usable answer from ``what`` (the service's name).

    A refusal of the credentials (401, 403), another status, or no answer. With ``where`` (the
    health verdict) no answer names where and the cause alone (``Connection refused``); without it
    (the diagnostics report) an answer adds the service's ``detail`` and no answer the module's
    message."""
    status = as_int(status_of(result))
    if status in (401, 403):
        return "%s rejected the credentials (HTTP %s)" % (what, status)
    detail = dig(result, "json", "detail")
    if status > 0:
        return "%s answered HTTP %s%s" % (what, status, "" if where is not None or detail is MISSING
                                          else ": %s" % (detail,))
    message = re.sub(r"^Status code was -1 and not .[0-9]+.: ", "", str(or_default(dig(result, "msg"), "no answer")))
    if where is None:
        return "%s is unreachable: %s" % (what, message)
    errno = re.search(r"\[Errno -?\d+\] ([^>]+)", message)
    cause = errno.group(1) if errno else re.sub(r"^Request failed: ", "", message)
    return "%s is unreachable at %s: %s" % (what, where, cause.strip())


def malformed(result, call, wanted="a JSON object"):
    """A 200 that is not the JSON asked for (Waldur's maintenance page, another site at a wrong
    waldur_api_url, truncated JSON): no answer to trust. Names it by its type and first characters."""
    content = " ".join(str(or_default(dig(result, "content"), "")).split())[:80]
    return "Waldur %s answered HTTP 200 with %s '%s' instead of %s" % (
        call, text(dig(result, "content_type"), "no content type"), content, wanted)
