"""waldur_resource_metadata: set_backend_metadata only where it differs."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import waldur_resource_metadata
from tests.simulators.waldur import presets as P


def run(sim, capsys, **args):
    args.setdefault("api_url", sim.url)
    args.setdefault("api_token", P.PROVIDER_TOKEN)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            waldur_resource_metadata.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def pair(waldur_sim):
    app = waldur_sim.app
    first = app.seed_resource(P.DO_OFFERING_UUID, "a", backend_id="1", backend_metadata={"status": "active"})
    second = app.seed_resource(P.DO_OFFERING_UUID, "b", backend_id="2", backend_metadata={"status": "active"})
    app.calls.clear()
    return first["uuid"], second["uuid"]


def test_only_differing_metadata_is_written(waldur_sim, capsys, pair):
    result = run(waldur_sim, capsys, resources=[
        {"resource_uuid": pair[0], "backend_metadata": {"status": "off"}},
        {"resource_uuid": pair[1], "backend_metadata": {"status": "active"}, "current_metadata": {"status": "active"}},
    ])

    assert [row["changed"] for row in result["results"]] == [True, False]
    assert waldur_sim.app.resource(pair[0])["backend_metadata"] == {"status": "off"}
    assert len(waldur_sim.app.calls_of("resources.set_backend_metadata")) == 1
    assert len(waldur_sim.app.calls_of("resources.get")) == 1  # current_metadata given: no read


def test_packed_resources_are_written_as_listed_ones(waldur_sim, capsys, pair):
    result = run(waldur_sim, capsys, packed=True, resources_packed=json.dumps([
        {"resource_uuid": pair[0], "backend_metadata": {"status": "off"}, "current_metadata": {"status": "active"}},
        {"resource_uuid": "f" * 32, "backend_metadata": {"status": "off"}, "current_metadata": {}}]))

    assert [row["changed"] for row in json.loads(result["results_packed"])] == [True, False]
    assert [failure["resource_uuid"] for failure in result["failures"]] == ["f" * 32]
    assert waldur_sim.app.resource(pair[0])["backend_metadata"] == {"status": "off"}


def test_current_metadata_is_trusted_and_check_mode_writes_nothing(waldur_sim, capsys, pair):
    result = run(waldur_sim, capsys, _ansible_check_mode=True, resources=[
        {"resource_uuid": pair[0], "backend_metadata": {"status": "active"}, "current_metadata": {"status": "x"}}])
    assert result["results"][0] == {"resource_uuid": pair[0], "changed": True, "failed": False, "retry": False,
                                    "msg": "would update backend metadata"}
    assert waldur_sim.app.calls == []


def test_one_failure_does_not_stop_the_others(waldur_sim, capsys, pair):
    result = run(waldur_sim, capsys, resources=[
        {"resource_uuid": "f" * 32, "backend_metadata": {"status": "off"}},
        {"resource_uuid": pair[1], "backend_metadata": {"status": "off"}}])
    assert result["results"][0]["failed"] is True and "HTTP 404" in result["results"][0]["msg"]
    assert result["results"][1]["changed"] is True
    assert waldur_sim.app.resource(pair[1])["backend_metadata"] == {"status": "off"}


def test_a_bad_uuid_is_named(waldur_sim, capsys):
    result = run(waldur_sim, capsys, resources=[{"resource_uuid": "nope", "backend_metadata": {}}])
    assert result["failed"] is True and result["msg"].startswith("resources[0].resource_uuid must be a UUID")


def test_diff_mode_gives_before_and_after_of_changed_resources_only(waldur_sim, capsys, pair):
    result = run(waldur_sim, capsys, _ansible_diff=True, _ansible_check_mode=True, resources=[
        {"resource_uuid": pair[0], "backend_metadata": {"status": "off"}},
        {"resource_uuid": pair[1], "backend_metadata": {"status": "active"}}])
    assert result["results"][0]["diff"] == {"before": {"status": "active"}, "after": {"status": "off"}}
    assert "diff" not in result["results"][1]
    assert waldur_sim.app.calls_of("resources.set_backend_metadata") == []


def test_without_diff_mode_no_diff_is_returned(waldur_sim, capsys, pair):
    result = run(waldur_sim, capsys, resources=[{"resource_uuid": pair[0], "backend_metadata": {"status": "off"}}])
    assert "diff" not in result["results"][0]
    assert result["api_calls"]["writes"] == 1


def test_batch_options_are_checked(waldur_sim, capsys, pair):
    result = run(waldur_sim, capsys, deadline=0, resources=[{"resource_uuid": pair[0], "backend_metadata": {}}])
    assert result["failed"] is True and result["msg"] == "deadline must be a positive number, got 0.0"
