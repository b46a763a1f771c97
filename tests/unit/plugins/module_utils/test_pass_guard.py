"""A module that outlives its pass never writes: the guard registers the module with the pass's
lock, refuses every write (Waldur, DigitalOcean, ARM) once the pass's controller has ended, and the
batch engine then starts nothing more and ends the unfinished items ``retry``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import AzureClients
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.policies import CallCounter
from ansible_collections.waldur.site_agent.plugins.module_utils.core import pass_guard
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import run_batch
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_guard import PassEnded, PassGuard
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_lock import PassLock, process_start_time
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import DigitalOceanClient
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurClient
from tests.simulators.digitalocean import presets as D
from tests.simulators.waldur import presets as W


class Pass:
    """A pass's lock held for a live stand-in controller, and this process's guard following it."""

    def __init__(self, directory, monkeypatch):
        self.controller = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        self.lock = PassLock(str(directory), "d01.machines", self.controller.pid)
        self.token = self.lock.acquire()["holder"]["token"]
        self.guard = PassGuard(self.lock.path, self.token)
        monkeypatch.setattr(pass_guard, "_GUARD", [self.guard])

    def kill_controller(self):
        self.controller.kill()
        self.controller.wait()

    def workers(self):
        return json.loads(open(self.lock.path).read()).get("workers")

    @property
    def ended_msg(self):
        return ("the pass that started this run (PID %d) has ended; nothing more is written; the next pass "
                "finishes it" % self.controller.pid)


@pytest.fixture
def a_pass(tmp_path, monkeypatch):
    running = Pass(tmp_path, monkeypatch)
    yield running
    running.kill_controller()
    running.guard.unregister()


def test_without_a_pass_nothing_is_checked(monkeypatch):
    monkeypatch.setattr(pass_guard, "_GUARD", [])
    guard = pass_guard.current({})
    assert guard.active is False
    guard.check()
    assert guard.alive() is True and guard.registered is False


def test_the_first_write_registers_the_module_and_a_write_after_the_controller_ended_is_refused(a_pass):
    assert a_pass.guard.alive() is True and a_pass.workers() is None  # reads register nothing

    a_pass.guard.check()

    assert a_pass.workers() == [{"pid": os.getpid(), "start_time": process_start_time(os.getpid())}]
    a_pass.guard.check()  # registered once
    assert len(a_pass.workers()) == 1
    a_pass.kill_controller()
    with pytest.raises(PassEnded) as refused:
        a_pass.guard.check()
    assert str(refused.value) == a_pass.ended_msg
    assert pass_guard.ended() == a_pass.ended_msg
    a_pass.guard.unregister()  # what the module does at its exit
    assert a_pass.workers() == []


def test_a_module_whose_pass_lost_the_lock_writes_nothing(a_pass):
    a_pass.lock.release(a_pass.token)
    a_pass.lock.acquire()  # another pass (this process standing in) holds it now

    with pytest.raises(PassEnded, match=r"^the pass that started this run has ended \(its lock .*d01.machines.lock "
                                        r"is no longer its own\); nothing more is written; the next pass finishes it$"):
        a_pass.guard.check()
    assert a_pass.workers() is None


def test_the_batch_engine_starts_nothing_more_once_the_pass_ended(a_pass):
    started = []

    def worker(item):
        started.append(item)
        pass_guard.check_write()
        if item == 1:
            a_pass.kill_controller()  # the controller is killed while this item writes
            pass_guard.check_write()
        return {"item": item}

    results = run_batch(range(4), worker, max_workers=1)

    assert started == [0, 1]
    assert results[0] == {"item": 0}
    for result in results[1:]:
        assert (result["failed"], result["retry"], result["msg"]) == (True, True, a_pass.ended_msg)
        assert "exception" not in result


def test_an_item_that_failed_for_a_refused_write_keeps_its_machine_and_is_a_retry(a_pass):
    def worker(item):  # a worker that turns every exception into its item's failure (azure_vm_chain's)
        try:
            pass_guard.check_write()
            a_pass.kill_controller()
            pass_guard.check_write()
        except PassEnded as exc:
            return {"failed": True, "changed": True, "msg": "PassEnded: %s" % exc, "backend_id": "vm-1"}
        return {}

    [result] = run_batch(["vm-1"], worker)

    assert result == {"failed": True, "changed": True, "retry": True, "msg": a_pass.ended_msg,
                      "backend_id": "vm-1"}


def test_every_client_refuses_its_writes_once_the_pass_ended(a_pass, waldur_sim, do_sim):
    a_pass.kill_controller()
    waldur = WaldurClient(waldur_sim.url + "/api/", W.PROVIDER_TOKEN)
    do = DigitalOceanClient(D.DO_TOKEN, api_url=do_sim.url, timeout=5)
    waldur_since, do_since = len(waldur_sim.app.calls), len(do_sim.app.calls)

    assert waldur.get("marketplace-orders/", expect=list)  # reads go on
    with pytest.raises(PassEnded):
        waldur.post("marketplace-orders/%s/approve_by_provider/" % W.DO_ORDER_UUID)
    with pytest.raises(PassEnded):
        do.send("POST", "droplets", {"name": "web-1", "region": "ams3", "size": "s-1vcpu-1gb", "image": "x"})
    assert waldur_sim.app.write_calls(waldur_since) == [] and do_sim.app.write_calls(do_since) == []

    class Request:
        def __init__(self, method):
            self.http_request = type("HttpRequest", (), {"method": method})()

    counter = CallCounter()
    counter.on_request(Request("GET"))
    with pytest.raises(PassEnded):
        counter.on_request(Request("PUT"))
    assert (counter.reads, counter.writes) == (1, 0)

    def refused():
        raise PassEnded(a_pass.ended_msg)

    clients = AzureClients("s", "t", "c", "secret")
    with pytest.raises(PassEnded):  # never turned into an AzureError, so nothing is rolled back
        clients.call("creating virtual machine vm-1", refused)


def test_a_check_costs_well_under_a_millisecond(a_pass):
    a_pass.guard.check()  # registration: the guard flock, one read and one rename
    started = time.perf_counter()
    for _round in range(1000):
        a_pass.guard.check()
    assert (time.perf_counter() - started) / 1000 < 0.001
