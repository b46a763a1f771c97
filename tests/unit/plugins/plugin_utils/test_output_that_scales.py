"""Output that scales: what -v and -vv print of a module's result (plugins/plugin_utils/batch_action.py:
summary_lines), and the progress of a module from its first batch runner on, reads before and
between its batches included (core/progress.py, core/batch.py), as the action plugin's watcher
words it."""

from __future__ import annotations

import json
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core import progress as progress_module
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import BatchRunner
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import pack
from ansible_collections.waldur.site_agent.plugins.plugin_utils.batch_action import (
    ITEMS_AT_V,
    ProgressWatcher,
    summary_lines,
)

UUID = "%032x"


def results(count, failed=()):
    return [{"resource_uuid": UUID % number, "resource_name": "vm-%03d" % number, "changed": number not in failed,
             "failed": number in failed, "retry": False, "action": "none" if number in failed else "created",
             "msg": "refused" if number in failed else "created droplet %d" % number} for number in range(count)]


def test_v_names_the_first_items_failed_ones_first_then_how_many_more_and_the_rest_abridged():
    result = {"changed": True, "results_packed": pack(results(100, failed=(57, 88))),
              "failures": results(100, failed=(57, 88))[57:58], "api_calls": {"reads": 2, "writes": 100, "retries": 0},
              "approved": [UUID % number for number in range(100)], "msg": "100 droplets: 98 created; 2 failed",
              "warnings": [], "_ansible_no_log": False}
    lines = summary_lines(result)
    named, more, rest = lines[:ITEMS_AT_V], lines[ITEMS_AT_V], json.loads(lines[-1])
    assert len(lines) == ITEMS_AT_V + 2
    # the failed ones whatever their place, then the first others, in their order
    assert named[:18] == ["vm-%03d (%s): created: created droplet %d" % (number, UUID % number, number)
                          for number in range(18)]
    assert named[18:] == ["vm-057 (%s): failed: refused" % (UUID % 57), "vm-088 (%s): failed: refused" % (UUID % 88)]
    assert more == "... and 80 more (-vv prints every one, -vvv the whole result)"
    assert rest["approved"] == [UUID % number for number in range(5)] + ["... and 95 more"]
    assert rest["msg"] == "100 droplets: 98 created; 2 failed" and rest["api_calls"]["writes"] == 100
    assert not {"results_packed", "failures", "warnings", "_ansible_no_log"} & set(rest)


def test_vv_names_every_item():
    lines = summary_lines({"changed": False, "results": results(100)}, every_item=True)
    assert len(lines) == 101 and lines[99].startswith("vm-099 ") and json.loads(lines[-1]) == {"changed": False}


def test_orders_resources_and_machines_are_named_by_what_they_are():
    orders = [{"uuid": UUID % 1, "type": "Create", "state": "executing", "resource_name": "vm-1",
               "marketplace_resource_uuid": UUID % 2, "attributes": {"name": "vm-1"}}]
    assert summary_lines({"orders_packed": pack(orders), "count": 1})[0] == "vm-1 (%s): Create executing" % (UUID % 1)
    assert summary_lines({"resources_packed": pack([{"name": "vm-1", "state": "OK", "backend_id": "41"}])})[0] == \
        "vm-1: OK"
    machines = [{"backend_id": "/subscriptions/s/virtualMachines/vm-2", "found": False}]
    assert summary_lines({"machines": machines})[0] == "/subscriptions/s/virtualMachines/vm-2: not found"


def test_no_line_is_long_whatever_the_result():
    huge = "x" * 100000
    result = {"results": [dict(item, msg=huge) for item in results(10000)],
              "ssh_keys": [{"uuid": UUID % number, "name": "key-%d" % number, "public_key": huge} for number in range(50)],
              "by_resource": dict((UUID % number, {"notes": [huge] * 50}) for number in range(1000)),
              "msg": huge, "nested": [[[huge] * 50] * 50] * 50}
    for every_item in (False, True):
        lines = summary_lines(result, every_item=every_item)
        assert max(len(line) for line in lines[:-1]) <= (100200 if every_item else 600)
        assert len(lines[-1]) <= 3100
    assert sum(len(line) for line in summary_lines(result)) < 20000


