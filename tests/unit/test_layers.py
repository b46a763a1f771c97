# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The layer map of docs/development.md, enforced.

Code lives where it runs. ``plugins/module_utils`` is what modules ship: every file there is
imported, directly or through other module_utils files, by a module of ``plugins/modules``;
code only the controller runs (action, filter, callback and inventory plugins, the EDA event
source) lives in ``plugins/plugin_utils``, which module_utils and modules never import.

Each folder of ``plugins/module_utils`` may import only the layers below it: ``core``
knows neither Waldur nor a cloud, ``waldur``/``digitalocean``/``azure`` know ``core`` and
themselves, and only ``agent`` (the glue) knows them all. Each plugin folder may import only
the folders its row names. The SDKs are bound in one place each, and no module imports
another module. A new import that crosses a wall fails here, naming the file, the line and
the rule; the tables of docs/development.md must say the same as the maps below.
"""

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
MODULE_UTILS = PLUGINS / "module_utils"
PLUGIN_UTILS = PLUGINS / "plugin_utils"
EVENT_SOURCE = REPO / "extensions" / "eda" / "plugins" / "event_source"
DEVELOPMENT = REPO / "docs" / "development.md"
COLLECTION = "ansible_collections.waldur.site_agent."
OURS = COLLECTION + "plugins."

# module_utils layer -> the module_utils layers its files may import
ALLOWED = {
    "core": {"core"},
    "waldur": {"core", "waldur"},
    "digitalocean": {"core", "digitalocean"},
    "azure": {"core", "azure"},
    "agent": {"core", "waldur", "digitalocean", "azure", "agent"},
}

# folder (relative to the repository) -> the folders of plugins/ its files may import
FOLDERS = {
    # shipped with the modules: module_utils only, by the layers of ALLOWED
    "plugins/module_utils": {"module_utils"},
    # run where the module runs: what they import is shipped with them, so module_utils only
    "plugins/modules": {"module_utils"},
    # the controller's
    "plugins/plugin_utils": {"module_utils", "plugin_utils"},
    "plugins/plugin_utils/events": {"module_utils", "plugin_utils"},  # and only the event source imports it
    "plugins/action": {"module_utils", "plugin_utils"},
    "plugins/callback": {"module_utils", "plugin_utils"},
    "plugins/filter": {"module_utils", "plugin_utils", "filter"},
    "plugins/inventory": {"module_utils", "plugin_utils"},
    "plugins/doc_fragments": set(),
    # ansible-rulebook's (loaded with runpy; it imports the collection by its full name)
    "extensions/eda/plugins/event_source": {"module_utils", "plugin_utils"},
}

# a part of plugin_utils -> the only folders (relative to the repository) whose files may import it,
# besides its own files
ONLY_FOR = {
    "plugin_utils/events": ("extensions/eda/plugins/event_source",),
}

# third-party package -> the only files (relative to plugins/) that may import it
BOUND_SDKS = {
    "digitalocean": ("module_utils/digitalocean/binding.py",),
    "azure": ("module_utils/azure/sdk.py",),
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
            if node.module.endswith(("plugins.module_utils", "plugins.plugin_utils")):
                found.extend((node.lineno, "%s.%s" % (node.module, alias.name)) for alias in node.names)
    return found


def python_files(folder):
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _relative(path):
    return path.relative_to(REPO).as_posix()


def _our_file(name):
    """The file of the collection a dotted name is, or None (a name inside a file, not ours)."""
    if not name.startswith(COLLECTION):
        return None
    base = REPO.joinpath(*name[len(COLLECTION):].split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def our_imports(path):
    """The files of the collection ``path`` imports (``from X import name`` may name a file)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names.extend("%s.%s" % (node.module, alias.name) for alias in node.names)
    return {found for found in map(_our_file, names) if found is not None and found != path}


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
                crossings.append("%s:%d imports %s (module_utils ships with modules: it may import only "
                                 "module_utils)" % (_relative(path), line, name))
            elif len(parts) > 1 and parts[1] not in ALLOWED[layer]:
                crossings.append("%s:%d imports %s (%s may import only %s)" % (
                    _relative(path), line, name, layer, ", ".join(sorted(ALLOWED[layer]))))
    assert crossings == []


