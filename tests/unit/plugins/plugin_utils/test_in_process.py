"""A module run in the worker (plugins/plugin_utils/in_process.py): it gets its arguments (check mode
included) and the task's environment, its result, failure or traceback come back as its process's
output would, its exit handlers run when it ends, and nothing of the run stays behind in the worker
(arguments, environment, ``atexit.register``)."""

from __future__ import annotations

import atexit
import json
import os
import sys

import pytest
from ansible.module_utils import basic

from ansible_collections.waldur.site_agent.plugins.plugin_utils import in_process

MODULE = '''
import atexit
import os
import sys

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(word=dict(type="str", required=True),
                                              mode=dict(type="str", default="ok"),
                                              marker=dict(type="path")), supports_check_mode=True)
    params = module.params
    if params["marker"]:
        atexit.register(lambda: open(params["marker"], "w").write("ran"))
    if params["mode"] == "raise":
        raise RuntimeError("boom " + params["word"])
    if params["mode"] == "fail":
        module.fail_json(msg="failed " + params["word"])
    sys.stderr.write("a line on stderr\\n")
    module.exit_json(changed=not module.check_mode, word=params["word"], probe=os.environ.get("IN_PROCESS_PROBE"))


if __name__ == "__main__":
    main()
'''


@pytest.fixture
def echo(tmp_path, monkeypatch):
    package = tmp_path / "in_process_fixture"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "echo.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "in_process_fixture.echo"


def run(name, environment=None, **args):
    profile = in_process.LEGACY_PROFILE if in_process.get_module_encoder is not None else None
    return in_process.run_module(name, in_process.encode_arguments(args, profile), profile, environment or {})


def result_of(outcome):
    return json.loads(outcome["stdout"])


def test_the_module_gets_its_arguments_and_environment_and_leaves_nothing_behind(echo, tmp_path):
    register = atexit.register
    marker = tmp_path / "marker"
    outcome = run(echo, {"IN_PROCESS_PROBE": "set for the task"}, word="hello", marker=str(marker))
    assert outcome["rc"] == 0, outcome
    result = result_of(outcome)
    assert (result["word"], result["probe"], result["changed"]) == ("hello", "set for the task", True)
    assert "a line on stderr" in outcome["stderr"]
    assert marker.read_text() == "ran"  # the module's exit handler ran when it ended
    assert "IN_PROCESS_PROBE" not in os.environ
    assert atexit.register is register
    assert basic._ANSIBLE_ARGS is None  # pylint: disable=protected-access


def test_check_mode_reaches_the_module(echo):
    assert result_of(run(echo, word="hello", _ansible_check_mode=True))["changed"] is False


def test_a_failure_is_the_module_s_own_result_with_its_exit_status(echo):
    outcome = run(echo, word="hello", mode="fail")
    assert outcome["rc"] == 1
    assert result_of(outcome)["failed"] is True and result_of(outcome)["msg"] == "failed hello"


def test_an_exception_is_a_traceback_on_stderr_and_no_result(echo, tmp_path):
    marker = tmp_path / "marker"
    outcome = run(echo, word="hello", mode="raise", marker=str(marker))
    assert outcome["rc"] == 1 and outcome["stdout"] == ""
    assert "RuntimeError: boom hello" in outcome["stderr"] and "Traceback" in outcome["stderr"]
    assert marker.read_text() == "ran"


def test_bad_arguments_are_the_module_s_own_failure(echo):
    outcome = run(echo, mode="ok")
    assert outcome["rc"] == 1
    assert "missing required arguments: word" in result_of(outcome)["msg"]


def test_this_python_is_its_own_path_or_its_binary_outside_any_venv(tmp_path, monkeypatch):
    import sys

    assert in_process.is_this_python(sys.executable)
    assert not in_process.is_this_python("")
    assert not in_process.is_this_python(str(tmp_path / "missing" / "python3"))
    system = tmp_path / "usr" / "bin" / "python3.11"
    system.parent.mkdir(parents=True)
    system.write_text("")
    alias = system.parent / "python3"
    alias.symlink_to(system)
    monkeypatch.setattr(sys, "executable", str(system))
    assert in_process.is_this_python(str(alias))  # /usr/bin/python3 -> python3.11: one Python, one site-packages
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = %s\n" % system.parent)
    (venv / "bin" / "python").symlink_to(system)
    assert not in_process.is_this_python(str(venv / "bin" / "python"))  # the same binary, the venv's packages


def test_preload_imports_what_the_module_imports_but_not_the_module(monkeypatch):
    """The controller imports a module's dependencies once, for every worker forked after it; the
    module itself stays out of ``sys.modules``, where ``runpy`` would warn about it in the worker."""
    module = "ansible_collections.waldur.site_agent.plugins.modules.do_account_info"
    dependency = "ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client"
    monkeypatch.delitem(sys.modules, dependency, raising=False)
    monkeypatch.delitem(sys.modules, module, raising=False)
    in_process.preload("ansible_collections.waldur.site_agent.plugins.action.do_account_info")
    assert dependency in sys.modules
    assert module not in sys.modules


def test_preload_leaves_a_module_that_cannot_be_imported_to_its_worker(monkeypatch):
    module = "ansible_collections.waldur.site_agent.plugins.modules.no_such_module"
    in_process.preload("ansible_collections.waldur.site_agent.plugins.action.no_such_module")  # no error here
    in_process.preload("some_other_package.action_plugin")  # not a collection's action plugin: nothing to do
    assert module not in sys.modules
