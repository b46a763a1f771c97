"""Only the controller killed (the OOM killer, ``timeout -s KILL`` in cron): the module it waited
for lives on, in a session of its own. It stays registered with the offering's lock, so the next
pass waits for it and takes over once it has ended; and it writes nothing after its controller
died (issue 22, rule 4)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_lock import (
    process_alive,
    process_start_time,
)
from tests.helpers import run_playbook
from tests.integration.azure_state import all_vms, arm_deletes, arm_writes, dedicated_group, vm_id
from tests.integration.passes import (
    ORDER_PASS, assert_done, hold_calls, kill_tree, process_tree, start_pass, wait_until, write_config)
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

GRACE_SECONDS = 3.0  # how long the next pass is watched at its lock before the held call is let go


class Survivors:
    """The processes of a pass whose controller alone was killed; all of them are killed at the end."""

    def __init__(self):
        self.processes = []

    def kill_controller(self, process):
        """SIGKILL to the ansible-playbook process only, as the OOM killer sends it."""
        self.processes += [(pid, process_start_time(pid)) for pid in process_tree(process.pid)[1:]]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def wait_for_end(self, pid, timeout):
        start_time = dict(self.processes)[pid]
        wait_until(lambda: not process_alive(pid, start_time), timeout,
                   "the module (PID %d) that outlived its controller to end" % pid, interval=0.05)

    def kill_all(self):
        for pid, start_time in self.processes:
            if process_alive(pid, start_time):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


class Watched:
    """A pass started in the background whose output is read as it comes."""

    def __init__(self, config, env):
        self.process = start_pass(ORDER_PASS, config, env=env)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)

    def saw(self, text):
        return any(text in line for line in list(self.lines))

    def finish(self, timeout=300):
        self.process.wait(timeout=timeout)
        self.reader.join(timeout=30)
        return "".join(self.lines)


@pytest.fixture
def survivors():
    left = Survivors()
    yield left
    left.kill_all()


def lock_of(tmp_path: Path, offering_uuid: str) -> Path:
    return tmp_path / "locks" / ("%s.machines.lock" % offering_uuid)


def lock_env(tmp_path: Path) -> dict:
    return {"WALDUR_SITE_AGENT_LOCK_DIR": str(tmp_path / "locks")}


def held_by(lock: Path) -> dict:
    return json.loads(lock.read_text())


def kill_controller_during(simulator, config, env, operation, survivors, lock):
    """Start the order pass, hold its first ``operation`` in the cloud and kill only its controller
    while it waits. Returns ``(holder, module_pid, release, restore)``: the lock's holder, the
    module registered with it (the one waiting on the cloud), the event that lets the held call
    go, and the function that takes the hold away."""
    arrived, release, restore = hold_calls(simulator.app, operation)
    first = start_pass(ORDER_PASS, config, env=env, capture=False)
    try:
        assert arrived.wait(180), "the pass never reached %s" % operation
    except BaseException:
        restore()
        kill_tree(first)
        raise
    holder = held_by(lock)
    survivors.kill_controller(first)
    [worker] = holder.get("workers") or [None]
    assert worker is not None, "the module waiting on %s did not register with the lock: %s" % (operation, holder)
    assert worker["pid"] in [process[0] for process in survivors.processes]
    assert process_alive(worker["pid"], worker["start_time"]), "the module did not outlive its controller"
    return holder, worker["pid"], release, restore


def release_once_the_next_pass_waits(second, lock, holder, simulator, operation, release):
    """Let the held call go once the next pass has stood at the lock for a while. A next pass that
    took the lock over meanwhile (what this file guards against) is given the time to send its
    own ``operation`` first, as a slow cloud answering the survivor late would have it."""
    wait_until(lambda: second.saw("Take the pass lock") or second.process.poll() is not None, 180,
               "the next pass to reach its lock", interval=0.05)
    watched_from = time.monotonic()
    while time.monotonic() - watched_from < GRACE_SECONDS:
        if held_by(lock).get("token") != holder["token"]:  # taken over: the survivor still waits
            wait_until(lambda: simulator.app.calls_of(operation) or second.process.poll() is not None, 180,
                       "the next pass, which took over, to send its own %s" % operation, interval=0.05)
            break
        time.sleep(0.05)
    release.set()


def the_next_pass_after_a_controller_kill(simulator, config, env, operation, survivors, lock):
    """Kill only the controller while ``operation`` is held, start the next pass at once, let the
    held call go once that pass stands at the lock, and let it finish. It must have waited for the
    survivor and said so in one line. Returns ``(holder, module_pid, output)``."""
    holder, module_pid, release, restore = kill_controller_during(simulator, config, env, operation, survivors, lock)
    second = None
    try:
        second = Watched(config, env)  # at once, as the next cron run would
        release_once_the_next_pass_waits(second, lock, holder, simulator, operation, release)
        output = second.finish()
    finally:
        restore()
        if second is not None and second.process.poll() is None:
            kill_tree(second.process)
    assert second.process.returncode == 0, output[-6000:]
    [line] = [line for line in output.splitlines() if "which outlived it" in line and "WARNING" in line]
    assert ("its lock was stale (process %d has ended); waited" % holder["pid"]) in line
    assert line.endswith("seconds for its module (PID %d), which outlived it" % module_pid)
    # the survivor left the lock as its module ended; its process ends a moment later
    survivors.wait_for_end(module_pid, 60)
    assert not lock.exists()  # released by the next pass
    return holder, module_pid, output


def test_a_next_pass_waits_for_the_create_a_killed_controller_left_and_adopts_its_droplet(
        tmp_path, waldur_sim, do_sim, survivors):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)

    the_next_pass_after_a_controller_kill(do, config, lock_env(tmp_path), "droplets.create", survivors,
                                          lock_of(tmp_path, W.DO_OFFERING_UUID))

    [droplet] = do.app.droplets()  # one droplet for the one order, made by the survivor's create
    assert len(do.app.calls_of("droplets.create")) == 1
    assert_done(waldur, W.DO_ORDER_UUID)
    assert waldur.app.resource(W.DO_RESOURCE_UUID)["backend_id"] == str(droplet["id"])


def test_a_next_pass_waits_for_the_vm_put_a_killed_controller_left_and_adopts_the_machine(
        tmp_path, waldur_sim, azure_sim, survivors):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)

    the_next_pass_after_a_controller_kill(azure, config, lock_env(tmp_path), "vms.put", survivors,
                                          lock_of(tmp_path, W.AZURE_OFFERING_UUID))

    machine = vm_id(dedicated_group(W.AZURE_RESOURCE_UUID, "azure-vm-1"), "azure-vm-1")
    assert all_vms(azure) == [machine]  # made by the survivor's PUT, adopted by the next pass
    assert len(azure.app.calls_of("vms.put")) == 1 and arm_deletes(azure) == []
    assert_done(waldur, W.AZURE_ORDER_UUID)
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == machine


def test_a_module_outliving_its_controller_writes_nothing_more(tmp_path, waldur_sim, azure_sim, survivors):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    env, lock = lock_env(tmp_path), lock_of(tmp_path, W.AZURE_OFFERING_UUID)
    holder, module_pid, release, restore = kill_controller_during(
        azure, config, env, "nics.put", survivors, lock)
    try:
        since = len(azure.app.calls)
        release.set()  # the cloud answers the NIC the survivor was waiting for
        survivors.wait_for_end(module_pid, 120)
    finally:
        restore()
    # the NIC it was waiting for is made; the machine, its next write, is not
    assert arm_writes(azure, since) == ["nics.put"] and all_vms(azure) == []
    assert held_by(lock)["workers"] == []  # it left the lock as it ended
    assert waldur.app.order(W.AZURE_ORDER_UUID)["state"] == "executing"

    run = run_playbook(ORDER_PASS, env=dict(env, WALDUR_SITE_AGENT_CONFIG=str(config)))

    assert run.rc == 0, run.output[-6000:]
    assert "its lock was stale (process %d has ended)" % holder["pid"] in run.output
    machine = vm_id(dedicated_group(W.AZURE_RESOURCE_UUID, "azure-vm-1"), "azure-vm-1")
    assert all_vms(azure) == [machine]
    assert_done(waldur, W.AZURE_ORDER_UUID)
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == machine
