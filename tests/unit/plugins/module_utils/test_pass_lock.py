"""The pass lock: taken, busy, waited for, released only by its holder, taken over when stale."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core import pass_lock
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_lock import (
    PassLock,
    default_directory,
    process_alive,
    process_start_time,
)


class Clock:
    """Fake time: sleeping moves the clock."""

    def __init__(self):
        self.now = 100.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def ended_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_free_lock_is_taken_and_names_this_process(tmp_path):
    lock = PassLock(str(tmp_path / "locks"), "d01.machines", os.getpid(), label="order_process pass of DO")

    outcome = lock.acquire()

    assert outcome["acquired"] is True and outcome["took_over"] is None
    written = json.loads((tmp_path / "locks" / "d01.machines.lock").read_text())
    assert written == outcome["holder"]
    assert (written["pid"], written["start_time"], written["host"], written["label"]) == (
        os.getpid(), process_start_time(os.getpid()), socket.gethostname(), "order_process pass of DO")
    assert oct((tmp_path / "locks").stat().st_mode & 0o777) == "0o700"
    assert oct((tmp_path / "locks" / "d01.machines.lock").stat().st_mode & 0o777) == "0o600"


def test_a_lock_held_by_a_live_pass_is_busy_and_waited_for_up_to_the_bound(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        PassLock(str(tmp_path), "k", holder.pid, label="first").acquire()
        clock = Clock()
        second = PassLock(str(tmp_path), "k", os.getpid(), label="second", clock=clock, sleep=clock.sleep)

        outcome = second.acquire(wait=2.5)

        assert outcome["acquired"] is False and outcome["holder"]["pid"] == holder.pid
        assert outcome["holder"]["label"] == "first"
        assert clock.slept == [1.0, 1.0, 0.5] and outcome["waited"] == 2.5
    finally:
        holder.kill()
        holder.wait()


def test_a_waiting_pass_takes_the_lock_once_its_holder_releases_it(tmp_path):
    first = PassLock(str(tmp_path), "k", os.getppid())
    taken = first.acquire()
    clock = Clock()
    second = PassLock(str(tmp_path), "k", os.getpid(), clock=clock, sleep=lambda seconds: (
        clock.sleep(seconds), first.release(taken["holder"]["token"])))

    outcome = second.acquire(wait=30)

    assert outcome["acquired"] is True and outcome["waited"] == 1.0


@pytest.mark.parametrize("how", ["ended", "pid reused", "unreadable"])
def test_a_stale_lock_is_taken_over_saying_whose_it_was(tmp_path, how):
    path = tmp_path / "k.lock"
    if how == "unreadable":
        path.write_text("{not json")
    else:
        pid, start_time = (ended_pid(), None) if how == "ended" else (os.getppid(), -1)
        path.write_text(json.dumps({"pid": pid, "start_time": start_time, "host": socket.gethostname(),
                                    "token": "old", "label": "killed pass", "since": "2026-01-01T00:00:00Z"}))

    outcome = PassLock(str(tmp_path), "k", os.getpid()).acquire()

    assert outcome["acquired"] is True
    if how == "unreadable":
        assert outcome["stale"] == "the lock file could not be read"
    else:
        assert outcome["took_over"]["label"] == "killed pass"
        assert outcome["stale"] == "process %d has ended" % outcome["took_over"]["pid"]
    assert json.loads(path.read_text())["pid"] == os.getpid()


def test_a_lock_of_another_host_is_respected(tmp_path):
    (tmp_path / "k.lock").write_text(json.dumps({"pid": ended_pid(), "host": "elsewhere", "token": "t"}))
    assert PassLock(str(tmp_path), "k", os.getpid()).acquire()["acquired"] is False


def test_the_same_controller_takes_its_own_lock_again(tmp_path):
    first = PassLock(str(tmp_path), "k", os.getpid()).acquire()
    again = PassLock(str(tmp_path), "k", os.getpid()).acquire()
    assert again["acquired"] is True and again["holder"]["token"] != first["holder"]["token"]


def test_only_the_holder_releases_the_lock(tmp_path):
    lock = PassLock(str(tmp_path), "k", os.getpid())
    token = lock.acquire()["holder"]["token"]
    assert lock.release("someone-else") is False and (tmp_path / "k.lock").exists()
    assert lock.release(token) is True and not (tmp_path / "k.lock").exists()
    assert lock.release(token) is False


@pytest.mark.parametrize("key", ["", "../etc/passwd", "a/b", ".hidden", "x" * 201])
def test_a_key_that_is_not_a_plain_file_name_is_refused(tmp_path, key):
    with pytest.raises(ValueError, match="key must be"):
        PassLock(str(tmp_path), key, os.getpid())


def test_processes_are_told_apart_by_their_start_time():
    assert process_alive(os.getpid(), process_start_time(os.getpid())) is True
    assert process_alive(os.getpid(), -1) is False
    assert process_alive(ended_pid()) is False
    assert process_alive("not a pid") is False


def test_a_zombie_counts_as_ended():
    """A module whose controller was killed is reparented; an init that never reaps leaves it a
    zombie, which runs nothing and must not keep the next pass waiting."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start_time = process_start_time(child.pid)
    deadline = time.monotonic() + 30
    while pass_lock._proc_stat(child.pid)[0] != "Z":  # exited, not yet reaped
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        os.kill(child.pid, 0)  # the PID still exists
        assert process_alive(child.pid, start_time) is False
        assert process_alive(child.pid) is False
    finally:
        child.wait()


