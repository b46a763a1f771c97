"""Evidence before action (issue 22, Azure): end to end through the real order and audit passes,
the real Azure SDKs over TLS against the Azure simulator, and the Waldur simulator.

The agent deletes objects, not containers, and only with positive evidence: a resource group goes
whole only when a fresh listing of it shows nothing without the resource's owner mark; a create
counts as made only when Azure confirmed it; a transient failure is a retry, bounded by the deadline.
One test per harm seen on the way there, and the healthy world's deletions as they were."""

from __future__ import annotations

import time

import pytest

from tests.helpers import run_playbook
from tests.integration.azure_state import (
    OFFERING_TAG, RESOURCE_TAG, all_vms, arm, arm_deletes, arm_writes, dedicated_group, vm_id)
from tests.integration.passes import ORDER_PASS, assert_done, assert_erred, run_pass, terminate, write_config
from tests.integration.test_audit import ago, azure_tags, report, run_audit, seed_chain_resource, write_site_config
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

UUID = W.AZURE_RESOURCE_UUID.replace("-", "").lower()
OFFERING_HEX = W.AZURE_OFFERING_UUID.replace("-", "").lower()
OURS = {RESOURCE_TAG: UUID, OFFERING_TAG: OFFERING_HEX}
OTHER = "feedface" * 4
GROUP = dedicated_group(UUID, "azure-vm-1")
MACHINE = vm_id(GROUP, "azure-vm-1")


def assert_left_for_the_next_pass(waldur, order_uuid: str) -> None:
    order = waldur.app.order(order_uuid)
    assert order["state"] == "executing" and not order["error_message"], (order["state"], order["error_message"])


def built(waldur, azure, config) -> None:
    """The default preset's Create order, carried out: machine azure-vm-1 in its own group."""
    run_pass(ORDER_PASS, config)
    assert_done(waldur, W.AZURE_ORDER_UUID)
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == MACHINE


# ---- Terminate --------------------------------------------------------------------------------

