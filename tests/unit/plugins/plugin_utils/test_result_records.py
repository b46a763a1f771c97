"""What the waldur_json callback makes of a task's result (plugins/plugin_utils/result_records.py):
messages as log text, batch items (plain and packed) and turned-down orders as records, the pass
summary handed over as data, an offering's end and the level of a summary."""

from __future__ import annotations

import json
import types

from ansible_collections.waldur.site_agent.plugins.plugin_utils import result_records as records

TASK_FIELDS = {"playbook": "order_process.yml", "play": "pass", "task": "Settle the orders", "host": "localhost",
               "offering": "DigitalOcean", "status": "changed", "duration": 1.5}


def test_messages_become_log_text():
    assert records.message(None) == records.message("") == ""
    assert records.message("plain") == "plain"
    assert records.message(["one", "two"]) == "one; two"
    assert records.message({"b": 1, "a": [2]}) == json.dumps({"a": [2], "b": 1})
    long_text = "x" * (records.LONG_TEXT + 10)
    assert records.short(long_text).endswith("... (10 characters cut)")
    assert records.short("short") == "short"


def test_a_failure_carries_its_rc_stderr_and_the_traceback_of_a_module_that_raised():
    data = {"rc": 1, "errors": [], "stderr": "boom", "module_stderr": "", "exception": "Traceback (most recent...)"}
    assert records.failure_fields(data) == {"rc": 1, "stderr": "boom", "exception": "Traceback (most recent...)"}
    # ansible-core 2.19's error summary: only its formatted traceback is printed
    summary = types.SimpleNamespace(event=types.SimpleNamespace(formatted_traceback="Traceback (2.19)"))
    assert records.failure_fields({}, summary) == {"exception": "Traceback (2.19)"}
    assert records.failure_fields({"rc": 0}) == {"rc": 0}


def test_warnings_and_deprecations_in_that_order():
    result = types.SimpleNamespace(result={"warnings": ["slow", ""], "deprecations": [{"msg": "old names"}]})
    assert records.warning_texts(result) == [("warning", "slow"), ("deprecation", "old names")]


def test_batch_results_plain_packed_or_none():
    assert records.batch_results({"results": [{"order_uuid": "a"}]}) == [{"order_uuid": "a"}]
    assert records.batch_results({"results_packed": '[{"order_uuid": "b"}]'}) == [{"order_uuid": "b"}]
    assert records.batch_results({"results_packed": "[not json"}) == []
    assert records.batch_results({}) == []
    assert records.is_batch_item({"resource_uuid": "r"})
    assert not records.is_batch_item({"resource_uuid": "r", "ansible_loop_var": "item"})
    assert not records.is_batch_item("order_uuid")


def test_an_item_record_names_its_order_and_resource_and_keeps_only_known_keys():
    item = {"order_uuid": "o1", "resource_uuid": "r1", "changed": True, "failed": False, "action": "created",
            "backend_id": "51234", "backend_metadata": {"ip": "203.0.113.5"}, "msg": "droplet 51234 created"}
    event, level, fields, failed = records.item_record(item, TASK_FIELDS)
    assert (event, level, failed) == ("droplet 51234 created", "info", False)
    assert fields == {"playbook": "order_process.yml", "play": "pass", "task": "Settle the orders",
                      "host": "localhost", "offering": "DigitalOcean", "order": "o1", "resource": "r1",
                      "status": "changed", "changed": True, "action": "created", "backend_id": "51234"}
    event, level, fields, failed = records.item_record({"order_uuid": "o2", "failed": True}, TASK_FIELDS, "warning")
    assert (event, level, fields["status"], failed) == ("item failed", "error", "failed", True)
    assert records.item_record({"order_uuid": "o3"}, TASK_FIELDS, "warning")[:2] == ("item done", "warning")


def test_an_item_marked_no_log_shows_its_order_only():
    event, level, fields, failed = records.item_record(
        {"order_uuid": "o1", "failed": True, "msg": "secret stuff", "_ansible_no_log": True}, TASK_FIELDS)
    assert (event, level, failed, fields["censored"]) == ("item hidden by no_log", "error", False, True)
    assert "msg" not in fields and "status" not in fields


