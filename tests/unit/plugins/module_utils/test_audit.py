"""The audit's judgement: orphans, vanished machines, drift, stuck orders, cleanup and the report."""

import datetime
import json
import os
import stat

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit import (
    CLEAN,
    FINDINGS,
    Auditor,
    power_check,
    status,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_cleanup import plan_cleanup, stale_marks
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_marks import (
    age_hours,
    holding_mark,
    mark_value,
    parse_mark,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_report import build_report, write_report_files
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import oldest, parse_time
from ansible_collections.waldur.site_agent.plugins.modules.do_audit import holdings_of, size_check

NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.timezone.utc)
R1, R2, R3 = "a" * 32, "b" * 32, "c" * 32


def hours_ago(hours):
    return (NOW - datetime.timedelta(hours=hours)).isoformat()


def resource(uuid=R1, state="OK", backend_id="", **fields):
    return dict({"uuid": uuid, "name": "web-" + uuid[:2], "state": state, "backend_id": backend_id,
                 "limits": {}, "attributes": {}, "paused": False, "downscaled": False}, **fields)


def holding(key, owner=R1, marked=True, created=30):
    return {"key": key, "owner": owner, "object": "droplet %s" % key, "ids": [key], "created_at": hours_ago(created),
            "match": {key}, "marked": marked}


def machine(key, power="on", size="s-1vcpu-1gb", legacy=False):
    return {"id": key, "object": "droplet %s" % key, "power": power, "size": size, "created_at": hours_ago(5),
            "legacy_name": legacy}


def judged(resources, holdings=(), machines=None, checks=(), orders=()):
    auditor = Auditor(resources, now=NOW, checks=checks)
    auditor.holdings(list(holdings))
    auditor.machines(machines or {}, list(holdings))
    auditor.stuck_orders(list(orders), list(holdings), machines or {})
    return auditor.sorted_findings()


def kinds(findings):
    return [(item["kind"], item["check"], item["deletable"]) for item in findings]


# ---- time -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("2026-03-01T10:00:00Z", datetime.datetime(2026, 3, 1, 10, tzinfo=datetime.timezone.utc)),
    ("2026-03-01T12:30:00+02:30", datetime.datetime(2026, 3, 1, 10, tzinfo=datetime.timezone.utc)),
    ("2026-03-01T10:00:00.1234567+00:00", datetime.datetime(2026, 3, 1, 10, 0, 0, 123456,
                                                            tzinfo=datetime.timezone.utc)),
    ("2026-03-01 10:00:00", datetime.datetime(2026, 3, 1, 10, tzinfo=datetime.timezone.utc)),
    (datetime.datetime(2026, 3, 1, 10), datetime.datetime(2026, 3, 1, 10, tzinfo=datetime.timezone.utc)),
    ("yesterday", None),
    (None, None),
])
def test_times_are_read_in_every_form_the_clouds_send(text, expected):
    assert parse_time(text) == expected


def test_the_oldest_of_some_times_ignores_what_is_not_a_time():
    assert oldest([None, "2026-03-01T12:00:00+01:00", "2026-03-01T11:30:00Z", "soon"]) == NOW.replace(hour=11)
    assert oldest([None, "", "soon"]) is None


def test_ages_are_hours_and_unknown_stays_unknown():
    assert age_hours(hours_ago(30), NOW) == 30.0
    assert age_hours("", NOW) is None
    assert age_hours(hours_ago(-1), NOW) == 0.0  # a clock ahead of ours is not a negative age


# ---- objects carrying marks -------------------------------------------------------------------

def test_a_healthy_object_is_no_finding():
    assert judged([resource(backend_id="1")], [holding("1")], {"1": machine("1")}) == []


@pytest.mark.parametrize("state, backend_id, marked, expected", [
    ("Terminated", "1", True, [("orphan", None, True)]),
    ("Terminated", "1", False, [("orphan", None, False)]),
    ("Erred", "", True, [("orphan", None, False)]),  # Erred is not gone: kept for the operator
    ("OK", "2", True, [("orphan", None, False), ("vanished", None, False)]),
    ("OK", "", True, [("drift", "backend_id", False)]),
    ("Creating", "", True, []),
    ("Terminating", "", True, []),
])
def test_what_an_object_carrying_a_mark_is_depends_on_its_resource(state, backend_id, marked, expected):
    findings = judged([resource(state=state, backend_id=backend_id)], [holding("1", marked=marked)],
                      {"1": machine("1")})
    assert kinds(findings) == expected


