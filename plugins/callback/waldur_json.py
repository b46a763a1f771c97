# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: waldur_json
type: stdout
short_description: JSON lines in the Waldur site agent's log format, with optional Sentry reporting
version_added: 1.0.0
author:
  - Waldur site agent developers (@waldur)
description:
  - Prints one JSON object per line and nothing else, like the upstream Waldur site agent
    (structlog), so the same log shipping and alerting work for both. Every line has
    C(event) (the message), C(level) (C(info), C(warning) or C(error)), C(logger) and
    C(timestamp) (UTC, ISO 8601 with C(+00:00)), plus what is known of C(playbook), C(play),
    C(task), C(host), C(offering), C(order), C(resource), C(status), C(changed) and
    C(duration) (seconds).
  - "Lines: C(playbook started); one per task result (C(ok), C(changed), C(skipped) at level
    info; C(failed) and C(unreachable) at level error with the task's message as the event,
    or warning when the error is ignored); one per loop item; one per item of a batch
    module's C(results) or C(results_packed) (the items that carry C(order_uuid) or C(resource_uuid)), with
    C(order) and C(resource), at level error when the item failed; one at level warning per order a
    C(waldur.site_agent.waldur_orders) task turned down before approval (its C(rejected_orders), C(outcome)
    C(rejected) and the reason as the event); one per warning and deprecation; a C(pass summary)
    line for each C(Summarise the pass) task, its C(key=value) pairs as keys; and
    C(playbook finished) with the counts per host and the run time."
  - "Each offering of a pass (the C(waldur.site_agent.agent_pass) role) has one C(pass summary)
    line, written when the offering's pass ends, with C(pass), C(offering) and C(status): C(ok),
    or C(failed) with the C(reason) at level error. An offering that failed before its pass role
    summarised (not found in Waldur, Waldur unreachable, the backend refusing its credentials, the
    role failing early) still gets it, with C(pass), C(offering), C(status) and C(reason) only. The
    audit's summary keeps its own C(status) (C(clean), C(findings)) unless the offering failed."
  - "Every line of an offering's tasks carries C(offering): the offering of the passes' loop
    (C(waldur_offering), the items of that loop included), else the inventory host's."
  - "While a batch module of the collection runs longer than 10 seconds, its action plugin adds
    progress lines in the same format, at least every 30 seconds: C(status) C(running), C(task),
    C(host), C(offering), C(items), C(items_done), C(items_failed) and C(deadline), the event
    saying what the batch waits for."
  - A result marked C(no_log) is never printed, only its status. Values of keys named like
    a secret (C(token), C(secret), C(password), C(api_key), C(sentry_dsn), ...) are printed
    as C(********) at any depth, and so is every occurrence of a secret value of the site
    agent configuration (read from the host variable C(agent_pass_config), the extra variable
    C(agent_pass_config) or E(WALDUR_SITE_AGENT_CONFIG)) or of E(WALDUR_API_TOKEN),
    E(DIGITALOCEAN_ACCESS_TOKEN), E(DO_API_TOKEN), E(AZURE_SECRET), inside any text, as well as
    secret URL query parameters and URL passwords.
  - With a Sentry DSN (O(sentry_dsn), or else the C(sentry_dsn) of the site agent configuration)
    and sentry-sdk installed, every failed task, loop item and batch item is sent to Sentry as
    one event with the offering, order and resource as tags, grouped by task and message (UUIDs
    and long hex numbers in the message do not split groups). Events are scrubbed the same way
    before they leave, local variables and personal data are never sent. Without sentry-sdk a
    warning line says so once and the run carries on.
  - "When the run's stdout goes away (the terminal of ansible-runner, which ignores SIGHUP, is
    closed; nobody reads the pipe any more), the lines are dropped and the run carries on to its
    end, releasing its pass lock. Without this, ansible-core's results thread, which prints what
    the workers send (loop items, warnings, progress lines), ends on the failed write and the
    run waits for ever."
requirements:
  - sentry-sdk (only to report failures to Sentry)
