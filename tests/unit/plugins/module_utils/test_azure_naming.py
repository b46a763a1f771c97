"""Azure names and ARM ids (ported from the upstream plugin's test_naming.py, plus its defects fixed)."""

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.azure_naming import (
    InvalidAzureId,
    InvalidImage,
    build_vm_id,
    companion_names,
    dedicated_names,
    is_dedicated_group,
    machine_names,
    names_from_vm_id,
    parse_image,
    parse_resource_id,
    parse_vm_id,
    sanitize,
    shared_names,
)

UUID = "1234abcd-5678-4ef9-8123-4567890abcde"
SUB = "5ab5c71d-0000-4000-a000-000000000001"


@pytest.mark.parametrize("name, expected", [
    ("Web Server", "web-server"),
    ("Проект", "waldur-vm"),
    ("--weird--name--", "weird-name"),
    ("a" * 80, "a" * 50),
    ("", "waldur-vm"),
    (None, "waldur-vm"),
    ("My_VM.01 (prod)", "my-vm-01-prod"),
    ("a" * 49 + "-b", "a" * 49),  # the cut leaves a trailing dash, which is trimmed again
])
def test_sanitize(name, expected):
    assert sanitize(name) == expected


def test_dedicated_names_use_the_first_four_hex_of_the_uuid():
    names = dedicated_names("web", UUID)
    assert names["group"] == "group-1234-web"
    assert names["vm"] == "web"
    assert names["dedicated"] is True
    # dashed, undashed and upper-case uuids address the same objects
    assert dedicated_names("web", UUID.replace("-", "").upper()) == names


def test_companion_names_derive_from_the_vm_name():
    assert companion_names("web") == {
        "vm": "web", "vnet": "netweb", "subnet": "subnetweb", "public_ip": "pubipweb",
        "nsg": "nsgweb", "nic": "nicweb", "ip_config": "ipconfweb"}


def test_shared_names_carry_the_uuid8():
    names = shared_names("web", UUID, "shared-rg")
    assert names["vm"] == "web-1234abcd"
    assert names["group"] == "shared-rg"
    assert names["nic"] == "nicweb-1234abcd"
    assert names["dedicated"] is False
    assert shared_names("Проект", UUID, "shared-rg")["vm"] == "waldur-vm-1234abcd"


def test_two_names_that_sanitize_alike_give_two_machines_in_a_shared_group():
    first = shared_names("Web Server", UUID, "rg")
    second = shared_names("web--server", "99999999-5678-4ef9-8123-4567890abcde", "rg")
    assert sanitize("Web Server") == sanitize("web--server")
    assert first["vm"] != second["vm"]


def test_machine_names_picks_the_route_from_the_shared_group():
    assert machine_names("web", UUID)["group"] == "group-1234-web"
    assert machine_names("web", UUID, "shared")["group"] == "shared"
    assert machine_names("web", UUID, "")["dedicated"] is True


def test_vm_id_round_trip():
    vm_id = build_vm_id(SUB, "group-1234-web", "web")
    assert vm_id == ("/subscriptions/%s/resourceGroups/group-1234-web/providers/"
                     "Microsoft.Compute/virtualMachines/web" % SUB)
    assert parse_vm_id(vm_id) == (SUB, "group-1234-web", "web")
    names = names_from_vm_id(vm_id)
    assert names["nic"] == "nicweb" and names["subscription"] == SUB and names["dedicated"]


def test_a_55_character_shared_name_survives_the_id_round_trip():
    names = shared_names("x" * 60, UUID, "rg")
    assert len(names["vm"]) == 59
    parsed = names_from_vm_id(build_vm_id(SUB, "rg", names["vm"]))
    assert parsed["vm"] == names["vm"]
    assert parsed["vnet"] == "net" + names["vm"]  # derived from the id's name, never re-sanitized


def test_ids_parse_case_insensitively():
    vm_id = ("/SUBSCRIPTIONS/%s/RESOURCEGROUPS/GROUP-1234-WEB/PROVIDERS/MICROSOFT.COMPUTE/"
             "VIRTUALMACHINES/web" % SUB)
    assert parse_vm_id(vm_id) == (SUB, "GROUP-1234-WEB", "web")


@pytest.mark.parametrize("value", [
    "",
    None,
    "12345",
    "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/networkInterfaces/nicweb",
    "/subscriptions/s/resourceGroups/g",
    "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/web/extensions/x",
])
def test_non_vm_ids_are_rejected(value):
    with pytest.raises(InvalidAzureId, match="Not an Azure virtual machine id"):
        parse_vm_id(value)


def test_dedicated_group_test_is_case_insensitive():
    # Azure often returns the group segment upper-cased; upstream then took the shared route
    # and left the empty group behind.
    assert is_dedicated_group("GROUP-1234-WEB", "web")
    assert is_dedicated_group("group-ABCD-web", "WEB")
    assert names_from_vm_id(build_vm_id(SUB, "GROUP-1A2B-WEB", "web"))["dedicated"] is True


@pytest.mark.parametrize("group, vm", [
    ("group-1234-web", "db"),        # another machine's group
    ("group-12345-web", "web"),      # five hex digits
    ("group-xyz1-web", "web"),       # not hex
    ("shared-rg", "web-1234abcd"),
    ("group-1234-web-1234abcd", "web"),
])
def test_non_dedicated_groups(group, vm):
    assert not is_dedicated_group(group, vm)


def test_same_uuid_same_names_recognised_as_dedicated():
    names = dedicated_names("web", UUID)
    assert names == dedicated_names("web", UUID)
    assert is_dedicated_group(names["group"], names["vm"])


def test_parse_resource_id():
    parts = parse_resource_id("/subscriptions/s/resourceGroups/G/providers/Microsoft.Network/"
                              "virtualNetworks/netweb/subnets/subnetweb")
    assert parts["group"] == "G" and parts["name"] == "netweb" and parts["child_name"] == "subnetweb"
    assert parse_resource_id("not an id") is None


def test_image_string_and_dict():
    expected = {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts",
                "version": "latest"}
    assert parse_image("Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest") == expected
    assert parse_image(dict(expected)) == expected


@pytest.mark.parametrize("image", [
    "Canonical:ubuntu:22_04",
    "a:b:c:d:e",
    "a::c:d",
    "",
    None,
    {"publisher": "Canonical", "offer": "x", "sku": "y"},
])
def test_malformed_images_are_refused(image):
    with pytest.raises(InvalidImage):
        parse_image(image)
