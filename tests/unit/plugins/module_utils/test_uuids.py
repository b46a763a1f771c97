"""The one UUID rule (core/uuids.py) every module, plugin and module_utils uses."""

import uuid

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import (
    UUID_FULL_PATTERN,
    UUID_WORD_PATTERN,
    find_uuids,
    hex_uuid,
    is_uuid,
    normalize_uuid,
    uuid_or_none,
)

HEX = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
DASHED = "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9"


@pytest.mark.parametrize("value", [HEX, DASHED, " %s " % DASHED, "{%s}" % DASHED, "urn:uuid:%s" % DASHED,
                                   uuid.UUID(HEX)])
def test_every_accepted_form_normalises_to_32_lower_hex(value):
    assert normalize_uuid(value) == HEX
    assert uuid_or_none(value) == HEX
    assert is_uuid(value)


@pytest.mark.parametrize("value", ["", "abc", HEX[:-1], HEX + "0", HEX[:-1] + "g", 12, True])
def test_anything_else_is_refused(value):
    with pytest.raises(ValueError):
        normalize_uuid(value)
    assert uuid_or_none(value) is None
    assert not is_uuid(value)


def test_none_stays_none_but_is_not_a_uuid():
    assert normalize_uuid(None) is None
    assert not is_uuid(None)


def test_hex_uuid_keeps_what_is_not_a_uuid():
    assert hex_uuid(DASHED) == HEX
    assert hex_uuid(None) is None
    assert hex_uuid("") is None
    assert hex_uuid("not-a-uuid") == "not-a-uuid"


def test_find_uuids_returns_them_in_order_as_written():
    text = "https://waldur/api/marketplace-orders/%s/?x=%s" % (DASHED, HEX)
    assert find_uuids(text) == [DASHED, HEX]
    assert find_uuids(None) == []


def test_word_pattern_does_not_match_inside_a_longer_hex_string():
    assert UUID_WORD_PATTERN.sub("<uuid>", "order %s failed" % DASHED) == "order <uuid> failed"
    assert UUID_WORD_PATTERN.sub("<uuid>", "ff" + HEX) == "ff" + HEX


def test_full_pattern_wants_the_whole_string():
    assert UUID_FULL_PATTERN.match(DASHED)
    assert not UUID_FULL_PATTERN.match("x" + HEX)
    assert not UUID_FULL_PATTERN.match("{%s}" % HEX)
