"""README.md's contents table lists every module, filter, role, playbook, callback, inventory
plugin, event source, rulebook and action group of the collection, and nothing else."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.helpers import REPO

README = (REPO / "README.md").read_text()


def _row(kind: str) -> list[str]:
    match = re.search(r"^\| %s \| (.*) \|$" % re.escape(kind), README, re.MULTILINE)
    assert match, kind
    # Names are the first backticked word of each comma-separated entry.
    return [re.match(r"\s*`([\w.]+)`", entry).group(1) for entry in re.split(r",(?![^()]*\))", match.group(1))]


def _stems(directory: str, suffix: str) -> list[str]:
    return sorted(path.stem for path in (REPO / directory).glob("*" + suffix) if not path.stem.startswith("__"))


def _filters() -> list[str]:
    return _stems("plugins/filter", ".yml")


@pytest.mark.parametrize("kind, found", [
    ("modules", lambda: _stems("plugins/modules", ".py")),
    ("filters", _filters),
    ("roles", lambda: sorted(path.name for path in (REPO / "roles").iterdir() if path.is_dir())),
    ("playbooks", lambda: _stems("playbooks", ".yml")),
    ("callback", lambda: _stems("plugins/callback", ".py")),
    ("inventory", lambda: _stems("plugins/inventory", ".py")),
    ("event source, rulebook", lambda: sorted(_stems("extensions/eda/plugins/event_source", ".py")
                                              + _stems("extensions/eda/rulebooks", ".yml"))),
    ("action groups", lambda: sorted(yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["action_groups"])),
])
def test_the_contents_list_everything(kind, found):
    listed = _row(kind)
    assert len(listed) == len(set(listed)), kind
    assert sorted(listed) == found(), kind


def test_every_filter_has_its_documentation():
    # one .yml per filter name the plugins export
    import importlib

    names = set()
    for stem in _stems("plugins/filter", ".py"):
        module = importlib.import_module("ansible_collections.waldur.site_agent.plugins.filter." + stem)
        names |= set(module.FilterModule().filters())
    assert sorted(names) == _filters()
