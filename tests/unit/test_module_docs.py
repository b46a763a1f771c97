"""What ansible-doc shows of each module: its description in the order written (ansible-core
merges a ``description`` list of a doc fragment by sorting the lines, so the fragments carry
``notes`` instead), ``version_added`` of the release that added it, and EXAMPLES/docs that
parse."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, collection_path

MODULES = sorted(path.stem for path in (REPO / "plugins" / "modules").glob("*.py") if path.stem != "__init__")
FRAGMENTS = sorted((REPO / "plugins" / "doc_fragments").glob("*.py"))


def _assigned(path: Path, name: str) -> str:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return node.value.value
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return node.value.value
    raise AssertionError("%s has no %s" % (path, name))


@pytest.mark.parametrize("fragment", FRAGMENTS, ids=lambda path: path.stem)
def test_no_fragment_adds_description_lines(fragment):
    texts = [node.value.value for node in ast.walk(ast.parse(fragment.read_text()))
             if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "").isupper()
             and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)]
    assert texts, fragment
    for text in texts:
        assert "description" not in yaml.safe_load(text), "ansible-doc would sort the module's description: use notes"


@pytest.fixture(scope="module")
def rendered():
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collection_path()), ANSIBLE_NOCOLOR="1")
    result = subprocess.run([str(bin_dir / "ansible-doc"), "-t", "module", "--json"]
                            + ["waldur.site_agent.%s" % module for module in MODULES],
                            env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("module", MODULES)
def test_every_module_says_its_attributes_once_in_the_shared_words(module, rendered):
    """The attributes' descriptions have one home (the ``attributes`` fragment); each module says
    its support, and ansible-doc shows both merged. Every module runs as its action plugin."""
    shared = yaml.safe_load(_fragment_text("attributes", "DOCUMENTATION"))["attributes"]
    own = yaml.safe_load(_assigned(REPO / "plugins" / "modules" / ("%s.py" % module), "DOCUMENTATION"))
    assert "waldur.site_agent.attributes" in own["extends_documentation_fragment"]
    for name, attribute in own.get("attributes", {}).items():
        assert "description" not in attribute, "%s: attributes.%s repeats the shared description" % (module, name)
    shown = rendered["waldur.site_agent.%s" % module]["doc"]["attributes"]
    assert set(shown) == {"action", "check_mode", "diff_mode"}
    for name, attribute in shown.items():
        assert attribute["description"] == shared[name]["description"]
        assert attribute["support"] in ("full", "partial", "none"), (module, name)
    assert shown["action"]["support"] == "full"
    assert (REPO / "plugins" / "action" / ("%s.py" % module)).is_file()


def _fragment_text(fragment, name):
    return _assigned(REPO / "plugins" / "doc_fragments" / ("%s.py" % fragment), name)


@pytest.mark.parametrize("module", MODULES)
def test_ansible_doc_shows_the_description_as_written(module, rendered):
    own = yaml.safe_load(_assigned(REPO / "plugins" / "modules" / ("%s.py" % module), "DOCUMENTATION"))
    shown = rendered["waldur.site_agent.%s" % module]["doc"]
    written = own["description"] if isinstance(own["description"], list) else [own["description"]]
    assert shown["description"] == written
    assert shown["version_added"] == "1.0.0"
    for option in shown["options"].values():
        assert option.get("version_added", "1.0.0") == "1.0.0"


def test_every_version_added_is_a_release_of_the_collection():
    """Nothing is released yet (changelogs/changelog.yaml): everything was added in the first
    release, galaxy.yml's version. Later, a version_added is a release or the next one."""
    import re

    releases = set((yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"] or {}))
    allowed = releases or {yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]}
    found = {}
    for path in sorted((REPO / "plugins").rglob("*")) + sorted((REPO / "extensions").rglob("*.py")):
        if path.is_file() and path.suffix in (".py", ".yml", ".yaml"):
            for version in re.findall(r"version_added:\s*['\"]?([\w.]+)", path.read_text()):
                found.setdefault(version, []).append(str(path.relative_to(REPO)))
    assert found, "no version_added found"
    if releases:  # the release being prepared may be newer than the last one
        return
    assert {version: paths for version, paths in found.items() if version not in allowed} == {}
