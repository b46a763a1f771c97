# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Run the collection's own modules inside the task's worker process instead of a new Python.

Every module of a pass runs on the controller (``connection: local``) under the controller's
own Python. Run the usual way, each one costs about 0.9 s before its first call: a new Python,
the AnsiballZ zip unpacked and ansible's ``module_utils`` compiled again from it (nothing
caches bytecode inside the zip), then requests or the SDKs imported. A pass runs ten to fifteen
modules per offering, so that cost was most of an idle pass and of an order's wait for its
event. In the worker, which ansible-playbook forks for each task anyway, the module imports
what the controller already compiled, and the run costs a fraction of that.

The mixin keeps ansible-core's own path for everything else: ``_execute_module`` builds the
arguments (check mode, no_log, diff, verbosity), checks the module's interpreter line and
parses the result (warnings, deprecations, no_log, internal keys) exactly as it does for a
module run the usual way. Only the one command that would start the module is replaced: the
module's ``main`` runs through ``runpy`` (as AnsiballZ does) with the same arguments, the
task's environment, and its standard output and error captured; exit handlers it registers
(the pass guard's unregistering, AnsibleModule's temporary directory) run when it ends, as they
would when its process exits.

A module still runs the usual way when it would not have run under this Python: another
connection, another ``ansible_python_interpreter``, become, ``async``, or
``waldur_site_agent_in_process: false`` (a host or play variable) for an operator who wants the
old way back.

What this changes for a pass killed from outside: the module is the worker process itself,
which the pass guard (``module_utils/core/pass_guard.py``) registers with the lock exactly as
it registered the module's own process before; a controller killed alone still leaves it
running, and the next pass waits for it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import atexit
import contextlib
import importlib
import io
import json
import os
import runpy
import sys
import traceback

from ansible import constants as C
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.module_utils.parsing.convert_bool import boolean

try:  # ansible-core 2.19 and later: arguments carry a serialization profile
    from ansible.module_utils.common.json import Direction, get_module_encoder
except ImportError:  # ansible-core 2.18
    Direction = get_module_encoder = None
try:  # what _configure_module returns from 2.19 on; a release without it builds the payload as usual
    from ansible.executor.module_common import _BuiltModule as BuiltModule
except ImportError:
    BuiltModule = None

COLLECTION = "waldur.site_agent."
SWITCH = "waldur_site_agent_in_process"
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local", "ansible.legacy.local")
# The serialization profile ansible-core gives a module that declares no METADATA (ours declare none).
LEGACY_PROFILE = "legacy"


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


def preload(action_plugin_name):
    """Import, in the controller, everything the module of this action plugin imports.

    ansible-playbook's strategy loads a task's action plugin class in the controller before it
    forks the task's worker, so this runs once per pass and module, and every worker forked after
    it finds requests, the SDKs and the collection's ``module_utils`` already imported (about 0.1 s
    a task for requests alone, about 0.3 s for azure-identity). The module itself is dropped again:
    ``runpy`` runs it afresh in the worker, and warns about a module already imported by its own
    name. A module that cannot be imported here fails in its worker, with ansible's usual message.
    """
    package, _sep, name = action_plugin_name.rpartition(".plugins.action.")
    if not package.startswith("ansible_collections.") or not name:
        return
    module_name = "%s.plugins.modules.%s" % (package, name)
    if module_name in sys.modules:
        return
    try:
        importlib.import_module(module_name)
    except Exception:  # pylint: disable=broad-except
        pass
    finally:
        sys.modules.pop(module_name, None)


def encode_arguments(module_args, profile):
    """The module's arguments as AnsiballZ would hand them over (``ANSIBLE_MODULE_ARGS``)."""
    wrapped = {"ANSIBLE_MODULE_ARGS": module_args}
    if get_module_encoder is not None and profile:
        return to_bytes(json.dumps(wrapped, cls=get_module_encoder(profile, Direction.CONTROLLER_TO_MODULE)))
    return to_bytes(json.dumps(wrapped, cls=AnsibleJSONEncoder, vault_to_text=True))


