"""do_audit in-process: bad input named before any call, check mode deletes and marks nothing, a
holding is marked the first time its resource is shown gone and deleted only on a later run past the
grace period, a listing that keeps changing fails the task."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args
from tests.unit.plugins.modules.do_audit_fakes import MARK, NOT_OURS_404, SendsLikeDigitalOcean, fresh, writes

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_marks import parse_mark
from ansible_collections.waldur.site_agent.plugins.modules import do_audit

OFFERING = "d" * 32
OWNER = "a" * 32
OLD = "2020-01-01T00:00:00Z"


class Account(SendsLikeDigitalOcean):
    """The client calls do_audit makes, on a fixed list of droplets."""

    api_calls = 0

    def __init__(self, droplets, scans=None):
        self.droplets = droplets
        self.scans = list(scans or [])
        self.calls = []

    def scan_droplets(self, max_pages):
        self.calls.append("scan")
        return self.scans.pop(0) if self.scans else [dict(d, tags=list(d["tags"])) for d in self.droplets]

    def get_droplet(self, droplet_id):
        self.calls.append(("get", droplet_id))
        return fresh(droplet_id, next((d for d in self.droplets if d["id"] == droplet_id), None))

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


def test_check_mode_says_what_cleanup_would_mark_or_delete_and_writes_nothing(run_module):
    client = Account([droplet(7, ["waldur-resource:" + OWNER]), droplet(8, [])])
    resources = [{"uuid": OWNER, "name": "web", "state": "Terminated", "backend_id": "7"}]
    # without a direct read of the resource nothing would go: it is a candidate to read
    out = run_module({"resources": resources, "cleanup": True}, client, check=True)
    assert out["changed"] is False and out["cleanup_candidates"] == [OWNER]
    evidence = {OWNER: "Terminated"}
    out = run_module({"resources": resources, "cleanup": True, "cleanup_evidence": evidence}, client, check=True)
    [finding] = out["findings"]
    assert finding["cleanup"].startswith("kept: first seen gone at ") and \
        "(would mark waldur-orphan-since " in finding["cleanup"] and \
        finding["cleanup"].endswith("; deleted after 24 h if still gone")
    assert out["counts"]["would_mark"] == 1 and out["counts"]["would_delete"] == 0
    assert writes(client.calls) == []


def test_a_holding_is_marked_first_and_deleted_only_past_the_grace_period(run_module):
    client = Account([droplet(7, ["waldur-resource:" + OWNER])])
    resources = [{"uuid": OWNER, "name": "web", "state": "Terminated", "backend_id": "7"}]
    args = {"resources": resources, "cleanup": True, "cleanup_evidence": {OWNER: "Terminated"}}

    out = run_module(args, client)
    [finding] = out["findings"]
    [tag] = [t for t in client.droplets[0]["tags"] if t.startswith(MARK)]
    assert finding["cleanup"] == ("kept: first seen gone at %s (marked waldur-orphan-since %s); deleted after 24 h "
                                  "if still gone" % (parse_mark(tag[len(MARK):]).strftime(
                                      "%Y-%m-%dT%H:%M:%SZ"), tag[len(MARK):]))
    assert writes(client.calls) == [("create tag", tag), ("tag", tag, 7)] and out["counts"]["marked"] == 1
    # within the grace period: kept, nothing written
    client.calls.clear()
    out = run_module(args, client)
    assert out["findings"][0]["cleanup"].startswith("kept: first seen gone at ")
    assert "h left)" in out["findings"][0]["cleanup"] and writes(client.calls) == []
    # past it (a grace of 0 h), still shown gone: deleted, after a fresh read
    out = run_module(dict(args, cleanup_grace_hours=0), client)
    assert out["findings"][0]["cleanup"] == "deleted" and writes(client.calls) == [("destroy", 7)]


def test_an_old_mark_deletes_nothing_unless_this_run_shows_the_resource_gone(run_module):
    marked = droplet(7, ["waldur-resource:" + OWNER, MARK + "20200102T000000Z"])
    resources = [{"uuid": OWNER, "name": "web", "state": "Terminated", "backend_id": "7"}]
    for answer in ("OK", "unproven: Waldur GET /api/marketplace-provider-resources/x/ failed (HTTP 404)", "not found"):
        client = Account([dict(marked, tags=list(marked["tags"]))])
        out = run_module({"resources": resources, "cleanup": True, "cleanup_evidence": {OWNER: answer}}, client)
        cleanup = out["findings"][0]["cleanup"]
        assert ("destroy", 7) not in client.calls, answer
        if answer == "OK":  # alive again: the mark is no evidence and goes
            assert cleanup.endswith("answered OK; its waldur-orphan-since mark is removed")
            assert writes(client.calls) == [("untag", MARK + "20200102T000000Z", 7)]
        else:  # an unproven answer, or a 404 for a resource the listing shows Terminated: kept, mark kept
            assert "could not be proven" in cleanup and writes(client.calls) == []


def test_a_resource_alive_in_the_listing_clears_a_mark_only_with_cleanup(run_module):
    marked = droplet(7, ["waldur-resource:" + OWNER, MARK + "20200102T000000Z"])
    resources = [{"uuid": OWNER, "name": "web", "state": "OK", "backend_id": "7"}]
    client = Account([marked])
    out = run_module({"resources": resources}, client)
    assert out["status"] == "clean" and writes(client.calls) == []
    assert "its waldur-orphan-since mark is no evidence, resource web (%s) is OK in Waldur; audit_cleanup removes " \
           "the mark" % OWNER in out["notes"][0]
    out = run_module({"resources": resources, "cleanup": True}, client, check=True)
    assert out["notes"][0].endswith("audit_cleanup would remove the mark") and writes(client.calls) == []
    out = run_module({"resources": resources, "cleanup": True}, client)
    assert out["notes"][0].endswith("the mark is removed")
    assert writes(client.calls) == [("untag", MARK + "20200102T000000Z", 7)] and marked["tags"] == [
        "waldur-resource:" + OWNER]


def test_a_fresh_read_that_is_not_digitaloceans_own_not_found_is_no_proof(run_module):
    marked = droplet(7, ["waldur-resource:" + OWNER, MARK + "20200102T000000Z"])
    client = Account([marked])
    client.get_droplet = lambda droplet_id: fresh(droplet_id, NOT_OURS_404)
    out = run_module({"resources": [{"uuid": OWNER, "name": "web", "state": "Terminated", "backend_id": "7"}],
                      "cleanup": True, "cleanup_evidence": {OWNER: "Terminated"}}, client)
    assert out["findings"][0]["cleanup"].startswith("kept: whether droplet 7 still exists could not be proven (")
    assert writes(client.calls) == []


def test_a_droplet_whose_tags_changed_since_the_listing_is_kept(run_module):
    listed = droplet(7, ["waldur-resource:" + OWNER, MARK + "20200102T000000Z"])
    client = Account([droplet(7, ["waldur-resource:" + OWNER, "waldur-resource:" + "b" * 32])], scans=[[listed]])
    out = run_module({"resources": [{"uuid": OWNER, "state": "Terminated", "backend_id": "7"}], "cleanup": True,
                      "cleanup_evidence": {OWNER: "Terminated"}}, client)
    assert out["findings"][0]["cleanup"] == "kept: its tags changed since it was listed"
    assert not [call for call in client.calls if call[0] == "destroy"]


def test_an_account_changing_under_every_listing_fails_the_task(run_module):
    client = Account([], scans=[None, None, None])
    out = run_module({"resources": []}, client)
    assert out["failed"] is True and "changed while they were listed, 3 times running" in out["msg"]
