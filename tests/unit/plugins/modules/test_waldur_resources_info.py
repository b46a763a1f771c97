"""waldur_resources_info: the offering's provider resources, all pages, in the contract's shape."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import waldur_resources_info
from tests.simulators.waldur import presets as P


def run(sim, capsys, **args):
    args.setdefault("api_url", sim.url)
    args.setdefault("api_token", P.PROVIDER_TOKEN)
    args.setdefault("offering_uuid", P.DO_OFFERING_UUID)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            waldur_resources_info.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def many(waldur_sim):
    app = waldur_sim.app
    app.reset("empty")
    made = [app.seed_resource(P.DO_OFFERING_UUID, "vm-%03d" % index, backend_id=str(1000 + index),
                              backend_metadata={"status": "active"}, paused=index == 3)["uuid"]
            for index in range(130)]
    app.seed_resource(P.DO_OFFERING_UUID, "erred-1", state="Erred")
    app.seed_resource(P.DO_OFFERING_UUID, "gone-1", backend_id="9", state="Terminated")
    app.seed_resource(P.AZURE_OFFERING_UUID, "other-1", backend_id="/x")
    app.calls.clear()
    return made


def test_lists_every_page_of_the_wanted_states(waldur_sim, capsys, many):
    result = run(waldur_sim, capsys)

    names = [resource["name"] for resource in result["resources"]]
    assert result["count"] == 131 and len(set(names)) == 131
    assert "erred-1" in names and "gone-1" not in names and "other-1" not in names
    assert len(waldur_sim.app.calls_of("resources.list")) == 2  # 100 per page
    first = next(r for r in result["resources"] if r["uuid"] == many[3])
    assert first["backend_id"] == "1003" and first["paused"] is True
    assert first["backend_metadata"] == {"status": "active"}
    assert set(first) >= {"uuid", "name", "slug", "state", "backend_id", "limits", "attributes", "options",
                          "paused", "downscaled", "backend_metadata", "project_uuid", "plan_uuid",
                          "offering_plugin_options"}
    assert result["changed"] is False


def test_with_backend_id_only_and_other_states(waldur_sim, capsys, many):
    result = run(waldur_sim, capsys, with_backend_id_only=True, states=["Erred", "Terminated"])
    assert [resource["name"] for resource in result["resources"]] == ["gone-1"]


def test_named_resources_are_read_one_by_one(waldur_sim, capsys, many):
    result = run(waldur_sim, capsys, resource_uuids=[many[0].upper(), "f" * 32])
    assert [resource["uuid"] for resource in result["resources"]] == [many[0]]
    assert result["missing"] == [{"uuid": "f" * 32, "msg": "resource not found", "answer": "not found"}]
    assert waldur_sim.app.calls_of("resources.list") == []


def test_a_bad_offering_uuid_is_named(waldur_sim, capsys):
    result = run(waldur_sim, capsys, offering_uuid="do-offering")
    assert result["failed"] is True
    assert result["msg"] == "offering_uuid must be a UUID (32 hex digits, dashes optional), got 'do-offering'"


def test_fields_are_asked_of_waldur_and_only_they_come_back(waldur_sim, capsys, many):
    result = run(waldur_sim, capsys, with_backend_id_only=True, fields=["paused", "name"])
    assert result["count"] == 130  # with_backend_id_only still applies: the module asks for backend_id itself
    assert all(sorted(resource) == ["name", "paused", "uuid"] for resource in result["resources"])
    paused = next(r for r in result["resources"] if r["uuid"] == many[3])
    assert paused == {"uuid": many[3], "name": "vm-003", "paused": True}
    queries = [call["query"] for call in waldur_sim.app.calls_of("resources.list")]
    assert queries and all("field=paused" in query and "field=name" in query and "field=backend_id" in query
                           and "field=limits" not in query for query in queries)


def test_fields_of_named_resources_and_other_offerings_still_checked(waldur_sim, capsys, many):
    other = [r for r in waldur_sim.app.market.resources.values() if r["name"] == "other-1"][0]["uuid"]
    result = run(waldur_sim, capsys, resource_uuids=[many[0], other], fields=["state"])
    assert result["resources"] == [{"uuid": many[0], "state": "OK"}]
    assert result["missing"][0]["msg"] == "resource belongs to offering %s" % P.AZURE_OFFERING_UUID.replace("-", "")
    assert all("field=offering_uuid" in call["query"] for call in waldur_sim.app.calls_of("resources.get"))


def test_an_unknown_field_is_named_and_nothing_is_listed(waldur_sim, capsys, many):
    result = run(waldur_sim, capsys, fields=["name", "size"])
    assert result["failed"] is True
    assert result["msg"].startswith("fields[1]: 'size' is not a resource key; expected some of uuid, name, slug")
    assert waldur_sim.app.calls_of("resources.list") == []


def test_the_keys_fields_may_name_are_those_of_a_normalised_resource():
    from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import RESOURCE_KEYS, normalize_resource
    assert tuple(normalize_resource({})) == RESOURCE_KEYS


def test_packed_resources_are_the_listed_ones_as_one_text(waldur_sim, capsys, many):
    listed = run(waldur_sim, capsys, fields=["name", "backend_id", "paused"])
    packed = run(waldur_sim, capsys, fields=["name", "backend_id", "paused"], packed=True)
    assert "resources" not in packed and isinstance(packed["resources_packed"], str)
    assert json.loads(packed["resources_packed"]) == listed["resources"]
    assert packed["count"] == listed["count"] == 131