options:
  logger_name:
    description: The C(logger) of every line.
    type: str
    default: waldur_site_agent.ansible
    env:
      - name: WALDUR_SITE_AGENT_LOGGER
    ini:
      - section: callback_waldur_json
        key: logger_name
  sentry_dsn:
    description:
      - The Sentry DSN to report failures to. When not set, the C(sentry_dsn) of the site agent
        configuration is used; when neither is set, nothing is sent.
      - E(WALDUR_SITE_AGENT_SENTRY_DSN) wins over E(SENTRY_DSN).
    type: str
    env:
      - name: SENTRY_DSN
      - name: WALDUR_SITE_AGENT_SENTRY_DSN
    ini:
      - section: callback_waldur_json
        key: sentry_dsn
  sentry_environment:
    description: The Sentry environment of the events.
    type: str
    env:
      - name: SENTRY_ENVIRONMENT
    ini:
      - section: callback_waldur_json
        key: sentry_environment
  sentry_flush_timeout:
    description: Seconds to wait at the end of the run for the events to be sent.
    type: float
    default: 5
    env:
      - name: WALDUR_SITE_AGENT_SENTRY_FLUSH_TIMEOUT
    ini:
      - section: callback_waldur_json
        key: sentry_flush_timeout
notes:
  - "Select it with E(ANSIBLE_STDOUT_CALLBACK=waldur.site_agent.waldur_json) or
    C(stdout_callback = waldur.site_agent.waldur_json) in the C([defaults]) section of
    C(ansible.cfg). Ansible's own warnings and errors still go to stderr."
  - "Ansible prints its verbose messages (C(-v)) on stdout; set E(ANSIBLE_VERBOSE_TO_STDERR=true)
    when running verbosely so that stdout stays JSON lines only."
"""

EXAMPLES = r"""
# WALDUR_SITE_AGENT_CONFIG=/etc/waldur/waldur-site-agent-config.yaml \
# ANSIBLE_STDOUT_CALLBACK=waldur.site_agent.waldur_json \
#   ansible-playbook waldur.site_agent.order_process
#
# One JSON object per line (wrapped here); among them, for one Create order on DigitalOcean
# (tests/integration/test_callback_examples.py checks these against a real pass):
# {"event": "playbook started", "level": "info", "logger": "waldur_site_agent.ansible",
#  "timestamp": "2026-02-03T14:02:35.551020+00:00", "playbook": "order_process.yml", "check_mode": false}
# {"event": "created droplet 418000001 do-vm-1 in ams3 (s-1vcpu-1gb, ubuntu-22-04-x64)",
#  "level": "info", "logger": "waldur_site_agent.ansible", "timestamp": "2026-02-03T14:02:59.919658+00:00",
#  "playbook": "order_process.yml", "play": "Waldur site agent - order_process pass",
#  "task": "Carry out the orders on DigitalOcean", "host": "localhost", "offering": "DigitalOcean VM",
#  "order": "0b5e5f2a9d3c4e7f8a1b2c3d4e5f6a7b", "resource": "9c1f2e3d4c5b4a69788796a5b4c3d2e1",
#  "status": "changed", "changed": true, "action": "created", "backend_id": "418000001", "retry": false}
# {"event": "set done; backend id 418000001 recorded", "level": "info", "logger": "waldur_site_agent.ansible",
#  "timestamp": "2026-02-03T14:03:05.024053+00:00", "playbook": "order_process.yml",
#  "play": "Waldur site agent - order_process pass", "task": "Settle the orders in Waldur", "host": "localhost",
#  "offering": "DigitalOcean VM", "order": "0b5e5f2a9d3c4e7f8a1b2c3d4e5f6a7b",
#  "resource": "9c1f2e3d4c5b4a69788796a5b4c3d2e1", "status": "changed", "changed": true,
#  "outcome": "done", "resource_name": "do-vm-1", "state": "done",
#  "actions": ["set_backend_id", "set_backend_metadata", "set_state_done"], "retry": false}
# {"event": "pass summary", "level": "info", "logger": "waldur_site_agent.ansible",
#  "timestamp": "2026-02-03T14:03:05.837422+00:00", "playbook": "order_process.yml",
#  "play": "Waldur site agent - order_process pass", "task": "Summarise the pass", "host": "localhost",
#  "duration": 0.358, "offering": "DigitalOcean VM", "pass": "order_process", "orders": 1, "done": 1,
#  "erred": 0, "rejected": 0, "retry": 0, "refused": 0, "failed": 0, "skipped": 0, "diverged": 0,
#  "machines_changed": 1, "api_calls": 21, "seconds": 23.6, "status": "ok"}

