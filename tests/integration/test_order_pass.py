"""The order pass as a tester trying to break it: passes started together, a pass killed or a
Waldur refusing at the worst moment, orders Waldur errs itself, locks held and left behind, a
cloud that rejects the token, a wrong offering, and what an operator reads at the end.

The real order_process playbook against the Waldur, DigitalOcean and Azure simulators; the
simulators' state is counted before and after."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers import lock_directory, run_playbook
from tests.integration.passes import (
    ORDER_PASS, assert_done, assert_erred, call_waldur, hold_calls, kill_tree, log_lines, order_machine,
    start_pass, terminate, update_limits, waldur_writes, write_config)
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

KEY_1 = W.SSH_KEYS[0]
BIG = {"cpu": 2, "ram": 4096, "disk": 81920}
LINES_TASK = "Name each order that did not end done"
ACT = "Carry out the orders on DigitalOcean"
SETTLE = "Settle the orders in Waldur"


# ---- helpers ------------------------------------------------------------------------------------

def order_droplet(waldur, name: str, **attributes) -> tuple[str, str]:
    return order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, name, W.DO_PLAN_QUOTAS, **attributes)


def order_vm(waldur, name: str) -> tuple[str, str]:
    return order_machine(waldur, W.AZURE_OFFERING_UUID, W.AZURE_PLAN_UUID, name, W.AZURE_PLAN_QUOTAS,
                         ssh_key=KEY_1["uuid"])


def tag(resource_uuid: str) -> str:
    return "waldur-resource:" + resource_uuid


def order_pass(config: Path, rc: int = 0, json_log: bool = False, env: dict | None = None, **extra_vars):
    """The order pass as an operator runs it; its exit status must be ``rc``."""
    env = dict(env or {}, WALDUR_SITE_AGENT_CONFIG=str(config))
    if json_log:
        env["ANSIBLE_STDOUT_CALLBACK"] = "waldur.site_agent.waldur_json"
    run = run_playbook(ORDER_PASS, extra_vars=extra_vars or None, env=env)
    assert run.rc == rc, run.output[-6000:]
    return run


def finish(process: subprocess.Popen, rc: int = 0) -> str:
    output = process.communicate(timeout=600)[0]
    assert process.returncode == rc, output[-6000:]
    return output


def summary_of(run_output: str, offering: str = "DigitalOcean VM") -> dict:
    """The key=value pairs of an offering's order pass summary in the default output."""
    [text] = re.findall(r'"msg": "offering=%s (pass=order_process[^"]*)"' % re.escape(offering), run_output)
    return dict(pair.split("=", 1) for pair in text.split() if "=" in pair)


def named_lines(run_output: str) -> list[str]:
    """The lines of the task naming each order that did not end done (default output)."""
    match = re.search(r"TASK \[[^\]]*%s[^\]]*\][^\n]*\n(?:ok|changed): \[[^\]]+\] => \{\n\s+\"msg\": \[\n(.*?)\n\s+\]"
                      % re.escape(LINES_TASK), run_output, re.DOTALL)
    if not match:
        return []
    return [json.loads(line.strip().rstrip(",")) for line in match.group(1).splitlines()]


def droplets_tagged(do, resource_uuid: str) -> list[dict]:
    return [droplet for droplet in do.app.droplets() if tag(resource_uuid) in droplet["tags"]]


def vms(azure) -> list[str]:
    return [arm_id for arm_id in azure.app.resources()
            if re.search(r"/providers/microsoft\.compute/virtualmachines/[^/]+$", arm_id.lower())]


def groups(azure) -> list[str]:
    return [arm_id for arm_id in azure.app.resources() if re.search(r"/resourcegroups/[^/]+$", arm_id.lower())]


def waldur_calls(waldur, operation: str, since: int = 0) -> list[dict]:
    return waldur.app.calls_of(operation, since)


# ---- two passes at the same instant --------------------------------------------------------------