def test_an_object_whose_resource_is_not_in_the_offering_is_an_orphan_deletable_only_with_the_offerings_mark():
    findings = judged([], [holding("1", owner=R2, marked=True), holding("2", owner=R3, marked=False)])
    assert kinds(findings) == [("orphan", None, True), ("orphan", None, False)]
    assert findings[0]["resource_state"] == "absent" and "no resource of this offering" in findings[0]["detail"]
    assert "another offering" in findings[1]["action"]


def test_two_objects_with_one_mark_are_one_duplicate_finding_never_deleted():
    findings = judged([resource(backend_id="1")], [holding("1"), holding("2")], {"1": machine("1"), "2": machine("2")})
    assert kinds(findings) == [("drift", "duplicate", False)]
    assert sorted(findings[0]["object_ids"]) == ["1", "2"] and "Waldur records droplet 1" in findings[0]["detail"]


# ---- resources and machines -------------------------------------------------------------------

def test_a_live_resource_whose_machine_is_gone_has_vanished_and_a_terminated_one_has_not():
    findings = judged([resource(backend_id="7"), resource(R2, state="Terminated", backend_id="8"),
                       resource(R3, state="Creating", backend_id="9")])
    assert kinds(findings) == [("vanished", None, False)]
    assert findings[0]["resource_uuid"] == R1


def test_an_unmarked_machine_a_terminated_resource_records_is_an_orphan_never_deleted():
    findings = judged([resource(state="Terminated", backend_id="7")], machines={"7": machine("7")})
    assert kinds(findings) == [("orphan", None, False)]
    assert "no owner mark" in findings[0]["detail"]


def test_a_backend_id_that_cannot_be_checked_is_a_note_not_a_finding():
    auditor = Auditor([resource(backend_id="elsewhere")], now=NOW, backend_key=lambda backend_id: None)
    auditor.machines({})
    assert auditor.findings == [] and "cannot be checked" in auditor.notes[0]


def test_two_resources_recording_one_machine_are_drift():
    findings = judged([resource(backend_id="7"), resource(R2, backend_id="7")], machines={"7": machine("7")})
    assert kinds(findings) == [("drift", "backend_id", False)]


def test_a_machine_named_like_the_agents_that_nothing_records_is_information_only():
    findings = judged([resource(backend_id="7")], machines={"7": machine("7", legacy=True),
                                                            "8": machine("8", legacy=True), "9": machine("9")})
    assert kinds(findings) == [("orphan_by_name", None, False)]
    assert findings[0]["object_ids"] == ["8"]
    assert status(findings) == CLEAN


@pytest.mark.parametrize("flags, power, problem", [
    ({"paused": True}, "on", "paused in Waldur but the machine is running"),
    ({"downscaled": True}, "stopped", "still allocated and billed"),
    ({}, "off", "neither paused nor downscaled"),
    ({"paused": True}, "off", None),
    ({}, "on", None),
    ({}, None, None),
])
def test_power_is_held_against_the_flags(flags, power, problem):
    found = power_check(resource(**flags), machine("7", power=power))
    assert (found[1] if found else None) == problem if problem is None else problem in found[1]


MAPPING = {"s-1vcpu-1gb": {"cpu": 1, "ram": 1024}, "s-2vcpu-4gb": {"cpu": 2, "ram": 4096}}


@pytest.mark.parametrize("limits, size, expected", [
    ({"cpu": 1, "ram": 1024}, "s-1vcpu-1gb", None),
    ({"cpu": 1, "ram": 1024}, "s-2vcpu-4gb", "maps to s-1vcpu-1gb"),
    ({"cpu": 1, "ram": 1024}, "s-8vcpu-16gb", "maps to s-1vcpu-1gb"),
    ({"cpu": 3, "ram": 1024}, "s-2vcpu-4gb", "match no size_mapping entry"),
    ({"cpu": 3, "ram": 1024}, "s-8vcpu-16gb", None),
    ({}, "s-2vcpu-4gb", None),
])
def test_droplet_sizes_are_held_against_the_limits_through_the_size_mapping(limits, size, expected):
    found = size_check(MAPPING)(resource(limits=limits), machine("7", size=size))
    assert (found[1] if found else None) == expected if expected is None else expected in found[1]


