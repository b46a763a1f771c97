"""azure_vm_chain and azure_vm_chain_info in real playbooks, with the real Azure SDKs over TLS,
against the Azure simulator (ARM + Entra ID token endpoint)."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import figures_to_usages
from tests.helpers import assert_verbose_module_output, run_playbook
from tests.simulators.azure import presets as P

pytestmark = pytest.mark.integration

KEY = P.SEED_SSH_PUBLIC_KEY
IMAGE = P.DEFAULT_IMAGE
UUID_A = "1234abcd-5678-4ef9-8123-4567890abcde"
UUID_B = "99998888-7777-4666-8555-444433332222"
UUID_C = "abcdef01-2345-4678-9abc-def012345678"
CHAIN_PUTS = ["resource_groups.put", "virtual_networks.put", "subnets.put", "public_ips.put", "nsgs.put",
              "nics.put", "vms.put"]
# ARM does not copy a machine's tags to the OS disk it makes: the agent tags the disk once it exists
CHAIN_WRITES = CHAIN_PUTS + ["disks.update"]
GROUP_A = "group-%s-web-server" % UUID_A.replace("-", "")
OWNER_A = {"waldur-resource-uuid": UUID_A.replace("-", "")}


def assert_chain_order(writes):
    """The writes of one new chain: the group, the three branches in any order (the network
    before its subnet), then the NIC, the machine and its OS disk's tags."""
    assert sorted(writes) == sorted(CHAIN_WRITES), writes
    assert writes[0] == "resource_groups.put" and writes[-3:] == ["nics.put", "vms.put", "disks.update"], writes
    assert writes.index("virtual_networks.put") < writes.index("subnets.put"), writes


def azure_env(sim):
    """The environment AWX's Azure credential injects, plus the simulator's endpoints and CA."""
    return {
        "AZURE_SUBSCRIPTION_ID": P.SUBSCRIPTION_ID,
        "AZURE_TENANT": P.TENANT_ID,
        "AZURE_CLIENT_ID": P.CLIENT_ID,
        "AZURE_SECRET": P.CLIENT_SECRET,
        "AZURE_ARM_ENDPOINT": sim.url,
        "AZURE_AUTHORITY_HOST": sim.url,
        "REQUESTS_CA_BUNDLE": sim.ca_bundle,
    }


