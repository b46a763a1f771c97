"""The batch action plugin and the controller's stdout (plugins/plugin_utils/batch_action.py): it
looks with the one guard (plugin_utils/output_guard.py, tested in test_output_guard.py), and the
progress watcher prints nothing once the output was gone, even if it seems back."""

from __future__ import annotations

import json
import os
import time

from ansible_collections.waldur.site_agent.plugins.plugin_utils import batch_action, output_guard
from ansible_collections.waldur.site_agent.plugins.plugin_utils.batch_action import ProgressWatcher


def test_the_watcher_stops_for_good_once_the_output_was_gone(tmp_path):
    path = tmp_path / "progress.json"
    path.write_text(json.dumps({"total": 3, "done": 1, "failed": 0, "deadline": 900, "started": time.time(),
                                "now": time.time(), "running": [], "running_count": 0}))
    printed, answers = [], iter([True, False] + [True] * 10)
    watcher = ProgressWatcher(str(path), lambda lines, state: printed.append(lines), 0.01, 0.01,
                              output_alive=lambda: next(answers)).start()
    time.sleep(3.5)
    watcher.stop()
    assert not watcher.thread.is_alive()
    # the first look: the first line and a progress line in one message; then gone, and never again
    assert len(printed) == 1 and printed[0][0].startswith("3 items, deadline 900 s") and "1/3 done" in printed[0][1]


def test_the_action_looks_at_the_controllers_output_with_the_one_guard(monkeypatch):
    assert batch_action.controller_output_gone is output_guard.controller_output_gone
    looked = []
    monkeypatch.setattr(batch_action, "controller_output_gone", lambda pid: looked.append(pid) or True)
    assert batch_action.ActionModule._controller_output_alive() is False
    assert looked == [os.getppid()]  # the controller: the worker's parent
