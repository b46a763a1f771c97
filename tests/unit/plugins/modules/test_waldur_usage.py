"""waldur_usage: idempotent monthly usage, never a decrease, only the offering's components."""

from __future__ import annotations

import datetime
import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import waldur_usage
from tests.simulators.waldur import presets as P


def run(sim, capsys, **args):
    args.setdefault("api_url", sim.url)
    args.setdefault("api_token", P.PROVIDER_TOKEN)
    args.setdefault("offering_uuid", P.AZURE_OFFERING_UUID)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            waldur_usage.main()
    return json.loads(capsys.readouterr().out)


def this_month():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m")


def stored(sim, resource_uuid, period=None):
    return {u["type"]: u["usage"] for u in sim.app.usages(resource_uuid, (period or this_month()) + "-01")}


@pytest.fixture
def vms(waldur_sim):
    app = waldur_sim.app
    app.reset("empty")
    first = app.seed_resource(P.AZURE_OFFERING_UUID, "vm-1", backend_id="/subscriptions/s/vm-1")
    second = app.seed_resource(P.AZURE_OFFERING_UUID, "vm-2", backend_id="/subscriptions/s/vm-2")
    app.calls.clear()
    return first["uuid"], second["uuid"]


def test_usage_is_sent_rounded_and_then_not_resent(waldur_sim, capsys, vms):
    usages = [{"resource_uuid": vms[0], "usages": {"cpu": 2, "ram": 4096.004, "disk": 30720.005}},
              {"resource_uuid": vms[1], "usages": {"cpu": 1}}]

    first = run(waldur_sim, capsys, usages=usages)

    assert first["changed"] is True
    assert first["results"][0]["sent"] == {"cpu": "2.00", "ram": "4096.00", "disk": "30720.01"}
    assert stored(waldur_sim, vms[0]) == {"cpu": "2.00", "ram": "4096.00", "disk": "30720.01"}
    assert stored(waldur_sim, vms[1]) == {"cpu": "1.00"}
    posts = waldur_sim.app.calls_of("usages.set_usage")
    assert len(posts) == 2
    assert first["date"] == this_month() + "-01T00:00:00+00:00"
    assert first["totals"] == {"resources": 2, "submitted": 2, "sent": 4, "unchanged": 0, "refused": 0,
                               "omitted": 0, "closed": 0, "failed": 0}
    # one listing of the components, one of the stored usage of the whole offering and, since Waldur
    # stored nothing this month yet, a second read of the month that agrees before the first figures go
    assert len(waldur_sim.app.calls_of("offering.get")) == 1 and len(waldur_sim.app.calls_of("usages.list")) == 2

    since = len(waldur_sim.app.calls)
    second = run(waldur_sim, capsys, usages=usages)
    assert waldur_sim.app.write_calls(since) == []
    assert second["changed"] is False
    assert sorted(second["results"][0]["unchanged"]) == ["cpu", "disk", "ram"]
    assert second["results"][0]["msg"] == "unchanged"
    assert len(waldur_sim.app.calls_of("usages.list", since)) == 1  # everything stored: one read


def test_a_stored_month_that_reads_back_otherwise_sends_nothing(waldur_sim, capsys, vms):
    # Waldur holds 5 cpu for the month; the first read of it answers an empty listing whose count says
    # so too (a stale cache): taken as the truth, 2 would be sent and the bill lowered
    usages = [{"resource_uuid": vms[0], "usages": {"cpu": 5}}]
    run(waldur_sim, capsys, usages=usages)
    waldur_sim.app.add_fault("usages.list", kind="empty_items")

    result = run(waldur_sim, capsys, usages=[{"resource_uuid": vms[0], "usages": {"cpu": 2}}])

    assert result["failed"] is True and "nothing was sent" in result["msg"], result["msg"]
    assert stored(waldur_sim, vms[0]) == {"cpu": "5.00"}