# ansible.cfg: JSON lines, failures to Sentry
# [defaults]
# stdout_callback = waldur.site_agent.waldur_json
# [callback_waldur_json]
# sentry_dsn = https://public@sentry.example.com/7
"""

import atexit
import errno
import json
import os
import re
import sys
import time

from ansible import context
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.callback import CallbackBase

from ansible_collections.waldur.site_agent.plugins.module_utils.core.log_record import RECORD_KEYS, log_record
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import unpack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import (
    collect_secret_values,
    redact,
    redact_text,
    secret_values_from_environment,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import UUID_WORD_PATTERN
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.site_config import (
    SECRET_KEYS,
    config_file_problem,
)

_DEBUG_ACTIONS = frozenset(("debug", "ansible.builtin.debug", "ansible.legacy.debug"))
_SUMMARY_KEY = re.compile(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=")
_INTEGER = re.compile(r"^-?\d+$")
_DECIMAL = re.compile(r"^-?\d+\.\d+$")
_LONG_HEX = re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}\b")
_RECORD_KEYS = RECORD_KEYS
# Keys of a batch module's item result that are worth a log line (never free-form data).
_ITEM_KEYS = ("outcome", "resource_name", "action", "backend_id", "state", "actions", "retry")
_LONG_TEXT = 4000
# agent_pass sets this variable on the tasks of an offering's pass: the callback holds that pass's
# summary until the offering's end (the fact below), so that the one summary carries its status.
_HOLD_SUMMARY_VAR = "agent_pass_hold_summary"
# The fact agent_pass sets when an offering's pass ends: pass, offering, status (ok or failed), reason.
_OFFERING_END_FACT = "agent_pass_offering_end"


# ansible-core 2.19 made TaskResult's parts public (result.task, .host, .result,
# .task_fields); 2.18 and older have only the underscored attributes.
def _result_data(result):
    data = getattr(result, "result", None)
    return data if isinstance(data, dict) else result._result


def _result_task(result):
    return getattr(result, "task", None) or result._task


def _result_host(result):
    return getattr(result, "host", None) or result._host


def _result_task_fields(result):
    fields = getattr(result, "task_fields", None)
    return fields if fields is not None else result._task_fields


def _task_name(result):
    """The task's name without its role: ansible-core 2.21's task_name adds the role
    ("waldur.site_agent.order_process : Settle ..."), older releases do not, and a log's
    ``task`` field must not change with the release."""
    task = _result_task(result)
    name = to_text(result.task_name) if hasattr(result, "task_name") else to_text(task.get_name())
    role = getattr(task, "_role", None)
    if role is not None:
        for role_name in (role.get_name(), role.get_name(include_role_fqcn=False)):
            prefix = "%s : " % to_text(role_name)
            if name.startswith(prefix):
                return name[len(prefix):]
    return name


def parse_summary(text):
    """``offering=DO pass=order_process orders=3 membership=not applicable (...)`` as a dict.

    A value runs up to the next `` key=``, so values may contain spaces; whole numbers
    become numbers."""
    if not isinstance(text, str):
        return {}
    matches = list(_SUMMARY_KEY.finditer(text))
    if not matches or text[:matches[0].start()].strip():
        return {}
    pairs = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        value = text[match.end():end].strip()
        if _INTEGER.match(value):
            value = int(value)
        elif _DECIMAL.match(value):
            value = float(value)
        pairs[match.group(1)] = value
    return pairs


def normalise_message(text):
    """A message with its UUIDs and long hex numbers replaced, for grouping in Sentry."""
    text = UUID_WORD_PATTERN.sub("<uuid>", to_text(text))
    return _LONG_HEX.sub("<hex>", text)


def _summary_text(summary):
    """The text of a warning/deprecation/error: a 2.19 summary object, a dict or a string."""
    event = getattr(summary, "event", None)
    if event is not None:
        return to_text(getattr(event, "msg", "") or "")
    if isinstance(summary, dict):
        inner = summary.get("event")
        if isinstance(inner, dict):
            return to_text(inner.get("msg") or "")
        return to_text(summary.get("msg") or "")
    return to_text(summary)


def _traceback_text(exception):
    """The traceback of a failure, if it has one (2.19 gives every failure an error summary;
    only a module that raised has a traceback worth printing)."""
    event = getattr(exception, "event", None)
    if event is not None:
        return getattr(event, "formatted_traceback", None)
    if isinstance(exception, dict):
        return (exception.get("event") or {}).get("formatted_traceback")
    return exception if isinstance(exception, str) else None


def _short(text):
    text = to_text(text)
    return text if len(text) <= _LONG_TEXT else text[:_LONG_TEXT] + "... (%d characters cut)" % (len(text) - _LONG_TEXT)


def _message(value):
    """A task message as log text: strings as they are, lists joined, anything else as JSON."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        return to_text(value)
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return "; ".join(to_text(item) for item in value)
    return json.dumps(value, default=to_text, sort_keys=True)