@contextlib.contextmanager
def _exit_handlers_collected(handlers):
    """``atexit.register`` collects into ``handlers`` while the module runs: the worker never
    runs exit handlers (it leaves with ``os._exit``), and the controller's own ones it inherited
    (ansible's temporary directory) must not run here."""
    register = atexit.register

    def collect(function, *args, **kwargs):
        handlers.append((function, args, kwargs))
        return function

    atexit.register = collect
    try:
        yield
    finally:
        atexit.register = register


@contextlib.contextmanager
def _environment(variables):
    saved = dict(os.environ)
    os.environ.update(dict((to_text(key), to_text(value)) for key, value in variables.items()))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_module(import_name, arguments, profile, environment):
    """Run module ``import_name`` here as AnsiballZ runs it; what running its process would have
    returned (``rc``, ``stdout``, ``stderr`` and their lines)."""
    from ansible.module_utils import basic  # pylint: disable=import-outside-toplevel

    stdout, stderr, handlers = io.StringIO(), io.StringIO(), []
    saved_args = basic._ANSIBLE_ARGS  # pylint: disable=protected-access
    saved_profile = getattr(basic, "_ANSIBLE_PROFILE", None)
    basic._ANSIBLE_ARGS = arguments  # pylint: disable=protected-access
    if hasattr(basic, "_ANSIBLE_PROFILE"):
        basic._ANSIBLE_PROFILE = profile  # pylint: disable=protected-access
    rc = 0
    try:
        with _environment(environment), _exit_handlers_collected(handlers), \
                contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                runpy.run_module(import_name, init_globals={"_module_fqn": import_name}, run_name="__main__",
                                 alter_sys=False)
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:  # pylint: disable=broad-except
                rc = 1
                traceback.print_exc()  # to the captured stderr: ansible reports it as MODULE FAILURE
            finally:
                for function, args, kwargs in reversed(handlers):
                    try:
                        function(*args, **kwargs)
                    except Exception:  # pylint: disable=broad-except
                        pass
    finally:
        basic._ANSIBLE_ARGS = saved_args  # pylint: disable=protected-access
        if hasattr(basic, "_ANSIBLE_PROFILE"):
            basic._ANSIBLE_PROFILE = saved_profile  # pylint: disable=protected-access
    out, err = stdout.getvalue(), stderr.getvalue()
    return {"rc": rc, "stdout": out, "stdout_lines": out.splitlines(), "stderr": err,
            "stderr_lines": err.splitlines()}


