"""Azure names and ARM ids (ported from the upstream plugin's test_naming.py, plus its defects fixed)."""

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import (
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
    transliterate,
    vm_base_name,
    vm_name_of_companion,
    vm_name_of_dedicated_group,
)

UUID = "1234abcd-5678-4ef9-8123-4567890abcde"
HEX = UUID.replace("-", "")
SUB = "5ab5c71d-0000-4000-a000-000000000001"


@pytest.mark.parametrize("name, expected", [
    ("Web Server", "web-server"),
    ("Проект", "proekt"),
    ("Сервер №1", "server-no1"),
    ("Ёлка-Їжак", "yolka-yizhak"),
    ("Δίας", "dias"),
    ("Café Straße", "cafe-strasse"),
    ("--weird--name--", "weird-name"),
    ("a" * 80, "a" * 50),
    ("", ""),
    (None, ""),
    ("服务器", ""),
    ("!!! ??? ***", ""),
    ("服务器 web", "web"),
    ("My_VM.01 (prod)", "my-vm-01-prod"),
    ("a" * 49 + "-b", "a" * 49),  # the cut leaves a trailing dash, which is trimmed again
])
def test_sanitize(name, expected):
    assert sanitize(name) == expected


def test_transliteration_keeps_ascii_and_drops_what_has_no_latin_spelling():
    assert transliterate("Ab-1_") == "ab-1_"
    assert transliterate("Щука") == "shchuka"
    assert transliterate("東京") == ""


@pytest.mark.parametrize("name", ["", None, "服务器", "!!!", "-" * 80, "☃"])
def test_a_name_with_nothing_left_falls_back_to_the_uuid_never_a_shared_word(name):
    assert vm_base_name(name, UUID) == "vm-1234abcd"
    assert vm_base_name(name, "ffff" + HEX[4:]) == "vm-ffffabcd"
    assert "waldur-vm" not in dedicated_names(name, UUID).values()


def test_dedicated_names_carry_the_whole_uuid():
    names = dedicated_names("web", UUID)
    assert names["group"] == "group-%s-web" % HEX
    assert names["vm"] == "web"
    assert names["dedicated"] is True
    # dashed, undashed and upper-case uuids address the same objects
    assert dedicated_names("web", UUID.replace("-", "").upper()) == names


def test_alike_names_and_uuid_prefixes_still_give_two_groups():
    twin = HEX[:16] + "f" * 16  # the first 16 hex digits alike
    for first, second in (("Web Server", "web--server"), ("Сервер", "сервер"), ("服务器", "數據庫"),
                          ("!!!", "???"), ("x" * 80, "x" * 50 + "y" * 30)):
        assert sanitize(first) == sanitize(second)
        assert dedicated_names(first, UUID)["group"] != dedicated_names(second, twin)["group"]


@pytest.mark.parametrize("name", ["x" * 80, "Сервер" * 20, "服务器", "a-" * 40])
def test_names_fit_azure_limits(name):
    names = dedicated_names(name, UUID)
    assert len(names["group"]) <= 90 and len(names["vm"]) <= 64 and len(names["vnet"]) <= 64
    assert len(names["subnet"]) <= 80 and len(names["public_ip"]) <= 80 and len(names["nic"]) <= 80
    assert len(shared_names(name, UUID, "rg")["vnet"]) <= 64
    assert vm_name_of_dedicated_group(names["group"]) == names["vm"]


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
    assert shared_names("Проект", UUID, "shared-rg")["vm"] == "proekt-1234abcd"
    assert shared_names("服务器", UUID, "shared-rg")["vm"] == "vm-1234abcd"


def test_two_names_that_sanitize_alike_give_two_machines_in_a_shared_group():
    first = shared_names("Web Server", UUID, "rg")
    second = shared_names("web--server", "99999999-5678-4ef9-8123-4567890abcde", "rg")
    assert sanitize("Web Server") == sanitize("web--server")
    assert first["vm"] != second["vm"]


def test_machine_names_picks_the_route_from_the_shared_group():
    assert machine_names("web", UUID)["group"] == "group-%s-web" % HEX
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
    assert is_dedicated_group("group-%s-web" % HEX.upper(), "web")  # made now: the whole uuid
    assert names_from_vm_id(build_vm_id(SUB, "GROUP-1A2B-WEB", "web"))["dedicated"] is True


@pytest.mark.parametrize("group, vm", [
    ("group-1234-web", "db"),        # another machine's group
    ("group-12345-web", "web"),      # five hex digits
    ("group-1234abcd-web", "web"),   # eight: neither Mastermind's nor the agent's
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


def test_vm_names_read_back_from_found_objects():
    assert vm_name_of_dedicated_group("group-%s-web-1" % HEX) == "web-1"
    assert vm_name_of_dedicated_group("group-1a2b-legacy") == "legacy"
    assert vm_name_of_dedicated_group("shared-rg") is None
    assert vm_name_of_companion("nic", "nicweb-1234abcd") == "web-1234abcd"
    assert vm_name_of_companion("vnet", "netweb") == "web"
    assert vm_name_of_companion("vm", "web") == "web"
    assert vm_name_of_companion("nic", "nic") is None and vm_name_of_companion("nic", "eth0") is None
    assert vm_name_of_companion("disk", "web_OsDisk_1") is None
