"""do_droplet_info: entries in input order, missing ids, odd ids, one batched read."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.modules import do_droplet_info
from tests.unit.plugins.modules.test_do_droplet import FakeClient, facts


@pytest.fixture
def run_module(monkeypatch, capsys):
    def run(args, client):
        monkeypatch.setattr(do_droplet_info, "client_from_module", lambda module: client)
        args = dict({"token": "dop_v1_secret-token"}, **args)
        with patch_module_args(args), pytest.raises(SystemExit):
            do_droplet_info.main()
        return json.loads(capsys.readouterr().out)
    return run


def test_entries_follow_the_input_order(run_module):
    client = FakeClient(facts(7), facts(8, status="off"))
    out = run_module({"backend_ids": ["8", "", "9", "7", "vm-1"]}, client)
    assert [(d["backend_id"], d["found"]) for d in out["droplets"]] == [
        ("8", True), ("9", False), ("7", True), ("vm-1", False)]
    assert out["missing"] == ["9", "vm-1"]
    assert out["droplets"][0]["status"] == "off" and out["droplets"][0]["size_slug"] == "s-1vcpu-1gb"
    assert out["droplets"][0]["backend_metadata"]["droplet"]["id"] == 8
    assert out["droplets"][3]["msg"] == "not a DigitalOcean droplet id"
    assert out["droplets"][1]["backend_metadata"] is None
    assert client.calls == [("find_droplets", [7, 8, 9])]  # one batched read, not a GET per id
    assert out["changed"] is False


def test_a_read_failure_fails_the_task(run_module):
    client = FakeClient()

    def broken(ids):
        raise DigitalOceanError("DigitalOcean rejected the token (401 Unable to authenticate you): GET /v2/droplets/")

    client.find_droplets = broken
    out = run_module({"backend_ids": ["7"]}, client)
    assert out["failed"] is True and out["msg"].startswith("DigitalOcean rejected the token")
