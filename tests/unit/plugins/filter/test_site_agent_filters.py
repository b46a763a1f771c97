"""The order/resource glue filters: backend_settings fallbacks and the rules of the behaviour page."""

import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.filter.backend_items import (
    droplet_items,
    droplet_membership_items,
    droplet_notes,
    droplet_outcomes,
    droplet_plan,
    vm_items,
    vm_membership_items,
    vm_outcomes,
    vm_plan,
)
from ansible_collections.waldur.site_agent.plugins.filter.site_agent import change_lines, healed_resources, metadata_updates
from ansible_collections.waldur.site_agent.plugins.filter.site_agent import recoverable_resources, usage_rows

RESOURCE_UUID = "1234abcd-0000-4000-8000-000000000001"
RESOURCE_HEX = RESOURCE_UUID.replace("-", "")
ORDER_UUID = "0000aaaa000040008000000000000002"
KEY_UUID = "e0000000000000000000000000000001"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlaceholderPlaceholderPlaceholder demo"


def order(order_type="Create", attributes=None, options=None, limits=None, backend_id="",
          resource_limits=None, target_limits=None, name="web-1"):
    result = {
        "uuid": ORDER_UUID, "type": order_type, "marketplace_resource_uuid": RESOURCE_UUID,
        "resource_name": name, "limits": limits or {},
        "resource": {"uuid": RESOURCE_HEX, "name": name, "slug": "web-1", "backend_id": backend_id,
                     "attributes": attributes or {}, "options": options or {},
                     "limits": resource_limits or limits or {}},
    }
    if target_limits is not None:
        result["target_limits"] = target_limits
    return result


def set_aside(items_filter, outcomes_filter, orders, *args):
    """The one settle outcome of an order the filter errs or skips; it gets no backend item."""
    assert items_filter(orders, *args) == []
    [outcome] = outcomes_filter(orders, *args)
    assert (outcome["order_uuid"], outcome["resource_uuid"], outcome["retry"]) == (ORDER_UUID, RESOURCE_HEX, False)
    assert outcome["resource_name"] == "web-1"
    return outcome


DO_SETTINGS = {"token": "x", "default_region": "ams3", "default_image": "ubuntu-22-04-x64",
               "default_size": "s-1vcpu-1gb", "default_tags": ["waldur"],
               "size_mapping": {"s-1vcpu-1gb": {"cpu": 1, "ram": 1024}, "s-2vcpu-4gb": {"cpu": 2, "ram": 4096}}}