class InProcessModule(object):
    """Mixin for an ActionBase subclass whose module is one of the collection's own."""

    _in_process = None  # while _execute_module runs: the module's arguments and what is known of it

    def _in_process_wanted(self, module_name, task_vars, wrap_async):
        if wrap_async or self._task.async_val or self._play_context.become:
            return False
        if not self._is_local() or not self._module_fqcn(module_name).startswith(COLLECTION):
            return False
        return boolean((task_vars or {}).get(SWITCH, True), strict=False)

    def _is_local(self):
        """Whether the task runs on the controller itself (``connection: local``)."""
        return getattr(self._connection, "transport", None) in LOCAL_CONNECTIONS

    def _module_fqcn(self, module_name):
        # resolved_action: a task may name the module by its short name under a play's ``collections``
        return to_text(module_name or getattr(self._task, "resolved_action", None) or self._task.action)

    def _execute_module(self, module_name=None, module_args=None, tmp=None, task_vars=None, persist_files=False,
                        delete_remote_tmp=None, wrap_async=False, **kwargs):
        if not self._in_process_wanted(module_name, task_vars, wrap_async):
            return super(InProcessModule, self)._execute_module(
                module_name=module_name, module_args=module_args, task_vars=task_vars, wrap_async=wrap_async, **kwargs)
        # ansible-core adds its own arguments (_ansible_check_mode, ...) to this dict in place
        arguments = dict(self._task.args if module_args is None else module_args)
        self._in_process = {"args": arguments, "armed": False, "name": self._module_fqcn(module_name)}
        try:
            return super(InProcessModule, self)._execute_module(
                module_name=module_name, module_args=arguments, task_vars=task_vars, wrap_async=False, **kwargs)
        finally:
            self._in_process = None

    def _is_pipelining_enabled(self, module_style, wrap_async=False):
        # Nothing is copied to a temporary directory for a module that runs here.
        if self._in_process is not None and (self._in_process["armed"] or "profile" not in self._in_process):
            return True
        return super(InProcessModule, self)._is_pipelining_enabled(module_style, wrap_async)

    def _configure_module(self, module_name, module_args, task_vars=None):
        state = self._in_process
        if state is None or "profile" in state:
            return super(InProcessModule, self)._configure_module(module_name, module_args, task_vars=task_vars)
        if (BuiltModule is not None or get_module_encoder is None) and self._interpreter_is_this_python(task_vars):
            # Building the AnsiballZ zip (a walk of every module_util it imports, about 0.25 s per
            # module and run) is for a module that starts a Python of its own: skipped here.
            state.update(profile=LEGACY_PROFILE if get_module_encoder is not None else None, armed=True)
            return self._built_here(module_name)
        configured = super(InProcessModule, self)._configure_module(module_name, module_args, task_vars=task_vars)
        if len(configured) == 2:  # 2.19 and later: (module_bits, module_path)
            bits = configured[0]
            style, shebang, profile = bits.module_style, bits.shebang, bits.serialization_profile
        else:  # 2.18: (module_style, shebang, module_data, module_path)
            style, shebang, profile = configured[0], configured[1], None
        # discovered or templated otherwise: only where the module would have run under this Python
        state.update(profile=profile, armed=style == "new" and is_this_python(to_text(shebang or "")[2:]))
        return configured

    def _interpreter_is_this_python(self, task_vars):
        """Whether the module's interpreter is this Python, decided as ansible-core decides it:
        ``ansible_python_interpreter``, else the ``interpreter_python`` setting, else what
        discovery found before (discovery itself is left to ansible-core's own path)."""
        task_vars = task_vars or {}
        interpreter = task_vars.get("ansible_python_interpreter")
        if interpreter is None:
            interpreter = C.config.get_config_value("INTERPRETER_PYTHON", variables=task_vars)
            if to_text(interpreter or "").startswith("auto"):
                facts = task_vars.get("ansible_facts") or {}
                interpreter = facts.get("discovered_interpreter_python") if isinstance(facts, dict) else None
        if not interpreter:
            return False
        try:
            interpreter = self._templar.template(interpreter)
        except Exception:  # pylint: disable=broad-except
            return False
        return is_this_python(interpreter)

    def _built_here(self, module_name):
        """What ``_configure_module`` returns, for a module that runs here: no payload."""
        path = self._shared_loader_obj.module_loader.find_plugin(module_name, mod_type=".py") or module_name
        shebang = "#!" + sys.executable
        if BuiltModule is None:  # 2.18
            return "new", shebang, b"", path
        return BuiltModule(b_module_data=b"", module_style="new", shebang=shebang,
                           serialization_profile=LEGACY_PROFILE), path

    def _low_level_execute_command(self, cmd, *args, **kwargs):
        state = self._in_process
        if state is None or not state["armed"]:
            return super(InProcessModule, self)._low_level_execute_command(cmd, *args, **kwargs)
        state["armed"] = False  # the module's own command, once: anything after it runs as usual
        environment = {}
        self._compute_environment_string(environment)
        name = state["name"]
        import_name = "ansible_collections.%s.plugins.modules.%s" % tuple(name.rsplit(".", 1))
        return run_module(import_name, encode_arguments(state["args"], state["profile"]), state["profile"],
                          environment)