def test_a_droplet_carrying_two_resources_tags_is_never_provably_one_offerings():
    droplets = [{"id": 7, "name": "x", "size_slug": "s", "status": "active", "created_at": None,
                 "tags": ["waldur", "waldur-resource:" + R1, "WALDUR-RESOURCE:" + R2]},
                {"id": 8, "name": "y", "size_slug": "s", "status": "active", "created_at": None,
                 "tags": ["waldur-resource:" + R1]}]
    found = holdings_of(droplets, {R1, R2})
    assert [(item["key"], item["owner"], item["marked"]) for item in found] == [
        ("7", R1, False), ("7", R2, False), ("8", R1, True)]


# ---- orders ------------------------------------------------------------------------------------

def test_a_stuck_order_says_what_waldur_and_the_cloud_hold():
    order = {"uuid": "d" * 32, "type": "Create", "marketplace_resource_uuid": R1, "age_hours": 2.0,
             "modified": hours_ago(2), "error_message": "boom"}
    findings = judged([resource(state="Creating")], [holding("5")], {"5": machine("5")}, orders=[order])
    assert kinds(findings) == [("stuck_order", None, False)]
    detail = findings[0]["detail"]
    assert "executing for 2.0 h" in detail and "droplet 5 carries its mark" in detail and "last error: boom" in detail

    findings = judged([resource(state="Creating")], orders=[order])
    assert "nothing carries its mark" in findings[0]["detail"]


# ---- cleanup and the report -------------------------------------------------------------------

def test_cleanup_takes_only_old_deletable_orphans_that_a_direct_read_shows_gone():
    findings = judged([], [holding("1", owner=R1, created=30), holding("2", owner=R2, created=2),
                           holding("3", owner=R3, marked=False)])
    young_unknown = dict(holding("4", owner="d" * 32), created_at=None)
    findings += judged([], [young_unknown])
    assert plan_cleanup(findings, enabled=False, min_age_hours=24, now=NOW) == ([], [R1], "")
    assert [item["cleanup"] for item in findings] == [
        "would be deleted with audit_cleanup: marked when a pass proves its resource gone, deleted 24 h later if it "
        "is still gone", "kept: younger than 24 h", "kept: not deletable by the audit", "kept: its age is unknown"]
    # without a direct read nothing is deleted: the candidates are what to read
    chosen, candidates, refused = plan_cleanup(findings, enabled=True, min_age_hours=24, now=NOW)
    assert (chosen, candidates, refused) == ([], [R1], "")
    assert findings[0]["cleanup"] == "kept: resource %s was not read in Waldur directly" % R1
    # only Waldur's own 404 for a resource the listing does not hold is evidence here; the first time it
    # marks the holding, and deletes nothing
    for answer, gone in (("not found", True), ("Terminated", False), ("OK", False), ("Erred", False)):
        findings[0].pop("_mark", None)
        chosen, _candidates, _refused = plan_cleanup(findings, enabled=True, min_age_hours=24, evidence={R1: answer},
                                                     now=NOW)
        assert chosen == [] and findings[0].get("_mark") == ("mark" if gone else None), answer
        assert findings[0]["cleanup"] == (
            "kept: first seen gone at 2026-03-01T12:00:00Z (marked waldur-orphan-since 20260301T120000Z); deleted "
            "after 24 h if still gone" if gone else
            "kept: that resource %s is gone could not be proven: Waldur's listing shows it nowhere, a direct read "
            "answered Terminated" % R1 if answer == "Terminated" else
            "kept: a direct read of resource %s in Waldur answered %s" % (R1, answer))
    plan_cleanup(findings, enabled=True, min_age_hours=24, evidence={}, now=NOW)
    assert findings[0]["cleanup"] == "kept: a direct read of resource %s in Waldur was not made" % R1


def marked(key, owner, created=30, seen=None):
    """A holding whose object carries the marks ``seen`` (hours ago, or mark values)."""
    values = [value if isinstance(value, str) else mark_value(NOW - datetime.timedelta(hours=value))
              for value in (seen or [])]
    return dict(holding(key, owner=owner, created=created), marks=[values])


