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
                               "omitted": 0, "failed": 0}
    # one listing of the components, one of the stored usage of the whole offering
    assert len(waldur_sim.app.calls_of("offering.get")) == 1 and len(waldur_sim.app.calls_of("usages.list")) == 1

    since = len(waldur_sim.app.calls)
    second = run(waldur_sim, capsys, usages=usages)
    assert waldur_sim.app.write_calls(since) == []
    assert second["changed"] is False
    assert sorted(second["results"][0]["unchanged"]) == ["cpu", "disk", "ram"]
    assert second["results"][0]["msg"] == "unchanged"


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
