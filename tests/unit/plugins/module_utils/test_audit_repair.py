"""The audit on machines Waldur and the cloud disagree about: a machine behind an Erred resource is
named and never deleted, size drift says Waldur's limits against the machine's size, and
audit_repair's plan resizes only on a direct read's evidence, within its circuit breaker."""

import datetime

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit import Auditor, power_check
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_cleanup import plan_cleanup
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_repair import (
    DEFAULT_REPAIR_MAX,
    plan_repair,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_report import counts
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_report import build_report
from ansible_collections.waldur.site_agent.plugins.modules.azure_audit import size_check as azure_size_check
from ansible_collections.waldur.site_agent.plugins.modules.do_audit import size_check

NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.timezone.utc)
SMALL = {"cpu": 1, "ram": 1024}
MAPPING = {"s-1vcpu-1gb": SMALL, "s-2vcpu-4gb": {"cpu": 2, "ram": 4096}}


def uuid_of(index):
    return "%032x" % (index + 1)


def resource(index=0, state="OK", limits=None, **fields):
    return dict({"uuid": uuid_of(index), "name": "web-%d" % index, "state": state, "backend_id": str(100 + index),
                 "limits": dict(limits or SMALL), "attributes": {}, "paused": False, "downscaled": False}, **fields)


def machine(index=0, size="s-2vcpu-4gb", power="on", owners=None):
    key = str(100 + index)
    return {"id": key, "object": "droplet %s web-%d" % (key, index), "power": power, "size": size,
            "created_at": (NOW - datetime.timedelta(hours=48)).isoformat(),
            "owners": [uuid_of(index)] if owners is None else owners, "label": "droplet %s" % key}


def judged(resources, machines, checks=()):
    auditor = Auditor(resources, now=NOW, checks=list(checks) or [power_check, size_check(MAPPING)])
    auditor.machines(dict((item["id"], item) for item in machines))
    return auditor.sorted_findings()


def drift(findings, check):
    return [item for item in findings if item["kind"] == "drift" and item["check"] == check]


# ---- what the audit names ------------------------------------------------------------------------

def test_a_machine_behind_an_erred_resource_is_named_with_what_to_do_and_never_deleted():
    findings = judged([resource(state="Erred")], [machine(size="s-1vcpu-1gb")])
    [erred] = drift(findings, "erred_resource")
    assert "the machine exists and runs (the cloud bills it) while Waldur shows the resource Erred" in erred["detail"]
    assert "set the resource OK in Waldur" in erred["action"] and "terminate it in Waldur" in erred["action"]
    assert "never deletes" in erred["action"] and not erred["deletable"]
    to_delete, candidates, _refused = plan_cleanup(findings, True, 0, evidence={uuid_of(0): "Erred"})
    assert to_delete == [] and candidates == []
    assert counts(findings)["drift"] == 1


def test_a_machine_behind_an_ok_resource_is_no_erred_finding():
    assert judged([resource()], [machine(size="s-1vcpu-1gb")]) == []


def test_size_drift_says_waldurs_limits_against_the_droplets_size():
    [size] = drift(judged([resource()], [machine()]), "size")
    assert size["detail"] == "droplet 100 is s-2vcpu-4gb, Waldur keeps cpu=1 ram=1024 (which size_mapping maps to " \
                             "s-1vcpu-1gb)"
    assert size["_repair"] == {"size": "s-1vcpu-1gb", "from": "s-2vcpu-4gb", "key": "100", "owners": [uuid_of(0)],
                               "label": "droplet 100"}


def test_azure_size_drift_says_the_size_waldur_keeps():
    found = azure_size_check({"attributes": {"size": "Standard_B1s"}}, {"size": "Standard_B2s"})
    assert found[1] == "the virtual machine is Standard_B2s, Waldur keeps Standard_B1s (the size the resource ordered)"
    assert found[3] == {"size": "Standard_B1s", "from": "Standard_B2s"}


# ---- audit_repair's plan ---------------------------------------------------------------------------

def ok(limits=None, state="OK"):
    return {"uuid": uuid_of(0), "state": state, "limits": dict(limits or SMALL)}


def test_without_audit_repair_the_report_says_what_it_would_do_and_nothing_is_repaired():
    findings = judged([resource()], [machine()])
    assert plan_repair(findings, False, evidence={uuid_of(0): ok()}) == ([], [uuid_of(0)], "")
    assert drift(findings, "size")[0]["repair"] == "audit_repair would resize it to s-1vcpu-1gb"


def test_nothing_is_repaired_before_a_direct_read():
    findings = judged([resource()], [machine()])
    to_repair, candidates, _refused = plan_repair(findings, True)
    assert to_repair == [] and candidates == [uuid_of(0)]
    assert drift(findings, "size")[0]["repair"].startswith("kept: resource %s was not read" % uuid_of(0))


