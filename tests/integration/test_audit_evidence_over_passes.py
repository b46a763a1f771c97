"""No decision on an unproven read, in the audit (issue 37): through the real playbooks/audit.yml over
the Waldur, DigitalOcean and Azure simulators.

* audit_repair acts only on a machine carrying its resource's owner tag and no other: a backend id
  pointing at another resource's droplet, or at an untagged one, leaves it untouched;
* audit_cleanup deletes a holding only when its resource is proven gone on two passes at least
  audit_cleanup_grace_hours apart: the first marks the cloud objects (``waldur-orphan-since``), a later
  one deletes; a resource alive again clears the mark; a Waldur restored from an older backup deletes
  nothing in one pass;
* a direct read answering a 404 that is not Waldur's own (an HTML page, an empty body) never deletes.
"""

from __future__ import annotations

import copy
import datetime

import pytest

from tests.integration.azure_state import arm, arm_ids, dedicated_group
from tests.integration.test_audit import (
    OLD,
    do_tag,
    new_uuid,
    report,
    run_audit,
    seed_chain_resource,
    seed_droplet_resource,
    write_site_config,
)
from tests.simulators.digitalocean import catalogue
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

DO_OFFERING, AZURE_OFFERING = "DigitalOcean VM", "Azure VM"
MARK = "waldur-orphan-since"
BIG = "s-2vcpu-4gb"  # what the drifted droplets are; Waldur's limits map to s-1vcpu-1gb


def finding_of(data: dict, resource_uuid: str, kind: str | None = None) -> dict:
    [item] = [item for item in data["findings"] if item["resource_uuid"] == resource_uuid
              and (kind is None or item["kind"] == kind)]
    return item


def grown_outside_waldur(do, droplet_id: int) -> None:
    """The droplet resized to BIG by hand, CPU and RAM only (its disk stays): drift audit_repair can undo."""
    size = catalogue.SIZES_BY_SLUG[BIG]
    with do.app.lock:
        do.app._droplets[droplet_id].update(size=copy.deepcopy(size), size_slug=BIG, memory=size["memory"],
                                            vcpus=size["vcpus"])


def forget(waldur, resource_uuid: str) -> dict:
    """Waldur loses the resource, as when it is restored from a backup older than the resource."""
    with waldur.app.lock:
        return waldur.app.market.resources.pop(resource_uuid)


def bring_back(waldur, record: dict, **changes) -> None:
    with waldur.app.lock:
        waldur.app.market.resources[record["uuid"]] = dict(record, **changes)


def droplet_marks(do, droplet_id: int) -> list[str]:
    return [tag for tag in do.app.droplet(droplet_id)["tags"] if tag.startswith(MARK + ":")]


def plant_droplet_mark(do, droplet_id: int, hours_ago: float) -> str:
    """The droplet's marks replaced by one of ``hours_ago`` (as a pass that long ago would have left it)."""
    moment = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=hours_ago)
    tag = "%s:%s" % (MARK, moment.strftime("%Y%m%dT%H%M%SZ"))
    with do.app.lock:
        droplet = do.app._droplets[droplet_id]
        droplet["tags"] = [t for t in droplet["tags"] if not t.startswith(MARK + ":")] + [tag]
        do.app._tags.setdefault(tag, {"name": tag})
    return tag


def group_mark(azure, group: str) -> str | None:
    return (azure.app.get(arm(group)) or {}).get("tags", {}).get(MARK)


def do_writes(do, since: int) -> list[str]:
    return [call["operation"] for call in do.app.write_calls(since)]


def arm_writes(azure, since: int) -> list[str]:
    return [call["operation"] for call in azure.app.write_calls(since) if call["operation"] != "token"]


def without_spoilt_exchanges(waldur) -> None:
    with waldur.app.lock:  # the injected answers are not Waldur's schema on purpose
        waldur.app.exchanges.clear()


# ---- audit_repair: only the resource's own droplet ------------------------------------------------

