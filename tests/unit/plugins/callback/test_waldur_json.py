"""The waldur_json stdout callback: JSON lines in the upstream agent's format, scrubbed."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest
import yaml

from ansible_collections.waldur.site_agent.plugins.callback import waldur_json
from tests.helpers import run_playbook
from tests.unit.plugins.callback.sentry_recorder import SentryRecorder
from tests.unit.plugins.plugin_utils.test_sentry_report import FakeSentry

PLAYBOOKS = Path(__file__).parent / "playbooks"
WALDUR_TOKEN = "waldur-token-5f2d9c81e4"
DO_TOKEN = "dop_v1_7c3e9a0b5d1f2468"
CLIENT_SECRET = "azure-client-secret-Q8~x"
ENV_TOKEN = "env-waldur-token-31ab77"
SECRETS = (WALDUR_TOKEN, DO_TOKEN, CLIENT_SECRET, ENV_TOKEN)
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$")


def site_config(sentry_dsn=""):
    return {
        "sentry_dsn": sentry_dsn,
        "offerings": [
            {"name": "DigitalOcean", "waldur_api_url": "https://waldur.example.com/api/",
             "waldur_api_token": WALDUR_TOKEN, "waldur_offering_uuid": "d0000000000000000000000000000001",
             "backend_type": "digitalocean", "order_processing_backend": "digitalocean",
             "backend_settings": {"token": DO_TOKEN}},
            {"name": "Azure", "waldur_api_url": "https://waldur.example.com/api/",
             "waldur_api_token": WALDUR_TOKEN, "waldur_offering_uuid": "a0000000000000000000000000000001",
             "backend_type": "azure", "order_processing_backend": "azure",
             "backend_settings": {"subscription_id": "sub", "tenant_id": "tenant", "client_id": "client",
                                  "client_secret": CLIENT_SECRET}},
        ],
    }


def run_cases(tmp_path, env=None, sentry_dsn=""):
    config = tmp_path / "waldur-site-agent-config.yaml"
    config.write_text(yaml.safe_dump(site_config(sentry_dsn)))
    run_env = {"ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json", "WALDUR_API_TOKEN": ENV_TOKEN}
    run_env.update(env or {})
    return run_playbook(PLAYBOOKS / "callback_cases.yml", env=run_env, extra_vars={
        "agent_pass_config": str(config), "do_token": DO_TOKEN, "waldur_token": WALDUR_TOKEN})


def parse_lines(stdout):
    """Every stdout line must be one JSON object."""
    records = []
    for number, line in enumerate(stdout.splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError as exc:
            pytest.fail(f"stdout line {number} is not JSON ({exc}): {line!r}")
        assert isinstance(record, dict), line
        records.append(record)
    return records


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("callback")
    run = run_cases(tmp_path, env={"SENTRY_DSN": "", "WALDUR_SITE_AGENT_SENTRY_DSN": ""})
    return run, parse_lines(run.stdout)


def by_task(records, task):
    return [record for record in records if record.get("task") == task]


def test_every_line_is_a_record_in_the_upstream_format(cases):
    run, records = cases
    assert run.rc == 2, run.output  # the last task fails on purpose
    assert len(records) >= 15
    for record in records:
        assert list(record)[:4] == ["event", "level", "logger", "timestamp"]
        assert record["level"] in ("info", "warning", "error")
        assert record["logger"] == "waldur_site_agent.ansible"
        assert TIMESTAMP.match(record["timestamp"]), record["timestamp"]
    assert records[0]["event"] == "playbook started"
    assert records[0]["playbook"] == "callback_cases.yml"
    assert records[-1]["event"] == "playbook finished"


def test_task_results_carry_their_context(cases):
    records = cases[1]
    [plain] = by_task(records, "A plain message")
    assert plain["event"] == "task ok" and plain["level"] == "info"
    assert plain["msg"] == "hello from the callback cases"
    assert plain["host"] == "localhost" and plain["play"] == "Callback cases"
    assert plain["changed"] is False and isinstance(plain["duration"], float)
    [skipped] = by_task(records, "Skip this one")
    assert skipped["status"] == "skipped" and skipped["level"] == "info"
    # Inside the passes' include loop the offering comes from the loop variable.
    offerings = [record["offering"] for record in by_task(records, "Say which offering this is")]
    assert offerings == ["DigitalOcean", "Azure"]


def test_failures_are_errors_with_the_message_as_event(cases):
    records = cases[1]
    [failure] = by_task(records, "Fail with a secret in the message")
    assert failure["level"] == "error" and failure["status"] == "failed"
    assert failure["event"] == ("Waldur refused token ******** for offering "
                                "a0000000-0000-0000-0000-000000000001")
    [ignored] = by_task(records, "An ignored failure")
    assert ignored["level"] == "warning" and ignored["ignored"] is True
    assert ignored["event"] == "ignored on purpose"


def test_a_failed_loop_item_is_an_error_line_of_its_own(cases):
    records = cases[1]
    skipped, failed, task_line = by_task(records, "Fail for one item of a loop")
    assert (skipped["item"], skipped["status"], skipped["level"]) == ("a", "skipped", "info")
    assert (failed["item"], failed["event"], failed["level"]) == ("b", "item b failed", "error")
    assert task_line["status"] == "failed" and task_line["items"] == 2


def test_batch_items_get_one_line_each_with_order_and_resource(cases):
    records = cases[1]
    task_line, created, refused = [r for r in by_task(records, "Create the droplets") if "category" not in r]
    assert task_line["status"] == "changed"
    assert (task_line["items"], task_line["items_failed"], task_line["items_changed"]) == (2, 1, 1)
    assert created == {**created, "event": "droplet 51234 created", "level": "info", "action": "created",
                       "backend_id": "51234", "order": "0b5e0000000000000000000000000001",
                       "resource": "9c1f0000000000000000000000000001", "changed": True}
    assert "backend_metadata" not in created
    assert refused["level"] == "error" and refused["status"] == "failed"
    assert refused["order"] == "0b5e0000-0000-0000-0000-000000000002"
    assert refused["event"] == ("GET /v2/droplets?tag_name=waldur-resource:9c1f0000000000000000000000000002"
                                "&token=******** answered 401 for ********")


def test_packed_batch_results_get_the_same_lines(cases):
    # The passes return their per-item results as results_packed (one JSON text); the log must
    # still name each order with its outcome, and mask secrets inside the packed text.
    run, records = cases
    task_line, settled, refused = [r for r in by_task(records, "Settle the orders (results packed)")
                                   if "category" not in r]
    assert (task_line["items"], task_line["items_failed"], task_line["items_changed"]) == (2, 1, 0)
    assert "results_packed" not in task_line
    assert settled == {**settled, "event": "item none", "level": "info", "outcome": "done",
                       "order": "0b5e0000000000000000000000000003", "status": "ok"}
    assert refused["level"] == "error" and refused["order"] == "0b5e0000000000000000000000000004"
    assert refused["event"] == "POST /api/marketplace-orders/ answered 401 for ********"
    for secret in SECRETS:
        assert secret not in run.stdout


def test_orders_turned_down_before_approval_get_a_warning_line_each(cases):
    records = cases[1]
    task_line, rejected, judged = [r for r in by_task(records, "Claim the orders (two turned down before approval)")
                                   if "category" not in r]
    assert task_line["level"] == "info" and "rejected_orders" not in task_line
    assert rejected == {**rejected, "level": "warning", "outcome": "rejected", "state": "rejected",
                        "order": "0b5e0000000000000000000000000005", "resource": "9c1f0000000000000000000000000005",
                        "resource_name": "web-5", "status": "ok", "changed": False}
    assert rejected["event"] == "DigitalOcean would refuse this droplet: size 'huge-999' is not a DigitalOcean droplet size"
    # still pending after the claim: check mode, so it is only what would happen
    assert (judged["outcome"], judged["state"], judged["level"]) == ("would_reject", "pending-provider", "warning")
    assert "region 'xx9'" in judged["event"]


def test_pass_summaries_become_structured_lines(cases):
    records = cases[1]
    summaries = [record for record in records if record["event"] == "pass summary"]
    assert [(s["offering"], s["pass"], s["orders"], s["done"], s["erred"], s["pending"]) for s in summaries] == [
        ("DigitalOcean", "order_process", 3, 2, 1, 0), ("Azure", "order_process", 3, 3, 0, 0)]
    assert summaries[0]["membership"] == "not applicable (access is the SSH key of the order)"
    assert [(s["seconds"], s["task"]) for s in summaries] == [(1.5, "Summarise the pass")] * 2
    # An offering with erred orders stands out.
    assert [s["level"] for s in summaries] == ["warning", "info"]
    # The summary is logged once, as data: neither the fact that carries it nor its printed line
    # is a line of its own.
    assert not by_task([r for r in records if r["event"] != "pass summary"], "Summarise the pass")
    assert not by_task(records, "Count what the pass did")


def test_warnings_and_deprecations_are_warning_lines(cases):
    records = cases[1]
    lines = [r for r in by_task(records, "Create the droplets") if "category" in r]
    assert [(r["category"], r["level"]) for r in lines] == [("warning", "warning"), ("deprecation", "warning")]
    assert lines[0]["event"] == "the endpoint answered slowly for token ********"
    assert lines[1]["event"] == "the old size names go away"


def test_no_log_results_show_only_their_status(cases):
    run, records = cases
    [hidden] = by_task(records, "Hidden success")
    assert hidden["censored"] is True and "msg" not in hidden
    [hidden_failure] = by_task(records, "Hidden failure")
    assert hidden_failure["censored"] is True and hidden_failure["status"] == "failed"
    assert hidden_failure["event"] == "task failed (output hidden by no_log)"
    assert "hidden failure" not in run.output


def test_secrets_are_masked_everywhere(cases):
    run, records = cases
    for secret in SECRETS:
        assert secret not in run.stdout
    [mapping] = by_task(records, "Show a mapping with secrets")
    assert mapping["msg"] == {"api_token": "********",
                              "note": "calling https://waldur.example.com/api/?api_key=********"}
    [environment] = by_task(records, "Show the token of the environment")
    assert environment["msg"] == "the environment says ********"
    item = next(r for r in by_task(records, "Loop over items that carry secrets") if "item" in r)
    assert item["item"] == {"name": "first", "client_secret": "********"}


def test_the_final_line_counts_per_host(cases):
    records = cases[1]
    final = records[-1]
    assert final["level"] == "error"
    counts = final["hosts"]["localhost"]
    assert counts["failed"] == 1 and counts["ignored"] == 2 and counts["skipped"] == 1
    assert counts["rescued"] == 1 and counts["changed"] == 1 and counts["ok"] >= 10
    assert (final["ok"], final["failed"]) == (counts["ok"], 1)
    assert final["seconds"] > 0


# Sentry -------------------------------------------------------------------------------------


def test_failures_go_to_sentry_scrubbed_and_grouped(tmp_path):
    with SentryRecorder() as sentry:
        run = run_cases(tmp_path, env={"WALDUR_SITE_AGENT_SENTRY_DSN": sentry.dsn(7), "SENTRY_DSN": "",
                                       "SENTRY_ENVIRONMENT": "staging"})
    assert run.rc == 2, run.output
    events = sentry.events()
    # The failed batch items (plain and packed), the failed loop item (not the loop's "One or
    # more items failed") and the failed task; the ignored failures are not sent.
    assert sorted(event["message"] for event in events) == [
        "GET /v2/droplets?tag_name=waldur-resource:9c1f0000000000000000000000000002&token=******** "
        "answered 401 for ********",
        "POST /api/marketplace-orders/ answered 401 for ********",
        "Waldur refused token ******** for offering a0000000-0000-0000-0000-000000000001",
        "item b failed",
    ]
    item_event = next(event for event in events if event["message"].startswith("GET"))
    assert item_event["tags"]["order"] == "0b5e0000-0000-0000-0000-000000000002"
    assert item_event["tags"]["resource"] == "9c1f0000000000000000000000000002"
    assert item_event["tags"]["task"] == "Create the droplets"
    assert item_event["fingerprint"] == [
        "waldur_site_agent.ansible", "Create the droplets",
        "GET /v2/droplets?tag_name=waldur-resource:<uuid>&token=******** answered 401 for ********"]
    assert all(event["environment"] == "staging" and event["level"] == "error" for event in events)
    raw = sentry.raw()
    for secret in SECRETS:
        assert secret not in raw
    assert all(envelope["path"] == "/api/7/envelope/" for envelope in sentry.envelopes)


def test_the_site_config_dsn_is_used_when_no_option_is_set(tmp_path):
    with SentryRecorder() as sentry:
        run = run_cases(tmp_path, env={"WALDUR_SITE_AGENT_SENTRY_DSN": "", "SENTRY_DSN": ""},
                        sentry_dsn=sentry.dsn(3))
    assert run.rc == 2, run.output
    assert len(sentry.events()) == 4
    assert sentry.dsn(3) not in run.stdout  # the DSN is a secret of the config too


def test_missing_sentry_sdk_warns_once_and_carries_on(tmp_path):
    # A sentry_sdk that cannot be imported, ahead of the real one on the path.
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sentry_sdk.py").write_text("raise ImportError('sentry-sdk is blocked for this test')\n")
    run = run_cases(tmp_path, env={"WALDUR_SITE_AGENT_SENTRY_DSN": "http://public@127.0.0.1:9/1",
                                   "PYTHONPATH": str(blocker)})
    records = parse_lines(run.stdout)
    warnings = [r for r in records if "sentry-sdk is not installed" in r["event"]]
    assert len(warnings) == 1 and warnings[0]["level"] == "warning"
    assert run.rc == 2 and records[-1]["event"] == "playbook finished"


class RecordingDisplay:
    verbosity = 0

    def __init__(self):
        self.lines = []

    def display(self, msg, **kwargs):
        self.lines.append(msg)


@pytest.fixture
def callback(monkeypatch):
    """The callback in-process with its documented options and a fake sentry_sdk."""
    from ansible import constants

    name = "waldur.site_agent.waldur_json"
    options = yaml.safe_load(waldur_json.DOCUMENTATION)["options"]
    constants.config.initialize_plugin_configuration_definitions("callback", name, options)
    fake = FakeSentry()
    monkeypatch.setitem(sys.modules, "sentry_sdk", fake)
    monkeypatch.setenv("WALDUR_SITE_AGENT_SENTRY_DSN", "https://public@sentry.example.com/9")
    monkeypatch.setenv("SENTRY_ENVIRONMENT", "production")
    monkeypatch.setattr(waldur_json.atexit, "register", lambda function: None)
    plugin = waldur_json.CallbackModule(display=RecordingDisplay())
    plugin._load_name = name
    plugin.set_options()
    return plugin, fake


def test_sentry_is_initialised_without_locals_or_personal_data(callback):
    plugin, fake = callback
    plugin._secrets.add(DO_TOKEN)
    plugin._capture("droplet create refused for %s" % DO_TOKEN,
                    {"task": "Create the droplets", "offering": "DigitalOcean",
                     "order": "0b5e0000000000000000000000000002", "client_secret": CLIENT_SECRET})
    kwargs = fake.init_kwargs
    assert kwargs["dsn"] == "https://public@sentry.example.com/9"
    assert kwargs["environment"] == "production"
    assert kwargs["include_local_variables"] is False and kwargs["send_default_pii"] is False
    assert kwargs["default_integrations"] is False
    [event] = fake.events
    assert event["message"] == "droplet create refused for ********"
    assert event["tags"] == {"offering": "DigitalOcean", "order": "0b5e0000000000000000000000000002",
                             "task": "Create the droplets"}
    assert event["extra"] == {"client_secret": "********"}
    assert json.dumps(event).count(DO_TOKEN) == 0


def test_flush_waits_for_the_events_at_the_end(callback):
    plugin, fake = callback
    plugin._capture("boom", {"task": "t"})

    class Stats:
        processed = {"localhost": 1}

        @staticmethod
        def summarize(host):
            return {"ok": 1, "failures": 1, "changed": 0, "unreachable": 0, "skipped": 0, "rescued": 0,
                    "ignored": 0}

    plugin.v2_playbook_on_stats(Stats())
    assert fake.flushed == [5.0]
    final = json.loads(plugin._display.lines[-1])
    assert final["event"] == "playbook finished" and final["level"] == "error"
    assert final["hosts"] == {"localhost": {"ok": 1, "failed": 1, "changed": 0, "unreachable": 0,
                                            "skipped": 0, "rescued": 0, "ignored": 0}}


def test_a_bad_dsn_turns_sentry_off_once_and_the_run_goes_on(callback):
    plugin, fake = callback
    attempts = []

    def refuse(**kwargs):
        attempts.append(kwargs["dsn"])
        raise ValueError("Unsupported scheme 'ftp'")

    fake.init = refuse
    plugin._capture("first failure", {"task": "a"})
    plugin._capture("second failure", {"task": "b"})
    assert len(attempts) == 1 and fake.events == []
    [line] = [json.loads(line) for line in plugin._display.lines]
    assert line["event"] == "Sentry reporting is off: Unsupported scheme 'ftp'" and line["level"] == "warning"


def test_the_callback_wraps_the_controllers_output_in_the_one_guard(callback, monkeypatch):
    """The callback puts the guard of plugin_utils/output_guard.py around stdout and stderr as the
    playbook starts (the guard itself: tests/unit/plugins/plugin_utils/test_output_guard.py)."""
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.output_guard import OutputGuard

    plugin = callback[0]
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    plugin.v2_playbook_on_start(types.SimpleNamespace(_file_name="/p/order_process.yml"))
    assert isinstance(sys.stdout, OutputGuard) and isinstance(sys.stderr, OutputGuard)
    assert json.loads(plugin._display.lines[0])["event"] == "playbook started"


# Pass summaries as data, in-process -----------------------------------------------------------


def task_result(name, action, data, host="localhost", task_vars=None):
    """A stand-in for ansible-core's TaskResult, as much as the callback reads of it."""
    task = types.SimpleNamespace(action=action, no_log=False, loop=None, loop_with=None, _role=None,
                                 _uuid=name, get_vars=lambda: dict(task_vars or {}))
    inventory_host = types.SimpleNamespace(get_name=lambda: host, vars={})
    return types.SimpleNamespace(task=task, host=inventory_host, result=dict(data), task_name=name, task_fields={})


