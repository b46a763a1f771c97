# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""What a module is doing: the state the batch engine writes while it runs, and its lines.

The batch engine (``core/batch.py``) keeps one ``Progress`` per module run when the environment
names a progress file (the collection's action plugins set it), from the module's first batch
runner on, and rewrites the file once a second: reading (before its first batch and between
batches, with the calls sent so far: a prefetch listing, a claim's listings) or in a batch (items
done, failed, running). The action plugin reads it on the controller and prints
``reading_line``, ``first_line`` and ``progress_line`` while the module runs, and ``item_line``
for the items at ``-v``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import threading
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core.module_end import at_module_end

# The file a batch module's action plugin (plugins/plugin_utils/batch_action.py) reads while the module
# runs, to print progress lines on the controller: set only by that plugin.
PROGRESS_FILE_ENV = "WALDUR_SITE_AGENT_PROGRESS_FILE"
# How often the file is rewritten: the plugin prints at most every few seconds, so once a second
# is fresh enough and costs nothing next to the items' API calls.
PROGRESS_WRITE_SECONDS = 1.0
_LABEL_KEYS = ("name", "resource_name", "resource_uuid", "order_uuid", "uuid")
# The phases of a module run in its progress file.
READING = "reading"  # before its first batch, and between batches
BATCH = "batch"
ENDED = "ended"
current = threading.local()  # the item the thread works on, for note()
_module = []  # the Progress of the module this process runs (module_progress)


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
    """What one module run is doing, written as JSON to ``path`` at most once a second by a daemon
    thread: ``{phase, batch, since, calls, total, done, failed, deadline, started, running:
    [{label, since, waits}]}``. ``phase`` is ``reading`` until ``begin`` starts a batch (``batch``
    counts them), and again once ``end`` closed it; ``calls`` are the module's API calls so far
    (``calls()``, e.g. ``{"reads": 14, "writes": 0}``) when it can tell them."""

    def __init__(self, path, items=None, deadline_seconds=None, calls=None):
        self.path = path
        self.calls = calls
        self.since = time.time()
        self.phase = READING
        self.batch = 0
        self.labels, self.total, self.deadline, self.started = [], 0, None, self.since
        self.done = self.failed = 0
        self.running = {}  # index -> [started, waits]
        self.lock = threading.Lock()
        self.writing = threading.Lock()
        self.stopped = threading.Event()
        if items is not None:
            self.begin(items, deadline_seconds)
        self.write()
        self.thread = threading.Thread(target=self._loop, name="batch-progress", daemon=True)
        self.thread.start()

    def begin(self, items, deadline_seconds):
        """A batch of ``items`` starts (a module may run several: a claim approves, then claims)."""
        with self.lock:
            self.labels = [item_label(item) for item in items]
            self.total = len(self.labels)
            self.deadline = deadline_seconds
            self.started = time.time()
            self.done = self.failed = 0
            self.running = {}
            self.phase = BATCH
            self.batch += 1
        try:
            self.write()  # at once: a look between two writes would still see the module reading
        except (IOError, OSError):
            pass

    def end(self):
        """The batch is over (its waits included): the module reads, or ends, from here."""
        self.settle()
        with self.lock:
            self.phase = READING

    def start(self, index):
        with self.lock:
            self.running[index] = [time.time(), None]

    def note(self, index, text):
        with self.lock:
            if index in self.running:
                self.running[index][1] = str(text)

    def finish(self, index, result):
        with self.lock:
            if isinstance(result, dict) and result.get("deferred") and index in self.running:
                # a worker's part is done but the machine still has to get there (a droplet
                # booting): the module waits for these together after the batch
                message = " ".join(str(result.get("msg") or "").split()).split(" (", 1)[0][:80]
                self.running[index][1] = "%s, then the cloud" % message if message else "the cloud"
                return
            self.running.pop(index, None)
            self.done += 1
            if isinstance(result, dict) and result.get("failed"):
                self.failed += 1

    def _calls(self):
        try:
            calls = self.calls() if self.calls is not None else None
        except Exception:  # pylint: disable=broad-except
            return None  # counters read while the module's threads move them: the next write tells
        return dict(calls) if isinstance(calls, dict) else None

    def snapshot(self):
        calls = self._calls()
        with self.lock:
            running = sorted(self.running.items(), key=lambda entry: entry[1][0])
            return {"phase": self.phase, "batch": self.batch, "since": self.since, "calls": calls,
                    "total": self.total, "done": self.done, "failed": self.failed, "deadline": self.deadline,
                    "started": self.started, "now": time.time(),
                    "running": [{"label": self.labels[index], "since": since, "waits": waits}
                                for index, (since, waits) in running[:5]],
                    "running_count": len(running)}

    def write(self):
        with self.writing:  # the thread's writes and begin's share the temporary file
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
        """The module ends: the file says so, and nothing writes it any more."""
        with self.lock:
            self.phase = ENDED
        self.stopped.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=5)
        try:
            self.write()
        except (IOError, OSError):
            pass


