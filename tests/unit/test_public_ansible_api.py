# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The collection uses only ansible-core's public API: no private name is imported, no private
method of an ansible-core class is overridden, and no private attribute of ansible-core's objects
is read, but for the documented surface of an action plugin (``self._task``,
``self._execute_module`` ...; docs.ansible.com "Developing plugins") and a few fallbacks for a
release that has no public way yet, each named with its reason. A new use fails here, naming the
file, the line and the name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from ansible.executor.task_result import TaskResult
from ansible.module_utils import basic
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.arg_spec import ValidationResult
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.plugins.action import ActionBase
from ansible.plugins.callback import CallbackBase

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "plugins", REPO / "extensions" / "eda" / "plugins"]

# What an action plugin is documented to use of ActionBase; a module reads diff mode as ``_diff``.
DOCUMENTED = {
    "_task": "the task (self._task.args, check_mode, diff, environment, async_val)",
    "_connection": "the connection, to know whether the task runs on the controller",
    "_play_context": "the play context (become)",
    "_templar": "templating the task's environment and interpreter as ansible-core does",
    "_loader": "the data loader (reading a vaulted file)",
    "_execute_module": "running a module the usual way",
    "_supports_check_mode": "what the action plugin supports",
    "_supports_async": "what the action plugin supports",
    "_display": "the callback's Display",
    "_diff": "AnsibleModule's diff mode, the attribute every module reads it from",
}
# (file relative to the repository, name) -> why it is read although private: a release of the
# supported range offers no public way (ansible-core 2.18's TaskResult has no public properties).
FALLBACKS = {
    ("plugins/plugin_utils/result_records.py", "_result"): "ansible-core 2.18's TaskResult has no .result (2.19 on)",
    ("plugins/plugin_utils/result_records.py", "_host"): "ansible-core 2.18's TaskResult has no .host (2.19 on)",
    ("plugins/plugin_utils/result_records.py", "_task_fields"): "ansible-core 2.18's TaskResult has no .task_fields",
    ("plugins/callback/waldur_json.py", "_uuid"):
        "no release has a public identity of a task: ansible-core's own callbacks key a task's start by it",
}


def private_names_of_ansible():
    """Private attribute names of the ansible-core objects the plugins touch."""
    names = set()
    for thing in (ActionBase, CallbackBase, AnsibleModule, TaskResult, Task, DataLoader, basic):
        names.update(name for name in dir(thing) if name.startswith("_") and not name.startswith("__"))
    names.update(name for name in vars(ValidationResult("")).keys() if name.startswith("_"))
    names.update(("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE", "_BuiltModule", "_host", "_result", "_task_fields", "_uuid"))
    return names


def sources():
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def test_no_private_name_of_ansible_core_is_imported():
    found = []
    for path, tree in sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ansible":
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                if private or any(part.startswith("_") for part in node.module.split(".")):
                    found.append("%s:%d from %s import %s" % (path, node.lineno, node.module,
                                                              ", ".join(alias.name for alias in node.names)))
            elif isinstance(node, ast.Import):
                found.extend("%s:%d import %s" % (path, node.lineno, alias.name) for alias in node.names
                             if alias.name.split(".")[0] == "ansible"
                             and any(part.startswith("_") for part in alias.name.split(".")))
    assert found == []


def defined_here(tree):
    """Private names this file defines itself: methods, class attributes and ``self.<name> =``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self":
                    names.add(target.attr)
    return names


def test_no_private_method_of_ansible_core_is_overridden():
    bases = {"ActionBase": ActionBase, "CallbackBase": CallbackBase, "ActionModule": ActionBase,
             "BatchAction": ActionBase, "AnsibleModule": AnsibleModule}
    found = []
    for path, tree in sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            ours = [bases[base.id] for base in node.bases if isinstance(base, ast.Name) and base.id in bases]
            for item in ast.walk(node):
                if isinstance(item, ast.FunctionDef) and item in node.body:
                    name = item.name
                elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store) \
                        and isinstance(item.value, ast.Name) and item.value.id == "self":
                    name = item.attr  # an attribute of ansible-core's set over is overridden too
                else:
                    continue
                if name.startswith("_") and not name.startswith("__") and name not in DOCUMENTED \
                        and any(hasattr(base, name) for base in ours):
                    found.append("%s:%d %s.%s overrides ansible-core's private %s" % (
                        path, item.lineno, node.name, name, name))
    assert found == []


def test_no_private_attribute_of_ansible_core_is_read():
    private = private_names_of_ansible()
    found = []
    for path, tree in sources():
        ours = defined_here(tree)
        for node in ast.walk(tree):
            name = node.attr if isinstance(node, ast.Attribute) else None
            if name is None or name not in private or name in DOCUMENTED or (path, name) in FALLBACKS:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and name in ours:
                continue  # the plugin's own attribute (the override test covers one of ansible-core's)
            found.append("%s:%d %s" % (path, node.lineno, ast.unparse(node)))
    assert found == []


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_each_documented_name_is_still_in_use(name):
    """An entry no plugin uses any more goes: the list says what the plugins rely on."""
    used = any((isinstance(node, ast.Attribute) and node.attr == name) or (isinstance(node, ast.Name) and node.id == name)
               for _path, tree in sources() for node in ast.walk(tree))
    assert used, "%s is no longer used: remove it from DOCUMENTED" % name


@pytest.mark.parametrize("where", sorted(FALLBACKS), ids=lambda where: "%s:%s" % where)
def test_each_fallback_is_still_needed(where):
    path, name = where
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    assert any(isinstance(node, ast.Attribute) and node.attr == name for node in ast.walk(tree)), \
        "%s no longer reads %s: remove it from FALLBACKS" % where
