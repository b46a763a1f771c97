"""Azure power changes of a membership pass share one wait: the machines sent to deallocate are
read together (the subscription's statusOnly listing, by pages) until they settle, instead of each
item polling its own long-running operation; a deallocation that failed is told apart from one not
yet started by asking that operation only."""

from __future__ import annotations

import pytest

from tests.helpers import run_playbook
from tests.integration.azure_state import arm_writes
from tests.integration.passes import MEMBERSHIP_PASS, set_flag, write_config
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

PAUSED = 6


def test_power_changes_share_one_wait_and_a_failed_deallocation_is_named(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    azure.app.page_size = 4
    # Realistic operations (InProgress for 2 s, Retry-After 1): one item waiting on its own
    # operation polls it about twice; six of them a dozen times.
    azure.app.lro_mode, azure.app.lro_seconds, azure.app.retry_after = "realistic", 2.0, 1
    config = write_config(tmp_path, waldur, azure=azure)
    machines = [azure.app.seed_vm("pw%d" % index, size="Standard_B2s") for index in range(PAUSED + 2)]
    resources = [waldur.app.seed_resource(W.AZURE_OFFERING_UUID, "pw%d" % index, backend_id=machine)["uuid"]
                 for index, machine in enumerate(machines)]
    for resource in resources[:PAUSED]:
        set_flag(waldur, resource, "paused", True)
    azure.app.fail_lro("vms.deallocate", code="AllocationFailed", message="the host refused the deallocation")
    since = len(azure.app.calls)

    run = run_playbook(MEMBERSHIP_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)})

    calls = azure.app.calls[since:]
    assert sorted(arm_writes(azure, since)) == ["vms.deallocate"] * PAUSED
    states = [azure.app.vm_power_state(machine) for machine in machines]
    assert sorted(states[:PAUSED]) == ["deallocated"] * (PAUSED - 1) + ["running"]
    assert states[PAUSED:] == ["running", "running"]
    # the failed one fails the pass, named with Azure's reason; the others are done
    assert run.rc != 0 and "the host refused the deallocation" in run.output, run.output[-3000:]
    # one wait: only the operation whose machine went back to running is asked about (once), no
    # operation is polled per item, and no machine is read whole on its own
    polls = [call for call in calls if call["operation"] in ("operations.get", "operation_results.get")]
    assert len(polls) == 1, [call["path"] for call in polls]
    assert not [call for call in calls if call["operation"] == "vms.get"]
    # (a machine left alone in the wait is read by its instance view: a listing page would cost as much)
    assert len([call for call in calls if call["operation"] == "vms.instance_view"]) <= 3
    # the listings of the pass (one statusOnly listing: 2 pages of 4) and a few rounds of the wait
    statuses = [call for call in calls if call["operation"] == "vms.list_all" and "statusOnly=true" in call["query"]]
    assert 2 + 2 <= len(statuses) <= 2 + 2 * 5, len(statuses)
