"""Evidence before action on DigitalOcean (issue 22): the real order pass and do_droplet, the real
python-digitalocean over HTTP, against the simulators. One test per harm the issue reproduced,
plus the healthy world: copies one order's overlapping agent runs made are still cleaned up."""

from __future__ import annotations

import datetime
import json
import time
import uuid

import pytest

from tests.helpers import run_playbook
from tests.integration.passes import (
    ORDER_PASS, assert_done, kill_pass_during, log_lines, order_machine, terminate, write_config)
from tests.integration.test_do_passes import seed_machine
from tests.simulators.digitalocean import presets as DO
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

ACT = "Carry out the orders on DigitalOcean"


def tag(resource_uuid: str) -> str:
    return "waldur-resource:" + resource_uuid


def iso(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def order_pass(config, json_log=True):
    """The order pass as the timer runs it; its exit status is the test's to check."""
    env = {"WALDUR_SITE_AGENT_CONFIG": str(config)}
    if json_log:
        env["ANSIBLE_STDOUT_CALLBACK"] = "waldur.site_agent.waldur_json"
    return run_playbook(ORDER_PASS, env=env)


def said(run, order_uuid: str) -> str:
    """What the DigitalOcean step said about an order."""
    return " ".join(line["event"] for line in log_lines(run) if line.get("task") == ACT and line.get("order") == order_uuid)


def do_module(tmp_path, do, module="do_droplet", **args) -> dict:
    out = tmp_path / ("%s-%s.json" % (module, uuid.uuid4().hex[:6]))
    play = [{"name": "DigitalOcean", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "tasks": [
                 {"name": "Act", "waldur.site_agent.%s" % module: dict(
                     {"token": DO.DO_TOKEN, "api_url": do.url + "/v2/"}, **args),
                  "register": "out", "ignore_errors": True},
                 {"name": "Save", "ansible.builtin.copy": {
                     "content": "{{ out | to_json }}", "dest": str(out), "mode": "0600"}}]}]
    run = run_playbook(play)
    assert out.exists(), run.output[-4000:]
    return dict(json.loads(out.read_text()), _output=run.output)


# ---- harm 1: a look-alike beside the droplet a crashed pass made --------------------------------

def test_a_look_alike_beside_the_droplet_a_crashed_pass_made_is_kept_and_so_is_ours(tmp_path, waldur_sim, do_sim):
    """A pass creates the preset order's droplet and dies before settling. Someone has made a
    look-alike by hand: same name, size and owner tag, in sfo3, 5 minutes older. Before, the next
    pass destroyed the agent's droplet and adopted the look-alike ("oldest kept")."""
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    kill_pass_during(do, config, "droplets.create")
    [ours] = do.app.droplets()
    made = datetime.datetime.strptime(ours["created_at"], "%Y-%m-%dT%H:%M:%SZ")
    look_alike = do.app.seed_droplet(ours["name"], region="sfo3", size=ours["size_slug"], tags=list(ours["tags"]),
                                     created_at=iso(made - datetime.timedelta(minutes=5)))
    since = len(do.app.calls)

    run = order_pass(config)

    # both are kept, none adopted: the order is left for the operator and the pass is not green
    assert sorted(d["id"] for d in do.app.droplets()) == sorted([ours["id"], look_alike["id"]])
    assert [call["operation"] for call in do.app.write_calls(since)] == []
    order = waldur.app.order(W.DO_ORDER_UUID)
    assert (order["state"], order["error_message"]) == ("executing", "")
    assert waldur.app.resource(W.DO_RESOURCE_UUID)["backend_id"] == ""
    assert run.rc != 0, run.output[-4000:]
    # one line names both droplets (id, region, size, creation time) and why they are not copies
    line = said(run, W.DO_ORDER_UUID)
    for droplet in (ours, look_alike):
        assert "%s %s (%s, %s, created %s)" % (droplet["id"], droplet["name"], droplet["region"]["slug"],
                                               droplet["size_slug"], droplet["created_at"]) in line, line
    assert "none was deleted or adopted" in line
    assert "differs from the order (region sfo3, not ams3)" in line
    assert "held for the operator" in run.stdout


# ---- harm 2: Terminate deleted whatever carried the tag -------------------------------------------

def test_terminate_deletes_the_recorded_droplet_and_keeps_a_look_alike_with_a_copied_tag(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    resource_uuid, recorded = seed_machine(waldur, do, "doomed")
    copy = do.app.seed_droplet("doomed", tags=["waldur", tag(resource_uuid)])  # an overlapping run's copy
    look_alike = do.app.seed_droplet("someones-db", tags=[tag(resource_uuid)])  # the tag copied by hand
    order_uuid = terminate(waldur, resource_uuid)

    run = order_pass(config)

    assert run.rc == 0, run.output[-4000:]
    assert_done(waldur, order_uuid)
    assert [d["id"] for d in do.app.droplets()] == [look_alike["id"]]
    assert sorted(call["path"] for call in do.app.calls_of("droplets.delete")) == sorted(
        "/v2/droplets/%d" % droplet["id"] for droplet in (recorded, copy))
    line = said(run, order_uuid)
    assert "deleted droplet %s" % recorded["id"] in line and "also deleted droplet(s) %s" % copy["id"] in line
    assert ("kept droplet(s) %s someones-db (ams3, s-1vcpu-1gb, created %s) carrying tag %s: not a name the agent "
            "derives for this resource (doomed, waldur-%s)" % (look_alike["id"], look_alike["created_at"],
                                                               tag(resource_uuid), resource_uuid[:8])) in line


def test_terminate_by_backend_id_keeps_a_droplet_carrying_another_resources_tag(tmp_path, waldur_sim, do_sim):
    """Waldur records a droplet that carries another resource's mark (a backend id set by hand, or
    restored from a backup): deleting it would destroy another resource's machine."""
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    resource_uuid, owner_uuid = uuid.uuid4().hex, uuid.uuid4().hex
    theirs = do.app.seed_droplet("theirs", tags=["waldur", tag(owner_uuid)])
    legacy = do.app.seed_droplet("legacy")  # made before owner tags: no waldur-resource tag at all
    waldur.app.seed_resource(W.DO_OFFERING_UUID, "mine", uuid=resource_uuid, backend_id=str(theirs["id"]),
                             limits=dict(W.DO_PLAN_QUOTAS))
    legacy_uuid = uuid.uuid4().hex
    waldur.app.seed_resource(W.DO_OFFERING_UUID, "legacy", uuid=legacy_uuid, backend_id=str(legacy["id"]),
                             limits=dict(W.DO_PLAN_QUOTAS))
    held_order, legacy_order = terminate(waldur, resource_uuid), terminate(waldur, legacy_uuid)

    run = order_pass(config)

    assert run.rc != 0
    assert do.app.droplet(theirs["id"]) is not None
    order = waldur.app.order(held_order)
    assert (order["state"], order["error_message"]) == ("executing", "")
    assert "kept droplet %s theirs" % theirs["id"] in said(run, held_order)
    assert "carries %s, not %s alone" % (tag(owner_uuid), tag(resource_uuid)) in said(run, held_order)
    # the legacy path stays: the exact id Waldur records, and the message says so
    assert_done(waldur, legacy_order)
    assert do.app.droplet(legacy["id"]) is None
    assert "deleted droplet %s (legacy: it carries no waldur-resource tag" % legacy["id"] in said(run, legacy_order)


# ---- harm 3: two creates of one batch deriving one droplet name -----------------------------------

def test_two_creates_of_one_batch_deriving_one_name_are_refused_before_any_write(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    first = order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "Web 1", W.DO_PLAN_QUOTAS)
    second = order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "web-1", W.DO_PLAN_QUOTAS)
    other = order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "web-2", W.DO_PLAN_QUOTAS)

    run = order_pass(config)

    assert run.rc != 0
    [made] = do.app.droplets()  # only the third order's
    assert made["tags"] == ["waldur", tag(other[1])]
    assert_done(waldur, other[0])
    for order_uuid, resource_uuid in (first, second):
        order = waldur.app.order(order_uuid)
        assert (order["state"], order["error_message"]) == ("executing", "")
        line = said(run, order_uuid)
        assert "refused before any write" in line and "same name web-1" in line, line
        for other_order, other_resource in (first, second):
            assert "resource %s (order %s)" % (other_resource, other_order) in line
    assert len(do.app.calls_of("droplets.create")) == 1


