# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The collection's one UUID rule.

Waldur and the operator give UUIDs dashed or undashed, in any case; the collection
compares and returns them as 32 lower-case hex digits, the EDA event source included
(``plugin_utils/events/``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
# A UUID inside free text (a URL, a message), dashed or not, any case.
_UUID_TEXT = r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
UUID_PATTERN = re.compile("(%s)" % _UUID_TEXT)
# The same, as a whole word: not the middle of a longer hex string.
UUID_WORD_PATTERN = re.compile(r"\b%s\b" % _UUID_TEXT)
# The whole string is one UUID (config validation: no braces or urn: prefix there).
UUID_FULL_PATTERN = re.compile(r"^%s$" % _UUID_TEXT)


def normalize_uuid(value):
    """32 lower-case hex digits for a dashed or undashed UUID (any case, braces or a
    ``urn:uuid:`` prefix allowed); None stays None.

    Raises ValueError for anything that is not a UUID, so callers can name the bad key.
    """
    if value is None:
        return None
    text = str(value).strip().lower().replace("-", "").replace("{", "").replace("}", "")
    if text.startswith("urn:uuid:"):
        text = text[len("urn:uuid:"):]
    if not _HEX32.match(text):
        raise ValueError("%r is not a UUID" % (value,))
    return text


def uuid_or_none(value):
    """:func:`normalize_uuid`, with None instead of ValueError for anything that is not a UUID."""
    try:
        return normalize_uuid(value)
    except ValueError:
        return None


def is_uuid(value):
    """True when ``value`` is a UUID in any accepted form (None is not)."""
    return uuid_or_none(value) is not None


def hex_uuid(value):
    """32-hex form of a UUID a service returned; empty stays None, anything odd is kept as given
    (a response is reported as it came, not refused)."""
    if value in (None, ""):
        return None
    text = uuid_or_none(value)
    return str(value) if text is None else text


def find_uuids(text):
    """The UUIDs in ``text`` as they are written there, in order."""
    return UUID_PATTERN.findall(text or "")