def run_module(sim, tmp_path, module, args, check=False, verbosity=0, env=None):
    """Run one module task in a playbook; returns (the registered result, the run)."""
    out = tmp_path / ("result-%s.json" % uuid.uuid4().hex)
    tasks = [
        {"name": "Run " + module, "waldur.site_agent." + module: args, "register": "outcome",
         "ignore_errors": True},
        {"name": "Save the result", "check_mode": False, "ansible.builtin.copy": {
            "content": "{{ outcome | to_json }}", "dest": str(out), "mode": "0600"}},
    ]
    play = [{"name": "Azure", "hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}]
    run = run_playbook(play, env=env if env is not None else azure_env(sim), check=check, verbosity=verbosity)
    assert out.exists(), run.output
    return json.loads(out.read_text()), run


def chain(sim, tmp_path, machines, check=False, verbosity=0, **options):
    args = {"machines": machines, "polling_interval": 0.05}
    args.update(options)
    result, run = run_module(sim, tmp_path, "azure_vm_chain", args, check=check, verbosity=verbosity)
    assert "results" in result, result
    return result["results"], result, run


def machine(resource_uuid=UUID_A, name="Web Server", **overrides):
    item = {"resource_uuid": resource_uuid, "order_uuid": str(uuid.uuid4()), "name": name,
            "location": "westeurope", "size": "Standard_B2s", "image": IMAGE, "ssh_public_key": KEY}
    item.update(overrides)
    return item


def arm(sim, group, path=""):
    return "/subscriptions/%s/resourceGroups/%s%s" % (P.SUBSCRIPTION_ID, group, path)


def net(sim, group, kind, name):
    return sim.app.get(arm(sim, group, "/providers/Microsoft.Network/%s/%s" % (kind, name)))


def arm_writes(sim, since=0):
    """Successful write calls to ARM (the token request is not one)."""
    return [call["operation"] for call in sim.app.write_calls(since) if call["operation"] != "token"]


def resources(sim):
    return sorted(rid.lower() for rid in sim.app.resources())


# ---- create ---------------------------------------------------------------------------------

def test_create_builds_exactly_the_chain_and_never_shows_a_secret(azure_sim, tmp_path):
    sim = azure_sim
    # realistic long-running operations: every PUT is polled through Azure-AsyncOperation
    sim.app.lro_mode, sim.app.retry_after, sim.app.lro_seconds = "realistic", 0, 0.2
    results, output, run = chain(sim, tmp_path, [machine(
        custom_data="#cloud-config\npackages: [htop]\n", allowed_ssh_ranges=["203.0.113.0/24", "198.51.100.7"],
        admin_username="ops")], verbosity=3)
    [result] = results
    assert not result["failed"], result["msg"]
    group = GROUP_A
    vm_id = arm(sim, group, "/providers/Microsoft.Compute/virtualMachines/web-server")
    assert result["backend_id"] == vm_id and result["action"] == "created" and result["changed"]
    assert result["resource_uuid"] == UUID_A.replace("-", "")
    assert_chain_order(arm_writes(sim))
    assert any(call["operation"] == "operations.get" for call in sim.app.calls)  # the LROs were polled

    assert sim.app.get(arm(sim, group))["location"] == "westeurope"
    vnet = net(sim, group, "virtualNetworks", "netweb-server")
    assert vnet["properties"]["addressSpace"]["addressPrefixes"] == ["10.0.0.0/16"]
    subnet = net(sim, group, "virtualNetworks", "netweb-server/subnets/subnetweb-server")
    assert subnet["properties"]["addressPrefix"] == "10.0.0.0/24"
    public_ip = net(sim, group, "publicIPAddresses", "pubipweb-server")
    assert public_ip["sku"]["name"] == "Standard"
    assert public_ip["properties"]["publicIPAllocationMethod"] == "Static"
    nsg = net(sim, group, "networkSecurityGroups", "nsgweb-server")
    [rule] = nsg["properties"]["securityRules"]
    assert sorted(rule["properties"]["sourceAddressPrefixes"]) == ["198.51.100.7", "203.0.113.0/24"]
    assert (rule["properties"]["destinationPortRange"], rule["properties"]["direction"],
            rule["properties"]["access"], rule["properties"]["protocol"]) == ("22", "Inbound", "Allow", "Tcp")
    nic = net(sim, group, "networkInterfaces", "nicweb-server")
    [ip_configuration] = nic["properties"]["ipConfigurations"]
    assert ip_configuration["name"] == "ipconfweb-server"
    assert ip_configuration["properties"]["subnet"]["id"].lower() == subnet["id"].lower()
    assert ip_configuration["properties"]["publicIPAddress"]["id"].lower() == public_ip["id"].lower()
    assert nic["properties"]["networkSecurityGroup"]["id"].lower() == nsg["id"].lower()

    vm = sim.app.get(vm_id)["properties"]
    assert vm["hardwareProfile"]["vmSize"] == "Standard_B2s"
    publisher, offer, sku, version = IMAGE.split(":")
    image = vm["storageProfile"]["imageReference"]
    assert (image["publisher"], image["offer"], image["sku"], image["version"]) == (publisher, offer, sku, version)
    assert vm["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    [nic_reference] = vm["networkProfile"]["networkInterfaces"]
    assert nic_reference["properties"]["deleteOption"] == "Delete"
    linux = vm["osProfile"]["linuxConfiguration"]
    assert linux["disablePasswordAuthentication"] is True
    assert linux["ssh"]["publicKeys"] == [{"path": "/home/ops/.ssh/authorized_keys", "keyData": KEY}]
    assert base64.b64decode(sim.app.vm_custom_data(vm_id)).decode() == "#cloud-config\npackages: [htop]\n"

    metadata = result["backend_metadata"]
    assert metadata["backend_type"] == "azure"
    assert metadata["virtual_machine"] == {
        "id": vm_id, "name": "web-server", "location": "westeurope", "size": "Standard_B2s",
        "power_state": "running", "public_ip": public_ip["properties"]["ipAddress"],
        "private_ip": ip_configuration["properties"]["privateIPAddress"]}

    password = sim.app.vm_admin_password(vm_id)
    assert password and len(password) == 24
    assert password not in run.output and P.CLIENT_SECRET not in run.output
    assert password not in json.dumps(output)
    assert_verbose_module_output(run.output)


def test_a_second_run_makes_no_write_call_and_no_nsg_without_ranges(azure_sim, tmp_path):
    sim = azure_sim
    first, output, run = chain(sim, tmp_path, [machine()])
    assert not first[0]["failed"], first[0]["msg"]
    assert "nsgs.put" not in arm_writes(sim)
    assert not [rid for rid in sim.app.resources() if "networksecuritygroups" in rid.lower()]
    nic = net(sim, GROUP_A, "networkInterfaces", "nicweb-server")
    assert "networkSecurityGroup" not in nic["properties"]
    password = sim.app.vm_admin_password(first[0]["backend_id"])
    since = len(sim.app.calls)
    second, output, run = chain(sim, tmp_path, [machine()])
    assert arm_writes(sim, since) == []
    assert second[0]["action"] == "adopted" and not second[0]["changed"] and not output["changed"]
    assert second[0]["backend_id"] == first[0]["backend_id"]
    assert sim.app.vm_admin_password(first[0]["backend_id"]) == password


def test_shared_group_names_carry_the_uuid_and_an_existing_group_is_kept(azure_sim, tmp_path):
    sim = azure_sim
    sim.app.apply_group("shared-rg", {"location": "northeurope"})
    results, output, run = chain(sim, tmp_path, [
        machine(UUID_A, "Web Server", resource_group="shared-rg"),
        machine(UUID_B, "web--server", resource_group="shared-rg"),
    ])
    assert [r["failed"] for r in results] == [False, False], [r["msg"] for r in results]
    names = sorted(r["backend_metadata"]["virtual_machine"]["name"] for r in results)
    assert names == ["web-server-1234abcd", "web-server-99998888"]
    assert "resource_groups.put" not in arm_writes(sim)
    assert sim.app.get(arm(sim, "shared-rg"))["location"] == "northeurope"
    assert arm_writes(sim).count("vms.put") == 2 and arm_writes(sim).count("virtual_networks.put") == 2


# ---- branches: the public IP, the NSG and the network side by side -----------------------------

def operations_by_name(sim):
    """The long-running operations ARM ran, by operation name (one machine: one of each)."""
    return dict((op.name, op) for op in sim.app.lro.operations.values())


def test_the_branches_are_in_flight_together_and_the_nic_waits_for_what_it_references(azure_sim, tmp_path):
    sim = azure_sim
    lro = 1.0  # every operation stays InProgress this long after its PUT
    sim.app.lro_mode, sim.app.retry_after, sim.app.lro_seconds = "realistic", 0, lro
    results, output, run = chain(sim, tmp_path, [machine(allowed_ssh_ranges=["203.0.113.0/24"])])
    assert not results[0]["failed"], results[0]["msg"]
    assert sorted(arm_writes(sim)) == sorted(CHAIN_WRITES)
    ops = operations_by_name(sim)

    def started(name):
        return ops[name].deadline - lro
    branches = ["virtual_networks.put", "public_ips.put", "nsgs.put"]
    # all three were running at one moment: the last started before the first was due
    assert max(started(name) for name in branches) < min(ops[name].deadline for name in branches)
    assert started("subnets.put") >= ops["virtual_networks.put"].deadline
    assert started("nics.put") >= max(ops[name].deadline for name in ("subnets.put", "public_ips.put", "nsgs.put"))
    assert started("vms.put") >= ops["nics.put"].deadline
    for kind, name in (("virtualNetworks", "netweb-server"), ("publicIPAddresses", "pubipweb-server"),
                       ("networkSecurityGroups", "nsgweb-server"), ("networkInterfaces", "nicweb-server")):
        assert net(sim, GROUP_A, kind, name)["tags"]["waldur-resource-uuid"] == OWNER_A["waldur-resource-uuid"]


def test_a_failed_branch_errs_its_machine_and_what_it_left_is_found_again_by_owner_tag(azure_sim, tmp_path):
    sim = azure_sim
    sim.app.lro_mode, sim.app.retry_after, sim.app.lro_seconds = "realistic", 0, 0.5
    # ARM refuses the public IP while the network and the NSG are being made, and the rollback
    # cannot delete the group: what the branches made stays, carrying the owner tag
    sim.app.add_fault("public_ips.put", status=409)
    sim.app.add_fault("resource_groups.delete", status=409)
    other = machine(UUID_B, "db")  # built after the failing one (one worker), so the faults are the first's
    results, output, run = chain(sim, tmp_path, [machine(allowed_ssh_ranges=["203.0.113.0/24"]), other],
                                 max_workers=1)
    failed, fine = results
    assert failed["failed"] and not failed["retry"] and failed["backend_id"] is None
    assert failed["msg"].startswith("creating public IP address pubipweb-server: Injected fault on public_ips.put"), \
        failed["msg"]
    assert "rollback failed, objects may be left in resource group %s" % GROUP_A in failed["msg"]
    assert not fine["failed"], fine["msg"]  # one machine's failure is not the other's
    assert sim.app.get(arm(sim, GROUP_A))["tags"] == OWNER_A
    left = [rid for rid in resources(sim) if GROUP_A.lower() in rid]
    kinds_left = sorted(rid.rsplit("/", 2)[-2] for rid in left)
    # the network branch sends no subnet once the public IP has failed, unless its network was done first
    subnet_left = "subnets" in kinds_left
    # (the NSG's rule is listed as its child)
    assert [kind for kind in kinds_left if kind not in ("subnets", "securityrules")] == [
        "networksecuritygroups", "resourcegroups", "virtualnetworks"], kinds_left
    for kind, name in (("virtualNetworks", "netweb-server"), ("networkSecurityGroups", "nsgweb-server")):
        assert net(sim, GROUP_A, kind, name)["tags"] == OWNER_A
    since = len(sim.app.calls)
    again, output, run = chain(sim, tmp_path, [machine(allowed_ssh_ranges=["203.0.113.0/24"])])
    assert not again[0]["failed"], again[0]["msg"]
    assert "adopted: resource group, virtual network, %snetwork security group" % (
        "subnet, " if subnet_left else "") in again[0]["msg"], again[0]["msg"]
    assert sorted(arm_writes(sim, since)) == sorted(["public_ips.put", "nics.put", "vms.put", "disks.update"]
                                                    + ([] if subnet_left else ["subnets.put"]))
    assert len([rid for rid in resources(sim) if rid.rsplit("/", 2)[-2] == "networksecuritygroups"]) == 1


# ---- failures and rollback --------------------------------------------------------------------

def test_a_fault_at_each_step_fails_that_item_and_leaves_nothing(azure_sim, tmp_path):
    sim = azure_sim
    # Items run one after the other; item k is the first to reach step k. After its group every
    # item sends the public IP and NSG PUTs (the branches start together), so those faults wait
    # for the call of item k: the earlier items that reached the branches sent one each. A failed
    # network sends no subnet, so the subnet's first call is item 2's. A last item fails in its VM's LRO.
    nth = {"public_ips.put": 3, "nsgs.put": 4}
    for operation in CHAIN_PUTS:
        sim.app.add_fault(operation, status=409, nth=nth.get(operation, 1))
    sim.app.fail_lro("vms.put", code="AllocationFailed", message="Allocation failed in this region.")
    items = [machine("%08x-0000-4000-8000-000000000000" % (index + 1), "vm%d" % index,
                     allowed_ssh_ranges=["203.0.113.0/24"]) for index in range(8)]
    results, output, run = chain(sim, tmp_path, items, max_workers=1)
    assert [r["failed"] for r in results] == [True] * 8
    for operation, result in zip(CHAIN_PUTS, results):
        assert "Injected fault on %s" % operation in result["msg"], result["msg"]
        assert result["backend_id"] is None
    assert "Allocation failed in this region." in results[7]["msg"]
    for result in results[1:]:
        assert "rolled back: deleted resource group" in result["msg"]
    assert sim.app.resources() == []
    assert not output.get("failed")  # items fail, the task does not


def test_a_shared_rollback_removes_only_the_failed_machines_objects(azure_sim, tmp_path):
    sim = azure_sim
    neighbour, output, run = chain(sim, tmp_path, [machine(UUID_B, "db", resource_group="shared",
                                                           allowed_ssh_ranges=["203.0.113.0/24"])])
    assert not neighbour[0]["failed"]
    before = resources(sim)
    sim.app.add_fault("vms.put", status=409)
    results, output, run = chain(sim, tmp_path, [machine(UUID_A, "web", resource_group="shared",
                                                         allowed_ssh_ranges=["203.0.113.0/24"])])
    assert results[0]["failed"] and "Injected fault on vms.put" in results[0]["msg"]
    assert "rolled back: deleted network interface nicweb-1234abcd" in results[0]["msg"]
    assert resources(sim) == before


def test_a_killed_chain_is_finished_with_one_vm_put(azure_sim, tmp_path):
    sim = azure_sim
    group = GROUP_A
    # what a run killed after the public IP left behind: its objects carry the owner tag
    sim.app.apply_group(group, {"location": "westeurope", "tags": OWNER_A})
    sim.app.apply_vnet(group, "netweb-server", {"location": "westeurope", "tags": OWNER_A, "properties": {
        "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}})
    sim.app.apply_subnet(group, "netweb-server", "subnetweb-server", {"properties": {"addressPrefix": "10.0.0.0/24"}})
    sim.app.apply_public_ip(group, "pubipweb-server", {"location": "westeurope", "sku": {"name": "Standard"},
                                                       "tags": OWNER_A,
                                                       "properties": {"publicIPAllocationMethod": "Static"}})
    results, output, run = chain(sim, tmp_path, [machine()])
    assert not results[0]["failed"], results[0]["msg"]
    assert arm_writes(sim) == ["nics.put", "vms.put", "disks.update"]
    again, output, run = chain(sim, tmp_path, [machine()])
    assert arm_writes(sim).count("vms.put") == 1
    assert again[0]["backend_id"] == results[0]["backend_id"]
    assert len([rid for rid in sim.app.resources() if "/virtualnetworks/" in rid.lower()
                and "/subnets/" not in rid.lower()]) == 1


def test_bad_orders_are_refused_before_anything_is_created(azure_sim, tmp_path):
    sim = azure_sim
    refused = [
        ({"location": None}, "Azure location is set neither on the order nor in backend_settings"),
        ({"location": "atlantis"}, "Azure location 'atlantis' is not available"),
        ({"size": "Standard_E2s_v3", "location": "northeurope"},
         "Azure size 'Standard_E2s_v3' is not offered in location 'northeurope'"),
        ({"image": "Canonical:ubuntu"}, "is not of the form publisher:offer:sku:version"),
        ({"ssh_public_key": None}, "carries no SSH key"),
        ({"ssh_public_key": "AAAAB3NzaC1yc2E"}, "not an OpenSSH public key"),
    ]
    items = [machine("%08x-0000-4000-8000-000000000000" % (index + 1), "bad%d" % index, **overrides)
             for index, (overrides, message) in enumerate(refused)]
    # a well-formed image Azure does not have is only refused by the VM PUT: rolled back
    items.append(machine(UUID_A, "unknown-image", image="Canonical:no-such-offer:1:latest"))
    results, output, run = chain(sim, tmp_path, items)
    for result, (overrides, message) in zip(results, refused):
        assert result["failed"] and message in result["msg"], result["msg"]
    assert results[-1]["failed"] and "PlatformImageNotFound" in results[-1]["msg"]
    unknown_group = "group-%s-unknown-image" % UUID_A.replace("-", "")
    assert "rolled back: deleted resource group %s" % unknown_group in results[-1]["msg"]
    writes = [call for call in sim.app.write_calls() if call["operation"] != "token"]
    assert writes and all(unknown_group in call["path"] for call in writes)
    assert sim.app.resources() == []


def test_present_with_a_backend_id(azure_sim, tmp_path):
    sim = azure_sim
    live = sim.app.seed_vm("live")
    stale = arm(sim, "group-0000-gone", "/providers/Microsoft.Compute/virtualMachines/gone")
    results, output, run = chain(sim, tmp_path, [machine(UUID_A, backend_id=live),
                                                 machine(UUID_B, backend_id=stale)])
    assert not results[0]["failed"] and results[0]["action"] == "none" and not results[0]["changed"]
    assert results[0]["backend_metadata"]["virtual_machine"]["power_state"] == "running"
    assert results[1]["failed"] and "no longer exists" in results[1]["msg"]
    assert arm_writes(sim) == []
    assert not [rid for rid in sim.app.resources() if "gone" in rid]


def test_check_mode_writes_nothing(azure_sim, tmp_path):
    sim = azure_sim
    live = sim.app.seed_vm("live")
    results, output, run = chain(sim, tmp_path, [machine(), machine(UUID_B, state="absent", backend_id=live)],
                                 check=True)
    assert [r["changed"] for r in results] == [True, True]
    assert results[0]["msg"].startswith("would create resource group %s" % GROUP_A)
    assert results[1]["msg"].startswith("would delete resource group")
    assert arm_writes(sim) == []
    assert sim.app.get(live) is not None


def test_missing_credentials_fail_the_task_naming_them(azure_sim, tmp_path):
    sim = azure_sim
    env = azure_env(sim)
    env.update(AZURE_TENANT="", AZURE_SECRET="")
    result, run = run_module(sim, tmp_path, "azure_vm_chain", {"machines": [machine()]}, env=env)
    assert result["failed"]
    assert "tenant (env AZURE_TENANT or AZURE_TENANT_ID)" in result["msg"] and "secret (env AZURE_SECRET)" in result["msg"]


def test_a_wrong_secret_fails_the_task_once_without_showing_it(azure_sim, tmp_path):
    """Rejected credentials are a configuration problem: the task fails (so the order pass
    leaves the orders executing) instead of every machine failing (which would err them)."""
    sim = azure_sim
    env = azure_env(sim)
    env["AZURE_SECRET"] = "wrong-secret-value"
    result, run = run_module(sim, tmp_path, "azure_vm_chain", {"machines": [machine(), machine(name="two")]},
                             env=env, verbosity=3)
    assert result["failed"] and "AADSTS7000215" in result["msg"] and "no machine was touched" in result["msg"]
    assert "check the offering's backend_settings.client_secret" in result["msg"]  # the key to fix
    assert "results" not in result
    assert "wrong-secret-value" not in run.output
    assert sim.app.resources() == []
    info, run = run_module(sim, tmp_path, "azure_vm_chain_info",
                           {"backend_ids": ["/subscriptions/x/resourceGroups/g/providers/Microsoft.Compute/"
                                            "virtualMachines/v"]}, env=env)
    assert info["failed"] and "AADSTS7000215" in info["msg"]


# ---- deletion -------------------------------------------------------------------------------

def test_absent_dedicated_deletes_the_group_even_with_an_upper_cased_id(azure_sim, tmp_path):
    sim = azure_sim
    sim.app.compute_id_casing = "upper_rg"  # as real Azure often returns VM ids
    created, output, run = chain(sim, tmp_path, [machine()])
    backend_id = created[0]["backend_id"]
    assert "/resourceGroups/%s/" % GROUP_A.upper() in backend_id
    results, output, run = chain(sim, tmp_path, [machine(state="absent", backend_id=backend_id,
                                                         resource_group="shared")])
    assert results[0]["action"] == "deleted", results[0]["msg"]
    assert sim.app.resources() == []
    since = len(sim.app.calls)
    again, output, run = chain(sim, tmp_path, [machine(state="absent", backend_id=backend_id)])
    assert again[0]["action"] == "absent" and not again[0]["changed"] and not again[0]["failed"]
    assert arm_writes(sim, since) == []


def test_absent_shared_deletes_only_that_machine(azure_sim, tmp_path):
    sim = azure_sim
    created, output, run = chain(sim, tmp_path, [
        machine(UUID_A, "web", resource_group="shared", allowed_ssh_ranges=["203.0.113.0/24"]),
        machine(UUID_B, "web", resource_group="shared", allowed_ssh_ranges=["203.0.113.0/24"]),
    ])
    neighbour = [rid.lower() for rid in sim.app.resources() if "99998888" in rid]
    assert len(neighbour) >= 7  # vnet, subnet, public IP, NSG, NSG rule, NIC, VM, disk
    since = len(sim.app.calls)
    results, output, run = chain(sim, tmp_path, [machine(UUID_A, state="absent",
                                                         backend_id=created[0]["backend_id"])])
    assert results[0]["action"] == "deleted", results[0]["msg"]
    assert "resource_groups.delete" not in arm_writes(sim, since)
    left = resources(sim)
    assert not [rid for rid in left if "1234abcd" in rid]
    assert set(neighbour) <= set(left)
    assert arm(sim, "shared").lower() in left


def test_the_route_follows_the_id_not_a_dedicated_looking_shared_group(azure_sim, tmp_path):
    sim = azure_sim
    # a shared group whose name looks dedicated, but not for this machine's name
    created, output, run = chain(sim, tmp_path, [machine(UUID_A, "web", resource_group="group-1234-web")])
    assert created[0]["backend_id"].endswith("/resourceGroups/group-1234-web/providers/Microsoft.Compute/"
                                             "virtualMachines/web-1234abcd")
    results, output, run = chain(sim, tmp_path, [machine(UUID_A, state="absent",
                                                         backend_id=created[0]["backend_id"])])
    assert results[0]["action"] == "deleted"
    assert resources(sim) == [arm(sim, "group-1234-web").lower()]


def test_mastermind_machines_terminate_pause_and_restore(azure_sim, tmp_path):
    sim = azure_sim
    sim.app.reset("mastermind")
    web_id, db_id = P.MASTERMIND_VM_IDS
    results, output, run = chain(sim, tmp_path, [
        machine(UUID_A, state="running", backend_id=web_id),      # running already
        machine(UUID_B, state="running", backend_id=db_id),       # deallocated -> start
    ])
    assert [r["action"] for r in results] == ["none", "powered_on"], [r["msg"] for r in results]
    assert arm_writes(sim) == ["vms.start"]
    assert sim.app.vm_power_state(db_id) == "running"
    results, output, run = chain(sim, tmp_path, [machine(UUID_A, state="absent", backend_id=web_id)])
    assert results[0]["action"] == "deleted", results[0]["msg"]
    assert not [rid for rid in sim.app.resources() if "group-1a2b-web" in rid.lower()]
    assert [rid for rid in sim.app.resources() if "group-3c4d-db" in rid.lower()]


# ---- power ----------------------------------------------------------------------------------

def test_deallocate_and_start_only_when_needed_and_throttling_is_retried(azure_sim, tmp_path):
    sim = azure_sim
    vm_id = sim.app.seed_vm("pausable")
    sim.app.add_fault("vms.get", status=429, retry_after=1)
    sim.app.add_fault("vms.deallocate", status=429, retry_after=1)
    results, output, run = chain(sim, tmp_path, [machine(state="deallocated", backend_id=vm_id)])
    assert results[0]["action"] == "powered_off" and results[0]["changed"], results[0]["msg"]
    statuses = [call["status"] for call in sim.app.calls_of("vms.deallocate")]
    assert len(statuses) == 2 and statuses[0] == 429 and statuses[1] < 300  # retried after Retry-After
    assert [call["status"] for call in sim.app.calls_of("vms.get")][:2] == [429, 200]
    assert sim.app.vm_power_state(vm_id) == "deallocated"
    assert results[0]["backend_metadata"]["virtual_machine"]["power_state"] == "deallocated"
    since = len(sim.app.calls)
    results, output, run = chain(sim, tmp_path, [machine(state="deallocated", backend_id=vm_id)])
    assert results[0]["action"] == "none" and arm_writes(sim, since) == []
    results, output, run = chain(sim, tmp_path, [machine(state="running", backend_id=vm_id)])
    assert results[0]["action"] == "powered_on" and arm_writes(sim, since) == ["vms.start"]
    assert sim.app.vm_power_state(vm_id) == "running"


# ---- info -----------------------------------------------------------------------------------

COMPONENTS = {
    "cpu": {"measured_unit": "Cores", "unit_factor": 1, "accounting_type": "limit"},
    "ram": {"measured_unit": "GiB", "unit_factor": 1024, "accounting_type": "limit"},
    "disk": {"measured_unit": "MiB", "unit_factor": 1, "accounting_type": "limit"},
    "gpu": {"measured_unit": "GPUs", "unit_factor": 1, "accounting_type": "limit"},
}


def test_info_measures_many_machines_from_listings(azure_sim, tmp_path):
    sim = azure_sim
    ids = [sim.app.seed_vm("vm%d" % index, size="Standard_B2s") for index in range(4)]
    sim.app.set_vm_power_state(ids[1], "deallocated")
    gone = ids[0].replace("/vm0", "/vm-gone")
    result, run = run_module(sim, tmp_path, "azure_vm_chain_info", {
        "backend_ids": ids + [gone, "droplet-1234"]})
    machines = result["machines"]
    assert [m["found"] for m in machines] == [True, True, True, True, False, False]
    # The machine's own 30 GiB OS disk plus the size's resource disk (osDiskSizeInMB is
    # only the largest OS disk the size allows): 30720 + 8192, as upstream reports B2s.
    disk = 30 * 1024 + P.VM_SIZES["standard_b2s"].resource_disk_mb
    assert disk == 38912
    for entry in machines[:4]:
        assert (entry["cores"], entry["memory_mb"], entry["disk_mb"]) == (2, 4096, disk)
        assert entry["figures"] == {"cores": 2, "ram_mb": 4096, "disk_mb": disk} and "usages" not in entry
        assert figures_to_usages(entry["figures"], COMPONENTS) == {"cpu": 2, "ram": 4, "disk": disk}
        assert entry["backend_metadata"]["virtual_machine"]["public_ip"]
    assert machines[1]["power_state"] == "deallocated" and machines[0]["power_state"] == "running"
    assert machines[4]["figures"] == {} and "does not exist" in machines[4]["msg"]
    assert "Not an Azure virtual machine id" in machines[5]["msg"]
    operations = [call["operation"] for call in sim.app.calls]
    assert operations.count("vms.list_all") == 2
    # the listed machines are not read again; the one the listing does not hold is read on its own,
    # and only ARM's own not-found to that read says it is gone
    assert [call["path"].rsplit("/", 1)[-1] for call in sim.app.calls if call["operation"] == "vms.get"] == ["vm-gone"]
    assert operations.count("vm_sizes.list") == 1
    assert arm_writes(sim) == []


def test_info_reads_a_single_machine_directly(azure_sim, tmp_path):
    sim = azure_sim
    vm_id = sim.app.seed_vm("single", size="Standard_D2s_v5")
    result, run = run_module(sim, tmp_path, "azure_vm_chain_info", {
        "backend_ids": [vm_id]})
    [entry] = result["machines"]
    size = P.VM_SIZES["standard_d2s_v5"]
    components = {"vcpu": {}, "memory": {}, "storage": {"backend_name": "disk_mb"}}
    assert figures_to_usages(entry["figures"], components) == {
        "vcpu": 2, "memory": 8192, "storage": 30 * 1024 + size.resource_disk_mb}
    operations = [call["operation"] for call in sim.app.calls]
    assert "vms.list_all" not in operations and operations.count("vms.get") == 1
