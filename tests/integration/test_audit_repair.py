"""The audit where Waldur and the cloud disagree (issue 23's Done-when on DigitalOcean): Waldur
7.0.7's worker errs an Update after the order pass resized the droplet, the pass ends diverged,
the audit names the drift as Waldur's limits against the droplet's size, and audit_repair
(--check first) resizes it back, once. A machine behind an Erred resource is named, never deleted,
and Azure's repair is refused naming why.

The real order_process and audit playbooks over the Waldur, DigitalOcean and Azure simulators."""

from __future__ import annotations

import pytest

from tests.integration.azure_state import arm_ids
from tests.integration.passes import write_config
from tests.integration.test_audit import (
    OLD, report, run_audit, seed_chain_resource, seed_droplet_resource, write_site_config)
from tests.integration.test_order_pass import order_pass, summary_of
from tests.simulators.waldur import presets as W
from tests.simulators.waldur.simulator import PROFILES

pytestmark = pytest.mark.integration

BIG = {"cpu": 2, "ram": 4096, "disk": 81920}
DO_OFFERING = "DigitalOcean VM"


def size_drift(data: dict) -> dict:
    [finding] = [item for item in data["findings"] if item["kind"] == "drift" and item["check"] == "size"]
    return finding


def test_an_update_waldur_errs_after_the_resize_is_named_by_the_audit_and_repaired_once(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    waldur.app.set_quirks(**dict(PROFILES["waldur_7"], processing_delay=2))
    config = write_config(tmp_path, waldur, do)
    resource_uuid, droplet_id = seed_droplet_resource(waldur, do, "grown", attributes={"name": "grown"})
    # executing already (set by hand): Waldur queued no processor the pass could wait for, and its
    # worker runs anyway, while the droplet is being resized
    update = waldur.app.seed_order(W.DO_OFFERING_UUID, type="Update", state="executing",
                                   resource_uuid=resource_uuid, limits=BIG)
    original = do.app._injected

    def worker_runs_during_the_resize(name):
        if name == "droplet_actions.create" and waldur.app.order(update["uuid"])["state"] == "executing":
            waldur.app.process_after(None, update["uuid"])
        return original(name)

    do.app._injected = worker_runs_during_the_resize
    try:
        run = order_pass(config, rc=2)
    finally:
        del do.app.__dict__["_injected"]
    assert summary_of(run.stdout)["diverged"] == "1"
    assert do.app.droplet(droplet_id)["size_slug"] == "s-2vcpu-4gb"
    assert waldur.app.resource(resource_uuid)["limits"] == W.DO_PLAN_QUOTAS

    # the audit names the drift, Waldur's limits against the droplet's size; --check: would repair,
    # and nothing is written
    since = len(do.app.calls)
    run = run_audit(tmp_path, config, check=True, audit_repair=True)
    assert run.rc == 2, run.output[-4000:]
    data = report(tmp_path, DO_OFFERING)
    drift = size_drift(data)
    assert drift["resource_uuid"] == resource_uuid
    assert drift["detail"] == ("droplet %s is s-2vcpu-4gb, Waldur keeps cpu=1 disk=25600 ram=1024 (which "
                               "size_mapping maps to s-1vcpu-1gb)" % droplet_id)
    assert drift["repair"].startswith("would repair: resize droplet %s from s-2vcpu-4gb to s-1vcpu-1gb" % droplet_id)
    assert data["counts"]["would_repair"] == 1 and "would_repair=1" in run.stdout
    assert do.app.write_calls(since) == []
    assert do.app.droplet(droplet_id)["size_slug"] == "s-2vcpu-4gb"

    # for real: resized back (powered off for it, on again), Waldur untouched
    since_waldur = len(waldur.app.calls)
    run = run_audit(tmp_path, config, audit_repair=True)
    assert run.rc == 2, run.output[-4000:]
    data = report(tmp_path, DO_OFFERING)
    assert size_drift(data)["repair"].startswith(
        "repaired: resized droplet %s from s-2vcpu-4gb to s-1vcpu-1gb" % droplet_id)
    assert data["counts"]["repaired"] == 1 and data["counts"]["repair_failed"] == 0
    droplet = do.app.droplet(droplet_id)
    assert (droplet["size_slug"], droplet["status"]) == ("s-1vcpu-1gb", "active")
    assert [action["type"] for action in do.app.actions(droplet_id)][-2:] == ["resize", "power_on"]
    assert waldur.app.write_calls(since_waldur) == []

    # the next run finds nothing and writes nothing
    since = len(do.app.calls)
    run = run_audit(tmp_path, config, audit_repair=True)
    assert run.rc == 0, run.output[-4000:]
    assert report(tmp_path, DO_OFFERING)["status"] == "clean"
    assert do.app.write_calls(since) == []


def test_a_machine_behind_an_erred_resource_is_never_deleted_and_azure_repair_is_refused_naming_why(
        tmp_path, waldur_sim, azure_sim):
    """On Azure, with audit_cleanup (no age bound) and audit_repair on: a machine behind an Erred
    resource is named with what to do and kept; a resized machine's repair is refused, naming why;
    nothing is written."""
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    erred_uuid, erred_vm = seed_chain_resource(waldur, azure, "half-done", state="Erred", created_hours=OLD)
    resized_uuid, _machine = seed_chain_resource(waldur, azure, "resized", size="Standard_B1s")
    config = write_site_config(tmp_path, waldur, azure=azure)
    since = len(azure.app.calls)

    run = run_audit(tmp_path, config, audit_cleanup=True, audit_cleanup_min_age_hours=0, audit_repair=True)

    assert run.rc == 2, run.output[-4000:]
    data = report(tmp_path, "Azure VM")
    assert sorted((item["kind"], item["check"], item["resource_uuid"]) for item in data["findings"]) == sorted([
        ("drift", "erred_resource", erred_uuid), ("drift", "size", resized_uuid)])
    [erred] = [item for item in data["findings"] if item["check"] == "erred_resource"]
    assert erred["detail"] == "the machine exists and runs (the Azure subscription bills it) while Waldur shows " \
                              "the resource Erred"
    assert "terminate it in Waldur" in erred["action"] and (erred["cleanup"], erred["repair"]) == ("", "")
    drift = size_drift(data)
    assert drift["detail"] == "the virtual machine is Standard_B1s, Waldur keeps Standard_B2s (the size the " \
                              "resource ordered)"
    assert drift["repair"] == "refused: the agent does not resize Azure virtual machines; resize it by hand"
    assert "erred_resource" in run.stdout
    assert [call for call in azure.app.write_calls(since) if call["operation"] != "token"] == []
    assert erred_vm.lower() in arm_ids(azure)
