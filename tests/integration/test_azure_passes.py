"""The Azure passes end to end: the real order_process, membership_sync and report playbooks,
driven by the site agent configuration file, against the Waldur simulator (orders placed as
a consumer would, over HTTP) and the Azure simulator (the real Azure SDKs over TLS)."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
import yaml

from tests.helpers import assert_verbose_module_output
from tests.integration.azure_state import (
    all_vms, arm, arm_ids, arm_writes, dedicated_group, network, owned, vm_id)
from tests.integration.passes import (
    MEMBERSHIP_PASS, ORDER_PASS, REPORT_PASS, assert_done, assert_erred, call_waldur, edit_config, kill_pass_during,
    log_lines, order_form_with, order_machine, run_pass, set_flag, terminate, update_limits, waldur_writes, write_config)
from tests.simulators.azure import presets as AZ
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration


KEY_1, KEY_2, KEY_3 = W.SSH_KEYS[:3]
DEBIAN = "Debian:debian-12:12-gen2:latest"
CHAIN_PUTS = ["resource_groups.put", "virtual_networks.put", "subnets.put", "public_ips.put", "nsgs.put",
              "nics.put", "vms.put"]


# ---- configuration and passes ---------------------------------------------------------------

# ---- Waldur as its users drive it -------------------------------------------------------------

def order_vm(waldur, name: str, limits: dict | None = None, **attributes) -> tuple[str, str]:
    """A consumer orders a machine; (order uuid, marketplace resource uuid)."""
    return order_machine(waldur, W.AZURE_OFFERING_UUID, W.AZURE_PLAN_UUID, name, limits or W.AZURE_PLAN_QUOTAS, **attributes)


# ---- create, idempotence, update, terminate, check mode -------------------------------------

def test_orders_build_update_and_tear_down_machines_and_hide_every_secret(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure, network_cidr="10.20.0.0/16", subnet_cidr="10.20.1.0/24",
                          allowed_ssh_ranges=["203.0.113.0/24", "198.51.100.7/32"])
    preset_uuid = W.AZURE_RESOURCE_UUID
    # The default preset's order names service-provider key 1 and takes the offering's defaults;
    # this one orders its own location, size, image, key and admin user.
    custom_order, custom_uuid = order_vm(waldur, "Build Box", location="northeurope", size="Standard_B1s",
                                         image=DEBIAN, ssh_public_key=KEY_2["public_key"], username="ops")
    # a key named in another spelling of its UUID
    third_order, third_uuid = order_vm(waldur, "scratch", ssh_key=str(uuid.UUID(KEY_3["uuid"])).upper())

    run = run_pass(ORDER_PASS, config, verbosity=3)

    for order_uuid in (W.AZURE_ORDER_UUID, custom_order, third_order):
        assert_done(waldur, order_uuid)
    preset_group, custom_group = dedicated_group(preset_uuid, "azure-vm-1"), dedicated_group(custom_uuid, "build-box")
    preset_vm, custom_vm = vm_id(preset_group, "azure-vm-1"), vm_id(custom_group, "build-box")
    third_vm = vm_id(dedicated_group(third_uuid, "scratch"), "scratch")
    assert waldur.app.resource(preset_uuid)["backend_id"] == preset_vm
    assert waldur.app.resource(custom_uuid)["backend_id"] == custom_vm
    assert waldur.app.resource(third_uuid)["backend_id"] == third_vm
    assert waldur.app.resource(preset_uuid)["state"] == "OK"
    assert waldur.app.resource(preset_uuid)["backend_metadata"]["virtual_machine"]["power_state"] == "running"

    # the whole chain of the preset machine, as configured
    assert azure.app.get(arm(preset_group))["location"] == "westeurope"
    vnet = network(azure, preset_group, "virtualNetworks", "netazure-vm-1")
    assert vnet["properties"]["addressSpace"]["addressPrefixes"] == ["10.20.0.0/16"]
    subnet = network(azure, preset_group, "virtualNetworks", "netazure-vm-1/subnets/subnetazure-vm-1")
    assert subnet["properties"]["addressPrefix"] == "10.20.1.0/24"
    public_ip = network(azure, preset_group, "publicIPAddresses", "pubipazure-vm-1")
    assert (public_ip["sku"]["name"], public_ip["properties"]["publicIPAllocationMethod"]) == ("Standard", "Static")
    nsg = network(azure, preset_group, "networkSecurityGroups", "nsgazure-vm-1")
    [rule] = nsg["properties"]["securityRules"]
    assert sorted(rule["properties"]["sourceAddressPrefixes"]) == ["198.51.100.7/32", "203.0.113.0/24"]
    assert (rule["properties"]["destinationPortRange"], rule["properties"]["direction"],
            rule["properties"]["access"]) == ("22", "Inbound", "Allow")
    nic = network(azure, preset_group, "networkInterfaces", "nicazure-vm-1")
    assert nic["properties"]["networkSecurityGroup"]["id"].lower() == nsg["id"].lower()
    [ip_configuration] = nic["properties"]["ipConfigurations"]
    assert ip_configuration["properties"]["subnet"]["id"].lower() == subnet["id"].lower()
    assert ip_configuration["properties"]["publicIPAddress"]["id"].lower() == public_ip["id"].lower()
    vm = azure.app.get(preset_vm)["properties"]
    assert vm["hardwareProfile"]["vmSize"] == "Standard_B2s"
    image = vm["storageProfile"]["imageReference"]
    assert ":".join(image[key] for key in ("publisher", "offer", "sku", "version")) == \
        "Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest"
    assert vm["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    [nic_reference] = vm["networkProfile"]["networkInterfaces"]
    assert nic_reference["id"].lower() == nic["id"].lower()
    assert nic_reference["properties"]["deleteOption"] == "Delete"
    assert vm["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"] == [
        {"path": "/home/waldur/.ssh/authorized_keys", "keyData": KEY_1["public_key"]}]
    # what the consumer ordered overrides the defaults
    custom = azure.app.get(custom_vm)
    assert custom["location"] == "northeurope"
    assert custom["properties"]["hardwareProfile"]["vmSize"] == "Standard_B1s"
    assert custom["properties"]["storageProfile"]["imageReference"]["offer"] == "debian-12"
    assert custom["properties"]["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"] == [
        {"path": "/home/ops/.ssh/authorized_keys", "keyData": KEY_2["public_key"]}]
    third = azure.app.get(third_vm)["properties"]
    assert third["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"] == KEY_3["public_key"]

    # -vvv prints module arguments and results: neither secret is among them
    assert_verbose_module_output(run.output)
    assert AZ.CLIENT_SECRET not in run.output
    for machine in (preset_vm, custom_vm, third_vm):
        password = azure.app.vm_admin_password(machine)
        assert password and password not in run.output

    # a second pass has nothing to do and writes nowhere
    waldur_since, azure_since = len(waldur.app.calls), len(azure.app.calls)
    run_pass(ORDER_PASS, config)
    assert waldur_writes(waldur, waldur_since) == [] and arm_writes(azure, azure_since) == []

    # Unchanged limits, changed limits, a termination and a new machine, while the operator
    # switches the offering to a shared group: the dedicated machine is still deleted by its id.
    unchanged_order = update_limits(waldur, preset_uuid, dict(W.AZURE_PLAN_QUOTAS))
    resize_order = update_limits(waldur, custom_uuid, dict(W.AZURE_PLAN_QUOTAS, cpu=4))
    terminate_order = terminate(waldur, third_uuid)
    new_order, new_uuid = order_vm(waldur, "late", ssh_key=KEY_1["uuid"])
    edit_config(config, default_resource_group="shared-rg")

    waldur_since, azure_since = len(waldur.app.calls), len(azure.app.calls)
    check = run_pass(ORDER_PASS, config, check=True, json_log=True)
    assert waldur_writes(waldur, waldur_since) == [] and arm_writes(azure, azure_since) == []
    said = {(line.get("task"), line.get("order")): line for line in log_lines(check) if line.get("order")}
    act, settle = "Carry out the orders on Azure", "Settle the orders in Waldur"
    # orders the filter skips or errs need no machine: no item, settled straight away
    assert (act, unchanged_order) not in said and (act, resize_order) not in said
    assert said[(settle, unchanged_order)]["event"] == "would approve and set done"
    assert said[(act, terminate_order)]["event"].startswith(
        "would delete resource group %s" % dedicated_group(third_uuid, "scratch"))
    assert said[(act, new_order)]["event"].startswith("would create resource group shared-rg")
    assert "virtual machine late-%s" % new_uuid[:8] in said[(act, new_order)]["event"]
    assert said[(settle, resize_order)]["event"] == "would set erred: resizing is not supported on Azure"
    for order in (unchanged_order, resize_order, terminate_order, new_order):
        assert waldur.app.order(order)["state"] == "pending-provider"  # not even approved

    azure_since = len(azure.app.calls)
    run_pass(ORDER_PASS, config)
    assert_done(waldur, unchanged_order)
    assert_erred(waldur, resize_order, "resizing is not supported on Azure")
    assert_done(waldur, terminate_order)
    assert_done(waldur, new_order)
    # neither update touched Azure
    touched = " ".join(call["path"].lower() for call in azure.app.calls[azure_since:])
    assert preset_group not in touched and custom_group not in touched
    assert azure.app.get(custom_vm)["properties"]["hardwareProfile"]["vmSize"] == "Standard_B1s"
    assert not [rid for rid in arm_ids(azure) if dedicated_group(third_uuid, "scratch") in rid]
    assert "resource_groups.delete" in arm_writes(azure, azure_since)
    assert waldur.app.resource(third_uuid)["state"] == "Terminated"
    assert waldur.app.resource(new_uuid)["backend_id"] == vm_id("shared-rg", "late-" + new_uuid[:8])
    assert azure.app.get(preset_vm) is not None


# ---- shared resource group ------------------------------------------------------------------

def test_a_shared_group_holds_one_machine_per_resource_and_loses_only_the_terminated_one(
        tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure, default_resource_group="shared-rg", allowed_ssh_ranges=None)
    orders = [order_vm(waldur, name, ssh_key=KEY_1["uuid"]) for name in ("Web Server", "web--server!", "db")]

    run_pass(ORDER_PASS, config)

    names = {}
    for (order_uuid, resource_uuid), base in zip(orders, ("web-server", "web-server", "db")):
        assert_done(waldur, order_uuid)
        names[resource_uuid] = "%s-%s" % (base, resource_uuid[:8])
        assert waldur.app.resource(resource_uuid)["backend_id"] == vm_id("shared-rg", names[resource_uuid])
        assert azure.app.get(vm_id("shared-rg", names[resource_uuid])) is not None
    assert len(set(names.values())) == 3  # two names that sanitize alike still make two machines
    assert arm_writes(azure).count("vms.put") == 3
    assert [rid for rid in arm_ids(azure) if "/providers/" not in rid] == [arm("shared-rg").lower()]
    # no allowed_ssh_ranges: no NSG at all, no inbound SSH
    assert not [rid for rid in arm_ids(azure) if "/networksecuritygroups/" in rid]
    for name in names.values():
        assert "networkSecurityGroup" not in network(azure, "shared-rg", "networkInterfaces", "nic" + name)["properties"]

    # The operator drops the shared group from the configuration; the machine made in it
    # is still deleted from it, object by object, by reading its id.
    edit_config(config, default_resource_group=None)
    gone_uuid = orders[0][1]
    gone_name = names[gone_uuid]
    neighbours = {rid for rid in arm_ids(azure) if gone_name not in rid}
    terminate_order = terminate(waldur, gone_uuid)
    since = len(azure.app.calls)

    run_pass(ORDER_PASS, config)

    assert_done(waldur, terminate_order)
    left = arm_ids(azure)
    assert not [rid for rid in left if gone_name in rid]
    assert left == neighbours and arm("shared-rg").lower() in left
    assert "resource_groups.delete" not in arm_writes(azure, since)
    # the NIC and OS disk go with the VM (delete option Delete); the rest one by one
    assert {"vms.delete", "public_ips.delete", "subnets.delete", "virtual_networks.delete"} <= \
        set(arm_writes(azure, since))


# ---- faults and kills -----------------------------------------------------------------------

@pytest.mark.parametrize("operation", CHAIN_PUTS)
def test_a_fault_at_any_step_errs_the_order_and_leaves_nothing(tmp_path, waldur_sim, azure_sim, operation):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)  # with allowed_ssh_ranges, so the NSG is a step
    azure.app.add_fault(operation, status=409)

    run_pass(ORDER_PASS, config)

    order = assert_erred(waldur, W.AZURE_ORDER_UUID, "Injected fault on %s" % operation)
    assert "rolled back" in order["error_message"]
    assert azure.app.resources() == []
    # nothing was built for it: Waldur keeps the erred Create's resource, Erred, with no backend id
    assert (waldur.app.resource(W.AZURE_RESOURCE_UUID)["state"], waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"]) \
        == ("Erred", "")


@pytest.mark.parametrize("killed_during", ["nics.put", "vms.put"])
def test_a_pass_killed_mid_chain_is_finished_by_the_next_with_one_chain(
        tmp_path, waldur_sim, azure_sim, killed_during):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    kill_pass_during(azure, config, killed_during)
    assert waldur.app.order(W.AZURE_ORDER_UUID)["state"] == "executing"  # claimed, never settled
    group = dedicated_group(W.AZURE_RESOURCE_UUID, "azure-vm-1")
    machine = vm_id(group, "azure-vm-1")
    password = azure.app.vm_admin_password(machine)
    assert (password is not None) == (killed_during == "vms.put")
    since = len(azure.app.calls)

    run_pass(ORDER_PASS, config)

    assert_done(waldur, W.AZURE_ORDER_UUID)
    assert waldur.app.resource(W.AZURE_RESOURCE_UUID)["backend_id"] == machine
    # the rerun adopts what exists, makes what is missing, and tags the disk the machine made
    assert arm_writes(azure, since) == (["disks.update"] if killed_during == "vms.put" else ["vms.put", "disks.update"])
    # one chain over both passes, each object PUT once (the branches in any order)
    assert sorted(arm_writes(azure)) == sorted(CHAIN_PUTS + ["disks.update"])
    if password is not None:
        assert azure.app.vm_admin_password(machine) == password
    assert all_vms(azure) == [machine]
    assert len(owned(azure, W.AZURE_RESOURCE_UUID)) == 7  # group, network, IP, NSG, NIC, machine, disk


# ---- orders refused before anything is made --------------------------------------------------

def test_orders_that_cannot_be_built_are_erred_before_any_write(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure, default_location=None)
    # The order form has a location field (create_gaps): what is missing is each order's own input.
    order_form_with(waldur, W.AZURE_OFFERING_UUID, "location")
    refused = [
        (order_vm(waldur, "keyless", location="westeurope"), "the order carries no SSH key"),
        (order_vm(waldur, "stranger", location="westeurope", ssh_key="e00000000000000000000000000000ff"),
         "e00000000000000000000000000000ff is not an SSH key of the service provider"),
        (order_vm(waldur, "nowhere", ssh_key=KEY_1["uuid"]),
         "Azure location is set neither on the order nor in backend_settings"),
    ]
    # judged by the catalogue before approval (a key it names is the claim's to read): rejected
    odd_image, _resource = order_vm(waldur, "odd-image", location="westeurope", ssh_key=KEY_1["uuid"],
                                    image="Canonical:ubuntu")

    run_pass(ORDER_PASS, config)

    for (order_uuid, resource_uuid), reason in refused:
        assert_erred(waldur, order_uuid, reason)
        assert (waldur.app.resource(resource_uuid)["state"], waldur.app.resource(resource_uuid)["backend_id"]) == \
            ("Erred", "")
    rejected = waldur.app.order(odd_image)
    assert rejected["state"] == "rejected", rejected
    assert "is not of the form publisher:offer:sku:version" in rejected["provider_rejection_comment"]
    assert not [call for call in azure.app.calls if call["method"] == "PUT"]
    assert arm_writes(azure) == [] and azure.app.resources() == []


# ---- membership: pause, downscale, restore ----------------------------------------------------

def test_membership_pass_deallocates_and_starts_only_when_needed(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, azure=azure)
    machines = {name: azure.app.seed_vm(name) for name in ("paused", "downscaled", "steady")}
    resources = {name: waldur.app.seed_resource(W.AZURE_OFFERING_UUID, name, backend_id=machine)["uuid"]
                 for name, machine in machines.items()}
    set_flag(waldur, resources["paused"], "paused", True)
    set_flag(waldur, resources["downscaled"], "downscaled", True)

    def power(name):
        return waldur.app.resource(resources[name])["backend_metadata"]["virtual_machine"]["power_state"]

    since = len(waldur.app.calls)
    run_pass(MEMBERSHIP_PASS, config)
    assert sorted(arm_writes(azure)) == ["vms.deallocate", "vms.deallocate"]
    assert azure.app.vm_power_state(machines["paused"]) == "deallocated"
    assert azure.app.vm_power_state(machines["downscaled"]) == "deallocated"
    assert azure.app.vm_power_state(machines["steady"]) == "running"
    assert (power("paused"), power("downscaled"), power("steady")) == ("deallocated", "deallocated", "running")
    assert waldur_writes(waldur, since).count("resources.set_backend_metadata") == 3

    # nothing changed: no power action, no metadata written
    waldur_since, azure_since = len(waldur.app.calls), len(azure.app.calls)
    run_pass(MEMBERSHIP_PASS, config)
    assert arm_writes(azure, azure_since) == [] and waldur_writes(waldur, waldur_since) == []

    set_flag(waldur, resources["paused"], "paused", False)
    set_flag(waldur, resources["downscaled"], "downscaled", False)
    waldur_since, azure_since = len(waldur.app.calls), len(azure.app.calls)
    run_pass(MEMBERSHIP_PASS, config)
    assert sorted(arm_writes(azure, azure_since)) == ["vms.start", "vms.start"]
    assert {azure.app.vm_power_state(machine) for machine in machines.values()} == {"running"}
    assert (power("paused"), power("downscaled")) == ("running", "running")
    updated = [call["path"] for call in waldur.app.write_calls(waldur_since)]
    assert sorted(updated) == sorted("/api/marketplace-provider-resources/%s/set_backend_metadata/"
                                     % resources[name] for name in ("paused", "downscaled"))


# ---- report ---------------------------------------------------------------------------------

def test_report_pass_meters_readable_machines_once(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    # a component the offering sells but Azure cannot measure
    call_waldur(waldur, "/api/marketplace-provider-offerings/%s/create_offering_component/" % W.AZURE_OFFERING_UUID,
                {"billing_type": "usage", "name": "GPU", "type": "gpu", "measured_unit": "GPUs"},
                token=W.PROVIDER_TOKEN)
    config = write_config(tmp_path, waldur, azure=azure)
    settings = yaml.safe_load(config.read_text())
    components = settings["offerings"][0]["backend_components"]
    components["ram"].update(measured_unit="GiB", unit_factor=1024)
    components["gpu"] = {"measured_unit": "GPUs", "unit_factor": 1, "accounting_type": "usage", "label": "GPU"}
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    metered_vm = azure.app.seed_vm("metered", size="Standard_B2s")
    vanished_vm = azure.app.seed_vm("vanished", size="Standard_B2s")
    azure.app.remove(vanished_vm)  # deleted in the portal
    metered = waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "metered", backend_id=metered_vm)["uuid"]
    vanished = waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "vanished", backend_id=vanished_vm)["uuid"]

    run_pass(REPORT_PASS, config)

    usages = {usage["type"]: Decimal(usage["usage"]) for usage in waldur.app.usages(metered)}
    # B2s: 2 cores, 4096 MiB = 4 GiB, its 30 GiB OS disk + 8 GiB resource disk = 38912 MiB
    assert usages == {"cpu": Decimal(2), "ram": Decimal(4), "disk": Decimal(38912)}
    assert waldur.app.usages(vanished) == []

    since = len(waldur.app.calls)
    run_pass(REPORT_PASS, config)
    assert waldur_writes(waldur, since) == []


# ---- many machines: subscription-wide paged listings ------------------------------------------

LISTED_READS = ("vms.list_all", "nics.list_all", "public_ips.list_all")
# what a pass over many machines must not send: a read (or a group listing) per machine
PER_MACHINE_READS = ("vms.get", "vms.instance_view", "vms.list", "nics.get", "nics.list", "public_ips.get",
                     "public_ips.list", "resources.list_by_group", "disks.get")


def arm_reads(azure, since):
    return [call["operation"] for call in azure.app.calls[since:] if call["operation"] not in ("openid", "token")]


@pytest.mark.parametrize("pass_playbook", [REPORT_PASS, MEMBERSHIP_PASS], ids=["report", "membership"])
def test_a_steady_pass_over_many_machines_reads_azure_by_pages_and_writes_nothing(
        tmp_path, waldur_sim, azure_sim, pass_playbook):
    """Eleven machines, each in a group of its own, on pages of four: the machines, their power states,
    NICs and public IPs (the membership pass records the addresses; metering needs none of them) are listed
    once each over the subscription, three pages apiece (nextLink followed), whatever the number of groups;
    nothing is read per machine or per group."""
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    azure.app.page_size = 4
    config = write_config(tmp_path, waldur, azure=azure)
    machines = [azure.app.seed_vm("many%d" % index, size="Standard_B2s") for index in range(11)]
    azure.app.set_vm_power_state(machines[3], "deallocated")
    resources = [waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "many%d" % index, backend_id=machine)["uuid"]
                 for index, machine in enumerate(machines)]
    set_flag(waldur, resources[3], "paused", True)
    run_pass(pass_playbook, config)  # the first pass may write (usage, backend metadata)

    waldur_since, azure_since = len(waldur.app.calls), len(azure.app.calls)
    run_pass(pass_playbook, config)
    reads = arm_reads(azure, azure_since)
    assert arm_writes(azure, azure_since) == [] and waldur_writes(waldur, waldur_since) == []
    assert not [operation for operation in reads if operation in PER_MACHINE_READS], reads
    pages = -(-11 // 4)
    address_pages = 0 if pass_playbook == REPORT_PASS else pages
    assert {operation: reads.count(operation) for operation in LISTED_READS} == {
        "vms.list_all": 2 * pages, "nics.list_all": address_pages, "public_ips.list_all": address_pages}
    statuses = [call for call in azure.app.calls[azure_since:] if call["operation"] == "vms.list_all"
                and "statusOnly=true" in call["query"]]
    assert len(statuses) == pages
    assert len(reads) <= 2 * pages + 2 * address_pages + 1  # and, for the report, the sizes of the one location
    if pass_playbook == REPORT_PASS:
        assert reads.count("vm_sizes.list") == 1
        usages = waldur.app.usages(resources[10])
        assert {usage["type"]: Decimal(usage["usage"]) for usage in usages}["cpu"] == Decimal(2)
    else:
        metadata = waldur.app.resource(resources[10])["backend_metadata"]["virtual_machine"]
        assert metadata["power_state"] == "running" and metadata["public_ip"] and metadata["private_ip"]
        assert azure.app.vm_power_state(machines[3]) == "deallocated"