def test_two_passes_started_together_make_each_machine_once_and_terminate_leaves_nothing(
        tmp_path, waldur_sim, do_sim, azure_sim):
    """Cron overlap, a manual run beside a timer: both passes take the offering's lock, so the
    second waits while the first claims, builds and settles, then finds nothing left to do.
    The simulator holds the first tag look-up until both passes have sent theirs (or 5 s), so
    without the lock both would look up before either created anything."""
    waldur, do, azure = waldur_sim, do_sim, azure_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do, azure)
    droplet_orders = [order_droplet(waldur, "race-%d" % index) for index in range(5)]
    vm_orders = [order_vm(waldur, "vm-race-%d" % index) for index in range(3)]
    barrier = do.app.add_barrier("droplets.list", clients=2, timeout=5, query="per_page=200")

    first, second = (start_pass(ORDER_PASS, config, agent_pass_lock_wait=600) for _pass in range(2))
    outputs = [finish(first), finish(second)]

    assert barrier.describe()["timed_out"] is True  # only one pass looked droplets up at that moment
    for order_uuid, resource_uuid in droplet_orders:
        assert_done(waldur, order_uuid)
        [droplet] = droplets_tagged(do, resource_uuid)
        assert waldur.app.resource(resource_uuid)["backend_id"] == str(droplet["id"])
    assert len(do.app.droplets()) == 5 and len(do.app.calls_of("droplets.create")) == 5
    for order_uuid, _resource in vm_orders:
        assert_done(waldur, order_uuid)
    assert len(vms(azure)) == 3 and len(groups(azure)) == 3
    # the pass that came second waited for each offering's lock, then had nothing to do
    assert sorted(int(summary_of(output)["orders"]) for output in outputs) == [0, 5]
    assert sorted(int(summary_of(output, "Azure VM")["orders"]) for output in outputs) == [0, 3]

    for order_uuid, resource_uuid in droplet_orders + vm_orders:
        terminate(waldur, resource_uuid)
    order_pass(config)
    assert do.app.droplets() == [] and azure.app.resources() == []


def test_passes_of_two_machines_without_a_shared_lock_race_and_terminate_still_leaves_nothing(
        tmp_path, waldur_sim, do_sim):
    """Two agents on two machines (separate lock directories): the barrier makes both look the
    tags up before either creates, so each order gets two droplets. Terminating deletes every
    droplet carrying the resource's tag, the copy included."""
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    orders = [order_droplet(waldur, "twin-%d" % index) for index in range(3)]
    # Both passes list the account together (the barrier); the creates then take 3 s to land, so the
    # pass that did not approve the orders looks their tags up before the other's droplets exist.
    barrier = do.app.add_barrier("droplets.list", clients=2, timeout=120, query="per_page=200")
    do.app.latency_by_operation["droplets.create"] = 3.0

    passes = [start_pass(ORDER_PASS, config, env={"WALDUR_SITE_AGENT_LOCK_DIR": str(tmp_path / name)})
              for name in "ab"]
    outputs = [finish(process) for process in passes]

    assert barrier.describe()["arrived"] >= 2 and barrier.describe()["timed_out"] is False
    assert len(do.app.droplets()) == 6, outputs  # what the lock prevents on one machine
    for order_uuid, resource_uuid in orders:
        assert_done(waldur, order_uuid)
        assert len(droplets_tagged(do, resource_uuid)) == 2

    do.app.latency_by_operation.clear()
    for _order, resource_uuid in orders:
        terminate(waldur, resource_uuid)
    order_pass(config)
    assert do.app.droplets() == []


