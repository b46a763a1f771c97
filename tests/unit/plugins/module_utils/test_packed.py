"""Packed lists (module_utils core/packed): one JSON text for a list handed between the tasks of a pass."""

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import like, pack, unpack


def test_a_packed_list_is_the_same_items_as_one_compact_text():
    items = [{"uuid": "a" * 32, "paused": False, "backend_metadata": {"ip": None}}, {"uuid": "b" * 32}]
    text = pack(items)
    assert isinstance(text, str) and ", " not in text and ": " not in text
    assert unpack(text) == items
    assert unpack(items) == items and unpack(None) == []  # a list (or nothing) is taken as it is


@pytest.mark.parametrize("value, message", [
    ('{"uuid": "a"}', "resources must pack a JSON list, got dict"),
    ("[1, ", "resources is not a packed list"),
    (42, "resources must be a list or a packed list (JSON text), got int"),
])
def test_what_is_not_a_packed_list_is_named(value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        unpack(value, "resources")


def test_a_filter_answers_in_the_wrapping_it_was_given():
    assert like([1], "[]") == "[1]"
    assert like([1], []) == [1]
