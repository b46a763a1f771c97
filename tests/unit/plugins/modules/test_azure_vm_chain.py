"""azure_vm_chain: the chain, adoption, rollback, deletion routes and power, on an in-memory Azure."""

import base64
import copy
import json
import threading
from types import SimpleNamespace

import pytest

from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import azure_vm_chain
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.chain import VmChain
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.pacing import WritePacer
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.validate import (
    admin_password,
    creation_problem,
    duplicate_errors,
    ssh_key_problem,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError
from tests.unit.plugins.modules.azure_fake import SUBSCRIPTION, FakeAzure

UUID = "1234abcd5678ef901234abcd5678ef90"
OTHER_UUID = "99998888777766665555444433332222"
OFFERING = "0fe1de10000040008000000000000001"
GROUP = "group-%s-web" % UUID
OWNER = {"waldur-resource-uuid": UUID}
KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMvXn2Qm1bTeM0N3z6yC3mD0pS3y3b2c6dVw9ZpR3Q1x user@host")
CHAIN = ["group", "vnet", "subnet", "public_ip", "nsg", "nic", "vm"]


class FakeModule:
    def __init__(self, check_mode=False):
        self.check_mode = check_mode
        self.no_log_values = set()


def machine(**overrides):
    item = dict(resource_uuid=UUID, order_uuid=None, name="Web", state="present", backend_id=None,
                location="westeurope", size="Standard_B1s", image="Canonical:ubuntu:22_04-lts:latest",
                ssh_public_key=KEY, admin_username="waldur", custom_data=None, resource_group=None,
                network_cidr="10.0.0.0/16", subnet_cidr="10.0.0.0/24", allowed_ssh_ranges=["203.0.113.0/24"])
    item.update(overrides)
    return item


def run(fake, item, check_mode=False):
    module = FakeModule(check_mode)
    return VmChain(module, fake, None).run(item), module


def dedicated_id(group=GROUP, vm="web"):
    return "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s" % (
        SUBSCRIPTION, group, vm)


def plant_partial_chain(fake, group=GROUP, vm="web", tags=None):
    """The objects a run killed after the NSG leaves (or someone else made at these names)."""
    fake.groups[group.lower()] = {"name": group, "location": "westeurope", "tags": tags,
                                  "properties": {"provisioningState": "Succeeded"}}
    network = fake._clients["network"]
    network.virtual_networks.begin_create_or_update(group, "net" + vm, {
        "location": "westeurope", "tags": tags, "properties": {}})
    network.subnets.begin_create_or_update(group, "net" + vm, "subnet" + vm, {"properties": {}})
    network.public_ip_addresses.begin_create_or_update(group, "pubip" + vm, {"location": "westeurope", "tags": tags,
                                                                             "properties": {}})
    network.network_security_groups.begin_create_or_update(group, "nsg" + vm, {
        "location": "westeurope", "tags": tags, "properties": {}})


# ---- create -----------------------------------------------------------------------------------

def test_create_builds_the_chain_in_order_and_returns_the_vm_id():
    fake = FakeAzure()
    result, module = run(fake, machine(custom_data="#cloud-config\npackages: [htop]\n"))
    assert not result["failed"], result["msg"]
    # the group, three branches in any order (the network before its subnet), the NIC, the machine,
    # then the owner tags on the OS disk the machine made (ARM does not copy them)
    writes = [(verb, kind) for verb, kind, name in fake.writes()]
    assert writes[0] == ("put", "group") and writes[5:] == [("put", "nic"), ("put", "vm"), ("patch", "disk")]
    assert sorted(writes[1:5]) == sorted(("put", kind) for kind in ("vnet", "subnet", "public_ip", "nsg"))
    assert writes.index(("put", "vnet")) < writes.index(("put", "subnet"))
    assert sorted(name for verb, kind, name in fake.writes()[:7]) == sorted(
        [GROUP, "netweb", "subnetweb", "pubipweb", "nsgweb", "nicweb", "web"])
    assert "(created: resource group, virtual network, subnet, public IP address, network security group, " \
           "network interface, virtual machine)" in result["msg"]
    assert result["backend_id"] == dedicated_id()
    assert result["action"] == "created" and result["changed"]
    vm = result["backend_metadata"]["virtual_machine"]
    assert result["backend_metadata"]["backend_type"] == "azure"
    assert (vm["name"], vm["location"], vm["size"], vm["power_state"]) == (
        "web", "westeurope", "Standard_B1s", "running")
    assert vm["public_ip"].startswith("20.0.0.") and vm["private_ip"] == "10.0.0.4"


def hold_puts(fake, kinds, timeout=5.0):
    """Make the PUTs of ``kinds`` wait for one another (a barrier): they only get through when all
    are in flight at once, so a build that sends them one after the other breaks the barrier."""
    barrier = threading.Barrier(len(kinds), timeout=timeout)
    attributes = {"vnet": ("network", "virtual_networks"), "public_ip": ("network", "public_ip_addresses"),
                  "nsg": ("network", "network_security_groups")}
    done = {}
    for kind in kinds:
        client, attribute = attributes[kind]
        operations = getattr(fake._clients[client], attribute)
        real = operations.begin_create_or_update

        def held(group, *args, real=real, kind=kind):
            barrier.wait()
            made = real(group, *args)
            done[kind] = len(fake.calls)
            return made
        operations.begin_create_or_update = held
    return barrier, done


def test_the_public_ip_the_nsg_and_the_network_are_in_flight_together_and_the_nic_waits_for_them():
    fake = FakeAzure()
    barrier, done = hold_puts(fake, ["vnet", "public_ip", "nsg"])
    result, module = run(fake, machine())
    assert not result["failed"], result["msg"]
    assert not barrier.broken  # all three PUTs were in flight at once
    calls = [(verb, kind) for verb, kind, name in fake.calls]
    nic = calls.index(("put", "nic"))
    assert nic >= max(done.values()) and nic > calls.index(("put", "subnet"))  # after every object it references
    body = fake.body("nic", "nicweb")["properties"]
    assert body["networkSecurityGroup"]["id"].endswith("/networkSecurityGroups/nsgweb")
    assert body["ipConfigurations"][0]["properties"]["subnet"]["id"].endswith("/subnets/subnetweb")


def test_without_branches_the_chain_is_one_after_the_other():
    fake = FakeAzure()
    result = VmChain(FakeModule(), fake, None, branches=False).run(machine())
    assert not result["failed"], result["msg"]
    assert [(verb, kind) for verb, kind, name in fake.writes()] == [("put", kind) for kind in CHAIN] + [
        ("patch", "disk")]


def test_a_failed_branch_waits_for_the_others_then_rolls_everything_back():
    fake = FakeAzure()
    barrier, done = hold_puts(fake, ["vnet", "nsg"])  # the network and the NSG are in flight together
    fake.faults[("put", "public_ip")] = AzureError("PublicIPCountLimitReached", 400, "PublicIPCountLimitReached")
    result, module = run(fake, machine())
    assert result["failed"] and not result["retry"] and result["backend_id"] is None
    assert result["msg"].startswith("creating public IP address pubipweb: PublicIPCountLimitReached"), result["msg"]
    assert "rolled back: deleted resource group %s" % GROUP in result["msg"]
    assert sorted(done) == ["nsg", "vnet"]  # the siblings already sent were waited for, then deleted with the group
    assert ("put", "nic") not in [(verb, kind) for verb, kind, name in fake.calls]
    assert fake.groups == {} and fake.store == {}


def test_two_failed_branches_are_both_named():
    fake = FakeAzure()
    fake.groups["shared"] = {"name": "shared", "location": "westeurope"}
    fake.faults[("put", "public_ip")] = AzureError("PublicIPCountLimitReached", 400, "PublicIPCountLimitReached")
    fake.faults[("put", "nsg")] = AzureError("NetworkSecurityGroupCountLimitReached", 400, "QuotaExceeded")
    result, module = run(fake, machine(resource_group="shared"))
    assert result["failed"]
    assert "creating public IP address pubipweb-1234abcd: PublicIPCountLimitReached" in result["msg"]
    assert "creating network security group nsgweb-1234abcd: NetworkSecurityGroupCountLimitReached" in result["msg"]
    assert "rolled back: deleted" in result["msg"]
    assert fake.store == {} and "shared" in fake.groups  # the network made meanwhile is rolled back too


def test_a_deadline_in_one_branch_is_a_retry_while_the_others_finish():
    fake = FakeAzure()
    fake.slow.add("public_ip")
    result, module = run(fake, machine())
    assert result["retry"] and "nothing is rolled back" in result["msg"], result["msg"]
    assert [call for call in fake.writes() if call[0] == "delete"] == []
    assert fake.names("public_ip") == ["pubipweb"] and fake.names("nsg") == ["nsgweb"]


def test_the_write_pacer_is_a_token_bucket():
    now = [100.0]
    slept = []

    def sleep(seconds):
        slept.append(round(seconds, 3))
        now[0] += seconds
    pacer = WritePacer(burst=3, per_second=2, clock=lambda: now[0], sleep=sleep)
    for dummy in range(3):  # the burst goes at once
        pacer.take()
    assert slept == []
    pacer.take()  # then one token every half second
    pacer.take()
    assert slept == [0.5, 0.5]
    now[0] += 10  # an idle bucket refills up to its size, not beyond
    for dummy in range(3):
        pacer.take()
    assert slept == [0.5, 0.5]
    pacer.take()
    assert slept[-1] == 0.5


def test_every_write_of_a_build_takes_a_token():
    fake = FakeAzure()
    taken = []
    pacer = WritePacer(burst=100, per_second=1)
    real = pacer.take
    pacer.take = lambda: taken.append(1) or real()
    result = VmChain(FakeModule(), fake, None, pacer=pacer).run(machine())
    assert not result["failed"], result["msg"]
    assert len(taken) == len(fake.writes()) == 8


def test_the_vm_body_follows_the_rules():
    fake = FakeAzure()
    result, module = run(fake, machine(custom_data="#cloud-config\n", admin_username="ops"))
    body = fake.body("vm", "web")["properties"]
    assert body["hardwareProfile"] == {"vmSize": "Standard_B1s"}
    assert body["storageProfile"]["imageReference"] == {"publisher": "Canonical", "offer": "ubuntu",
                                                        "sku": "22_04-lts", "version": "latest"}
    assert body["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    assert body["networkProfile"]["networkInterfaces"][0]["properties"]["deleteOption"] == "Delete"
    assert body["networkProfile"]["networkInterfaces"][0]["id"].endswith("/networkInterfaces/nicweb")
    linux = body["osProfile"]["linuxConfiguration"]
    assert linux["disablePasswordAuthentication"] is True
    assert linux["ssh"]["publicKeys"] == [{"path": "/home/ops/.ssh/authorized_keys", "keyData": KEY}]
    assert base64.b64decode(body["osProfile"]["customData"]).decode() == "#cloud-config\n"
    password = body["osProfile"]["adminPassword"]
    assert len(password) == 24
    assert password in module.no_log_values
    assert password not in json.dumps(result)


def test_nsg_admits_exactly_the_configured_ranges_on_22_and_is_attached():
    fake = FakeAzure()
    run(fake, machine(allowed_ssh_ranges=["203.0.113.0/24", "198.51.100.7"]))
    rules = fake.body("nsg", "nsgweb")["properties"]["securityRules"]
    assert len(rules) == 1
    rule = rules[0]["properties"]
    assert rule["sourceAddressPrefixes"] == ["203.0.113.0/24", "198.51.100.7"]
    assert (rule["destinationPortRange"], rule["protocol"], rule["direction"], rule["access"]) == (
        "22", "Tcp", "Inbound", "Allow")
    nic = fake.body("nic", "nicweb")["properties"]
    assert nic["networkSecurityGroup"]["id"].endswith("/networkSecurityGroups/nsgweb")


def test_without_ranges_there_is_no_nsg():
    fake = FakeAzure()
    result, module = run(fake, machine(allowed_ssh_ranges=[]))
    assert not result["failed"]
    assert fake.names("nsg") == []
    assert "networkSecurityGroup" not in fake.body("nic", "nicweb")["properties"]


def test_public_ip_is_standard_and_static():
    fake = FakeAzure()
    run(fake, machine())
    body = fake.body("public_ip", "pubipweb")
    assert body["sku"] == {"name": "Standard"}
    assert body["properties"]["publicIPAllocationMethod"] == "Static"


def test_a_second_run_adopts_and_writes_nothing():
    fake = FakeAzure()
    first, module = run(fake, machine())
    password = fake.body("vm", "web")["properties"]["osProfile"]["adminPassword"]
    before = len(fake.calls)
    second, module = run(fake, machine())
    assert [call for call in fake.calls[before:] if call[0] != "get" and call[0] != "list"] == []
    assert second["action"] == "adopted" and not second["changed"]
    assert second["backend_id"] == first["backend_id"]
    assert fake.body("vm", "web")["properties"]["osProfile"]["adminPassword"] == password


def test_a_killed_chain_is_finished_not_duplicated():
    fake = FakeAzure()
    # what a run killed after the NSG left behind (every object with the owner tag, the subnet in its network)
    plant_partial_chain(fake, tags=OWNER)
    before = len(fake.calls)
    result, module = run(fake, machine())
    assert not result["failed"], result["msg"]
    puts = [(verb, kind) for verb, kind, name in fake.calls[before:] if verb == "put"]
    assert puts == [("put", "nic"), ("put", "vm")]
    assert "adopted: resource group, virtual network, subnet, public IP address" in result["msg"]
    assert fake.names("vnet") == ["netweb"] and fake.names("vm") == ["web"]


def test_a_machine_whose_provisioning_failed_is_not_adopted():
    fake = FakeAzure()
    run(fake, machine())
    fake.body("vm", "web")["properties"]["provisioningState"] = "Failed"
    before = len(fake.writes())
    result, module = run(fake, machine())
    assert result["failed"] and "provisioning failed" in result["msg"] and result["action"] == "none"
    assert [verb for verb, kind, name in fake.writes()[before:]] == ["delete"]  # its chain, nothing written


def test_an_existing_shared_group_is_not_rewritten():
    fake = FakeAzure()
    fake.groups["shared"] = {"name": "shared", "location": "northeurope"}
    result, module = run(fake, machine(resource_group="shared"))
    assert not result["failed"], result["msg"]
    assert ("put", "group", "shared") not in fake.calls
    assert fake.groups["shared"]["location"] == "northeurope"
    assert result["backend_id"].endswith("/resourceGroups/shared/providers/Microsoft.Compute/virtualMachines/"
                                         "web-1234abcd")


@pytest.mark.parametrize("failing", CHAIN)
def test_a_failure_at_any_step_rolls_the_dedicated_group_back(failing):
    fake = FakeAzure()
    fake.faults[("put", failing)] = AzureError("Operation could not be completed", 409, "Conflict")
    result, module = run(fake, machine())
    assert result["failed"]
    assert "Operation could not be completed" in result["msg"]
    assert result["backend_id"] is None
    assert fake.groups == {} and fake.store == {}
    if failing != "group":
        assert ("delete", "group", GROUP) in fake.calls
        assert "rolled back: deleted resource group %s" % GROUP in result["msg"]
    else:
        # the group's create was refused: this run made nothing, so nothing is deleted
        assert "rolled back: nothing (Azure confirmed no create of this run)" in result["msg"]


def test_a_shared_rollback_deletes_only_this_machines_objects_in_order():
    fake = FakeAzure()
    fake.groups["shared"] = {"name": "shared", "location": "westeurope"}
    neighbour, module = run(fake, machine(resource_group="shared", resource_uuid=OTHER_UUID))
    assert not neighbour["failed"]
    neighbour_objects = dict(fake.store)
    fake.faults[("put", "vm")] = AzureError("Allocation failed", 409, "AllocationFailed")
    before = len(fake.calls)
    result, module = run(fake, machine(resource_group="shared"))
    assert result["failed"] and "Allocation failed" in result["msg"]
    deletes = [(kind, name) for verb, kind, name in fake.calls[before:] if verb == "delete"]
    # the VM PUT failed before anything of the VM existed, so its delete finds nothing
    assert deletes == [("nic", "nicweb-1234abcd"), ("nsg", "nsgweb-1234abcd"),
                       ("public_ip", "pubipweb-1234abcd"), ("subnet", "subnetweb-1234abcd"),
                       ("vnet", "netweb-1234abcd")]
    assert ("get", "vm", "web-1234abcd") in fake.calls[before:]
    assert fake.store == neighbour_objects
    assert "shared" in fake.groups


def test_rollback_tolerates_objects_already_gone():
    fake = FakeAzure()
    fake.groups["shared"] = {"name": "shared", "location": "westeurope"}
    fake.faults[("put", "nic")] = AzureError("Subnet is full", 400, "SubnetIsFull")
    fake.faults[("delete", "nsg")] = AzureError("gone", 404, "NotFound")
    result, module = run(fake, machine(resource_group="shared"))
    assert result["failed"] and "Subnet is full" in result["msg"] and "rollback failed" not in result["msg"]
    assert fake.names("vnet") == [] and fake.names("public_ip") == []


# ---- validation before anything ---------------------------------------------------------------

@pytest.mark.parametrize("overrides, message", [
    ({"location": None}, "Azure location is set neither on the order nor in backend_settings"),
    ({"size": ""}, "Azure size is set neither"),
    ({"image": "Canonical:ubuntu"}, "is not of the form publisher:offer:sku:version"),
    ({"ssh_public_key": None}, "carries no SSH key"),
    ({"ssh_public_key": "not a key"}, "not an OpenSSH public key"),
    ({"admin_username": "root"}, "reserved"),
    ({"subnet_cidr": "10.1.0.0/24"}, "not inside network_cidr"),
    ({"location": "mars"}, "Azure location 'mars' is not available"),
    ({"size": "Standard_Z9"}, "Azure size 'Standard_Z9' is not offered in location 'westeurope'"),
])
def test_bad_input_fails_before_anything_is_written(overrides, message):
    fake = FakeAzure()
    result, module = run(fake, machine(**overrides))
    assert result["failed"] and message in result["msg"]
    assert fake.writes() == []


def test_sizes_are_listed_once_per_location():
    fake = FakeAzure()
    chain = VmChain(FakeModule(), fake, None)
    for index in range(3):
        chain.run(machine(resource_uuid="%032x" % (index + 1), name="vm%d" % index))
    assert [call for call in fake.calls if call[1] == "sizes"] == [("list", "sizes", "westeurope")]


def test_pure_checks():
    assert creation_problem(machine()) is None
    assert ssh_key_problem("ssh-rsa not-base64!") is not None
    password = admin_password()
    assert len(password) == 24 and password.isalnum()
    assert any(c.isupper() for c in password) and any(c.islower() for c in password)
    assert any(c.isdigit() for c in password)


# ---- present with a backend id ----------------------------------------------------------------

def test_present_with_a_live_backend_id_creates_nothing():
    fake = FakeAzure()
    created, module = run(fake, machine())
    before = len(fake.writes())
    result, module = run(fake, machine(backend_id=created["backend_id"]))
    assert not result["failed"] and not result["changed"] and result["action"] == "none"
    assert len(fake.writes()) == before
    assert result["backend_metadata"]["virtual_machine"]["id"] == created["backend_id"]


def test_present_with_a_stale_backend_id_fails_and_never_recreates():
    fake = FakeAzure()
    result, module = run(fake, machine(backend_id=dedicated_id()))
    assert result["failed"] and "no longer exists" in result["msg"] and "not re-created" in result["msg"]
    assert fake.writes() == []


def test_a_backend_id_of_another_subscription_is_refused():
    fake = FakeAzure()
    other = dedicated_id().replace(SUBSCRIPTION, "00000000-0000-0000-0000-000000000000")
    result, module = run(fake, machine(backend_id=other))
    assert result["failed"] and "not to the configured subscription" in result["msg"]


def test_a_non_arm_backend_id_fails_clearly():
    result, module = run(FakeAzure(), machine(backend_id="12345", state="absent"))
    assert result["failed"] and "Not an Azure virtual machine id" in result["msg"]


# ---- absent -----------------------------------------------------------------------------------

def test_absent_dedicated_deletes_the_group_whatever_the_id_case():
    fake = FakeAzure()
    created, module = run(fake, machine())
    upper = created["backend_id"].replace(GROUP, GROUP.upper())
    result, module = run(fake, machine(state="absent", backend_id=upper))
    assert result["action"] == "deleted" and result["changed"]
    assert [call for call in fake.writes() if call[0] == "delete"] == [("delete", "group", GROUP.upper())]
    assert fake.groups == {}
    again, module = run(fake, machine(state="absent", backend_id=upper))
    assert again["action"] == "absent" and not again["changed"] and not again["failed"]


def test_absent_shared_deletes_exactly_this_machine_and_leaves_neighbours():
    fake = FakeAzure()
    fake.groups["shared"] = {"name": "shared", "location": "westeurope"}
    mine, module = run(fake, machine(resource_group="shared"))
    run(fake, machine(resource_group="shared", resource_uuid=OTHER_UUID))
    before = len(fake.calls)
    result, module = run(fake, machine(state="absent", backend_id=mine["backend_id"]))
    deletes = [(kind, name) for verb, kind, name in fake.calls[before:] if verb == "delete"]
    assert deletes == [("vm", "web-1234abcd"), ("nic", "nicweb-1234abcd"), ("nsg", "nsgweb-1234abcd"),
                       ("public_ip", "pubipweb-1234abcd"), ("subnet", "subnetweb-1234abcd"),
                       ("vnet", "netweb-1234abcd")]
    assert fake.names("vm") == ["web-99998888"] and fake.names("vnet") == ["netweb-99998888"]
    assert "shared" in fake.groups


def test_absent_shared_finds_a_mastermind_upper_case_nsg():
    fake = FakeAzure()
    fake.groups["shared"] = {"name": "shared", "location": "westeurope"}
    run(fake, machine(resource_group="shared", allowed_ssh_ranges=[]))
    nsgs = fake._clients["network"].network_security_groups
    nsgs.begin_create_or_update("shared", "NSGweb-1234abcd", {"location": "westeurope", "properties": {}})
    vm_id = "/subscriptions/%s/resourceGroups/shared/providers/Microsoft.Compute/virtualMachines/web-1234abcd" % (
        SUBSCRIPTION)
    result, module = run(fake, machine(state="absent", backend_id=vm_id))
    assert not result["failed"], result["msg"]
    assert fake.names("nsg") == []
    assert "network security group nsgweb-1234abcd" in result["msg"]


def test_the_deletion_route_follows_the_id_not_the_item():
    fake = FakeAzure()
    created, module = run(fake, machine())
    # a shared group configured later must not turn this into a per-object deletion, or vice versa
    result, module = run(fake, machine(state="absent", backend_id=created["backend_id"], resource_group="shared"))
    assert ("delete", "group", GROUP) in fake.calls
    fake2 = FakeAzure()
    fake2.groups["group-1234-web-shared"] = {"name": "group-1234-web-shared", "location": "westeurope"}
    created, module = run(fake2, machine(resource_group="group-1234-web-shared"))
    result, module = run(fake2, machine(state="absent", backend_id=created["backend_id"]))
    assert not any(kind == "group" for verb, kind, name in fake2.writes() if verb == "delete")
    assert "group-1234-web-shared" in fake2.groups


def test_absent_without_backend_id_and_nothing_tagged_is_a_no_op():
    fake = FakeAzure()
    plant_partial_chain(fake)  # the same names, another owner's (no tag): not touched
    before = len(fake.calls)
    result, module = run(fake, machine(state="absent"))
    assert result["action"] == "absent" and not result["failed"] and not result["changed"]
    assert "no Azure object carries owner tag waldur-resource-uuid=%s" % UUID in result["msg"]
    assert {verb for verb, kind, name in fake.calls[before:]} == {"list"}


def test_absent_without_backend_id_deletes_what_carries_the_owner_tag():
    # A create that never told Waldur its machine (interrupted, or its machine failed).
    fake = FakeAzure()
    plant_partial_chain(fake, tags=OWNER)
    fake.groups["shared"] = {"name": "shared", "location": "westeurope"}
    run(fake, machine(resource_group="shared"))
    run(fake, machine(resource_group="shared", resource_uuid=OTHER_UUID))
    result, module = run(fake, machine(state="absent"))
    assert result["action"] == "deleted" and result["changed"], result["msg"]
    deletes = [(kind, name) for verb, kind, name in fake.writes() if verb == "delete"]
    assert deletes[0] == ("group", GROUP)
    assert [kind for kind, name in deletes[1:]] == ["vm", "nic", "nsg", "public_ip", "vnet"]
    assert GROUP.lower() not in fake.groups and "shared" in fake.groups
    assert fake.names("vm") == ["web-99998888"]  # the neighbour in the shared group
    assert "found by owner tag" in result["msg"]


def test_absent_refuses_a_dedicated_group_of_another_owner():
    fake = FakeAzure()
    plant_partial_chain(fake, tags={"waldur-resource-uuid": OTHER_UUID})
    before = len(fake.writes())
    result, module = run(fake, machine(state="absent", backend_id=dedicated_id()))
    assert result["failed"] and not result["retry"]
    assert "resource group %s has owner tag waldur-resource-uuid=%s" % (GROUP, OTHER_UUID) in result["msg"]
    assert len(fake.writes()) == before


def test_absent_by_id_leaves_shared_objects_of_another_owner():
    fake = FakeAzure()
    fake.groups["shared"] = {"name": "shared", "location": "westeurope"}
    mine, module = run(fake, machine(resource_group="shared"))
    fake.body("public_ip", "pubipweb-1234abcd")["tags"] = {"waldur-resource-uuid": OTHER_UUID}
    result, module = run(fake, machine(state="absent", backend_id=mine["backend_id"]))
    assert not result["failed"], result["msg"]
    assert fake.names("public_ip") == ["pubipweb-1234abcd"] and fake.names("vm") == []
    assert "left: public IP address pubipweb-1234abcd (owner tag waldur-resource-uuid=%s)" % OTHER_UUID \
        in result["msg"]


# ---- power ------------------------------------------------------------------------------------

def test_deallocate_and_start_only_when_needed():
    fake = FakeAzure()
    created, module = run(fake, machine())
    backend_id = created["backend_id"]
    result, module = run(fake, machine(state="deallocated", backend_id=backend_id))
    assert result["action"] == "powered_off" and result["changed"]
    assert result["backend_metadata"]["virtual_machine"]["power_state"] == "deallocated"
    result, module = run(fake, machine(state="deallocated", backend_id=backend_id))
    assert result["action"] == "none" and not result["changed"]
    assert [call[0] for call in fake.writes()].count("deallocate") == 1
    result, module = run(fake, machine(state="running", backend_id=backend_id))
    assert result["action"] == "powered_on"
    result, module = run(fake, machine(state="running", backend_id=backend_id))
    assert not result["changed"]
    assert [call[0] for call in fake.writes()].count("start") == 1


def test_power_of_a_missing_machine_fails():
    result, module = run(FakeAzure(), machine(state="running", backend_id=dedicated_id()))
    assert result["failed"] and "does not exist" in result["msg"]


def power_batch(fake, items):
    """A batch of power items as the module runs it: planned first, then item by item."""
    module = FakeModule()
    module.params = {"max_workers": 4}
    chain = VmChain(module, fake, None)
    chain.plan_power(items)
    before = len(fake.calls)
    return [chain.run(item) for item in items], fake.calls[before:]


def test_many_power_items_read_their_machines_from_listings_once_and_write_only_changes():
    fake = FakeAzure()
    uuids = ["%032x" % (index + 1) for index in range(4)]
    ids = [run(fake, machine(resource_uuid=uuid, name="vm%d" % index))[0]["backend_id"]
           for index, uuid in enumerate(uuids)]
    fake.power["vm3"] = "deallocated"
    gone = dedicated_id("group-%032x-gone" % 9, "gone")
    items = [machine(resource_uuid=uuid, state="running", backend_id=backend_id) for uuid, backend_id in zip(uuids, ids)]
    items.append(machine(resource_uuid="%032x" % 9, state="running", backend_id=gone))
    results, calls = power_batch(fake, items)
    assert [result["action"] for result in results] == ["none", "none", "none", "powered_on", "none"]
    assert results[4]["failed"] and "does not exist" in results[4]["msg"]
    assert sorted(call[:2] for call in calls if call[0].startswith("list_all")) == [
        ("list_all", "nic"), ("list_all", "public_ip"), ("list_all", "vm"), ("list_all_status", "vm")]
    # the machine missing from the listings is read on its own, to say it does not exist; the one start
    # is waited for with one read of its machine's power state; no other reads
    assert [call for call in calls if call[0] in ("get", "instance_view", "list")] == [
        ("instance_view", "vm", "vm3"), ("get", "vm", "gone")]
    assert fake.writes() and [call for call in calls if call in fake.writes()] == [("start", "vm", "vm3")]
    for result in results[:4]:
        metadata = result["backend_metadata"]["virtual_machine"]
        assert metadata["power_state"] == "running" and metadata["private_ip"] and metadata["public_ip"]
    # steady: the same batch again writes nothing and reads nothing per machine
    results, calls = power_batch(fake, items[:4])
    assert [result["action"] for result in results] == ["none"] * 4
    assert not [call for call in calls if call in fake.writes() or call[0] in ("get", "instance_view")]


def test_a_failed_power_listing_fails_every_power_item_with_its_reason():
    fake = FakeAzure()
    ids = [run(fake, machine(resource_uuid="%032x" % (index + 1), name="vm%d" % index))[0]["backend_id"]
           for index in range(2)]
    fake.faults[("list_all", "vm")] = AzureError("Service unavailable", 503, "ServiceUnavailable")
    results, calls = power_batch(fake, [machine(resource_uuid="%032x" % (index + 1), state="deallocated",
                                                backend_id=backend_id) for index, backend_id in enumerate(ids)])
    assert all(result["failed"] and "listing the virtual machines of the subscription: Service unavailable"
               in result["msg"] for result in results)
    assert len([call for call in calls if call[:2] == ("list_all", "vm")]) == 1  # listed once, not per item
    assert not [call for call in calls if call in fake.writes()]


# ---- check mode -------------------------------------------------------------------------------

def test_check_mode_reports_and_writes_nothing():
    fake = FakeAzure()
    result, module = run(fake, machine(), check_mode=True)
    assert result["changed"] and result["action"] == "created" and not result["failed"]
    assert fake.writes() == []
    assert result["msg"].startswith("would create resource group %s, virtual network netweb" % GROUP)
    created, module = run(fake, machine())
    for item in (machine(state="absent", backend_id=created["backend_id"]),
                 machine(state="deallocated", backend_id=created["backend_id"])):
        before = len(fake.writes())
        result, module = run(fake, item, check_mode=True)
        assert result["changed"] and result["msg"].startswith("would ")
        assert len(fake.writes()) == before


# ---- the module entry point -------------------------------------------------------------------

def run_module(capsys, **args):
    base = dict(subscription_id=SUBSCRIPTION, tenant="t", client_id="c", secret="module-secret")
    base.update(args)
    with patch_module_args(base):
        with pytest.raises(SystemExit):
            azure_vm_chain.main()
    return json.loads(capsys.readouterr().out)


class CountingClients:
    """What main() asks of AzureClients when the chain itself is replaced."""

    def __init__(self):
        self.counter = SimpleNamespace(reads=5, writes=2)

    def authenticate(self):
        pass


def with_chain(monkeypatch, outcome):
    monkeypatch.setattr(azure_vm_chain, "clients_from_module", lambda module: CountingClients())
    real_run = azure_vm_chain.VmChain.run

    def run(self, item):
        if item.get("error"):  # the module's own error (a duplicate): the real chain, which calls nothing
            return real_run(self, item)
        if isinstance(outcome, Exception):
            raise outcome
        return dict(outcome, resource_uuid=item["resource_uuid"], order_uuid=item.get("order_uuid"))
    monkeypatch.setattr(azure_vm_chain.VmChain, "run", run)


@pytest.mark.parametrize("plumbing", ["error", "skip", "comment"])
def test_items_carry_desired_state_only(capsys, plumbing):
    """Orders the filter errs or skips go straight to settle (vm_outcomes): no such option."""
    output = run_module(capsys, machines=[{"resource_uuid": UUID, plumbing: "x"}])
    assert output["failed"] and plumbing in output["msg"] and "results" not in output


def test_a_second_item_for_one_resource_fails_with_no_call(capsys, monkeypatch):
    with_chain(monkeypatch, {"changed": False, "failed": False, "msg": "checked"})
    first, second = run_module(capsys, machines=[{"resource_uuid": UUID}, {"resource_uuid": UUID}])["results"]
    assert not first["failed"]
    assert second["failed"] and second["msg"] == "machines[0] acts on resource %s too; one item per resource and batch" % UUID


def test_results_are_shaped_and_api_calls_are_reads_writes_and_retries(capsys, monkeypatch):
    with_chain(monkeypatch, {"changed": True, "failed": False, "msg": "created", "action": "created"})
    output = run_module(capsys, machines=[{"resource_uuid": UUID, "order_uuid": "0f0e0d0c-0b0a-0908-0706-050403020100"}])
    [result] = output["results"]
    assert (result["order_uuid"], result["retry"], result["backend_metadata"]) == (
        "0f0e0d0c0b0a09080706050403020100", False, None)
    assert output["api_calls"] == {"reads": 5, "writes": 2, "retries": 0}
    assert output["changed"] and not output.get("failed")


def test_machines_can_be_handed_over_packed_both_ways(capsys, monkeypatch):
    with_chain(monkeypatch, {"changed": True, "failed": False, "msg": "deallocated", "action": "powered_off"})
    items = [{"resource_uuid": UUID, "backend_id": "/subscriptions/s/vm", "state": "deallocated"}]
    listed = run_module(capsys, machines=items)
    packed = run_module(capsys, machines_packed=json.dumps(items), packed=True)
    assert "results" not in packed and json.loads(packed["results_packed"]) == listed["results"]
    assert packed["failures"] == [] and packed["msg"] == listed["msg"]
    bad = run_module(capsys, machines_packed=json.dumps([{"resource_uuid": UUID, "state": "asleep"}]))
    assert bad["failed"] and bad["msg"].startswith("machines_packed: value of state must be one of")


def test_fail_on_item_error_fails_the_task(capsys, monkeypatch):
    with_chain(monkeypatch, ItemError("nope"))
    output = run_module(capsys, fail_on_item_error=True, machines=[{"resource_uuid": UUID}])
    assert output["failed"] and "1 of 1 machine(s) failed: nope" in output["msg"]
    assert output["results"][0]["failed"] and output["api_calls"]["reads"] == 5


def test_a_malformed_uuid_fails_the_module_naming_the_key(capsys):
    output = run_module(capsys, machines=[{"resource_uuid": UUID}, {"resource_uuid": "web"}])
    assert output["failed"] and output["msg"] == "machines[1].resource_uuid: 'web' is not a UUID"


def test_missing_credentials_fail_the_module(capsys, monkeypatch):
    for name in ("AZURE_SUBSCRIPTION_ID", "AZURE_TENANT", "AZURE_CLIENT_ID", "AZURE_SECRET"):
        monkeypatch.delenv(name, raising=False)
    output = run_module(capsys, subscription_id=None, client_id=None, machines=[{"resource_uuid": UUID}])
    assert output["failed"]
    assert "subscription_id (env AZURE_SUBSCRIPTION_ID)" in output["msg"] and "client_id" in output["msg"]


def test_two_items_for_one_resource():
    items = [{"resource_uuid": UUID}, {"resource_uuid": UUID}]
    duplicate_errors(items)
    assert "error" not in items[0] and "machines[0] acts on resource" in items[1]["error"]


# ---- owner tags: what is adopted, refused or waited for ---------------------------------------

def test_every_object_carries_the_owner_tags():
    fake = FakeAzure()
    result, module = run(fake, machine(offering_uuid=OFFERING))
    assert not result["failed"], result["msg"]
    tags = {"waldur-resource-uuid": UUID, "waldur-offering-uuid": OFFERING}
    assert fake.groups[GROUP.lower()]["tags"] == tags
    for kind, name in (("vnet", "netweb"), ("public_ip", "pubipweb"), ("nsg", "nsgweb"), ("nic", "nicweb"),
                       ("vm", "web")):
        assert fake.body(kind, name)["tags"] == tags, kind
    [disk] = fake.names("disk")
    assert fake.body("disk", disk)["tags"] == tags


def test_a_shared_group_made_by_the_agent_carries_only_the_offering_tag():
    fake = FakeAzure()
    result, module = run(fake, machine(resource_group="shared", offering_uuid=OFFERING))
    assert not result["failed"], result["msg"]
    assert fake.groups["shared"]["tags"] == {"waldur-offering-uuid": OFFERING}
    assert fake.body("vm", "web-1234abcd")["tags"]["waldur-resource-uuid"] == UUID


@pytest.mark.parametrize("tags, owner", [
    (None, "no owner tag"),
    ({"waldur-resource-uuid": OTHER_UUID}, "owner tag waldur-resource-uuid=%s" % OTHER_UUID),
    ({"WALDUR-RESOURCE-UUID": "not-a-uuid"}, "owner tag waldur-resource-uuid=not-a-uuid"),
])
def test_objects_at_the_wanted_names_of_another_owner_are_refused_untouched(tags, owner):
    fake = FakeAzure()
    plant_partial_chain(fake, tags=tags)
    before, writes = copy.deepcopy(fake.store), len(fake.writes())
    result, module = run(fake, machine())
    assert result["failed"] and not result["retry"] and result["backend_id"] is None
    assert "resource group %s exists with %s" % (GROUP, owner) in result["msg"]
    assert "virtual network netweb in resource group %s exists with %s" % (GROUP, owner) in result["msg"]
    assert "not adopted, changed or deleted" in result["msg"]
    assert len(fake.writes()) == writes and fake.store == before and GROUP.lower() in fake.groups


def test_a_planted_machine_is_not_adopted():
    fake = FakeAzure()
    run(fake, machine(resource_uuid=OTHER_UUID))  # another resource's chain...
    other_group = "group-%s-web" % OTHER_UUID
    fake.groups[GROUP.lower()] = dict(fake.groups.pop(other_group.lower()), name=GROUP)  # ...moved to our name
    for key in [key for key in fake.store if key[1] == other_group.lower()]:
        fake.store[(key[0], GROUP.lower(), key[2], key[3])] = fake.store.pop(key)
    before = len(fake.writes())
    result, module = run(fake, machine())
    assert result["failed"] and result["backend_id"] is None and result["action"] == "none"
    assert ("virtual machine web in resource group %s exists with owner tag waldur-resource-uuid=%s"
            % (GROUP, OTHER_UUID)) in result["msg"]
    assert len(fake.writes()) == before


def test_a_planted_nic_in_a_shared_group_is_refused_before_anything_is_made():
    fake = FakeAzure()
    fake.groups["shared"] = {"name": "shared", "location": "westeurope"}
    nics = fake._clients["network"].network_interfaces
    nics.begin_create_or_update("shared", "nicweb-1234abcd", {"location": "westeurope", "properties": {
        "ipConfigurations": [{"name": "x", "properties": {}}]}})
    before = len(fake.calls)
    result, module = run(fake, machine(resource_group="shared"))
    assert result["failed"] and "network interface nicweb-1234abcd in resource group shared exists with no owner " \
                                "tag" in result["msg"]
    assert [call for call in fake.calls[before:] if call[0] not in ("get", "list")] == []
    assert fake.names("nic") == ["nicweb-1234abcd"] and fake.names("vnet") == []


def test_a_machine_still_provisioning_is_a_retry_with_its_backend_id():
    fake = FakeAzure()
    created, module = run(fake, machine())
    fake.body("vm", "web")["properties"]["provisioningState"] = "Creating"
    before = len(fake.writes())
    result, module = run(fake, machine())
    assert result["failed"] and result["retry"], result["msg"]
    assert result["backend_id"] == created["backend_id"]
    assert "virtual machine web in resource group %s is still creating" % GROUP in result["msg"]
    assert len(fake.writes()) == before
    # with the backend id recorded, the same
    again, module = run(fake, machine(backend_id=created["backend_id"]))
    assert again["retry"] and again["backend_id"] == created["backend_id"]


@pytest.mark.parametrize("kind, name, state, retry, said", [
    ("vnet", "netweb", "Updating", True, "virtual network netweb in resource group %s is still updating"),
    ("public_ip", "pubipweb", "Failed", False,
     "public IP address pubipweb in resource group %s exists but its provisioning failed"),
])
def test_a_companion_still_provisioning_is_a_retry_and_a_failed_one_an_error_with_nothing_written(
        kind, name, state, retry, said):
    fake = FakeAzure()
    plant_partial_chain(fake, tags=OWNER)
    fake.body(kind, name)["properties"]["provisioningState"] = state
    before = len(fake.writes())
    result, module = run(fake, machine())
    assert result["failed"] and result["retry"] == retry
    assert said % GROUP in result["msg"]
    assert len(fake.writes()) == before


def test_a_renamed_resource_finishes_the_chain_its_owner_tag_finds():
    fake = FakeAzure()
    plant_partial_chain(fake, tags=OWNER)
    before = len(fake.calls)
    result, module = run(fake, machine(name="Renamed Since"))
    assert not result["failed"], result["msg"]
    assert result["backend_id"] == dedicated_id()
    puts = [(kind, name) for verb, kind, name in fake.calls[before:] if verb == "put"]
    assert puts == [("nic", "nicweb"), ("vm", "web")]
    assert list(fake.groups) == [GROUP.lower()] and fake.names("vm") == ["web"]


def test_a_renamed_resource_in_a_shared_group_finds_its_objects_by_owner_tag():
    fake = FakeAzure()
    fake.groups["shared"] = {"name": "shared", "location": "westeurope"}
    fake.faults[("put", "vm")] = AzureError("still no capacity", 409, "AllocationFailed")
    fake.faults[("delete", "nic")] = AzureError("throttled", 429, "TooManyRequests")
    first, module = run(fake, machine(resource_group="shared"))  # rollback stopped at the NIC
    assert first["failed"] and fake.names("nic") == ["nicweb-1234abcd"]
    del fake.faults[("put", "vm")], fake.faults[("delete", "nic")]
    result, module = run(fake, machine(resource_group="shared", name="db"))
    assert not result["failed"], result["msg"]
    assert result["backend_id"].endswith("/virtualMachines/web-1234abcd")
    assert fake.names("vm") == ["web-1234abcd"] and fake.names("nic") == ["nicweb-1234abcd"]


def test_two_tagged_chains_of_one_resource_are_an_error():
    fake = FakeAzure()
    plant_partial_chain(fake, tags=OWNER)
    plant_partial_chain(fake, group="group-%s-db" % UUID, vm="db", tags=OWNER)
    before = len(fake.writes())
    result, module = run(fake, machine())
    assert result["failed"] and "2 resource groups carry owner tag waldur-resource-uuid=%s" % UUID in result["msg"]
    assert len(fake.writes()) == before


def test_a_legacy_machine_keeps_its_backend_id_route():
    # made by Mastermind: no tags, a four-hex group
    fake = FakeAzure()
    created, module = run(fake, machine())
    legacy = dedicated_id(group="group-1234-web")
    fake.groups["group-1234-web"] = dict(fake.groups.pop(GROUP.lower()), name="group-1234-web", tags=None)
    for key in [key for key in fake.store if key[1] == GROUP.lower()]:
        body = fake.store.pop(key)
        body.pop("tags", None)
        fake.store[(key[0], "group-1234-web", key[2], key[3])] = body
    result, module = run(fake, machine(backend_id=legacy))
    assert not result["failed"] and result["msg"] == "virtual machine web exists; nothing to do"
    paused, module = run(fake, machine(backend_id=legacy, state="deallocated"))
    assert paused["action"] == "powered_off"
    gone, module = run(fake, machine(backend_id=legacy, state="absent"))
    assert gone["action"] == "deleted" and fake.groups == {}


def test_a_backend_id_whose_machine_has_another_owner_is_refused():
    fake = FakeAzure()
    created, module = run(fake, machine(resource_uuid=OTHER_UUID))
    for item in (machine(backend_id=created["backend_id"]),
                 machine(backend_id=created["backend_id"], state="deallocated")):
        result, module = run(fake, item)
        assert result["failed"] and "owner tag waldur-resource-uuid=%s" % OTHER_UUID in result["msg"]
    assert [call for call in fake.writes() if call[0] == "deallocate"] == []


# ---- once the machine exists, nothing errs ---------------------------------------------------

def test_a_deadline_during_the_vm_operation_is_a_retry_without_rollback():
    fake = FakeAzure()
    fake.slow.add("vm")
    module = FakeModule()
    chain = VmChain(module, fake, None)
    result = chain.run(machine())
    assert result["failed"] and result["retry"], result["msg"]
    assert "still running" in result["msg"] and "nothing is rolled back" in result["msg"]
    assert result["backend_id"] == dedicated_id()
    assert chain.accepted_vms == {UUID: dedicated_id()}
    assert [call for call in fake.writes() if call[0] == "delete"] == []
    assert fake.names("vm") == ["web"]
    # ARM finishes it; the next pass adopts the machine and tags its disk
    fake.slow.clear()
    fake.body("vm", "web")["properties"]["provisioningState"] = "Succeeded"
    again, module = run(fake, machine())
    assert not again["failed"] and again["action"] == "adopted" and again["backend_id"] == dedicated_id()
    [disk] = fake.names("disk")
    assert fake.body("disk", disk)["tags"] == OWNER


def test_a_deadline_during_a_network_operation_is_a_retry_without_rollback():
    fake = FakeAzure()
    fake.slow.add("vnet")
    result, module = run(fake, machine())
    assert result["retry"] and result["backend_id"] is None
    assert [call for call in fake.writes() if call[0] == "delete"] == []
    assert fake.names("vnet") == ["netweb"] and GROUP.lower() in fake.groups


def test_a_failed_read_after_the_machine_is_built_is_a_retry_with_its_backend_id():
    fake = FakeAzure()
    fake.faults[("get", "nic")] = AzureError("Internal error", 500, "InternalServerError")
    original = fake.compute.virtual_machines.instance_view

    def failing_view(group, name):
        raise AzureError("Internal error", 500, "InternalServerError")

    fake.compute.virtual_machines.instance_view = failing_view
    result, module = run(fake, machine())
    assert result["failed"] and result["retry"], result["msg"]
    assert result["backend_id"] == dedicated_id() and result["action"] == "created"
    assert "created virtual machine web in resource group %s, but" % GROUP in result["msg"]
    assert [call for call in fake.writes() if call[0] == "delete"] == [] and fake.names("vm") == ["web"]
    fake.compute.virtual_machines.instance_view = original
    del fake.faults[("get", "nic")]
    again, module = run(fake, machine())
    assert not again["failed"] and again["action"] == "adopted" and again["backend_id"] == dedicated_id()


def test_a_failed_read_of_a_known_machine_is_a_retry():
    fake = FakeAzure()
    created, module = run(fake, machine())
    fake.faults[("get", "vm")] = AzureError("Internal error", 500, "InternalServerError")
    result, module = run(fake, machine(backend_id=created["backend_id"]))
    assert result["failed"] and result["retry"] and result["backend_id"] == created["backend_id"]


def test_an_adopted_machine_whose_provisioning_failed_errs_with_the_clouds_reason():
    fake = FakeAzure()
    run(fake, machine())
    fake.body("vm", "web")["properties"]["provisioningState"] = "Failed"
    original = fake.instance_view_body
    fake.instance_view_body = lambda name: {"statuses": [
        {"code": "ProvisioningState/failed/AllocationFailed", "message": "No capacity for Standard_B1s"}]}
    result, module = run(fake, machine())
    fake.instance_view_body = original
    assert result["failed"] and not result["retry"] and result["backend_id"] is None
    assert "provisioning failed: AllocationFailed: No capacity for Standard_B1s" in result["msg"]
    # Waldur drops a resource whose Create errs without a backend id: nothing would ever delete
    # the chain, so what carries the owner tag goes now, and the message says so
    assert "; deleted resource group %s" % GROUP in result["msg"]
    assert [call for call in fake.writes() if call[0] == "delete"] == [("delete", "group", GROUP)]
    assert fake.groups == {} and fake.store == {}


def test_a_known_machine_whose_provisioning_failed_errs_and_is_left_for_terminate():
    fake = FakeAzure()
    created, module = run(fake, machine())
    fake.body("vm", "web")["properties"]["provisioningState"] = "Failed"
    before = len(fake.writes())
    result, module = run(fake, machine(backend_id=created["backend_id"]))
    assert result["failed"] and not result["retry"] and "provisioning failed" in result["msg"]
    assert "left as it is" in result["msg"] and len(fake.writes()) == before


# ---- rollback deletes only what this run made --------------------------------------------------

def test_rollback_in_an_adopted_group_deletes_only_what_this_run_made():
    fake = FakeAzure()
    plant_partial_chain(fake, tags=OWNER)
    fake.faults[("put", "vm")] = AzureError("Allocation failed", 409, "AllocationFailed")
    before = len(fake.calls)
    result, module = run(fake, machine())
    assert result["failed"] and "rolled back: deleted network interface nicweb" in result["msg"]
    deletes = [(kind, name) for verb, kind, name in fake.calls[before:] if verb == "delete"]
    assert deletes == [("nic", "nicweb")]
    assert GROUP.lower() in fake.groups and fake.names("vnet") == ["netweb"]


def test_rollback_leaves_a_group_that_holds_something_this_run_did_not_make():
    fake = FakeAzure()

    def intruder(group, name, body):
        # someone puts a network into the group while the chain runs
        networks.begin_create_or_update(group, "intruder", {"location": "westeurope", "properties": {}})
        raise AzureError("Allocation failed", 409, "AllocationFailed")

    networks = fake._clients["network"].virtual_networks
    fake.compute.virtual_machines.begin_create_or_update = intruder
    result, module = run(fake, machine())
    assert result["failed"]
    assert "kept resource group %s: it holds virtual network intruder (no owner tag)" % GROUP in result["msg"]
    assert GROUP.lower() in fake.groups and fake.names("vnet") == ["intruder"]
    assert fake.names("nic") == [] and fake.names("public_ip") == []


# ---- changed and action say what happened on Azure (issue 24) ---------------------------------

@pytest.mark.parametrize("failing", CHAIN)
def test_a_refused_create_rolled_back_whole_is_not_changed(failing):
    """ARM refusing a create (400, 409) at any step leaves nothing: the item is not changed, whatever
    was made and rolled back before the refusal."""
    fake = FakeAzure()
    fake.faults[("put", failing)] = AzureError("InvalidParameter", 400, "InvalidParameter")
    result, module = run(fake, machine())
    assert (result["failed"], result["changed"], result["action"]) == (True, False, "none")
    assert fake.groups == {} and fake.store == {}


def test_a_create_whose_answer_was_lost_is_unknown_not_none():
    fake = FakeAzure()
    fake.faults[("put", "vm")] = AzureError("no answer from Azure", None, None)
    result, module = run(fake, machine())
    assert (result["failed"], result["retry"], result["action"]) == (True, True, "unknown")


def test_a_refused_power_change_is_not_changed():
    fake = FakeAzure()
    created, module = run(fake, machine())
    fake.faults[("deallocate", "vm")] = AzureError("Operation not allowed", 409, "OperationNotAllowed")
    result, module = run(fake, machine(state="deallocated", backend_id=created["backend_id"]))
    assert (result["failed"], result["changed"], result["action"]) == (True, False, "none")
    fake.faults[("deallocate", "vm")] = AzureError("upstream timed out", 504, None)
    result, module = run(fake, machine(state="deallocated", backend_id=created["backend_id"]))
    assert (result["failed"], result["changed"], result["action"]) == (True, False, "unknown")
