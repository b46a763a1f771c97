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
    line for each summary a pass role hands over as data (the C(agent_pass_summary) fact, from the
    P(waldur.site_agent.pass_summary_data#filter) filter), its fields as keys, in place of the
    C(Summarise the pass) task that prints the same summary as one C(key=value) line; and
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
import json
import os
import time

from ansible import context
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.callback import CallbackBase

from ansible_collections.waldur.site_agent.plugins.plugin_utils import backends
from ansible_collections.waldur.site_agent.plugins.plugin_utils.log_record import RECORD_KEYS, log_record
from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import (
    collect_secret_values,
    redact,
    secret_values_from_environment,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import (
    SECRET_KEYS,
    config_file_problem,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.output_guard import guard_output
from ansible_collections.waldur.site_agent.plugins.plugin_utils.result_records import (
    batch_results, failure_fields, holds_summary, is_batch_item, item_record, message, offering_end, pass_summary_of,
    rejected_orders, result_data, result_host, result_task, result_task_fields, summary_level, task_name,
    task_offering, warning_texts,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.sentry_report import SentryReport

_DEBUG_ACTIONS = frozenset(("debug", "ansible.builtin.debug", "ansible.legacy.debug"))
# The context every summary record carries, from the task that printed the summary line.
_SUMMARY_CONTEXT = ("playbook", "play", "task", "host", "duration")


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
        self._secrets = secret_values_from_environment(os.environ, backends.secret_environment())
        self._configs_read = set()
        self._sentry = SentryReport(self.get_option, self._secrets,
                                    lambda text: self._emit(text, "warning", playbook=self._playbook))
        # A pass summary set as data, by host, until the task that prints its line:
        # (fields, line, the setting task's context, held or not).
        self._pending_summaries = {}
        # Pass summaries waiting for their offering's end, by (host, offering, pass), in order.
        self._held_summaries = {}
        self._flush_registered = False

    # Output -------------------------------------------------------------------------------

    def _emit(self, event, level="info", **fields):
        record = redact(log_record(to_text(event), level, self.get_option("logger_name"), **fields), self._secrets)
        self._display.display(json.dumps(record, default=to_text))

    def _capture(self, event, fields):
        self._sentry.capture(event, fields)

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
            if dsn and not self._sentry.config_dsn:
                self._sentry.config_dsn = to_text(dsn).strip() or None
        except Exception:  # pylint: disable=broad-except
            return

    def _learn_secrets(self, data):
        collect_secret_values(data, extra_keys=SECRET_KEYS, values=self._secrets)

    # Context ------------------------------------------------------------------------------

    def _context(self, result):
        task, host = result_task(result), result_host(result)
        return {
            "playbook": self._playbook,
            "play": self._play,
            "task": task_name(result),
            "host": to_text(host.get_name()),
            "offering": task_offering(task, host),
        }

    def _duration(self, result, finished=True):
        key = (result_host(result).get_name(), result_task(result)._uuid)
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
            self._sentry.start()

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
        self._task_result(result, "changed" if result_data(result).get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._task_result(result, "failed", ignored=ignore_errors)

    def v2_runner_on_skipped(self, result):
        self._task_result(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._task_result(result, "unreachable")

    def v2_runner_item_on_ok(self, result):
        self._item_result(result, "changed" if result_data(result).get("changed") else "ok")

    def v2_runner_item_on_failed(self, result):
        self._item_result(result, "failed")

    def v2_runner_item_on_skipped(self, result):
        self._item_result(result, "skipped")

    def v2_runner_retry(self, result):
        data = result_data(result)
        fields = self._context(result)
        fields.update(attempts=data.get("attempts"), retries=data.get("retries"))
        if not data.get("_ansible_no_log"):
            fields["msg"] = message(data.get("msg")) or None
        self._emit("retrying", "warning", **fields)

    def _task_result(self, result, status, ignored=False):
        data = result_data(result)
        task = result_task(result)
        fields = self._context(result)
        fields.update(status=status, changed=bool(data.get("changed")), duration=self._duration(result))
        failure = status in ("failed", "unreachable")
        level = ("warning" if ignored else "error") if failure else "info"
        if ignored:
            fields["ignored"] = True
        is_loop = bool(getattr(task, "loop", None) or getattr(task, "loop_with", None))
        results = batch_results(data)
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
        if not failure and self._pass_summary(result, data, fields):
            self._emit_warnings(result, fields)
            return

        items = [] if is_loop else [item for item in results if is_batch_item(item)]
        if items:
            fields.update(items=len(items),
                          items_failed=sum(1 for item in items if item.get("failed")),
                          items_changed=sum(1 for item in items if item.get("changed")))
        if failure:
            event = message(data.get("msg")) or "task %s" % status
            fields.update(failure_fields(data, getattr(result, "exception", None)))
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
            for order in rejected_orders(data):
                self._emit_batch_item(order, fields, level="warning")
            end = offering_end(data)
            if end is not None:
                self._end_offering(end, fields)
        self._emit_warnings(result, fields)

    # Pass summaries -----------------------------------------------------------------------

    def _pass_summary(self, result, data, fields):
        """A pass role hands its summary over as data (``result_records.SUMMARY_FACT``), then prints
        its line with a debug task: the data is kept until that task, whose record it becomes; the
        line itself is not logged again. True when the result was one of the two."""
        task = result_task(result)
        summary = pass_summary_of(data)
        if summary is not None:
            self._pending_summaries[fields["host"]] = summary + (fields, holds_summary(task))
            return True
        pending = self._pending_summaries.get(fields["host"])
        if pending is None or task.action not in _DEBUG_ACTIONS or data.get("msg") != pending[1]:
            return False
        del self._pending_summaries[fields["host"]]
        self._emit_summary(pending[0], fields, hold=holds_summary(task))
        return True

    def _print_pending(self, host=None):
        """Summaries whose line was never printed (the printing task skipped, the run stopped): with
        the context of the task that set them."""
        for pending_host in [key for key in self._pending_summaries if host in (None, key)]:
            summary, _line, fields, hold = self._pending_summaries.pop(pending_host)
            self._emit_summary(summary, fields, hold=hold)

    def _emit_summary(self, summary, fields, hold=False):
        context_fields = dict((key, fields.get(key)) for key in _SUMMARY_CONTEXT)
        for key, value in summary.items():
            if key not in RECORD_KEYS:
                context_fields[key] = value
        if hold:
            # Emitted at the offering's end with its status: a step after the summary may still fail it.
            key = (fields["host"], to_text(summary["offering"]).strip(), to_text(summary["pass"]).strip())
            self._held_summaries[key] = context_fields
            if not self._flush_registered:
                self._flush_registered = True
                atexit.register(self._flush_summaries)
            return
        self._emit("pass summary", summary_level(context_fields), **context_fields)

    def _end_offering(self, end, task_fields):
        """The one summary record of an offering's pass, with ``status`` and, when it failed, ``reason``:
        the pass role's summary held until now, or, for an offering that failed before its role
        summarised (the offering not found in Waldur, the backend unusable, the role failing early),
        a record of its own."""
        self._print_pending(task_fields["host"])
        offering, pass_name = to_text(end["offering"]).strip(), to_text(end["pass"]).strip()
        fields = self._held_summaries.pop((task_fields["host"], offering, pass_name), None)
        failed = to_text(end.get("status")) == "failed"
        if fields is None:
            if not failed:
                return  # nothing summarised and nothing failed: nothing to say
            fields = dict((key, task_fields[key]) for key in _SUMMARY_CONTEXT)
            fields.update(offering=offering)
            fields["pass"] = pass_name
        if failed:
            fields["status"] = "failed"
            fields["reason"] = to_text(end.get("reason") or "").strip() or "failed"
        else:
            # The audit's summary has a status of its own (clean, findings).
            fields.setdefault("status", "ok")
        self._emit("pass summary", summary_level(fields), **fields)

    def _flush_summaries(self):
        """Summaries whose offering never reached its end (the run was stopped): as they are."""
        self._print_pending()
        while self._held_summaries:
            key = next(iter(self._held_summaries))
            fields = self._held_summaries.pop(key)
            self._emit("pass summary", summary_level(fields), **fields)

    # Items and warnings -------------------------------------------------------------------

    def _emit_batch_item(self, item, task_fields, level=None):
        event, level, fields, failed = item_record(item, task_fields, level)
        self._emit(event, level, **fields)
        if failed:
            self._capture(event, fields)

    def _item_result(self, result, status):
        data = result_data(result)
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
            event = message(data.get("msg")) or "item failed"
        else:
            event = "item %s" % status
            if data.get("msg") not in (None, ""):
                fields["msg"] = data["msg"]
        self._emit(event, "error" if failed else "info", **fields)
        if failed and not result_task_fields(result).get("ignore_errors"):
            self._capture(event, fields)

    def _emit_warnings(self, result, fields):
        context_fields = dict((key, fields[key]) for key in ("playbook", "play", "task", "host", "offering"))
        for category, text in warning_texts(result):
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
        self._sentry.flush()
