"""Evidence before action on DigitalOcean (issue 22), with fakes: what do_droplet deletes, adopts
or keeps; items of one batch acting on one droplet; no call past the module's deadline; the plain
http:// warning; do_audit's holdings and its re-read before deleting; held orders in the pass."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args
from tests.unit.plugins.module_utils.test_digitalocean import FakeTime, api, make_client, scripted_server  # noqa: F401  # pylint: disable=unused-import
from tests.unit.plugins.modules.do_audit_fakes import SendsLikeDigitalOcean, fresh
from tests.unit.plugins.modules.test_do_droplet import FakeClient, copy_of, create_item, facts, item, run

from ansible_collections.waldur.site_agent.plugins.filter.order_pass import order_pass_report
from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import validate
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets import batch_clashes
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import derived_names
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.options import plain_http_warning
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.pacing import RequestPacer
from ansible_collections.waldur.site_agent.plugins.modules import do_audit
from tests.unit.plugins.module_utils.test_site_config import good_config

UUID = "5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b"
OTHER = "7a6b5c4d3e2f41a09b8c7d6e5f4a3b2c"
TAG = "waldur-resource:" + UUID
OTHER_TAG = "waldur-resource:" + OTHER
ORDERED = "2026-01-02T03:00:00.123456Z"


# ---- names -----------------------------------------------------------------------------------

def test_the_names_derived_for_a_resource_are_its_cleaned_name_and_the_uuid_fallback():
    assert derived_names("Web 1", UUID) == {"web-1", "waldur-5f0f2b4c"}
    assert derived_names(None, UUID) == {"waldur-5f0f2b4c"}
    assert derived_names("", UUID, slug="web-slug") == {"web-slug", "waldur-5f0f2b4c"}


# ---- duplicates --------------------------------------------------------------------------------

@pytest.mark.parametrize("second, why", [
    (dict(copy_of(8, "2026-01-02T03:04:06Z"), region="sfo3"), "droplet 8 differs from the order (region sfo3, not ams3)"),
    (dict(copy_of(8, "2026-01-02T03:04:06Z"), image="debian-12-x64", image_id=9),
     "droplet 8 differs from the order (image debian-12-x64, not ubuntu-22-04-x64)"),
    (copy_of(8, "2026-01-02T03:04:06Z", tags=[TAG, "prod"]), "droplet 8 carries tags prod, %s, not the order's %s"
     % (TAG, TAG)),
    (copy_of(8, "2026-01-02T02:59:59Z"), "droplet 8 was created before the order"),
])
def test_a_look_alike_is_never_taken_for_a_copy_and_nothing_is_deleted(second, why):
    first = copy_of(7, "2026-01-02T03:04:05Z")
    client = FakeClient(first, second)
    result = run(client, create_item(not_before=ORDERED))
    assert (result["failed"], result["retry"], result["held"], result["action"]) == (True, True, True, "none")
    assert why in result["msg"]
    assert "7 web-1 (ams3, s-1vcpu-1gb, created 2026-01-02T03:04:05Z)" in result["msg"]
    assert "8 web-1 (%s, %s, created %s)" % (second["region"], second["size_slug"], second["created_at"]) in result["msg"]
    assert result["cloud"].startswith("droplets ") and result["backend_id"] is None
    assert client.writes() == []


def test_without_the_order_time_copies_are_kept():
    client = FakeClient(copy_of(7, "2026-01-02T03:04:05Z"), copy_of(8, "2026-01-02T03:04:06Z"))
    result = run(client, create_item())
    assert result["held"] is True and "carries no order time (not_before)" in result["msg"]
    assert client.writes() == []


def test_copies_naming_the_image_by_id_are_copies_and_the_order_time_counts_in_whole_seconds():
    # DigitalOcean's created_at has whole seconds: a copy made in the order's second is after it
    client = FakeClient(dict(copy_of(7, "2026-01-02T03:00:00Z"), image_id=7),
                        dict(copy_of(8, "2026-01-02T03:00:01Z"), image_id=7))
    result = run(client, dict(create_item(not_before=ORDERED), image="7"))
    assert (result["action"], result["backend_id"], result["failed"]) == ("adopted", "7", False)
    assert client.writes() == [("destroy_droplet", 8)]


# ---- deleting ------------------------------------------------------------------------------------

def test_absent_by_tag_deletes_only_derived_names_and_names_the_look_alike():
    client = FakeClient(dict(facts(7), name="web-1"), dict(facts(8), name="someones-db"),
                        dict(facts(9), name="waldur-5f0f2b4c"))
    result = run(client, item(state="absent", name="Web 1"))
    assert sorted(client.writes()) == [("destroy_droplet", 7), ("destroy_droplet", 9)]
    assert result["msg"].startswith("deleted droplet(s) 7, 9 carrying tag %s" % TAG)
    assert ("kept droplet(s) 8 someones-db (ams3, s-1vcpu-1gb, created 2026-01-02T03:04:05Z) carrying tag %s: not a "
            "name the agent derives for this resource (waldur-5f0f2b4c, web-1)" % TAG) in result["msg"]
    assert result["failed"] is False


def test_absent_by_backend_id_deletes_the_recorded_droplet_whatever_its_name():
    client = FakeClient(dict(facts(7), name="renamed-in-the-console"))
    result = run(client, item(state="absent", backend_id="7", name="web-1"))
    assert client.writes() == [("destroy_droplet", 7)] and result["msg"] == "deleted droplet 7"


def test_absent_by_backend_id_keeps_a_droplet_carrying_another_resources_tag():
    client = FakeClient(facts(7, tags=[OTHER_TAG]), dict(facts(8), name="web-1"))
    result = run(client, item(state="absent", backend_id="7", name="web-1"))
    assert client.writes() == []  # not even the copy: the order waits for the operator
    assert (result["failed"], result["retry"], result["held"], result["backend_id"]) == (True, True, True, "7")
    assert result["msg"].startswith("kept droplet 7 web-7 (ams3, s-1vcpu-1gb, created 2026-01-02T03:04:05Z): Waldur "
                                    "records it for this resource, but it carries %s, not %s alone" % (OTHER_TAG, TAG))


def test_absent_by_backend_id_deletes_a_legacy_untagged_droplet_and_says_so():
    client = FakeClient(facts(7, tags=["web"]))
    result = run(client, item(state="absent", backend_id="7"))
    assert client.writes() == [("destroy_droplet", 7)]
    assert result["msg"] == ("deleted droplet 7 (legacy: it carries no waldur-resource tag, and it is the exact id "
                             "Waldur records for the resource)")


# ---- one batch, one droplet ----------------------------------------------------------------------

def test_items_of_one_batch_deriving_one_name_or_one_tag_are_refused():
    items = [create_item(order_uuid="a" * 32), dict(create_item(order_uuid="b" * 32), resource_uuid=OTHER),
             dict(item(state="off", backend_id="7", order_uuid="c" * 32), resource_uuid="c" * 32),
             dict(item(state="absent", backend_id="8", order_uuid="d" * 32), resource_uuid="c" * 32),
             dict(create_item(order_uuid="e" * 32), name="web-2", resource_uuid="e" * 32)]
    clashes = batch_clashes(items)
    assert sorted(clashes) == [0, 1, 2, 3]
    assert clashes[0] == clashes[1] == (
        "refused before any write: resource %s (order %s) and resource %s (order %s) would create droplets of the "
        "same name web-1 in one batch; nothing was created for either; rename one of the resources in Waldur"
        % (UUID, "a" * 32, OTHER, "b" * 32))
    assert clashes[2].startswith("refused before any write: resource %s (order %s) and resource %s (order %s) are 2 "
                                 "items of this batch for one resource" % ("c" * 32, "c" * 32, "c" * 32, "d" * 32))


def test_a_refused_item_makes_no_call():
    from ansible_collections.waldur.site_agent.plugins.modules import do_droplet
    from tests.unit.plugins.modules.test_do_droplet import FakeWaiter

    client = FakeClient()
    worker = do_droplet.DropletWorker(client, waiter=FakeWaiter(client))
    items = [create_item(), dict(create_item(), resource_uuid=OTHER)]
    worker.refuse_clashes(items)
    results = [worker(one) for one in items]
    assert [(r["failed"], r["retry"], r["held"]) for r in results] == [(True, True, True)] * 2
    assert client.calls == []


# ---- counts are true ---------------------------------------------------------------------------

def test_a_create_digitalocean_refuses_is_not_changed():
    class Refusing(FakeClient):
        def create_droplet(self, *args, **kwargs):
            raise DigitalOceanError("DigitalOcean refused the request (422 bad size): POST /v2/droplets", status=422)

    result = run(Refusing(), create_item())
    assert (result["failed"], result["changed"], result.get("retry")) == (True, False, None)


# ---- the module's deadline -------------------------------------------------------------------

THROTTLED = (429, {"id": "too_many_requests", "message": "API Rate limit exceeded."}, {"Retry-After": "100"})


def test_a_retry_after_past_the_deadline_is_not_waited_for(api):  # noqa: F811
    api.app.on("POST", "/v2/droplets", THROTTLED)
    fake = FakeTime()
    client = make_client(api.url, fake, max_retry_seconds=120, deadline=fake.now + 30)
    with pytest.raises(DigitalOceanError) as caught:
        client.create_droplet("web-1", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64")
    assert caught.value.status == 429  # transient: the item ends retry
    assert "asked to wait 100 seconds (Retry-After), past the module's deadline" in str(caught.value)
    assert sum(fake.sleeps) < 1 and len(api.app.requests) == 1


def test_a_pause_another_thread_was_told_is_not_waited_past_the_deadline(api):  # noqa: F811
    fake = FakeTime()
    client = make_client(api.url, fake, deadline=fake.now + 30)
    client.pacer.throttled(100)
    with pytest.raises(DigitalOceanError) as caught:
        client.destroy_droplet(7)
    assert caught.value.status == 429 and "not sent" in str(caught.value) and "100 more seconds" in str(caught.value)
    assert api.app.requests == [] and fake.sleeps == []


def test_the_pacer_answers_none_rather_than_sleep_past_a_deadline():
    fake = FakeTime()
    pacer = RequestPacer(clock=fake.clock, sleep=fake.sleep)
    pacer.throttled(50)
    assert pacer.acquire(deadline=fake.now + 10) is None and fake.sleeps == []
    assert pacer.acquire(deadline=fake.now + 60) == pytest.approx(50.0 + 60.0 / 250, abs=0.01)


# ---- plain http:// -------------------------------------------------------------------------------

@pytest.mark.parametrize("url, warned", [
    ("http://do-proxy.example.com/v2/", "plain http:// to do-proxy.example.com: the DigitalOcean token crosses the "
                                        "network unencrypted; use https://"),
    ("http://user:dop_v1_secret@do-proxy.example.com/", "plain http:// to do-proxy.example.com: the DigitalOcean "
                                                        "token crosses the network unencrypted; use https://"),
    ("https://api.digitalocean.com/v2/", None),
    ("http://127.0.0.1:8080/v2/", None),
    ("http://localhost/v2/", None),
    ("http://[::1]:8080/v2/", None),
])
def test_plain_http_is_warned_about_naming_the_host_only(url, warned):
    assert plain_http_warning(url) == warned


def test_the_site_config_warns_about_a_plain_http_digitalocean_endpoint_naming_the_key():
    config = good_config()
    offering = next(o for o in config["offerings"] if o["backend_type"] == "digitalocean")
    offering["backend_settings"]["api_url"] = "http://do-proxy.example.com/v2/"
    errors, warnings = validate(config)
    index = config["offerings"].index(offering)
    assert errors == []
    assert ("offerings[%d].backend_settings.api_url: plain http:// to do-proxy.example.com: the DigitalOcean token "
            "crosses the network unencrypted; use https://" % index) in warnings
    assert not [w for w in warnings if offering["backend_settings"]["token"] in w]


# ---- do_audit -----------------------------------------------------------------------------------

# a first sighting of the resource gone, a day after the droplet was made: past the grace period
SEEN_GONE = "waldur-orphan-since:20200102T000000Z"


class Account(SendsLikeDigitalOcean):
    api_calls = 0

    def __init__(self, listed, fresh=None):
        self.listed, self.fresh, self.calls = listed, fresh or {}, []

    def scan_droplets(self, max_pages):
        return list(self.listed)

    def get_droplet(self, droplet_id):
        self.calls.append(("get", droplet_id))
        return fresh(droplet_id, self.fresh.get(droplet_id, next((d for d in self.listed if d["id"] == droplet_id),
                                                                 None)))

    def destroy_droplet(self, droplet_id):
        self.calls.append(("destroy", droplet_id))
        return True


def audit_droplet(droplet_id, name, tags, created_at="2020-01-01T00:00:00Z", region="ams3"):
    return {"id": droplet_id, "name": name, "status": "active", "size_slug": "s-1vcpu-1gb", "region": region,
            "created_at": created_at, "tags": tags}


def run_audit(monkeypatch, capsys, client, resources):
    monkeypatch.setattr(do_audit, "client_from_module", lambda module: client)
    args = {"token": "dop_v1_secret-token", "offering_uuid": "d" * 32, "resources": resources, "cleanup": True,
            # what the audit role's direct reads in Waldur answered
            "cleanup_evidence": dict((resource["uuid"], resource["state"]) for resource in resources)}
    with patch_module_args(args), pytest.raises(SystemExit):
        do_audit.main()
    return json.loads(capsys.readouterr().out)


def test_holdings_carry_youngest_at_and_no_unmarked_parts():
    [holding] = do_audit.holdings_of([audit_droplet(7, "web", [TAG], created_at="2026-01-02T03:04:05Z")], {UUID})
    assert (holding["created_at"], holding["youngest_at"], holding["unmarked"]) == (
        "2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z", [])


def test_cleanup_keeps_an_orphan_whose_name_is_not_derived_for_its_resource(monkeypatch, capsys):
    client = Account([audit_droplet(7, "someones-db", [TAG, SEEN_GONE]),
                      audit_droplet(8, "gone", [OTHER_TAG, SEEN_GONE])])
    resources = [{"uuid": UUID, "name": "gone", "state": "Terminated", "backend_id": ""},
                 {"uuid": OTHER, "name": "gone", "state": "Terminated", "backend_id": ""}]
    out = run_audit(monkeypatch, capsys, client, resources)
    cleanup = dict((finding["object_ids"][0], finding["cleanup"]) for finding in out["findings"])
    assert cleanup["7"] == ("kept: its name someones-db is not one the agent derives for resource %s "
                            "(gone, waldur-5f0f2b4c)" % UUID)
    assert cleanup["8"] == "deleted"
    assert ("destroy", 7) not in client.calls and ("destroy", 8) in client.calls


def test_cleanup_reads_the_droplet_again_right_before_deleting(monkeypatch, capsys):
    # listed with the derived name; renamed by hand by the time cleanup comes to it
    client = Account([audit_droplet(7, "gone", [TAG, SEEN_GONE])],
                     fresh={7: audit_droplet(7, "now-in-use", [TAG, SEEN_GONE])})
    out = run_audit(monkeypatch, capsys, client, [{"uuid": UUID, "name": "gone", "state": "Terminated"}])
    assert out["findings"][0]["cleanup"].startswith("kept: its name now-in-use is not one the agent derives")
    assert client.calls == [("get", 7)]


def test_the_duplicate_finding_lists_each_droplet_with_its_region_and_creation_time(monkeypatch, capsys):
    client = Account([audit_droplet(7, "web", [TAG]), audit_droplet(8, "web", [TAG], region="sfo3",
                                                                    created_at="2019-12-31T23:55:00Z")])
    out = run_audit(monkeypatch, capsys, client, [{"uuid": UUID, "name": "web", "state": "OK", "backend_id": "7"}])
    [duplicate] = [f for f in out["findings"] if f["check"] == "duplicate"]
    assert "droplet 7 web (ams3, s-1vcpu-1gb, active, created 2020-01-01T00:00:00Z)" in duplicate["object"]
    assert "droplet 8 web (sfo3, s-1vcpu-1gb, active, created 2019-12-31T23:55:00Z)" in duplicate["object"]
    assert client.calls == []  # drift is never deleted


# ---- the order pass ----------------------------------------------------------------------------

def test_an_order_held_for_the_operator_stays_retry_but_makes_the_pass_unfinished():
    claim = {"orders": [{"uuid": "a" * 32, "resource_name": "web"}, {"uuid": "b" * 32, "resource_name": "db"}]}
    settle = {"results": [{"order_uuid": "a" * 32, "outcome": "retry", "msg": "left executing: 2 droplets"},
                          {"order_uuid": "b" * 32, "outcome": "retry", "msg": "left executing: deadline"}]}
    act = {"results_packed": "[]", "failures": [
        {"order_uuid": "a" * 32, "failed": True, "retry": True, "held": True},
        {"order_uuid": "b" * 32, "failed": True, "retry": True}]}
    report = order_pass_report(claim, settle, False, act)
    assert report["counts"]["retry"] == 2 and report["held"] == 1 and report["unfinished"] == 1
    assert order_pass_report(claim, settle, False, {})["unfinished"] == 0
