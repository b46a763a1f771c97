# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The layer map of docs/development.md, enforced.

Each folder of ``plugins/module_utils`` may import only the layers below it: ``core``
knows neither Waldur nor a cloud, ``waldur``/``digitalocean``/``azure`` know ``core`` and
themselves, and only ``agent`` (the glue) knows them all. The SDKs are bound in one
place each, and no module imports another module. A new import that crosses a wall
fails here, naming the file, the line and the rule.
"""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
MODULE_UTILS = PLUGINS / "module_utils"
OURS = "ansible_collections.waldur.site_agent.plugins."

# layer -> the module_utils layers its files may import
ALLOWED = {
    "core": {"core"},
    "waldur": {"core", "waldur"},
    "digitalocean": {"core", "digitalocean"},
    "azure": {"core", "azure"},
    "agent": {"core", "waldur", "digitalocean", "azure", "agent"},
    # the EDA event source's parts: Waldur's event queue over STOMP (only the source imports them)
    "events": {"core", "waldur", "agent", "events"},
}

# third-party package -> the only files (relative to plugins/) that may import it
BOUND_SDKS = {
    "digitalocean": ("module_utils/digitalocean/binding.py",),
    "azure": ("module_utils/azure/",),
}


def imports_of(path):
    """(line, dotted name) of every import in ``path``, relative imports resolved against ours."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            # ``from ...module_utils import waldur`` names a layer in the alias
            if node.module.endswith("plugins.module_utils"):
                found.extend((node.lineno, "%s.%s" % (node.module, alias.name)) for alias in node.names)
    return found


def python_files(folder):
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_utils_file_is_in_a_layer():
    strays = [p.relative_to(MODULE_UTILS).as_posix() for p in python_files(MODULE_UTILS)
              if p.relative_to(MODULE_UTILS).parts[0] not in ALLOWED]
    assert strays == [], "module_utils files outside the layer folders %s: %s" % (sorted(ALLOWED), strays)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(layer):
    crossings = []
    for path in python_files(MODULE_UTILS / layer):
        for line, name in imports_of(path):
            if not name.startswith(OURS):
                continue
            parts = name[len(OURS):].split(".")
            if parts[0] != "module_utils":
                crossings.append("%s:%d imports %s (module_utils may not import plugins)" % (
                    path.relative_to(REPO), line, name))
            elif len(parts) > 1 and parts[1] not in ALLOWED[layer]:
                crossings.append("%s:%d imports %s (%s may import only %s)" % (
                    path.relative_to(REPO), line, name, layer, ", ".join(sorted(ALLOWED[layer]))))
    assert crossings == []


def test_no_module_imports_another_module():
    crossings = ["%s:%d imports %s" % (path.relative_to(REPO), line, name)
                 for path in python_files(PLUGINS / "modules")
                 for line, name in imports_of(path) if name.startswith(OURS + "modules")]
    assert crossings == []


@pytest.mark.parametrize("package", sorted(BOUND_SDKS))
def test_each_sdk_is_bound_in_one_place(package):
    homes = BOUND_SDKS[package]
    outside = []
    for path in python_files(PLUGINS):
        relative = path.relative_to(PLUGINS).as_posix()
        if any(relative == home or (home.endswith("/") and relative.startswith(home)) for home in homes):
            continue
        outside.extend("%s:%d imports %s" % (relative, line, name) for line, name in imports_of(path)
                       if name == package or name.startswith(package + "."))
    assert outside == [], "%s may be imported only in %s" % (package, ", ".join(homes))


def test_the_rules_catch_a_crossing(tmp_path):
    # the checker itself: a core file importing the Waldur layer is found
    sample = tmp_path / "sample.py"
    sample.write_text("from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import X\n")
    assert imports_of(sample) == [(1, OURS + "module_utils.waldur.client")]
    sample.write_text("from ansible_collections.waldur.site_agent.plugins.module_utils import waldur\n")
    assert (1, OURS + "module_utils.waldur") in imports_of(sample)
