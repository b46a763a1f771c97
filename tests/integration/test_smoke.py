"""End-to-end smoke of the three passes on both backends, logged by the JSON callback.

``make test-matrix`` runs this file under every supported ansible-core: the callback
reads ansible's task results, whose shape changed between releases (2.19 made them
public), so a version that breaks it shows here as a missing summary or error text.
"""

from __future__ import annotations

import pytest
import yaml

from tests.helpers import run_playbook, simulator_site_config
from tests.integration.passes import (
    MEMBERSHIP_PASS,
    ORDER_PASS,
    REPORT_PASS,
    assert_done,
    assert_erred,
    log_lines,
    order_machine,
    set_flag,
)
from tests.simulators.waldur import presets as W

pytestmark = [pytest.mark.integration, pytest.mark.smoke]

LIMITS = {"cpu": 1, "ram": 1024, "disk": 25600}
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ7b3Jk9V1g3G5m0Yq2p1a8yQ0b3fH9sL2kX4cP7wRt smoke@example"


def _run(playbook, config):
    return run_playbook(playbook, env={"WALDUR_SITE_AGENT_CONFIG": str(config),
                                       "ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"})


def _summaries(records, name):
    return {record["offering"]: record for record in records
            if record["event"] == "pass summary" and str(record.get("pass")).split()[0] == name}


def test_order_report_and_membership_passes_log_summaries_and_errors(tmp_path, waldur_sim, do_sim, azure_sim):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(simulator_site_config(waldur_sim.url, do_url=do_sim.url,
                                                           azure_url=azure_sim.url)))
    droplet_order, droplet_resource = order_machine(waldur_sim, W.DO_OFFERING_UUID, W.DO_PLAN_UUID,
                                                    "smoke-droplet", LIMITS)
    # a region DigitalOcean lists as available but refuses the create in: approved, then erred
    do_sim.app.restrict_region("sfo3")
    bad_order, dummy = order_machine(waldur_sim, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "smoke-nowhere",
                                     LIMITS, region="sfo3")
    # a size DigitalOcean does not have: rejected before approval, nothing built
    odd_order, dummy = order_machine(waldur_sim, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "smoke-odd",
                                     LIMITS, size="huge-999")
    vm_order, vm_resource = order_machine(waldur_sim, W.AZURE_OFFERING_UUID, W.AZURE_PLAN_UUID,
                                          "smoke-vm", LIMITS, ssh_public_key=SSH_KEY)

    order_run = _run(ORDER_PASS, config)
    records = log_lines(order_run)
    assert records and all(set(record) >= {"event", "level", "timestamp"} for record in records), order_run.output
    summaries = _summaries(records, "order_process")
    assert sorted(summaries) == ["Azure VM", "DigitalOcean VM"], order_run.output
    # The default preset holds one pending order per offering besides the ones made here.
    assert (summaries["DigitalOcean VM"]["done"], summaries["DigitalOcean VM"]["erred"],
            summaries["DigitalOcean VM"]["rejected"]) == (2, 1, 1)
    assert (summaries["Azure VM"]["done"], summaries["Azure VM"]["erred"], summaries["Azure VM"]["rejected"]) == \
        (2, 0, 0)
    # The erred order's reason is logged as its own error line, naming the order; the rejected
    # one's as a warning line.
    errors = [record for record in records if record["level"] == "error"]
    assert any(bad_order.replace("-", "") in str(record.get("order", "")).replace("-", "")
               and "region is not available" in record["event"].lower() for record in errors), errors
    warnings = [record for record in records if record["level"] == "warning"]
    assert any(odd_order.replace("-", "") in str(record.get("order", "")).replace("-", "")
               and record.get("outcome") == "rejected" and "huge-999" in record["event"] for record in warnings), \
        warnings
    assert_done(waldur_sim, droplet_order)
    assert_done(waldur_sim, vm_order)
    assert_erred(waldur_sim, bad_order, "Region is not available")
    assert waldur_sim.app.order(odd_order)["state"] == "rejected"
    assert not any(droplet["name"] == "smoke-odd" for droplet in do_sim.app.droplets())

    set_flag(waldur_sim, droplet_resource, "paused", True)
    set_flag(waldur_sim, vm_resource, "paused", True)
    membership = _summaries(log_lines(_run(MEMBERSHIP_PASS, config)), "membership_sync")
    assert sorted(membership) == ["Azure VM", "DigitalOcean VM"]
    droplets = {str(droplet["id"]): droplet["status"] for droplet in do_sim.app.droplets()}
    assert droplets[waldur_sim.app.resource(droplet_resource)["backend_id"]] == "off"

    report = _summaries(log_lines(_run(REPORT_PASS, config)), "report")
    assert sorted(report) == ["Azure VM", "DigitalOcean VM"]
    stored = waldur_sim.app.usages(vm_resource)
    assert {usage["type"] for usage in stored} >= {"cpu", "ram"}, stored