@pytest.mark.parametrize("seen, grace, expected", [
    ([30], 24, "delete"),
    ([25], 24, "delete"),
    ([23], 24, "kept: first seen gone at 2026-02-28T13:00:00Z; deleted after 24 h if still gone (1.0 h left)"),
    ([1], 0.5, "delete"),
    # the youngest of its marks counts
    ([30, 2], 24, "kept: first seen gone at 2026-03-01T10:00:00Z; deleted after 24 h if still gone (22.0 h left)"),
    # no evidence of a first sighting: one in the future, one older than the object, one that is no time
    ([-1], 0, "mark"),
    ([40], 0, "mark"),
    (["yesterday"], 0, "mark"),
    ([], 0, "mark"),
])
def test_a_holding_is_deleted_only_when_its_mark_is_the_grace_period_old(seen, grace, expected):
    findings = judged([resource(R1, state="Terminated", backend_id="9")], [marked("1", R1, seen=seen)])
    chosen, _candidates, _refused = plan_cleanup(findings, enabled=True, min_age_hours=24, now=NOW,
                                                 evidence={R1: "Terminated"}, grace_hours=grace)
    [item] = findings
    assert (item["cleanup"] if expected != "mark" else item.get("_mark")) == expected
    assert chosen == ([item] if expected == "delete" else [])


def test_check_mode_says_what_it_would_mark():
    findings = judged([resource(R1, state="Terminated", backend_id="9")], [marked("1", R1)])
    plan_cleanup(findings, enabled=True, min_age_hours=24, now=NOW, evidence={R1: "Terminated"}, check_mode=True)
    assert findings[0]["cleanup"] == ("kept: first seen gone at 2026-03-01T12:00:00Z (would mark waldur-orphan-since "
                                      "20260301T120000Z); deleted after 24 h if still gone")


@pytest.mark.parametrize("listed, answer, why", [
    ("absent", "Terminated", "Waldur's listing shows it nowhere, a direct read answered Terminated"),
    ("Terminated", "not found", "Waldur's listing shows it Terminated, a direct read answered not found"),
    ("absent", "unproven: Waldur GET /api/marketplace-provider-resources/x/ failed (HTTP 404): <html>",
     "a direct read in Waldur was unproven: Waldur GET /api/marketplace-provider-resources/x/ failed (HTTP 404): "
     "<html>"),
])
def test_reads_that_disagree_or_prove_nothing_never_delete_nor_touch_a_mark(listed, answer, why):
    resources = [resource(R1, state="Terminated", backend_id="9")] if listed == "Terminated" else []
    findings = judged(resources, [marked("1", R1, seen=[48])])
    chosen, _candidates, _refused = plan_cleanup(findings, enabled=True, min_age_hours=24, now=NOW,
                                                 evidence={R1: answer})
    assert chosen == [] and "_mark" not in findings[0]
    assert findings[0]["cleanup"] == "kept: that resource %s is gone could not be proven: %s" % (R1, why)


@pytest.mark.parametrize("answer, unmark", [("OK", True), ("Erred", True), ("resource of offering %s" % R3, True),
                                            (None, False)])
def test_a_direct_read_showing_the_resource_alive_makes_its_mark_no_evidence(answer, unmark):
    findings = judged([resource(R1, state="Terminated", backend_id="9")], [marked("1", R1, seen=[48])])
    chosen, _candidates, _refused = plan_cleanup(findings, enabled=True, min_age_hours=24, now=NOW,
                                                 evidence={R1: answer} if answer else {})
    assert chosen == [] and findings[0].get("_mark") == ("unmark" if unmark else None)


def test_a_mark_whose_resource_the_listing_shows_alive_is_stale():
    holdings = [marked("1", R1, seen=[48]), marked("2", R2, seen=[48]), marked("3", R3, seen=[48]),
                holding("4", owner=R1)]
    resources = {R1: resource(R1), R2: resource(R2, state="Terminated")}
    assert [(item["key"], found["uuid"]) for item, found in stale_marks(holdings, resources)] == [("1", R1)]


def test_marks_are_read_in_every_form_and_the_youngest_object_bounds_them():
    assert parse_mark("20261204T120000Z") == datetime.datetime(2026, 12, 4, 12, tzinfo=datetime.timezone.utc)
    assert parse_mark("20261204T1200Z") == parse_mark("2026-12-04T12:00:00Z") == parse_mark("20261204t120000z")
    assert parse_mark("soon") is None and mark_value(NOW) == "20260301T120000Z"
    held = marked("1", R1, created=30, seen=[20])
    assert holding_mark(held, NOW) == (NOW - datetime.timedelta(hours=20), True)
    assert holding_mark(dict(held, youngest_at=hours_ago(10)), NOW) == (None, True)  # a newer object joined it
    assert holding_mark(dict(held, marks=[[mark_value(NOW - datetime.timedelta(hours=20))], []]), NOW) == (None, True)
    assert holding_mark(holding("2"), NOW) == (None, False)


