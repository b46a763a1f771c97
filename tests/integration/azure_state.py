"""Azure as the simulator holds it, and order passes killed part-way: helpers of the end-to-end
Azure pass tests."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.helpers import REPO, ansible_env
from tests.integration.passes import ORDER_PASS, kill_tree
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


def kill_pass_during(azure, config: Path, operation: str) -> None:
    """Start the order pass, hold its first ``operation`` request in ARM, kill the pass (and
    everything it started) while it waits, then let ARM carry out what it accepted, as a host
    lost mid-request would leave it."""
    arrived, release = threading.Event(), threading.Event()
    original = azure.app._injected

    def gate(name):
        if name == operation and not release.is_set():
            arrived.set()
            release.wait(120)
        return original(name)

    azure.app._injected = gate
    try:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "ansible-playbook"), str(ORDER_PASS)],
            env=ansible_env({"WALDUR_SITE_AGENT_CONFIG": str(config)}), cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert arrived.wait(180), "the pass never reached %s" % operation
        finally:
            kill_tree(process)
        release.set()
        # ARM finishes what it accepted; wait until that request is on record (a loaded
        # machine may take a while) so a rerun's calls are counted from after it.
        deadline = time.monotonic() + 120
        while not azure.app.calls_of(operation) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert azure.app.calls_of(operation), "ARM never finished the held %s" % operation
    finally:
        release.set()
        del azure.app.__dict__["_injected"]
