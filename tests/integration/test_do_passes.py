"""The DigitalOcean passes end to end: the real order_process, membership_sync and report
playbooks, driven by the site agent configuration file, against the Waldur simulator
(orders placed as a consumer would, over HTTP) and the DigitalOcean simulator (the real
python-digitalocean over HTTP)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import requests

from tests.helpers import assert_verbose_module_output, run_playbook
from tests.integration.passes import (
    MEMBERSHIP_PASS, ORDER_PASS, REPORT_PASS, assert_done, assert_erred, hold_calls, kill_tree, log_lines,
    order_form_with, order_machine, run_pass, set_flag, start_pass, terminate, update_limits, waldur_writes, write_config)
from tests.simulators.digitalocean import presets as DO
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration


ACT = "Carry out the orders on DigitalOcean"
SETTLE = "Settle the orders in Waldur"
PROVIDER_KEY = W.SSH_KEYS[0]
# Limits of the size_mapping entry s-2vcpu-4gb, and limits no entry matches.
BIG = {"cpu": 2, "ram": 4096, "disk": 81920}
ODD = {"cpu": 3, "ram": 3072, "disk": 25600}
ODD_MESSAGE = ("limits cpu=3, disk=25600, ram=3072 match no size_mapping entry (size_mapping: s-1vcpu-1gb: cpu=1, "
               "disk=25600, ram=1024; s-2vcpu-4gb: cpu=2, disk=81920, ram=4096); the droplet is left unchanged")


# ---- configuration and passes ---------------------------------------------------------------

# ---- Waldur as its users drive it -------------------------------------------------------------

def order_droplet(waldur, name: str, limits: dict | None = None, **attributes) -> tuple[str, str]:
    """A consumer orders a droplet; (order uuid, marketplace resource uuid)."""
    return order_machine(waldur, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, name, limits or W.DO_PLAN_QUOTAS, **attributes)


def item_events(run) -> dict:
    """What each order's item said, per (task, order uuid), from the JSON log."""
    return {(line.get("task"), line.get("order")): line["event"] for line in log_lines(run) if line.get("order")}


def recap_changed(run) -> int:
    [changed] = re.findall(r"^localhost\s*:.*\bchanged=(\d+)", run.stdout, re.MULTILINE)
    return int(changed)


# ---- DigitalOcean as the simulator holds it ---------------------------------------------------

def tag(resource_uuid: str) -> str:
    return "waldur-resource:" + resource_uuid


def do_writes(do, since=0) -> list[str]:
    return [call["operation"] for call in do.app.write_calls(since)]


def droplet_of(waldur, do, resource_uuid: str) -> dict:
    """The droplet Waldur records as the resource's backend."""
    backend_id = waldur.app.resource(resource_uuid)["backend_id"]
    assert backend_id.isdigit(), backend_id
    droplet = do.app.droplet(int(backend_id))
    assert droplet is not None, backend_id
    return droplet


def seed_machine(waldur, do, name: str, status: str = "active", **resource_fields) -> tuple[str, dict]:
    """A resource Waldur already has, with its tagged droplet: (resource uuid, droplet)."""
    resource_uuid = uuid.uuid4().hex
    droplet = do.app.seed_droplet(name, tags=["waldur", tag(resource_uuid)], status=status)
    resource_fields.setdefault("limits", dict(W.DO_PLAN_QUOTAS))
    waldur.app.seed_resource(W.DO_OFFERING_UUID, name, uuid=resource_uuid, backend_id=str(droplet["id"]),
                             **resource_fields)
    return resource_uuid, droplet


def do_module(tmp_path: Path, do, module: str, **args) -> dict:
    """One DigitalOcean module task in a playbook; its registered result."""
    out = tmp_path / ("%s.json" % module)
    play = [{"name": "DigitalOcean", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "tasks": [
                 {"name": "Act", "waldur.site_agent.%s" % module: dict(
                     {"token": DO.DO_TOKEN, "api_url": do.url + "/v2/"}, **args), "register": "out"},
                 {"name": "Save", "ansible.builtin.copy": {
                     "content": "{{ out | to_json }}", "dest": str(out), "mode": "0600"}}]}]
    run = run_playbook(play)
    assert run.rc == 0, run.output[-6000:]
    return json.loads(out.read_text())


# ---- create, idempotence ----------------------------------------------------------------------

