"""Owner tags and the adoption decision on objects found at the names the agent wants."""

import pytest

from azure.mgmt.compute import models as compute_models
from azure.mgmt.network import models as network_models
from azure.mgmt.resource.resources import models as resource_models

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import (
    ADOPT,
    FAILED,
    FOREIGN,
    OFFERING_TAG,
    RESOURCE_TAG,
    RETRY,
    failure_reason,
    has_owner_tags,
    judge,
    owner_of,
    owner_tags,
    provisioning_state,
    tag_filter,
    with_owner_tags,
)

UUID = "1234abcd5678ef901234abcd5678ef90"
OTHER = "99998888777766665555444433332222"
OFFERING = "0fe1de10-0000-4000-8000-000000000001"


def vnet(tags=None, state="Succeeded"):
    return network_models.VirtualNetwork({"tags": tags, "properties": {"provisioningState": state}})


def group(tags=None, state="Succeeded"):
    return resource_models.ResourceGroup({"location": "westeurope", "tags": tags,
                                          "properties": {"provisioningState": state}})


def vm(tags=None, state="Succeeded", statuses=None):
    properties = {"provisioningState": state}
    if statuses is not None:
        properties["instanceView"] = {"statuses": statuses}
    return compute_models.VirtualMachine({"location": "westeurope", "tags": tags, "properties": properties})


def test_owner_tags_name_the_resource_and_the_offering_normalised():
    assert owner_tags(UUID.upper(), OFFERING) == {RESOURCE_TAG: UUID, OFFERING_TAG: OFFERING.replace("-", "")}
    assert owner_tags(UUID) == {RESOURCE_TAG: UUID}
    assert tag_filter(UUID.upper()) == "tagName eq 'waldur-resource-uuid' and tagValue eq '%s'" % UUID


def test_owner_tags_replace_only_the_owner_tags():
    merged = with_owner_tags({"cost-centre": "42", "Waldur-Resource-UUID": OTHER}, UUID, OFFERING)
    assert merged == {"cost-centre": "42", RESOURCE_TAG: UUID, OFFERING_TAG: OFFERING.replace("-", "")}


@pytest.mark.parametrize("tags, owner", [
    (None, None),
    ({}, None),
    ({"other": "x"}, None),
    ({RESOURCE_TAG: ""}, None),
    ({RESOURCE_TAG: UUID}, UUID),
    ({"WALDUR-RESOURCE-UUID": "1234ABCD-5678-EF90-1234-ABCD5678EF90"}, UUID),  # tag names are case-insensitive
    ({RESOURCE_TAG: "someone"}, "someone"),
])
def test_owner_of(tags, owner):
    assert owner_of(vnet(tags)) == owner
    assert owner_of({"tags": tags}) == owner


def test_has_owner_tags():
    assert has_owner_tags(vnet(owner_tags(UUID, OFFERING)), UUID, OFFERING)
    assert not has_owner_tags(vnet(owner_tags(UUID)), UUID, OFFERING)
    assert not has_owner_tags(vnet(), UUID)


@pytest.mark.parametrize("obj, verdict", [
    (vnet({RESOURCE_TAG: UUID}), ADOPT),
    (vnet({RESOURCE_TAG: UUID}, "Updating"), RETRY),
    (vnet({RESOURCE_TAG: UUID}, "Deleting"), RETRY),
    (vnet({RESOURCE_TAG: UUID}, "Failed"), FAILED),
    (vnet({RESOURCE_TAG: UUID}, "Canceled"), FAILED),
    (vnet(None), FOREIGN),
    (vnet({RESOURCE_TAG: OTHER}), FOREIGN),
    (vnet({RESOURCE_TAG: OTHER}, "Updating"), FOREIGN),  # never waited for, either
    (group({RESOURCE_TAG: UUID}), ADOPT),
    (group({RESOURCE_TAG: UUID}, "Deleting"), RETRY),
    (group(), FOREIGN),
    (vm({RESOURCE_TAG: UUID}, "Creating"), RETRY),
    (vm({RESOURCE_TAG: UUID}), ADOPT),
])
def test_judge(obj, verdict):
    assert judge("the object", obj, UUID)[0] == verdict


def test_a_foreign_verdict_names_the_object_and_its_owner():
    verdict, reason = judge("network interface nicweb in resource group g", vnet({RESOURCE_TAG: OTHER}), UUID)
    assert verdict == FOREIGN
    assert reason == ("network interface nicweb in resource group g exists with owner tag "
                      "waldur-resource-uuid=%s, not this resource's (waldur-resource-uuid=%s); it is not "
                      "adopted, changed or deleted" % (OTHER, UUID))
    assert "no owner tag" in judge("x", vnet(), UUID)[1]


def test_an_object_owned_through_its_parent_is_judged_on_its_state_only():
    subnet = network_models.Subnet({"properties": {"provisioningState": "Succeeded"}})
    assert judge("subnet s", subnet, UUID, owned_by_parent=True) == (ADOPT, None)
    subnet = network_models.Subnet({"properties": {"provisioningState": "Updating"}})
    assert judge("subnet s", subnet, UUID, owned_by_parent=True)[0] == RETRY


def test_a_failed_machine_carries_the_clouds_reason():
    failed = vm({RESOURCE_TAG: UUID}, "Failed", statuses=[
        {"code": "ProvisioningState/failed/AllocationFailed", "level": "Error",
         "displayStatus": "Provisioning failed", "message": "Allocation failed. No capacity."},
        {"code": "PowerState/stopped"}])
    assert provisioning_state(failed) == "failed"
    assert failure_reason(failed) == "AllocationFailed: Allocation failed. No capacity."
    verdict, reason = judge("virtual machine web", failed, UUID)
    assert verdict == FAILED
    assert reason == ("virtual machine web exists but its provisioning failed: AllocationFailed: Allocation "
                      "failed. No capacity.")
    assert failure_reason(vm({RESOURCE_TAG: UUID}, "Failed")) is None
