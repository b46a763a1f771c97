"""The audit pass end to end: the real playbooks/audit.yml over the Waldur, DigitalOcean and Azure
simulators (the real python-digitalocean and Azure SDKs), in a world seeded with one of each finding
beside healthy resources."""

from __future__ import annotations

import datetime
import json
import math
import uuid

import pytest
import requests
import yaml

from tests.helpers import REPO, run_playbook, simulator_site_config
from tests.integration.azure_state import OFFERING_TAG, RESOURCE_TAG, all_vms, arm, arm_ids, dedicated_group
from tests.integration.passes import log_lines
from tests.simulators.azure.simulator import GENERIC_TYPES
from tests.simulators.digitalocean import presets as DO
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

AUDIT_PASS = REPO / "playbooks" / "audit.yml"
DO_PAGE, WALDUR_PAGE = 200, 100
OLD, YOUNG = 30, 2  # hours: older and younger than the default threshold of 24


def ago(hours: float) -> str:
    return (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=hours)).isoformat()


def new_uuid() -> str:
    return uuid.uuid4().hex


def do_tag(resource_uuid: str) -> str:
    return "waldur-resource:" + resource_uuid


def azure_tags(resource_uuid: str, offering_uuid: str = W.AZURE_OFFERING_UUID) -> dict:
    return {RESOURCE_TAG: resource_uuid, OFFERING_TAG: offering_uuid}


# ---- the world ----------------------------------------------------------------------------------

def seed_droplet_resource(waldur, do, name, state="OK", size="s-1vcpu-1gb", created_hours=1, **resource):
    """A resource with its tagged droplet (what the order pass leaves); (resource uuid, droplet id)."""
    resource_uuid = new_uuid()
    droplet = do.app.seed_droplet(name, size=size, tags=["waldur", do_tag(resource_uuid)], created_at=ago(created_hours))
    waldur.app.seed_resource(W.DO_OFFERING_UUID, name, uuid=resource_uuid, state=state, backend_id=str(droplet["id"]),
                             limits=dict(W.DO_PLAN_QUOTAS), **resource)
    return resource_uuid, droplet["id"]


def seed_chain_resource(waldur, azure, name, state="OK", created_hours=1, register=True, size="Standard_B2s",
                        **resource):
    """A resource ordering a Standard_B2s with the chain the order pass builds for it in a group of
    its own (every object tagged; the machine of ``size``); (resource uuid, machine id)."""
    resource_uuid = new_uuid()
    group = dedicated_group(resource_uuid, name)
    machine = azure.app.seed_vm(name, group, size=size, chain_tags=azure_tags(resource_uuid),
                                group_tags=azure_tags(resource_uuid), os_disk_delete_option="Delete",
                                nic_delete_option="Delete", created=ago(created_hours))
    if register:
        waldur.app.seed_resource(W.AZURE_OFFERING_UUID, name, uuid=resource_uuid, state=state, backend_id=machine,
                                 limits=dict(W.AZURE_PLAN_QUOTAS),
                                 attributes={"name": name, "size": "Standard_B2s"}, **resource)
    return resource_uuid, machine


def stuck_order(waldur, offering_uuid, name, hours):
    """A Create order executing, unchanged, for ``hours``."""
    order = waldur.app.seed_order(offering_uuid, type="Create", state="executing", attributes={"name": name})
    with waldur.app.lock:
        record = waldur.app.market.orders[order["uuid"]]
        record["created"] = record["modified"] = datetime.datetime.now(datetime.timezone.utc) - \
            datetime.timedelta(hours=hours)
    return order["uuid"]