def test_copies_made_by_an_overlapping_pass_heal_keeping_the_oldest(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    # two passes each created the preset order's droplet and were killed before settling
    oldest = do.app.seed_droplet("do-vm-1", tags=["waldur", tag(W.DO_RESOURCE_UUID)])
    copy = do.app.seed_droplet("do-vm-1", tags=["waldur", tag(W.DO_RESOURCE_UUID)])

    run = order_pass(config, json_log=True)

    assert_done(waldur, W.DO_ORDER_UUID)
    assert [droplet["id"] for droplet in do.app.droplets()] == [oldest["id"]]
    assert waldur.app.resource(W.DO_RESOURCE_UUID)["backend_id"] == str(oldest["id"])
    assert [call["path"] for call in do.app.calls_of("droplets.delete")] == ["/v2/droplets/%d" % copy["id"]]
    said = [line["event"] for line in log_lines(run) if line.get("task") == ACT and line.get("order")]
    assert any("deleted duplicate droplet(s) %d" % copy["id"] in event and "kept the oldest, %d" % oldest["id"]
               in event for event in said), said


# ---- after the machine exists nothing errs the order --------------------------------------------

@pytest.mark.parametrize("fault", ["set_backend_id refused", "Waldur down while settling"])
def test_an_order_whose_droplet_exists_is_finished_by_a_later_pass(tmp_path, waldur_sim, do_sim, fault):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    if fault == "set_backend_id refused":
        waldur.app.add_fault("resources.set_backend_id", status=400, body={"backend_id": ["Refused."]})
    else:
        for operation in ("resources.set_backend_id", "resources.set_backend_metadata", "orders.set_state_done",
                          "orders.set_state_erred"):
            waldur.app.add_fault(operation, status=503, times=-1)

    # left for the next run: exit status 4 (nothing is green while nothing moves), not 0
    first = order_pass(config, rc=4, order_process_waldur_max_retry_seconds=1)

    [droplet] = do.app.droplets()
    order = waldur.app.order(W.DO_ORDER_UUID)
    assert (order["state"], order["error_message"]) == ("executing", "")  # left, not erred
    assert waldur_calls(waldur, "orders.set_state_erred") == []
    [line] = named_lines(first.stdout)
    assert line.startswith("retry: do-vm-1 (order %s): " % W.DO_ORDER_UUID)
    assert ("Waldur refused to record backend id %d" % droplet["id"] if fault == "set_backend_id refused"
            else "HTTP 503") in line
    assert summary_of(first.stdout)["retry"] == "1"

    waldur.app.clear_faults()
    since = len(do.app.calls)
    order_pass(config)

    assert_done(waldur, W.DO_ORDER_UUID)
    assert waldur.app.resource(W.DO_RESOURCE_UUID)["backend_id"] == str(droplet["id"])
    assert len(do.app.droplets()) == 1 and do.app.write_calls(since) == []  # adopted by its tag


def test_an_outage_is_never_green(tmp_path, waldur_sim, do_sim):
    """Every create answering 503, pass after pass: each pass leaves the order for the next and
    ends with exit status 4, never 0; the retry logic stays as it is and the pass after the
    outage builds the machine once."""  # exit status 4: nothing failed for good, work left for later
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    do.app.add_fault("droplets.create", status=503, times=-1)

    for _pass in range(3):
        run = order_pass(config, rc=4, order_process_waldur_max_retry_seconds=1)
        assert "left for the next run: DigitalOcean VM (offering %s): 1 order(s)" % W.DO_OFFERING_UUID in run.output
        assert summary_of(run.stdout)["retry"] == "1", run.stdout[-3000:]
        assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "executing" and do.app.droplets() == []

    do.app.clear_faults()
    order_pass(config)
    assert_done(waldur, W.DO_ORDER_UUID)
    assert len(do.app.droplets()) == 1


# ---- orders Waldur errs itself, Create/Restore never resize, an interrupted resize -------------

def test_a_create_waldur_errs_at_approval_builds_nothing(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    offering = "%s/api/marketplace-public-offerings/%s/" % (waldur.url, W.DO_OFFERING_UUID)
    nameless = call_waldur(waldur, "/api/marketplace-orders/", {
        "offering": offering, "project": "%s/api/projects/%s/" % (waldur.url, W.PROJECT_UUID),
        "plan": "%splans/%s/" % (offering, W.DO_PLAN_UUID), "attributes": {"region": "ams3"},
        "limits": W.DO_PLAN_QUOTAS})

    run = order_pass(config)

    assert do.app.droplets() == [] and do.app.calls_of("droplets.create") == []
    order = waldur.app.order(nameless["uuid"])
    assert order["state"] == "erred"
    assert waldur.app.resource(nameless["marketplace_resource_uuid"])["state"] == "Erred"
    [line] = named_lines(run.stdout)
    assert line == "skipped: (no name) (order %s): order erred by Waldur after approval: 'name'" \
        % nameless["uuid"]


@pytest.mark.parametrize("order_type", ["Restore", "Create"])
def test_a_create_or_restore_of_a_resized_droplet_leaves_its_size(tmp_path, waldur_sim, do_sim, order_type):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    resource_uuid = uuid.uuid4().hex
    droplet = do.app.seed_droplet("grown", size="s-2vcpu-4gb", tags=["waldur", tag(resource_uuid)])
    waldur.app.seed_resource(W.DO_OFFERING_UUID, "grown", uuid=resource_uuid, backend_id=str(droplet["id"]),
                             limits=BIG, attributes={"name": "grown", "size": "s-1vcpu-1gb"})
    order = waldur.app.seed_order(W.DO_OFFERING_UUID, type=order_type, resource_uuid=resource_uuid,
                                  attributes={"name": "grown", "size": "s-1vcpu-1gb"})

    order_pass(config)

    assert_done(waldur, order["uuid"])
    after = do.app.droplet(droplet["id"])
    assert (after["size_slug"], after["status"]) == ("s-2vcpu-4gb", "active")
    assert do.app.actions(droplet["id"]) == [] and do.app.write_calls() == []


def test_a_resize_killed_after_the_power_off_is_finished_by_the_next_pass(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    resource_uuid = uuid.uuid4().hex
    droplet = do.app.seed_droplet("grow", tags=["waldur", tag(resource_uuid)])
    waldur.app.seed_resource(W.DO_OFFERING_UUID, "grow", uuid=resource_uuid, backend_id=str(droplet["id"]),
                             limits=dict(W.DO_PLAN_QUOTAS))
    order_uuid = update_limits(waldur, resource_uuid, BIG)
    # the second droplet action (after the shutdown) is the resize: the pass dies while sending
    # it, and it never reaches DigitalOcean
    arrived, release, restore = hold_calls(do.app, "droplet_actions.create", nth=2, answer_status=503)
    try:
        process = start_pass(ORDER_PASS, config, capture=False)
        try:
            assert arrived.wait(300), "the pass never asked for the resize"
        finally:
            kill_tree(process)
    finally:
        restore()
    assert do.app.droplet(droplet["id"])["status"] == "off"
    assert [action["type"] for action in do.app.actions(droplet["id"])] == ["shutdown"]
    assert waldur.app.order(order_uuid)["state"] == "executing"

    order_pass(config)

    assert_done(waldur, order_uuid)
    after = do.app.droplet(droplet["id"])
    assert (after["size_slug"], after["status"]) == ("s-2vcpu-4gb", "active")
    assert [action["type"] for action in do.app.actions(droplet["id"])] == ["shutdown", "resize", "power_on"]


# ---- the pass lock --------------------------------------------------------------------------------

def lock_file(directory: str) -> Path:
    return Path(directory) / ("%s.machines.lock" % W.DO_OFFERING_UUID)


def test_a_second_pass_skips_an_offering_another_pass_holds_and_says_so(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    arrived, release, restore = hold_calls(do.app, "droplets.create")
    try:
        first = start_pass(ORDER_PASS, config)
        assert arrived.wait(300), "the first pass never created the droplet"
        holder = json.loads(lock_file(lock_directory()).read_text())
        since = len(waldur.app.calls)

        second = order_pass(config, rc=4, agent_pass_lock_wait=0)

        assert waldur.app.calls[since:] == []  # not even a read
        [line] = [line for line in second.output.splitlines() if "UNREACHABLE!" in line]
        assert ("DigitalOcean VM (offering %s): the order_process pass of offering DigitalOcean VM (PID %d on %s "
                "since %s) holds %s" % (W.DO_OFFERING_UUID, holder["pid"], socket.gethostname(), holder["since"],
                                        lock_file(lock_directory()))) in line
        release.set()
        finish(first)
    finally:
        restore()
    assert_done(waldur, W.DO_ORDER_UUID)
    assert len(do.app.droplets()) == 1
    assert not lock_file(lock_directory()).exists()  # released by the first pass at its end


def test_a_lock_left_by_a_dead_pass_is_taken_over(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    directory = tmp_path / "locks"
    directory.mkdir()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    # a killed pass's lock, and one whose PID the kernel gave to another process since
    reused = {"pid": os.getpid(), "start_time": 1, "host": socket.gethostname(), "token": "t" * 32,
              "label": "order_process pass of offering DigitalOcean VM", "since": "2026-01-01T00:00:00Z"}
    for holder in (dict(reused, pid=ended.pid, start_time=None), reused):
        lock_file(str(directory)).write_text(json.dumps(holder))

        run = order_pass(config, env={"WALDUR_SITE_AGENT_LOCK_DIR": str(directory)})

        assert "its lock was stale (process %d has ended)" % holder["pid"] in run.output
        assert not lock_file(str(directory)).exists()
    assert_done(waldur, W.DO_ORDER_UUID)
    assert len(do.app.droplets()) == 1


# ---- probe, offering, accounting ------------------------------------------------------------------

@pytest.mark.parametrize("cloud", ["rejects the token", "is down"])
def test_nothing_is_approved_when_the_cloud_cannot_be_worked_with(tmp_path, waldur_sim, do_sim, cloud):
    waldur, do = waldur_sim, do_sim
    if cloud == "rejects the token":
        config = write_config(tmp_path, waldur, do, token="dop_v1_" + "0" * 64)
        reason = "DigitalOcean cannot be worked with: DigitalOcean rejected the token (401 Unable to authenticate you)"
    else:
        config = write_config(tmp_path, waldur, do)
        do.app.add_fault("account.get", status=503, times=-1)
        reason = "DigitalOcean cannot be worked with: DigitalOcean server error after"

    run = order_pass(config, rc=2, order_process_probe_max_retry_seconds=1)

    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"
    assert waldur_calls(waldur, "orders.approve_by_provider") == [] and waldur_writes(waldur) == []
    assert do.app.write_calls() == []
    [final] = [line for line in run.output.splitlines() if line.startswith("fatal:")]
    assert "DigitalOcean VM (%s" % reason in final
    assert "0" * 64 not in run.output


def test_nothing_is_approved_when_azure_rejects_the_secret(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure, client_secret="wrong-secret-8086")

    run = order_pass(config, rc=2)

    assert waldur.app.order(W.AZURE_ORDER_UUID)["state"] == "pending-provider"
    assert waldur_writes(waldur) == [] and azure.app.resources() == []
    [final] = [line for line in run.output.splitlines() if line.startswith("fatal:")]
    assert "The order_process pass failed for: Azure VM (Azure cannot be worked with: " in final
    assert "Invalid client secret provided" in final and "wrong-secret-8086" not in run.output


def test_a_wrong_offering_uuid_fails_with_one_line_naming_it(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    wrong = uuid.uuid4().hex
    config.write_text(config.read_text().replace(W.DO_OFFERING_UUID, wrong))

    run = order_pass(config, rc=2)

    [final] = [line for line in run.output.splitlines() if line.startswith("fatal:")]
    assert ("DigitalOcean VM (offering %s: Waldur shows no such offering to this token (HTTP 404); check "
            "waldur_offering_uuid" % wrong) in final
    assert waldur_writes(waldur) == [] and do.app.calls == []
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"


def test_twenty_orders_with_three_failures_name_the_three_in_three_lines(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    good = [order_droplet(waldur, "good-%02d" % index) for index in range(17)]
    # a region the catalogue lists as available, whose creates DigitalOcean refuses all the same
    do.app.restrict_region("sfo3")
    bad = [order_droplet(waldur, "bad-%d" % index, region="sfo3") for index in range(3)]

    run = order_pass(config)
    logged = order_pass(config, json_log=True)  # a second pass: nothing left to do

    for order_uuid, _resource in good:
        assert_done(waldur, order_uuid)
    lines = named_lines(run.stdout)
    assert len(lines) == 3
    for index, (order_uuid, _resource) in enumerate(bad):
        assert_erred(waldur, order_uuid, "Region is not available")
        [line] = [line for line in lines if order_uuid in line]
        assert line.startswith("erred: bad-%d (order %s): set erred: DigitalOcean refused the request (422 Region "
                               "is not available)" % (index, order_uuid))
    assert sorted(droplet["name"] for droplet in do.app.droplets()) == ["good-%02d" % index for index in range(17)]
    summary = summary_of(run.stdout)
    assert (summary["orders"], summary["done"], summary["erred"], summary["retry"], summary["failed"]) == \
        ("20", "17", "3", "0", "0")
    assert [line for line in log_lines(logged) if line["event"] == "pass summary"][0]["orders"] == 0


def test_the_json_log_names_each_order_with_its_outcome(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    good_order, _good = order_droplet(waldur, "fine")
    do.app.restrict_region("sfo3")
    bad_order, _bad = order_droplet(waldur, "nowhere", region="sfo3")
    odd_order, _odd = order_droplet(waldur, "odd", size="huge-999")

    run = order_pass(config, json_log=True)

    settled = dict((line["order"], line) for line in log_lines(run) if line.get("task") == SETTLE and line.get("order"))
    assert (settled[good_order]["outcome"], settled[good_order]["resource_name"]) == ("done", "fine")
    assert (settled[bad_order]["outcome"], settled[bad_order]["resource_name"]) == ("erred", "nowhere")
    assert "Region is not available" in settled[bad_order]["event"]
    # turned down before approval: never settled, named all the same with its outcome and reason
    assert odd_order not in settled
    [odd] = [line for line in log_lines(run) if line.get("order") == odd_order]
    assert (odd["outcome"], odd["resource_name"], odd["state"], odd["level"]) == ("rejected", "odd", "rejected", "warning")
    assert "size 'huge-999' is not a DigitalOcean droplet size" in odd["event"]
    [summary] = [line for line in log_lines(run) if line["event"] == "pass summary"]
    assert (summary["done"], summary["erred"], summary["rejected"], summary["failed"], summary["level"]) == \
        (1, 1, 1, 0, "warning")


def test_a_backend_task_failing_as_a_whole_leaves_each_claimed_order_with_a_short_line(
        tmp_path, waldur_sim, do_sim):
    """The token is revoked between the probe and the work: the orders were approved moments
    before; each stays for the next pass with one short reason, and the pass fails."""
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    orders = [order_droplet(waldur, "late-%02d" % index) for index in range(20)]
    do.app.add_fault("droplets.list", status=401, nth=2, times=-1)  # the first: the droplet count of the quota check

    run = order_pass(config, rc=2)

    lines = named_lines(run.stdout)
    assert len(lines) == 20 and all(len(line) < 400 for line in lines)
    for order_uuid, _resource in orders:
        assert waldur.app.order(order_uuid)["state"] == "executing"
        assert any(line.startswith("retry: late-") and order_uuid in line and "DigitalOcean rejected the token"
                   in line and "left executing for the next pass" in line for line in lines)
    assert do.app.droplets() == []
    # the backend task's own failure and the pass's last line: short, however many orders
    failures = [line for line in run.output.splitlines() if line.startswith("fatal:")]
    assert len(failures) == 2 and all(len(line) < 500 for line in failures), failures
    assert "The order_process pass failed for: DigitalOcean VM (the backend task failed as a whole: DigitalOcean " \
        "rejected the token" in failures[-1]

    do.app.clear_faults()
    order_pass(config)
    for order_uuid, _resource in orders:
        assert_done(waldur, order_uuid)
    assert len(do.app.droplets()) == 20
