"""The report pass tells the truth: a usage Waldur refuses is a named failure and a non-zero
exit; an Erred resource whose machine is healthy is set OK again where Waldur offers
set_as_ok; another month's usage is read back; the month is the configuration's time zone's.

Real playbooks, the real Azure SDKs, the Waldur simulator in its default (current Waldur) and
waldur_7 (7.0.7) profiles."""

from __future__ import annotations

import datetime
import json
from zoneinfo import ZoneInfo

import pytest
import yaml

from tests.helpers import run_playbook
from tests.integration.passes import (
    MEMBERSHIP_PASS, ORDER_PASS, REPORT_PASS, assert_erred, log_lines, run_pass, update_limits, waldur_writes, write_config)
from tests.simulators.waldur import presets as W
from tests.simulators.waldur.simulator import PROFILES

pytestmark = pytest.mark.integration


def report(config, env=None, **kwargs):
    """The report pass as the timer runs it; the exit code is the caller's to judge."""
    return run_playbook(REPORT_PASS, env=dict(env or {}, WALDUR_SITE_AGENT_CONFIG=str(config)), **kwargs)


def erred_by_an_update(waldur, azure, tmp_path):
    """A running Azure machine whose resource an erred Update order left Erred (Azure refuses
    resizes; real Waldur then marks the resource Erred), beside a healthy one."""
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure)
    machines = {name: azure.app.seed_vm(name, size="Standard_B2s") for name in ("resized", "steady")}
    resources = {name: waldur.app.seed_resource(W.AZURE_OFFERING_UUID, name, backend_id=machine,
                                                limits=dict(W.AZURE_PLAN_QUOTAS))["uuid"]
                 for name, machine in machines.items()}
    order = update_limits(waldur, resources["resized"], {"cpu": 4, "ram": 8192, "disk": 30720})
    run_pass(ORDER_PASS, config)
    assert_erred(waldur, order, "resizing is not supported on Azure")
    assert waldur.app.resource(resources["resized"])["state"] == "Erred"
    return config, resources


def usages(waldur, resource_uuid):
    return {usage["type"]: usage["usage"] for usage in waldur.app.usages(resource_uuid)}


def test_a_refused_usage_fails_the_pass_naming_the_resource_until_set_as_ok_lets_it_through(
        tmp_path, waldur_sim, azure_sim):
    waldur = waldur_sim
    config, resources = erred_by_an_update(waldur, azure_sim, tmp_path)
    erred = resources["resized"]
    waldur.app.set_quirks(no_set_as_ok=True)  # Waldur 7.0.7: no way to set it OK

    first = report(config)

    assert first.rc != 0
    named = "resource resized (%s)" % erred
    assert ("usage not recorded for 1 resource(s): %s: Waldur refused the usage for" % named) in first.output
    assert "Resource is not in valid state." in first.output
    assert "%s is Erred in Waldur although its machine is healthy, and this Waldur has no set_as_ok" % named \
        in first.output
    assert "The report pass failed for: Azure VM" in first.output
    assert "failed=1 set_ok=0 still_erred=1" in first.output
    assert usages(waldur, resources["steady"]) == {"cpu": "2.00", "ram": "4096.00", "disk": "38912.00"}
    assert usages(waldur, erred) == {}

    # The same every pass until fixed: the warning and the failure come back.
    again = report(config)
    assert again.rc != 0 and "this Waldur has no set_as_ok" in again.output

    waldur.app.set_quirks(no_set_as_ok=False)  # current Waldur
    since = len(waldur.app.calls)
    fixed = run_pass(REPORT_PASS, config)

    assert waldur.app.resource(erred)["state"] == "OK"
    assert usages(waldur, erred) == {"cpu": "2.00", "ram": "4096.00", "disk": "38912.00"}
    assert waldur_writes(waldur, since) == ["resources.set_as_ok", "usages.set_usage"]
    assert "failed=0 set_ok=1 still_erred=0" in fixed.output

    since = len(waldur.app.calls)
    run_pass(REPORT_PASS, config)
    assert waldur_writes(waldur, since) == []


def test_a_dry_run_names_each_change_it_would_make_in_waldur_and_makes_none(tmp_path, waldur_sim, azure_sim):
    waldur = waldur_sim
    config, resources = erred_by_an_update(waldur, azure_sim, tmp_path)
    since = len(waldur.app.calls)

    check = run_pass(REPORT_PASS, config, check=True)

    assert waldur_writes(waldur, since) == []
    assert waldur.app.resource(resources["resized"])["state"] == "Erred"
    assert usages(waldur, resources["steady"]) == {}
    # the modules' results are packed; the pass says per resource what it would write
    for name in ("resized", "steady"):
        assert '"%s (resource %s): would send cpu, disk, ram"' % (name, resources[name]) in check.output
    assert ('"resized (resource %s): would set OK (Erred; its machine is healthy)"' % resources["resized"]
            in check.output)