def test_orders_turned_down_are_items_with_their_outcome():
    data = {"rejected_orders": [
        {"uuid": "o5", "state": "rejected", "outcome": "rejected", "resource_name": "web-5", "msg": "no such size"},
        {"uuid": "o6", "state": "pending-provider", "outcome": "rejected", "msg": "no such region"},
        {"state": "rejected"}]}
    first, second = records.rejected_orders(data)
    assert (first["order_uuid"], first["outcome"], first["resource_name"], first["msg"]) == (
        "o5", "rejected", "web-5", "no such size")
    assert (second["order_uuid"], second["outcome"]) == ("o6", "would_reject")  # only judged (check mode)
    assert records.rejected_orders({"rejected_orders": "o5"}) == []


def test_the_pass_summary_is_read_as_data():
    fields = {"offering": "123", "pass": "report", "period": "2026-11", "note": "a=b c=d", "seconds": 1.0}
    data = {"ansible_facts": {records.SUMMARY_FACT: {"fields": fields, "line": "offering=123 pass=report ..."}}}
    summary, line = records.pass_summary_of(data)
    # as set: an offering named like a number stays text, a value with "=" stays whole
    assert summary == fields and list(summary) == list(fields) and line == "offering=123 pass=report ..."
    assert summary is not fields  # the callback adds to its own copy
    for broken in ({}, {"ansible_facts": {}}, {"ansible_facts": {records.SUMMARY_FACT: "offering=x pass=y"}},
                   {"ansible_facts": {records.SUMMARY_FACT: {"fields": {"offering": "x"}, "line": "l"}}},
                   {"ansible_facts": {records.SUMMARY_FACT: {"fields": fields}}}):
        assert records.pass_summary_of(broken) is None


def test_an_offerings_end_and_the_level_of_its_summary():
    end = {"pass": "report", "offering": "DO", "status": "failed", "reason": "x"}
    assert records.offering_end({"ansible_facts": {records.OFFERING_END_FACT: end}}) == end
    assert records.offering_end({"ansible_facts": {records.OFFERING_END_FACT: dict(end, offering="")}}) is None
    assert records.summary_level({"status": "failed"}) == "error"
    assert records.summary_level({"erred": 1}) == "warning"
    assert records.summary_level({"erred": True, "failed": 0, "refused": "3"}) == "info"


def test_the_task_name_drops_its_role_whatever_the_release():
    role = types.SimpleNamespace(get_name=lambda include_role_fqcn=True: (
        "waldur.site_agent.order_process" if include_role_fqcn else "order_process"))
    task = types.SimpleNamespace(_role=role, get_name=lambda: "order_process : Settle the orders")
    with_role = types.SimpleNamespace(task=task, task_name="waldur.site_agent.order_process : Settle the orders")
    assert records.task_name(with_role) == "Settle the orders"
    assert records.task_name(types.SimpleNamespace(task=task)) == "Settle the orders"


def test_the_offering_and_the_hold_come_from_the_tasks_variables():
    looped = types.SimpleNamespace(get_vars=lambda: {"waldur_offering": {"name": "Azure", "token": "x"},
                                                     records.HOLD_SUMMARY_VAR: True})
    host = types.SimpleNamespace(vars={"waldur_offering_name": "DigitalOcean"})
    assert records.task_offering(looped, host) == "Azure" and records.holds_summary(looped)
    plain = types.SimpleNamespace(get_vars=lambda: {})
    assert records.task_offering(plain, host) == "DigitalOcean" and not records.holds_summary(plain)
    assert records.task_offering(plain, None) is None

    def broken():
        raise RuntimeError("no variables")

    unreadable = types.SimpleNamespace(get_vars=broken)
    assert records.task_offering(unreadable, host) == "DigitalOcean" and not records.holds_summary(unreadable)
