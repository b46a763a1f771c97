"""Waldur as it really runs (real-waldur-samples.md section 6c): its order processor runs in a
background worker after the approval, and may err an order later, also one already done.

The real order_process playbook against the Waldur simulator with ``processing_delay`` (the
worker's lag) and 7.0.7's processor erring Updates, and the DigitalOcean simulator. Waldur and
the cloud must never disagree without the pass saying so."""

from __future__ import annotations

import uuid

import pytest
import yaml

from tests.helpers import REPO, run_playbook
from tests.integration.passes import (
    ORDER_PASS, assert_done, hold_calls, order_machine, start_pass, terminate, update_limits, write_config)
from tests.integration.test_order_pass import droplets_tagged, finish, named_lines, order_pass, summary_of
from tests.simulators.waldur import presets as W
from tests.simulators.waldur.simulator import PROFILES

pytestmark = pytest.mark.integration

LOAD_COMPONENTS = REPO / "playbooks" / "load_components.yml"
BIG = {"cpu": 2, "ram": 4096, "disk": 81920}
UPDATE_ERROR = "Can't switch from state '5' using method 'schedule_updating'"


@pytest.mark.parametrize("delay", [0, 0.5, 3])
def test_every_order_type_waits_for_waldurs_worker(tmp_path, waldur_sim, do_sim, delay):
    """Create, Update and Terminate through the order pass with Waldur 7.0.7's worker running the
    processor ``delay`` seconds after each approval. The first Update is erred by the processor
    (the resource's allocation is not OK): nothing is resized for it. Once the provider sets the
    allocation OK, the Update goes through."""
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    waldur.app.set_quirks(**dict(PROFILES["waldur_7"], processing_delay=delay))
    config = write_config(tmp_path, waldur, do)

    create, resource_uuid = order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "slow-1", W.DO_PLAN_QUOTAS)
    order_pass(config)
    assert_done(waldur, create)
    [droplet] = droplets_tagged(do, resource_uuid)
    assert droplet["size_slug"] == "s-1vcpu-1gb"

    refused = update_limits(waldur, resource_uuid, BIG)
    run = order_pass(config)
    # Waldur's worker erred the Update after the approval: the droplet keeps its size, and the
    # pass says why nothing was done
    assert waldur.app.order(refused)["state"] == "erred"
    assert do.app.droplet(droplet["id"])["size_slug"] == "s-1vcpu-1gb"
    assert [action["type"] for action in do.app.actions(droplet["id"])] == ["create"]  # no power off, no resize
    assert named_lines(run.stdout) == [
        "skipped: slow-1 (order %s): order erred by Waldur after approval: %s" % (refused, UPDATE_ERROR)]
    assert summary_of(run.stdout)["diverged"] == "0"

    waldur.app.set_backing_state(resource_uuid, "ok")  # the provider's marketplace-slurm-remote set_state
    resize = update_limits(waldur, resource_uuid, BIG)
    order_pass(config)
    assert_done(waldur, resize)
    assert do.app.droplet(droplet["id"])["size_slug"] == "s-2vcpu-4gb"
    assert waldur.app.resource(resource_uuid)["limits"] == BIG

    removal = terminate(waldur, resource_uuid)
    run = order_pass(config)
    assert_done(waldur, removal)
    assert do.app.droplets() == []
    assert waldur.app.resource(resource_uuid)["state"] == "Terminated"
    assert summary_of(run.stdout)["done"] == "1"


