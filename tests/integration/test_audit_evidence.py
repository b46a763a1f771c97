"""audit_cleanup deletes on evidence, never on an absence (issue 22, rule 2), through the real
playbooks/audit.yml over the simulators: a direct read of each candidate resource in Waldur by
the UUID on its mark, the youngest object deciding the age, nothing foreign in a holding, and a
circuit breaker for views that would delete too much."""

from __future__ import annotations

import pytest
import requests

from tests.integration.azure_state import all_vms, arm, arm_ids, dedicated_group
from tests.integration.test_audit import (
    OLD,
    azure_tags,
    new_uuid,
    ago,
    report,
    run_audit,
    seed_chain_resource,
    write_site_config,
)
from tests.simulators.common import json_response
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration


def listing_without(waldur, left_out: set[str]) -> list[dict]:
    """What Waldur's listing of the Azure offering's resources answers, less ``left_out``."""
    response = requests.get(waldur.url + "/api/marketplace-provider-resources/", timeout=10,
                            params={"offering_uuid": W.AZURE_OFFERING_UUID, "page_size": 300},
                            headers={"Authorization": "Token " + W.PROVIDER_TOKEN})
    response.raise_for_status()
    return [item for item in response.json() if item["uuid"].replace("-", "") not in left_out]


def answer_listing(waldur, items: list[dict]) -> None:
    """Waldur's listings of resources answer ``items``, whole as far as the answer says (its
    ``X-Result-Count`` the number of items): a view that lies well, as a restored or wrong Waldur's."""
    original = waldur.app._injected

    def answer(operation, *args, **kwargs):
        if operation == "resources.list":
            return json_response(items, 200, {"X-Result-Count": str(len(items))})
        return original(operation, *args, **kwargs)

    waldur.app._injected = answer


def no_arm_deletes(azure, since: int) -> bool:
    return [call for call in azure.app.calls[since:] if call["method"] == "DELETE"] == []


@pytest.mark.parametrize("view", ["empty", "html", "one record missing"])
def test_a_partial_view_of_waldur_deletes_nothing(tmp_path, waldur_sim, azure_sim, view):
    """Waldur's listing answers 200 [] / a 200 HTML page / lacks a record: every VM stays."""
    waldur, azure = waldur_sim, azure_sim
    machines = [seed_chain_resource(waldur, azure, "live-%d" % index, created_hours=OLD)[1] for index in range(3)]
    missing_uuid = seed_chain_resource(waldur, azure, "left-out", created_hours=OLD)[0]
    config = write_site_config(tmp_path, waldur, azure=azure)
    if view == "empty":
        answer_listing(waldur, [])
    elif view == "one record missing":
        answer_listing(waldur, listing_without(waldur, {missing_uuid}))
    else:
        waldur.app.add_fault("resources.list", kind="html", times=-1)  # a proxy's maintenance page
    before, since = arm_ids(azure), len(azure.app.calls)

    try:
        run = run_audit(tmp_path, config, audit_cleanup=True)
    finally:
        waldur.app.__dict__.pop("_injected", None)

    with waldur.app.lock:  # the injected answers are not Waldur's schema on purpose
        waldur.app.exchanges.clear()
    assert run.rc != 0, run.output[-3000:]
    assert arm_ids(azure) == before and no_arm_deletes(azure, since)
    assert all(machine.lower() in arm_ids(azure) for machine in machines)
    if view == "one record missing":
        # the left-out resource was read directly: Waldur answers OK, so its machine is kept
        data = report(tmp_path, "Azure VM")
        kept = [item for item in data["findings"] if item["resource_uuid"] == missing_uuid]
        assert kept and kept[0]["cleanup"] == "kept: a direct read of resource %s in Waldur answered OK" % missing_uuid
        assert [call for call in waldur.app.calls if call["operation"] == "resources.get"
                and missing_uuid in call["path"].replace("-", "")]
    elif view == "empty":
        assert "AUDIT CLEANUP REFUSED, nothing deleted" in run.stdout
        assert "Waldur lists no resource of this offering" in run.stdout
    else:
        assert "Waldur GET /api/marketplace-provider-resources/ (HTTP 200) is not proof: answered text/html" in run.output


def test_the_circuit_breaker_refuses_more_than_audit_cleanup_max(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    seed_chain_resource(waldur, azure, "healthy")
    orphans = [seed_chain_resource(waldur, azure, "orphan-%d" % index, created_hours=OLD, register=False)[1]
               for index in range(3)]
    config = write_site_config(tmp_path, waldur, azure=azure)
    before, since = arm_ids(azure), len(azure.app.calls)

    run = run_audit(tmp_path, config, audit_cleanup=True, audit_cleanup_max=2)

    assert run.rc != 0 and arm_ids(azure) == before and no_arm_deletes(azure, since)
    assert "it would delete 3 holdings, more than audit_cleanup_max=2" in run.stdout
    data = report(tmp_path, "Azure VM")
    assert data["cleanup"]["refused"].startswith("it would delete 3 holdings")
    # within the bound the same three are marked, then (past the grace period) go, and nothing else
    run = run_audit(tmp_path, config, audit_cleanup=True, audit_cleanup_max=3)
    assert report(tmp_path, "Azure VM")["counts"]["marked"] == 3, run.output[-3000:]
    assert arm_ids(azure) == before and no_arm_deletes(azure, since)
    run = run_audit(tmp_path, config, audit_cleanup=True, audit_cleanup_max=3, audit_cleanup_grace_hours=0)
    assert report(tmp_path, "Azure VM")["counts"]["deleted"] == 3, run.output[-3000:]
    assert not any(machine.lower() in {vm.lower() for vm in all_vms(azure)} for machine in orphans)


def test_a_young_machine_in_an_old_orphan_group_is_not_deleted(tmp_path, waldur_sim, azure_sim):
    """The group of ours is 48 h old, but an untagged machine was put in it an hour ago."""
    waldur, azure = waldur_sim, azure_sim
    seed_chain_resource(waldur, azure, "healthy")
    orphan_uuid = new_uuid()
    group = dedicated_group(orphan_uuid, "old-build")
    azure.app.seed_vm("old-build", group, chain_tags=azure_tags(orphan_uuid), group_tags=azure_tags(orphan_uuid),
                      created=ago(48))
    young = azure.app.seed_vm("someones-test", group, group_tags=azure_tags(orphan_uuid), created=ago(1))
    config = write_site_config(tmp_path, waldur, azure=azure)
    since = len(azure.app.calls)

    run = run_audit(tmp_path, config, audit_cleanup=True)

    assert run.rc != 0
    assert young.lower() in arm_ids(azure) and arm(group).lower() in arm_ids(azure)
    assert no_arm_deletes(azure, since)
    finding = next(item for item in report(tmp_path, "Azure VM")["findings"] if item["resource_uuid"] == orphan_uuid)
    assert finding["cleanup"].startswith("kept")
