"""Every Azure object of a machine has a verifiable owner: end to end through the real order pass,
the real Azure SDKs over TLS against the Azure simulator, and the Waldur simulator.

Names cannot collide by accident, objects of another owner are never adopted, changed or
deleted, a chain is found by its owner tag after a rename, and once the machine exists nothing
errs its order: a failed read or a deadline leaves it for the next pass, which finishes it."""

from __future__ import annotations

import pytest

from tests.helpers import run_playbook
from tests.integration.azure_state import (
    OFFERING_TAG, RESOURCE_TAG, all_vms, arm, arm_deletes, arm_ids, arm_writes, dedicated_group, network, owned,
    vm_id)
from tests.integration.passes import (
    ORDER_PASS, assert_done, assert_erred, kill_pass_during, run_pass, terminate, write_config)
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

KEY = W.SSH_KEYS[0]
CHAIN_PUTS = ["resource_groups.put", "virtual_networks.put", "subnets.put", "public_ips.put", "nsgs.put",
              "nics.put", "vms.put"]
# What a chain's creation writes: the chain, then the owner tags on the OS disk the machine made.
CHAIN_WRITES = CHAIN_PUTS + ["disks.update"]
# Every resource of these tests shares its first 16 hex digits with the others.
PREFIX = "1234abcd5678ef90"
# Pairs of names that sanitize alike: Latin, Cyrillic, CJK and symbols only (both fall back to
# vm-<first 8 hex of the uuid>, equal here too), and 80 characters cut to the same 50.
ALIKE = [("Web Server", "web--server!"), ("Сервер", "СЕРВЕР"), ("服务器", "數據庫"), ("!!!", "*** ???"),
         ("x" * 80, "x" * 50 + "y" * 30)]
OFFERING_HEX = W.AZURE_OFFERING_UUID.replace("-", "").lower()


def resource_uuid(index: int) -> str:
    return PREFIX + "%016x" % index


def seed_create(waldur, uuid: str, name: str) -> str:
    """A Create order for a resource of a chosen UUID (pending-provider, as a consumer leaves it)."""
    return waldur.app.seed_order(W.AZURE_OFFERING_UUID, resource_uuid=uuid, name=name,
                                 attributes={"name": name, "ssh_key": KEY["uuid"]},
                                 limits=dict(W.AZURE_PLAN_QUOTAS))["uuid"]


def order_pass_with_deadline(config, seconds: int, rc: int = 4):
    """The order pass with ``order_process_deadline`` as an operator sets it; a deadline that cuts
    a step short leaves the order for the next run (exit status 4)."""
    run = run_playbook(ORDER_PASS, extra_vars={"order_process_deadline": seconds},
                       env={"WALDUR_SITE_AGENT_CONFIG": str(config)})
    assert run.rc == rc, run.output[-6000:]
    return run


def assert_left_for_the_next_pass(waldur, order_uuid: str) -> None:
    order = waldur.app.order(order_uuid)
    assert order["state"] == "executing" and not order["error_message"], (order["state"], order["error_message"])


def terminate_and_check_nothing_is_left(waldur, azure, config, resource_uuids) -> None:
    orders = [terminate(waldur, uuid) for uuid in resource_uuids]
    run_pass(ORDER_PASS, config)
    for order in orders:
        assert_done(waldur, order)
    assert azure.app.resources() == []


# ---- names that cannot collide --------------------------------------------------------------