class TestDropletItems:
    def test_create_uses_defaults_and_normalises_uuids(self):
        [item] = droplet_items([order()], DO_SETTINGS)
        assert item["order_uuid"] == ORDER_UUID
        assert item["resource_uuid"] == RESOURCE_HEX
        assert (item["state"], item["region"], item["image"], item["size"]) == (
            "present", "ams3", "ubuntu-22-04-x64", "s-1vcpu-1gb")
        assert item["tags"] == ["waldur"]
        assert item["name"] == "web-1"
        assert not set(item) & {"error", "skip", "comment", "resource_name"}  # desired state only

    def test_attributes_override_options_and_defaults(self):
        [item] = droplet_items([order(options={"region": "nyc3", "image": "debian-12-x64"},
                                      attributes={"backend_region_id": "fra1", "size_slug": "s-2vcpu-4gb",
                                                  "cloud_init": "#cloud-config", "tags": "solo"})], DO_SETTINGS)
        assert (item["region"], item["image"], item["size"]) == ("fra1", "debian-12-x64", "s-2vcpu-4gb")
        assert item["user_data"] == "#cloud-config"
        assert item["tags"] == ["solo"]

    def test_size_falls_back_to_the_size_mapping_entry_matching_the_limits(self):
        settings = dict(DO_SETTINGS, default_size=None)
        [item] = droplet_items([order(limits={"cpu": 2, "ram": 4096})], settings)
        assert item["size"] == "s-2vcpu-4gb"

    @pytest.mark.parametrize("missing", ["region", "image", "size"])
    def test_missing_region_image_or_size_is_an_error_item(self, missing):
        settings = dict(DO_SETTINGS, size_mapping={})
        settings["default_" + missing] = None
        outcome = set_aside(droplet_items, droplet_outcomes, [order()], settings)
        assert outcome["failed"] is True and outcome["msg"] == "DigitalOcean droplet %s is not specified" % missing

    def test_reserved_resource_tags_are_dropped_and_reported(self):
        planted = "waldur-resource:" + "f" * 32
        [item] = droplet_items([order(attributes={"tags": ["web", planted]})], DO_SETTINGS)
        assert item["tags"] == ["web"] and "comment" not in item
        [note] = droplet_notes([order(attributes={"tags": ["web", planted]})], DO_SETTINGS)
        assert planted in note and note.startswith("web-1 (order %s): " % ORDER_UUID)
        assert droplet_outcomes([order(attributes={"tags": ["web", planted]})], DO_SETTINGS) == []

    def test_ssh_key_by_public_key_id_fingerprint_or_provider_key_uuid(self):
        keys = [{"uuid": KEY_UUID, "public_key": PUBLIC_KEY}]
        [by_public] = droplet_items([order(attributes={"ssh_public_key": PUBLIC_KEY})], DO_SETTINGS)
        [by_id] = droplet_items([order(attributes={"ssh_key_id": 42})], DO_SETTINGS)
        [by_uuid] = droplet_items([order(attributes={"ssh_key": "E0000000-0000-0000-0000-000000000001"})],
                                  DO_SETTINGS, keys)
        assert by_public["ssh_keys"] == [PUBLIC_KEY]
        assert by_id["ssh_keys"] == ["42"]
        assert by_uuid["ssh_keys"] == [PUBLIC_KEY]

    @pytest.mark.parametrize("order_type", ["Create", "Restore"])
    def test_an_existing_droplet_is_only_checked_never_resized(self, order_type):
        """The order's size (or the default) may differ from what Updates made of the droplet."""
        [item] = droplet_items([order(order_type, backend_id="123", attributes={"size": "s-2vcpu-4gb"})],
                               DO_SETTINGS)
        assert (item["state"], item["backend_id"]) == ("present", "123")
        assert "size" not in item and "error" not in item

    def test_update_with_matching_size_mapping_resizes(self):
        [item] = droplet_items([order("Update", backend_id="123", resource_limits={"cpu": 1, "ram": 1024},
                                      target_limits={"cpu": 2, "ram": 4096})], DO_SETTINGS)
        assert (item["state"], item["backend_id"], item["size"]) == ("present", "123", "s-2vcpu-4gb")
        assert item["running"] is True
        assert "skip" not in item

    def test_update_of_a_paused_resource_leaves_the_droplet_off(self):
        update = order("Update", backend_id="123", resource_limits={"cpu": 1, "ram": 1024},
                       target_limits={"cpu": 2, "ram": 4096})
        update["resource"]["paused"] = True
        [item] = droplet_items([update], DO_SETTINGS)
        assert item["running"] is False

    def test_update_without_a_match_errs_naming_the_limits_and_the_mapping(self):
        outcome = set_aside(droplet_items, droplet_outcomes, [order(
            "Update", backend_id="123", resource_limits={"cpu": 1, "ram": 1024}, target_limits={"cpu": 3, "ram": 999})],
            DO_SETTINGS)
        assert outcome["msg"] == ("limits cpu=3, ram=999 match no size_mapping entry (size_mapping: s-1vcpu-1gb: "
                                  "cpu=1, ram=1024; s-2vcpu-4gb: cpu=2, ram=4096); the droplet is left unchanged")
        assert (outcome["failed"], outcome["backend_id"]) == (True, "123")

    def test_update_with_unchanged_limits_needs_no_backend_call(self):
        outcome = set_aside(droplet_items, droplet_outcomes, [order(
            "Update", backend_id="123", resource_limits={"cpu": 1, "ram": 1024}, target_limits={"cpu": 1.0, "ram": 1024})],
            DO_SETTINGS)
        assert (outcome["failed"], outcome["backend_id"]) == (False, "123") and "unchanged" in outcome["msg"]

    def test_terminate(self):
        [item] = droplet_items([order("Terminate", backend_id="123")], DO_SETTINGS)
        assert (item["state"], item["backend_id"]) == ("absent", "123")

    def test_membership_items_follow_the_flags(self):
        resources = [{"uuid": "a" * 32, "backend_id": "1", "paused": True},
                     {"uuid": "b" * 32, "backend_id": "2", "downscaled": True},
                     {"uuid": "c" * 32, "backend_id": "3"},
                     {"uuid": "d" * 32, "backend_id": ""}]
        assert [i["state"] for i in droplet_membership_items(resources)] == ["off", "off", "active"]


AZURE_SETTINGS = {"subscription_id": "s", "tenant_id": "t", "client_id": "c", "client_secret": "x",
                  "default_location": "westeurope", "default_size": "Standard_B1s",
                  "default_image": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest",
                  "allowed_ssh_ranges": "203.0.113.0/24"}