def seed_world(waldur, do, azure, healthy=100):
    """One of each finding and ``healthy`` resources per backend; what the report must list."""
    for index in range(healthy):
        seed_droplet_resource(waldur, do, "web-%d" % index)
        seed_chain_resource(waldur, azure, "vm-%d" % index)
    expected = {}
    # an orphan droplet: its resource was terminated, the droplet stayed
    orphan_uuid, orphan_droplet = seed_droplet_resource(waldur, do, "left-behind", state="Terminated",
                                                        created_hours=OLD)
    expected["orphan droplet"] = ("orphan", None, orphan_uuid, [str(orphan_droplet)])
    # an orphan Azure chain: built for an order Waldur erred (the resource is gone)
    chain_uuid, _machine = seed_chain_resource(waldur, azure, "erred-build", created_hours=OLD, register=False)
    expected["orphan chain"] = ("orphan", None, chain_uuid, [arm(dedicated_group(chain_uuid, "erred-build"))])
    # a vanished droplet: deleted outside Waldur
    vanished_uuid, vanished_droplet = seed_droplet_resource(waldur, do, "deleted-by-hand")
    response = requests.delete("%s/v2/droplets/%d" % (do.url, vanished_droplet), timeout=10,
                               headers={"Authorization": "Bearer " + DO.DO_TOKEN})
    assert response.status_code == 204
    expected["vanished droplet"] = ("vanished", None, vanished_uuid, [str(vanished_droplet)])
    # a droplet resized outside Waldur
    resized_uuid, resized_droplet = seed_droplet_resource(waldur, do, "resized", size="s-2vcpu-4gb")
    expected["resized droplet"] = ("drift", "size", resized_uuid, [str(resized_droplet)])
    # a running droplet whose resource is paused
    paused_uuid, paused_droplet = seed_droplet_resource(waldur, do, "paused", paused=True)
    expected["running while paused"] = ("drift", "power", paused_uuid, [str(paused_droplet)])
    # two droplets carrying one resource's tag
    twin_uuid, twin_droplet = seed_droplet_resource(waldur, do, "twin")
    second = do.app.seed_droplet("twin", tags=[do_tag(twin_uuid)])
    expected["two droplets, one tag"] = ("drift", "duplicate", twin_uuid, [str(twin_droplet), str(second["id"])])
    # an order executing for two hours
    order_uuid = stuck_order(waldur, W.DO_OFFERING_UUID, "slow-build", hours=2)
    resource_uuid = waldur.app.order(order_uuid)["marketplace_resource_uuid"]
    expected["stuck order"] = ("stuck_order", None, resource_uuid, [order_uuid])
    return expected


# ---- the pass -----------------------------------------------------------------------------------

def write_site_config(tmp_path, waldur, do=None, azure=None, **azure_settings):
    config = simulator_site_config(waldur.url, do_url=do.url if do else None, azure_url=azure.url if azure else None)
    for offering in config["offerings"]:
        if offering["backend_type"] == "azure":
            offering["backend_settings"].update(azure_settings)
    path = tmp_path / "waldur-site-agent-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_audit(tmp_path, config, check=False, json_log=False, **extra_vars):
    env = {"WALDUR_SITE_AGENT_CONFIG": str(config)}
    if json_log:
        env["ANSIBLE_STDOUT_CALLBACK"] = "waldur.site_agent.waldur_json"
    extra_vars.setdefault("audit_report_dir", str(tmp_path / "reports"))
    return run_playbook(AUDIT_PASS, extra_vars=extra_vars, env=env, check=check)


def report(tmp_path, name) -> dict:
    return json.loads((tmp_path / "reports" / ("%s.json" % name.replace(" ", "-"))).read_text())


def found(reports) -> dict:
    """(kind, check, resource uuid, object ids) of every finding of the reports."""
    return sorted((item["kind"], item["check"], item["resource_uuid"], sorted(item["object_ids"]))
                  for data in reports for item in data["findings"])


def pages(count, size):
    return max(1, math.ceil(count / size))


def operations(calls) -> list[str]:
    return [call["operation"] for call in calls]


# ---- tests --------------------------------------------------------------------------------------

