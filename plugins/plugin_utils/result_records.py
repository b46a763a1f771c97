# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""What the ``waldur_json`` callback makes of a task's result: the parts of ansible-core's
``TaskResult`` across releases, a task's message as log text, the items of a batch module's
results (plain or packed) and of a claim's turned-down orders as records, the pass summary a role
hands over as data, how an offering's pass ended, and the level of a summary. Plain functions of
the result's data: the callback adds the context, masks the secrets and prints."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import unpack

# Keys of a batch module's item result that are worth a log line (never free-form data).
ITEM_KEYS = ("outcome", "resource_name", "action", "backend_id", "state", "actions", "retry")
LONG_TEXT = 4000
# The fact a pass role sets before it prints its summary line (the filter pass_summary_data):
# {fields: {offering, pass, counts ..., seconds}, line: the text the next task prints}.
SUMMARY_FACT = "agent_pass_summary"
# agent_pass sets this variable on the tasks of an offering's pass: the callback holds that pass's
# summary until the offering's end (the fact below), so that the one summary carries its status.
HOLD_SUMMARY_VAR = "agent_pass_hold_summary"
# The fact agent_pass sets when an offering's pass ends: pass, offering, status (ok or failed), reason.
OFFERING_END_FACT = "agent_pass_offering_end"
# A turned-down order still in its state after the claim was only judged (check mode).
_WOULD = {"rejected": "would_reject", "erred": "would_erred"}


# ansible-core 2.19 made TaskResult's parts public (result.task, .host, .result,
# .task_fields); 2.18 and older have only the underscored attributes.
def result_data(result):
    data = getattr(result, "result", None)
    return data if isinstance(data, dict) else result._result


def result_task(result):
    return getattr(result, "task", None) or result._task


def result_host(result):
    return getattr(result, "host", None) or result._host


def result_task_fields(result):
    fields = getattr(result, "task_fields", None)
    return fields if fields is not None else result._task_fields


def task_name(result):
    """The task's name without its role: ansible-core 2.21's task_name adds the role
    ("waldur.site_agent.order_process : Settle ..."), older releases do not, and a log's
    ``task`` field must not change with the release."""
    task = result_task(result)
    name = to_text(result.task_name) if hasattr(result, "task_name") else to_text(task.get_name())
    role = getattr(task, "_role", None)
    if role is not None:
        for role_name in (role.get_name(), role.get_name(include_role_fqcn=False)):
            prefix = "%s : " % to_text(role_name)
            if name.startswith(prefix):
                return name[len(prefix):]
    return name


def holds_summary(task):
    """True for a task of agent_pass's offering block, whose end says how the offering's pass ended."""
    try:
        return bool(task.get_vars().get(HOLD_SUMMARY_VAR))
    except Exception:  # pylint: disable=broad-except
        return False


def task_offering(task, host):
    """The offering a task works for: the passes' include loop variable ``waldur_offering``
    (only its name is read), else the inventory host's offering."""
    try:
        offering = task.get_vars().get("waldur_offering")
    except Exception:  # pylint: disable=broad-except
        offering = None
    if isinstance(offering, dict) and isinstance(offering.get("name"), str):
        return to_text(offering["name"])
    name = host.vars.get("waldur_offering_name") if host is not None else None
    return to_text(name) if isinstance(name, str) else None


def summary_text(summary):
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


def traceback_text(exception):
    """The traceback of a failure, if it has one (2.19 gives every failure an error summary;
    only a module that raised has a traceback worth printing)."""
    event = getattr(exception, "event", None)
    if event is not None:
        return getattr(event, "formatted_traceback", None)
    if isinstance(exception, dict):
        return (exception.get("event") or {}).get("formatted_traceback")
    return exception if isinstance(exception, str) else None


def short(text):
    text = to_text(text)
    return text if len(text) <= LONG_TEXT else text[:LONG_TEXT] + "... (%d characters cut)" % (len(text) - LONG_TEXT)


