# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The collection's modules, run by their action plugins inside the task's worker process.

Every module of a pass runs on the controller (``connection: local``) under the controller's own
Python. Started the usual way, each one costs about 0.9 s before its first call: a new Python, the
AnsiballZ zip unpacked and ansible's ``module_utils`` compiled again from it (nothing caches
bytecode inside the zip), then requests or the SDKs imported. A pass runs ten to fifteen modules
per offering, so that was most of an idle pass and of an order's wait for its event. The action
plugin runs in the worker ansible-playbook forks for each task anyway, where the module's code and
everything it imports were imported once, in the controller, before the fork (:func:`preload`).

Only public API is used: the action plugin validates the task's arguments against the module's own
argument spec (``ActionBase.validate_argument_spec``), reads check and diff mode from the task, and
calls the module's ``main`` with :class:`ControllerModule` in place of ``AnsibleModule`` (every
module's ``main(build=AnsibleModule)``); what ``AnsibleModule`` does to a result (the values of
``no_log`` options removed, ``invocation``, warnings) is done here with ansible's public
``module_utils``. Nothing of ansible-core is overridden or patched.

A module still runs the usual way (``ActionBase._execute_module``) where it would not have run
under this Python: another connection, another ``ansible_python_interpreter``, become, ``async``,
or ``waldur_site_agent_in_process: false`` (a host or play variable) for an operator who wants the
old way back. Run that way it says nothing while it runs (no progress lines).

What this changes for a pass killed from outside: the module is the worker process itself, which
the pass guard (``module_utils/core/pass_guard.py``) registers with the lock exactly as it
registered the module's own process before; a controller killed alone still leaves it running,
and the next pass waits for it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import importlib
import os
import sys
import traceback

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.waldur.site_agent.plugins.module_utils.core.module_end import end_module
from ansible_collections.waldur.site_agent.plugins.module_utils.core.no_log import no_log_values

SWITCH = "waldur_site_agent_in_process"
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local", "ansible.legacy.local")
# What AnsibleModule takes that validation does not: it only says what the module supports.
NOT_VALIDATION = ("supports_check_mode",)


def is_this_python(path):
    """Whether a module started on interpreter ``path`` would run this very Python with these very
    packages: the same path, or the same binary where neither path is a venv's (``/usr/bin/python3``
    and ``/usr/bin/python3.11`` in an execution environment). A venv's python is a link to the system's
    binary but imports the venv's packages, so a link alone proves nothing."""
    path = to_text(path or "").strip()
    if not path or path == sys.executable:
        return bool(path)
    try:
        if not os.path.samefile(path, sys.executable):
            return False
    except OSError:
        return False
    return not any(os.path.exists(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(candidate))), "pyvenv.cfg"))
                   for candidate in (path, sys.executable))


def module_import_name(action_plugin_name):
    """``ansible_collections.<ns>.<coll>.plugins.modules.<name>`` for an action plugin of the same
    name, or None for one that is not a collection's."""
    package, _sep, name = action_plugin_name.rpartition(".plugins.action.")
    if not package.startswith("ansible_collections.") or not name:
        return None
    return "%s.plugins.modules.%s" % (package, name)


def preload(action_plugin_name):
    """Import, in the controller, the module of this action plugin and all it imports.

    ansible-playbook's strategy loads a task's action plugin in the controller before it forks the
    task's worker, so this runs once per pass and module, and every worker forked after it finds
    the module, requests, the SDKs and the collection's ``module_utils`` imported (about 0.1 s a
    task for requests alone, about 0.3 s for azure-identity). A module that cannot be imported here
    fails in its worker, saying why."""
    name = module_import_name(action_plugin_name)
    if name is None or name in sys.modules:
        return
    try:
        importlib.import_module(name)
    except Exception:  # pylint: disable=broad-except
        sys.modules.pop(name, None)


class ModuleExit(BaseException):
    """How ``exit_json``/``fail_json`` end the module's run: not an Exception, so that no ``except
    Exception`` of the module's code takes it for an error."""

    def __init__(self, result):
        super(ModuleExit, self).__init__("module exit")
        self.result = result