class TestVmItems:
    def test_create_with_provider_key_in_any_form(self):
        keys = [{"uuid": KEY_UUID, "public_key": PUBLIC_KEY}]
        [item] = vm_items([order(attributes={"ssh_key_uuid": KEY_UUID.upper()})], AZURE_SETTINGS, keys)
        assert item["ssh_public_key"] == PUBLIC_KEY
        assert (item["location"], item["size"], item["admin_username"]) == ("westeurope", "Standard_B1s", "waldur")
        assert item["allowed_ssh_ranges"] == ["203.0.113.0/24"]
        assert (item["network_cidr"], item["subnet_cidr"]) == ("10.0.0.0/16", "10.0.0.0/24")
        assert item["resource_group"] is None

    def test_the_offering_uuid_reaches_every_item_for_the_owner_tags(self):
        offering = "0FE1DE10-0000-4000-8000-000000000001"
        items = vm_items([order(attributes={"ssh_public_key": PUBLIC_KEY}), order("Terminate", backend_id="/x")],
                         AZURE_SETTINGS, [], offering)
        assert [item["offering_uuid"] for item in items] == ["0fe1de10000040008000000000000001"] * 2
        # without the argument, the order's own offering
        [item] = vm_items([dict(order(attributes={"ssh_public_key": PUBLIC_KEY}), offering_uuid="ab" * 16)],
                          AZURE_SETTINGS)
        assert item["offering_uuid"] == "ab" * 16
        [item] = vm_items([order(attributes={"ssh_public_key": PUBLIC_KEY})], AZURE_SETTINGS)
        assert "offering_uuid" not in item
        with pytest.raises(AnsibleFilterError, match="offering_uuid: 'nope' is not a UUID"):
            vm_items([order()], AZURE_SETTINGS, [], "nope")

    def test_keyless_order_is_refused(self):
        outcome = set_aside(vm_items, vm_outcomes, [order()], AZURE_SETTINGS)
        assert outcome["failed"] is True and "carries no SSH key" in outcome["msg"]

    def test_unknown_key_uuid_is_refused(self):
        outcome = set_aside(vm_items, vm_outcomes, [order(attributes={"ssh_key": "f" * 32})], AZURE_SETTINGS, [])
        assert "carries no SSH key" in outcome["msg"] and "f" * 32 in outcome["msg"]

    def test_missing_location_is_named(self):
        settings = dict(AZURE_SETTINGS, default_location=None)
        outcome = set_aside(vm_items, vm_outcomes, [order(attributes={"ssh_public_key": PUBLIC_KEY})], settings)
        assert outcome["msg"] == "Azure location is set neither on the order nor in backend_settings"

    def test_update_with_changed_limits_is_refused(self):
        outcome = set_aside(vm_items, vm_outcomes, [order("Update", backend_id="/x", resource_limits={"cpu": 1},
                                                          target_limits={"cpu": 2})], AZURE_SETTINGS)
        assert (outcome["failed"], outcome["msg"], outcome["backend_id"]) == (
            True, "resizing is not supported on Azure", "/x")

    def test_update_with_same_limits_is_skipped(self):
        outcome = set_aside(vm_items, vm_outcomes, [order("Update", backend_id="/x", resource_limits={"cpu": 1},
                                                          target_limits={"cpu": 1})], AZURE_SETTINGS)
        assert outcome["failed"] is False and "unchanged" in outcome["msg"]

    def test_shared_group_and_user_data(self):
        settings = dict(AZURE_SETTINGS, default_resource_group="shared-rg")
        [item] = vm_items([order(attributes={"ssh_public_key": PUBLIC_KEY, "user_data": "#!/bin/sh",
                                             "username": "alice"})], settings)
        assert (item["resource_group"], item["custom_data"], item["admin_username"]) == (
            "shared-rg", "#!/bin/sh", "alice")

    def test_membership_items(self):
        resources = [{"uuid": "a" * 32, "backend_id": "/v1", "downscaled": True},
                     {"uuid": "b" * 32, "backend_id": "/v2"}]
        assert [i["state"] for i in vm_membership_items(resources)] == ["deallocated", "running"]


