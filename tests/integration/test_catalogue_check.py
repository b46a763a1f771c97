"""Nothing approved that the cloud cannot build: the order pass checks what the orders name
against the cloud's catalogue before approving any (the real playbooks, the real SDKs over HTTP,
the session simulators)."""

from __future__ import annotations

import pytest

from tests.helpers import run_playbook
from tests.integration.passes import ORDER_PASS, call_waldur, log_lines, order_machine, run_pass, write_config
from tests.simulators.azure import presets as AZ
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

NAME_LINES = "Name each order"


def summary_of(run) -> dict:
    [summary] = [line for line in log_lines(run) if line["event"] == "pass summary"]
    return summary


def named_lines(run) -> list[str]:
    [named] = [line["msg"] for line in log_lines(run) if line.get("task", "").startswith(NAME_LINES)]
    return named


def test_orders_naming_what_digitalocean_lacks_are_rejected_before_approval(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    good = [order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "vm-%02d" % index, W.DO_PLAN_QUOTAS)[0]
            for index in range(17)]
    bad = {
        "region": order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "bad-region", W.DO_PLAN_QUOTAS,
                                region="xx9")[0],
        "size": order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "bad-size", W.DO_PLAN_QUOTAS,
                              size="huge-999")[0],
        "image": order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "bad-image", W.DO_PLAN_QUOTAS,
                               image="no-such-image")[0],
    }
    reasons = {"region": "region 'xx9' is not a DigitalOcean region",
               "size": "size 'huge-999' is not a DigitalOcean droplet size",
               "image": "image 'no-such-image' is neither a DigitalOcean image nor a snapshot"}

    check = run_pass(ORDER_PASS, config, check=True, json_log=True)

    summary = summary_of(check)
    assert (summary["orders"], summary["would_done"], summary["would_reject"]) == (20, 17, 3)
    named = named_lines(check)
    for what, order_uuid in bad.items():
        [line] = [line for line in named if order_uuid in line]
        assert line.startswith("would_reject: bad-%s (order %s): " % (what, order_uuid)) and reasons[what] in line
        [logged] = [line for line in log_lines(check) if line.get("order") == order_uuid]
        assert (logged["outcome"], logged["state"], logged["level"]) == ("would_reject", "pending-provider", "warning")
        assert reasons[what] in logged["event"]
        assert waldur.app.order(order_uuid)["state"] == "pending-provider"
    assert do.app.droplets() == []

    do_since = len(do.app.calls)
    run = run_pass(ORDER_PASS, config, json_log=True)

    summary = summary_of(run)
    assert (summary["done"], summary["rejected"], summary["machines_changed"]) == (17, 3, 17)
    logged = dict((line["order"], line) for line in log_lines(run) if line.get("outcome") == "rejected")
    assert sorted(logged) == sorted(bad.values())
    for what, order_uuid in bad.items():
        order = waldur.app.order(order_uuid)
        assert order["state"] == "rejected" and reasons[what] in order["provider_rejection_comment"]
        assert waldur.app.resource(order["marketplace_resource_uuid"])["state"] == "Terminated"
    assert all(waldur.app.order(order_uuid)["state"] == "done" for order_uuid in good)
    # one droplet per approved order, none for the three: the only creates are the 17
    creates = [call for call in do.app.calls[do_since:] if call["operation"] == "droplets.create"]
    assert len(creates) == 17 and len(do.app.droplets()) == 17
    assert {droplet["name"] for droplet in do.app.droplets()} == {"vm-%02d" % index for index in range(17)}
    # the catalogue is read once for the offering: regions, sizes and each image named
    catalogue = [call["operation"] for call in do.app.calls[do_since:]
                 if call["operation"] in ("regions.list", "sizes.list", "images.get")]
    assert sorted(catalogue) == ["images.get", "images.get", "regions.list", "sizes.list"]


def test_an_executing_order_that_cannot_be_built_is_erred_before_any_cloud_write(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    order_uuid = order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "late", W.DO_PLAN_QUOTAS,
                               region="blr1", size="c-2")[0]
    # approved by an earlier pass that was killed before it built anything
    call_waldur(waldur, "/api/marketplace-orders/%s/approve_by_provider/" % order_uuid, {}, token=W.PROVIDER_TOKEN)

    run = run_pass(ORDER_PASS, config, json_log=True)

    order = waldur.app.order(order_uuid)
    assert order["state"] == "erred" and "size 'c-2' is not offered in region 'blr1'" in order["error_message"]
    assert summary_of(run)["erred"] == 1 and do.app.write_calls(0) == []


def test_the_offering_default_missing_from_the_catalogue_fails_the_offering_and_approves_nothing(
        tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do, default_image="ubuntu-99-04-x64")

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)})

    assert run.rc != 0
    assert "backend_settings.default_image: image 'ubuntu-99-04-x64'" in run.output
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"
    assert do.app.write_calls(0) == []


def test_an_azure_order_naming_a_size_the_location_lacks_is_rejected_and_the_others_built(
        tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    config = write_config(tmp_path, waldur, azure=azure)
    bad = order_machine(waldur, W.AZURE_OFFERING_UUID, W.AZURE_PLAN_UUID, "bad-size", W.AZURE_PLAN_QUOTAS,
                        location="northeurope", size="Standard_E2s_v3", ssh_public_key=AZ.SEED_SSH_PUBLIC_KEY)[0]

    run = run_pass(ORDER_PASS, config, json_log=True)

    order = waldur.app.order(bad)
    assert order["state"] == "rejected"
    assert "size 'Standard_E2s_v3' is not offered in location 'northeurope'" in order["provider_rejection_comment"]
    assert waldur.app.order(W.AZURE_ORDER_UUID)["state"] == "done"
    summary = summary_of(run)
    assert (summary["done"], summary["rejected"], summary["machines_changed"]) == (1, 1, 1)
    assert not any(op["operation"] == "vms.put" and "bad-size" in op.get("path", "")
                   for op in azure.app.calls)
