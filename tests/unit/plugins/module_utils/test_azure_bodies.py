"""azure/bodies: the ARM request bodies of a chain, built from plain values."""

import base64

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.bodies import (
    SSH_RULE_NAME,
    disk_tags_body,
    group_body,
    group_tags,
    nic_body,
    nsg_body,
    public_ip_body,
    subnet_body,
    vm_body,
    vnet_body,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import owner_tags

UUID = "1234abcd5678ef901234abcd5678ef90"
OFFERING = "0fe1de10000040008000000000000001"
TAGS = owner_tags(UUID, OFFERING)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMvXn2Qm1bTeM0N3z6yC3mD0pS3y3b2c6dVw9ZpR3Q1x user@host"
IMAGE = {"publisher": "Canonical", "offer": "ubuntu", "sku": "22_04-lts", "version": "latest"}


def a_vm_body(**overrides):
    arguments = dict(location="westeurope", tags=TAGS, vm_name="web", size_name="Standard_B1s", image=IMAGE,
                     nic_id="/nic/id", admin_username="waldur", admin_password="Secret123", ssh_public_key=KEY)
    arguments.update(overrides)
    return vm_body(**arguments)


def test_every_taggable_object_carries_both_owner_marks():
    bodies = [
        group_body("westeurope", group_tags(TAGS, dedicated=True)),
        vnet_body("westeurope", TAGS, "10.0.0.0/16"),
        public_ip_body("westeurope", TAGS),
        nsg_body("westeurope", TAGS, ["203.0.113.0/24"]),
        nic_body("westeurope", TAGS, "ipconfigweb", "/subnet/id", "/ip/id"),
        a_vm_body(),
        disk_tags_body(TAGS),
    ]
    for body in bodies:
        assert body["tags"]["waldur-resource-uuid"] == UUID
        assert body["tags"]["waldur-offering-uuid"] == OFFERING
    for body in bodies[:-1]:
        assert body["location"] == "westeurope"


def test_a_shared_group_carries_the_offering_mark_only():
    tags = group_tags(TAGS, dedicated=False)
    assert tags == {"waldur-offering-uuid": OFFERING}
    assert "waldur-resource-uuid" in TAGS  # the caller's tags are not changed


def test_a_subnet_carries_no_tags_only_its_prefix():
    assert subnet_body("10.0.1.0/24") == {"properties": {"addressPrefix": "10.0.1.0/24"}}


def test_network_and_public_ip_fields():
    assert vnet_body("westeurope", TAGS, "10.1.0.0/16")["properties"] == {
        "addressSpace": {"addressPrefixes": ["10.1.0.0/16"]}}
    body = public_ip_body("westeurope", TAGS)
    assert body["sku"] == {"name": "Standard"}
    assert body["properties"]["publicIPAllocationMethod"] == "Static"


def test_nsg_admits_exactly_the_ranges_on_port_22_inbound():
    [rule] = nsg_body("westeurope", TAGS, ["203.0.113.0/24", "AzureCloud"])["properties"]["securityRules"]
    assert rule["name"] == SSH_RULE_NAME
    properties = rule["properties"]
    assert properties["sourceAddressPrefixes"] == ["203.0.113.0/24", "AzureCloud"]
    assert (properties["protocol"], properties["destinationPortRange"]) == ("Tcp", "22")
    assert (properties["access"], properties["direction"]) == ("Allow", "Inbound")


def test_nic_references_subnet_and_ip_and_the_nsg_only_when_given():
    body = nic_body("westeurope", TAGS, "ipconfigweb", "/subnet/id", "/ip/id")
    [configuration] = body["properties"]["ipConfigurations"]
    assert configuration["name"] == "ipconfigweb"
    assert configuration["properties"]["subnet"] == {"id": "/subnet/id"}
    assert configuration["properties"]["publicIPAddress"] == {"id": "/ip/id"}
    assert "networkSecurityGroup" not in body["properties"]
    with_nsg = nic_body("westeurope", TAGS, "ipconfigweb", "/subnet/id", "/ip/id", nsg_id="/nsg/id")
    assert with_nsg["properties"]["networkSecurityGroup"] == {"id": "/nsg/id"}


def test_vm_admits_only_the_key_and_deletes_its_disk_and_nic_with_it():
    body = a_vm_body(ssh_public_key="  %s\n" % KEY, admin_username="ops")
    properties = body["properties"]
    assert properties["hardwareProfile"] == {"vmSize": "Standard_B1s"}
    assert properties["storageProfile"]["imageReference"] == IMAGE
    assert properties["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    assert properties["networkProfile"]["networkInterfaces"] == [
        {"id": "/nic/id", "properties": {"primary": True, "deleteOption": "Delete"}}]
    profile = properties["osProfile"]
    assert profile["computerName"] == "web" and profile["adminUsername"] == "ops"
    linux = profile["linuxConfiguration"]
    assert linux["disablePasswordAuthentication"] is True
    assert linux["ssh"]["publicKeys"] == [{"path": "/home/ops/.ssh/authorized_keys", "keyData": KEY}]
    assert "customData" not in profile


def test_vm_custom_data_is_base64_and_the_image_is_copied():
    image = dict(IMAGE)
    body = a_vm_body(custom_data="#cloud-config\npackages: [htop]\n", image=image)
    encoded = body["properties"]["osProfile"]["customData"]
    assert base64.b64decode(encoded).decode("utf-8") == "#cloud-config\npackages: [htop]\n"
    assert body["properties"]["storageProfile"]["imageReference"] is not image
