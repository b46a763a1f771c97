"""do_audit in-process: bad input named before any call, check mode deletes nothing, a listing
that keeps changing fails the task."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import do_audit

OFFERING = "d" * 32
OWNER = "a" * 32
OLD = "2020-01-01T00:00:00Z"


class Account:
    """The client calls do_audit makes, on a fixed list of droplets."""

    api_calls = 0

    def __init__(self, droplets, scans=None):
        self.droplets = droplets
        self.scans = list(scans or [])
        self.calls = []

    def scan_droplets(self, max_pages):
        self.calls.append("scan")
        return self.scans.pop(0) if self.scans else list(self.droplets)

    def get_droplet(self, droplet_id):
        self.calls.append(("get", droplet_id))
        return next((d for d in self.droplets if d["id"] == droplet_id), None)

    def destroy_droplet(self, droplet_id):
        self.calls.append(("destroy", droplet_id))
        return True


def droplet(droplet_id, tags):
    return {"id": droplet_id, "name": "web", "status": "active", "size_slug": "s-1vcpu-1gb", "created_at": OLD,
            "tags": tags}


@pytest.fixture
def run_module(monkeypatch, capsys):
    def run(args, client, check=False):
        monkeypatch.setattr(do_audit, "client_from_module", lambda module: client)
        args = dict({"token": "dop_v1_secret-token", "offering_uuid": OFFERING, "_ansible_check_mode": check}, **args)
        with patch_module_args(args), pytest.raises(SystemExit):
            do_audit.main()
        return json.loads(capsys.readouterr().out)
    return run


@pytest.mark.parametrize("args, message", [
    ({"resources": [{"uuid": "web-1", "state": "OK"}]}, "resources[0].uuid: expected the resource's UUID, got 'web-1'"),
    ({"resources": [{"uuid": OWNER}]}, "resources[0].state: expected the resource's Waldur state"),
    ({"resources": [], "offering_uuid": "nope"}, "offering_uuid: 'nope' is not a UUID"),
    ({"resources": [], "cleanup_min_age_hours": -1}, "cleanup_min_age_hours: expected 0 or more hours, got -1"),
    ({"resources": [], "report_name": "../x"}, "report_name: expected a file name without '/'"),
])
def test_bad_input_is_named_before_any_call(run_module, args, message):
    client = Account([])
    out = run_module(args, client)
    assert out["failed"] is True and out["msg"].startswith(message)
    assert client.calls == []


def test_check_mode_says_what_cleanup_would_delete_and_deletes_nothing(run_module):
    client = Account([droplet(7, ["waldur-resource:" + OWNER]), droplet(8, [])])
    resources = [{"uuid": OWNER, "name": "web", "state": "Terminated", "backend_id": "7"}]
    # without a direct read of the resource nothing would go: it is a candidate to read
    out = run_module({"resources": resources, "cleanup": True}, client, check=True)
    assert out["changed"] is False and out["cleanup_candidates"] == [OWNER]
    evidence = {OWNER: "Terminated"}
    out = run_module({"resources": resources, "cleanup": True, "cleanup_evidence": evidence}, client, check=True)
    assert out["changed"] is True and out["status"] == "findings"
    assert [(item["object_ids"], item["cleanup"]) for item in out["findings"]] == [(["7"], "would delete")]
    assert ("destroy", 7) not in client.calls and out["counts"]["would_delete"] == 1

    out = run_module({"resources": resources, "cleanup": True, "cleanup_evidence": evidence}, client)
    assert ("destroy", 7) in client.calls and out["counts"]["deleted"] == 1
    assert "dop_v1_secret-token" not in json.dumps(out)


def test_a_droplet_whose_tags_changed_since_the_listing_is_kept(run_module):
    listed = droplet(7, ["waldur-resource:" + OWNER])
    client = Account([droplet(7, ["waldur-resource:" + OWNER, "waldur-resource:" + "b" * 32])], scans=[[listed]])
    out = run_module({"resources": [{"uuid": OWNER, "state": "Terminated", "backend_id": "7"}], "cleanup": True,
                      "cleanup_evidence": {OWNER: "Terminated"}}, client)
    assert out["findings"][0]["cleanup"] == "kept: its tags changed since it was listed"
    assert not [call for call in client.calls if call[0] == "destroy"]


def test_an_account_changing_under_every_listing_fails_the_task(run_module):
    client = Account([], scans=[None, None, None])
    out = run_module({"resources": []}, client)
    assert out["failed"] is True and "changed while they were listed, 3 times running" in out["msg"]