def test_one_planning_gives_what_the_three_droplet_filters_give():
    """The order pass plans once (droplet_plan): the same items, set-aside orders and notes."""
    orders = [order(attributes={"tags": ["web", "waldur-resource:x"]}),
              order("Update", backend_id="123", resource_limits={"cpu": 1, "ram": 1024},
                    target_limits={"cpu": 1, "ram": 1024}),
              order("Update", backend_id="124", target_limits={"cpu": 9, "ram": 1}),
              order("Terminate", backend_id="125")]
    plan = droplet_plan(orders, DO_SETTINGS)
    assert plan == {"backend_items": droplet_items(orders, DO_SETTINGS),
                    "set_aside": droplet_outcomes(orders, DO_SETTINGS), "notes": droplet_notes(orders, DO_SETTINGS)}
    assert (len(plan["backend_items"]), len(plan["set_aside"]), len(plan["notes"])) == (2, 2, 1)


def test_one_planning_gives_what_the_two_vm_filters_give():
    orders = [order(attributes={"ssh_public_key": PUBLIC_KEY}), order(), order("Terminate", backend_id="/x")]
    plan = vm_plan(orders, AZURE_SETTINGS, [], "ab" * 16)
    assert plan == {"backend_items": vm_items(orders, AZURE_SETTINGS, [], "ab" * 16),
                    "set_aside": vm_outcomes(orders, AZURE_SETTINGS, [], "ab" * 16), "notes": []}
    assert (len(plan["backend_items"]), len(plan["set_aside"])) == (2, 1)


def test_recoverable_resources_are_the_erred_ones_whose_machine_was_found():
    resources = [{"uuid": "a" * 32, "name": "vm-1", "state": "Erred", "backend_id": "/Subscriptions/S/VM-1"},
                 {"uuid": "b" * 32, "name": "vm-2", "state": "OK", "backend_id": "/subscriptions/s/vm-2"},
                 {"uuid": "c" * 32, "name": "vm-3", "state": "Erred", "backend_id": "/subscriptions/s/vm-3"},
                 {"uuid": "d" * 32, "name": "vm-4", "state": "Erred", "backend_id": ""}]
    machines = [{"backend_id": "/subscriptions/s/vm-1", "found": True}, {"backend_id": "/subscriptions/s/vm-2", "found": True},
                {"backend_id": "/subscriptions/s/vm-3", "found": False}, {"backend_id": None, "found": False}]
    assert recoverable_resources(resources, machines) == [{"resource_uuid": "a" * 32, "name": "vm-1"}]
    assert recoverable_resources(resources, []) == []


def test_metadata_updates_only_where_changed():
    resources = [{"uuid": "a" * 32, "backend_metadata": {"x": 1}}, {"uuid": "b" * 32, "backend_metadata": {}}]
    results = [{"resource_uuid": "a" * 32, "backend_metadata": {"x": 1}},
               {"resource_uuid": "b" * 32, "backend_metadata": {"x": 2}},
               {"resource_uuid": "b" * 32, "failed": True, "backend_metadata": {"x": 3}}]
    assert metadata_updates(results, resources) == [
        {"resource_uuid": "b" * 32, "backend_metadata": {"x": 2}, "current_metadata": {}}]


def test_usage_rows_leave_out_unmeasured_machines():
    resources = [{"uuid": "a" * 32, "name": "vm1", "backend_id": "/SUBSCRIPTIONS/S/VM1"},
                 {"uuid": "b" * 32, "backend_id": "/vm2"}]
    machines = [{"backend_id": "/subscriptions/s/vm1", "found": True, "usages": {"cpu": 2}},
                {"backend_id": "/vm2", "found": False, "usages": {}}]
    assert usage_rows(machines, resources) == [{"resource_uuid": "a" * 32, "resource_name": "vm1",
                                                "usages": {"cpu": 2}}]


def test_usage_rows_map_the_figures_onto_the_offerings_components():
    resources = [{"uuid": "a" * 32, "name": "vm1", "backend_id": "/vm1"}, {"uuid": "b" * 32, "backend_id": "/vm2"},
                 {"uuid": "c" * 32, "backend_id": "/vm3"}]
    machines = [{"backend_id": "/vm1", "found": True, "figures": {"cores": 2, "ram_mb": 4096, "disk_mb": 38912}},
                {"backend_id": "/vm2", "found": False, "figures": {}},
                {"backend_id": "/vm3", "found": True, "figures": {"cores": 1, "ram_mb": None, "disk_mb": None}}]
    components = {"cpu": {"unit_factor": 1}, "ram": {"unit_factor": 1024}, "licenses": {}}
    assert usage_rows(machines, resources, components) == [
        {"resource_uuid": "a" * 32, "resource_name": "vm1", "usages": {"cpu": 2, "ram": 4}},
        {"resource_uuid": "c" * 32, "resource_name": "", "usages": {"cpu": 1}}]
    # no component a figure describes: nothing is reported, not even zeros
    assert usage_rows(machines, resources, {"licenses": {}}) == []
    assert usage_rows(machines, resources) == []


