# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Run a batch module and say how it is getting on while it runs; print its items one line each.

A batch can run for minutes (900 s by default): without a word, cron mail, AWX's job output and
journald show nothing moving. So while the module runs, this plugin reads the progress file the
batch engine writes (``core/batch.py``: ``Progress``) and, once the batch has run 10 seconds,
prints a line saying how many items and the deadline, then at least every 30 seconds the items
done and failed and what the batch waits for. Lines are printed with Ansible's Display from the
task's worker process, which every supported ansible-core (2.18 and later) hands to the
controller's own Display: the default callback's stdout, AWX's job output (its callback turns
displayed lines into events) and journald see them. With the collection's JSON callback as the
stdout callback, the line is one JSON object like the callback's own.

At ``-v`` and ``-vv`` the default callback would print the module's result as JSON, with a
packed list (``results_packed``) as one escaped text of up to tens of kilobytes. This plugin
prints one line per item instead (resource, action, message) and keeps the result itself out of
the display; the registered result is untouched, so the tasks that read it are too. ``-vvv``
prints the whole result as before.

The modules run on the controller (``connection: local``), where the progress file is, inside
the task's worker (``plugin_utils/in_process.py``); on any other connection the module just runs
the usual way, without progress lines.

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

import errno
import json
import os
import select
import tempfile
import threading
import time

from ansible import constants as C
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.waldur.site_agent.plugins.module_utils.core.log_record import log_record
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import unpack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.progress import (
    PROGRESS_FILE_ENV,
    first_line,
    item_line,
    progress_line,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.in_process import InProcessModule

display = Display()

# When the first line comes and how often the next ones do. The environment variables exist for
# the tests, which cannot wait half a minute; operators have no reason to set them.
FIRST_AFTER_ENV = "WALDUR_SITE_AGENT_PROGRESS_AFTER"
EVERY_ENV = "WALDUR_SITE_AGENT_PROGRESS_EVERY"
FIRST_AFTER_SECONDS = 10.0
EVERY_SECONDS = 30.0
JSON_CALLBACK = "waldur.site_agent.waldur_json"
JSON_LOGGER_DEFAULT = "waldur_site_agent.ansible"


def _seconds(name, default):
    try:
        value = float(os.environ.get(name) or default)
    except ValueError:
        return default
    return value if value > 0 else default


def controller_output_gone(controller_pid):
    """True when the controller's stdout can no longer be written: a terminal hung up (its pty's
    master closed) or a pipe nobody reads. A worker's own stdout is /dev/null, so this looks at
    the controller's through /proc; where that cannot tell (no /proc, a socket), the output is
    taken to be there."""
    path = "/proc/%d/fd/1" % controller_pid
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as exc:
        return exc.errno == errno.EIO  # a hung-up terminal cannot be opened again
    try:
        poller = select.poll()
        poller.register(descriptor, select.POLLOUT)
        return any(mask & (select.POLLHUP | select.POLLERR) for _descriptor, mask in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False
    finally:
        os.close(descriptor)


class ProgressWatcher:
    """Reads the progress file once a second on a thread; prints through ``emit(lines, state)``
    while ``output_alive()`` says the controller's stdout is there, and never after it was not."""

    def __init__(self, path, emit, first_after, every, hide_names=False, output_alive=lambda: True):
        self.output_alive = output_alive
        self.hide_names = hide_names
        self.path = path
        self.emit = emit
        self.first_after = first_after
        self.every = every
        self.started = time.time()
        self.last = None
        self.stopped = threading.Event()
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

    def _loop(self):
        while not self.stopped.wait(1.0):
            now = time.time()
            if now - self.started < self.first_after:
                continue
            if self.last is not None and now - self.last < self.every:
                continue
            state = self._read()
            if not state or state.get("done", 0) >= state.get("total", 0):
                continue  # not started yet, or finished: the task's own result follows
            if self.hide_names:  # a no_log task: counts only
                state = dict(state, running=[{"label": "(hidden by no_log)", "since": entry["since"], "waits": None}
                                             for entry in state.get("running") or []][:1])
            if not self.output_alive():
                return  # nobody reads the lines, and a line now could hang the controller
            try:  # one message: the look at the output above covers all it prints
                self.emit(([first_line(state)] if self.last is None else []) + [progress_line(state)], state)
            except Exception:  # pylint: disable=broad-except
                return  # a progress line never costs the task
            self.last = now


class ActionModule(InProcessModule, ActionBase):
    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        self._json = self._stdout_callback_is_json()
        self._task_vars = task_vars or {}
        wrap_async = self._task.async_val
        watcher = None
        self._progress_path = None
        if not wrap_async and self._is_local():
            handle, self._progress_path = tempfile.mkstemp(prefix="waldur-progress-", suffix=".json")
            os.close(handle)
            os.unlink(self._progress_path)  # the module creates it when its batch starts
            watcher = ProgressWatcher(self._progress_path, self._emit,
                                      _seconds(FIRST_AFTER_ENV, FIRST_AFTER_SECONDS),
                                      _seconds(EVERY_ENV, EVERY_SECONDS), hide_names=self._no_log(),
                                      output_alive=self._controller_output_alive).start()
        try:
            result = merge_hash(result, self._execute_module(task_vars=task_vars, wrap_async=wrap_async))
        finally:
            if watcher is not None:
                watcher.stop()
                try:
                    os.unlink(self._progress_path)
                except OSError:
                    pass
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        self._show_items(result)
        return result

    # The progress file ---------------------------------------------------------------------

    @staticmethod
    def _controller_output_alive():
        return not controller_output_gone(os.getppid())

    def _compute_environment_string(self, raw_environment_out=None):
        """The task's environment plus the progress file's path, for the module's batch engine."""
        environment = {}
        super(ActionModule, self)._compute_environment_string(environment)
        if getattr(self, "_progress_path", None):
            environment[PROGRESS_FILE_ENV] = self._progress_path
        if isinstance(raw_environment_out, dict):
            raw_environment_out.clear()
            raw_environment_out.update(environment)
        return self._connection._shell.env_prefix(**environment)

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
        if state:
            fields.update(items=state.get("total"), items_done=state.get("done"),
                          items_failed=state.get("failed"), deadline=state.get("deadline"))
        logger = os.environ.get("WALDUR_SITE_AGENT_LOGGER") or JSON_LOGGER_DEFAULT
        display.display("\n".join(json.dumps(log_record(text, "info", logger, **fields), default=to_text)
                                  for text in lines))

    def _show_items(self, result):
        """At -v and -vv: the items one line each, and the result kept out of the display."""
        if display.verbosity < 1 or display.verbosity > 2 or self._json or self._no_log() or result.get("_ansible_no_log"):
            return
        try:
            items = result["results"] if isinstance(result.get("results"), list) else unpack(result.get("results_packed"))
        except ValueError:
            return
        if not items or not self._controller_output_alive():
            return  # the default callback's own line comes from the controller's main thread
        # one message: 10,000 items are one hand-over to the controller, not 10,000
        lines = [item_line(item) for item in items if isinstance(item, dict)]
        rest = dict((key, value) for key, value in result.items()
                    if key not in ("results", "results_packed", "failures", "diff", "invocation")
                    and not key.startswith("_ansible_"))
        lines.append(json.dumps(rest, sort_keys=True, default=to_text))
        display.v("\n".join(lines))
        result["_ansible_verbose_override"] = True
