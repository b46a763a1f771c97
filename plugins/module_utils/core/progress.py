# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""How far a batch has got: the state the batch engine writes while it runs, and its lines.

The batch engine (``core/batch.py``) keeps a ``Progress`` when the environment names a progress
file (the collection's action plugin for batch modules sets it) and rewrites the file once a
second; the action plugin reads it on the controller and prints ``first_line`` and then
``progress_line`` while the module runs, and ``item_line`` for each item at ``-v``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import threading
import time

# The file a batch module's action plugin (plugins/plugin_utils/batch_action.py) reads while the module
# runs, to print progress lines on the controller: set only by that plugin.
PROGRESS_FILE_ENV = "WALDUR_SITE_AGENT_PROGRESS_FILE"
# How often the file is rewritten: the plugin prints at most every few seconds, so once a second
# is fresh enough and costs nothing next to the items' API calls.
PROGRESS_WRITE_SECONDS = 1.0
_LABEL_KEYS = ("name", "resource_name", "resource_uuid", "order_uuid", "uuid")
current = threading.local()  # the item the thread works on, for note()


def item_label(item):
    """What an item is called in a progress line: its name, else its resource or order UUID."""
    if isinstance(item, dict):
        for key in _LABEL_KEYS:
            if item.get(key):
                return str(item[key])
    return str(item)[:60]


def note(text):
    """Say what the current item waits for (``droplet 418000001 to become active``); shown in
    the progress lines of a long batch. A no-op outside a batch with progress."""
    progress = getattr(current, "progress", None)
    if progress is not None:
        progress.note(getattr(current, "index", None), text)


class Progress:
    """The state of one batch, written as JSON to ``path`` at most once a second by a daemon
    thread: ``{total, done, failed, deadline, started, running: [{label, since, waits}]}``."""

    def __init__(self, path, items, deadline_seconds):
        self.path = path
        self.labels = [item_label(item) for item in items]
        self.total = len(items)
        self.deadline = deadline_seconds
        self.started = time.time()
        self.done = self.failed = 0
        self.running = {}  # index -> [started, waits]
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.write()
        threading.Thread(target=self._loop, name="batch-progress", daemon=True).start()

    @classmethod
    def from_environment(cls, items, deadline_seconds):
        path = os.environ.get(PROGRESS_FILE_ENV)
        if not path or not items:
            return None
        try:
            return cls(path, items, deadline_seconds)
        except (IOError, OSError):
            return None  # progress is a courtesy: never a reason to fail the batch

    def start(self, index):
        with self.lock:
            self.running[index] = [time.time(), None]

    def note(self, index, text):
        with self.lock:
            if index in self.running:
                self.running[index][1] = str(text)

    def finish(self, index, result):
        with self.lock:
            if isinstance(result, dict) and result.get("deferred"):
                # a worker's part is done but the machine still has to get there (a droplet
                # booting): the module waits for these together after the batch
                message = " ".join(str(result.get("msg") or "").split()).split(" (", 1)[0][:80]
                self.running[index][1] = "%s, then the cloud" % message if message else "the cloud"
                return
            self.running.pop(index, None)
            self.done += 1
            if isinstance(result, dict) and result.get("failed"):
                self.failed += 1

    def snapshot(self):
        with self.lock:
            running = sorted(self.running.items(), key=lambda entry: entry[1][0])
            return {"total": self.total, "done": self.done, "failed": self.failed, "deadline": self.deadline,
                    "started": self.started, "now": time.time(),
                    "running": [{"label": self.labels[index], "since": since, "waits": waits}
                                for index, (since, waits) in running[:5]],
                    "running_count": len(running)}

    def write(self):
        temporary = "%s.%d.tmp" % (self.path, os.getpid())
        with open(temporary, "w") as stream:
            json.dump(self.snapshot(), stream)
        os.replace(temporary, self.path)

    def _loop(self):
        while not self.stopped.wait(PROGRESS_WRITE_SECONDS):
            try:
                self.write()
            except (IOError, OSError):
                return

    def settle(self):
        """Every item has its final result: the module's waits after the batch are over."""
        with self.lock:
            self.done += len(self.running)
            self.running.clear()

    def stop(self):
        self.stopped.set()
        try:
            self.write()
        except (IOError, OSError):
            pass


def _clock(epoch):
    return time.strftime("%H:%M:%S UTC", time.gmtime(epoch))


def first_line(state):
    """``100 items, deadline 900 s (04:21:07 UTC)``: what the batch is and when it must end."""
    deadline = state.get("deadline")
    if deadline:
        return "%d items, deadline %d s (%s)" % (state["total"], deadline, _clock(state["started"] + deadline))
    return "%d items, no deadline" % state["total"]


def progress_line(state):
    """``37/100 done, 2 failed, 41 s; waiting for 8 items: vm-38 (created droplet 12, then the
    cloud, 12 s), vm-39 (3 s) ... and 5 more``: the oldest items first, with how long each runs."""
    elapsed = int(state.get("now", time.time()) - state["started"])
    line = "%d/%d done, %d failed, %d s" % (state["done"], state["total"], state["failed"], elapsed)
    running = state.get("running") or []
    count = state.get("running_count", len(running))
    if not count:
        return line + "; starting the next items"
    named = []
    for entry in running[:3]:
        age = int(state.get("now", time.time()) - entry["since"])
        named.append("%s (%s%d s)" % (entry["label"], ("%s, " % entry["waits"]) if entry.get("waits") else "", age))
    more = " and %d more" % (count - len(named)) if count > len(named) else ""
    return "%s; waiting for %d item%s: %s%s" % (line, count, "" if count == 1 else "s", ", ".join(named), more)


def item_line(item):
    """One item's result as a line: ``vm-1 (<uuid>): created: created droplet 41 ...``."""
    facts = item.get("droplet") if isinstance(item.get("droplet"), dict) else {}
    name = item.get("resource_name") or item.get("name") or facts.get("name")
    uuid = item.get("resource_uuid") or item.get("order_uuid") or item.get("uuid")
    what = "%s (%s)" % (name, uuid) if name and uuid else (name or uuid or "item")
    status = item.get("action") or item.get("outcome") or ("changed" if item.get("changed") else "ok")
    if item.get("failed"):
        status = "failed"
    if item.get("retry"):
        status += ", retry"
    message = " ".join(str(item.get("msg") or "").split())
    return "%s: %s%s" % (what, status, (": " + message) if message else "")
