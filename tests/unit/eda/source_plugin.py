"""Load the waldur_stomp source plugin from its file, as ansible-rulebook does (runpy, no
package), so the tests exercise the file exactly as shipped, together with the collection's
``plugin_utils/events`` parts it is built from."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

PLUGIN_PATH = Path(__file__).resolve().parents[3] / "extensions" / "eda" / "plugins" / "event_source" / "waldur_stomp.py"
EVENTS = "ansible_collections.waldur.site_agent.plugins.plugin_utils.events."
PARTS = ("messages", "settings", "registration", "stomp_link", "source")


def load_source_file():
    """The waldur_stomp source file as a module (loaded once per process)."""
    name = "waldur_stomp_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, PLUGIN_PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def load_source_plugin():
    """One namespace with the names of the source file and of its module_utils parts (the
    source file's own win: DOCUMENTATION, EXAMPLES, main)."""
    names = {}
    for part in PARTS:
        names.update({key: value for key, value in vars(importlib.import_module(EVENTS + part)).items()
                      if not key.startswith("__")})
    names.update({key: value for key, value in vars(load_source_file()).items() if not key.startswith("__")})
    return types.SimpleNamespace(**names)