# ---- harm 4: a DigitalOcean endpoint over plain http:// -------------------------------------------

def test_a_plain_http_endpoint_is_warned_about_naming_the_option_never_the_token(tmp_path, do_sim):
    out = do_module(tmp_path, do_sim, "do_account_info", api_url="http://do-api.invalid/v2/", max_retry_seconds=0,
                    timeout=2)
    assert out["failed"] is True  # nothing answers there
    assert ("api_url: plain http:// to do-api.invalid: the DigitalOcean token crosses the network unencrypted; "
            "use https://") in out.get("warnings", []), out
    assert DO.DO_TOKEN not in out["_output"]
    # this host (the simulators, a tunnel) is not warned about
    quiet = do_module(tmp_path, do_sim, "do_account_info")
    assert not [w for w in quiet.get("warnings", []) if "plain http" in w]


# ---- harm 5: a 429 with a long Retry-After --------------------------------------------------------

def test_a_long_retry_after_never_holds_a_call_past_the_deadline(tmp_path, do_sim):
    do = do_sim
    # the first listing (the batch's prefetch) and the first create are throttled for 100 s, far
    # past the module's deadline of 20 s (and within max_retry_seconds, so it used to be waited out)
    do.app.add_fault("droplets.list", status=429, retry_after=100)
    do.app.add_fault("droplets.create", status=429, retry_after=100)
    items = [{"resource_uuid": uuid.uuid4().hex, "name": "throttled-%d" % index, "region": "ams3",
              "image": "ubuntu-22-04-x64", "size": "s-1vcpu-1gb"} for index in range(2)]

    started = time.monotonic()
    out = do_module(tmp_path, do, droplets=items, deadline=20, max_workers=1)
    elapsed = time.monotonic() - started

    assert elapsed < 20 + 15, elapsed  # the module's deadline, plus ansible's start-up
    throttled, created = out["results"]
    assert (throttled["failed"], throttled["retry"], throttled["changed"]) == (True, True, False)
    assert "asked to wait 100 seconds (Retry-After), past the module's deadline" in throttled["msg"]
    assert (created["failed"], created["action"]) == (False, "created")
    assert [d["name"] for d in do.app.droplets()] == ["throttled-1"]


