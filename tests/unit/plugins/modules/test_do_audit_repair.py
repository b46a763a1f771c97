"""do_audit's repair in-process: a droplet is read again before it is resized, a repair that would
shrink its disk is refused naming why, a droplet that is not provably the resource's own (another
resource's tag, no tag, a fresh read that proves nothing) is never touched, and check mode says what it
would do and writes nothing."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args
from tests.unit.plugins.modules.do_audit_fakes import NOT_OURS_404, SendsLikeDigitalOcean, fresh

from ansible_collections.waldur.site_agent.plugins.modules import do_audit

OFFERING = "d" * 32
OWNER = "a" * 32
MAPPING = {"s-1vcpu-1gb": {"cpu": 1, "ram": 1024}, "s-2vcpu-4gb": {"cpu": 2, "ram": 4096}}
SIZES = [{"slug": "s-1vcpu-1gb", "disk": 25, "regions": ["ams3"]}, {"slug": "s-2vcpu-4gb", "disk": 80, "regions": ["ams3"]}]


class Account(SendsLikeDigitalOcean):
    api_calls = 0

    def __init__(self, listed, current):
        self.listed, self.current = listed, current
        self.calls = []

    def scan_droplets(self, max_pages):
        return [dict(self.listed)]

    def get_droplet(self, droplet_id):
        self.calls.append(("get", droplet_id))
        return fresh(droplet_id, self.current)

    def listing(self, path, key):
        self.calls.append(("list", path))
        return [dict(size) for size in SIZES]

    def droplet_action(self, *args, **kwargs):  # pragma: no cover - a write would fail the test
        raise AssertionError("wrote %r" % (args,))


def droplet(size="s-2vcpu-4gb", disk=25, tags=("waldur-resource:" + OWNER,)):
    return {"id": 7, "name": "web", "status": "active", "size_slug": size, "disk": disk, "region": "ams3",
            "created_at": "2020-01-01T00:00:00Z", "tags": list(tags)}


RESOURCE = {"uuid": OWNER, "name": "web", "state": "OK", "backend_id": "7", "limits": {"cpu": 1, "ram": 1024}}


@pytest.fixture
def run_module(monkeypatch, capsys):
    def run(client, check=False, evidence=None):
        monkeypatch.setattr(do_audit, "client_from_module", lambda module: client)
        args = {"token": "dop_v1_secret-token", "offering_uuid": OFFERING, "_ansible_check_mode": check,
                "resources": [RESOURCE], "size_mapping": MAPPING, "repair": True,
                "repair_evidence": {OWNER: evidence or dict(RESOURCE)}}
        with patch_module_args(args), pytest.raises(SystemExit):
            do_audit.main()
        return json.loads(capsys.readouterr().out)
    return run


def size_finding(result):
    [finding] = [item for item in result["findings"] if item["check"] == "size"]
    return finding


def test_check_mode_says_it_would_repair_and_writes_nothing(run_module):
    client = Account(droplet(), droplet())
    result = run_module(client, check=True)
    assert size_finding(result)["repair"] == ("would repair: resize droplet 7 from s-2vcpu-4gb to s-1vcpu-1gb (CPU "
                                              "and RAM only; powered off for it; powered on afterwards)")
    assert result["counts"]["would_repair"] == 1 and result["changed"]
    assert client.calls == [("get", 7), ("list", "sizes/")]


def test_a_repair_that_would_shrink_the_disk_is_refused(run_module):
    client = Account(droplet(disk=80), droplet(disk=80))  # resized with its disk: it cannot go back
    finding = size_finding(run_module(client))
    assert finding["repair"].startswith("refused: s-1vcpu-1gb has a 25 GB disk, smaller than droplet 7's 80 GB "
                                        "disk, and DigitalOcean cannot shrink a disk")


def test_a_droplet_resized_since_the_listing_is_not_touched(run_module):
    client = Account(droplet(), droplet(size="s-1vcpu-1gb"))
    assert size_finding(run_module(client))["repair"] == "refused: droplet 7 is s-1vcpu-1gb now, not s-2vcpu-4gb " \
                                                         "as listed"
    assert client.calls == [("get", 7)]


def test_a_resource_updating_in_waldur_is_not_repaired(run_module):
    client = Account(droplet(), droplet())
    result = run_module(client, evidence=dict(RESOURCE, state="Updating"))
    assert size_finding(result)["repair"].startswith("refused: a direct read of resource %s in Waldur shows it "
                                                     "Updating" % OWNER)
    assert client.calls == [] and result["counts"]["repaired"] == 0


OTHER = "b" * 32


@pytest.mark.parametrize("tags, why", [
    (["waldur-resource:" + OTHER], "it carries the owner mark of another resource (%s)" % OTHER),
    ([], "it carries no owner mark"),
    (["waldur-resource:" + OWNER, "waldur-resource:" + OTHER], "it carries the owner marks of 2 resources"),
])
def test_a_droplet_that_is_not_the_resources_own_as_listed_is_never_read_nor_touched(run_module, tags, why):
    client = Account(droplet(tags=tags), droplet(tags=tags))
    result = run_module(client)
    repair = size_finding(result)["repair"]
    assert repair.startswith("refused: droplet 7 is not provably this resource's: %s" % why), repair
    assert repair.endswith("audit_repair acts only on a machine carrying this resource's owner mark and no other")
    assert client.calls == [] and result["repair_candidates"] == []


@pytest.mark.parametrize("current, expected", [
    (droplet(tags=["waldur-resource:" + OTHER]), "refused: droplet 7 is not provably this resource's: it carries "
                                                 "the owner mark of another resource (%s)" % OTHER),
    (droplet(tags=[]), "refused: droplet 7 is not provably this resource's: it carries no owner mark"),
    (None, "refused: droplet 7 is gone since it was listed (GET /v2/droplets/7 answered not found"),
    (NOT_OURS_404, "refused: that droplet 7 is this resource's, as listed, could not be proven (DigitalOcean "
                   "answered GET /v2/droplets/7 with 404 text/html '<html>', not its own not_found)"),
])
def test_the_fresh_read_must_show_the_resources_own_droplet(run_module, current, expected):
    client = Account(droplet(), current)
    repair = size_finding(run_module(client))["repair"]
    assert repair.startswith(expected), repair
    assert client.calls == [("get", 7)]  # no size listing, no action
