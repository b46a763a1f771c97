"""An offering's ``request_timeout``: a read that Waldur, DigitalOcean or ARM does not answer in
time is given up on after that many seconds and sent again (as a lost connection is), never
taken as an answer; the real order pass against the simulators, whose ``timeout`` fault holds
one answer back for longer than the timeout."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.integration.passes import ORDER_PASS, assert_done, order_machine, run_pass, write_config
from tests.simulators.common import STALL_SECONDS
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

TIMEOUT = 2


def with_request_timeout(path, seconds=TIMEOUT):
    config = yaml.safe_load(path.read_text())
    config["offerings"][0]["request_timeout"] = seconds
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def assert_asked_twice(server, operation, since):
    """The stalled call and the one sent after the client gave up on it."""
    calls = server.app.calls_of(operation, since)
    assert len(calls) >= 2, (operation, calls)
    # sent again once the timeout passed, well before the held answer would have come
    assert TIMEOUT - 0.2 <= calls[1]["time"] - calls[0]["time"] < STALL_SECONDS, (operation, calls[:2])
    return calls


def test_unanswered_reads_of_waldur_and_digitalocean_are_given_up_on_and_asked_again(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = with_request_timeout(write_config(tmp_path, waldur, do))
    order_uuid, resource_uuid = order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "slow-answers",
                                              W.DO_PLAN_QUOTAS)
    waldur_since, do_since = len(waldur.app.calls), len(do.app.calls)
    waldur.app.add_fault("orders.list", kind="timeout")
    do.app.add_fault("droplets.list", kind="timeout")

    started = time.monotonic()
    run_pass(ORDER_PASS, config)
    elapsed = time.monotonic() - started
    waldur.app.exchanges.clear()  # the stalled answer is not Waldur's contract to check

    assert_asked_twice(waldur, "orders.list", waldur_since)
    assert_asked_twice(do, "droplets.list", do_since)
    assert_done(waldur, order_uuid)
    assert len(do.app.droplets()) == 1
    # each stalled read cost the timeout, not the simulator's whole stall (nor 30 s)
    assert elapsed < 60


def test_an_unanswered_arm_read_is_given_up_on_and_asked_again(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    config = with_request_timeout(write_config(tmp_path, waldur, azure=azure))
    order_uuid, dummy = order_machine(waldur, W.AZURE_OFFERING_UUID, W.AZURE_PLAN_UUID, "slow-arm",
                                      W.AZURE_PLAN_QUOTAS, ssh_public_key=W.SSH_KEYS[1]["public_key"])
    since = len(azure.app.calls)
    azure.app.add_fault("vm_sizes.list", kind="timeout")

    run_pass(ORDER_PASS, config)

    assert_asked_twice(azure, "vm_sizes.list", since)
    assert_done(waldur, order_uuid)


def test_a_request_timeout_that_is_not_a_positive_number_is_refused_naming_the_key(tmp_path, waldur_sim, do_sim):
    config = with_request_timeout(write_config(tmp_path, waldur_sim, do_sim), seconds=0)
    since = len(do_sim.app.calls)

    run = run_pass(ORDER_PASS, config, rc=2)

    assert "offerings[0].request_timeout: expected a number of seconds greater than 0, got 0" in run.output
    assert do_sim.app.calls[since:] == []
