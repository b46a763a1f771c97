"""The waldur_stomp source plugin, loaded from its file as ansible-rulebook loads it."""

from __future__ import annotations

import pytest

from tests.unit.eda.source_plugin import load_source_plugin


@pytest.fixture(scope="session")
def plugin():
    return load_source_plugin()