def test_api_call_count_sums_waldur_and_backend_figures_and_ignores_skipped_tasks():
    from ansible_collections.waldur.site_agent.plugins.filter.site_agent import api_call_count

    registered = [{"api_calls": {"reads": 3, "writes": 2, "retries": 1}}, {"api_calls": 7},
                  {"skipped": True}, {}, None]
    assert api_call_count(registered) == 12


def test_healed_resources_are_the_erred_ones_this_membership_pass_found_and_set():
    resources = [{"uuid": "a" * 32, "name": "vm-1", "state": "Erred"},
                 {"uuid": "b" * 32, "name": "vm-2", "state": "OK"},
                 {"uuid": "c" * 32, "name": "vm-3", "state": "Erred"},
                 {"uuid": "d" * 32, "name": "vm-4", "state": "Erred"}]
    results = [{"resource_uuid": "A" * 8 + "-" + "a" * 24, "failed": False, "backend_metadata": {"power": "on"}},
               {"resource_uuid": "b" * 32, "failed": False, "backend_metadata": {"power": "on"}},
               {"resource_uuid": "c" * 32, "failed": True, "backend_metadata": {"power": "on"}},
               {"resource_uuid": "d" * 32, "failed": False, "backend_metadata": {}}]
    # vm-3's call failed and vm-4 was not found: both stay Erred.
    assert healed_resources(resources, results) == [{"resource_uuid": "a" * 32, "name": "vm-1"}]
    assert healed_resources(resources, []) == []


def test_the_pass_filters_take_packed_lists_and_answer_packed():
    """The passes hand their lists over as one JSON text each; every filter of the membership and
    report passes gives the same answer for them, packed where it gave a list of items."""
    import json

    from ansible_collections.waldur.site_agent.plugins.filter.site_agent import backend_ids

    resources = [{"uuid": "a" * 32, "name": "vm-1", "state": "Erred", "backend_id": "/vm1", "paused": True,
                  "backend_metadata": {}},
                 {"uuid": "b" * 32, "name": "vm-2", "state": "OK", "backend_id": "/vm2", "backend_metadata": {}}]
    results = [{"resource_uuid": "a" * 32, "failed": False, "backend_metadata": {"power": "off"}}]
    machines = [{"backend_id": "/vm1", "found": True, "usages": {"cpu": 1}}]
    packed_resources, packed_results, packed_machines = (json.dumps(value) for value in (resources, results, machines))
    for listed, packed in (
            (droplet_membership_items(resources), droplet_membership_items(packed_resources)),
            (vm_membership_items(resources), vm_membership_items(packed_resources)),
            (metadata_updates(results, resources), metadata_updates(packed_results, packed_resources)),
            (usage_rows(machines, resources), usage_rows(packed_machines, packed_resources)),
            (backend_ids(resources), backend_ids(packed_resources))):
        assert isinstance(packed, str) and json.loads(packed) == listed and listed
    assert healed_resources(packed_resources, packed_results) == healed_resources(resources, results) != []
    assert recoverable_resources(packed_resources, packed_machines) == recoverable_resources(resources, machines) != []
    with pytest.raises(AnsibleFilterError, match="resources is not a packed list"):
        droplet_membership_items("[{")


def test_change_lines_name_each_changed_item_from_plain_and_packed_results():
    act = {"results_packed": json.dumps([
        {"resource_uuid": RESOURCE_UUID.upper(), "changed": True, "msg": "would shut down\n droplet 72"},
        {"resource_uuid": "r-unchanged", "changed": False, "msg": "droplet 71 is active"}])}
    metadata = {"results": [{"resource_uuid": "r-unnamed", "changed": True, "msg": "would update backend metadata"},
                            {"resource_uuid": "r-silent", "changed": True}]}
    # the item carries the UUID dashed and upper-case; the resource list, undashed
    resources = json.dumps([{"uuid": RESOURCE_HEX, "name": "web-1"}])
    assert change_lines([act, {"skipped": True}, "not a result", metadata], resources) == [
        "web-1 (resource %s): would shut down droplet 72" % RESOURCE_UUID.upper(),
        "resource r-unnamed: would update backend metadata"]
    assert change_lines(act) == ["resource %s: would shut down droplet 72" % RESOURCE_UUID.upper()]
    with pytest.raises(AnsibleFilterError, match="change_lines expects a list of registered module results, got str"):
        change_lines("results")