def summary_fact(offering="DigitalOcean", line="offering=DigitalOcean pass=report sent=3 seconds=0.5"):
    fields = {"offering": offering, "pass": "report", "sent": 3, "refused": 1, "seconds": 0.5}
    return {"ansible_facts": {"agent_pass_summary": {"fields": fields, "line": line}}}


def records_of(plugin):
    return [json.loads(line) for line in plugin._display.lines]


def test_the_summary_data_becomes_the_record_of_the_task_that_prints_its_line(callback):
    plugin = callback[0]
    plugin.v2_runner_on_ok(task_result("Count what the pass did", "ansible.builtin.set_fact", summary_fact()))
    assert plugin._display.lines == []  # the data alone says nothing yet
    line = "offering=DigitalOcean pass=report sent=3 seconds=0.5"
    plugin.v2_runner_on_ok(task_result("Summarise the pass", "ansible.builtin.debug", {"msg": line}))
    [record] = records_of(plugin)
    # the fields as they were set, typed and in order, never read back from the line
    assert record == {**record, "event": "pass summary", "level": "warning", "task": "Summarise the pass",
                      "offering": "DigitalOcean", "pass": "report", "sent": 3, "refused": 1, "seconds": 0.5}
    assert list(record)[-5:] == ["offering", "pass", "sent", "refused", "seconds"]
    # another message of the same kind is an ordinary line
    plugin.v2_runner_on_ok(task_result("Summarise the pass", "ansible.builtin.debug", {"msg": line}))
    assert records_of(plugin)[-1]["event"] == "task ok" and records_of(plugin)[-1]["msg"] == line