def test_orders_waldur_errs_after_the_backend_acted_are_diverged_and_fail_the_pass(tmp_path, waldur_sim, do_sim):
    """Waldur's worker ran late (the pass saw no sign it was still to come: both orders were set
    executing by hand, so Waldur never queued a processor that the pass could wait for, and the
    worker ran anyway). An Update is erred by it while the droplet is being resized (7.0.7: the
    allocation is not OK): Waldur keeps the old limits. A Create without a name is erred right
    after the pass set it done (7.0.7 reads attributes["name"]): its droplet is behind an Erred
    resource. Both end diverged, named with what each side holds, and the pass exits non-zero."""
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    waldur.app.set_quirks(processor_errs_updates=True)
    config = write_config(tmp_path, waldur, do)
    nameless = waldur.app.seed_order(W.DO_OFFERING_UUID, state="executing", name="nameless-1",
                                     attributes={"name": ""}, limits=W.DO_PLAN_QUOTAS)
    grown_uuid = uuid.uuid4().hex
    droplet = do.app.seed_droplet("grown", size="s-1vcpu-1gb", tags=["waldur", "waldur-resource:" + grown_uuid])
    waldur.app.seed_resource(W.DO_OFFERING_UUID, "grown", uuid=grown_uuid, backend_id=str(droplet["id"]),
                             limits=W.DO_PLAN_QUOTAS, attributes={"name": "grown"})
    update = waldur.app.seed_order(W.DO_OFFERING_UUID, type="Update", state="executing",
                                   resource_uuid=grown_uuid, limits=BIG)
    waldur.app.process_after("orders.set_state_done", nameless["uuid"])
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

    [created] = droplets_tagged(do, nameless["marketplace_resource_uuid"])
    assert waldur.app.order(nameless["uuid"])["state"] == "erred"
    assert waldur.app.resource(nameless["marketplace_resource_uuid"])["state"] == "Erred"
    assert do.app.droplet(droplet["id"])["size_slug"] == "s-2vcpu-4gb"
    assert waldur.app.order(update["uuid"])["state"] == "erred"
    assert waldur.app.resource(grown_uuid)["limits"] == W.DO_PLAN_QUOTAS
    summary = summary_of(run.stdout)
    assert (summary["done"], summary["diverged"]) == ("0", "2")
    lines = dict((line.split(" (order ")[0], line) for line in named_lines(run.stdout))
    assert lines["diverged: nameless-1"].startswith(
        "diverged: nameless-1 (order %s): Waldur erred the order after the backend acted (Waldur: 'name'): "
        % nameless["uuid"])
    assert ("Waldur keeps resource nameless-1 Erred with limits cpu=1 disk=25600 ram=1024 and backend id %s"
            % created["id"]) in lines["diverged: nameless-1"]
    grown = lines["diverged: grown"]
    assert "Waldur erred the order after the backend acted (Waldur: %s)" % UPDATE_ERROR in grown
    assert "s-2vcpu-4gb" in grown
    assert "Waldur keeps resource grown OK with limits cpu=1 disk=25600 ram=1024" in grown
    assert "order(s) failed, were refused, were held for the operator or diverged from the cloud" in run.output


def test_load_components_run_twice_on_a_plan_with_resources_writes_nothing_the_second_time(
        tmp_path, waldur_sim, do_sim):
    """Waldur 7.0.7 keeps a plan's prices when it has resources and stores new ones as future
    prices: load_components says the price applies from the next period, and converges."""
    waldur = waldur_sim
    waldur.app.set_quirks(**PROFILES["waldur_7"])  # the default preset's pending Create uses the plan
    config = write_config(tmp_path, waldur, do_sim)
    settings = yaml.safe_load(config.read_text())
    settings["offerings"] = settings["offerings"][:1]
    settings["offerings"][0]["backend_components"]["disk"]["price"] = 0.003
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    env = {"WALDUR_SITE_AGENT_CONFIG": str(config)}

    first = run_playbook(LOAD_COMPONENTS, env=env)
    assert first.rc == 0, first.output[-4000:]
    assert "priced from the next billing period: disk 0.0001 -> 0.003" in first.output
    plan = waldur.app.market.plans[W.DO_PLAN_UUID]
    assert str(plan["prices"]["disk"]) == "0.0001" and str(plan["future_prices"]["disk"]) == "0.003"

    since = len(waldur.app.calls)
    second = run_playbook(LOAD_COMPONENTS, env=env)
    assert second.rc == 0, second.output[-4000:]
    assert waldur.app.write_calls(since) == []
    assert "priced" not in second.output


# ---- words: a pass skipped on the lock, a pass that waited for it ------------------------------------

@pytest.mark.parametrize("extra, rc", [({"awx_job_id": 7}, 0), ({"agent_pass_lock_busy": "failed"}, 2)])
def test_a_pass_skipped_on_the_lock_says_skipped_and_never_unreachable_under_awx(
        tmp_path, waldur_sim, do_sim, extra, rc):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    arrived, release, restore = hold_calls(do.app, "droplets.create")
    try:
        first = start_pass(ORDER_PASS, config)
        assert arrived.wait(300), "the first pass never created the droplet"

        second = order_pass(config, rc=rc, agent_pass_lock_wait=1, **extra)

        assert "UNREACHABLE" not in second.output
        assert "offering DigitalOcean VM: waited 1." in second.output
        assert "seconds for its pass lock, which another pass held; skipping it" in second.output
        assert "skipped: DigitalOcean VM (offering %s): the order_process pass of offering DigitalOcean VM" \
            % W.DO_OFFERING_UUID in second.output
        release.set()
        finish(first)
    finally:
        restore()
    assert_done(waldur, W.DO_ORDER_UUID)