def message(value):
    """A task message as log text: strings as they are, lists joined, anything else as JSON."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        return to_text(value)
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return "; ".join(to_text(item) for item in value)
    return json.dumps(value, default=to_text, sort_keys=True)


def failure_fields(data, exception=None):
    """What a failed task's record carries besides its message: ``rc``, ``errors``, the module's
    stderr and the traceback of a module that raised, long texts cut."""
    fields = {}
    for key in ("rc", "errors"):
        if data.get(key) not in (None, "", []):
            fields[key] = data[key]
    for key in ("stderr", "module_stderr"):
        if data.get(key):
            fields[key] = short(data[key])
    traceback = traceback_text(exception or data.get("exception"))
    if traceback:
        fields["exception"] = short(traceback)
    return fields


def warning_texts(result):
    """``(category, text)`` of each warning and deprecation of a result, in that order."""
    data = result_data(result)
    warnings = list(getattr(result, "warnings", None) or data.get("warnings") or [])
    deprecations = list(getattr(result, "deprecations", None) or data.get("deprecations") or [])
    texts = []
    for category, entries in (("warning", warnings), ("deprecation", deprecations)):
        for entry in entries:
            text = summary_text(entry)
            if text:
                texts.append((category, text))
    return texts


def batch_results(data):
    """A task's C(results): the list itself, or the batch module's C(results_packed) read back,
    so a packed pass logs each item just as a plain one does. A log line never fails a run:
    anything else is no items."""
    if isinstance(data.get("results"), list):
        return data["results"]
    try:
        return unpack(data.get("results_packed"))
    except ValueError:
        return []


def is_batch_item(item):
    return isinstance(item, dict) and ("order_uuid" in item or "resource_uuid" in item) and "ansible_loop_var" not in item


def rejected_orders(data):
    """The orders a claim turned down before approval (C(rejected_orders)), each as a batch item:
    they never reach a batch module's results, yet each is an order of the pass with an outcome."""
    rejected = data.get("rejected_orders")
    if not isinstance(rejected, list):
        return []
    items = []
    for order in rejected:
        if isinstance(order, dict) and order.get("uuid"):
            item = dict((key, order.get(key)) for key in ITEM_KEYS + ("resource_uuid", "msg"))
            item["order_uuid"] = order["uuid"]
            if order.get("state") != order.get("outcome"):
                item["outcome"] = _WOULD.get(order.get("outcome"), order.get("outcome"))
            items.append(item)
    return items


def item_record(item, task_fields, level=None):
    """One batch item as ``(event, level, fields, failed)``: its order and resource, its status and
    the keys worth a line (``ITEM_KEYS``), the item's message as the event; ``level`` for an item
    that did not fail (info by default). ``failed``: the item is a failure worth reporting. An
    item marked no_log shows its order and resource only."""
    fields = dict((key, task_fields[key]) for key in ("playbook", "play", "task", "host", "offering"))
    fields.update(order=item.get("order_uuid"), resource=item.get("resource_uuid"))
    failed = bool(item.get("failed"))
    if item.get("_ansible_no_log"):
        fields["censored"] = True
        return "item hidden by no_log", "error" if failed else "info", fields, False
    fields.update(status="failed" if failed else ("changed" if item.get("changed") else "ok"),
                  changed=bool(item.get("changed")))
    for key in ITEM_KEYS:
        if item.get(key) not in (None, "", []):
            fields[key] = item[key]
    event = message(item.get("msg")) or ("item failed" if failed else "item %s" % (item.get("action") or "done"))
    return event, "error" if failed else (level or "info"), fields, failed


def pass_summary_of(data):
    """The pass summary a role set as data (``SUMMARY_FACT``) as ``(fields, line)``, or None: the
    fields in their order (``offering`` and ``pass`` first) and the line the role prints next."""
    facts = data.get("ansible_facts")
    summary = facts.get(SUMMARY_FACT) if isinstance(facts, dict) else None
    if not isinstance(summary, dict):
        return None
    fields, line = summary.get("fields"), summary.get("line")
    if not isinstance(fields, dict) or not isinstance(line, str) or "offering" not in fields or "pass" not in fields:
        return None
    return dict(fields), line


def offering_end(data):
    """How an offering's pass ended (agent_pass's C(agent_pass_offering_end) fact), or None."""
    facts = data.get("ansible_facts")
    end = facts.get(OFFERING_END_FACT) if isinstance(facts, dict) else None
    if isinstance(end, dict) and end.get("offering") not in (None, "") and end.get("pass"):
        return end
    return None


def summary_level(fields):
    """A failed offering's summary is an error; one with erred, failed, refused or diverged work a warning."""
    if fields.get("status") == "failed":
        return "error"
    troubled = any(isinstance(fields.get(key), int) and not isinstance(fields.get(key), bool) and fields[key] > 0
                   for key in ("erred", "failed", "refused", "diverged"))
    return "warning" if troubled else "info"
