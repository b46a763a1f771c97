"""Azure as the simulator holds it, and order passes killed part-way: helpers of the end-to-end
Azure pass tests."""

from __future__ import annotations

from tests.simulators.azure import presets as AZ

RESOURCE_TAG = "waldur-resource-uuid"
OFFERING_TAG = "waldur-offering-uuid"


def arm(group: str, path: str = "") -> str:
    return "/subscriptions/%s/resourceGroups/%s%s" % (AZ.SUBSCRIPTION_ID, group, path)


def vm_id(group: str, name: str) -> str:
    return arm(group, "/providers/Microsoft.Compute/virtualMachines/" + name)


def network(azure, group: str, kind: str, name: str) -> dict | None:
    return azure.app.get(arm(group, "/providers/Microsoft.Network/%s/%s" % (kind, name)))


def dedicated_group(resource_uuid: str, vm_name: str) -> str:
    """The group a machine of its own gets: the whole resource UUID and the machine name."""
    return "group-%s-%s" % (resource_uuid.replace("-", "").lower(), vm_name)


def arm_writes(azure, since=0) -> list[str]:
    """Successful write calls to ARM (the token request is not one)."""
    return [call["operation"] for call in azure.app.write_calls(since) if call["operation"] != "token"]


def arm_deletes(azure, since=0) -> list[dict]:
    """Every DELETE sent to ARM, answered or refused."""
    return [call for call in azure.app.calls[since:] if call["method"] == "DELETE"]


def arm_ids(azure) -> set[str]:
    return {resource_id.lower() for resource_id in azure.app.resources()}


def all_vms(azure) -> list[str]:
    """The ids of every virtual machine in the subscription."""
    return sorted(rid for rid in azure.app.resources() if "/virtualmachines/" in rid.lower())


def owned(azure, resource_uuid: str) -> list[str]:
    """Ids of the objects carrying this resource's owner tag."""
    wanted = resource_uuid.replace("-", "").lower()
    state = azure.app.dump_state()["resources"]
    return sorted(rid for rid, body in state.items() if (body.get("tags") or {}).get(RESOURCE_TAG) == wanted)