class ControllerModule(object):
    """What ``AnsibleModule`` gives the collection's modules, for a run in the task's worker:
    ``params`` (validated), ``check_mode``, ``_diff``, ``no_log_values``, ``warn``, ``exit_json``
    and ``fail_json``."""

    def __init__(self, params, argument_spec, check_mode=False, diff=False):
        self.params = params
        self.check_mode = bool(check_mode)
        self._diff = bool(diff)
        self.no_log_values = no_log_values(argument_spec, params)
        self.warnings = []

    def warn(self, warning):
        self.warnings.append(to_text(warning))

    def _result(self, result):
        result.setdefault("invocation", {"module_args": self.params})
        if self.warnings:
            result["warnings"] = list(result.get("warnings") or []) + self.warnings
        return remove_values(result, self.no_log_values)

    def exit_json(self, **result):
        result.setdefault("changed", False)
        raise ModuleExit(self._result(result))

    def fail_json(self, msg, **result):
        result.update(failed=True, msg=msg)
        raise ModuleExit(self._result(result))


def runs_here(action, task_vars):
    """Whether the action plugin ``action`` may run its module in this worker: on the controller
    itself, not async, no become, under this very Python, and not switched off."""
    task_vars = task_vars or {}
    if action._task.async_val or action._play_context.become:
        return False
    if getattr(action._connection, "transport", None) not in LOCAL_CONNECTIONS:
        return False
    if not boolean(task_vars.get(SWITCH, True), strict=False):
        return False
    return interpreter_is_this_python(action, task_vars)


def interpreter_is_this_python(action, task_vars):
    """Whether the module's interpreter is this Python, decided as ansible-core decides it:
    ``ansible_python_interpreter``, else the ``interpreter_python`` setting, else what discovery
    found before; when nothing says, this Python (the one ``auto`` finds first on the controller is
    ``ansible_playbook_python`` wherever the collection's passes run, and discovery would run a
    process per task to find out)."""
    interpreter = task_vars.get("ansible_python_interpreter")
    if interpreter is None:
        interpreter = C.config.get_config_value("INTERPRETER_PYTHON", variables=task_vars)
        if to_text(interpreter or "").startswith("auto"):
            facts = task_vars.get("ansible_facts") or {}
            interpreter = facts.get("discovered_interpreter_python") if isinstance(facts, dict) else None
            if not interpreter:
                return True
    try:
        interpreter = action._templar.template(interpreter)
    except Exception:  # pylint: disable=broad-except
        return False
    return is_this_python(interpreter)


def task_environment(action):
    """The task's ``environment`` (play, block and task), templated, as ansible-core passes it."""
    environment = {}
    entries = action._task.environment
    for entry in entries if isinstance(entries, list) else [entries]:
        if not entry:
            continue
        entry = action._templar.template(entry)
        if not isinstance(entry, dict):
            raise AnsibleActionFail("environment must be a dictionary, received %s (%s)" % (entry, type(entry)))
        environment.update((to_text(key), to_text(value)) for key, value in entry.items())
    return environment


@contextlib.contextmanager
def _environment(variables):
    saved = dict(os.environ)
    os.environ.update(variables)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_here(action, import_name, environment):
    """Run module ``import_name``'s ``main`` in this process for the action plugin ``action``: its
    arguments validated against its own spec, with the task's ``environment`` (plus ``environment``
    here), what it ended with as a task result."""
    try:
        module = importlib.import_module(import_name)
    except Exception as exc:  # pylint: disable=broad-except
        return {"failed": True, "msg": "the module %s could not be imported: %s" % (import_name, exc),
                "exception": traceback.format_exc()}

    def build(**options):
        spec = options.get("argument_spec") or {}
        _validation, params = action.validate_argument_spec(
            **dict((key, value) for key, value in options.items() if key not in NOT_VALIDATION))
        return ControllerModule(params, spec, check_mode=action._task.check_mode, diff=action._task.diff)

    with _environment(dict(task_environment(action), **environment)):
        try:
            module.main(build=build)
        except ModuleExit as exc:
            return exc.result
        except AnsibleActionFail as exc:  # the arguments did not validate: said as AnsibleModule says it
            return {"failed": True, "msg": to_text(getattr(exc, "message", None) or exc)}
        except Exception as exc:  # pylint: disable=broad-except
            return {"failed": True, "msg": "MODULE FAILURE: %s" % to_text(exc), "exception": traceback.format_exc()}
        finally:
            end_module()
    return {"failed": True, "msg": "MODULE FAILURE: the module %s ended without a result" % import_name}