def test_the_report_lists_exactly_the_seeded_findings_from_listings_only(tmp_path, waldur_sim, do_sim, azure_sim):
    waldur, do, azure = waldur_sim, do_sim, azure_sim
    expected = seed_world(waldur, do, azure)
    config = write_site_config(tmp_path, waldur, do, azure)
    since = {name: len(sim.app.calls) for name, sim in (("waldur", waldur), ("do", do), ("azure", azure))}
    droplets_before, arm_before = sorted(d["id"] for d in do.app.droplets()), arm_ids(azure)

    run = run_audit(tmp_path, config, json_log=True)

    # found something: the run fails, saying so, and each report says "findings"
    assert run.rc == 2, run.output[-4000:]
    lines = log_lines(run)
    failure = [line for line in lines if line["level"] == "error" and line["event"] != "playbook finished"]
    assert len(failure) == 1 and failure[0]["event"].startswith("AUDIT FINDINGS in DigitalOcean VM"), failure
    do_report, azure_report = report(tmp_path, "DigitalOcean VM"), report(tmp_path, "Azure VM")
    assert (do_report["status"], azure_report["status"]) == ("findings", "findings")
    assert found([do_report, azure_report]) == sorted(
        (kind, check, owner, sorted(ids)) for kind, check, owner, ids in expected.values())
    assert do_report["counts"] == {"orphans": 1, "vanished": 1, "drift": 3, "stuck_orders": 1, "orphans_by_name": 0,
                                   "deleted": 0, "would_delete": 0, "cleanup_failed": 0, "marked": 0, "would_mark": 0,
                                   "repaired": 0, "would_repair": 0, "repair_failed": 0}
    assert azure_report["counts"]["orphans"] == 1 and sum(azure_report["counts"].values()) == 1
    orphan = next(item for item in azure_report["findings"] if item["kind"] == "orphan")
    assert orphan["deletable"] and orphan["age_hours"] >= OLD - 0.2
    assert orphan["cleanup"] == ("would be deleted with audit_cleanup: marked when a pass proves its resource gone, "
                                 "deleted 24 h later if it is still gone")
    stuck = next(item for item in do_report["findings"] if item["kind"] == "stuck_order")
    assert 1.9 < stuck["age_hours"] < 2.2 and "nothing carries its mark" in stuck["detail"]
    markdown = (tmp_path / "reports" / "DigitalOcean-VM.md").read_text()
    assert "| orphan |" in markdown and "deleted-by-hand" in markdown

    # the counts are in the JSON log's pass summaries
    summaries = {line["offering"]: line for line in lines if line["event"] == "pass summary"}
    assert summaries["DigitalOcean VM"]["pass"] == "audit" and summaries["DigitalOcean VM"]["drift"] == 3
    assert summaries["Azure VM"]["orphans"] == 1 and summaries["Azure VM"]["status"] == "findings"

    # listings only: every call a page of a listing, as many as the objects need
    droplets = len(do.app.droplets())
    assert operations(do.app.calls[since["do"]:]) == ["droplets.list"] * pages(droplets, DO_PAGE)
    state = azure.app.dump_state()["resources"]
    tagged_groups = sum(1 for body in state.values() if body.get("type") == "Microsoft.Resources/resourceGroups"
                        and (body.get("tags") or {}).get(OFFERING_TAG) == W.AZURE_OFFERING_UUID)
    arm_calls = [op for op in operations(azure.app.calls[since["azure"]:]) if op not in ("token", "openid")]
    page_size = azure.app.page_size
    # what ARM lists as the subscription's resources (not subnets or rules: parts of their parents)
    listed = sum(1 for body in state.values() if body.get("type") in GENERIC_TYPES.values())
    assert sorted(arm_calls) == sorted(["resource_groups.list"] * pages(tagged_groups, page_size)
                                       + ["vms.list_all"] * 2 * pages(len(all_vms(azure)), page_size)
                                       + ["resources.list"] * pages(listed, page_size))
    waldur_calls = waldur.app.calls[since["waldur"]:]
    assert all(call["method"] == "GET" for call in waldur_calls)
    assert operations(waldur_calls).count("resources.list") == sum(
        pages(sum(1 for r in waldur.app.market.resources.values() if r["offering_uuid"] == offering), WALDUR_PAGE)
        for offering in (W.DO_OFFERING_UUID, W.AZURE_OFFERING_UUID))
    # one listing of the executing orders per offering; the offering that has none is read twice
    # (an empty listing is taken for nothing only when a second read agrees)
    executing = [offering for offering in (W.DO_OFFERING_UUID, W.AZURE_OFFERING_UUID) if any(
        order["offering_uuid"] == offering and order["state"] == "executing"
        for order in waldur.app.market.orders.values())]
    assert operations(waldur_calls).count("orders.list") == len(executing) + 2 * (2 - len(executing))
    assert not {"resources.get", "orders.get"} & set(operations(waldur_calls))
    # and nothing changed anywhere
    assert waldur.app.write_calls(since["waldur"]) == [] and do.app.write_calls(since["do"]) == []
    assert sorted(d["id"] for d in do.app.droplets()) == droplets_before and arm_ids(azure) == arm_before