def test_the_youngest_object_decides_the_age_and_a_foreign_object_keeps_the_holding():
    old_group_young_vm = dict(holding("1", owner=R1, created=48), youngest_at=hours_ago(1))
    with_foreign = dict(holding("2", owner=R2, created=48), unmarked=["virtual machine database"])
    findings = judged([], [old_group_young_vm, with_foreign])
    assert [item["age_hours"] for item in findings] == [1.0, 48.0]
    assert not findings[1]["deletable"] and "virtual machine database" in findings[1]["action"]
    chosen, candidates, _refused = plan_cleanup(findings, enabled=True, min_age_hours=24,
                                                evidence={R1: "not found", R2: "not found"})
    assert chosen == [] and candidates == []
    assert [item["cleanup"] for item in findings] == ["kept: younger than 24 h", "kept: not deletable by the audit"]


def test_an_erred_resource_is_not_gone():
    findings = judged([resource(R1, state="Erred")], [holding("1", owner=R1)])
    assert findings[0]["kind"] == "orphan" and not findings[0]["deletable"]
    assert "terminate the resource in Waldur" in findings[0]["action"]


def test_the_circuit_breaker_refuses_the_whole_cleanup():
    owners = ["%032x" % number for number in range(1, 8)]
    findings = judged([resource("f" * 32)], [marked(str(index), owner, seen=[25]) for index, owner in enumerate(owners)])
    evidence = dict((owner, "not found") for owner in owners)
    chosen, candidates, refused = plan_cleanup(findings, enabled=True, min_age_hours=24, evidence=evidence, now=NOW)
    assert (chosen, candidates) == ([], []) and "7 holdings, more than audit_cleanup_max=5" in refused
    assert all(item["cleanup"] == "kept: cleanup refused (more than audit_cleanup_max)"
               for item in findings if item["kind"] == "orphan")
    chosen, _candidates, refused = plan_cleanup(findings, enabled=True, min_age_hours=24, evidence=evidence,
                                                max_deletions=7, now=NOW)
    assert len(chosen) == 7 and refused == ""
    # Waldur listing nothing at all is no evidence: refused however few
    chosen, _candidates, refused = plan_cleanup(findings[:1], enabled=True, min_age_hours=24, evidence=evidence,
                                                waldur_lists_nothing=True)
    assert chosen == [] and refused.startswith("Waldur lists no resource of this offering while 1 of its holding carry")


def test_the_report_counts_escapes_and_shows_what_to_do(tmp_path):
    findings = judged([resource(backend_id="7", name="a|b")], [holding("1", owner=R2)])
    plan_cleanup(findings, enabled=True, min_age_hours=24)
    findings[0]["cleanup"] = "deleted"
    report, text, lines = build_report("DO", "e" * 32, "digitalocean", findings, ["a note"], True, 24, False, 3,
                                       now=NOW)
    assert report["status"] == FINDINGS
    assert report["counts"] == {"orphans": 1, "vanished": 1, "drift": 0, "stuck_orders": 0, "orphans_by_name": 0,
                                "deleted": 1, "would_delete": 0, "cleanup_failed": 0, "marked": 0, "would_mark": 0,
                                "repaired": 0, "would_repair": 0, "repair_failed": 0}
    assert all("_holding" not in item for item in report["findings"])
    json.dumps(report)  # the report is plain data
    assert "a\\|b" in text and "## Notes" in text and "- a note" in text
    assert lines[0].startswith("Audit of DO (digitalocean): findings - orphans=1, vanished=1")
    assert "deleted by audit_cleanup" in lines[2] and lines[3].strip().startswith("why: no resource")

    paths = write_report_files(str(tmp_path / "new" / "dir"), "DO", report, text)
    assert [os.path.basename(path) for path in paths] == ["DO.json", "DO.md"]
    assert json.loads(open(paths[0]).read())["counts"]["deleted"] == 1
    assert stat.S_IMODE(os.stat(paths[0]).st_mode) == 0o640
    assert sorted(os.listdir(str(tmp_path / "new" / "dir"))) == ["DO.json", "DO.md"]  # no temporary left


def test_nothing_found_is_clean_and_says_so():
    report, text, lines = build_report("DO", "e" * 32, "digitalocean", [], [], False, 24, False, 1, now=NOW)
    assert report["status"] == CLEAN and lines[-1] == "nothing found" and "the cloud and Waldur agree" in text