def module_progress(calls=None):
    """The Progress of the module this process runs, begun by its first batch runner (None when no
    progress file is named): one file per module run, however many batches it runs, so that its
    reads before and between batches are seen too. It stops when the module ends
    (``core/module_end.py``)."""
    path = os.environ.get(PROGRESS_FILE_ENV)
    if not path:
        return None
    progress = _module[0] if _module else None
    if progress is None or progress.path != path or progress.stopped.is_set():
        try:
            progress = Progress(path, calls=calls)
        except (IOError, OSError):
            return None  # progress is a courtesy: never a reason to fail the module
        _module[:] = [progress]
        at_module_end(progress.stop)
    elif calls is not None:
        progress.calls = calls  # a later runner that can count the calls
    return progress


def _clock(epoch):
    return time.strftime("%H:%M:%S UTC", time.gmtime(epoch))


def first_line(state):
    """``100 items, deadline 900 s (04:21:07 UTC)``: what the batch is and when it must end."""
    deadline = state.get("deadline")
    if deadline:
        return "%d items, deadline %d s (%s)" % (state["total"], deadline, _clock(state["started"] + deadline))
    return "%d items, no deadline" % state["total"]


def _calls_text(calls):
    counts = [(calls or {}).get(kind) or 0 for kind in ("reads", "writes")]
    text = "%d read%s" % (counts[0], "" if counts[0] == 1 else "s")
    if counts[1]:
        text += ", %d write%s" % (counts[1], "" if counts[1] == 1 else "s")
    return text


def reading_line(state, doing, started=None):
    """``reading 216 resources' machines: 14 reads so far, 12 s``: what the module does outside a
    batch (``doing``, the action plugin's words for it) and the calls it has sent, from the state
    (None: the module has said nothing yet); the seconds since ``started`` (default: the module's)."""
    now = (state or {}).get("now") or time.time()
    elapsed = int(now - (started if started is not None else (state or {}).get("since", now)))
    calls = (state or {}).get("calls")
    if calls is None:
        return "%s, %d s" % (doing, elapsed)
    return "%s: %s so far, %d s" % (doing, _calls_text(calls), elapsed)


def progress_line(state, started=None):
    """``37/100 done, 2 failed, 41 s; waiting for 8 items: vm-38 (created droplet 12, then the
    cloud, 12 s), vm-39 (3 s) ... and 5 more``: the oldest items first, with how long each runs.
    The seconds are counted from ``started`` (the task's start), else from the batch's."""
    now = state.get("now", time.time())
    elapsed = int(now - (started if started is not None else state["started"]))
    line = "%d/%d done, %d failed, %d s" % (state["done"], state["total"], state["failed"], elapsed)
    running = state.get("running") or []
    count = state.get("running_count", len(running))
    if not count:
        return line + "; starting the next items"
    named = []
    for entry in running[:3]:
        age = int(now - entry["since"])
        named.append("%s (%s%d s)" % (entry["label"], ("%s, " % entry["waits"]) if entry.get("waits") else "", age))
    more = " and %d more" % (count - len(named)) if count > len(named) else ""
    return "%s; waiting for %d item%s: %s%s" % (line, count, "" if count == 1 else "s", ", ".join(named), more)


def _state_words(item):
    """An entry that is not a result: an order (``Create executing``), a resource (``OK``), a machine
    read (``running``, ``not found``)."""
    if item.get("found") is False:
        return "not found"
    return " ".join(str(item[key]) for key in ("type", "state", "power_state", "status")
                    if isinstance(item.get(key), (str, int)) and item.get(key) != "")


def item_line(item):
    """One item as a line: ``vm-1 (<uuid>): created: created droplet 41 ...`` for a result,
    ``vm-1 (<order uuid>): Create executing`` for an order."""
    facts = item.get("droplet") if isinstance(item.get("droplet"), dict) else {}
    name = item.get("resource_name") or item.get("name") or facts.get("name")
    uuid = item.get("resource_uuid") or item.get("order_uuid") or item.get("uuid")
    what = "%s (%s)" % (name, uuid) if name and uuid else (name or uuid or item.get("backend_id") or "item")
    status = (item.get("action") or item.get("outcome") or _state_words(item)
              or ("changed" if item.get("changed") else "ok"))
    if item.get("failed"):
        status = "failed"
    if item.get("retry"):
        status += ", retry"
    message = " ".join(str(item.get("msg") or "").split())
    return "%s: %s%s" % (what, status, (": " + message) if message else "")
