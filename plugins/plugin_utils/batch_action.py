# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Run a module and say how it is getting on while it runs; at -v, say what it returned in a few lines.

A batch can run for minutes (900 s by default), and so can the reads before it (a prefetch
listing, a claim's listings, 10,000 resources listed): without a word, cron mail, AWX's job output
and journald show nothing moving. So while the module runs, this plugin reads the progress file
the batch engine writes (``core/progress.py``: from the module's first batch runner on) and, once
the task has run 10 seconds, prints a line at least every 30 seconds: what the module reads and
the calls it has sent so far (``reading 216 resources' machines: 14 reads so far, 12 s``), and in
a batch how many items and the deadline, then the items done and failed and what the batch waits
for, the seconds always counted from the task's start. A module without a batch runner (an info
module) says what it reads and for how long. Lines are printed with Ansible's Display from the
task's worker process, which every supported ansible-core (2.18 and later) hands to the
controller's own Display: the default callback's stdout, AWX's job output (its callback turns
displayed lines into events) and journald see them. With the collection's JSON callback as the
stdout callback, the line is one JSON object like the callback's own.

At ``-v`` the default callback would print the module's result as one line of JSON, with a
packed list (``orders_packed``, ``results_packed``) as one escaped text of up to megabytes. This
plugin prints a summary instead and keeps the result itself out of the display
(``_ansible_verbose_override``): the items one line each (resource, action or state, message),
the first 20 (failed ones first) and "... and N more", then the rest of the result with every
list cut to its first entries and every long text cut short. ``-vv`` prints every item, ``-vvv``
the whole result as before. The registered result is untouched, so the tasks that read it and the
JSON callback (which gets every item) are too; a short result with no items is left to Ansible.

The modules run on the controller (``connection: local``), where the progress file is, inside
the task's worker (``plugin_utils/controller_module.py``); where a module runs the usual way (another
connection or interpreter) it runs without progress lines.