def test_terminate_keeps_a_dedicated_group_that_holds_foreign_machines(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    built(waldur, azure, config)
    # another resource's machine and a hand-made one, put into our group (which keeps its tags)
    theirs = azure.app.seed_vm("theirs", GROUP, tags={RESOURCE_TAG: OTHER}, group_tags=OURS)
    handmade = azure.app.seed_vm("handmade", GROUP, group_tags=OURS)

    order = terminate(waldur, W.AZURE_RESOURCE_UUID)
    run = run_pass(ORDER_PASS, config, json_log=True)

    assert_done(waldur, order)
    assert azure.app.get(MACHINE) is None
    assert azure.app.get(theirs) is not None and azure.app.get(handmade) is not None
    assert azure.app.get(arm(GROUP)) is not None
    assert "resource_groups.delete" not in arm_writes(azure)
    assert "kept resource group %s: it holds" % GROUP in run.output
    assert "virtual machine handmade (no owner tag)" in run.output
    assert "virtual machine theirs (owner tag %s=%s)" % (RESOURCE_TAG, OTHER) in run.output
    # our chain went object by object; theirs is whole
    for name in ("netazure-vm-1", "pubipazure-vm-1", "nicazure-vm-1"):
        assert not [rid for rid in azure.app.resources() if rid.lower().endswith("/" + name)]
    assert [rid for rid in azure.app.resources() if rid.endswith("/nictheirs")]


def test_terminate_without_backend_id_keeps_a_customer_group_carrying_the_owner_tag(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    azure.app.add_fault("nics.put", status=409)  # the create fails and is rolled back: Erred, no backend id
    run_pass(ORDER_PASS, config)
    assert_erred(waldur, W.AZURE_ORDER_UUID, "Injected fault on nics.put")
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == ""
    # the customer copied the resource's owner tag onto their own group, for cost reports
    database = azure.app.seed_vm("database", "customer-prod-rg", group_tags={RESOURCE_TAG: UUID})
    tagged_ip = azure.app.apply_public_ip("customer-prod-rg", "pubip-ours", {
        "location": "westeurope", "sku": {"name": "Standard"}, "tags": OURS,
        "properties": {"publicIPAllocationMethod": "Static"}})[0]["id"]
    since = len(azure.app.calls)

    order = terminate(waldur, W.AZURE_RESOURCE_UUID)
    run = run_pass(ORDER_PASS, config, json_log=True)

    assert_done(waldur, order)
    assert azure.app.get(arm("customer-prod-rg")) is not None and azure.app.get(database) is not None
    assert azure.app.get(tagged_ip) is None  # what carries the tag is the resource's, and goes
    assert "resource_groups.delete" not in arm_writes(azure, since)
    assert ("kept resource group customer-prod-rg: it carries owner tag %s=%s but is not a group the agent names "
            "for this resource" % (RESOURCE_TAG, UUID)) in run.output


# ---- audit cleanup ----------------------------------------------------------------------------

def test_audit_cleanup_never_deletes_a_young_untagged_machine_in_an_old_orphan_group(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    orphan_uuid, orphan_vm = seed_chain_resource(waldur, azure, "erred-build", created_hours=48, register=False)
    group = dedicated_group(orphan_uuid, "erred-build")
    young = azure.app.seed_vm("young", group, group_tags=azure_tags(orphan_uuid), created=ago(1))
    config = write_site_config(tmp_path, waldur, azure=azure)

    run = run_audit(tmp_path, config, audit_cleanup=True)

    assert run.rc in (0, 2), run.output[-4000:]
    # a holding with anything unmarked in it is the operator's to sort out: nothing of it goes
    assert azure.app.get(young) is not None and azure.app.get(arm(group)) is not None
    assert azure.app.get(orphan_vm) is not None
    assert arm_deletes(azure) == []
    [finding] = [item for item in report(tmp_path, "Azure VM")["findings"] if item["kind"] == "orphan"]
    assert finding["age_hours"] <= 1.1  # the youngest object's age, not the group's
    assert finding["cleanup"] == "kept: not deletable by the audit"
    assert "virtual machine young" in finding["action"] and "without this mark" in finding["action"]


# ---- what Azure made although it did not say so -----------------------------------------------

def test_a_machine_azure_made_but_answered_409_is_adopted_not_rolled_back(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    azure.app.add_fault("vms.put", status=409, apply=True)

    run_pass(ORDER_PASS, config)

    assert_done(waldur, W.AZURE_ORDER_UUID)
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == MACHINE
    assert all_vms(azure) == [MACHINE] and arm_deletes(azure) == []


def test_a_machine_azure_made_but_answered_500_is_adopted_not_rolled_back(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    azure.app.add_fault("vms.put", status=500, apply=True, times=-1, retry_after=1)

    run_pass(ORDER_PASS, config)

    order = waldur.app.order(W.AZURE_ORDER_UUID)
    assert order["state"] in ("done", "executing") and not order["error_message"], order
    assert all_vms(azure) == [MACHINE] and arm_deletes(azure) == []
    azure.app.clear_faults()
    run_pass(ORDER_PASS, config)
    assert_done(waldur, W.AZURE_ORDER_UUID)
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == MACHINE
    assert all_vms(azure) == [MACHINE] and arm_deletes(azure) == []


def test_a_500_on_the_machine_put_is_a_retry_and_the_next_pass_finishes_the_chain(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    azure.app.add_fault("vms.put", status=500, times=-1, retry_after=1)  # never carried out

    run_pass(ORDER_PASS, config, rc=4)  # work left for the next run

    assert_left_for_the_next_pass(waldur, W.AZURE_ORDER_UUID)
    assert arm_deletes(azure) == [] and all_vms(azure) == []
    assert azure.app.get(arm(GROUP)) is not None  # nothing rolled back
    azure.app.clear_faults()
    since = len(azure.app.calls)

    run_pass(ORDER_PASS, config)

    assert_done(waldur, W.AZURE_ORDER_UUID)
    assert arm_writes(azure, since) == ["vms.put", "disks.update"] and arm_deletes(azure) == []
    assert all_vms(azure) == [MACHINE]


# ---- names that coincide in one batch ----------------------------------------------------------

def test_two_creates_whose_names_coincide_in_a_shared_group_are_both_refused_before_any_write(
        tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure, default_resource_group="shared-rg")
    # the same first 8 hex, names that sanitize alike: both would be web-server-1234abcd
    first, second = "1234abcd" + "0" * 23 + "1", "1234abcd" + "0" * 23 + "2"
    orders = [waldur.app.seed_order(W.AZURE_OFFERING_UUID, resource_uuid=uuid, name=name,
                                    attributes={"name": name, "ssh_key": W.SSH_KEYS[0]["uuid"]},
                                    limits=dict(W.AZURE_PLAN_QUOTAS))["uuid"]
              for uuid, name in ((first, "Web Server"), (second, "web--server!"))]

    run_pass(ORDER_PASS, config)

    for order in orders:
        message = assert_erred(waldur, order, "would get virtual machine web-server-1234abcd in resource group "
                                              "shared-rg")["error_message"]
        assert first in message and second in message
    assert arm_writes(azure) == [] and arm_deletes(azure) == []


# ---- throttled past the deadline ---------------------------------------------------------------

def test_a_write_throttled_for_900_seconds_ends_as_a_retry_before_the_deadline(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    azure.app.add_fault("vms.put", status=429, retry_after=900, times=-1)
    started = time.monotonic()

    run = run_playbook(ORDER_PASS, extra_vars={"order_process_deadline": 120},
                       env={"WALDUR_SITE_AGENT_CONFIG": str(config)})

    assert run.rc == 4, run.output[-6000:]  # the order left for the next run
    # the SDK would have slept 900 s (then the batch cut the item at its 120 s deadline)
    assert time.monotonic() - started < 115
    assert len(azure.app.calls_of("vms.put")) == 1
    assert_left_for_the_next_pass(waldur, W.AZURE_ORDER_UUID)
    assert arm_deletes(azure) == [] and azure.app.get(arm(GROUP)) is not None


# ---- the healthy world, as it was ---------------------------------------------------------------

def test_terminate_of_a_normal_machine_still_deletes_its_group_and_a_rollback_what_it_made(
        tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    built(waldur, azure, config)

    order = terminate(waldur, W.AZURE_RESOURCE_UUID)
    run_pass(ORDER_PASS, config)

    assert_done(waldur, order)
    assert [call["operation"] for call in arm_deletes(azure)] == ["resource_groups.delete"]
    assert azure.app.resources() == []

    # a create refused at the machine (nothing made by Azure) rolls back what this run made
    waldur.app.reset("default")
    azure.app.add_fault("vms.put", status=400)
    since = len(azure.app.calls)
    run_pass(ORDER_PASS, config)
    message = assert_erred(waldur, W.AZURE_ORDER_UUID, "Injected fault on vms.put")["error_message"]
    assert "rolled back: deleted resource group %s" % GROUP in message
    assert [call["operation"] for call in arm_deletes(azure, since)] == ["resource_groups.delete"]
    assert azure.app.resources() == []