def test_packed_usages_are_sent_as_listed_ones_and_failures_are_named(waldur_sim, capsys, vms):
    waldur_sim.app.add_fault("usages.set_usage", status=400, nth=2, body={"resource": ["Resource is not in valid state."]})
    usages = [{"resource_uuid": vms[0], "usages": {"cpu": 2}}, {"resource_uuid": vms[1], "usages": {"cpu": 1}}]

    # one worker: the second set_usage (the one refused) is the second resource's
    result = run(waldur_sim, capsys, usages_packed=json.dumps(usages), packed=True, max_workers=1)

    assert "results" not in result and isinstance(result["results_packed"], str)
    results = json.loads(result["results_packed"])
    assert [row["sent"] for row in results] == [{"cpu": "2.00"}, {}]
    assert [failure["resource_uuid"] for failure in result["failures"]] == [vms[1]]
    assert "not in valid state" in result["failures"][0]["msg"]
    assert stored(waldur_sim, vms[0]) == {"cpu": "2.00"}
    assert result["totals"]["failed"] == 1


def test_a_decrease_is_refused_and_the_rest_goes(waldur_sim, capsys, vms):
    run(waldur_sim, capsys, usages=[{"resource_uuid": vms[0], "usages": {"cpu": 4, "ram": 8192}}])

    result = run(waldur_sim, capsys, usages=[{"resource_uuid": vms[0], "usages": {"cpu": 2, "ram": 9000}}])

    row = result["results"][0]
    assert row["sent"] == {"ram": "9000.00"}
    assert row["refused"] == [{"component": "cpu", "amount": "2.00", "stored": "4.00",
                               "reason": "lower than the 4.00 Waldur stores for this month; usage never decreases"}]
    assert stored(waldur_sim, vms[0]) == {"cpu": "4.00", "ram": "9000.00"}
    assert result["totals"]["refused"] == 1
    assert any("cpu 2.00" in str(warning) for warning in result.get("warnings", []))


def test_unknown_components_are_omitted_and_reported(waldur_sim, capsys, vms):
    result = run(waldur_sim, capsys, usages=[{"resource_uuid": vms[0], "usages": {"cpu": 1, "gpu": 3, "ram": None}}])

    row = result["results"][0]
    assert row["sent"] == {"cpu": "1.00"}
    assert row["omitted"] == [{"component": "gpu", "reason": "the offering has no component gpu"},
                              {"component": "ram", "reason": "no amount measured"}]
    assert stored(waldur_sim, vms[0]) == {"cpu": "1.00"}


def test_components_waldur_does_not_meter_are_omitted(waldur_sim, capsys, vms):
    waldur_sim.app.market.offerings[P.AZURE_OFFERING_UUID]["components"][0]["billing_type"] = "fixed"
    result = run(waldur_sim, capsys, usages=[{"resource_uuid": vms[0], "usages": {"cpu": 1, "ram": 2}}])
    assert result["results"][0]["sent"] == {"ram": "2.00"}
    assert "billed as fixed" in result["results"][0]["omitted"][0]["reason"]


def test_check_mode_reports_the_rows_it_would_send(waldur_sim, capsys, vms):
    result = run(waldur_sim, capsys, _ansible_check_mode=True,
                 usages=[{"resource_uuid": vms[0], "usages": {"cpu": 2}}])
    assert result["results"][0]["sent"] == {"cpu": "2.00"} and result["changed"] is True
    assert result["results"][0]["msg"] == "would send cpu"
    assert waldur_sim.app.write_calls() == []
    assert stored(waldur_sim, vms[0]) == {}


def test_a_given_billing_period_and_timezone_set_the_date(waldur_sim, capsys, vms):
    result = run(waldur_sim, capsys, billing_period="2026-03", timezone="Europe/Tallinn",
                 usages=[{"resource_uuid": vms[0], "usages": {"cpu": 3}}])
    assert result["date"] == "2026-03-01T00:00:00+02:00" and result["billing_period"] == "2026-03"
    assert stored(waldur_sim, vms[0], "2026-03") == {"cpu": "3.00"}
    assert stored(waldur_sim, vms[0]) == {} or this_month() == "2026-03"


def test_one_resource_failing_does_not_stop_the_others(waldur_sim, capsys, vms):
    waldur_sim.app.market.resources[vms[0]]["state"] = "Erred"  # Waldur refuses usage for it
    result = run(waldur_sim, capsys, usages=[{"resource_uuid": vms[0], "usages": {"cpu": 1}},
                                             {"resource_uuid": vms[1], "usages": {"cpu": 1}}])
    assert result["results"][0]["failed"] is True and "HTTP 400" in result["results"][0]["msg"]
    assert result["results"][1]["sent"] == {"cpu": "1.00"}
    assert result["totals"]["failed"] == 1 and result["totals"]["submitted"] == 1
    assert "failed" not in result