def test_repair_never_touches_a_droplet_that_is_not_provably_the_resources_own(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    # a droplet carrying another resource's tag (an offering sharing the account), which resource
    # "borrowed" records as its backend id; an untagged droplet "untagged" records; and a resource's
    # own droplet, all three resized outside Waldur
    someone_else = new_uuid()
    foreign = do.app.seed_droplet("foreign", tags=["waldur", do_tag(someone_else)])
    borrowed = waldur.app.seed_resource(W.DO_OFFERING_UUID, "borrowed", backend_id=str(foreign["id"]),
                                        limits=dict(W.DO_PLAN_QUOTAS))["uuid"].replace("-", "")
    bare = do.app.seed_droplet("untagged", tags=["waldur"])
    untagged = waldur.app.seed_resource(W.DO_OFFERING_UUID, "untagged", backend_id=str(bare["id"]),
                                        limits=dict(W.DO_PLAN_QUOTAS))["uuid"].replace("-", "")
    own_uuid, own_droplet = seed_droplet_resource(waldur, do, "own")
    for droplet_id in (foreign["id"], bare["id"], own_droplet):
        grown_outside_waldur(do, droplet_id)
    config = write_site_config(tmp_path, waldur, do)
    since = len(do.app.calls)

    run = run_audit(tmp_path, config, audit_repair=True)

    assert run.rc == 2, run.output[-4000:]
    data = report(tmp_path, DO_OFFERING)
    assert finding_of(data, borrowed, "drift")["repair"] == (
        "refused: droplet %s is not provably this resource's: it carries the owner mark of another resource (%s); "
        "audit_repair acts only on a machine carrying this resource's owner mark and no other"
        % (foreign["id"], someone_else))
    assert finding_of(data, untagged, "drift")["repair"] == (
        "refused: droplet %s is not provably this resource's: it carries no owner mark; audit_repair acts only on a "
        "machine carrying this resource's owner mark and no other" % bare["id"])
    assert finding_of(data, own_uuid, "drift")["repair"].startswith(
        "repaired: resized droplet %s from %s to s-1vcpu-1gb" % (own_droplet, BIG))
    # no power action, no resize, not even a read of the two: they are as they were
    touched = [call["path"] for call in do.app.calls[since:] if call["operation"].startswith("droplet")
               and call["operation"] != "droplets.list"]
    assert touched and all("/%s" % own_droplet in path for path in touched), touched
    assert do.app.actions(foreign["id"]) == [] and do.app.actions(bare["id"]) == []
    assert (do.app.droplet(foreign["id"])["size_slug"], do.app.droplet(bare["id"])["size_slug"]) == (BIG, BIG)
    assert "is not provably this resource's" in run.stdout


# ---- audit_cleanup: proven gone on two passes, a grace period apart -------------------------------

def test_azure_a_machine_waldur_forgot_is_marked_first_and_deleted_only_after_the_grace_period(
        tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    seed_chain_resource(waldur, azure, "healthy")
    gone_uuid, gone_vm = seed_chain_resource(waldur, azure, "restored-away", created_hours=OLD)
    back_uuid, back_vm = seed_chain_resource(waldur, azure, "comes-back", created_hours=OLD)
    gone_group, back_group = dedicated_group(gone_uuid, "restored-away"), dedicated_group(back_uuid, "comes-back")
    # Waldur is restored from a backup older than both resources: it answers 404 for them
    forget(waldur, gone_uuid)
    comes_back = forget(waldur, back_uuid)
    config = write_site_config(tmp_path, waldur, azure=azure)
    before = arm_ids(azure)

    # the first pass: both proven gone (not listed, a direct read answers Waldur's own 404): marked, kept
    run = run_audit(tmp_path, config, audit_cleanup=True)
    assert run.rc == 2, run.output[-4000:]
    assert arm_ids(azure) == before
    first = finding_of(report(tmp_path, AZURE_OFFERING), gone_uuid)
    mark = group_mark(azure, gone_group)
    assert mark and group_mark(azure, back_group)
    assert first["cleanup"].startswith("kept: first seen gone at ") and first["cleanup"].endswith(
        "(marked %s %s); deleted after 24 h if still gone" % (MARK, mark))

    # a second pass within the grace period: nothing deleted, nothing written
    since = len(azure.app.calls)
    run = run_audit(tmp_path, config, audit_cleanup=True)
    assert arm_ids(azure) == before and arm_writes(azure, since) == []
    second = finding_of(report(tmp_path, AZURE_OFFERING), gone_uuid)
    assert second["cleanup"].startswith("kept: first seen gone at ") and "deleted after 24 h if still gone (" in \
        second["cleanup"] and group_mark(azure, gone_group) == mark

    # the other resource reappears in Waldur (the restore is undone): its mark is no evidence and goes
    bring_back(waldur, comes_back)
    # past the grace period (a few seconds here): the one still gone is deleted, the one back is kept
    since = len(azure.app.calls)
    run = run_audit(tmp_path, config, audit_cleanup=True, audit_cleanup_grace_hours=0.0005)
    assert run.rc in (0, 2), run.output[-4000:]
    data = report(tmp_path, AZURE_OFFERING)
    assert finding_of(data, gone_uuid)["cleanup"] == "deleted"
    assert arm(gone_group).lower() not in arm_ids(azure) and gone_vm.lower() not in arm_ids(azure)
    assert back_vm.lower() in arm_ids(azure) and group_mark(azure, back_group) is None
    assert not [item for item in data["findings"] if item["resource_uuid"] == back_uuid]
    assert any("its %s mark is no evidence, resource comes-back (%s) is OK in Waldur; the mark is removed"
               % (MARK, back_uuid) in note for note in data["notes"])
    deletes = [call["path"] for call in azure.app.calls[since:] if call["method"] == "DELETE"]
    assert deletes and all(gone_uuid in path for path in deletes)


def test_digitalocean_a_terminated_resources_droplet_is_marked_first_and_deleted_only_after_the_grace_period(
        tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    seed_droplet_resource(waldur, do, "healthy")
    gone_uuid, gone_droplet = seed_droplet_resource(waldur, do, "left-behind", state="Terminated", created_hours=OLD)
    back_uuid, back_droplet = seed_droplet_resource(waldur, do, "comes-back", state="Terminated", created_hours=OLD)
    # a droplet whose resource Waldur forgot: its tag names no resource of this offering (another
    # offering may share the account), so it is never marked nor deleted
    lost_uuid, lost_droplet = seed_droplet_resource(waldur, do, "forgotten", created_hours=OLD)
    forget(waldur, lost_uuid)
    config = write_site_config(tmp_path, waldur, do)
    before = {d["id"] for d in do.app.droplets()}

    # the first pass: marked (a droplet tag), kept
    since = len(do.app.calls)
    run = run_audit(tmp_path, config, audit_cleanup=True)
    assert run.rc == 2, run.output[-4000:]
    assert {d["id"] for d in do.app.droplets()} == before
    [mark] = droplet_marks(do, gone_droplet)
    assert droplet_marks(do, back_droplet) and droplet_marks(do, lost_droplet) == []
    assert sorted(do_writes(do, since)) == sorted(["tags.create"] * 2 + ["tags.tag_resources"] * 2)
    data = report(tmp_path, DO_OFFERING)
    assert finding_of(data, gone_uuid)["cleanup"].endswith(
        "(marked %s %s); deleted after 24 h if still gone" % (MARK, mark.split(":", 1)[1]))
    assert finding_of(data, lost_uuid)["cleanup"] == "kept: not deletable by the audit"

    # within the grace period: nothing written
    since = len(do.app.calls)
    run_audit(tmp_path, config, audit_cleanup=True)
    assert do_writes(do, since) == [] and droplet_marks(do, gone_droplet) == [mark]
    assert "h left)" in finding_of(report(tmp_path, DO_OFFERING), gone_uuid)["cleanup"]

    # a day later (the mark a pass 25 h ago would have left), the resource still Terminated; the other
    # one was set OK again meanwhile
    plant_droplet_mark(do, gone_droplet, hours_ago=25)
    waldur.app.market.resources[back_uuid]["state"] = "OK"
    # DigitalOcean's fresh read right before the delete answers a proxy's 404: not proof, kept
    do.app.add_fault("droplets.get", kind="html_404")
    since = len(do.app.calls)
    run_audit(tmp_path, config, audit_cleanup=True)
    assert "droplets.delete" not in do_writes(do, since) and gone_droplet in {d["id"] for d in do.app.droplets()}
    assert finding_of(report(tmp_path, DO_OFFERING), gone_uuid)["cleanup"].startswith(
        "kept: whether droplet %s still exists could not be proven" % gone_droplet)
    # the resource alive again: its droplet's mark went in that pass, the droplet stays
    assert droplet_marks(do, back_droplet) == [] and back_droplet in {d["id"] for d in do.app.droplets()}

    since = len(do.app.calls)
    run_audit(tmp_path, config, audit_cleanup=True)
    assert finding_of(report(tmp_path, DO_OFFERING), gone_uuid)["cleanup"] == "deleted"
    assert do_writes(do, since) == ["droplets.delete"]
    assert {d["id"] for d in do.app.droplets()} == before - {gone_droplet}


# ---- a direct read that proves nothing never deletes ------------------------------------------------

@pytest.mark.parametrize("answer", ["html_404", "empty_body", "json string 404"])
def test_a_direct_read_answering_a_404_that_is_not_waldurs_own_never_deletes(tmp_path, waldur_sim, azure_sim, answer):
    waldur, azure = waldur_sim, azure_sim
    seed_chain_resource(waldur, azure, "healthy")
    gone_uuid, _vm = seed_chain_resource(waldur, azure, "restored-away", created_hours=OLD)
    group = dedicated_group(gone_uuid, "restored-away")
    forget(waldur, gone_uuid)
    config = write_site_config(tmp_path, waldur, azure=azure)
    # a first pass marked it long ago: only this pass's proof is missing
    run_audit(tmp_path, config, audit_cleanup=True)
    assert group_mark(azure, group)
    if answer == "json string 404":
        waldur.app.add_fault("resources.get", status=404, body="<html><body>Not Found</body></html>", times=-1)
    else:
        waldur.app.add_fault("resources.get", kind=answer, times=-1)
    before, since = arm_ids(azure), len(azure.app.calls)

    run = run_audit(tmp_path, config, audit_cleanup=True, audit_cleanup_grace_hours=0)

    without_spoilt_exchanges(waldur)
    assert run.rc == 2, run.output[-4000:]
    assert arm_ids(azure) == before and arm_writes(azure, since) == []
    cleanup = finding_of(report(tmp_path, AZURE_OFFERING), gone_uuid)["cleanup"]
    assert cleanup.startswith("kept: that resource %s is gone could not be proven: a direct read in Waldur was "
                              "unproven: " % gone_uuid), cleanup
    assert group_mark(azure, group)  # neither evidence nor its absence: the mark stays as it was
