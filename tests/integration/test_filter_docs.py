"""Every filter of the collection is documented for ``ansible-doc -t filter``, and its
EXAMPLES run: they are tasks (asserts on literal data), executed here as a playbook."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ansible_env, run_playbook

pytestmark = pytest.mark.integration


def filter_names():
    names = set()
    for path in (REPO / "plugins" / "filter").glob("*.py"):
        module = importlib.import_module("ansible_collections.waldur.site_agent.plugins.filter." + path.stem)
        names.update(module.FilterModule().filters())
    return sorted(names)


def test_every_filter_is_documented_and_its_examples_run():
    names = ["waldur.site_agent." + name for name in filter_names()]
    doc = subprocess.run([str(Path(sys.executable).parent / "ansible-doc"), "-t", "filter", "--json", *names],
                         env=ansible_env(), capture_output=True, text=True, timeout=300, check=False)
    assert doc.returncode == 0, doc.stderr
    documented = json.loads(doc.stdout)
    assert sorted(documented) == names, doc.stderr

    tasks = []
    for name in names:
        entry = documented[name]
        assert entry["doc"]["short_description"] and entry["doc"]["description"], name
        assert entry["return"]["_value"]["description"], name
        examples = yaml.safe_load(entry["examples"])
        assert examples and all(name in json.dumps(task) for task in examples), name
        tasks.extend(examples)
    run = run_playbook([{"name": "filter examples", "hosts": "localhost", "connection": "local",
                         "gather_facts": False, "tasks": tasks}])
    assert run.rc == 0, run.output[-4000:]
    assert "ok=%d " % len(tasks) in run.stdout, run.stdout[-2000:]