def test_orders_create_droplets_as_ordered_and_a_second_pass_changes_nothing(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    # The default preset's order takes the offering's defaults; this one orders its own
    # region, size, image, tags, user data and public key; the third names a service
    # provider key.
    custom_order, custom_uuid = order_droplet(
        waldur, "Build Box", region="fra1", size="s-2vcpu-4gb", image="debian-12-x64", tags=["team:blue"],
        user_data="#cloud-config\npackages: [htop]\n", ssh_public_key=DO.NEW_PUBLIC_KEY)
    keyed_order, keyed_uuid = order_droplet(waldur, "keyed", ssh_key=PROVIDER_KEY["uuid"])

    run = run_pass(ORDER_PASS, config, verbosity=3)

    for order_uuid in (W.DO_ORDER_UUID, custom_order, keyed_order):
        assert_done(waldur, order_uuid)
    preset = droplet_of(waldur, do, W.DO_RESOURCE_UUID)
    custom = droplet_of(waldur, do, custom_uuid)
    keyed = droplet_of(waldur, do, keyed_uuid)
    assert len(do.app.droplets()) == 3
    resource = waldur.app.resource(W.DO_RESOURCE_UUID)
    assert resource["state"] == "OK"
    assert resource["backend_metadata"]["droplet"]["id"] == preset["id"]
    assert resource["backend_metadata"]["droplet"]["status"] == "active"

    assert (preset["name"], preset["region"]["slug"], preset["size_slug"], preset["image"]["slug"]) == \
        ("do-vm-1", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64")
    assert preset["tags"] == ["waldur", tag(W.DO_RESOURCE_UUID)]
    assert preset["ssh_key_ids"] == []
    assert (custom["name"], custom["region"]["slug"], custom["size_slug"], custom["image"]["slug"]) == \
        ("build-box", "fra1", "s-2vcpu-4gb", "debian-12-x64")
    assert custom["tags"] == ["team:blue", tag(custom_uuid)]
    assert custom["user_data"] == "#cloud-config\npackages: [htop]\n"
    # each ordered public key was added to DigitalOcean once, found by its fingerprint, and attached
    [new_key] = [key for key in do.app.keys() if key["fingerprint"] == DO.NEW_KEY_FINGERPRINT]
    [provider_key] = [key for key in do.app.keys() if key["fingerprint"] == PROVIDER_KEY["fingerprint_md5"]]
    assert custom["ssh_key_ids"] == [new_key["id"]] and new_key["name"] == "waldur-" + custom_uuid[:8]
    assert keyed["ssh_key_ids"] == [provider_key["id"]]
    assert len(do.app.calls_of("keys.create")) == 2

    # -vvv prints module arguments and results: the DigitalOcean token is not among them
    assert_verbose_module_output(run.output)
    assert DO.DO_TOKEN not in run.output and W.PROVIDER_TOKEN not in run.output

    # a second pass has nothing to do: it writes nowhere and reports no change
    waldur_since, do_since = len(waldur.app.calls), len(do.app.calls)
    again = run_pass(ORDER_PASS, config)
    assert waldur_writes(waldur, waldur_since) == [] and do_writes(do, do_since) == []
    assert recap_changed(again) == 0


def test_check_mode_lists_what_each_order_would_do_and_writes_nothing(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    grow_uuid, grow = seed_machine(waldur, do, "grow")
    odd_uuid, dummy = seed_machine(waldur, do, "odd")
    doomed_uuid, doomed = seed_machine(waldur, do, "doomed")
    grow_order = update_limits(waldur, grow_uuid, BIG)
    odd_order = update_limits(waldur, odd_uuid, ODD)
    doomed_order = terminate(waldur, doomed_uuid)
    waldur_since, do_since = len(waldur.app.calls), len(do.app.calls)

    check = run_pass(ORDER_PASS, config, check=True, json_log=True)

    assert waldur_writes(waldur, waldur_since) == [] and do_writes(do, do_since) == []
    said = item_events(check)
    assert said[(ACT, W.DO_ORDER_UUID)].startswith(
        "would create droplet do-vm-1 in ams3 (s-1vcpu-1gb, ubuntu-22-04-x64)")
    assert said[(ACT, grow_order)].startswith(
        "would resize droplet %s from s-1vcpu-1gb to s-2vcpu-4gb" % grow["id"])
    # the filter errs it: settled straight away, no droplet item
    assert said[(SETTLE, odd_order)] == "would set erred: " + ODD_MESSAGE and (ACT, odd_order) not in said
    assert said[(ACT, doomed_order)] == "would delete droplet %s" % doomed["id"]
    for order_uuid in (W.DO_ORDER_UUID, grow_order, odd_order, doomed_order):
        assert waldur.app.order(order_uuid)["state"] == "pending-provider"  # not even approved
    # the summary counts what the pass would do, never work done
    [summary] = [line for line in log_lines(check) if line["event"] == "pass summary"]
    assert (summary["orders"], summary["would_done"], summary["would_erred"]) == (4, 3, 1)
    assert "done" not in summary and "erred" not in summary
    # and names every order with what the backend and settling would do (the results are packed)
    [named] = [line["msg"] for line in log_lines(check) if line.get("task", "").startswith("Name each order")]
    assert ("would_done: do-vm-1 (order %s): would create droplet do-vm-1 in ams3 (s-1vcpu-1gb, ubuntu-22-04-x64); "
            "would approve and set done" % W.DO_ORDER_UUID) in named
    assert any(line.startswith("would_done: doomed (order %s): would delete droplet %s; would approve and set done"
                               % (doomed_order, doomed["id"])) for line in named)
    assert any(line.startswith("would_erred: odd (order %s): would set erred: " % odd_order) for line in named)
    assert len(named) == 4
    assert do.app.droplet(grow["id"])["size_slug"] == "s-1vcpu-1gb"
    assert do.app.droplet(doomed["id"]) is not None and len(do.app.droplets()) == 3


# ---- update and terminate ---------------------------------------------------------------------

def test_updates_resize_through_size_mapping_and_terminations_destroy(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    grow_uuid, grow = seed_machine(waldur, do, "grow")
    resting_uuid, resting = seed_machine(waldur, do, "resting", status="off", paused=True)
    odd_uuid, odd = seed_machine(waldur, do, "odd")
    doomed_uuid, doomed = seed_machine(waldur, do, "doomed")
    vanished_uuid, vanished = seed_machine(waldur, do, "vanished")
    # someone deletes a droplet in the DigitalOcean console
    gone = requests.delete("%s/v2/droplets/%d" % (do.url, vanished["id"]), timeout=10,
                           headers={"Authorization": "Bearer " + DO.DO_TOKEN})
    assert gone.status_code == 204
    orders = {"grow": update_limits(waldur, grow_uuid, BIG), "resting": update_limits(waldur, resting_uuid, BIG),
              "odd": update_limits(waldur, odd_uuid, ODD), "doomed": terminate(waldur, doomed_uuid),
              "vanished": terminate(waldur, vanished_uuid)}
    since = len(do.app.calls)

    run = run_pass(ORDER_PASS, config, json_log=True)

    for name, order_uuid in orders.items():
        if name != "odd":
            assert_done(waldur, order_uuid)
    said = item_events(run)
    # a running droplet: shut down, resized (CPU and RAM only), powered back on, in that order
    assert [action["type"] for action in do.app.actions(grow["id"])] == ["shutdown", "resize", "power_on"]
    assert [call["path"].rstrip("/") for call in do.app.calls_of("droplet_actions.create", since)
            if "/%d/" % grow["id"] in call["path"]] == ["/v2/droplets/%d/actions" % grow["id"]] * 3
    after = do.app.droplet(grow["id"])
    assert (after["size_slug"], after["vcpus"], after["memory"], after["status"]) == \
        ("s-2vcpu-4gb", 2, 4096, "active")
    assert after["disk"] == grow["disk"]
    assert said[(ACT, orders["grow"])].startswith(
        "resized droplet %s from s-1vcpu-1gb to s-2vcpu-4gb (shut down, resized, powered on)" % grow["id"])
    assert waldur.app.resource(grow_uuid)["limits"] == BIG
    assert waldur.app.resource(grow_uuid)["backend_metadata"]["droplet"]["size_slug"] == "s-2vcpu-4gb"
    # a droplet Waldur has paused is resized and stays off
    assert [action["type"] for action in do.app.actions(resting["id"])] == ["resize"]
    assert (do.app.droplet(resting["id"])["size_slug"], do.app.droplet(resting["id"])["status"]) == \
        ("s-2vcpu-4gb", "off")
    # limits no size matches: the droplet is left as it is, and the order errs naming the
    # limits and the mapping (Waldur never shows limits the droplet does not have)
    assert do.app.actions(odd["id"]) == [] and do.app.droplet(odd["id"])["size_slug"] == "s-1vcpu-1gb"
    assert said[(SETTLE, orders["odd"])] == "set erred: " + ODD_MESSAGE and (ACT, orders["odd"]) not in said
    assert_erred(waldur, orders["odd"], ODD_MESSAGE)
    assert waldur.app.resource(odd_uuid)["limits"] == W.DO_PLAN_QUOTAS
    # terminations: one droplet destroyed, one already gone
    assert do.app.droplet(doomed["id"]) is None
    # (the vanished one is read before anything is deleted: it no longer carries the tag it was listed by)
    assert [call["path"].rstrip("/") for call in do.app.calls_of("droplets.delete", since)] == \
        ["/v2/droplets/%d" % doomed["id"]]
    assert "/v2/droplets/%d" % vanished["id"] in [call["path"].rstrip("/") for call in do.app.calls_of("droplets.get", since)]
    assert said[(ACT, orders["vanished"])] == "droplet %s is already gone" % vanished["id"]
    for resource_uuid in (doomed_uuid, vanished_uuid):
        assert waldur.app.resource(resource_uuid)["state"] == "Terminated"
    assert sorted(d["id"] for d in do.app.droplets()) == sorted([grow["id"], resting["id"], odd["id"]])


# ---- a pass killed part-way, duplicates, planted tags -----------------------------------------

def test_a_pass_killed_after_the_create_is_finished_by_the_next_with_one_droplet(
        tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    # Hold the create in DigitalOcean until the pass is dead; DigitalOcean then makes the
    # droplet it accepted, and nobody tells Waldur its id.
    arrived, release, restore = hold_calls(do.app, "droplets.create")
    try:
        process = start_pass(ORDER_PASS, config, capture=False)
        try:
            assert arrived.wait(180), "the pass never created the droplet"
        finally:
            kill_tree(process)
        release.set()
        deadline = time.monotonic() + 30
        while not do.app.calls_of("droplets.create") and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        restore()
    [created] = do.app.droplets()
    assert created["tags"] == ["waldur", tag(W.DO_RESOURCE_UUID)]
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "executing"  # claimed, never settled
    assert waldur.app.resource(W.DO_RESOURCE_UUID)["backend_id"] == ""
    since = len(do.app.calls)

    run_pass(ORDER_PASS, config)

    assert_done(waldur, W.DO_ORDER_UUID)
    assert waldur.app.resource(W.DO_RESOURCE_UUID)["backend_id"] == str(created["id"])  # adopted
    assert do_writes(do, since) == [] and len(do.app.droplets()) == 1


def test_two_droplets_with_the_resource_tag_leave_the_order_for_the_operator_naming_them(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    for name in ("twin-1", "twin-2"):
        do.app.seed_droplet(name, tags=[tag(W.DO_RESOURCE_UUID)])

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(config)})

    # neither is provably a copy of the order: both kept, the order alive, the pass not green
    assert run.rc != 0 and "2 droplets carry tag %s and none was deleted" % tag(W.DO_RESOURCE_UUID) in run.stdout
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "executing"
    assert do.app.calls_of("droplets.create") == [] and len(do.app.droplets()) == 2


def test_an_order_planting_another_resource_tag_gets_its_own_droplet(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    victim_uuid, victim = seed_machine(waldur, do, "victim")
    # the victim's droplet lost its Waldur id: only the tag still binds it to its resource
    stray = do.app.seed_droplet("stray", tags=[tag(uuid.uuid4().hex)])
    order_uuid, resource_uuid = order_droplet(waldur, "intruder", tags=["ok", tag(victim_uuid), stray["tags"][0]])

    run_pass(ORDER_PASS, config)

    assert_done(waldur, order_uuid)
    mine = droplet_of(waldur, do, resource_uuid)
    assert mine["id"] not in (victim["id"], stray["id"])
    assert mine["tags"] == ["ok", tag(resource_uuid)]
    assert do.app.droplet(victim["id"])["tags"] == victim["tags"]
    assert do.app.droplet(stray["id"])["tags"] == stray["tags"]
    assert do.app.actions(victim["id"]) == [] and do.app.actions(stray["id"]) == []
    assert waldur.app.resource(victim_uuid)["backend_id"] == str(victim["id"])


@pytest.mark.parametrize("account_size", [10, 450])
def test_orders_adopt_their_tagged_droplet_whether_the_account_is_listed_once_or_by_tag(
        tmp_path, waldur_sim, do_sim, account_size):
    """Several Create orders look their tags up in one listing of the account when that takes
    fewer calls than a listing per tag (10 droplets: one page); in a larger account (450
    droplets: three pages for three orders) each order lists its own tag."""
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    do.app.configure(droplet_limit=1000)
    config = write_config(tmp_path, waldur, do)
    for index in range(account_size - 1):
        do.app.seed_droplet("other-%03d" % index, tags=[tag("%032x" % index)])
    orders = [order_droplet(waldur, name) for name in ("left-over", "fresh-1", "fresh-2")]
    # a droplet an earlier, killed pass made for the first order
    left_over = do.app.seed_droplet("left-over", tags=["waldur", tag(orders[0][1])])
    since = len(do.app.calls)

    run_pass(ORDER_PASS, config)

    for order_uuid, dummy in orders:
        assert_done(waldur, order_uuid)
    assert waldur.app.resource(orders[0][1])["backend_id"] == str(left_over["id"])
    assert len(do.app.calls_of("droplets.create", since)) == 2
    assert len(do.app.droplets()) == account_size + 2
    listings = [call["query"] for call in do.app.calls_of("droplets.list", since)]
    # the quota preflight counts the account's droplets first: one droplet's page, its total
    assert listings.pop(0) == "page=1&per_page=1"
    # the two created droplets are waited for together: one page of the tag they share
    # ("waldur", which the account's other droplets lack), not a GET each
    assert listings[-1] == "tag_name=waldur&page=1&per_page=200"
    assert do.app.calls_of("droplets.get", since) == []
    lookups = listings[:-1]
    if account_size == 10:
        assert len(lookups) == 1 and "tag_name" not in lookups[0]
    else:  # the first page shows the listing would cost more: one listing per tag instead
        assert len(lookups) == 4 and "tag_name" not in lookups[0]
        assert sorted(query for query in lookups[1:]) == sorted(
            "tag_name=waldur-resource%%3A%s&per_page=200" % resource_uuid for dummy, resource_uuid in orders)


# ---- orders refused before anything is made, throttling ---------------------------------------

def test_orders_without_region_image_or_size_err_and_create_nothing(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do, default_region=None, default_image=None, default_size=None)
    # The order form has the fields, so the provider's settings can build a droplet (create_gaps):
    # what is missing is each order's own input.
    order_form_with(waldur, W.DO_OFFERING_UUID, "region", "image", "size")
    refused = {
        "region": order_droplet(waldur, "nowhere", image="debian-12-x64", size="s-1vcpu-1gb"),
        "image": order_droplet(waldur, "blank", region="ams3", size="s-1vcpu-1gb"),
        # no size, and limits that match no size_mapping entry
        "size": order_droplet(waldur, "shapeless", limits=ODD, region="ams3", image="debian-12-x64"),
    }

    run_pass(ORDER_PASS, config)

    for what, (order_uuid, resource_uuid) in refused.items():
        assert_erred(waldur, order_uuid, "DigitalOcean droplet %s is not specified" % what)
        # Waldur keeps the resource of an erred Create, Erred and with no backend id
        resource = waldur.app.resource(resource_uuid)
        assert (resource["state"], resource["backend_id"]) == ("Erred", "")
    assert do.app.calls_of("droplets.create") == [] and do.app.droplets() == []
    assert do_writes(do) == []


def test_429_bursts_from_digitalocean_are_retried_and_the_pass_succeeds(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_config(tmp_path, waldur, do)
    for operation, times in (("droplets.list", 2), ("droplets.create", 1), ("droplets.get", 1)):
        do.app.add_fault(operation, status=429, times=times, retry_after=1)

    run_pass(ORDER_PASS, config)

    assert_done(waldur, W.DO_ORDER_UUID)
    assert [call["status"] for call in do.app.calls_of("droplets.create")] == [429, 202]
    assert [call["status"] for call in do.app.calls].count(429) == 4
    assert len(do.app.droplets()) == 1
    assert waldur.app.resource(W.DO_RESOURCE_UUID)["backend_id"] == str(do.app.droplets()[0]["id"])


# ---- scale under DigitalOcean's rate limit ----------------------------------------------------

def test_two_hundred_orders_under_the_rate_limit_all_finish(tmp_path, waldur_sim, do_sim):
    """DigitalOcean allows a burst of 250 requests a minute and answers 429 with Retry-After
    past it. 200 creates need fewer calls than that (one listing finds the tagged droplets,
    one listing at a time waits for all of them), so to meet the limit anyway the simulator
    enforces a tighter one of the same shape: 150 requests per 10 s."""
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    do.app.configure(enforce_limits=True, burst_limit=150, burst_window=10.0, droplet_limit=1000)
    config = write_config(tmp_path, waldur, do)
    orders = [order_droplet(waldur, "bulk-%03d" % index) for index in range(200)]

    started = time.monotonic()
    run_pass(ORDER_PASS, config)
    elapsed = time.monotonic() - started

    assert [order for order, dummy in orders if waldur.app.order(order)["state"] != "done"] == []
    droplets = {str(droplet["id"]): droplet for droplet in do.app.droplets()}
    assert len(droplets) == 200
    for dummy, resource_uuid in orders:
        assert droplets[waldur.app.resource(resource_uuid)["backend_id"]]["tags"] == ["waldur", tag(resource_uuid)]
    statuses = [call["status"] for call in do.app.calls]
    assert 429 in statuses  # the limit was met
    # within DigitalOcean's real burst of 250: creates, a few listings, nothing per droplet
    assert len([status for status in statuses if status != 429]) < 250
    # one account listing finds the tagged droplets of all 200 orders (no listing per resource
    # tag); waiting for them to boot starts once all are created and reads listings of the tag
    # they share, never one droplet after another
    listings = do.app.calls_of("droplets.list")
    # the quota preflight counts the account's droplets first: one droplet's page, its total
    assert listings.pop(0)["query"] == "page=1&per_page=1"
    assert [call for call in listings if "tag_name=waldur-resource" in call["query"]] == []
    assert "tag_name" not in listings[0]["query"]
    waits = listings[1:]
    assert 1 <= len(waits) <= 3 and all("tag_name=waldur&" in call["query"] for call in waits)
    assert do.app.calls_of("droplets.get") == []
    assert [call["status"] for call in do.app.calls_of("droplets.create")].count(202) == 200
    assert elapsed < 120
    # The 200 orders repeat the same few Waldur exchanges: the fixture's contract check reads
    # the first few of each kind (operation and status) rather than all ~2,000 of them.
    with waldur.app.lock:
        kinds = Counter()
        sample = []
        for exchange in waldur.app.exchanges:
            kinds[(exchange["operation"], exchange["status"])] += 1
            if kinds[(exchange["operation"], exchange["status"])] <= 5:
                sample.append(exchange)
        waldur.app.exchanges[:] = sample


def spend_budget_when(app, operation: str, requests_spent: int):
    """When the first call of ``operation`` arrives, another client sharing the token has just
    made ``requests_spent`` requests. Spending them at that moment (rather than before the
    module starts) keeps the test true on a slow machine, where ansible's start-up alone can
    outlast a 10 s window. Returns the function that takes the hook away again."""
    original, spent = app._injected, []

    def gate(name):
        if name == operation and not spent:
            spent.append(name)
            with app.lock:
                app.rate_limit.stamps.extend([time.monotonic()] * requests_spent)
        return original(name)
    app._injected = gate
    return lambda: app.__dict__.pop("_injected", None)


def test_a_listing_of_a_thousand_droplets_under_the_rate_limit_misses_none(tmp_path, do_sim):
    """The rate limit in the shape of the test above (250 requests per 10 s); another client
    sharing the token has spent almost all of it when the listing starts."""
    do = do_sim
    seeded = [do.app.seed_droplet("d-%04d" % index, tags=[tag("%032x" % index)]) for index in range(1000)]
    do.app.configure(enforce_limits=True, burst_limit=250, burst_window=10.0)
    restore = spend_budget_when(do.app, "droplets.list", 248)
    since = len(do.app.calls)
    wanted = [str(droplet["id"]) for droplet in reversed(seeded)]

    try:
        out = do_module(tmp_path, do, "do_droplet_info", backend_ids=wanted)
    finally:
        restore()

    assert out["missing"] == []
    assert [droplet["backend_id"] for droplet in out["droplets"]] == wanted
    assert all(droplet["found"] for droplet in out["droplets"])
    listing = do.app.calls_of("droplets.list", since)
    assert 429 in [call["status"] for call in listing]
    assert [call["status"] for call in listing].count(200) == 5  # five pages of 200, each read once


# ---- membership: pause, downscale, restore ----------------------------------------------------

def test_membership_pass_shuts_down_paused_and_downscaled_droplets_and_powers_them_on(
        tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    machines = {name: seed_machine(waldur, do, name) for name in ("paused", "downscaled", "steady")}
    set_flag(waldur, machines["paused"][0], "paused", True)
    set_flag(waldur, machines["downscaled"][0], "downscaled", True)

    def status(name):
        return do.app.droplet(machines[name][1]["id"])["status"]

    def actions(since):
        return sorted((call["path"], call["status"]) for call in do.app.calls_of("droplet_actions.create", since))

    def action_paths(*names):
        return sorted(("/v2/droplets/%d/actions/" % machines[name][1]["id"], 201) for name in names)

    run_pass(MEMBERSHIP_PASS, config)
    assert (status("paused"), status("downscaled"), status("steady")) == ("off", "off", "active")
    assert [a["type"] for a in do.app.actions(machines["paused"][1]["id"])] == ["shutdown"]
    assert [a["type"] for a in do.app.actions(machines["downscaled"][1]["id"])] == ["shutdown"]
    assert actions(0) == action_paths("paused", "downscaled")
    metadata = waldur.app.resource(machines["paused"][0])["backend_metadata"]
    assert metadata["droplet"]["status"] == "off"

    # nothing changed: no droplet action, nothing written anywhere
    waldur_since, do_since = len(waldur.app.calls), len(do.app.calls)
    run_pass(MEMBERSHIP_PASS, config)
    assert do_writes(do, do_since) == [] and waldur_writes(waldur, waldur_since) == []

    set_flag(waldur, machines["paused"][0], "paused", False)
    set_flag(waldur, machines["downscaled"][0], "downscaled", False)
    do_since = len(do.app.calls)
    run_pass(MEMBERSHIP_PASS, config)
    assert {status(name) for name in machines} == {"active"}
    assert actions(do_since) == action_paths("paused", "downscaled")
    assert [a["type"] for a in do.app.actions(machines["paused"][1]["id"])] == ["shutdown", "power_on"]


def test_membership_pass_reads_250_droplets_from_two_listing_pages_and_writes_only_the_changes(
        tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    do.app.configure(droplet_limit=1000)
    config = write_config(tmp_path, waldur, do)
    machines = [seed_machine(waldur, do, "m-%03d" % index) for index in range(250)]
    paused = machines[:2]
    for resource_uuid, dummy in paused:
        set_flag(waldur, resource_uuid, "paused", True)

    since = len(do.app.calls)
    run_pass(MEMBERSHIP_PASS, config)
    assert [do.app.droplet(droplet["id"])["status"] for dummy, droplet in paused] == ["off", "off"]
    assert sorted(call["path"] for call in do.app.calls_of("droplet_actions.create", since)) == sorted(
        "/v2/droplets/%d/actions/" % droplet["id"] for dummy, droplet in paused)
    reads = [call["operation"] for call in do.app.calls[since:] if call["method"] == "GET"]
    assert reads[:2] == ["droplets.list", "droplets.list"]  # 250 droplets: two pages of 200
    # the two shutdowns are seen ending by one more read of the listing (or a GET each), never
    # by a poll per action, and none of the 248 unchanged droplets is read on its own
    assert set(reads[2:]) <= {"droplets.list", "droplets.get"} and 1 <= len(reads[2:]) <= len(paused)

    # steady: the same two pages, not a GET per droplet, and nothing written
    since = len(do.app.calls)
    run_pass(MEMBERSHIP_PASS, config)
    assert [call["operation"] for call in do.app.calls[since:]] == ["droplets.list", "droplets.list"]


# ---- report ---------------------------------------------------------------------------------

def test_report_pass_sends_no_usage_at_all(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    waldur.app.reset("empty")
    config = write_config(tmp_path, waldur, do)
    resource_uuid, dummy = seed_machine(waldur, do, "metered")

    run = run_pass(REPORT_PASS, config)

    assert "DigitalOcean droplets report no usage" in run.output
    assert waldur.app.calls_of("usages.set_usage") == [] and waldur_writes(waldur) == []
    assert waldur.app.usages(resource_uuid) == []
    assert do.app.calls == []