def test_alike_names_and_uuid_prefixes_make_distinct_chains_in_one_pass_and_in_two(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure)
    first = {resource_uuid(index): names[0] for index, names in enumerate(ALIKE)}
    second = {resource_uuid(10 + index): names[1] for index, names in enumerate(ALIKE)}
    orders = {uuid: seed_create(waldur, uuid, name) for uuid, name in {**first, **second}.items()}

    run_pass(ORDER_PASS, config)  # both of every pair in one pass

    backend_ids = {}
    for uuid, order in orders.items():
        assert_done(waldur, order)
        backend_ids[uuid] = waldur.app.resource(uuid)["backend_id"]
        vm = azure.app.get(backend_ids[uuid])
        assert vm is not None and vm["tags"] == {RESOURCE_TAG: uuid, OFFERING_TAG: OFFERING_HEX}
        assert ("/resourceGroups/group-%s-" % uuid) in backend_ids[uuid]  # the whole uuid, nothing shared
    assert len(set(backend_ids.values())) == len(orders) == len(all_vms(azure)) == 10
    # the names that left nothing to sanitize fall back to the uuid (here the same 8 hex), never a shared word
    assert backend_ids[resource_uuid(2)].endswith("/virtualMachines/vm-1234abcd")
    assert backend_ids[resource_uuid(13)].endswith("/virtualMachines/vm-1234abcd")
    assert "waldur-vm" not in " ".join(arm_ids(azure))

    # A second pass: a twin of each first resource (same name, same prefix) is a machine of its own.
    twins = {resource_uuid(20 + index): names[0] for index, names in enumerate(ALIKE)}
    twin_orders = {uuid: seed_create(waldur, uuid, name) for uuid, name in twins.items()}
    since, before = len(azure.app.calls), {uuid: azure.app.get(backend_id)["properties"]["vmId"]
                                           for uuid, backend_id in backend_ids.items()}

    run_pass(ORDER_PASS, config)

    for uuid, order in twin_orders.items():
        assert_done(waldur, order)
        backend_ids[uuid] = waldur.app.resource(uuid)["backend_id"]
        assert azure.app.get(backend_ids[uuid])["tags"][RESOURCE_TAG] == uuid
    assert len(set(backend_ids.values())) == len(all_vms(azure)) == 15
    assert arm_writes(azure, since).count("vms.put") == 5  # nothing adopted across resources
    touched = " ".join(call["path"].lower() for call in azure.app.write_calls(since))
    assert not [uuid for uuid in before if uuid in touched]

    # Terminating one of each pair leaves its twins intact.
    gone = list(first)
    since = len(azure.app.calls)
    terminations = [terminate(waldur, uuid) for uuid in gone]
    run_pass(ORDER_PASS, config)
    for order in terminations:
        assert_done(waldur, order)
    # exactly their groups were deleted (a resource group id's fifth segment is its name)
    assert sorted(call["path"].split("/")[4] for call in arm_deletes(azure, since)) == sorted(
        backend_ids[uuid].split("/")[4] for uuid in gone)
    for uuid, backend_id in backend_ids.items():
        assert (azure.app.get(backend_id) is None) == (uuid in gone)
    for uuid in second:  # the same machines as before, untouched
        assert azure.app.get(backend_ids[uuid])["properties"]["vmId"] == before[uuid]
    assert len(all_vms(azure)) == 10


# ---- objects of another owner ---------------------------------------------------------------

