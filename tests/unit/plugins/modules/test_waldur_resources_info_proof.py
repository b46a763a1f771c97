"""waldur_resources_info's direct reads (``resource_uuids``, what the audit's cleanup decides on): only
Waldur's own JSON 404 is "not found"; an HTML or empty 404, or an answer about another resource, is
left out as unproven, with a warning, never taken for "not found"."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import waldur_resources_info
from tests.simulators.waldur import presets as P

GONE = "f" * 32


def run(sim, capsys, **args):
    args.setdefault("api_url", sim.url)
    args.setdefault("api_token", P.PROVIDER_TOKEN)
    args.setdefault("offering_uuid", P.DO_OFFERING_UUID)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            waldur_resources_info.main()
    return json.loads(capsys.readouterr().out)


def test_only_waldurs_own_404_is_not_found(waldur_sim, capsys):
    result = run(waldur_sim, capsys, resource_uuids=[GONE], states=["OK", "Terminated"])
    assert result["missing"] == [{"uuid": GONE, "msg": "resource not found", "answer": "not found"}]
    # (warnings of other modules run in this process may be there: Ansible keeps them globally)
    assert "is left out" not in json.dumps(result.get("warnings", []))


@pytest.mark.parametrize("kind", ["html_404", "empty_body"])
def test_a_404_that_is_not_waldurs_own_is_unproven_never_not_found(waldur_sim, capsys, kind):
    waldur_sim.app.add_fault("resources.get", kind=kind)
    result = run(waldur_sim, capsys, resource_uuids=[GONE], states=["OK", "Terminated"])
    with waldur_sim.app.lock:  # the spoilt answer breaks Waldur's schema on purpose
        waldur_sim.app.exchanges.clear()
    [missing] = result["missing"]
    assert missing["answer"].startswith("unproven: ") and missing["answer"] != "not found"
    assert "404" in missing["answer"] and missing["msg"].startswith("could not be proven: ")
    assert result["resources"] == [] and result.get("failed") is not True
    # the 2.19 warning shape nests the text
    assert "resource %s is left out: its read could not be proven" % GONE in json.dumps(result["warnings"])


def test_a_direct_read_answering_a_spoilt_page_for_a_live_resource_is_unproven(waldur_sim, capsys):
    live = waldur_sim.app.seed_resource(P.DO_OFFERING_UUID, "web-1", backend_id="7")["uuid"].replace("-", "")
    waldur_sim.app.add_fault("resources.get", kind="html")
    result = run(waldur_sim, capsys, resource_uuids=[live], states=["OK", "Terminated"])
    with waldur_sim.app.lock:
        waldur_sim.app.exchanges.clear()
    assert result["resources"] == [] and result["missing"][0]["answer"].startswith("unproven: ")