@pytest.mark.parametrize("args, message", [
    ({"billing_period": "2026-13"}, "billing_period must be a month as YYYY-MM (for example 2026-11), got '2026-13'"),
    ({"timezone": "Mars/Olympus"}, "timezone must be an IANA time zone name"),
    ({"usages": [{"resource_uuid": "d" * 32, "usages": {}}, {"resource_uuid": "x", "usages": {}}]},
     "usages[1].resource_uuid must be a UUID"),
    ({"usages": [{"resource_uuid": "d" * 32, "usages": {"cpu": "lots"}}]},
     "usages[0].usages.cpu must be a number, got 'lots'"),
])
def test_bad_input_names_the_key(waldur_sim, capsys, args, message):
    args.setdefault("usages", [{"resource_uuid": "d" * 32, "usages": {"cpu": 1}}])
    result = run(waldur_sim, capsys, **args)
    assert result["failed"] is True and message in result["msg"]
    assert waldur_sim.app.calls == []


def month_shift(months):
    """YYYY-MM ``months`` away from this month (UTC)."""
    today = datetime.datetime.now(datetime.timezone.utc)
    index = today.year * 12 + today.month - 1 + months
    return "%04d-%02d" % (index // 12, index % 12 + 1)


def test_a_future_month_is_refused_before_any_call(waldur_sim, capsys, vms):
    result = run(waldur_sim, capsys, billing_period=month_shift(1),
                 usages=[{"resource_uuid": vms[0], "usages": {"cpu": 1}}])
    assert result["failed"] is True
    assert result["msg"].startswith("billing_period %s is in the future: the current month in UTC is %s"
                                    % (month_shift(1), this_month()))
    assert waldur_sim.app.calls == []


def test_another_month_is_read_back_and_the_rest_follows(waldur_sim, capsys, vms):
    last_month = month_shift(-1)
    result = run(waldur_sim, capsys, billing_period=last_month,
                 usages=[{"resource_uuid": vms[0], "resource_name": "vm-1", "usages": {"cpu": 2}},
                         {"resource_uuid": vms[1], "resource_name": "vm-2", "usages": {"cpu": 3}}])
    assert result["totals"]["submitted"] == 2 and "failed" not in result
    assert stored(waldur_sim, vms[0], last_month) == {"cpu": "2.00"}
    assert stored(waldur_sim, vms[1], last_month) == {"cpu": "3.00"}
    reads = waldur_sim.app.calls_of("usages.list")
    # the month read twice (nothing stored there yet), then the read-back
    assert len(reads) == 3 and "resource_uuid=%s" % vms[0] in reads[2]["query"]


def test_a_server_that_ignores_the_date_fails_loudly_after_one_resource(waldur_sim, capsys, vms):
    """Waldur 7.0.7 stores every usage in the current month whatever the date says: the
    read-back catches it after the first resource and nothing more is sent."""
    waldur_sim.app.set_quirks(usage_ignores_date=True)
    last_month = month_shift(-1)
    result = run(waldur_sim, capsys, billing_period=last_month,
                 usages=[{"resource_uuid": vms[0], "resource_name": "vm-1", "usages": {"cpu": 2}},
                         {"resource_uuid": vms[1], "resource_name": "vm-2", "usages": {"cpu": 3}}])
    assert result["failed"] is True
    assert result["msg"].startswith("usage for %s did not land in %s: after set_usage answered success, Waldur "
                                    "holds no such usage of resource vm-1 (%s) (cpu) in that month. This Waldur "
                                    "ignores set_usage's date" % (last_month, last_month, vms[0]))
    assert "nothing more was sent" in result["msg"]
    assert len(waldur_sim.app.calls_of("usages.set_usage")) == 1
    assert stored(waldur_sim, vms[1]) == {} and stored(waldur_sim, vms[1], last_month) == {}


def test_a_closed_month_refused_by_field_is_a_warning_not_a_failure(waldur_sim, capsys, vms):
    waldur_sim.app.add_fault("usages.set_usage", status=400, times=-1,
                             body={"date": ["Usage for this period can no longer be reported."]})
    result = run(waldur_sim, capsys, billing_period=month_shift(-2),
                 usages=[{"resource_uuid": vms[0], "resource_name": "vm-1", "usages": {"cpu": 2}}])
    row = result["results"][0]
    assert (row["failed"], row["closed"], row["sent"]) == (False, True, {})
    assert result["totals"]["closed"] == 1 and result["totals"]["failed"] == 0
    assert any("usage of resource vm-1 (%s) for %s not sent: Waldur does not accept usage" % (vms[0], month_shift(-2))
               in str(warning) for warning in result["warnings"])


def test_a_refused_usage_names_the_resource_and_fails_the_task_on_request(waldur_sim, capsys, vms):
    waldur_sim.app.market.resources[vms[0]]["state"] = "Erred"
    result = run(waldur_sim, capsys, fail_on_item_error=True,
                 usages=[{"resource_uuid": vms[0], "resource_name": "vm-1", "usages": {"cpu": 1}}])
    assert result["failed"] is True
    assert result["msg"] == ("usage of 1 of 1 resource(s) could not be submitted: resource vm-1 (%s): Waldur "
                             "refused the usage for %s (HTTP 400): resource: Resource is not in valid state. "
                             "(Waldur takes usage only for resources in state OK, Updating or Terminating)"
                             % (vms[0], this_month()))


def test_diff_mode_gives_the_stored_amounts_before_and_after(waldur_sim, capsys, vms):
    run(waldur_sim, capsys, usages=[{"resource_uuid": vms[0], "usages": {"cpu": 2}}])
    result = run(waldur_sim, capsys, _ansible_diff=True, usages=[
        {"resource_uuid": vms[0], "usages": {"cpu": 3, "ram": 1024}},
        {"resource_uuid": vms[1], "usages": {}}])
    header = "usage of %s for %s" % (vms[0], this_month())
    assert result["results"][0]["diff"] == {"before": {"cpu": "2.00"}, "after": {"cpu": "3.00", "ram": "1024.00"},
                                            "before_header": header, "after_header": header}
    assert "diff" not in result["results"][1]  # nothing sent
    # the top-level list Ansible's --diff output prints: only the resource whose usage was sent
    assert result["diff"] == [result["results"][0]["diff"]]
    assert stored(waldur_sim, vms[0]) == {"cpu": "3.00", "ram": "1024.00"}


def test_diff_in_check_mode_says_what_would_change_and_sends_nothing(waldur_sim, capsys, vms):
    result = run(waldur_sim, capsys, _ansible_diff=True, _ansible_check_mode=True,
                 usages=[{"resource_uuid": vms[0], "usages": {"cpu": 2}}])
    assert result["results"][0]["diff"]["before"] == {} and result["results"][0]["diff"]["after"] == {"cpu": "2.00"}
    assert len(result["diff"]) == 1
    assert waldur_sim.app.write_calls() == []
    assert "diff" not in run(waldur_sim, capsys, usages=[{"resource_uuid": vms[0], "usages": {"cpu": 2}}])["results"][0]


def test_a_closed_month_refusal_carries_no_diff(waldur_sim, capsys, vms):
    waldur_sim.app.add_fault("usages.set_usage", status=400, times=-1,
                             body={"date": ["Usage for this period can no longer be reported."]})
    result = run(waldur_sim, capsys, _ansible_diff=True, billing_period=month_shift(-2),
                 usages=[{"resource_uuid": vms[0], "usages": {"cpu": 2}}])
    assert result["results"][0]["closed"] is True and "diff" not in result["results"][0]


@pytest.mark.parametrize("body, closed", [
    ({"date": ["Usage for this period can no longer be reported."]}, True),
    ({"non_field_errors": ["Backfilling past billing periods is not allowed."]}, True),  # old servers: words only
    ({"detail": "Usage of a past month cannot be set."}, True),
    ({"resource": ["Usage of a past month is not what this says: the resource is not in valid state."]}, False),
])
def test_a_closed_month_is_told_by_the_date_field_and_only_fieldless_bodies_by_their_words(
        waldur_sim, capsys, vms, body, closed):
    waldur_sim.app.add_fault("usages.set_usage", status=400, times=-1, body=body)
    result = run(waldur_sim, capsys, billing_period=month_shift(-2),
                 usages=[{"resource_uuid": vms[0], "usages": {"cpu": 2}}])
    row = result["results"][0]
    assert (row["closed"], row["failed"]) == (closed, not closed)