def _batch_results(data):
    """A task's C(results): the list itself, or the batch module's C(results_packed) read back,
    so a packed pass logs each item just as a plain one does. A log line never fails a run:
    anything else is no items."""
    if isinstance(data.get("results"), list):
        return data["results"]
    try:
        return unpack(data.get("results_packed"))
    except ValueError:
        return []


# A turned-down order still in its state after the claim was only judged (check mode).
_WOULD = {"rejected": "would_reject", "erred": "would_erred"}


def _rejected_orders(data):
    """The orders a claim turned down before approval (C(rejected_orders)), each as a batch item:
    they never reach a batch module's results, yet each is an order of the pass with an outcome."""
    rejected = data.get("rejected_orders")
    if not isinstance(rejected, list):
        return []
    items = []
    for order in rejected:
        if isinstance(order, dict) and order.get("uuid"):
            item = dict((key, order.get(key)) for key in _ITEM_KEYS + ("resource_uuid", "msg"))
            item["order_uuid"] = order["uuid"]
            if order.get("state") != order.get("outcome"):
                item["outcome"] = _WOULD.get(order.get("outcome"), order.get("outcome"))
            items.append(item)
    return items


def _offering_end(data):
    """How an offering's pass ended (agent_pass's C(agent_pass_offering_end) fact), or None."""
    facts = data.get("ansible_facts")
    end = facts.get(_OFFERING_END_FACT) if isinstance(facts, dict) else None
    if isinstance(end, dict) and end.get("offering") not in (None, "") and end.get("pass"):
        return end
    return None


def _summary_level(fields):
    """A failed offering's summary is an error; one with erred, failed, refused or diverged work a warning."""
    if fields.get("status") == "failed":
        return "error"
    troubled = any(isinstance(fields.get(key), int) and not isinstance(fields.get(key), bool) and fields[key] > 0
                   for key in ("erred", "failed", "refused", "diverged"))
    return "warning" if troubled else "info"


def _is_batch_item(item):
    return isinstance(item, dict) and ("order_uuid" in item or "resource_uuid" in item) and "ansible_loop_var" not in item


