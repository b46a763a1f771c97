"""The collection's modules run in the task's worker process (plugins/plugin_utils/controller_module.py):
no AnsiballZ payload is built or started for them, their results are the ones the usual way gives,
and the usual way comes back where the module would not have run under the controller's Python,
or where the operator asks for it."""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.helpers import run_playbook
from tests.simulators.waldur import presets as P

pytestmark = pytest.mark.integration

WALDUR = "group/waldur.site_agent.waldur"
MODULES = ("waldur_offering_info", "waldur_orders")  # one through the plain action, one through the batch action


def play(sim, out, play_vars=None):
    """Two of our modules, a failure and a check-mode run, each result saved for the test."""
    def save(name):
        return {"name": "Save %s" % name, "check_mode": False, "ansible.builtin.copy": {
            "content": "{{ %s | to_json }}" % name, "dest": str(out / ("%s.json" % name)), "mode": "0600"}}

    return [{
        "name": "Our modules, run where the play says",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": play_vars or {},
        "module_defaults": {WALDUR: {"api_url": sim.url + "/api/", "api_token": P.PROVIDER_TOKEN}},
        "tasks": [
            {"name": "Read the offering", "waldur.site_agent.waldur_offering_info": {"offering_uuid": P.DO_OFFERING_UUID},
             "register": "offering"},
            save("offering"),
            {"name": "List the orders", "waldur.site_agent.waldur_orders": {
                "offering_uuid": P.DO_OFFERING_UUID, "state": "claimed"}, "check_mode": True, "register": "listing"},
            save("listing"),
            {"name": "Read an offering with a wrong token", "waldur.site_agent.waldur_offering_info": {
                "offering_uuid": P.DO_OFFERING_UUID, "api_token": "wrong-token"}, "register": "refused",
             "ignore_errors": True},
            save("refused"),
        ],
    }]


def payloads(remote_tmp):
    """The AnsiballZ payloads of our modules ansible-core left behind (ANSIBLE_KEEP_REMOTE_FILES);
    ansible.builtin.copy, which saves the results, still runs the usual way."""
    return sorted(name for _root, _dirs, files in os.walk(remote_tmp) for name in files
                  if name.startswith("AnsiballZ_waldur_"))


def comparable(result):
    """A registered result without what differs between two runs of the same call."""
    return dict((key, value) for key, value in result.items() if key not in ("invocation",))


def run(tmp_path, sim, name, play_vars=None):
    out = tmp_path / name
    remote_tmp = tmp_path / ("%s-remote" % name)
    out.mkdir()
    result = run_playbook(play(sim, out, play_vars), env={
        "ANSIBLE_KEEP_REMOTE_FILES": "1", "ANSIBLE_REMOTE_TMP": str(remote_tmp)})
    saved = dict((path.stem, json.loads(path.read_text())) for path in out.glob("*.json"))
    return result, saved, payloads(remote_tmp)


def test_our_modules_run_in_the_worker_with_the_results_of_the_usual_way(tmp_path, waldur_sim):
    here_run, here, here_payloads = run(tmp_path, waldur_sim, "here")
    usual_run, usual, usual_payloads = run(tmp_path, waldur_sim, "usual", {"waldur_site_agent_in_process": False})
    assert here_run.rc == 0, here_run.stdout[-3000:]
    assert usual_run.rc == 0, usual_run.stdout[-3000:]

    assert here_payloads == [], "a module of ours was started the usual way: %s" % here_payloads
    assert usual_payloads == sorted("AnsiballZ_%s.py" % module for module in MODULES for _run in
                                    range(2 if module == "waldur_offering_info" else 1))

    assert here["offering"]["offering"]["uuid"] == P.DO_OFFERING_UUID
    assert here["listing"]["orders"], "the default preset has a pending order to claim"
    assert waldur_sim.app.calls_of("orders.approve_by_provider") == []  # check mode reached the module
    assert here["refused"]["failed"] is True and "401" in here["refused"]["msg"]
    for name in ("offering", "listing", "refused"):
        assert comparable(here[name]) == comparable(usual[name]), name


def test_another_python_runs_the_module_the_usual_way(tmp_path, waldur_sim):
    """An ``ansible_python_interpreter`` that is not the controller's own Python (here a link to it
    under another name, as a second venv would be) is left to ansible-core: the module would
    import that Python's packages, not this one's."""
    other = tmp_path / "bin" / "python3"
    other.parent.mkdir()
    other.symlink_to(sys.executable)  # outside the venv: the venv's packages are not on its path
    result, _saved, started = run(tmp_path, waldur_sim, "other", {"ansible_python_interpreter": str(other)})
    if result.rc == 0:  # that Python has the packages as well (a system Python with python3-requests)
        assert started == ["AnsiballZ_waldur_offering_info.py"] * 2 + ["AnsiballZ_waldur_orders.py"]
    else:  # the module ran under that Python, which lacks what this venv has
        assert started == ["AnsiballZ_waldur_offering_info.py"]
        assert "Failed to import the required Python library (requests) on" in result.stdout
        assert str(other) in result.stdout
