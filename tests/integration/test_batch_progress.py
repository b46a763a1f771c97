"""A long batch says how it is getting on while it runs (plugins/plugin_utils/batch_action.py reading
the progress the batch engine writes): with the default callback and with the JSON callback.
The thresholds are lowered through the test-only environment variables (10 s / 30 s by default)."""

from __future__ import annotations

import json
import os
import pty
import signal
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_lock import process_alive
from tests.helpers import REPO, ansible_env, run_playbook
from tests.integration.passes import ORDER_PASS, assert_done, hold_calls, process_tree, wait_until, write_config
from tests.simulators.digitalocean import presets as P
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

QUICK = {"WALDUR_SITE_AGENT_PROGRESS_AFTER": "1", "WALDUR_SITE_AGENT_PROGRESS_EVERY": "1"}
ITEMS = 12


def creates(count):
    return [{"resource_uuid": "%032x" % (0xabc000 + number), "name": "slow-%02d" % number, "region": "ams3",
             "image": "ubuntu-22-04-x64", "size": "s-1vcpu-1gb"} for number in range(count)]


def slow_batch(do_sim, env, verbosity=0):
    """ITEMS creates, 4 at a time, each create answered after a second: a batch of about 4 s."""
    do_sim.app.latency_by_operation["droplets.create"] = 1.0
    play = [{"name": "DigitalOcean", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "tasks": [{"name": "Create slowly", "waldur.site_agent.do_droplet": {
                 "token": P.DO_TOKEN, "api_url": do_sim.url, "droplets": creates(ITEMS), "max_workers": 4,
                 "packed": True}}]}]
    return run_playbook(play, env=dict(QUICK, **env), verbosity=verbosity)


def test_default_callback_prints_progress_lines_before_the_result_and_items_one_line_each_at_v(do_sim):
    run = slow_batch(do_sim, {}, verbosity=1)
    assert run.rc == 0, run.output
    lines = run.stdout.splitlines()
    first = [number for number, line in enumerate(lines) if "Create slowly: %d items, deadline 900 s" % ITEMS in line]
    progress = [number for number, line in enumerate(lines) if line.startswith("Create slowly: ")
                and "/%d done, " % ITEMS in line]
    result = [number for number, line in enumerate(lines) if line.startswith("changed: [localhost]")]
    # -v: one line per item (resource, action, message), never the packed results as escaped JSON
    created = [line for line in lines if line.startswith("slow-") and ": created: created droplet " in line]
    assert len(created) == ITEMS, run.stdout
    assert "results_packed" not in run.stdout and '\\"resource_uuid\\"' not in run.stdout
    assert first and progress and result, run.stdout
    # printed while the batch ran: before the task's result, the first line first
    assert first[0] < progress[0] < result[0]
    # what it waits for: the items in flight, by name
    assert any("waiting for" in lines[number] and "slow-" in lines[number] for number in progress), run.stdout


def test_json_callback_prints_progress_records(do_sim):
    run = slow_batch(do_sim, {"ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"})
    assert run.rc == 0, run.output
    records = [json.loads(line) for line in run.stdout.splitlines()]  # stdout stays JSON lines only
    running = [record for record in records if record.get("status") == "running"]
    assert running, run.stdout
    assert running[0]["event"].startswith("%d items, deadline 900 s" % ITEMS)
    assert running[0]["task"] == "Create slowly" and running[0]["items"] == ITEMS
    counted = [record for record in running if "/%d done" % ITEMS in record["event"]]
    assert counted and all(record["level"] == "info" and record["logger"] for record in counted)
    task = [record for record in records if record.get("task") == "Create slowly" and record.get("status") == "changed"
            and "items" in record]
    assert task, run.stdout
    started = datetime.fromisoformat(counted[0]["timestamp"])
    assert started < datetime.fromisoformat(task[0]["timestamp"])