def test_the_json_log_names_the_unrecorded_resource_as_an_error(tmp_path, waldur_sim, azure_sim):
    config, resources = erred_by_an_update(waldur_sim, azure_sim, tmp_path)
    waldur_sim.app.set_quirks(**PROFILES["waldur_7"])

    run = report(config, env={"ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"})

    assert run.rc != 0
    errors = [line for line in log_lines(run) if line["level"] == "error"]
    assert any("resource resized (%s)" % resources["resized"] in json.dumps(line) for line in errors), errors
    assert any(line.get("offering") == "Azure VM" for line in errors)


def last_month(zone: str) -> str:
    today = datetime.datetime.now(ZoneInfo(zone))
    index = today.year * 12 + today.month - 2
    return "%04d-%02d" % (index // 12, index % 12 + 1)


def test_another_month_lands_there_or_the_pass_fails_loudly(tmp_path, waldur_sim, azure_sim):
    waldur = waldur_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure_sim)
    for name in ("vm-a", "vm-b"):
        waldur.app.seed_resource(W.AZURE_OFFERING_UUID, name, backend_id=azure_sim.app.seed_vm(name))
    month = last_month("UTC")

    # current Waldur takes the date: both land in last month, read back after the first
    run_playbook(REPORT_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)},
                 extra_vars={"report_billing_period": month})
    assert len(waldur.app.usages(billing_period=month + "-01")) == 6

    # Waldur 7.0.7 ignores it: one resource's figures went to this month, then the pass stops
    waldur.app.reset("empty")
    waldur.app.set_quirks(**PROFILES["waldur_7"])
    for name in ("vm-a", "vm-b"):
        waldur.app.seed_resource(W.AZURE_OFFERING_UUID, name, backend_id=azure_sim.app.seed_vm(name + "-2"))
    run = run_playbook(REPORT_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)},
                       extra_vars={"report_billing_period": month})
    assert run.rc != 0
    assert "usage for %s did not land in %s" % (month, month) in run.output
    assert "nothing more was sent" in run.output
    assert len(waldur.app.calls_of("usages.set_usage")) == 1


def test_a_future_month_is_refused_and_nothing_is_sent(tmp_path, waldur_sim, azure_sim):
    waldur = waldur_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure_sim)
    waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "vm-a", backend_id=azure_sim.app.seed_vm("vm-a"))
    run = run_playbook(REPORT_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)},
                       extra_vars={"report_billing_period": "2999-01"})
    assert run.rc != 0
    assert "billing_period 2999-01 is in the future" in run.output
    assert waldur.app.calls_of("usages.set_usage") == []


def test_the_month_and_the_usage_date_follow_the_configuration_time_zone(tmp_path, waldur_sim, azure_sim):
    """Kiritimati is UTC+14: for most of the last day of a month there it is already the next."""
    waldur = waldur_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure_sim)
    settings = yaml.safe_load(config.read_text())
    settings["timezone"] = "Pacific/Kiritimati"
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "vm-a", backend_id=azure_sim.app.seed_vm("vm-a"))

    run = run_pass(REPORT_PASS, config)

    [exchange] = [e for e in waldur.app.exchanges if e["operation"] == "usages.set_usage"]
    local = datetime.datetime.now(ZoneInfo("Pacific/Kiritimati"))
    assert json.loads(exchange["request_body"])["date"] == "%04d-%02d-01T00:00:00+14:00" % (local.year, local.month)
    assert "period=%04d-%02d" % (local.year, local.month) in run.output


def test_an_unreachable_waldur_fails_each_offering_fast_in_one_line(tmp_path, waldur_sim, do_sim, azure_sim):
    """Was 68 s for two offerings, ending in a raw NewConnectionError repr."""
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        down = "http://127.0.0.1:%d/api/" % probe.getsockname()[1]
    config = write_config(tmp_path, waldur_sim, do=do_sim)
    settings = yaml.safe_load(config.read_text())
    azure = yaml.safe_load(write_config(tmp_path, waldur_sim, azure=azure_sim).read_text())["offerings"][0]
    settings["offerings"].append(azure)
    for offering in settings["offerings"]:
        offering["waldur_api_url"] = down
    config.write_text(yaml.safe_dump(settings, sort_keys=False))

    started = time.monotonic()
    # The membership pass: it reads Waldur first for both backends (DigitalOcean reports no usage).
    run = run_playbook(MEMBERSHIP_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)})
    elapsed = time.monotonic() - started

    assert run.rc != 0
    assert elapsed < 2 * 15 + 10, elapsed
    line = "cannot reach Waldur at %s (waldur_api_url): connection refused; gave up after " % down
    [verdict] = [text for text in run.output.splitlines()
                 if text.startswith("fatal:") and "The membership_sync pass failed for: " in text]
    assert verdict.count(line) == 2, verdict
    assert "DigitalOcean VM (" in verdict and "Azure VM (" in verdict
    assert "NewConnectionError" not in run.output and "object at 0x" not in run.output
