# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The audit's clock: ages, and the ``waldur-orphan-since`` mark of a first sighting, written and read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import parse_time

# The first sighting of a holding whose resource is proven gone is remembered on the cloud objects
# themselves, where the next pass finds it: passes keep no state of their own (under AWX every job
# runs in a fresh container), and a mark cannot be lost with a host or a volume. A DigitalOcean
# droplet gets the tag ``waldur-orphan-since:20261204T120000Z``, an ARM object the tag
# ``waldur-orphan-since`` with the value ``20261204T120000Z`` (UTC). audit_cleanup deletes only when
# a later pass proves the resource gone again and finds the mark at least the grace period old: one
# answer of a Waldur restored from an older backup (or pointed at the wrong place) deletes nothing.
ORPHAN_MARK = "waldur-orphan-since"
MARK_FORMAT = "%Y%m%dT%H%M%SZ"
DEFAULT_GRACE_HOURS = 24.0
# Clocks of the agent and the cloud may differ this much: a mark further in the future, or older
# than the object it is on, was not written by a pass of the agent (a copied or ordered tag).
MARK_CLOCK_SKEW = datetime.timedelta(minutes=5)
# What plan_cleanup asks finish() to do with a holding's marks.
MARK = "mark"
UNMARK = "unmark"


# ---- time ---------------------------------------------------------------------------------

def age_hours(value, now):
    """Hours since ``value`` (rounded to 0.1), or None when the time is unknown."""
    moment = parse_time(value)
    if moment is None:
        return None
    return round(max(0.0, (now - moment).total_seconds()) / 3600.0, 1)


def iso(moment):
    return moment.astimezone(datetime.timezone.utc).isoformat() if moment else None


def utc_text(moment):
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- the mark of a first sighting ---------------------------------------------------------

def mark_value(moment):
    """The value of a mark written at ``moment``: ``20261204T120000Z``."""
    return moment.astimezone(datetime.timezone.utc).strftime(MARK_FORMAT)


_COMPACT_MARK = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})?Z$")


def parse_mark(value):
    """The time a mark's value says (``20261204T120000Z``, ``20261204T1200Z`` or ISO 8601), or None."""
    text = str(value or "").strip().upper()
    compact = _COMPACT_MARK.match(text)
    if compact:
        year, month, day, hour, minute, second = compact.groups()
        text = "%s-%s-%sT%s:%s:%sZ" % (year, month, day, hour, minute, second or "00")
    try:
        return parse_time(text)
    except ValueError:  # digits that make no date (month 13)
        return None


def holding_mark(holding, now):
    """``(since, marked)``: when a pass first saw the holding's resource gone, from the marks on its
    objects (None unless every object carries a valid one; the youngest counts), and whether any of
    its objects carries a mark at all. A mark is valid when it is not in the future and not older
    than the holding's youngest object (a mark that came with the object, or a holding that changed
    since, starts the grace period again)."""
    marks = holding.get("marks") or []
    marked = any(values for values in marks)
    youngest = parse_time(holding.get("youngest_at") or holding.get("created_at"))
    if not marks or youngest is None:
        return None, marked
    sightings = []
    for values in marks:
        valid = [moment for moment in (parse_mark(value) for value in values or ())
                 if moment is not None and youngest - MARK_CLOCK_SKEW <= moment <= now + MARK_CLOCK_SKEW]
        if not valid:
            return None, marked
        sightings.append(max(valid))
    return max(sightings), marked


def first_sighting_text(since, grace_hours, marked):
    """The cleanup of a holding first seen gone in this pass (``marked``: the mark written, else the
    mark check mode would write)."""
    return "kept: first seen gone at %s (%s %s %s); deleted after %g h if still gone" % (
        utc_text(since), "marked" if marked else "would mark", ORPHAN_MARK, mark_value(since), grace_hours)