def test_objects_planted_at_the_agents_names_are_never_adopted_changed_or_deleted(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure)
    other = "feedface" * 4
    uuids = {name: resource_uuid(index) for index, name in enumerate(
        ("planted-group", "planted-vm", "planted-nic", "foreign-vm"))}
    groups = {name: dedicated_group(uuid, name) for name, uuid in uuids.items()}
    # an empty group without tags at the name the agent will use
    azure.app.apply_group(groups["planted-group"], {"location": "westeurope"})
    # a whole machine without tags (its group, network, NIC and VM) at those names
    azure.app.seed_vm("planted-vm", groups["planted-vm"])
    # a group this resource owns (a killed pass made it), and someone else's NIC at the agent's NIC name
    azure.app.apply_group(groups["planted-nic"], {"location": "westeurope", "tags": {RESOURCE_TAG: uuids["planted-nic"]}})
    azure.app.apply_vnet(groups["planted-nic"], "theirs", {"location": "westeurope", "properties": {
        "addressSpace": {"addressPrefixes": ["10.9.0.0/16"]}}})
    subnet = azure.app.apply_subnet(groups["planted-nic"], "theirs", "default",
                                    {"properties": {"addressPrefix": "10.9.0.0/24"}})[0]
    azure.app.apply_nic(groups["planted-nic"], "nicplanted-nic", {"location": "westeurope", "properties": {
        "ipConfigurations": [{"name": "ipconfig1", "properties": {"subnet": {"id": subnet["id"]}}}]}})
    # a machine of another Waldur resource at the name
    azure.app.seed_vm("foreign-vm", groups["foreign-vm"], tags={RESOURCE_TAG: other})
    orders = {name: seed_create(waldur, uuid, name) for name, uuid in uuids.items()}
    before = {rid: (body.get("tags"), body.get("etag")) for rid, body in azure.app.dump_state()["resources"].items()}
    since = len(azure.app.calls)

    run_pass(ORDER_PASS, config)

    assert arm_writes(azure, since) == [] and arm_deletes(azure, since) == []
    after = {rid: (body.get("tags"), body.get("etag")) for rid, body in azure.app.dump_state()["resources"].items()}
    assert after == before
    assert_erred(waldur, orders["planted-group"], "resource group %s exists with no owner tag, not this resource's "
                                                  "(%s=%s); it is not adopted, changed or deleted"
                 % (groups["planted-group"], RESOURCE_TAG, uuids["planted-group"]))
    assert_erred(waldur, orders["planted-vm"], "virtual machine planted-vm in resource group %s exists with no "
                                               "owner tag" % groups["planted-vm"])
    assert_erred(waldur, orders["planted-nic"], "network interface nicplanted-nic in resource group %s exists "
                                                "with no owner tag" % groups["planted-nic"])
    assert_erred(waldur, orders["foreign-vm"], "virtual machine foreign-vm in resource group %s exists with owner "
                                               "tag %s=%s" % (groups["foreign-vm"], RESOURCE_TAG, other))
    for uuid in uuids.values():
        resource = waldur.app.resource(uuid)
        assert resource is None or not resource["backend_id"]


# ---- once the machine exists, nothing errs ----------------------------------------------------

