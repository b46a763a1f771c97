"""Load the waldur_stomp source plugin from its file, as ansible-rulebook does (runpy, no
package), so the tests exercise the file exactly as shipped."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PLUGIN_PATH = Path(__file__).resolve().parents[3] / "extensions" / "eda" / "plugins" / "event_source" / "waldur_stomp.py"


def load_source_plugin():
    """The waldur_stomp source as a module (loaded once per process)."""
    name = "waldur_stomp_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, PLUGIN_PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
