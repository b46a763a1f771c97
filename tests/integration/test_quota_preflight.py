"""Nothing approved past the cloud's quota (issue 39.1): the order pass reads the account's limits
before approving creates, approves what fits in the order the orders were placed, and leaves the rest
pending-provider, each named, ending with exit status 4 (work left for a later run). The real playbooks,
the real SDKs over HTTP, the session simulators."""

from __future__ import annotations

import pytest
import yaml

from tests.helpers import REPO, run_playbook, simulator_site_config
from tests.integration.passes import ORDER_PASS, assert_done, log_lines, order_machine, run_pass, write_config
from tests.simulators.azure import presets as AZ
from tests.simulators.azure.simulator import parse_vcpu_quotas
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

HEALTH = REPO / "playbooks" / "health.yml"
HELD_DO = ("DigitalOcean's droplet limit is 3 and 0 droplets exist, 3 more going to orders placed before it; this "
           "order needs 1 more; left pending-provider (raise the limit, or free a droplet)")


def summary_of(run) -> dict:
    [summary] = [line for line in log_lines(run) if line["event"] == "pass summary"]
    return summary


def named_lines(run) -> list[str]:
    [named] = [line["msg"] for line in log_lines(run) if line.get("task", "").startswith("Name each order")]
    return named


def place_droplets(waldur, count: int) -> list[str]:
    return [order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "web-%d" % index, W.DO_PLAN_QUOTAS)[0]
            for index in range(1, count + 1)]


def test_only_the_droplets_that_fit_in_the_droplet_limit_are_approved_the_rest_named_and_held(
        tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    do.app.configure(droplet_limit=3)
    config = write_config(tmp_path, waldur, do)
    orders = place_droplets(waldur, 5)

    check = run_pass(ORDER_PASS, config, check=True, json_log=True)

    summary = summary_of(check)
    assert (summary["orders"], summary["would_done"], summary["would_hold"]) == (5, 3, 2)
    held = [line for line in named_lines(check) if line.startswith("would_hold: ")]
    # the two placed last (Waldur lists the newest first, and so are the lines)
    assert sorted(held) == ["would_hold: web-%d (order %s): %s" % (index, orders[index - 1], HELD_DO)
                            for index in (4, 5)]
    assert all(waldur.app.order(order)["state"] == "pending-provider" for order in orders)
    assert do.app.droplets() == []

    run = run_pass(ORDER_PASS, config, json_log=True, rc=4)

    summary = summary_of(run)
    assert (summary["orders"], summary["done"], summary["held"], summary["machines_changed"]) == (5, 3, 2, 3)
    assert "failed" not in summary or summary["failed"] == 0
    for order in orders[:3]:
        assert_done(waldur, order)
    for index, order in ((4, orders[3]), (5, orders[4])):
        assert waldur.app.order(order)["state"] == "pending-provider"
        assert "held: web-%d (order %s): %s" % (index, order, HELD_DO) in named_lines(run)
    assert sorted(droplet["name"] for droplet in do.app.droplets()) == ["web-1", "web-2", "web-3"]
    # never asked of DigitalOcean: no create was refused for the limit
    assert [call["status"] for call in do.app.calls_of("droplets.create")] == [202, 202, 202]
    assert ("left for the next run: DigitalOcean VM (offering %s): 2 order(s) held pending-provider past the quota, "
            "named above" % W.DO_OFFERING_UUID) in run.stdout
    # the limit and the count: one read each, after the catalogue
    assert len(do.app.calls_of("account.get")) == 2 + 2  # the probe's and the check's, in each pass

    # a full account: the next pass holds both, naming the droplets that exist
    again = run_pass(ORDER_PASS, config, json_log=True, rc=4)
    assert ("held: web-4 (order %s): DigitalOcean's droplet limit is 3 and 3 droplets exist; this order needs 1 more; "
            "left pending-provider (raise the limit, or free a droplet)" % orders[3]) in named_lines(again)

    # raised: the next pass builds them, and the pass is green again
    do.app.configure(droplet_limit=5)
    run_pass(ORDER_PASS, config, json_log=True, rc=0)
    assert all(waldur.app.order(order)["state"] == "done" for order in orders)
    assert len(do.app.droplets()) == 5


def test_azure_approves_what_fits_in_the_family_quota_and_holds_the_rest(tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    azure.app.vcpu_quotas = parse_vcpu_quotas({"standardBSFamily": 4})
    config = write_config(tmp_path, waldur, azure=azure)
    orders = [order_machine(waldur, W.AZURE_OFFERING_UUID, W.AZURE_PLAN_UUID, "az-%d" % index, W.AZURE_PLAN_QUOTAS,
                            ssh_public_key=AZ.SEED_SSH_PUBLIC_KEY)[0] for index in (1, 2, 3)]
    held = ("az-3 (order %s): Azure's standardBSFamily vCPU quota in westeurope is 4 and 0 are in use, 4 more going to "
            "orders placed before it; this order's Standard_B2s needs 2 vCPUs more; left pending-provider (raise the "
            "quota, or free vCPUs in westeurope)" % orders[2])

    check = run_pass(ORDER_PASS, config, check=True, json_log=True)

    summary = summary_of(check)
    assert (summary["would_done"], summary["would_hold"]) == (2, 1)
    assert "would_hold: " + held in named_lines(check)

    run = run_pass(ORDER_PASS, config, json_log=True, rc=4)

    assert (summary_of(run)["done"], summary_of(run)["held"]) == (2, 1)
    assert "held: " + held in named_lines(run)
    assert_done(waldur, orders[0]) and assert_done(waldur, orders[1])
    assert waldur.app.order(orders[2])["state"] == "pending-provider"
    assert [call["status"] for call in azure.app.calls_of("vms.put")] == [200, 200] or \
        all(call["status"] < 300 for call in azure.app.calls_of("vms.put"))
    assert len(azure.app.calls_of("vms.put")) == 2  # nothing was sent for the third: ARM never refused it
    assert {call["operation"] for call in azure.app.calls} >= {"usages.list", "skus.list"}


@pytest.mark.parametrize("backend", ["digitalocean", "azure"])
def test_a_limits_read_answering_an_html_page_approves_nothing(tmp_path, waldur_sim, do_sim, azure_sim, backend):
    waldur = waldur_sim
    if backend == "digitalocean":
        config = write_config(tmp_path, waldur, do_sim)
        do_sim.app.add_fault("account.get", kind="html", nth=2)  # the first is the probe's
        order, cloud = W.DO_ORDER_UUID, do_sim
        reason = ("DigitalOcean's droplet limit could not be read, so no order is approved: unproven: DigitalOcean "
                  "answered 200 OK with text/html")
    else:
        config = write_config(tmp_path, waldur, azure=azure_sim)
        azure_sim.app.add_fault("usages.list", kind="html", times=20)  # the SDK retries one
        order, cloud = W.AZURE_ORDER_UUID, azure_sim
        reason = ("Azure's vCPU quotas could not be read, so no order is approved: unproven: listing the vCPU quotas "
                  "of location westeurope: ARM answered GET /subscriptions/%s/providers/Microsoft.Compute/locations/"
                  "westeurope/usages with text/html" % AZ.SUBSCRIPTION_ID)

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)})

    assert run.rc == 2, run.output[-4000:]
    assert reason in " ".join(run.output.split()), run.output[-4000:]
    assert waldur.app.order(order)["state"] == "pending-provider"
    assert "approve_by_provider" not in [call["operation"] for call in waldur.app.write_calls(0)]
    assert [call for call in cloud.app.write_calls(0) if call["operation"] != "token"] == []  # signing in writes nothing