def test_cleanup_deletes_only_the_old_orphans_that_carry_the_offerings_mark(tmp_path, waldur_sim, do_sim, azure_sim):
    waldur, do, azure = waldur_sim, do_sim, azure_sim
    seed_world(waldur, do, azure, healthy=3)
    orphan_droplet = next(d for d in do.app.droplets() if d["name"] == "left-behind")
    orphan_group = next(rid for rid in azure.app.resources() if "group-" in rid and rid.endswith("-erred-build"))
    # beside them: an untagged droplet with the orphan's name, a young orphan of each backend, a
    # droplet whose tag names no resource of this offering, and an orphan chain of another offering
    untagged = do.app.seed_droplet("left-behind", created_at=ago(OLD))
    young_uuid, young_droplet = seed_droplet_resource(waldur, do, "just-terminated", state="Terminated",
                                                      created_hours=YOUNG)
    stranger = do.app.seed_droplet("stranger", tags=[do_tag(new_uuid())], created_at=ago(OLD))
    young_chain, _machine = seed_chain_resource(waldur, azure, "young-build", created_hours=YOUNG, register=False)
    foreign_uuid = new_uuid()
    foreign_vm = azure.app.seed_vm("foreign", dedicated_group(foreign_uuid, "foreign"),
                                   chain_tags=azure_tags(foreign_uuid, "f" * 32),
                                   group_tags=azure_tags(foreign_uuid, "f" * 32), created=ago(OLD))
    config = write_site_config(tmp_path, waldur, do, azure)
    droplets_before = {d["id"] for d in do.app.droplets()}
    arm_before = arm_ids(azure)

    def cleanups():
        reports = (report(tmp_path, "DigitalOcean VM"), report(tmp_path, "Azure VM"))
        return {item["object_ids"][0]: item["cleanup"] for data in reports
                for item in data["findings"] if item["kind"] == "orphan"}

    def nothing_written(since_do, since_azure):
        return do.app.write_calls(since_do) == [] and [c for c in azure.app.write_calls(since_azure)
                                                       if c["operation"] != "token"] == []

    # --check says what would be marked (a first sighting of the resource gone), and nothing is written
    since_do, since_azure = len(do.app.calls), len(azure.app.calls)
    run = run_audit(tmp_path, config, check=True, audit_cleanup=True)
    assert run.rc == 2, run.output[-4000:]
    assert nothing_written(since_do, since_azure)
    assert {d["id"] for d in do.app.droplets()} == droplets_before and arm_ids(azure) == arm_before
    would = cleanups()
    assert {key: value for key, value in would.items() if not value.startswith("kept: first seen gone")} == {
        str(young_droplet): "kept: younger than 24 h",
        str(stranger["id"]): "kept: not deletable by the audit",
        arm(dedicated_group(young_chain, "young-build")): "kept: younger than 24 h",
    }
    for key in (str(orphan_droplet["id"]), orphan_group):
        assert "(would mark waldur-orphan-since " in would[key], would[key]
    assert "would mark waldur-orphan-since" in run.stdout

    # for real, the first time: the two old orphans are marked, nothing is deleted
    run = run_audit(tmp_path, config, audit_cleanup=True)
    assert run.rc == 2, run.output[-4000:]
    assert {d["id"] for d in do.app.droplets()} == droplets_before and arm_ids(azure) == arm_before
    assert report(tmp_path, "DigitalOcean VM")["counts"]["marked"] == 1
    assert report(tmp_path, "Azure VM")["counts"]["marked"] == 1

    # past the grace period (none here), --check says what would go, and nothing goes
    since_do, since_azure = len(do.app.calls), len(azure.app.calls)
    run = run_audit(tmp_path, config, check=True, audit_cleanup=True, audit_cleanup_grace_hours=0)
    assert nothing_written(since_do, since_azure)
    would = cleanups()
    assert (would[str(orphan_droplet["id"])], would[orphan_group]) == ("would delete", "would delete")
    assert "would delete" in run.stdout

    # for real: the two old orphans go, nothing else
    run = run_audit(tmp_path, config, audit_cleanup=True, audit_cleanup_grace_hours=0)
    assert run.rc == 2, run.output[-4000:]
    assert {d["id"] for d in do.app.droplets()} == droplets_before - {orphan_droplet["id"]}
    assert untagged["id"] in {d["id"] for d in do.app.droplets()}
    gone = arm_before - arm_ids(azure)
    assert gone and all(rid.startswith(orphan_group.lower()) for rid in gone)
    assert foreign_vm.lower() in arm_ids(azure)
    assert report(tmp_path, "DigitalOcean VM")["counts"]["deleted"] == 1
    assert report(tmp_path, "Azure VM")["counts"]["deleted"] == 1

    # the next audit no longer finds them, deletes nothing; what stays is reported as before
    since_do, since_azure = len(do.app.calls), len(azure.app.calls)
    run = run_audit(tmp_path, config, audit_cleanup=True)
    assert do.app.write_calls(since_do) == [] and [c for c in azure.app.write_calls(since_azure)
                                                   if c["operation"] != "token"] == []
    orphans = {item["object_ids"][0] for data in (report(tmp_path, "DigitalOcean VM"), report(tmp_path, "Azure VM"))
               for item in data["findings"] if item["kind"] == "orphan"}
    assert orphans == {str(young_droplet), str(stranger["id"]), arm(dedicated_group(young_chain, "young-build"))}
    assert young_uuid


