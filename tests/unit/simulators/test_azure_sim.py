"""The Azure simulator driven by the real azure-identity and azure-mgmt-* SDKs over TLS."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
import requests
from azure.core.exceptions import (ClientAuthenticationError, HttpResponseError,
                                   ResourceExistsError, ResourceNotFoundError)
from azure.identity import ClientSecretCredential
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.compute import models as cm
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.network import models as nm

try:
    from azure.mgmt.resource.resources import ResourceManagementClient
except ImportError:  # azure-mgmt-resource < 26
    from azure.mgmt.resource import ResourceManagementClient

from tests.helpers import REPO
from tests.simulators.azure import presets

SUB = presets.SUBSCRIPTION_ID
LOCATION = "westeurope"
IMAGE = cm.ImageReference(publisher="Canonical", offer="0001-com-ubuntu-server-jammy",
                          sku="22_04-lts-gen2", version="latest")
PASSWORD = "Sim-Passw0rd-4-Tests"
ARM_SCOPE = "https://management.azure.com/.default"


@dataclass
class Azure:
    sim: object
    credential: ClientSecretCredential
    resource: ResourceManagementClient
    network: NetworkManagementClient
    compute: ComputeManagementClient

    @property
    def app(self):
        return self.sim.app

    def token(self) -> str:
        return self.credential.get_token(ARM_SCOPE).token

    def raw(self, method: str, path: str, token: str | None = "auto", **kwargs) -> requests.Response:
        headers = kwargs.pop("headers", {})
        if token == "auto":
            token = self.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return requests.request(method, self.sim.url + path, headers=headers,
                                verify=self.sim.ca_bundle, timeout=10, **kwargs)


def _credential(sim, secret=presets.CLIENT_SECRET):
    return ClientSecretCredential(presets.TENANT_ID, presets.CLIENT_ID, secret, authority=sim.url,
                                  disable_instance_discovery=True, connection_verify=sim.ca_bundle)


@pytest.fixture
def azure(azure_sim):
    credential = _credential(azure_sim)
    options = {"base_url": azure_sim.url, "connection_verify": azure_sim.ca_bundle,
               "polling_interval": 0.05}
    return Azure(azure_sim, credential,
                 ResourceManagementClient(credential, SUB, **options),
                 NetworkManagementClient(credential, SUB, **options),
                 ComputeManagementClient(credential, SUB, **options))


def vm_model(nic_id, name="vm1", password=PASSWORD, size="Standard_B1s", image=IMAGE,
             os_disk_delete="Delete", nic_delete="Delete", user="waldur", custom_data=None):
    return cm.VirtualMachine(
        location=LOCATION,
        hardware_profile=cm.HardwareProfile(vm_size=size),
        storage_profile=cm.StorageProfile(
            image_reference=image,
            os_disk=cm.OSDisk(create_option="FromImage", delete_option=os_disk_delete)),
        os_profile=cm.OSProfile(
            computer_name=name, admin_username=user, admin_password=password, custom_data=custom_data,
            linux_configuration=cm.LinuxConfiguration(
                disable_password_authentication=True,
                ssh=cm.SshConfiguration(public_keys=[cm.SshPublicKey(
                    path=f"/home/{user}/.ssh/authorized_keys", key_data=presets.SEED_SSH_PUBLIC_KEY)]))),
        network_profile=cm.NetworkProfile(network_interfaces=[
            cm.NetworkInterfaceReference(id=nic_id, primary=True, delete_option=nic_delete)]))


CHAIN_OPERATIONS = ["resource_groups.put", "virtual_networks.put", "subnets.put", "public_ips.put",
                    "nsgs.put", "security_rules.put", "nics.put", "vms.put"]


def build_chain(az: Azure, rg="group-1234-web", name="web", vm_kwargs=None) -> dict:
    """The create chain of the Azure backend, step by step; returns what each step made."""
    made = {}
    made["resource_groups.put"] = az.resource.resource_groups.create_or_update(
        rg, {"location": LOCATION})
    made["virtual_networks.put"] = az.network.virtual_networks.begin_create_or_update(
        rg, f"net{name}", nm.VirtualNetwork(
            location=LOCATION, address_space=nm.AddressSpace(address_prefixes=["10.0.0.0/16"]))).result()
    made["subnets.put"] = az.network.subnets.begin_create_or_update(
        rg, f"net{name}", f"subnet{name}", nm.Subnet(address_prefix="10.0.0.0/24")).result()
    made["public_ips.put"] = az.network.public_ip_addresses.begin_create_or_update(
        rg, f"pubip{name}", nm.PublicIPAddress(
            location=LOCATION, sku=nm.PublicIPAddressSku(name="Standard"),
            public_ip_allocation_method="Static", public_ip_address_version="IPv4")).result()
    made["nsgs.put"] = az.network.network_security_groups.begin_create_or_update(
        rg, f"nsg{name}", nm.NetworkSecurityGroup(location=LOCATION)).result()
    made["security_rules.put"] = az.network.security_rules.begin_create_or_update(
        rg, f"nsg{name}", "default-allow-ssh", nm.SecurityRule(
            protocol="Tcp", source_port_range="*", destination_port_range="22",
            source_address_prefixes=["203.0.113.0/24"], destination_address_prefix="*",
            access="Allow", priority=1000, direction="Inbound")).result()
    made["nics.put"] = az.network.network_interfaces.begin_create_or_update(
        rg, f"nic{name}", nm.NetworkInterface(
            location=LOCATION,
            network_security_group=nm.NetworkSecurityGroup(id=made["nsgs.put"].id),
            ip_configurations=[nm.NetworkInterfaceIPConfiguration(
                name=f"ipconf{name}", subnet=nm.Subnet(id=made["subnets.put"].id),
                public_ip_address=nm.PublicIPAddress(id=made["public_ips.put"].id))])).result()
    made["vms.put"] = az.compute.virtual_machines.begin_create_or_update(
        rg, name, vm_model(made["nics.put"].id, name=name, **(vm_kwargs or {}))).result()
    return made


def vm_id(rg="group-1234-web", name="web"):
    return f"/subscriptions/{SUB}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}"


def power(az: Azure, rg="group-1234-web", name="web") -> list[str]:
    view = az.compute.virtual_machines.instance_view(rg, name)
    return [s.code for s in view.statuses if s.code.startswith("PowerState/")]


# ---- Entra ID ---------------------------------------------------------------------------

def test_openid_configuration_points_at_the_simulator(azure):
    response = azure.raw("GET", f"/{presets.TENANT_ID}/v2.0/.well-known/openid-configuration", token=None)
    assert response.status_code == 200
    config = response.json()
    assert config["token_endpoint"] == f"{azure.sim.url}/{presets.TENANT_ID}/oauth2/v2.0/token"
    assert config["authorization_endpoint"].startswith(f"{azure.sim.url}/{presets.TENANT_ID}/")
    unknown = azure.raw("GET", "/no-such-tenant/v2.0/.well-known/openid-configuration", token=None)
    assert unknown.status_code == 400 and "AADSTS90002" in unknown.json()["error_description"]


def test_token_is_issued_and_accepted_by_arm(azure):
    token = azure.token()
    assert token.count(".") == 2
    assert azure.app.calls_of("token") and azure.app.calls_of("openid")
    assert azure.raw("GET", f"/subscriptions/{SUB}?api-version=2022-12-01").json()["tenantId"] == presets.TENANT_ID


def test_wrong_secret_is_a_client_authentication_error(azure_sim):
    bad_secret = "not-the-secret-value"
    credential = _credential(azure_sim, secret=bad_secret)
    with pytest.raises(ClientAuthenticationError) as excinfo:
        credential.get_token(ARM_SCOPE)
    assert "AADSTS7000215" in str(excinfo.value)
    assert bad_secret not in str(excinfo.value)
    client = ResourceManagementClient(credential, SUB, base_url=azure_sim.url,
                                      connection_verify=azure_sim.ca_bundle)
    with pytest.raises(ClientAuthenticationError):
        client.resource_groups.check_existence("anything")
    assert azure_sim.app.calls_of("resource_groups.head") == []  # never reached ARM


@pytest.mark.parametrize("authorization, code", [
    (None, "AuthenticationFailed"),
    ("Bearer not.a-real.token", "InvalidAuthenticationToken"),
    ("Basic abc", "AuthenticationFailedInvalidHeader"),
])
def test_arm_rejects_missing_or_invalid_tokens(azure, authorization, code):
    headers = {"Authorization": authorization} if authorization else {}
    response = azure.raw("GET", f"/subscriptions/{SUB}/resourcegroups?api-version=2025-04-01",
                         token=None, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == code
    assert "Retry-After" not in response.headers


def test_token_faults_use_the_aad_error_shape(azure_sim):
    azure_sim.app.add_fault("token", status=400)
    with pytest.raises(ClientAuthenticationError):
        _credential(azure_sim).get_token(ARM_SCOPE)
    azure_sim.app.add_fault("token", status=503, retry_after=0)
    response = requests.post(f"{azure_sim.url}/{presets.TENANT_ID}/oauth2/v2.0/token", data={},
                             verify=azure_sim.ca_bundle, timeout=5)
    assert response.status_code == 503
    assert response.json()["error"] == "temporarily_unavailable"
    assert "error_codes" in response.json()


def test_revoked_tokens_fail_with_client_authentication_error(azure):
    azure.resource.resource_groups.check_existence("rg")
    azure.app.tokens.revoke_all()
    with pytest.raises(ClientAuthenticationError) as excinfo:
        azure.resource.resource_groups.get("rg")
    assert excinfo.value.error.code == "InvalidAuthenticationToken"


# ---- ARM conventions --------------------------------------------------------------------

def test_missing_api_version_is_400_without_retry_after(azure):
    response = azure.raw("GET", f"/subscriptions/{SUB}/resourcegroups")
    assert response.status_code == 400
    assert response.json() == {"error": {
        "code": "MissingApiVersionParameter",
        "message": "The api-version query parameter (?api-version=) is required for all requests."}}
    assert "Retry-After" not in response.headers


def test_paths_and_ids_are_case_insensitive_and_echoed_canonically(azure):
    azure.resource.resource_groups.create_or_update("Group-Mixed", {"location": "West Europe"})
    assert azure.resource.resource_groups.check_existence("GROUP-MIXED") is True
    assert [c["status"] for c in azure.app.calls_of("resource_groups.head")] == [204]
    response = azure.raw("GET", f"/SUBSCRIPTIONS/{SUB}/RESOURCEGROUPS/group-mixed?api-version=2025-04-01")
    assert response.status_code == 200
    assert response.json()["id"] == f"/subscriptions/{SUB}/resourceGroups/Group-Mixed"
    assert response.json()["location"] == "westeurope"
    azure.network.virtual_networks.begin_create_or_update(
        "GROUP-MIXED", "NetA", nm.VirtualNetwork(
            location=LOCATION, address_space=nm.AddressSpace(address_prefixes=["10.1.0.0/16"]))).result()
    vnet = azure.raw("GET", f"/subscriptions/{SUB}/resourceGroups/group-mixed/PROVIDERS/microsoft.network/"
                            "VIRTUALNETWORKS/neta?api-version=2026-03-01").json()
    assert vnet["id"] == (f"/subscriptions/{SUB}/resourceGroups/Group-Mixed/providers/"
                          "Microsoft.Network/virtualNetworks/NetA")
    assert azure.app.calls_of("virtual_networks.get")[-1]["path"].endswith("VIRTUALNETWORKS/neta")


def test_compute_can_echo_upper_cased_group_like_azure(azure):
    arm_id = azure.app.seed_vm("web", "group-1a2b-web")
    azure.app.compute_id_casing = "upper_rg"
    vm = azure.compute.virtual_machines.get("group-1a2b-web", "web")
    assert vm.id == arm_id.replace("group-1a2b-web", "GROUP-1A2B-WEB")
    assert "/resourceGroups/GROUP-1A2B-WEB/" in vm.storage_profile.os_disk.managed_disk.id
    assert azure.app.vm_power_state(vm.id) == "running"


# ---- the create chain -------------------------------------------------------------------

def test_full_chain_creates_a_connected_vm(azure):
    made = build_chain(azure)
    vm = made["vms.put"]
    assert vm.provisioning_state == "Succeeded"
    assert vm.id == vm_id()
    assert vm.os_profile.admin_password is None
    assert vm.storage_profile.image_reference.exact_version == "22.04.202410020"
    assert vm.storage_profile.os_disk.delete_option == "Delete"

    disk = azure.compute.disks.get("group-1234-web", vm.storage_profile.os_disk.name)
    assert disk.disk_size_gb == 30
    assert disk.managed_by == vm.id
    assert disk.id == vm.storage_profile.os_disk.managed_disk.id

    nic = azure.network.network_interfaces.get("group-1234-web", "nicweb")
    config = nic.ip_configurations[0]
    assert config.private_ip_address == "10.0.0.4"
    assert nic.virtual_machine.id == vm.id
    assert nic.mac_address

    subnet = azure.network.subnets.get("group-1234-web", "netweb", "subnetweb")
    assert [c.id for c in subnet.ip_configurations] == [config.id]
    pip = azure.network.public_ip_addresses.get("group-1234-web", "pubipweb")
    assert pip.ip_address and pip.ip_configuration.id == config.id

    nsg = azure.network.network_security_groups.get("group-1234-web", "nsgweb")
    assert [r.name for r in nsg.security_rules] == ["default-allow-ssh"]
    assert nsg.security_rules[0].source_address_prefixes == ["203.0.113.0/24"]
    assert len(nsg.default_security_rules) == 6
    assert [n.id for n in nsg.network_interfaces] == [nic.id]
    assert vm.id in azure.app.resources()


def test_admin_password_and_custom_data_are_never_returned(azure):
    made = build_chain(azure, vm_kwargs={"custom_data": "I2Nsb3VkLWNvbmZpZwo="})
    raw = azure.raw("GET", vm_id() + "?api-version=2026-04-01")
    assert "adminPassword" not in raw.text and PASSWORD not in raw.text
    assert "customData" not in raw.text
    listed = azure.raw("GET", f"/subscriptions/{SUB}/providers/Microsoft.Compute/virtualMachines"
                              "?api-version=2026-04-01&statusOnly=true")
    assert PASSWORD not in listed.text
    assert PASSWORD not in json.dumps(azure.app.dump_state())
    assert azure.app.vm_admin_password(made["vms.put"].id) == PASSWORD
    assert azure.app.vm_custom_data(made["vms.put"].id) == "I2Nsb3VkLWNvbmZpZwo="


@pytest.mark.parametrize("step", CHAIN_OPERATIONS)
def test_fault_at_each_chain_step_stops_the_chain_there(azure, step):
    azure.app.add_fault(step, status=409)
    with pytest.raises(HttpResponseError) as excinfo:
        build_chain(azure)
    assert excinfo.value.status_code == 409
    assert excinfo.value.error.code == "Conflict"
    index = CHAIN_OPERATIONS.index(step)
    for earlier in CHAIN_OPERATIONS[:index]:
        assert [c["status"] for c in azure.app.calls_of(earlier)] in ([200], [201])
    for later in CHAIN_OPERATIONS[index + 1:]:
        assert azure.app.calls_of(later) == []


def test_server_error_is_retried_by_the_sdk(azure):
    azure.resource.resource_groups.create_or_update("rg", {"location": LOCATION})
    azure.app.add_fault("resource_groups.get", status=503)
    assert azure.resource.resource_groups.get("rg").name == "rg"
    assert [c["status"] for c in azure.app.calls_of("resource_groups.get")] == [503, 200]


def test_throttling_429_with_integer_retry_after_is_retried_transparently(azure):
    arm_id = azure.app.seed_vm("web", "group-1a2b-web")
    azure.app.add_fault("vms.get", status=429, retry_after=1)
    started = time.monotonic()
    assert azure.compute.virtual_machines.get("group-1a2b-web", "web").id == arm_id
    assert time.monotonic() - started >= 0.9
    assert [c["status"] for c in azure.app.calls_of("vms.get")] == [429, 200]
    throttled = azure.app.add_fault("resource_groups.get", status=429, retry_after=2)
    response = azure.raw("GET", f"/subscriptions/{SUB}/resourcegroups/group-1a2b-web?api-version=2025-04-01")
    assert throttled.fired == 1 and response.status_code == 429
    assert response.headers["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "SubscriptionRequestsThrottled"


def test_vm_validation_errors(azure):
    made = build_chain(azure)
    nic_id = made["nics.put"].id
    vms = azure.compute.virtual_machines
    with pytest.raises(HttpResponseError) as excinfo:
        vms.begin_create_or_update("group-1234-web", "vm2", vm_model(nic_id, size="Standard_Nope")).result()
    assert excinfo.value.status_code == 400 and excinfo.value.error.code == "InvalidParameter"
    three_parts = cm.ImageReference(publisher="Canonical", offer="ubuntu-24_04-lts", sku="server")
    with pytest.raises(HttpResponseError) as excinfo:
        vms.begin_create_or_update("group-1234-web", "vm2", vm_model(nic_id, image=three_parts)).result()
    assert excinfo.value.error.code == "InvalidParameter"
    unknown = cm.ImageReference(publisher="Canonical", offer="no-such-offer", sku="1", version="latest")
    with pytest.raises(ResourceNotFoundError) as excinfo:
        vms.begin_create_or_update("group-1234-web", "vm2", vm_model(nic_id, image=unknown)).result()
    assert excinfo.value.error.code == "PlatformImageNotFound"
    with pytest.raises(ResourceNotFoundError) as excinfo:
        vms.begin_create_or_update("group-1234-web", "vm2", vm_model(nic_id + "-missing")).result()
    assert excinfo.value.error.code == "NotFound"
    with pytest.raises(HttpResponseError) as excinfo:  # the NIC already belongs to "web"
        vms.begin_create_or_update("group-1234-web", "vm2", vm_model(nic_id)).result()
    assert excinfo.value.error.code == "NicInUse"
    with pytest.raises(HttpResponseError) as excinfo:
        vms.begin_create_or_update("group-1234-web", "vm2", vm_model(nic_id, user="root")).result()
    assert excinfo.value.error.code == "InvalidParameter"
    with pytest.raises(HttpResponseError) as excinfo:
        vms.begin_create_or_update("group-1234-web", "vm2", vm_model(nic_id, custom_data="not base64!")).result()
    assert excinfo.value.error.code == "InvalidParameter" and excinfo.value.error.target == "customData"
    assert [r for r in azure.app.resources() if "/virtualMachines/vm2" in r] == []


def test_os_profile_change_is_refused_but_a_get_put_round_trip_is_not(azure):
    made = build_chain(azure)
    vms = azure.compute.virtual_machines
    with pytest.raises(ResourceExistsError) as excinfo:
        vms.begin_create_or_update("group-1234-web", "web", vm_model(
            made["nics.put"].id, name="web", password="An0ther-Passw0rd")).result()
    assert excinfo.value.status_code == 409
    assert excinfo.value.error.code == "PropertyChangeNotAllowed"
    assert excinfo.value.error.message == "Changing property 'osProfile' is not allowed."
    with pytest.raises(ResourceExistsError):
        vms.begin_create_or_update("group-1234-web", "web", vm_model(
            made["nics.put"].id, name="web", user="someoneelse")).result()
    assert azure.app.vm_admin_password(made["vms.put"].id) == PASSWORD

    current = vms.get("group-1234-web", "web")
    current.hardware_profile.vm_size = "Standard_B2s"
    updated = vms.begin_create_or_update("group-1234-web", "web", current).result()
    assert updated.hardware_profile.vm_size == "Standard_B2s"
    assert updated.vm_id == made["vms.put"].vm_id
    same_again = vms.begin_create_or_update("group-1234-web", "web", vm_model(made["nics.put"].id, name="web"))
    assert same_again.result().provisioning_state == "Succeeded"


# ---- power --------------------------------------------------------------------------------

def test_power_actions_and_instance_view(azure):
    build_chain(azure)
    vms = azure.compute.virtual_machines
    assert power(azure) == ["PowerState/running"]
    view = vms.get("group-1234-web", "web", expand="instanceView").instance_view
    assert [s.code for s in view.statuses] == ["ProvisioningState/succeeded", "PowerState/running"]
    assert view.computer_name == "web" and view.os_name == "ubuntu"
    vms.begin_deallocate("group-1234-web", "web").result()
    assert power(azure) == ["PowerState/deallocated"]
    assert azure.compute.disks.get("group-1234-web", vms.get("group-1234-web", "web")
                                   .storage_profile.os_disk.name).disk_state == "Reserved"
    with pytest.raises(ResourceExistsError) as excinfo:
        vms.begin_power_off("group-1234-web", "web").result()
    assert excinfo.value.error.code == "OperationNotAllowed"
    vms.begin_start("group-1234-web", "web").result()
    assert power(azure) == ["PowerState/running"]
    vms.begin_power_off("group-1234-web", "web").result()
    assert azure.app.vm_power_state(vm_id()) == "stopped"
    vms.begin_restart("group-1234-web", "web").result()
    assert azure.app.vm_power_state(vm_id()) == "running"
    assert [len(azure.app.calls_of(op)) for op in
            ("vms.deallocate", "vms.start", "vms.power_off", "vms.restart")] == [1, 1, 2, 1]


# ---- deletes --------------------------------------------------------------------------------

def test_vm_delete_cascades_disk_and_nic_with_delete_option(azure):
    made = build_chain(azure)
    disk_name = made["vms.put"].storage_profile.os_disk.name
    azure.compute.virtual_machines.begin_delete("group-1234-web", "web").result()
    with pytest.raises(ResourceNotFoundError):
        azure.compute.disks.get("group-1234-web", disk_name)
    with pytest.raises(ResourceNotFoundError):
        azure.network.network_interfaces.get("group-1234-web", "nicweb")
    # The public IP and the rest of the network stay; the IP is free again.
    assert azure.network.public_ip_addresses.get("group-1234-web", "pubipweb").ip_configuration is None
    assert azure.network.subnets.get("group-1234-web", "netweb", "subnetweb").ip_configurations is None
    # Deleting what is gone succeeds.
    azure.compute.virtual_machines.begin_delete("group-1234-web", "web").result()


def test_vm_delete_with_detach_leaves_disk_and_nic(azure):
    made = build_chain(azure, vm_kwargs={"os_disk_delete": "Detach", "nic_delete": "Detach"})
    disk_name = made["vms.put"].storage_profile.os_disk.name
    azure.compute.virtual_machines.begin_delete("group-1234-web", "web").result()
    disk = azure.compute.disks.get("group-1234-web", disk_name)
    assert disk.managed_by is None and disk.disk_state == "Unattached"
    nic = azure.network.network_interfaces.get("group-1234-web", "nicweb")
    assert nic.virtual_machine is None
    azure.network.network_interfaces.begin_delete("group-1234-web", "nicweb").result()
    azure.compute.disks.begin_delete("group-1234-web", disk_name).result()
    assert not [r for r in azure.app.resources() if "/disks/" in r or "/networkInterfaces/" in r]


def test_nic_attached_to_a_vm_cannot_be_deleted(azure):
    build_chain(azure)
    with pytest.raises(HttpResponseError) as excinfo:
        azure.network.network_interfaces.begin_delete("group-1234-web", "nicweb").result()
    assert excinfo.value.status_code == 400
    assert excinfo.value.error.code == "NicInUse"
    with pytest.raises(HttpResponseError) as excinfo:
        azure.network.public_ip_addresses.begin_delete("group-1234-web", "pubipweb").result()
    assert excinfo.value.error.code == "PublicIPAddressCannotBeDeleted"
    with pytest.raises(HttpResponseError) as excinfo:
        azure.network.network_security_groups.begin_delete("group-1234-web", "nsgweb").result()
    assert excinfo.value.error.code == "InUseNetworkSecurityGroupCannotBeDeleted"
    assert azure.network.network_interfaces.get("group-1234-web", "nicweb").provisioning_state == "Succeeded"


def test_resource_group_delete_cascades_and_conflicts_while_deleting(azure):
    build_chain(azure)
    azure.app.lro_mode, azure.app.lro_seconds, azure.app.retry_after = "realistic", 0.5, 0
    poller = azure.resource.resource_groups.begin_delete("group-1234-web")
    assert azure.resource.resource_groups.get("group-1234-web").properties.provisioning_state == "Deleting"
    with pytest.raises(ResourceExistsError) as excinfo:
        azure.network.virtual_networks.begin_create_or_update(
            "group-1234-web", "other", nm.VirtualNetwork(
                location=LOCATION, address_space=nm.AddressSpace(address_prefixes=["10.9.0.0/16"]))).result()
    assert excinfo.value.error.code == "ResourceGroupBeingDeleted"
    poller.result()
    assert azure.app.resources() == []
    assert azure.resource.resource_groups.check_existence("group-1234-web") is False
    with pytest.raises(ResourceNotFoundError) as excinfo:
        azure.compute.virtual_machines.get("group-1234-web", "web")
    assert excinfo.value.error.code == "ResourceGroupNotFound"
    delete = azure.app.calls_of("resource_groups.delete")[0]
    assert delete["status"] == 202 and azure.app.calls_of("operation_results.get")


def test_missing_group_is_resource_group_not_found_for_everything_under_it(azure):
    with pytest.raises(ResourceNotFoundError) as excinfo:
        azure.resource.resource_groups.get("nope")
    assert excinfo.value.error.code == "ResourceGroupNotFound"
    with pytest.raises(ResourceNotFoundError) as excinfo:
        azure.network.network_security_groups.begin_create_or_update(
            "nope", "nsg", nm.NetworkSecurityGroup(location=LOCATION)).result()
    assert excinfo.value.error.code == "ResourceGroupNotFound"
    with pytest.raises(ResourceNotFoundError) as excinfo:
        azure.compute.virtual_machines.begin_delete("nope", "vm").result()
    assert excinfo.value.error.code == "ResourceGroupNotFound"
    assert azure.resource.resource_groups.check_existence("nope") is False


# ---- network rules --------------------------------------------------------------------------

def test_standard_public_ip_must_be_static(azure):
    azure.resource.resource_groups.create_or_update("rg", {"location": LOCATION})
    with pytest.raises(HttpResponseError) as excinfo:
        azure.network.public_ip_addresses.begin_create_or_update("rg", "pip", nm.PublicIPAddress(
            location=LOCATION, sku=nm.PublicIPAddressSku(name="Standard"),
            public_ip_allocation_method="Dynamic")).result()
    assert excinfo.value.status_code == 400
    assert excinfo.value.error.code == "StandardSkuPublicIPAddressesMustBeStatic"
    assert "Retry-After" not in excinfo.value.response.headers
    assert not [r for r in azure.app.resources() if "publicIPAddresses" in r]


def test_vnet_put_replaces_unused_subnets_but_not_used_ones(azure):
    build_chain(azure)
    vnets = azure.network.virtual_networks
    spare = azure.network.subnets.begin_create_or_update(
        "group-1234-web", "netweb", "spare", nm.Subnet(address_prefix="10.0.1.0/24")).result()
    assert spare.id.endswith("/subnets/spare")
    bare = nm.VirtualNetwork(location=LOCATION, address_space=nm.AddressSpace(address_prefixes=["10.0.0.0/16"]))
    with pytest.raises(HttpResponseError) as excinfo:
        vnets.begin_create_or_update("group-1234-web", "netweb", bare).result()
    assert excinfo.value.status_code == 400
    assert excinfo.value.error.code == "InUseSubnetCannotBeDeleted"
    assert len(vnets.get("group-1234-web", "netweb").subnets) == 2

    replaced = vnets.begin_create_or_update("group-1234-web", "netweb", nm.VirtualNetwork(
        location=LOCATION, address_space=nm.AddressSpace(address_prefixes=["10.0.0.0/16"]),
        subnets=[nm.Subnet(name="subnetweb", address_prefix="10.0.0.0/24"),
                 nm.Subnet(name="fresh", address_prefix="10.0.2.0/24")])).result()
    assert sorted(s.name for s in replaced.subnets) == ["fresh", "subnetweb"]
    used = next(s for s in replaced.subnets if s.name == "subnetweb")
    assert used.ip_configurations  # still serving the NIC
    with pytest.raises(HttpResponseError) as excinfo:
        azure.network.subnets.begin_create_or_update(
            "group-1234-web", "netweb", "outside", nm.Subnet(address_prefix="10.8.0.0/24")).result()
    assert excinfo.value.error.code == "NetcfgSubnetRangeOutsideVnet"


def test_nsg_put_with_rules_replaces_child_rules(azure):
    azure.resource.resource_groups.create_or_update("rg", {"location": LOCATION})
    rule = nm.SecurityRule(name="a", protocol="Tcp", source_address_prefix="*", destination_address_prefix="*",
                           destination_port_range="22", access="Allow", priority=100, direction="Inbound")
    nsg = azure.network.network_security_groups.begin_create_or_update(
        "rg", "nsg", nm.NetworkSecurityGroup(location=LOCATION, security_rules=[rule])).result()
    assert [r.name for r in nsg.security_rules] == ["a"]
    assert azure.network.security_rules.get("rg", "nsg", "a").priority == 100
    with pytest.raises(HttpResponseError) as excinfo:
        azure.network.security_rules.begin_create_or_update("rg", "nsg", "b", nm.SecurityRule(
            protocol="Tcp", source_address_prefix="*", destination_address_prefix="*",
            destination_port_range="80", access="Allow", priority=100, direction="Inbound")).result()
    assert excinfo.value.error.code == "SecurityRuleConflict"
    azure.network.network_security_groups.begin_create_or_update(
        "rg", "nsg", nm.NetworkSecurityGroup(location=LOCATION, security_rules=[])).result()
    assert list(azure.network.security_rules.list("rg", "nsg")) == []


# ---- LROs -----------------------------------------------------------------------------------

def test_realistic_lro_mode_polls_with_integer_retry_after(azure):
    made = build_chain(azure)
    azure.network.network_interfaces.begin_create_or_update("group-1234-web", "nic2", nm.NetworkInterface(
        location=LOCATION, ip_configurations=[nm.NetworkInterfaceIPConfiguration(
            name="ipconf2", subnet=nm.Subnet(id=made["subnets.put"].id))])).result()
    nic2 = azure.network.network_interfaces.get("group-1234-web", "nic2")
    assert nic2.ip_configurations[0].private_ip_address == "10.0.0.5"
    azure.app.lro_mode, azure.app.lro_seconds, azure.app.retry_after = "realistic", 1, 1
    since = len(azure.app.calls)
    poller = azure.compute.virtual_machines.begin_create_or_update("group-1234-web", "vm2", vm_model(nic2.id, "vm2"))
    during = azure.app.get(vm_id(name="vm2"))
    assert during["properties"]["provisioningState"] == "Creating"
    assert azure.app.vm_power_state(vm_id(name="vm2")) == "starting"
    assert poller.result().provisioning_state == "Succeeded"
    assert azure.app.vm_power_state(vm_id(name="vm2")) == "running"
    ops = [c["operation"] for c in azure.app.calls[since:]]
    assert ops[0] == "vms.put" and "operations.get" in ops and ops[-1] == "vms.get"
    assert azure.app.calls[since]["status"] == 201

    response = azure.raw("POST", vm_id(name="vm2") + "/deallocate?api-version=2026-04-01")
    assert response.status_code == 202
    assert response.headers["Retry-After"] == "1"
    async_url = response.headers["Azure-AsyncOperation"]
    assert async_url.startswith(azure.sim.url + f"/subscriptions/{SUB}/providers/Microsoft.Compute/locations/")
    assert "monitor=true" in response.headers["Location"]
    status = requests.get(async_url, headers={"Authorization": f"Bearer {azure.token()}"},
                          verify=azure.sim.ca_bundle, timeout=5)
    assert status.json()["status"] == "InProgress" and status.headers["Retry-After"] == "1"
    time.sleep(1.05)
    assert requests.get(async_url, headers={"Authorization": f"Bearer {azure.token()}"},
                        verify=azure.sim.ca_bundle, timeout=5).json()["status"] == "Succeeded"
    assert azure.app.vm_power_state(vm_id(name="vm2")) == "deallocated"


def test_realistic_deletes_poll_until_gone(azure):
    made = build_chain(azure, vm_kwargs={"os_disk_delete": "Detach", "nic_delete": "Detach"})
    disk_name = made["vms.put"].storage_profile.os_disk.name
    azure.app.lro_mode, azure.app.lro_seconds, azure.app.retry_after = "realistic", 0.3, 0
    poller = azure.compute.virtual_machines.begin_delete("group-1234-web", "web")
    assert azure.app.get(vm_id())["properties"]["provisioningState"] == "Deleting"
    with pytest.raises(HttpResponseError) as excinfo:  # still attached until the delete ends
        azure.network.network_interfaces.begin_delete("group-1234-web", "nicweb").result()
    assert excinfo.value.error.code == "NicInUse"
    poller.result()
    azure.network.network_interfaces.begin_delete("group-1234-web", "nicweb").result()
    azure.network.public_ip_addresses.begin_delete("group-1234-web", "pubipweb").result()
    azure.compute.disks.begin_delete("group-1234-web", disk_name).result()
    left = [r.rsplit("/", 2)[-2] for r in azure.app.resources()]
    assert sorted(left) == ["networkSecurityGroups", "resourceGroups", "securityRules", "subnets",
                            "virtualNetworks"]
    operations = {c["operation"] for c in azure.app.calls}
    assert {"operations.get", "vms.delete", "nics.delete", "public_ips.delete", "disks.delete"} <= operations
    assert {c["status"] for c in azure.app.calls_of("nics.delete")} == {400, 202}


def test_failed_lro_raises_from_result(azure):
    made = build_chain(azure)
    azure.app.retry_after = 0  # Retry-After: 0 lets the client's polling_interval decide
    azure.app.fail_lro("vms.put", "AllocationFailed", "Allocation failed. Try another size.")
    nic2 = azure.network.network_interfaces.begin_create_or_update("group-1234-web", "nic2", nm.NetworkInterface(
        location=LOCATION, ip_configurations=[nm.NetworkInterfaceIPConfiguration(
            name="ipconf2", subnet=nm.Subnet(id=made["subnets.put"].id))])).result()
    with pytest.raises(HttpResponseError) as excinfo:
        azure.compute.virtual_machines.begin_create_or_update(
            "group-1234-web", "vm2", vm_model(nic2.id, "vm2")).result()
    assert excinfo.value.error.code == "AllocationFailed"
    failed = azure.compute.virtual_machines.get("group-1234-web", "vm2", expand="instanceView")
    assert failed.provisioning_state == "Failed"
    assert failed.instance_view.statuses[0].code == "ProvisioningState/failed/AllocationFailed"

    azure.app.fail_lro("resource_groups.delete", "Conflict", "A dependent operation failed.")
    with pytest.raises(HttpResponseError) as excinfo:
        azure.resource.resource_groups.begin_delete("group-1234-web").result()
    assert excinfo.value.error.code == "Conflict"
    assert azure.resource.resource_groups.get("group-1234-web").properties.provisioning_state == "Succeeded"
    azure.resource.resource_groups.begin_delete("group-1234-web").result()  # the failure was one-shot
    assert azure.app.resources() == []


def test_instant_mode_answers_without_polling_headers(azure):
    azure.resource.resource_groups.create_or_update("rg", {"location": LOCATION})
    response = azure.raw("PUT", f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network/"
                                "networkSecurityGroups/nsg?api-version=2026-03-01",
                         json={"location": LOCATION})
    assert response.status_code == 201
    assert response.json()["properties"]["provisioningState"] == "Succeeded"
    assert "Azure-AsyncOperation" not in response.headers and "Retry-After" not in response.headers
    deleted = azure.raw("DELETE", f"/subscriptions/{SUB}/resourcegroups/rg?api-version=2025-04-01")
    assert deleted.status_code == 200 and "Location" not in deleted.headers
    assert azure.app.resources() == []


# ---- reads ------------------------------------------------------------------------------------

def test_vm_sizes_skus_and_disks(azure):
    sizes = {s.name: s for s in azure.compute.virtual_machine_sizes.list(LOCATION)}
    b1s, b2s = sizes["Standard_B1s"], sizes["Standard_B2s"]
    assert (b1s.number_of_cores, b1s.memory_in_mb, b1s.os_disk_size_in_mb, b1s.resource_disk_size_in_mb) \
        == (1, 1024, 1047552, 4096)
    assert (b2s.number_of_cores, b2s.memory_in_mb, b2s.os_disk_size_in_mb, b2s.resource_disk_size_in_mb) \
        == (2, 4096, 1047552, 8192)
    assert "Standard_D2s_v3" in sizes
    assert "Standard_D2s_v5" not in {s.name for s in azure.compute.virtual_machine_sizes.list("northeurope")}
    with pytest.raises(HttpResponseError) as excinfo:
        list(azure.compute.virtual_machine_sizes.list("atlantis"))
    assert excinfo.value.error.code == "NoRegisteredProviderFound"

    skus = [s for s in azure.compute.resource_skus.list(filter=f"location eq '{LOCATION}'")
            if s.resource_type == "virtualMachines"]
    b2s_sku = next(s for s in skus if s.name == "Standard_B2s")
    capabilities = {c.name: c.value for c in b2s_sku.capabilities}
    assert capabilities["vCPUs"] == "2" and capabilities["MemoryGB"] == "4"
    assert capabilities["MaxResourceVolumeMB"] == "8192"
    assert b2s_sku.locations == [LOCATION] and b2s_sku.location_info[0].zones == ["1", "2", "3"]

    arm_id = azure.app.seed_vm("web", "group-1a2b-web", size="Standard_B2s")
    vm = azure.compute.virtual_machines.get("group-1a2b-web", "web")
    assert vm.id == arm_id and vm.storage_profile.os_disk.disk_size_gb == 30
    disk = azure.compute.disks.get("group-1a2b-web", vm.storage_profile.os_disk.name)
    assert (disk.disk_size_gb, disk.managed_by, disk.os_type) == (30, arm_id, "Linux")
    assert [d.name for d in azure.compute.disks.list_by_resource_group("group-1a2b-web")] == [disk.name]
    assert "Standard_B1s" in {s.name for s in azure.compute.virtual_machines.list_available_sizes(
        "group-1a2b-web", "web")}


def test_subscription_wide_vm_listing_is_paged(azure):
    azure.app.page_size = 2
    ids = [azure.app.seed_vm(f"vm{i}", f"group-000{i}-vm{i}", power_state=state)
           for i, state in enumerate(["running", "deallocated", "stopped"])]
    listed = list(azure.compute.virtual_machines.list_all())
    assert [v.id for v in listed] == ids
    assert len(azure.app.calls_of("vms.list_all")) == 2
    assert "$skiptoken=2" in azure.app.calls_of("vms.list_all")[1]["query"]
    assert all(v.instance_view is None for v in listed)
    statuses = list(azure.compute.virtual_machines.list_all(status_only="true"))
    assert [[s.code for s in v.instance_view.statuses if s.code.startswith("PowerState/")]
            for v in statuses] == [["PowerState/running"], ["PowerState/deallocated"], ["PowerState/stopped"]]
    with pytest.raises(HttpResponseError) as excinfo:
        list(azure.compute.virtual_machines.list_all(expand="instanceView"))
    assert excinfo.value.error.code == "InvalidParameter"
    in_group = list(azure.compute.virtual_machines.list("group-0001-vm1", expand="instanceView"))
    assert [v.id for v in in_group] == [ids[1]] and in_group[0].instance_view.statuses


def test_subscription_wide_nic_public_ip_and_disk_listings_follow_next_link(azure):
    """ARM's List All of NICs, public IPs and disks: the whole subscription across groups, paged
    with an absolute nextLink the SDK follows; every object once, on ceil(n / page size) pages."""
    azure.app.page_size = 3
    ids = [azure.app.seed_vm(f"vm{i}", f"group-00{i:02d}-vm{i}") for i in range(7)]
    azure.app.seed_vm("nopip", "group-0099-nopip", public_ip=False)
    since = len(azure.app.calls)
    nics = list(azure.network.network_interfaces.list_all())
    public_ips = list(azure.network.public_ip_addresses.list_all())
    disks = list(azure.compute.disks.list())
    assert sorted(n.name for n in nics) == sorted([f"nicvm{i}" for i in range(7)] + ["nicnopip"])
    assert len({n.id.lower() for n in nics}) == 8
    assert sorted(p.name for p in public_ips) == sorted(f"pubipvm{i}" for i in range(7))
    assert all(p.ip_address for p in public_ips)
    assert sorted(d.managed_by.lower() for d in disks) == sorted(
        [i.lower() for i in ids] + [vm_id("group-0099-nopip", "nopip").lower()])
    # each NIC's primary configuration names the public IP of its machine, which the listing holds
    by_id = {p.id.lower(): p for p in public_ips}
    for nic in nics:
        reference = nic.ip_configurations[0].public_ip_address
        assert (reference is None) == (nic.name == "nicnopip")
        if reference is not None:
            assert reference.id.lower() in by_id and nic.ip_configurations[0].private_ip_address
    calls = azure.app.calls[since:]
    listings = ("nics.list_all", "public_ips.list_all", "disks.list_all")
    pages = {op: [c for c in calls if c["operation"] == op] for op in listings}
    assert {op: len(found) for op, found in pages.items()} == {
        "nics.list_all": 3, "public_ips.list_all": 3, "disks.list_all": 3}
    for found in pages.values():
        assert "$skiptoken" not in found[0]["query"]
        assert ["$skiptoken=%d" % (3 * n) in call["query"] for n, call in enumerate(found[1:], 1)] == [True, True]
        assert all("api-version=" in call["query"] for call in found)
    assert not [c for c in calls if c["operation"] in ("nics.list", "public_ips.list", "disks.list")]
    assert [c["path"] for c in pages["nics.list_all"]] == [
        f"/subscriptions/{SUB}/providers/Microsoft.Network/networkInterfaces"] * 3
    # a page is one page: an absolute nextLink while more remain, none on the last
    token = azure.token()
    first = azure.raw("GET", f"/subscriptions/{SUB}/providers/Microsoft.Network/publicIPAddresses"
                             "?api-version=2024-05-01", token=token).json()
    assert len(first["value"]) == 3 and first["nextLink"].startswith(azure.sim.url + "/subscriptions/")
    last = azure.raw("GET", first["nextLink"].replace(azure.sim.url, "").replace("$skiptoken=3", "$skiptoken=6"),
                     token=token).json()
    assert len(last["value"]) == 1 and "nextLink" not in last


# ---- tags ---------------------------------------------------------------------------------------

OWNER = {"waldur-resource-uuid": "1234abcd5678ef901234abcd5678ef90"}


def test_tags_are_stored_returned_and_listed_by_tag(azure):
    azure.resource.resource_groups.create_or_update("tagged", {"location": LOCATION, "tags": OWNER})
    azure.resource.resource_groups.create_or_update("plain", {"location": LOCATION})
    vnet = azure.network.virtual_networks.begin_create_or_update("tagged", "netweb", nm.VirtualNetwork(
        location=LOCATION, tags=OWNER, address_space=nm.AddressSpace(address_prefixes=["10.0.0.0/16"]))).result()
    assert vnet.tags == OWNER
    azure.network.subnets.begin_create_or_update("tagged", "netweb", "subnetweb",
                                                 nm.Subnet(address_prefix="10.0.0.0/24")).result()
    azure.network.public_ip_addresses.begin_create_or_update("plain", "pubip", nm.PublicIPAddress(
        location=LOCATION, sku=nm.PublicIPAddressSku(name="Standard"), public_ip_allocation_method="Static",
        tags={"waldur-resource-uuid": "someone-else"})).result()
    assert azure.resource.resource_groups.get("tagged").tags == OWNER

    tag_filter = "tagName eq 'waldur-resource-uuid' and tagValue eq '%s'" % OWNER["waldur-resource-uuid"]
    groups = list(azure.resource.resource_groups.list(filter=tag_filter))
    assert [(g.name, g.tags) for g in groups] == [("tagged", OWNER)]
    # tag names compare case-insensitively
    assert [g.name for g in azure.resource.resource_groups.list(filter=tag_filter.replace(
        "waldur-resource-uuid", "WALDUR-Resource-UUID"))] == ["tagged"]
    assert len(list(azure.resource.resource_groups.list())) == 2

    # a resource list by tag: top-level objects only (the subnet is part of its network), tags left out
    listed = list(azure.resource.resources.list(filter=tag_filter))
    assert [(r.name, r.type, r.tags) for r in listed] == [("netweb", "Microsoft.Network/virtualNetworks", None)]
    assert [r.name for r in azure.resource.resources.list(filter="tagName eq 'waldur-resource-uuid'")] == [
        "netweb", "pubip"]
    assert [r.name for r in azure.resource.resources.list_by_resource_group("plain")] == ["pubip"]
    assert list(azure.resource.resources.list_by_resource_group("plain", filter=tag_filter)) == []
    everything = {r.name: r for r in azure.resource.resources.list()}
    assert everything["pubip"].tags == {"waldur-resource-uuid": "someone-else"}
    with pytest.raises(ResourceNotFoundError):
        list(azure.resource.resources.list_by_resource_group("nowhere", filter=tag_filter))
    with pytest.raises(HttpResponseError) as excinfo:
        list(azure.resource.resource_groups.list(filter="name eq 'tagged'"))
    assert excinfo.value.status_code == 400

    # a PUT replaces the tags
    azure.resource.resource_groups.create_or_update("tagged", {"location": LOCATION})
    assert azure.resource.resource_groups.get("tagged").tags is None


def test_vm_tags_are_not_copied_to_its_disk_but_a_disk_patch_sets_them(azure):
    build_chain(azure, vm_kwargs={})
    vms = azure.compute.virtual_machines
    model = vms.get("group-1234-web", "web")
    model.tags = OWNER
    model.os_profile.admin_password = None
    vms.begin_create_or_update("group-1234-web", "web", model).result()
    vm = vms.get("group-1234-web", "web")
    assert vm.tags == OWNER
    disk_name = vm.storage_profile.os_disk.name
    assert azure.compute.disks.get("group-1234-web", disk_name).tags is None  # ARM does not copy them
    [disk] = [r for r in azure.resource.resources.list_by_resource_group("group-1234-web")
              if r.type == "Microsoft.Compute/disks"]
    assert disk.managed_by == vm.id
    updated = azure.compute.disks.begin_update("group-1234-web", disk_name, {"tags": OWNER}).result()
    assert updated.tags == OWNER and azure.compute.disks.get("group-1234-web", disk_name).tags == OWNER
    with pytest.raises(HttpResponseError) as excinfo:
        azure.compute.disks.begin_update("group-1234-web", disk_name, {"properties": {"diskSizeGB": 64}}).result()
    assert excinfo.value.status_code == 400


def test_slow_operations_stay_in_progress_until_finished(azure):
    azure.app.slow_operations = {"virtual_networks.put": 600}
    azure.resource.resource_groups.create_or_update("rg", {"location": LOCATION})
    poller = azure.network.virtual_networks.begin_create_or_update("rg", "net", nm.VirtualNetwork(
        location=LOCATION, address_space=nm.AddressSpace(address_prefixes=["10.0.0.0/16"])))
    poller.wait(0.3)
    assert not poller.done()
    assert azure.network.virtual_networks.get("rg", "net").provisioning_state == "Updating"
    # other operations are not slowed down
    azure.network.network_security_groups.begin_create_or_update(
        "rg", "nsg", nm.NetworkSecurityGroup(location=LOCATION)).result()
    assert azure.app.finish_operations() == 1
    assert poller.result(5).provisioning_state == "Succeeded"
    assert azure.app.current_options()["slow_operations"] == {"virtual_networks.put": 600.0}
    azure.app.reset()
    assert azure.app.slow_operations == {}


# ---- seeds, control API, CLI --------------------------------------------------------------------

def test_mastermind_preset_and_seed_helpers(azure):
    azure.app.reset("mastermind")
    web, db = presets.MASTERMIND_VM_IDS
    assert azure.app.vm_power_state(web) == "running"
    assert azure.app.vm_power_state(db) == "deallocated"
    nsg = azure.network.network_security_groups.get("group-1a2b-web", "NSGweb")
    assert nsg.network_interfaces[0].id.endswith("/networkInterfaces/nicweb")
    assert azure.app.get(web)["properties"]["storageProfile"]["osDisk"]["deleteOption"] == "Detach"
    azure.resource.resource_groups.begin_delete("group-1a2b-web").result()
    assert not [r for r in azure.app.resources() if "group-1a2b-web" in r]
    assert azure.app.get(db) is not None
    azure.app.set_vm_power_state(db, "running")
    assert power(azure, "group-3c4d-db", "db") == ["PowerState/running"]
    azure.app.remove(db)
    with pytest.raises(ResourceNotFoundError):
        azure.compute.virtual_machines.get("group-3c4d-db", "db")


def test_control_api_sets_options_and_reset_restores_them(azure):
    url = azure.sim.url + "/_sim"
    verify = azure.sim.ca_bundle
    assert requests.post(url + "/options", json={"lro": "realistic", "retry_after": 3},
                         verify=verify, timeout=5).json()["lro"] == "realistic"
    assert (azure.app.lro_mode, azure.app.retry_after) == ("realistic", 3)
    assert requests.post(url + "/options", json={"lro": "sometimes"}, verify=verify, timeout=5).status_code == 400
    seeded = requests.post(url + "/seed_vm", json={"name": "web", "resource_group": "group-1a2b-web"},
                           verify=verify, timeout=5).json()["id"]
    assert seeded in requests.get(url + "/resources", verify=verify, timeout=5).json()
    assert requests.post(url + "/fail_lro", json={"operation": "vms.start"}, verify=verify,
                         timeout=5).status_code == 201
    requests.post(url + "/reset", json={}, verify=verify, timeout=5)
    assert (azure.app.lro_mode, azure.app.retry_after) == ("instant", 1)
    assert azure.app.resources() == [] and azure.app.lro.failures == []


def test_cli_starts_the_simulator_over_tls(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.simulators", "azure", "--port", "0", "--tls-dir", str(tmp_path),
         "--option", "lro=realistic"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        info = json.loads(process.stdout.readline())
        assert info["url"].startswith("https://localhost:")
        assert info["ca_bundle"] == str(tmp_path / "simulator-ca.pem")
        response = requests.get(f"{info['url']}/{presets.TENANT_ID}/v2.0/.well-known/openid-configuration",
                                verify=info["ca_bundle"], timeout=10)
        assert response.json()["token_endpoint"].startswith(info["url"])
        assert requests.get(info["url"] + "/_sim/options", verify=info["ca_bundle"],
                            timeout=10).json()["lro"] == "realistic"
    finally:
        process.terminate()
        process.wait(timeout=10)