@pytest.mark.parametrize("answer, expected", [
    (ok(), "resize to s-1vcpu-1gb"),
    (ok(limits={"cpu": "1", "ram": 1024.0}), "resize to s-1vcpu-1gb"),  # Waldur's numbers in any form
    (ok(state="Updating"), "refused: a direct read of resource %s in Waldur shows it Updating" % uuid_of(0)),
    (ok(state="Erred"), "refused: a direct read of resource %s in Waldur shows it Erred" % uuid_of(0)),
    (ok(limits={"cpu": 2, "ram": 4096}), "refused: Waldur's limits changed since the listing (now cpu=2 ram=4096)"),
    ("not found", "refused: a direct read of resource %s in Waldur answered not found" % uuid_of(0)),
    (None, "refused: a direct read of resource %s in Waldur was not made" % uuid_of(0)),
])
def test_a_repair_acts_only_when_a_direct_read_shows_the_resource_ok_with_the_limits_judged_on(answer, expected):
    findings = judged([resource()], [machine()])
    evidence = {uuid_of(0): answer} if answer is not None else {}
    to_repair, _candidates, refused = plan_repair(findings, True, evidence=evidence)
    [size] = drift(findings, "size")
    assert size["repair"].startswith(expected) and refused == ""
    assert to_repair == ([size] if expected.startswith("resize") else [])


@pytest.mark.parametrize("owners, why", [
    ([uuid_of(7)], "it carries the owner mark of another resource (%s)" % uuid_of(7)),
    ([], "it carries no owner mark"),
    ([uuid_of(0), uuid_of(7)], "it carries the owner marks of 2 resources (%s, %s)" % (uuid_of(0), uuid_of(7))),
])
def test_only_a_machine_carrying_this_resources_owner_mark_and_no_other_is_repaired(owners, why):
    findings = judged([resource()], [machine(owners=owners)])
    to_repair, candidates, _refused = plan_repair(findings, True, evidence={uuid_of(0): ok()})
    assert to_repair == [] and candidates == []  # not even read in Waldur
    assert drift(findings, "size")[0]["repair"] == (
        "refused: droplet 100 is not provably this resource's: %s; audit_repair acts only on a machine carrying "
        "this resource's owner mark and no other" % why)
    # without audit_repair the report promises nothing for it either
    findings = judged([resource()], [machine(owners=owners)])
    assert plan_repair(findings, False) == ([], [], "") and drift(findings, "size")[0]["repair"] == ""


def test_a_machine_whose_owners_the_backend_did_not_list_is_not_repaired():
    findings = judged([resource()], [dict(machine(), owners=None)])
    del findings[0]["_repair"]["owners"]
    assert plan_repair(findings, True, evidence={uuid_of(0): ok()})[0] == []
    assert "whose machine it is is unknown" in findings[0]["repair"]


def test_the_circuit_breaker_refuses_the_whole_repair():
    resources = [resource(index) for index in range(DEFAULT_REPAIR_MAX + 1)]
    findings = judged(resources, [machine(index) for index in range(DEFAULT_REPAIR_MAX + 1)])
    evidence = dict((item["uuid"], dict(item)) for item in resources)
    to_repair, candidates, refused = plan_repair(findings, True, evidence=evidence)
    assert to_repair == [] and candidates == []
    assert refused.startswith("it would resize 6 machines, more than audit_repair_max=5")
    assert all(item["repair"] == "refused: more than audit_repair_max" for item in drift(findings, "size"))
    assert len(plan_repair(findings, True, evidence=evidence, max_repairs=6)[0]) == 6


def test_power_drift_and_an_erred_resource_are_not_repaired():
    findings = judged([resource(paused=True), resource(1, state="Erred")],
                      [machine(size="s-1vcpu-1gb"), machine(1, size="s-1vcpu-1gb")])
    assert sorted(item["check"] for item in findings) == ["erred_resource", "power"]
    assert plan_repair(findings, True, evidence={}) == ([], [], "")
    assert all(item["repair"] == "" for item in findings)


def test_limits_that_map_to_no_size_and_a_backend_that_cannot_resize_are_refused_naming_why():
    findings = judged([resource(limits={"cpu": 3, "ram": 1024})], [machine()])
    plan_repair(findings, True, evidence={})
    assert findings[0]["repair"] == "refused: Waldur's limits map to no size to resize it to"
    findings = judged([resource()], [machine()])
    assert plan_repair(findings, True, evidence={}, unsupported="no resize here") == ([], [], "")
    assert findings[0]["repair"] == "refused: no resize here"


def test_the_report_counts_repairs_and_the_table_shows_the_outcome():
    findings = judged([resource(), resource(1)], [machine(), machine(1)])
    plan_repair(findings, True, evidence={})
    findings[0]["repair"] = "repaired: resized droplet 100 from s-2vcpu-4gb to s-1vcpu-1gb"
    findings[1]["repair"] = "failed: boom"
    report, text, lines = build_report("DO", "e" * 32, "digitalocean", findings, [], False, 24, False, 3, now=NOW,
                                       repair=True)
    assert (report["counts"]["repaired"], report["counts"]["would_repair"], report["counts"]["repair_failed"]) == \
        (1, 0, 1)
    assert report["repair"]["enabled"] and "power is left to membership_sync" in report["repair_text"]
    assert "| repaired | would repair |" in text and "repaired: resized droplet 100" in text
    assert any("audit_repair repaired: resized droplet 100" in line for line in lines)
    assert all("_repair" not in item and "_limits" not in item for item in report["findings"])
