"""The event source is built from the collection's parts: no copy of a rule to drift. It
loads as ansible-rulebook loads it (``runpy.run_path``, no package) from an installed
collection, from a copy of the file found beside the configured collections path, and says
why when the collection cannot be found."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ansible_collections.waldur.site_agent.plugins.module_utils.core import secrets, uuids
from ansible_collections.waldur.site_agent.plugins.plugin_utils.events import messages, registration, settings
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur import client, errors

from tests.unit.eda.source_plugin import PLUGIN_PATH

REPO = Path(__file__).resolve().parents[3]
INSTALLED = REPO / ".cache" / "collections"
RELATIVE = Path("ansible_collections/waldur/site_agent/extensions/eda/plugins/event_source/waldur_stomp.py")
LOAD = ("import runpy, sys; names = runpy.run_path(sys.argv[1]); "
        "print(names['_IMPORT_PROBLEM'] or names['WaldurStompSource'].__module__)")


def test_the_source_uses_the_collections_rules_not_copies():
    assert messages.uuid_or_none is uuids.uuid_or_none
    assert settings.uuid_or_none is uuids.uuid_or_none
    assert settings.normalize_api_root is client.normalize_api_root
    assert registration.WaldurClient is client.WaldurClient
    assert registration.WaldurApiError is errors.WaldurApiError
    source = PLUGIN_PATH.read_text()
    for copied in ("def normalize_uuid", "def api_root", "def redact", "requests.Session", "yaml.safe_load"):
        assert copied not in source
    assert secrets.redact_text("token abcd-secret", ["abcd-secret"]) == "token ********"


def test_no_part_of_the_source_passes_five_hundred_lines():
    parts = [PLUGIN_PATH] + sorted(Path(messages.__file__).parent.glob("*.py"))
    assert {path.name: len(path.read_text().splitlines()) for path in parts if
            len(path.read_text().splitlines()) > 500} == {}


def run_file(path, env=None, cwd="/"):
    # A fresh interpreter with no path to the checkout: only what the file itself finds.
    environ = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH",)}
    environ.update(env or {})
    environ.setdefault("HOME", "/nonexistent")
    return subprocess.run([sys.executable, "-I", "-c", LOAD, str(path)], capture_output=True, text=True,
                          env=environ, cwd=cwd, timeout=60, check=False)


def test_loads_from_the_installed_collection_as_ansible_rulebook_runs_it():
    result = run_file(INSTALLED / RELATIVE, env={"ANSIBLE_COLLECTIONS_PATH": "/nonexistent"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ansible_collections.waldur.site_agent.plugins.plugin_utils.events.source"


def test_a_copied_file_finds_the_collection_on_the_collections_path(tmp_path):
    # ansible-rulebook -S <dir> runs a source file from any directory
    copy = tmp_path / "waldur_stomp.py"
    shutil.copy(PLUGIN_PATH, copy)
    result = run_file(copy, env={"ANSIBLE_COLLECTIONS_PATH": str(INSTALLED)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("events.source")
    missing = run_file(copy, env={"ANSIBLE_COLLECTIONS_PATH": str(tmp_path)})
    assert "the collection waldur.site_agent is not installed on a collections path" in missing.stdout
