"""waldur_resource_state: Erred resources with healthy machines are set OK again (set_as_ok),
or named on every run where Waldur lacks set_as_ok."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import waldur_resource_state
from tests.simulators.waldur import presets as P


def run(sim, capsys, **args):
    args.setdefault("api_url", sim.url)
    args.setdefault("api_token", P.PROVIDER_TOKEN)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            waldur_resource_state.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def resources(waldur_sim):
    app = waldur_sim.app
    app.reset("empty")
    erred = app.seed_resource(P.AZURE_OFFERING_UUID, "vm-erred", backend_id="/s/vm-erred", state="Erred")
    app.market.resources[erred["uuid"]]["error_message"] = "resizing is not supported on Azure"
    fine = app.seed_resource(P.AZURE_OFFERING_UUID, "vm-ok", backend_id="/s/vm-ok")
    app.calls.clear()
    return erred["uuid"], fine["uuid"]


def test_an_erred_resource_is_set_ok_and_an_ok_one_left_alone(waldur_sim, capsys, resources):
    erred, fine = resources
    result = run(waldur_sim, capsys, resources=[{"resource_uuid": erred, "name": "vm-erred"},
                                                {"resource_uuid": fine}])
    assert result["changed"] is True
    assert [row["msg"] for row in result["results"]] == ["set OK (was Erred; its machine is healthy)",
                                                         "left alone: the resource is OK"]
    assert result["results"][1]["name"] == "vm-ok"  # taken from Waldur when not given
    assert result["totals"] == {"set_ok": 1, "unchanged": 1, "unsupported": 0, "failed": 0}
    resource = waldur_sim.app.resource(erred)
    assert (resource["state"], resource["error_message"]) == ("OK", "")
    assert [c["operation"] for c in waldur_sim.app.write_calls()] == ["resources.set_as_ok"]

    since = len(waldur_sim.app.calls)
    again = run(waldur_sim, capsys, resources=[{"resource_uuid": erred}])
    assert again["changed"] is False and waldur_sim.app.write_calls(since) == []


def test_check_mode_and_an_order_in_progress_write_nothing(waldur_sim, capsys, resources):
    erred, _fine = resources
    checked = run(waldur_sim, capsys, resources=[{"resource_uuid": erred}], _ansible_check_mode=True)
    assert checked["results"][0]["msg"] == "would set OK (Erred; its machine is healthy)"
    # (the resource stays Erred until Waldur's worker processes the Terminate)
    order = waldur_sim.app.seed_order(P.AZURE_OFFERING_UUID, type="Terminate", state="executing", resource_uuid=erred,
                                      processed=False)
    busy = run(waldur_sim, capsys, resources=[{"resource_uuid": erred}])
    assert busy["results"][0]["msg"] == ("left Erred: its Terminate order %s is in progress (the order pass settles it)"
                                         % order["uuid"])
    assert waldur_sim.app.write_calls() == []
    assert waldur_sim.app.resource(erred)["state"] == "Erred"


def test_a_waldur_without_set_as_ok_gets_a_warning_naming_the_resource(waldur_sim, capsys, resources):
    erred, _fine = resources
    waldur_sim.app.set_quirks(no_set_as_ok=True)
    result = run(waldur_sim, capsys, resources=[{"resource_uuid": erred, "name": "vm-erred"}])
    row = result["results"][0]
    assert (row["changed"], row["failed"], row["unsupported"]) == (False, False, True)
    assert result["totals"]["unsupported"] == 1
    assert any("resource vm-erred (%s) is Erred in Waldur although its machine is healthy, and this Waldur has no "
               "set_as_ok" % erred in str(warning) for warning in result["warnings"])
    assert waldur_sim.app.resource(erred)["state"] == "Erred"


def test_a_failure_names_the_resource_and_the_others_go_on(waldur_sim, capsys, resources):
    erred, fine = resources
    second = waldur_sim.app.seed_resource(P.AZURE_OFFERING_UUID, "vm-2", backend_id="/s/vm-2", state="Erred")
    waldur_sim.app.add_fault("resources.set_as_ok", status=403,
                             body={"detail": "You do not have permission to perform this action."})
    result = run(waldur_sim, capsys, max_workers=1, resources=[{"resource_uuid": erred, "name": "vm-erred"},
                                                               {"resource_uuid": second["uuid"]}])
    assert result["results"][0]["failed"] is True
    assert result["results"][0]["msg"].startswith("resource vm-erred (%s): Waldur POST " % erred)
    assert "HTTP 403" in result["results"][0]["msg"]
    assert result["results"][1]["changed"] is True
    assert result["totals"]["failed"] == 1 and result["totals"]["set_ok"] == 1