def test_azure_shared_groups_legacy_machines_and_azure_drift(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    shared = "waldur-shared"
    healthy_uuid, healthy_vm = seed_chain_resource(waldur, azure, "healthy")
    # in the shared group: a healthy machine and an orphan one, both tagged on every object
    shared_uuid, shared_orphan = new_uuid(), new_uuid()
    shared_vm = azure.app.seed_vm("kept-" + shared_uuid[:8], shared, chain_tags=azure_tags(shared_uuid),
                                  created=ago(OLD))
    waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "kept", uuid=shared_uuid, backend_id=shared_vm)
    orphan_vm = azure.app.seed_vm("gone-" + shared_orphan[:8], shared, chain_tags=azure_tags(shared_orphan),
                                  created=ago(OLD))
    waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "gone", uuid=shared_orphan, state="Terminated",
                             backend_id=orphan_vm)
    # a legacy machine Waldur records (healthy) and one nothing records (orphan by name)
    legacy_vm = azure.app.seed_vm("legacy", "group-1a2b-legacy")
    waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "legacy", backend_id=legacy_vm)
    unknown_legacy = azure.app.seed_vm("unknown", "group-3c4d-unknown")
    # a machine deallocated while its resource runs, one resized, one vanished
    off_uuid, off_vm = seed_chain_resource(waldur, azure, "off")
    azure.app.set_vm_power_state(off_vm, "deallocated")
    resized_uuid, _resized_vm = seed_chain_resource(waldur, azure, "resized", size="Standard_B1s")
    vanished_uuid, vanished_vm = seed_chain_resource(waldur, azure, "vanished")
    azure.app.remove(arm(dedicated_group(vanished_uuid, "vanished")))
    config = write_site_config(tmp_path, waldur, azure=azure, default_resource_group=shared)
    # the first pass that finds the shared orphan's resource gone marks its objects, deletes nothing
    since = len(azure.app.calls)
    run = run_audit(tmp_path, config, audit_cleanup=True)
    assert run.rc == 2, run.output[-4000:]
    assert [call for call in azure.app.calls[since:] if call["method"] == "DELETE"] == []
    marked = [call["path"] for call in azure.app.calls[since:] if call["operation"] == "tags.update_at_scope"]
    assert marked and all(shared_orphan[:8] in path for path in marked)
    since = len(azure.app.calls)

    run = run_audit(tmp_path, config, audit_cleanup=True, audit_cleanup_grace_hours=0)

    assert run.rc == 2, run.output[-4000:]
    data = report(tmp_path, "Azure VM")
    findings = {(item["kind"], item["check"], item["resource_uuid"]) for item in data["findings"]}
    assert findings == {
        ("orphan", None, shared_orphan),
        ("orphan_by_name", None, None),
        ("drift", "power", off_uuid),
        ("drift", "size", resized_uuid),
        ("vanished", None, vanished_uuid),
    }
    by_name = next(item for item in data["findings"] if item["kind"] == "orphan_by_name")
    assert by_name["object_ids"] == [unknown_legacy] and by_name["cleanup"] == ""
    # the shared orphan's objects were deleted one by one; its neighbour and the legacy machines stay
    remaining = arm_ids(azure)
    assert orphan_vm.lower() not in remaining and not any(shared_orphan[:8] in rid for rid in remaining)
    for kept in (shared_vm, healthy_vm, legacy_vm, unknown_legacy, off_vm):
        assert kept.lower() in remaining
    assert arm(shared).lower() in remaining
    deletes = [call["path"] for call in azure.app.calls[since:] if call["method"] == "DELETE"]
    assert deletes and all(shared_orphan[:8] in path for path in deletes)
    assert healthy_uuid