class OutputGuard:
    """The controller's ``sys.stdout`` or ``sys.stderr`` while this callback prints. Once a write
    finds the output gone (EIO: the terminal hung up; EPIPE: the pipe's reader ended), it and
    every later write are dropped instead of raised: raised in ansible-core's results thread, the
    error ends that thread without a word and the controller then waits for ever for the task
    results it would have handed over, with the pass lock held."""

    def __init__(self, stream):
        self.stream = stream
        self.gone = False

    def _guarded(self, operation, *args):
        if self.gone:
            return None
        try:
            return operation(*args)
        except OSError as exc:
            if exc.errno not in (errno.EIO, errno.EPIPE):
                raise
            self.gone = True
            return None

    def write(self, text):
        written = self._guarded(self.stream.write, text)
        return len(text) if written is None else written

    def flush(self):
        self._guarded(self.stream.flush)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def guard_output():
    """Put an ``OutputGuard`` around ``sys.stdout`` and ``sys.stderr`` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, OutputGuard):
            setattr(sys, name, OutputGuard(stream))


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "waldur.site_agent.waldur_json"

    def __init__(self, display=None, options=None):
        super(CallbackModule, self).__init__(display=display, options=options)
        self._playbook = None
        self._play = None
        self._loader = None
        self._started = time.monotonic()
        self._task_starts = {}
        self._secrets = secret_values_from_environment(os.environ)
        self._configs_read = set()
        self._config_sentry_dsn = None
        self._sentry_sdk = None
        self._sentry_state = None  # None: not tried yet, "on", or "off"
        # Pass summaries waiting for their offering's end, by (host, offering, pass), in order.
        self._held_summaries = {}
        self._flush_registered = False

    # Output -------------------------------------------------------------------------------

    def _emit(self, event, level="info", **fields):
        record = redact(log_record(to_text(event), level, self.get_option("logger_name"), **fields), self._secrets)
        self._display.display(json.dumps(record, default=to_text))

    # Secrets ------------------------------------------------------------------------------

    def _read_site_config(self, path):
        """Learn the secret values (and the Sentry DSN) of a site agent configuration so that
        they are masked wherever they turn up. A file that cannot be read is left alone: the
        pass reading it reports why."""
        if not isinstance(path, str) or not path or "{{" in path:
            return
        path = os.path.abspath(os.path.expanduser(to_text(path)))
        if path in self._configs_read or self._loader is None:
            return
        self._configs_read.add(path)
        try:
            if config_file_problem(path, self._loader):
                return  # an alias bomb must not be expanded here either; the pass refuses the file
            config = self._loader.load_from_file(path)
            collect_secret_values(config, extra_keys=SECRET_KEYS, values=self._secrets)
            dsn = config.get("sentry_dsn") if isinstance(config, dict) else None
            if dsn and not self._config_sentry_dsn:
                self._config_sentry_dsn = to_text(dsn).strip() or None
        except Exception:  # pylint: disable=broad-except
            return

    def _learn_secrets(self, data):
        collect_secret_values(data, extra_keys=SECRET_KEYS, values=self._secrets)

    # Context ------------------------------------------------------------------------------

    @staticmethod
    def _holds_summary(task):
        """True for a task of agent_pass's offering block, whose end says how the offering's pass ended."""
        try:
            return bool(task.get_vars().get(_HOLD_SUMMARY_VAR))
        except Exception:  # pylint: disable=broad-except
            return False

    @staticmethod
    def _offering_of(task, host):
        """The offering a task works for: the passes' include loop variable
        ``waldur_offering`` (only its name is read), else the inventory host's offering."""
        try:
            offering = task.get_vars().get("waldur_offering")
        except Exception:  # pylint: disable=broad-except
            offering = None
        if isinstance(offering, dict) and isinstance(offering.get("name"), str):
            return to_text(offering["name"])
        name = host.vars.get("waldur_offering_name") if host is not None else None
        return to_text(name) if isinstance(name, str) else None

    def _context(self, result):
        task, host = _result_task(result), _result_host(result)
        return {
            "playbook": self._playbook,
            "play": self._play,
            "task": _task_name(result),
            "host": to_text(host.get_name()),
            "offering": self._offering_of(task, host),
        }

    def _duration(self, result, finished=True):
        key = (_result_host(result).get_name(), _result_task(result)._uuid)
        started = self._task_starts.pop(key, None) if finished else self._task_starts.get(key)
        return None if started is None else round(time.monotonic() - started, 3)

    # Playbook and play --------------------------------------------------------------------

    def v2_playbook_on_start(self, playbook):
        guard_output()
        self._started = time.monotonic()
        self._playbook = os.path.basename(to_text(getattr(playbook, "_file_name", "") or "")) or None
        self._loader = playbook.get_loader() if hasattr(playbook, "get_loader") else None
        self._read_site_config(os.environ.get("WALDUR_SITE_AGENT_CONFIG"))
        self._emit("playbook started", playbook=self._playbook,
                   check_mode=bool((context.CLIARGS or {}).get("check", False)))
        if self.get_option("sentry_dsn"):
            self._sentry()

    def v2_playbook_on_play_start(self, play):
        self._play = to_text(play.get_name()).strip() or None
        variable_manager = play.get_variable_manager() if hasattr(play, "get_variable_manager") else None
        if variable_manager is not None:
            self._read_site_config(variable_manager.extra_vars.get("agent_pass_config"))
        self._emit("play started", playbook=self._playbook, play=self._play)

    def v2_playbook_on_no_hosts_matched(self):
        self._emit("no hosts matched", "warning", playbook=self._playbook, play=self._play)

    def v2_playbook_on_no_hosts_remaining(self):
        self._emit("no hosts remaining: every host failed", "error", playbook=self._playbook, play=self._play)

    def v2_runner_on_start(self, host, task):
        self._task_starts[(host.get_name(), task._uuid)] = time.monotonic()
        self._read_site_config(host.vars.get("agent_pass_config"))

    # Task results -------------------------------------------------------------------------

    def v2_runner_on_ok(self, result):
        self._task_result(result, "changed" if _result_data(result).get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._task_result(result, "failed", ignored=ignore_errors)

    def v2_runner_on_skipped(self, result):
        self._task_result(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._task_result(result, "unreachable")

    def v2_runner_item_on_ok(self, result):
        self._item_result(result, "changed" if _result_data(result).get("changed") else "ok")

    def v2_runner_item_on_failed(self, result):
        self._item_result(result, "failed")

    def v2_runner_item_on_skipped(self, result):
        self._item_result(result, "skipped")

    def v2_runner_retry(self, result):
        data = _result_data(result)
        fields = self._context(result)
        fields.update(attempts=data.get("attempts"), retries=data.get("retries"))
        if not data.get("_ansible_no_log"):
            fields["msg"] = _message(data.get("msg")) or None
        self._emit("retrying", "warning", **fields)

    def _task_result(self, result, status, ignored=False):
        data = _result_data(result)
        task = _result_task(result)
        fields = self._context(result)
        fields.update(status=status, changed=bool(data.get("changed")), duration=self._duration(result))
        failure = status in ("failed", "unreachable")
        level = ("warning" if ignored else "error") if failure else "info"
        if ignored:
            fields["ignored"] = True
        is_loop = bool(getattr(task, "loop", None) or getattr(task, "loop_with", None))
        results = _batch_results(data)
        if is_loop:
            fields["items"] = len(results)

        if data.get("_ansible_no_log") or task.no_log is True:
            # Only the status: a censored result's contents are never printed.
            fields["censored"] = True
            event = "task %s (output hidden by no_log)" % status
            self._emit(event, level, **fields)
            if failure and not ignored:
                self._capture(event, fields)
            self._emit_warnings(result, fields)
            return

        self._learn_secrets(data)
        if not failure and task.action in _DEBUG_ACTIONS:
            summary = parse_summary(data.get("msg"))
            if "offering" in summary and "pass" in summary:
                self._emit_summary(summary, fields, hold=self._holds_summary(task))
                self._emit_warnings(result, fields)
                return

        items = [] if is_loop else [item for item in results if _is_batch_item(item)]
        if items:
            fields.update(items=len(items),
                          items_failed=sum(1 for item in items if item.get("failed")),
                          items_changed=sum(1 for item in items if item.get("changed")))
        if failure:
            event = _message(data.get("msg")) or "task %s" % status
            for key in ("rc", "errors"):
                if data.get(key) not in (None, "", []):
                    fields[key] = data[key]
            for key in ("stderr", "module_stderr"):
                if data.get(key):
                    fields[key] = _short(data[key])
            traceback = _traceback_text(getattr(result, "exception", None) or data.get("exception"))
            if traceback:
                fields["exception"] = _short(traceback)
        else:
            event = "task %s" % status
            if data.get("msg") not in (None, ""):
                fields["msg"] = data["msg"]
        self._emit(event, level, **fields)
        # A failed loop was reported item by item already; its "One or more items failed" is not news.
        if failure and not ignored and not is_loop:
            self._capture(event, fields)
        for item in items:
            self._emit_batch_item(item, fields)
        if not failure:
            for order in _rejected_orders(data):
                self._emit_batch_item(order, fields, level="warning")
            end = _offering_end(data)
            if end is not None:
                self._end_offering(end, fields)
        self._emit_warnings(result, fields)

    def _emit_summary(self, summary, fields, hold=False):
        context_fields = dict((key, fields[key]) for key in ("playbook", "play", "task", "host", "duration"))
        for key, value in summary.items():
            if key not in _RECORD_KEYS:
                context_fields[key] = value
        if hold:
            # Emitted at the offering's end with its status: a step after the summary may still fail it.
            key = (fields["host"], to_text(summary["offering"]).strip(), to_text(summary["pass"]).strip())
            self._held_summaries[key] = context_fields
            if not self._flush_registered:
                self._flush_registered = True
                atexit.register(self._flush_summaries)
            return
        self._emit("pass summary", _summary_level(context_fields), **context_fields)

    def _end_offering(self, end, task_fields):
        """The one summary record of an offering's pass, with ``status`` and, when it failed, ``reason``:
        the pass role's summary held until now, or, for an offering that failed before its role
        summarised (the offering not found in Waldur, the backend unusable, the role failing early),
        a record of its own."""
        offering, pass_name = to_text(end["offering"]).strip(), to_text(end["pass"]).strip()
        fields = self._held_summaries.pop((task_fields["host"], offering, pass_name), None)
        failed = to_text(end.get("status")) == "failed"
        if fields is None:
            if not failed:
                return  # nothing summarised and nothing failed: nothing to say
            fields = dict((key, task_fields[key]) for key in ("playbook", "play", "task", "host", "duration"))
            fields.update(offering=offering)
            fields["pass"] = pass_name
        if failed:
            fields["status"] = "failed"
            fields["reason"] = to_text(end.get("reason") or "").strip() or "failed"
        else:
            # The audit's summary has a status of its own (clean, findings).
            fields.setdefault("status", "ok")
        self._emit("pass summary", _summary_level(fields), **fields)

    def _flush_summaries(self):
        """Summaries whose offering never reached its end (the run was stopped): as they are."""
        while self._held_summaries:
            key = next(iter(self._held_summaries))
            fields = self._held_summaries.pop(key)
            self._emit("pass summary", _summary_level(fields), **fields)

    def _emit_batch_item(self, item, task_fields, level=None):
        fields = dict((key, task_fields[key]) for key in ("playbook", "play", "task", "host", "offering"))
        fields.update(order=item.get("order_uuid"), resource=item.get("resource_uuid"))
        if item.get("_ansible_no_log"):
            fields["censored"] = True
            self._emit("item hidden by no_log", "error" if item.get("failed") else "info", **fields)
            return
        failed = bool(item.get("failed"))
        fields.update(status="failed" if failed else ("changed" if item.get("changed") else "ok"),
                      changed=bool(item.get("changed")))
        for key in _ITEM_KEYS:
            if item.get(key) not in (None, "", []):
                fields[key] = item[key]
        event = _message(item.get("msg")) or ("item failed" if failed else "item %s" % (item.get("action") or "done"))
        self._emit(event, "error" if failed else (level or "info"), **fields)
        if failed:
            self._capture(event, fields)

    def _item_result(self, result, status):
        data = _result_data(result)
        fields = self._context(result)
        fields.update(status=status, changed=bool(data.get("changed")), duration=None)
        failed = status == "failed"
        if data.get("_ansible_no_log"):
            fields["censored"] = True
            event = "item %s (output hidden by no_log)" % status
            self._emit(event, "error" if failed else "info", **fields)
            return
        self._learn_secrets(data)
        label = data.get("_ansible_item_label", data.get(data.get("ansible_loop_var") or "item"))
        fields["item"] = label
        if fields.get("offering") is None:
            # agent_pass's loop over the offerings: each item is an offering (only its name is read).
            looped = data.get("waldur_offering") if data.get("ansible_loop_var") == "waldur_offering" else None
            if isinstance(looped, dict) and isinstance(looped.get("name"), str):
                fields["offering"] = to_text(looped["name"])
        if failed:
            event = _message(data.get("msg")) or "item failed"
        else:
            event = "item %s" % status
            if data.get("msg") not in (None, ""):
                fields["msg"] = data["msg"]
        self._emit(event, "error" if failed else "info", **fields)
        if failed and not _result_task_fields(result).get("ignore_errors"):
            self._capture(event, fields)

    def _emit_warnings(self, result, fields):
        context_fields = dict((key, fields[key]) for key in ("playbook", "play", "task", "host", "offering"))
        data = _result_data(result)
        warnings = list(getattr(result, "warnings", None) or data.get("warnings") or [])
        deprecations = list(getattr(result, "deprecations", None) or data.get("deprecations") or [])
        for category, entries in (("warning", warnings), ("deprecation", deprecations)):
            for entry in entries:
                text = _summary_text(entry)
                if text:
                    self._emit(text, "warning", category=category, **context_fields)

    # The end ------------------------------------------------------------------------------

    def v2_playbook_on_stats(self, stats):
        self._flush_summaries()
        hosts = {}
        totals = dict(ok=0, changed=0, failed=0, unreachable=0, skipped=0, rescued=0, ignored=0)
        for host in sorted(stats.processed.keys()):
            summary = stats.summarize(host)
            counts = dict(ok=summary.get("ok", 0), changed=summary.get("changed", 0),
                          failed=summary.get("failures", 0), unreachable=summary.get("unreachable", 0),
                          skipped=summary.get("skipped", 0), rescued=summary.get("rescued", 0),
                          ignored=summary.get("ignored", 0))
            hosts[to_text(host)] = counts
            for key, value in counts.items():
                totals[key] += value
        level = "error" if totals["failed"] or totals["unreachable"] else "info"
        self._emit("playbook finished", level, playbook=self._playbook, hosts=hosts,
                   seconds=round(time.monotonic() - self._started, 3), **totals)
        self._flush_sentry()

    # Sentry -------------------------------------------------------------------------------

    def _sentry(self):
        """The initialised sentry_sdk module, or None when there is no DSN or no sentry-sdk."""
        if self._sentry_state == "on":
            return self._sentry_sdk
        if self._sentry_state == "off":
            return None
        dsn = self.get_option("sentry_dsn") or self._config_sentry_dsn
        if not dsn:
            return None  # a site agent configuration read later may still bring one
        try:
            import sentry_sdk
        except ImportError:
            self._sentry_state = "off"
            self._emit("sentry-sdk is not installed: failures are not reported to Sentry "
                       "(pip install sentry-sdk)", "warning", playbook=self._playbook)
            return None
        self._secrets.add(to_text(dsn))
        try:
            self._init_sentry(sentry_sdk, dsn)
        except Exception as exc:  # pylint: disable=broad-except
            # A bad DSN must not cost the run or repeat on every failure.
            self._sentry_state = "off"
            self._emit("Sentry reporting is off: %s" % to_text(exc), "warning", playbook=self._playbook)
            return None
        atexit.register(self._flush_sentry)
        self._sentry_sdk = sentry_sdk
        self._sentry_state = "on"
        return sentry_sdk

    def _init_sentry(self, sentry_sdk, dsn):
        sentry_sdk.init(
            dsn=dsn,
            environment=self.get_option("sentry_environment") or None,
            include_local_variables=False,
            send_default_pii=False,
            # Only what this plugin captures: no logging, excepthook or threading hooks
            # inside Ansible's controller and its forks.
            default_integrations=False,
            auto_enabling_integrations=False,
            before_send=self._before_send,
            before_breadcrumb=self._before_breadcrumb,
        )

    def _before_send(self, event, hint):
        return redact(event, self._secrets)

    def _before_breadcrumb(self, crumb, hint):
        return redact(crumb, self._secrets)

    def _capture(self, message, fields):
        sentry_sdk = self._sentry()
        if sentry_sdk is None:
            return
        message = redact_text(to_text(message), self._secrets)
        tags = dict((key, to_text(fields[key])) for key in ("offering", "order", "resource", "host", "task", "playbook")
                    if fields.get(key) not in (None, ""))
        extra = dict((key, value) for key, value in fields.items() if key not in tags and value is not None)
        sentry_sdk.capture_event({
            "message": message,
            "level": "error",
            "logger": self.get_option("logger_name"),
            "tags": tags,
            "extra": extra,
            "fingerprint": [self.get_option("logger_name"), to_text(fields.get("task") or ""),
                            normalise_message(message)],
        })

    def _flush_sentry(self):
        if self._sentry_state == "on":
            self._sentry_sdk.flush(timeout=self.get_option("sentry_flush_timeout"))