def test_the_default_directory(monkeypatch):
    assert default_directory({"WALDUR_SITE_AGENT_LOCK_DIR": "/srv/locks"}) == "/srv/locks"
    monkeypatch.setenv("HOME", "/home/agent")
    assert default_directory({}) == "/home/agent/.cache/waldur-site-agent/locks"
    assert pass_lock.POLL_SECONDS == 1.0


# ---- the workers of a pass: a module outliving its controller keeps the lock -----------------

def sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_lock_whose_controller_ended_stays_held_while_a_registered_worker_runs(tmp_path):
    controller, worker = sleeper(), sleeper()
    try:
        token = PassLock(str(tmp_path), "k", controller.pid, label="killed pass").acquire()["holder"]["token"]
        registered = PassLock(str(tmp_path), "k", worker.pid).register_worker(
            token, worker.pid, process_start_time(worker.pid))
        assert registered["pid"] == controller.pid
        assert json.loads((tmp_path / "k.lock").read_text())["workers"] == [
            {"pid": worker.pid, "start_time": process_start_time(worker.pid)}]
        controller.kill()
        controller.wait()
        clock = Clock()
        waiting = PassLock(str(tmp_path), "k", os.getpid(), clock=clock, sleep=clock.sleep)

        busy = waiting.acquire(wait=2)

        assert busy["acquired"] is False and busy["holder"]["token"] == token
        assert busy["survivors"] == [{"pid": worker.pid, "start_time": process_start_time(worker.pid)}]
        assert pass_lock.describe_workers(busy["survivors"]) == "its module (PID %d)" % worker.pid

        def worker_ends(seconds):
            clock.sleep(seconds)
            worker.kill()
            worker.wait()

        taken = PassLock(str(tmp_path), "k", os.getpid(), clock=clock, sleep=worker_ends).acquire(wait=30)

        assert taken["acquired"] is True and taken["waited"] == 1.0
        assert taken["stale"] == "process %d has ended" % controller.pid
        assert [survivor["pid"] for survivor in taken["survivors"]] == [worker.pid]
    finally:
        for process in (controller, worker):
            process.kill()
            process.wait()


def test_workers_register_only_with_a_live_pass_of_their_token_and_leave_when_done(tmp_path):
    lock = PassLock(str(tmp_path), "k", os.getpid())
    token = lock.acquire()["holder"]["token"]
    me = (os.getpid(), process_start_time(os.getpid()))
    assert lock.register_worker("another-pass", *me) is None
    dead = ended_pid()
    assert lock.register_worker(token, dead, 12345)["pid"] == os.getpid()
    assert lock.register_worker(token, *me)["workers"] == [{"pid": me[0], "start_time": me[1]}]  # the dead one pruned
    assert lock.unregister_worker(token, os.getpid()) is True
    assert json.loads((tmp_path / "k.lock").read_text())["workers"] == []
    assert lock.unregister_worker(token, os.getpid()) is False
    # a worker that ended without leaving does not keep the lock of an ended controller
    controller = ended_pid()
    (tmp_path / "k.lock").write_text(json.dumps({"pid": controller, "host": socket.gethostname(), "token": "t",
                                                 "workers": [{"pid": dead, "start_time": None}]}))
    assert lock.acquire()["stale"] == "process %d has ended" % controller
    # the controller ended: nothing registers any more
    (tmp_path / "k.lock").write_text(json.dumps({"pid": dead, "host": socket.gethostname(), "token": "t"}))
    assert lock.register_worker("t", *me) is None