class PassUnderTerminal:
    """The order pass run as ansible-runner (and so ansible-rulebook and AWX) runs it: on a pty,
    with SIGHUP ignored, so the pass outlives the terminal it writes to."""

    def __init__(self, env):
        binary = str(Path(sys.executable).parent / "ansible-playbook")
        environment = ansible_env(env)
        self.pid, self.master = pty.fork()
        if self.pid == 0:  # the child: becomes ansible-playbook
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            os.chdir(REPO)
            os.execve(binary, [binary, str(ORDER_PASS)], environment)
        self.output = []
        self.code = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # the terminal was closed
                return
            if not data:
                return
            self.output.append(data.decode(errors="replace"))

    def text(self):
        return "".join(self.output)

    def close_terminal(self):
        os.close(self.master)

    def wait(self, seconds):
        """The exit code, or None while it still runs after ``seconds``."""
        deadline = time.monotonic() + seconds
        while self.code is None:
            ended, status = os.waitpid(self.pid, os.WNOHANG)
            if ended:
                self.code = os.waitstatus_to_exitcode(status)
            elif time.monotonic() >= deadline:
                break
            else:
                time.sleep(0.1)
        return self.code

    def kill(self):
        for pid in reversed(process_tree(self.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.wait(30)


def pass_losing_its_terminal_mid_batch(tmp_path, waldur_sim, do_sim, env):
    """The order pass on a pty closed while its batch prints progress lines; the batch goes on
    for a few more lines' time. Returns the pass (ended) and its lock file's holder, if any."""
    config = write_config(tmp_path, waldur_sim, do_sim)
    locks = tmp_path / "locks"
    env = dict(QUICK, WALDUR_SITE_AGENT_CONFIG=str(config), WALDUR_SITE_AGENT_LOCK_DIR=str(locks), **env)
    arrived, release, restore = hold_calls(do_sim.app, "droplets.create")  # the batch runs until released
    run = PassUnderTerminal(env)
    try:
        assert arrived.wait(120), run.text()
        deadline = time.monotonic() + 30
        while "1 items, deadline 900 s" not in run.text():  # the watcher prints while the batch runs
            assert time.monotonic() < deadline, run.text()
            time.sleep(0.1)
        run.close_terminal()
        time.sleep(2.5)
        release.set()
        assert run.wait(20) is not None, "the pass hung after its terminal went away:\n%s" % run.text()
    finally:
        restore()
        if run.wait(0) is None:
            run.kill()
    return run, [json.loads(lock.read_text()) for lock in locks.glob("*.lock")]


def test_a_pass_whose_terminal_goes_away_mid_batch_ends_and_leaves_its_lock_to_the_next(tmp_path, waldur_sim, do_sim):
    """A progress line is written by the controller's results thread; on a dead terminal that
    write ended the thread and the controller waited for the batch's result for ever, holding
    the pass lock (an event-run pass orphaned by a stopped ansible-rulebook). With the default
    callback the pass now ends as ansible-playbook ends on a dead stdout: not 0 (its output is
    lost), its lock naming a controller that is gone, which the next pass takes over."""
    run, [holder] = pass_losing_its_terminal_mid_batch(tmp_path, waldur_sim, do_sim, {})
    assert run.code != 0
    assert holder["pid"] == run.pid and not process_alive(holder["pid"], holder.get("start_time"))
    # its workers end with it; one may still be exiting the moment the controller is reaped
    wait_until(lambda: not [worker for worker in holder.get("workers") or []
                            if process_alive(worker["pid"], worker.get("start_time"))], 30,
               "the workers %r to end with their controller" % holder.get("workers"), interval=0.1)


def test_with_the_json_callback_a_pass_whose_terminal_goes_away_finishes_its_work(tmp_path, waldur_sim, do_sim):
    """The JSON callback (as ansible-rulebook runs the passes) drops the lines nobody can read and
    the pass carries on: the order is done, the lock released, the exit code 0."""
    run, holders = pass_losing_its_terminal_mid_batch(tmp_path, waldur_sim, do_sim,
                                                      {"ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"})
    assert run.code == 0 and holders == []
    assert_done(waldur_sim, W.DO_ORDER_UUID)