def test_a_short_result_without_items_is_left_to_ansible():
    assert summary_lines({"changed": False, "account": {"droplet_limit": 25, "status": "active"}, "api_calls": 1}) is None
    # a long one is abridged, though it holds no items
    lines = summary_lines({"changed": False, "verdicts": [{"order_uuid": UUID % number, "msg": "no such size"}
                                                          for number in range(300)]})
    assert len(lines) == 1 and json.loads(lines[0])["verdicts"][-1] == "... and 295 more"


class FakeModule:
    """What BatchRunner reads of a module: its batch options and, as WaldurModule, its calls."""

    def __init__(self):
        self.params = {"max_workers": 2, "deadline": 60.0, "fail_on_item_error": False}
        self.reads = 0

    def api_calls(self):
        return {"reads": self.reads, "writes": 0, "retries": 0}


def test_the_progress_file_says_what_the_module_does_from_its_first_batch_runner_on(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv(progress_module.PROGRESS_FILE_ENV, str(path))
    monkeypatch.setattr(progress_module, "_module", [])
    module = FakeModule()

    first = BatchRunner(module, None)  # the module's first runner: before any read
    state = json.loads(path.read_text())
    assert state["phase"] == "reading" and state["batch"] == 0 and state["calls"]["reads"] == 0

    module.reads = 14  # a prefetch listing of 14 pages
    second = BatchRunner(module, lambda item: {"changed": True})
    assert second.progress is first.progress  # one file per module run
    second.progress.write()
    assert json.loads(path.read_text())["calls"]["reads"] == 14

    second.run([{"name": "vm-1"}, {"name": "vm-2"}])
    state = json.loads(path.read_text())
    assert state["phase"] == "batch" and state["batch"] == 1 and state["total"] == 2
    second.progress.end()  # between batches: reading again
    assert second.progress.snapshot()["phase"] == "reading"
    second.run([{"name": "vm-3"}])
    assert second.progress.snapshot()["batch"] == 2
    second.progress.stop()
    assert json.loads(path.read_text())["phase"] == "ended"


def look(watcher, state, now):
    return watcher._lines(state, now)  # pylint: disable=protected-access


def test_the_watcher_words_reads_batches_and_the_end_counting_from_the_task_start(tmp_path):
    started = time.time() - 40
    watcher = ProgressWatcher(str(tmp_path / "none.json"), None, 10, 30, doing=lambda: "reading 216 resources' machines",
                              started=started)
    now = started + 40
    # nothing written yet (a module without batches): what it reads, and for how long
    assert look(watcher, None, now) == ["reading 216 resources' machines, 40 s"]
    reading = {"phase": "reading", "batch": 0, "since": started + 1, "calls": {"reads": 2, "writes": 0},
               "total": 0, "done": 0, "failed": 0, "deadline": None, "started": started + 1, "now": now - 1,
               "running": [], "running_count": 0}
    assert look(watcher, reading, now) == ["reading 216 resources' machines: 2 reads so far, 40 s"]
    batch = dict(reading, phase="batch", batch=1, total=216, done=3, deadline=900, started=started + 30,
                 calls={"reads": 3, "writes": 1})
    first, line = look(watcher, batch, now)
    assert first.startswith("216 items, deadline 900 s")
    assert line == "3/216 done, 0 failed, 40 s; starting the next items"  # 40 s: from the task's start
    assert look(watcher, batch, now) == [line]  # the batch is announced once
    assert look(watcher, dict(batch, batch=2), now)[0].startswith("216 items")  # the next batch is
    between = dict(batch, phase="reading", done=216)
    assert look(watcher, between, now) == ["reading 216 resources' machines: 3 reads, 1 write so far, 40 s"]
    assert look(watcher, dict(batch, phase="ended"), now) is None