def test_health_shows_the_headroom_and_a_full_quota_is_still_ready(tmp_path, waldur_sim, do_sim, azure_sim):
    do_sim.app.configure(droplet_limit=3)
    for index in range(3):
        do_sim.app.seed_droplet("full-%d" % index, "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64", [])
    azure_sim.app.vcpu_quotas = parse_vcpu_quotas({"cores": 10, "standardBSFamily": 4})
    azure_sim.app.seed_vm("used", size="Standard_B2s")
    config = tmp_path / "site-agent.yaml"
    config.write_text(yaml.safe_dump(simulator_site_config(waldur_sim.url, do_sim.url, azure_sim.url)))

    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(config)})

    assert run.rc == 0, run.output[-4000:]
    assert "offering DigitalOcean VM: ready, " in run.output and ", DigitalOcean account active, droplets 3 of 3 used" \
        in run.output
    assert ("offering Azure VM: ready, " in run.output
            and " Enabled, vCPUs westeurope: 2 of 10 (standardBSFamily 2 of 4)" in run.output), run.output[-3000:]
    assert [call["query"] for call in do_sim.app.calls_of("droplets.list")] == ["page=1&per_page=1"]

    # a read of the quotas that fails is said, never NOT READY
    azure_sim.app.add_fault("usages.list", kind="html", times=20)  # the SDK retries one
    run = run_playbook(HEALTH, extra_vars={"agent_pass_config": str(config)})
    assert run.rc == 0 and "offering Azure VM: ready, " in run.output
    assert "vCPU headroom not read: Azure's vCPU quotas could not be read" in run.output