def test_a_clean_offering_passes_and_a_failing_one_says_so(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    for index in range(3):
        seed_droplet_resource(waldur, do, "ok-%d" % index)
    config = write_site_config(tmp_path, waldur, do)
    run = run_audit(tmp_path, config)
    assert run.rc == 0, run.output[-4000:]
    assert report(tmp_path, "DigitalOcean VM")["status"] == "clean"
    assert "nothing found" in run.stdout

    do.app.add_fault("droplets.list", status=401, times=-1)
    run = run_audit(tmp_path, config)
    assert run.rc == 2
    data = report(tmp_path, "DigitalOcean VM")
    assert data["status"] == "failed" and "401" in data["msg"]
    assert "The audit pass failed for: DigitalOcean VM" in run.output


@pytest.mark.parametrize("healthy", [5, 120])
def test_the_number_of_calls_grows_only_with_pages(tmp_path, waldur_sim, do_sim, azure_sim, healthy):
    waldur, do, azure = waldur_sim, do_sim, azure_sim
    azure.app.page_size = 40
    for index in range(healthy):
        seed_droplet_resource(waldur, do, "web-%d" % index)
        seed_chain_resource(waldur, azure, "vm-%d" % index)
    config = write_site_config(tmp_path, waldur, do, azure)
    since = {name: len(sim.app.calls) for name, sim in (("waldur", waldur), ("do", do), ("azure", azure))}
    run = run_audit(tmp_path, config)
    assert run.rc == 0, run.output[-4000:]
    assert len(do.app.calls) - since["do"] == pages(healthy, DO_PAGE)
    arm_calls = [op for op in operations(azure.app.calls[since["azure"]:]) if op not in ("token", "openid")]
    # groups, machines, power states, and the subscription's resources (5 a chain: network, public IP,
    # network interface, machine, OS disk), each page by page
    assert len(arm_calls) == 3 * pages(healthy, 40) + pages(5 * healthy, 40)
    # per offering: the resources (one more for the default preset's pending order) and the orders
    # (none executing: an empty listing is read twice)
    waldur_lists = [op for op in operations(waldur.app.calls[since["waldur"]:]) if op.endswith(".list")]
    resource_pages = pages(healthy + 1, WALDUR_PAGE)
    assert sorted(waldur_lists) == sorted(["orders.list"] * 2 * 2 + ["resources.list"] * 2 * resource_pages)
