# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The collection's one reading of API timestamps.

Waldur, DigitalOcean and Azure write ISO 8601 times in slightly different shapes (``Z`` or
an offset, fractions of any length, or none); every layer compares them as aware UTC
datetimes, so every layer parses them here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$")


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


def duration_words(seconds):
    """``45 seconds``, ``12 minutes``, ``3 hours``: a wait or an age in a message."""
    seconds = int(seconds)
    if seconds >= 2 * 3600:
        return "%d hours" % (seconds // 3600)
    if seconds >= 120:
        return "%d minutes" % (seconds // 60)
    return "%d seconds" % seconds


def parse_time(value):
    """An aware UTC datetime from a datetime or an ISO 8601 text (``Z``, offsets, fractions
    of any length); None for anything else."""
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
    match = _TIME.match(str(value or "").strip())
    if not match:
        return None
    day, clock, fraction, zone = match.groups()
    stamp = datetime.datetime.strptime("%s %s" % (day, clock), "%Y-%m-%d %H:%M:%S")
    if fraction:
        stamp = stamp.replace(microsecond=int((fraction[1:] + "000000")[:6]))
    offset = datetime.timedelta(0)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return (stamp - offset).replace(tzinfo=datetime.timezone.utc)


def oldest(values):
    """The earliest of some times, or None when none of them is a time."""
    moments = [moment for moment in (parse_time(value) for value in values) if moment is not None]
    return min(moments) if moments else None


def by_placement(items, orders):
    """``items`` (one per order, ``order_uuid``) in the order their orders were placed: by the
    ``created`` of ``orders`` (Waldur's listed orders), oldest first; an item whose order has no
    time keeps its place after those that have one. The quota checks give the room left to the
    orders in this order."""
    placed = {}
    for order in orders or []:
        if isinstance(order, dict) and order.get("uuid"):
            placed[str(order["uuid"]).replace("-", "").lower()] = parse_time(order.get("created"))
    timed = [(placed.get(str(item.get("order_uuid") or "").replace("-", "").lower()), index, item)
             for index, item in enumerate(items)]
    known = sorted((entry for entry in timed if entry[0] is not None), key=lambda entry: (entry[0], entry[1]))
    return [entry[2] for entry in known] + [entry[2] for entry in timed if entry[0] is None]
