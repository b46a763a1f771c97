"""A module run by its action plugin in the task's worker (plugins/plugin_utils/controller_module.py):
its arguments validated against its own spec (check and diff mode from the task), the task's
environment while it runs and nothing of it after, its result as AnsibleModule would give it (no_log
values removed, invocation, warnings), a failure or an exception as a failed result, and what it
registered for its end run when it ends."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import pytest
from ansible.plugins.action import ActionBase

from ansible_collections.waldur.site_agent.plugins.module_utils.core import no_log
from ansible_collections.waldur.site_agent.plugins.plugin_utils import controller_module

MODULE = '''
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.core.module_end import at_module_end


def main(build=AnsibleModule):
    module = build(argument_spec=dict(word=dict(type="str", required=True),
                                      mode=dict(type="str", default="ok"),
                                      secret=dict(type="str", no_log=True, fallback=(lambda: "", [])),
                                      marker=dict(type="path")), supports_check_mode=True)
    params = module.params
    if params["marker"]:
        at_module_end(lambda: open(params["marker"], "w").write("ran"))
    if params["mode"] == "raise":
        raise RuntimeError("boom " + params["word"])
    if params["mode"] == "fail":
        module.fail_json(msg="failed " + params["word"] + " with " + str(params["secret"]))
    if params["mode"] == "silent":
        return
    module.warn("a warning")
    module.exit_json(changed=not module.check_mode, word=params["word"], diff_mode=module._diff,
                     probe=os.environ.get("CONTROLLER_MODULE_PROBE"), echoed=params["secret"])
'''


class Action:
    """What run_here uses of an action plugin; validation is ActionBase's own."""
    validate_argument_spec = ActionBase.validate_argument_spec

    def __init__(self, args, check_mode=False, diff=False, environment=None):
        self._task = SimpleNamespace(args=args, check_mode=check_mode, diff=diff, environment=environment,
                                     async_val=0)
        self._templar = SimpleNamespace(template=lambda value: value)
        self._load_name = "echo"


@pytest.fixture
def echo(tmp_path, monkeypatch):
    package = tmp_path / "controller_module_fixture"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "echo.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "controller_module_fixture.echo"
    sys.modules.pop("controller_module_fixture.echo", None)
    sys.modules.pop("controller_module_fixture", None)


def run(name, args, extra_environment=None, **task):
    return controller_module.run_here(Action(args, **task), name, extra_environment or {})


def test_the_module_gets_its_arguments_and_environment_and_leaves_nothing_behind(echo, tmp_path):
    marker = tmp_path / "marker"
    result = run(echo, {"word": "hello", "marker": str(marker)}, {"CONTROLLER_MODULE_PROBE": "set for the run"})
    assert (result["word"], result["probe"], result["changed"]) == ("hello", "set for the run", True)
    assert result["invocation"]["module_args"]["mode"] == "ok"  # defaults, as AnsibleModule reports them
    assert result["warnings"] == ["a warning"]
    assert marker.read_text() == "ran"  # what the module registered for its end ran when it ended
    assert "CONTROLLER_MODULE_PROBE" not in os.environ


def test_the_task_s_environment_reaches_the_module(echo):
    result = run(echo, {"word": "hello"}, {}, environment=[{"CONTROLLER_MODULE_PROBE": "from the play"}, None])
    assert result["probe"] == "from the play"


def test_check_and_diff_mode_reach_the_module(echo):
    result = run(echo, {"word": "hello"}, check_mode=True, diff=True)
    assert result["changed"] is False and result["diff_mode"] is True


def test_no_log_values_never_leave_the_run(echo):
    result = run(echo, {"word": "hello", "secret": "s3cr3t-value"})
    assert "s3cr3t-value" not in repr(result)
    failed = run(echo, {"word": "hello", "secret": "s3cr3t-value", "mode": "fail"})
    assert failed["failed"] is True and "s3cr3t-value" not in repr(failed) and "failed hello" in failed["msg"]


def test_an_exception_is_a_failed_result_with_its_traceback(echo, tmp_path):
    marker = tmp_path / "marker"
    result = run(echo, {"word": "hello", "mode": "raise", "marker": str(marker)})
    assert result["failed"] is True and "boom hello" in result["msg"]
    assert "Traceback" in result["exception"] and "RuntimeError" in result["exception"]
    assert marker.read_text() == "ran"


def test_bad_arguments_are_refused_as_ansible_module_refuses_them(echo):
    result = run(echo, {"mode": "ok"})
    assert result["failed"] is True and "missing required arguments: word" in result["msg"]
    result = run(echo, {"word": "hello", "colour": "red"})
    assert result["failed"] is True and "Unsupported parameters for (echo) module: colour" in result["msg"]


def test_a_module_that_ends_without_a_result_fails(echo):
    result = run(echo, {"word": "hello", "mode": "silent"})
    assert result["failed"] is True and "ended without a result" in result["msg"]


def test_a_module_that_cannot_be_imported_fails_saying_why():
    result = controller_module.run_here(Action({}), "controller_module_fixture.no_such_module", {})
    assert result["failed"] is True and "could not be imported" in result["msg"]


def test_no_log_values_are_found_in_suboptions_too():
    spec = {"token": {"no_log": True}, "items": {"type": "list", "options": {"key": {"no_log": True}, "name": {}}}}
    params = {"token": "t0ken", "items": [{"key": "k3y", "name": "visible"}, {"key": None, "name": "x"}]}
    assert no_log.no_log_values(spec, params) == {"t0ken", "k3y"}


def test_this_python_is_its_own_path_or_its_binary_outside_any_venv(tmp_path, monkeypatch):
    assert controller_module.is_this_python(sys.executable)
    assert not controller_module.is_this_python("")
    assert not controller_module.is_this_python(str(tmp_path / "missing" / "python3"))
    system = tmp_path / "usr" / "bin" / "python3.11"
    system.parent.mkdir(parents=True)
    system.write_text("")
    alias = system.parent / "python3"
    alias.symlink_to(system)
    monkeypatch.setattr(sys, "executable", str(system))
    assert controller_module.is_this_python(str(alias))  # /usr/bin/python3 -> python3.11: one Python
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = %s\n" % system.parent)
    (venv / "bin" / "python").symlink_to(system)
    assert not controller_module.is_this_python(str(venv / "bin" / "python"))  # the venv's packages


def test_preload_imports_the_module_and_what_it_imports(monkeypatch):
    """The controller imports a module and its dependencies once, for every worker forked after it."""
    module = "ansible_collections.waldur.site_agent.plugins.modules.do_account_info"
    dependency = "ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client"
    monkeypatch.delitem(sys.modules, dependency, raising=False)
    monkeypatch.delitem(sys.modules, module, raising=False)
    controller_module.preload("ansible_collections.waldur.site_agent.plugins.action.do_account_info")
    assert dependency in sys.modules and module in sys.modules


def test_preload_leaves_a_module_that_cannot_be_imported_to_its_worker():
    module = "ansible_collections.waldur.site_agent.plugins.modules.no_such_module"
    controller_module.preload("ansible_collections.waldur.site_agent.plugins.action.no_such_module")  # no error
    controller_module.preload("some_other_package.action_plugin")  # not a collection's action plugin
    assert module not in sys.modules
