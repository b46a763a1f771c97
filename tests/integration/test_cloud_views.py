"""Issue 22, rule 3 on the cloud side: a DigitalOcean or ARM answer of 2xx whose body is not the
JSON the call expects (a proxy's HTML page, a truncated body, a list where an object belongs) fails
the offering naming the call; it is never read as an empty listing, and nothing is written.

Real playbooks, the real python-digitalocean and Azure SDKs, against the simulators; a spoilt
answer is a simulator fault of a ``kind`` (tests/simulators/common.py)."""

from __future__ import annotations

import pytest

from tests.integration.passes import MEMBERSHIP_PASS, REPORT_PASS, waldur_writes
from tests.integration.test_waldur_views import (
    AUDIT_PASS,
    run_pass,
    seed_droplet_resource,
    seed_vm_resource,
    write_config,
)
from tests.simulators.azure import presets as AZ
from tests.simulators.digitalocean import presets as DO

pytestmark = pytest.mark.integration

DROPLET_READS = ("droplets.list", "droplets.get")
VM_READS = ("vms.list_all", "vms.get", "vms.instance_view")
CASES = {
    # name: (playbook, backend, spoilt operations, kind, what the failure names)
    "membership-droplets-html": (MEMBERSHIP_PASS, "digitalocean", DROPLET_READS, "html",
                                 "instead of a JSON object; nothing in it is trusted: GET /v2/droplets"),
    "membership-droplets-truncated": (MEMBERSHIP_PASS, "digitalocean", DROPLET_READS, "truncated",
                                      "instead of a JSON object; nothing in it is trusted: GET /v2/droplets"),
    "report-vms-html": (REPORT_PASS, "azure", VM_READS, "html", "with text/html"),
    "report-vms-truncated": (REPORT_PASS, "azure", VM_READS, "truncated", "instead of a JSON object"),
    # the SDK's own models: the audit's listing of the offering's resource groups
    "audit-groups-html": (AUDIT_PASS, "azure", ("resource_groups.list",), "html", "/resourcegroups with text/html"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_spoilt_cloud_listing_fails_the_offering_naming_the_call(tmp_path, waldur_sim, do_sim, azure_sim, name):
    playbook, backend, operations, kind, named = CASES[name]
    waldur = waldur_sim
    if backend == "azure":
        seed_vm_resource(waldur, azure_sim, "measured")
        config = write_config(tmp_path, waldur, azure=azure_sim)
        cloud = azure_sim
    else:
        seed_droplet_resource(waldur, do_sim, "listed")
        config = write_config(tmp_path, waldur, do=do_sim)
        cloud = do_sim
    for operation in operations:
        cloud.app.add_fault(operation, kind=kind, times=-1)
    since = len(waldur.app.calls)

    run = run_pass(playbook, config, tmp_path)

    assert run.rc != 0, run.output[-4000:]
    assert named.lower() in run.output.lower(), run.output[-4000:]
    assert waldur_writes(waldur, since) == []
    assert [call for call in cloud.app.write_calls() if call["operation"] != "token"] == []
    for secret in (DO.DO_TOKEN, AZ.CLIENT_SECRET):
        assert secret not in run.output