# ---- counts are true: a refused create changed nothing --------------------------------------------

def test_a_create_digitalocean_refuses_changes_nothing(tmp_path, do_sim):
    out = do_module(tmp_path, do_sim, droplets=[{"resource_uuid": uuid.uuid4().hex, "name": "odd", "region": "ams3",
                                                 "image": "ubuntu-22-04-x64", "size": "no-such-size"}])
    [result] = out["results"]
    assert result["failed"] is True and "422" in result["msg"]
    assert result["changed"] is False and out["changed"] is False
    assert do_sim.app.droplets() == []


# ---- the healthy world: copies one order's overlapping runs made ----------------------------------

def test_identical_copies_made_after_the_order_are_still_cleaned_up_keeping_the_oldest(tmp_path, waldur_sim, do_sim):
    """Two agent runs overlapped and each created the preset order's droplet before being killed:
    the copies match the order in every attribute, carry only its tags and were made after it, so
    the next pass keeps the oldest (neither is known to Waldur, they are alike) and deletes the other.
    The same two made before the order could be anyone's: both are kept."""
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    time.sleep(1.1)  # DigitalOcean's created_at has whole seconds: the copies come a second after the order
    kill_pass_during(do, config, "droplets.create")
    [first] = do.app.droplets()
    second = do.app.seed_droplet(first["name"], region=first["region"]["slug"], size=first["size_slug"],
                                 image=first["image"]["slug"], tags=list(first["tags"]))

    run = order_pass(config)

    assert run.rc == 0, run.output[-4000:]
    assert_done(waldur, W.DO_ORDER_UUID)
    assert [d["id"] for d in do.app.droplets()] == [first["id"]]
    assert waldur.app.resource(W.DO_RESOURCE_UUID)["backend_id"] == str(first["id"])
    assert "deleted duplicate droplet(s) %s" % second["id"] in said(run, W.DO_ORDER_UUID)


def test_identical_droplets_older_than_the_order_are_kept(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    before = iso(datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=2))
    twins = [do.app.seed_droplet("do-vm-1", tags=["waldur", tag(W.DO_RESOURCE_UUID)], created_at=before)
             for _index in range(2)]

    run = order_pass(config)

    assert run.rc != 0
    assert sorted(d["id"] for d in do.app.droplets()) == sorted(d["id"] for d in twins)
    assert do.app.calls_of("droplets.delete") == [] and do.app.calls_of("droplets.create") == []
    assert "was created before the order" in said(run, W.DO_ORDER_UUID)
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "executing"
