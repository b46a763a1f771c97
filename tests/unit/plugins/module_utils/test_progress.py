"""core/progress.py: the state a running batch writes for the action plugin, and its lines;
core/batch.py: the top-level diff list of a batch module."""

import json
import threading
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core import progress as progress_module
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import headed_diffs, machine_diff, run_batch
from ansible_collections.waldur.site_agent.plugins.module_utils.core.progress import (
    Progress,
    first_line,
    item_line,
    note,
    progress_line,
)


def test_the_file_follows_the_batch_and_names_what_it_waits_for(tmp_path, monkeypatch):
    monkeypatch.setattr(progress_module, "PROGRESS_WRITE_SECONDS", 0.05)
    path = str(tmp_path / "progress.json")
    items = [{"name": "vm-%d" % number} for number in range(3)]
    release = threading.Event()

    def worker(item):
        if item["name"] == "vm-0":
            return {"failed": True, "msg": "refused"}
        note("droplet of %s to become active" % item["name"])
        release.wait(5)
        return {"changed": True}

    progress = Progress(path, items, 900)
    runner = threading.Thread(target=run_batch, args=(items, worker), kwargs={"max_workers": 3, "progress": progress})
    runner.start()
    deadline = time.time() + 5
    while time.time() < deadline:
        state = json.loads(open(path).read())
        if state["done"] == 1 and state["running_count"] == 2 and all(entry["waits"] for entry in state["running"]):
            break
        time.sleep(0.05)
    assert state["total"] == 3 and state["failed"] == 1
    line = progress_line(state)
    assert line.startswith("1/3 done, 1 failed, ")
    assert "waiting for 2 items: vm-1 (droplet of vm-1 to become active, " in line
    release.set()
    runner.join(5)
    progress.stop()
    assert json.loads(open(path).read())["done"] == 3


def test_a_deferred_result_stays_waited_for_until_the_module_settles(tmp_path):
    progress = Progress(str(tmp_path / "p.json"), [{"name": "vm-1"}], 900)
    progress.start(0)
    progress.finish(0, {"deferred": True, "msg": "created droplet 41 vm-1 in ams3 (s-1vcpu-1gb)"})
    state = progress.snapshot()
    assert state["done"] == 0 and state["running"][0]["waits"] == "created droplet 41 vm-1 in ams3, then the cloud"
    progress.settle()
    progress.stop()
    assert progress.snapshot()["done"] == 1


def test_lines():
    state = {"total": 100, "done": 37, "failed": 2, "deadline": 900, "started": 0, "now": 41,
             "running": [{"label": "vm-%d" % number, "since": 29 + number, "waits": None} for number in range(3)],
             "running_count": 8}
    assert first_line(state) == "100 items, deadline 900 s (00:15:00 UTC)"
    assert progress_line(state) == ("37/100 done, 2 failed, 41 s; waiting for 8 items: vm-0 (12 s), vm-1 (11 s), "
                                    "vm-2 (10 s) and 5 more")
    assert item_line({"resource_uuid": "r1", "resource_name": "vm-1", "action": "powered_off", "changed": True,
                      "msg": "droplet 7\n shut down"}) == "vm-1 (r1): powered_off: droplet 7 shut down"
    assert item_line({"order_uuid": "o1", "failed": True, "retry": True, "msg": "deadline"}) == "o1: failed, retry: deadline"


def test_batch_diffs_are_headed_by_the_resource_and_only_changed_ones_count():
    results = [
        {"resource_uuid": "r1", "resource_name": "vm-1", "changed": True, "diff": {"before": {"a": 1}, "after": {"a": 2}}},
        {"resource_uuid": "r2", "changed": False, "diff": {"before": {}, "after": {}}},
        {"resource_uuid": "r3", "changed": True, "diff": {"before": {}, "after": {"b": 1}, "before_header": "x",
                                                          "after_header": "y"}},
    ]
    assert headed_diffs(results) == [
        {"before": {"a": 1}, "after": {"a": 2}, "before_header": "vm-1 (resource r1)", "after_header": "vm-1 (resource r1)"},
        {"before": {}, "after": {"b": 1}, "before_header": "x", "after_header": "y"}]
    assert machine_diff({"action": "powered_off", "backend_id": "7"}, ("active", "off")) == {
        "before": {"backend_id": "7", "power": "active"}, "after": {"backend_id": "7", "power": "off"}}
    assert machine_diff({"action": "none", "backend_id": "7"}, ("active", "off")) is None