def test_a_line_that_is_not_the_summarys_is_logged_as_it_is(callback):
    plugin = callback[0]
    plugin.v2_runner_on_ok(task_result("Count what the pass did", "ansible.builtin.set_fact", summary_fact()))
    plugin.v2_runner_on_ok(task_result("Say something else", "ansible.builtin.debug",
                                       {"msg": "offering=DigitalOcean pass=report sent=4"}))
    [record] = records_of(plugin)
    assert (record["event"], record["msg"]) == ("task ok", "offering=DigitalOcean pass=report sent=4")
    assert "sent" not in record  # no text is parsed into fields


def test_a_held_summary_waits_for_its_offerings_end_and_takes_its_status(callback):
    plugin = callback[0]
    held = {"agent_pass_hold_summary": True}
    plugin.v2_runner_on_ok(task_result("Count what the pass did", "ansible.builtin.set_fact", summary_fact(),
                                       task_vars=held))
    plugin.v2_runner_on_ok(task_result("Summarise the pass", "ansible.builtin.debug",
                                       {"msg": "offering=DigitalOcean pass=report sent=3 seconds=0.5"},
                                       task_vars=held))
    assert plugin._display.lines == []
    end = {"ansible_facts": {"agent_pass_offering_end": {"pass": "report", "offering": "DigitalOcean",
                                                         "status": "failed", "reason": "usage refused"}}}
    plugin.v2_runner_on_ok(task_result("Say how the pass ended - DigitalOcean", "ansible.builtin.set_fact", end))
    summary = next(record for record in records_of(plugin) if record["event"] == "pass summary")
    assert (summary["task"], summary["status"], summary["reason"], summary["level"]) == (
        "Summarise the pass", "failed", "usage refused", "error")
    assert summary["sent"] == 3


def test_a_summary_whose_line_was_never_printed_is_still_logged(callback):
    plugin, _fake = callback
    plugin.v2_runner_on_ok(task_result("Count what the pass did", "ansible.builtin.set_fact", summary_fact()))

    class Stats:
        processed = {}

    plugin.v2_playbook_on_stats(Stats())
    summary, final = records_of(plugin)
    assert (summary["event"], summary["task"], summary["sent"]) == ("pass summary", "Count what the pass did", 3)
    assert final["event"] == "playbook finished"
