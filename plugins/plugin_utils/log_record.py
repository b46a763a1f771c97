# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""One line of the JSON log (the ``waldur_json`` callback's format, like the upstream agent's
structlog lines): ``event``, ``level``, ``logger``, ``timestamp`` and the fields that are set."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

RECORD_KEYS = ("event", "level", "logger", "timestamp")


def utc_timestamp():
    """ISO 8601 in UTC with an explicit +00:00, like the upstream agent's structlog lines."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def log_record(event, level, logger, **fields):
    """The record as a dict; fields that are None are left out and never replace the four keys."""
    record = {"event": u"%s" % (event,), "level": level, "logger": logger, "timestamp": utc_timestamp()}
    for key, value in fields.items():
        if value is not None and key not in record:
            record[key] = value
    return record