def test_every_plugin_folder_is_in_the_map():
    folders = {_relative(path.parent) for path in python_files(PLUGINS) + python_files(REPO / "extensions")}
    unmapped = sorted(folder for folder in folders
                      if not any(folder == home or folder.startswith(home + "/") for home in FOLDERS))
    assert unmapped == [], "folders with Python files outside the layer map (add them to FOLDERS): %s" % unmapped


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_a_folder_imports_only_what_its_row_allows(folder):
    allowed = FOLDERS[folder]
    crossings = []
    for path in python_files(REPO / folder):
        for line, name in imports_of(path):
            if name == OURS[:-1] or not name.startswith(OURS):
                continue
            target = name[len(OURS):].split(".")[0]
            if target not in allowed:
                crossings.append("%s:%d imports %s (%s may import only %s)" % (
                    _relative(path), line, name, folder, ", ".join(sorted(allowed)) or "nothing of ours"))
    assert crossings == []


@pytest.mark.parametrize("part", sorted(ONLY_FOR))
def test_a_part_is_imported_only_by_its_users(part):
    users = ONLY_FOR[part]
    prefix = OURS + part.replace("/", ".")
    crossings = []
    for path in python_files(PLUGINS) + python_files(REPO / "extensions"):
        if any(_relative(path).startswith(folder + "/") for folder in users + ("plugins/" + part,)):
            continue
        crossings.extend("%s:%d imports %s (only %s may import %s)" % (
            _relative(path), line, name, ", ".join(users), part)
            for line, name in imports_of(path) if name == prefix or name.startswith(prefix + "."))
    assert crossings == []


def test_module_utils_holds_only_what_the_modules_ship():
    # the files the modules import, directly or through other module_utils files
    shipped, todo = set(), python_files(PLUGINS / "modules")
    while todo:
        for found in our_imports(todo.pop()):
            if found not in shipped:
                shipped.add(found)
                todo.append(found)
    importers = {}
    for path in python_files(PLUGINS) + python_files(REPO / "extensions"):
        for found in our_imports(path):
            importers.setdefault(found, []).append(_relative(path))
    controller_only = ["%s is imported by no module (%s; module_utils holds only what modules ship, "
                       "controller-only code lives in plugins/plugin_utils)"
                       % (_relative(path), "only by " + ", ".join(sorted(importers[path])) if path in importers
                          else "by nothing")
                       for path in python_files(MODULE_UTILS)
                       if path not in shipped and path.read_text(encoding="utf-8").strip()]
    assert controller_only == []


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


def _documented_rows():
    """first cell -> its row's cells, for every table row of docs/development.md whose first cell
    is one backquoted folder (``| `core/` | ... | `core/`, `waldur/` |``)."""
    rows = {}
    for line in DEVELOPMENT.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`([\w/]+)/`", cells[0]) if line.startswith("|") and len(cells) > 1 else None
        if match:
            rows[match.group(1)] = cells
    return rows


def _folders_named(cell):
    return {name.rstrip("/") for name in re.findall(r"`([\w/]+/)`", cell)}


def test_the_development_guide_shows_this_map():
    rows = _documented_rows()
    # a layer's row names the layers below it (its last cell); each layer imports itself
    layers = {layer: _folders_named(rows[layer][-1]) | {layer} if layer in rows else None for layer in ALLOWED}
    assert layers == ALLOWED
    # a folder's row names what it may import, plugins/ left out
    folders = {folder: _folders_named(rows[folder][-1]) if folder in rows else None for folder in FOLDERS}
    assert folders == FOLDERS
    # a part's row names its only users
    parts = {part: _folders_named(" ".join(rows["plugins/" + part][1:-1])) if "plugins/" + part in rows else None
             for part in ONLY_FOR}
    assert parts == {part: set(users) for part, users in ONLY_FOR.items()}


def test_the_rules_catch_a_crossing(tmp_path):
    # the checker itself: a core file importing the Waldur layer is found
    sample = tmp_path / "sample.py"
    sample.write_text("from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import X\n")
    assert imports_of(sample) == [(1, OURS + "module_utils.waldur.client")]
    sample.write_text("from ansible_collections.waldur.site_agent.plugins.module_utils import waldur\n")
    assert (1, OURS + "module_utils.waldur") in imports_of(sample)
    sample.write_text("from ansible_collections.waldur.site_agent.plugins.plugin_utils import events\n")
    assert (1, OURS + "plugin_utils.events") in imports_of(sample)
    # a module_utils name resolves to its file, and a name inside a file does not
    sample.write_text("from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import "
                      "normalize_uuid\n")
    assert our_imports(sample) == {MODULE_UTILS / "core" / "uuids.py"}
