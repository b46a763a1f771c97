"""Module unit tests run modules in-process."""

import pytest
from ansible.module_utils import _internal


@pytest.fixture(autouse=True)
def module_side_of_ansible(monkeypatch):
    """Run as a module, not as the controller: other tests in the same worker may have
    imported controller code, which turns module.warn() into a controller display call
    instead of a warning in the module's result (ansible-core 2.19 and later; 2.18 has no
    such switch and always collects warnings in the result)."""
    monkeypatch.setattr(_internal, "is_controller", False, raising=False)
