"""The pass_lock action in playbooks: held and released around a pass, busy, stale, skipped (exit 4)."""

from __future__ import annotations

import json

from tests.helpers import run_playbook


def play(tmp_path, *tasks):
    return [{"name": "Lock", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "tasks": list(tasks)}]


def held(tmp_path, **extra):
    return {"name": "Take", "waldur.site_agent.pass_lock": dict(
        {"key": "d01.machines", "directory": str(tmp_path), "label": "order_process pass of DO"}, **extra),
        "register": "lock"}


def save(tmp_path, name="lock"):
    copy = {"content": "{{ %s | to_json }}" % name, "dest": str(tmp_path / ("%s.json" % name)), "mode": "0600"}
    return {"name": "Save", "ansible.builtin.copy": copy, "check_mode": False}


def test_a_pass_holds_the_lock_until_it_releases_it_in_check_mode_too(tmp_path):
    run = run_playbook(play(tmp_path, held(tmp_path), save(tmp_path),
                            {"name": "Check", "ansible.builtin.stat": {"path": str(tmp_path / "d01.machines.lock")},
                             "register": "during"},
                            {"name": "Release", "waldur.site_agent.pass_lock": {
                                "state": "released", "key": "d01.machines", "directory": str(tmp_path),
                                "token": "{{ lock.token }}"}, "register": "released"},
                            save(tmp_path, "during"), save(tmp_path, "released")), check=True)
    assert run.rc == 0, run.output
    lock = json.loads((tmp_path / "lock.json").read_text())
    assert lock["acquired"] is True and lock["holder"]["label"] == "order_process pass of DO"
    assert json.loads((tmp_path / "during.json").read_text())["stat"]["exists"] is True
    assert json.loads((tmp_path / "released.json").read_text())["released"] is True
    assert not (tmp_path / "d01.machines.lock").exists()


def test_a_busy_lock_is_reported_not_failed(tmp_path):
    (tmp_path / "d01.machines.lock").write_text(json.dumps(
        {"pid": 1, "start_time": None, "host": "another-host", "token": "t", "label": "report pass",
         "since": "2026-01-01T00:00:00Z"}))
    run = run_playbook(play(tmp_path, held(tmp_path), save(tmp_path)))
    assert run.rc == 0, run.output
    lock = json.loads((tmp_path / "lock.json").read_text())
    assert lock["acquired"] is False and "token" not in lock
    assert lock["msg"] == ("the report pass (PID 1 on another-host since 2026-01-01T00:00:00Z) holds %s; waited 0.0 "
                           "seconds for it" % (tmp_path / "d01.machines.lock"))


def test_skipped_offerings_end_the_run_with_exit_status_4(tmp_path):
    run = run_playbook(play(tmp_path, {"name": "Skipped", "waldur.site_agent.pass_lock": {
        "state": "skipped", "skipped": ["DO (offering d01): the order_process pass holds it"]}},
        {"name": "Never", "ansible.builtin.debug": {"msg": "not reached"}}))
    assert run.rc == 4
    assert "nothing failed, but work was left for a later run: DO (offering d01): the order_process pass holds it" \
        in run.output
    assert "not reached" not in run.output
    nothing = run_playbook(play(tmp_path, {"name": "Nothing skipped", "waldur.site_agent.pass_lock": {
        "state": "skipped", "skipped": []}}))
    assert nothing.rc == 0


def test_bad_arguments_name_what_is_wrong(tmp_path):
    run = run_playbook(play(tmp_path, held(tmp_path, key="../x")))
    assert run.rc == 2 and "key: key must be" in run.output
    run = run_playbook(play(tmp_path, {"name": "Release", "waldur.site_agent.pass_lock": {
        "state": "released", "key": "k", "directory": str(tmp_path)}}))
    assert run.rc == 2 and "token is required to release a lock" in run.output
