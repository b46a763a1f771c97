# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Benchmark-only ansible callback: one JSON line per task with its timing.

Enabled by the harness with ``ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins`` and
``ANSIBLE_CALLBACKS_ENABLED=bench_profile``; writes to ``$BENCH_PROFILE_PATH``. Times are
on the boot-time clock, the one ``/proc/<pid>/stat`` start times use, so the harness can
line tasks up with the module processes it saw.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: bench_profile
type: aggregate
short_description: Task timings for the benchmark harness
description:
  - Writes the playbook's tasks (name, action, start, end, status, result count) to the file named
    by E(BENCH_PROFILE_PATH); a path ending in C(.jsonl) gets one line per playbook run, appended.
requirements:
  - enable in callbacks_enabled
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


def _now():
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_profile"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._path = os.environ.get("BENCH_PROFILE_PATH")
        self._tasks = []
        self._current = None
        self._started = _now()

    def _close_current(self):
        if self._current is not None:
            self._current.setdefault("end", _now())
            self._tasks.append(self._current)
            self._current = None

    def _start(self, task):
        self._close_current()
        self._current = {"name": task.get_name(), "action": task.action, "start": _now(), "results": 0,
                         "statuses": {}}

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task)

    def _result(self, status):
        if self._current is not None:
            self._current["end"] = _now()
            self._current["results"] += 1
            self._current["statuses"][status] = self._current["statuses"].get(status, 0) + 1

    def v2_runner_on_ok(self, result):
        self._result("changed" if result._result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result("ignored" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result):
        self._result("skipped")

    def v2_runner_on_unreachable(self, result):
        self._result("unreachable")

    def v2_playbook_on_stats(self, stats):
        self._close_current()
        if not self._path:
            return
        record = {"playbook_started": self._started, "ended": _now(), "tasks": self._tasks}
        if self._path.endswith(".jsonl"):  # many runs (the event bench): one line each
            with open(self._path, "a") as handle:
                handle.write(json.dumps(record) + "\n")
            return
        with open(self._path, "w") as handle:
            json.dump(record, handle)
