"""DigitalOcean names and tags, and the one reserved-tag rule shared by the order
filter (``droplet_items``) and ``do_droplet``."""

from __future__ import annotations

import pytest

from ansible_collections.waldur.site_agent.plugins.filter.backend_items import droplet_items, droplet_notes
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import (
    droplet_tags,
    is_resource_tag,
    resource_tag,
)
from ansible_collections.waldur.site_agent.plugins.modules import do_droplet
from tests.unit.plugins.modules.test_do_droplet import FakeClient, FakeWaiter

UUID = "5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b"
OWN_TAG = "waldur-resource:" + UUID
PLANTED = "f" * 32
# User tags of an order: mixed-case and padded copies of the agent's prefix are reserved,
# look-alikes that only contain or resemble it are not.
USER_TAGS = ["web", "Waldur-Resource:" + PLANTED, "WALDUR-RESOURCE:" + "e" * 32, " waldur-resource:" + "d" * 32,
             "waldur-resources", "my-waldur-resource:x", "waldur_resource:x", "Prod"]
RESERVED = USER_TAGS[1:4]
KEPT = ["web", "waldur-resources", "my-waldur-resource:x", "waldur_resource:x", "Prod"]


@pytest.mark.parametrize("tag", ["waldur-resource:" + PLANTED, "Waldur-Resource:x", "WALDUR-RESOURCE:", " waldur-resource:x "])
def test_the_agents_prefix_is_reserved_in_any_case(tag):
    assert is_resource_tag(tag) is True


@pytest.mark.parametrize("tag", ["waldur", "waldur-resources", "x-waldur-resource:y", "waldur_resource:x", "", 42])
def test_other_tags_are_not_reserved(tag):
    assert is_resource_tag(tag) is False


def test_droplet_tags_drop_reserved_tags_and_add_the_resources_own():
    tags, dropped = droplet_tags(USER_TAGS + ["web"], UUID)
    assert tags == KEPT + [OWN_TAG]
    assert dropped == [tag.strip() for tag in RESERVED]


def test_resource_tags_reads_ownership_marks_in_any_case():
    assert resource_tags(["web", "Waldur-Resource:" + UUID.upper()]) == {OWN_TAG}
    assert resource_tag(UUID.upper()) == OWN_TAG


def test_the_filter_and_do_droplet_reserve_the_same_mixed_case_tags():
    """The filter's item goes to do_droplet as it is: both must keep and drop the same tags."""
    settings = {"default_region": "ams3", "default_image": "ubuntu-22-04-x64", "default_size": "s-1vcpu-1gb"}
    order = {"uuid": "0" * 32, "type": "Create", "marketplace_resource_uuid": UUID, "resource_name": "web-1",
             "resource": {"uuid": UUID, "name": "web-1", "attributes": {"tags": USER_TAGS}, "limits": {}}}
    [item] = droplet_items([order], settings)
    assert [tag.strip() for tag in item["tags"]] == KEPT
    [note] = droplet_notes([order], settings)
    for tag in RESERVED:
        assert tag in note

    client = FakeClient()
    module_item = {"resource_uuid": UUID, "order_uuid": None, "state": "present", "backend_id": None,
                   "name": "web-1", "region": "ams3", "image": "ubuntu-22-04-x64", "size": "s-1vcpu-1gb",
                   "ssh_keys": [], "user_data": None, "tags": USER_TAGS}
    result = do_droplet.DropletWorker(client, check_mode=False, wait=False, wait_timeout=60,
                                      waiter=FakeWaiter(client))(module_item)
    [created] = [call[1] for call in client.calls if call[0] == "create_droplet"]
    assert created["tags"] == KEPT + [OWN_TAG]
    assert result["dropped_tags"] == [tag.strip() for tag in RESERVED]