A line displayed from the worker is written by the controller's results thread, the thread that
also hands the workers' results to the play. When the controller's stdout is gone (ansible-runner,
which ignores SIGHUP, killed with the pty it reads; a closed pipe), that write fails, the thread
ends without a word and the controller waits for the task's result for ever, holding the pass
lock. So before each message the watcher looks at the controller's stdout and, once it is gone,
prints nothing more: the controller then meets the dead stdout on its own main thread, as it does
without this plugin, and ends. (Left: a terminal that goes in the milliseconds between the look
and the controller's write, the window ansible-core itself leaves open for a loop's items.)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ansible import constants as C
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.waldur.site_agent.plugins.plugin_utils.log_record import log_record
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import is_packed, unpack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.progress import (
    BATCH,
    ENDED,
    PROGRESS_FILE_ENV,
    first_line,
    item_line,
    progress_line,
    reading_line,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.controller_module import run_here, runs_here
from ansible_collections.waldur.site_agent.plugins.plugin_utils.output_guard import controller_output_gone

display = Display()

# When the first line comes and how often the next ones do. The environment variables exist for
# the tests, which cannot wait half a minute; operators have no reason to set them.
FIRST_AFTER_ENV = "WALDUR_SITE_AGENT_PROGRESS_AFTER"
EVERY_ENV = "WALDUR_SITE_AGENT_PROGRESS_EVERY"
FIRST_AFTER_SECONDS = 10.0
EVERY_SECONDS = 30.0
JSON_CALLBACK = "waldur.site_agent.waldur_json"
JSON_LOGGER_DEFAULT = "waldur_site_agent.ansible"

# What each module reads outside its batch (or all along, without one), for the progress lines;
# %s: how many resources the task's items are ("216 resources").
READING = {
    "azure_audit": "listing the subscription's machines",
    "azure_catalogue_info": "reading Azure's catalogue",
    "azure_vm_chain": "reading %s' machines",
    "azure_vm_chain_info": "reading %s' machines",
    "do_audit": "listing the account's droplets",
    "do_catalogue_info": "reading DigitalOcean's catalogue",
    "do_droplet": "reading %s' droplets",
    "do_droplet_info": "reading %s' droplets",
    "waldur_audit_info": "listing the offering's resources and orders",
    "waldur_orders": "reading the offering's orders",
    "waldur_resource_metadata": "reading %s",
    "waldur_resource_state": "reading %s",
    "waldur_resources_info": "listing the offering's resources",
    "waldur_usage": "reading %s' usage",
}
# The options a task's items come in (one per resource), plain or packed.
ITEM_OPTIONS = ("droplets", "machines", "backend_ids", "usages", "resources")

# What -v prints of a result instead of the whole of it, so that no task prints more than a few
# kilobytes whatever its batch size: the first ITEMS_AT_V items (-vv: all), each line cut at
# ITEM_CHARS; the rest with lists cut to LIST_ENTRIES entries, mappings to MAPPING_KEYS keys and
# the texts inside them to TEXT_CHARS characters, the whole cut at LINE_CHARS.
ITEM_KEYS = ("results", "orders", "resources", "machines", "droplets")  # and each as <key>_packed
NOT_SHOWN = ("failures", "diff", "invocation", "warnings", "deprecations", "exception")
ITEMS_AT_V = 20
ITEM_CHARS = 500
LIST_ENTRIES = 5
MAPPING_KEYS = 30
TEXT_CHARS = 300
LINE_CHARS = 3000


def _seconds(name, default):
    try:
        value = float(os.environ.get(name) or default)
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(eq=False)
class ProgressWatcher:
    """Reads the progress file once a second on a thread; prints through ``emit(lines, state)``
    while ``output_alive()`` says the controller's stdout is there, and never after it was not.
    ``doing()``: what the module reads, in words; ``started``: the task's start, which every line
    counts its seconds from (default: now)."""

    path: str
    emit: Callable
    first_after: float
    every: float
    hide_names: bool = False
    output_alive: Callable = lambda: True
    doing: Callable = lambda: "running"
    started: Optional[float] = None
    last: Any = field(default=None, init=False)
    announced: Any = field(default=None, init=False)  # the batch whose first line was printed
    stopped: threading.Event = field(default_factory=threading.Event, init=False)
    thread: threading.Thread = field(init=False)

    def __post_init__(self):
        if self.started is None:
            self.started = time.time()
        self.thread = threading.Thread(target=self._loop, name="waldur-progress", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopped.set()
        self.thread.join(timeout=5)

    def _read(self):
        try:
            with open(self.path) as stream:
                return json.load(stream)
        except (IOError, OSError, ValueError):
            return None

    def _lines(self, state, now):
        """The message for this look, or None when there is nothing to say."""
        if state is not None:
            state = dict(state, now=now)  # the file is up to a second old: ages and seconds as of now
        phase = (state or {}).get("phase")
        if phase == ENDED:
            return None  # the module has ended: the task's own result follows
        if state is not None and phase in (None, BATCH) and state.get("done", 0) < state.get("total", 0):
            if self.hide_names:  # a no_log task: counts only
                state = dict(state, running=[{"label": "(hidden by no_log)", "since": entry["since"], "waits": None}
                                             for entry in state.get("running") or []][:1])
            lines = []
            if state.get("batch", 1) != self.announced:  # a new batch: what it is and when it must end
                lines.append(first_line(state))
                self.announced = state.get("batch", 1)
            return lines + [progress_line(state, started=self.started)]
        if state is not None and phase is None:
            return None  # a finished batch of a module that says nothing else
        # not in a batch: reading before it or between batches, or a module without batches
        return [reading_line(state or {"now": now}, self.doing(), started=self.started)]

    def _loop(self):
        while not self.stopped.wait(1.0):
            now = time.time()
            if now - self.started < self.first_after:
                continue
            if self.last is not None and now - self.last < self.every:
                continue
            state = self._read()
            try:
                lines = self._lines(state, now)
            except Exception:  # pylint: disable=broad-except
                return  # a progress line never costs the task
            if not lines:
                continue
            if not self.output_alive():
                return  # nobody reads the lines, and a line now could hang the controller
            try:  # one message: the look at the output above covers all it prints
                self.emit(lines, state)
            except Exception:  # pylint: disable=broad-except
                return  # a progress line never costs the task
            self.last = now


def _cut(text, limit):
    return text if limit is None or len(text) <= limit else "%s... (%d characters)" % (text[:limit], len(text))


def _abridged(value):
    """``value`` with every list cut to its first entries, every mapping to its first keys and
    every text to its first characters, saying how much was left out."""
    if isinstance(value, dict):
        keys = list(value)
        shown = dict((key, _abridged(value[key])) for key in keys[:MAPPING_KEYS])
        if len(keys) > MAPPING_KEYS:
            shown["..."] = "and %d more keys" % (len(keys) - MAPPING_KEYS)
        return shown
    if isinstance(value, (list, tuple)):
        shown = [_abridged(entry) for entry in value[:LIST_ENTRIES]]
        if len(value) > LIST_ENTRIES:
            shown.append("... and %d more" % (len(value) - LIST_ENTRIES))
        return shown
    if isinstance(value, str):
        return _cut(value, TEXT_CHARS)
    return value


def _items(result):
    """The result's items (``results``, ``orders`` ...; plain or packed) and their key, or (None, None)."""
    for key in ITEM_KEYS:
        for name in (key, key + "_packed"):
            if name in result:
                try:
                    return name, unpack(result[name])
                except ValueError:
                    pass
    return None, None


def item_lines(items, every_item=False):
    """The items one line each: all of them, or the first ITEMS_AT_V (the failed ones and those
    left to retry first, in their order) and how many more there are."""
    chosen = list(range(len(items)))
    if not every_item and len(items) > ITEMS_AT_V:
        failed = [index for index in chosen if isinstance(items[index], dict)
                  and (items[index].get("failed") or items[index].get("retry"))][:ITEMS_AT_V]
        picked = set(failed)
        others = [index for index in chosen if index not in picked][:ITEMS_AT_V - len(failed)]
        chosen = sorted(failed + others)
    limit = None if every_item else ITEM_CHARS
    lines = [_cut(item_line(items[index]) if isinstance(items[index], dict) else to_text(items[index]), limit)
             for index in chosen]
    if len(chosen) < len(items):
        lines.append("... and %d more (-vv prints every one, -vvv the whole result)" % (len(items) - len(chosen)))
    return lines


def summary_lines(result, every_item=False):
    """What -v (``every_item``: -vv) prints of a module's result instead of the whole of it: the
    items one line each, then the rest abridged as one line of JSON. None when the result has no
    items and nothing to cut: Ansible's own line is as short."""
    key, items = _items(result)
    rest, shown = {}, {}
    for name, value in result.items():
        if name == key or name in NOT_SHOWN or name.startswith("_ansible_"):
            continue
        if key is not None and key.startswith("results") and name in ("results", "results_packed"):
            continue
        rest[name] = value
        if name.endswith("_packed") and is_packed(value):
            try:
                shown[name] = "%d entries, packed" % len(unpack(value))
            except ValueError:
                shown[name] = _abridged(value)
        elif isinstance(value, str):
            shown[name] = _cut(value, LINE_CHARS)  # the module's own message: as whole as the line allows
        else:
            shown[name] = _abridged(value)
    text = json.dumps(shown, sort_keys=True, default=to_text, ensure_ascii=False)
    if key is None and shown == rest and len(text) <= LINE_CHARS:
        return None
    lines = item_lines(items, every_item) if key is not None else []
    if len(text) > LINE_CHARS:
        text = "%s... (cut at %d characters; -vvv prints the whole result)" % (text[:LINE_CHARS], LINE_CHARS)
    return lines + [text]


def _item_count(args):
    """How many items the task was given (one per resource), or None."""
    for option in ITEM_OPTIONS:
        for name in (option, option + "_packed"):
            if args.get(name) is not None:
                try:
                    return len(unpack(args[name]))
                except (TypeError, ValueError):
                    return None
    return None


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp=None, task_vars=None):
        started = time.time()  # the task's start: every progress line counts from it
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        self._json = self._stdout_callback_is_json()
        self._task_vars = task_vars or {}
        if not runs_here(self, task_vars):
            result = merge_hash(result, self._execute_module(task_vars=task_vars, wrap_async=self._task.async_val))
            self._show_summary(result)
            return result
        # what ansible-core's "Using module file" says at -vvv of a module run the usual way
        display.vvv("Running %s in the task's worker, no AnsiballZ payload (plugin_utils/controller_module.py)"
                    % self._module_import_name(), host=self._task_vars.get("inventory_hostname"))
        handle, progress_path = tempfile.mkstemp(prefix="waldur-progress-", suffix=".json")
        os.close(handle)
        os.unlink(progress_path)  # the module creates it with its first batch runner
        watcher = ProgressWatcher(progress_path, self._emit, _seconds(FIRST_AFTER_ENV, FIRST_AFTER_SECONDS),
                                  _seconds(EVERY_ENV, EVERY_SECONDS), hide_names=self._no_log(),
                                  output_alive=self._controller_output_alive, doing=self._doing,
                                  started=started).start()
        try:
            result = merge_hash(result, run_here(self, self._module_import_name(), {PROGRESS_FILE_ENV: progress_path}))
        finally:
            watcher.stop()
            try:
                os.unlink(progress_path)
            except OSError:
                pass
        self._show_summary(result)
        return result

    def _module_import_name(self):
        """The module of this task: ``waldur.site_agent.do_droplet`` (however the task named it) as
        ``ansible_collections.waldur.site_agent.plugins.modules.do_droplet``."""
        namespace, collection, name = to_text(self._task.resolved_action or self._task.action).split(".")[-3:]
        return "ansible_collections.%s.%s.plugins.modules.%s" % (namespace, collection, name)

    # The progress file ---------------------------------------------------------------------

    def _doing(self):
        """What the module reads outside its batch, in words (``reading 216 resources' machines``);
        worked out once, when the first line needs it (a packed list is read to count its items)."""
        if getattr(self, "_doing_words", None) is None:
            words = READING.get(self._module_import_name().rsplit(".", 1)[-1], "running")
            if "%s" in words:
                count = _item_count(self._task.args or {})
                words %= ("%d resource%s" % (count, "" if count == 1 else "s") if count is not None
                          else "the resources")
            self._doing_words = words
        return self._doing_words

    @staticmethod
    def _controller_output_alive():
        return not controller_output_gone(os.getppid())

    # Output --------------------------------------------------------------------------------

    @staticmethod
    def _stdout_callback_is_json():
        name = to_text(C.config.get_config_value("DEFAULT_STDOUT_CALLBACK") or "")
        return name == JSON_CALLBACK

    def _no_log(self):
        return bool(self._task.no_log or getattr(self._play_context, "no_log", False))

    def _emit(self, lines, state=None):
        """Progress lines: plain text, or JSON lines when the JSON callback prints stdout."""
        if not self._json:
            display.display("\n".join("%s: %s" % (self._task.get_name(), text) for text in lines))
            return
        fields = {"task": to_text(self._task.get_name()), "host": to_text(self._task_vars.get("inventory_hostname")),
                  "status": "running"}
        offering = self._task_vars.get("waldur_offering")
        if isinstance(offering, dict) and isinstance(offering.get("name"), str):
            fields["offering"] = offering["name"]
        if state and state.get("phase") in (None, BATCH) and state.get("done", 0) < state.get("total", 0):
            fields.update(items=state.get("total"), items_done=state.get("done"),
                          items_failed=state.get("failed"), deadline=state.get("deadline"))
        calls = (state or {}).get("calls")
        if isinstance(calls, dict):
            fields.update(reads=calls.get("reads"), writes=calls.get("writes"))
        logger = os.environ.get("WALDUR_SITE_AGENT_LOGGER") or JSON_LOGGER_DEFAULT
        display.display("\n".join(json.dumps(log_record(text, "info", logger, **fields), default=to_text)
                                  for text in lines))

    def _show_summary(self, result):
        """At -v and -vv: the result in a few lines (summary_lines), and the result itself kept out
        of the display. A failed result is left whole: Ansible prints it whatever the verbosity."""
        if display.verbosity < 1 or display.verbosity > 2 or self._json or self._no_log() \
                or result.get("_ansible_no_log") or result.get("failed"):
            return
        try:
            lines = summary_lines(result, every_item=display.verbosity >= 2)
        except (TypeError, ValueError):
            return
        if not lines or not self._controller_output_alive():
            return  # the default callback's own line comes from the controller's main thread
        # one message: 10,000 items are one hand-over to the controller, not 10,000
        display.v("\n".join(lines))
        result["_ansible_verbose_override"] = True