def test_an_instance_view_error_after_the_build_is_finished_by_the_next_pass(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    azure.app.add_fault("vms.instance_view", status=500, times=-1, retry_after=1)

    run_pass(ORDER_PASS, config, rc=4)  # work left for the next run

    assert_left_for_the_next_pass(waldur, W.AZURE_ORDER_UUID)
    assert len(azure.app.calls_of("vms.instance_view")) == 6  # the SDK retried 5 times before the pass gave up
    [machine] = all_vms(azure)
    assert arm_deletes(azure) == [] and sorted(arm_writes(azure)) == sorted(CHAIN_WRITES)  # branches: any order
    azure.app.clear_faults()
    since = len(azure.app.calls)

    run_pass(ORDER_PASS, config)

    assert_done(waldur, W.AZURE_ORDER_UUID)
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == machine
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_metadata"]["virtual_machine"]["power_state"] == \
        "running"
    assert arm_writes(azure, since) == [] and all_vms(azure) == [machine]  # one chain, adopted
    terminate_and_check_nothing_is_left(waldur, azure, config, [W.AZURE_RESOURCE_UUID])


@pytest.mark.parametrize("operation", ["virtual_networks.put", "vms.put"])
def test_a_deadline_during_an_operation_deletes_nothing_and_the_next_pass_finishes(
        tmp_path, waldur_sim, azure_sim, operation):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    azure.app.slow_operations = {operation: 600}
    group = dedicated_group(W.AZURE_RESOURCE_UUID, "azure-vm-1")
    machine = vm_id(group, "azure-vm-1")

    order_pass_with_deadline(config, 8)

    assert_left_for_the_next_pass(waldur, W.AZURE_ORDER_UUID)
    assert arm_deletes(azure) == []
    assert [op.name for op in azure.app.lro.pending()] == [operation]
    if operation == "vms.put":
        assert azure.app.get(machine)["properties"]["provisioningState"] == "Creating"
    else:
        assert network(azure, group, "virtualNetworks", "netazure-vm-1")["properties"]["provisioningState"] == \
            "Updating"
        assert all_vms(azure) == []
    azure.app.slow_operations = {}
    assert azure.app.finish_operations() == 1  # Azure completes what it accepted

    run_pass(ORDER_PASS, config)

    assert_done(waldur, W.AZURE_ORDER_UUID)
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == machine
    assert sorted(arm_writes(azure)) == sorted(CHAIN_WRITES) and arm_deletes(azure) == []  # one chain, each object written once
    assert all_vms(azure) == [machine]
    terminate_and_check_nothing_is_left(waldur, azure, config, [W.AZURE_RESOURCE_UUID])


# ---- a chain is found by its owner tag ---------------------------------------------------------

def test_a_resource_renamed_after_a_killed_pass_finishes_its_first_chain(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    kill_pass_during(azure, config, "nics.put")
    group = dedicated_group(W.AZURE_RESOURCE_UUID, "azure-vm-1")
    assert azure.app.get(arm(group)) is not None and all_vms(azure) == []
    with waldur.app.lock:  # the consumer renames the resource in Waldur meanwhile
        waldur.app.market.resources[W.AZURE_RESOURCE_UUID]["name"] = "Renamed Box"
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["name"] == "Renamed Box"
    since = len(azure.app.calls)

    run_pass(ORDER_PASS, config)

    assert_done(waldur, W.AZURE_ORDER_UUID)
    machine = vm_id(group, "azure-vm-1")
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == machine
    assert arm_writes(azure, since) == ["vms.put", "disks.update"]
    assert all_vms(azure) == [machine]
    assert not [rid for rid in arm_ids(azure) if "renamed" in rid]
    assert len(owned(azure, W.AZURE_RESOURCE_UUID)) == 7  # group, network, IP, NSG, NIC, machine, disk
    terminate_and_check_nothing_is_left(waldur, azure, config, [W.AZURE_RESOURCE_UUID])


def test_a_machine_whose_provisioning_fails_after_adoption_errs_its_order(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    reason = "Allocation failed. We do not have sufficient capacity for the requested VM size in this region."
    azure.app.slow_operations = {"vms.put": 600}
    azure.app.fail_lro("vms.put", code="AllocationFailed", message=reason)
    machine = vm_id(dedicated_group(W.AZURE_RESOURCE_UUID, "azure-vm-1"), "azure-vm-1")

    order_pass_with_deadline(config, 8)

    assert_left_for_the_next_pass(waldur, W.AZURE_ORDER_UUID)
    azure.app.slow_operations = {}
    azure.app.finish_operations()
    assert azure.app.get(machine)["properties"]["provisioningState"] == "Failed"

    run_pass(ORDER_PASS, config)

    order = assert_erred(waldur, W.AZURE_ORDER_UUID, "AllocationFailed: " + reason)
    assert "virtual machine azure-vm-1" in order["error_message"]
    resource = waldur.app.resource(W.AZURE_RESOURCE_UUID)
    if resource is None:
        # Waldur dropped the resource (its Create erred with no backend id): the agent deleted
        # the failed chain, which nothing else would ever delete, and said so.
        assert "deleted resource group" in order["error_message"]
        assert azure.app.resources() == []
    else:
        # Waldur knew the machine's backend id and keeps the resource Erred: Terminate removes it.
        assert resource["state"] == "Erred" and resource["backend_id"] == machine
        terminate_and_check_nothing_is_left(waldur, azure, config, [W.AZURE_RESOURCE_UUID])
