"""do_droplet and do_droplet_info in real playbooks, with the real python-digitalocean,
against the DigitalOcean simulator. Assertions read the simulator's state and call log."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers import assert_verbose_module_output, run_playbook
from tests.simulators.digitalocean import presets as P

pytestmark = pytest.mark.integration

UUID_A = "5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b"
UUID_B = "7a6b5c4d3e2f41a09b8c7d6e5f4a3b2c"
UUID_C = "c0ffee00c0ffee00c0ffee00c0ffee00"
UUID_D = "d00dfeedd00dfeedd00dfeedd00dfeed"
IMAGE = "ubuntu-22-04-x64"


def tag(uuid):
    return "waldur-resource:" + uuid


def create(uuid, name, **fields):
    return dict({"resource_uuid": uuid, "name": name, "region": "ams3", "image": IMAGE, "size": "s-1vcpu-1gb"},
                **fields)


class Runner:
    """Runs one DigitalOcean module task in a playbook and returns its registered result."""

    def __init__(self, sim, tmp_path):
        self.sim = sim
        self.tmp_path = tmp_path
        self.count = 0
        self.last = None

    def __call__(self, module="do_droplet", check=False, verbosity=0, token=P.DO_TOKEN, env=None, **args):
        self.count += 1
        out = self.tmp_path / ("result-%d.json" % self.count)
        if env is None:  # else the options come from the environment
            args = dict({"token": token, "api_url": self.sim.url}, **args)
        play = [{"name": "DigitalOcean", "hosts": "localhost", "connection": "local", "gather_facts": False,
                 "tasks": [
                     {"name": "Act", "waldur.site_agent.%s" % module: args, "register": "out",
                      "ignore_errors": True},
                     {"name": "Save", "check_mode": False, "ansible.builtin.copy": {
                         "content": "{{ out | to_json }}", "dest": str(out), "mode": "0600"}}]}]
        self.last = run_playbook(play, check=check, verbosity=verbosity, env=env)
        assert out.exists(), self.last.output
        return json.loads(out.read_text())


@pytest.fixture
def run(do_sim, tmp_path):
    return Runner(do_sim, tmp_path)


def operations(sim, since=0):
    return [call["operation"] for call in sim.app.calls[since:]]


# ---- create, keys, idempotency --------------------------------------------------------

def test_create_tags_droplets_adds_a_key_once_and_reruns_write_nothing(do_sim, run):
    items = [create(UUID_A, "Web A", tags=["waldur", "team:blue"], ssh_keys=[P.NEW_PUBLIC_KEY],
                    user_data="#cloud-config\npackages: [htop]\n", order_uuid="0a1b2c3d4e5f40718293a4b5c6d7e8f9"),
             create(UUID_B, "web-b", size="s-2vcpu-2gb", region="fra1", ssh_keys=[P.NEW_PUBLIC_KEY])]
    first = run(droplets=items)
    assert [r["action"] for r in first["results"]] == ["created", "created"]
    assert first["changed"] is True and first["failed_count"] == 0

    new_keys = [k for k in do_sim.app.keys() if k["fingerprint"] == P.NEW_KEY_FINGERPRINT]
    assert len(new_keys) == 1 and new_keys[0]["name"] in ("waldur-5f0f2b4c", "waldur-7a6b5c4d")
    assert len(do_sim.app.calls_of("keys.create")) == 1
    droplets = {d["name"]: d for d in do_sim.app.droplets()}
    a, b = droplets["web-a"], droplets["web-b"]
    assert a["tags"] == ["waldur", "team:blue", tag(UUID_A)]
    assert b["tags"] == [tag(UUID_B)]
    assert (a["region"]["slug"], a["size_slug"], a["image"]["slug"]) == ("ams3", "s-1vcpu-1gb", IMAGE)
    assert (b["region"]["slug"], b["size_slug"]) == ("fra1", "s-2vcpu-2gb")
    assert a["ssh_key_ids"] == b["ssh_key_ids"] == [new_keys[0]["id"]]
    assert a["user_data"] == "#cloud-config\npackages: [htop]\n"
    result_a = first["results"][0]
    assert result_a["backend_id"] == str(a["id"]) and result_a["order_uuid"] == "0a1b2c3d4e5f40718293a4b5c6d7e8f9"
    assert result_a["droplet"]["status"] == "active"  # waited for the create
    assert result_a["droplet"]["networks"]["public_ipv4"] == a["networks"]["v4"][1]["ip_address"]
    assert result_a["backend_metadata"] == {"backend_type": "digitalocean", "droplet": {
        key: result_a["droplet"][key] for key in
        ("id", "name", "status", "region", "size_slug", "image", "created_at", "networks")}}

    # The same orders again (Waldur never learnt the ids): adopted, nothing written.
    mark = len(do_sim.app.calls)
    again = run(droplets=items)
    assert [r["action"] for r in again["results"]] == ["adopted", "adopted"]
    assert [r["backend_id"] for r in again["results"]] == [str(a["id"]), str(b["id"])]
    assert again["changed"] is False
    assert do_sim.app.write_calls(mark) == []

    # With the ids Waldur now has: nothing to do, nothing written, one batched read.
    mark = len(do_sim.app.calls)
    known = [dict(item, backend_id=str(droplets[name]["id"])) for item, name in zip(items, ("web-a", "web-b"))]
    third = run(droplets=known)
    assert [r["action"] for r in third["results"]] == ["none", "none"]
    assert third["changed"] is False and do_sim.app.write_calls(mark) == []
    assert operations(do_sim, mark) == ["droplets.list"]

    # Another resource with the same public key: the key is found by fingerprint, not created.
    mark = len(do_sim.app.calls)
    other = run(droplets=[create(UUID_C, "web-c", ssh_keys=[P.NEW_PUBLIC_KEY.replace("user@", "laptop@")])])
    assert other["results"][0]["action"] == "created"
    assert do_sim.app.calls_of("keys.create", mark) == []
    assert do_sim.app.droplet(int(other["results"][0]["backend_id"]))["ssh_key_ids"] == [new_keys[0]["id"]]


def test_existing_tagged_droplet_is_adopted(do_sim, run):
    seeded = do_sim.app.seed_droplet("legacy", tags=["waldur", tag(UUID_A)])
    result = run(droplets=[create(UUID_A, "web-a")])["results"][0]
    assert (result["action"], result["backend_id"], result["changed"]) == ("adopted", str(seeded["id"]), False)
    assert do_sim.app.calls_of("droplets.create") == []
    assert len(do_sim.app.droplets()) == 1


def test_two_tagged_droplets_fail_that_item_only(do_sim, run):
    first = do_sim.app.seed_droplet("dup-1", tags=[tag(UUID_A)])
    second = do_sim.app.seed_droplet("dup-2", tags=[tag(UUID_A)])
    out = run(droplets=[create(UUID_A, "web-a"), create(UUID_B, "web-b")])
    failed, created = out["results"]
    assert (failed["failed"], failed["retry"], failed["held"]) == (True, True, True)
    assert failed["msg"].startswith(
        "2 droplets carry tag %s and none was deleted or adopted, since droplet %s differs from the order (name "
        "dup-1, not web-a): %s dup-1 (ams3, s-1vcpu-1gb, created " % (tag(UUID_A), first["id"], first["id"]))
    assert "; %s dup-2 (ams3" % second["id"] in failed["msg"]
    assert (created["failed"], created["action"]) == (False, "created")
    assert out["failed_count"] == 1
    assert [d["name"] for d in do_sim.app.droplets()] == ["dup-1", "dup-2", "web-b"]


def test_planted_resource_tag_is_dropped_and_cannot_adopt(do_sim, run):
    victim = do_sim.app.seed_droplet("victim", tags=[tag(UUID_B)])
    result = run(droplets=[create(UUID_A, "intruder", tags=["ok", tag(UUID_B)])])["results"][0]
    assert result["action"] == "created" and result["backend_id"] != str(victim["id"])
    assert result["dropped_tags"] == [tag(UUID_B)]
    assert "dropped tag(s) %s" % tag(UUID_B) in result["msg"]
    created = do_sim.app.droplet(int(result["backend_id"]))
    assert created["tags"] == ["ok", tag(UUID_A)]
    assert do_sim.app.droplet(victim["id"])["tags"] == [tag(UUID_B)]


def test_droplet_with_two_resource_tags_is_not_adopted(do_sim, run):
    shared = do_sim.app.seed_droplet("shared", tags=[tag(UUID_A), tag(UUID_B)])
    result = run(droplets=[create(UUID_A, "web-a")])["results"][0]
    assert result["action"] == "created" and result["backend_id"] != str(shared["id"])
    assert "were not adopted" in result["msg"]


def test_server_error_on_create_makes_no_duplicate(do_sim, run):
    do_sim.app.add_fault("droplets.create", status=500)
    out = run(droplets=[create(UUID_A, "web-a")])
    assert out["results"][0]["action"] == "created" and out["failed_count"] == 0
    assert [c["status"] for c in do_sim.app.calls_of("droplets.create")] == [500, 202]
    assert len(do_sim.app.droplets()) == 1


def test_missing_region_fails_the_item_and_creates_nothing(do_sim, run):
    out = run(droplets=[{"resource_uuid": UUID_A, "name": "web-a", "image": IMAGE, "size": "s-1vcpu-1gb"}])
    result = out["results"][0]
    assert result["failed"] is True and result["msg"] == "DigitalOcean droplet region is not specified"
    assert do_sim.app.calls_of("droplets.create") == [] and do_sim.app.droplets() == []


def test_vanished_droplet_is_not_recreated(do_sim, run):
    out = run(droplets=[create(UUID_A, "web-a", backend_id="418999999")])
    assert out["results"][0]["msg"] == ("droplet 418999999 no longer exists and cannot be re-created under the "
                                        "same id; terminate the resource and order a new one")
    assert do_sim.app.calls_of("droplets.create") == []


# ---- resize, power, delete ------------------------------------------------------------

def test_resize_powers_off_resizes_cpu_ram_and_powers_on(do_sim, run):
    running = do_sim.app.seed_droplet("big", tags=[tag(UUID_A)])
    stopped = do_sim.app.seed_droplet("small", tags=[tag(UUID_B)], status="off")
    items = [{"resource_uuid": UUID_A, "backend_id": str(running["id"]), "size": "s-2vcpu-4gb"},
             {"resource_uuid": UUID_B, "backend_id": str(stopped["id"]), "size": "s-2vcpu-2gb"}]
    out = run(droplets=items)
    assert [r["action"] for r in out["results"]] == ["resized", "resized"]
    assert [a["type"] for a in do_sim.app.actions(running["id"])] == ["shutdown", "resize", "power_on"]
    assert [a["type"] for a in do_sim.app.actions(stopped["id"])] == ["resize"]
    after = do_sim.app.droplet(running["id"])
    assert (after["size_slug"], after["vcpus"], after["memory"], after["status"]) == ("s-2vcpu-4gb", 2, 4096, "active")
    assert after["disk"] == 25  # CPU and RAM only: the disk is not grown
    assert do_sim.app.droplet(stopped["id"])["status"] == "off"
    assert out["results"][0]["droplet"]["size_slug"] == "s-2vcpu-4gb"

    mark = len(do_sim.app.calls)
    again = run(droplets=items)
    assert [r["action"] for r in again["results"]] == ["none", "none"]
    assert do_sim.app.write_calls(mark) == []


def test_off_and_active_act_only_when_needed(do_sim, run):
    on = do_sim.app.seed_droplet("on", tags=[tag(UUID_A)])
    off = do_sim.app.seed_droplet("off", tags=[tag(UUID_B)], status="off")
    items = [{"resource_uuid": UUID_A, "backend_id": str(on["id"]), "state": "active"},
             {"resource_uuid": UUID_B, "backend_id": str(off["id"]), "state": "off"}]
    out = run(droplets=items)
    assert [(r["action"], r["changed"]) for r in out["results"]] == [("none", False), ("none", False)]
    assert do_sim.app.write_calls() == []

    flipped = [dict(items[0], state="off"), dict(items[1], state="active")]
    out = run(droplets=flipped)
    assert [r["action"] for r in out["results"]] == ["powered_off", "powered_on"]
    assert do_sim.app.droplet(on["id"])["status"] == "off"
    assert do_sim.app.droplet(off["id"])["status"] == "active"
    assert [a["type"] for a in do_sim.app.actions(on["id"])] == ["shutdown"]


def test_many_power_changes_are_waited_for_with_shared_listings_not_a_poll_per_action(do_sim, run):
    do_sim.app.configure(action_seconds=0.5)
    uuids = ["%032x" % (index + 1) for index in range(30)]
    seeded = [do_sim.app.seed_droplet("p-%d" % index, tags=["waldur", tag(uuid)], status="off" if index % 2 else "active")
              for index, uuid in enumerate(uuids)]
    items = [{"resource_uuid": uuid, "backend_id": str(droplet["id"]), "state": "active" if index % 2 else "off"}
             for index, (uuid, droplet) in enumerate(zip(uuids, seeded))]
    mark = len(do_sim.app.calls)
    out = run(droplets=items, max_workers=10)
    assert [r["action"] for r in out["results"]] == ["powered_off", "powered_on"] * 15
    assert [r["droplet"]["status"] for r in out["results"]] == ["off", "active"] * 15
    assert [do_sim.app.droplet(d["id"])["status"] for d in seeded] == ["off", "active"] * 15
    done = operations(do_sim, mark)
    assert done.count("droplet_actions.create") == 30
    # the actions' ends are seen in listings of the droplets, a few for all 30, not a read per action
    assert "droplet_actions.get" not in done and "actions.get" not in done and "droplets.get" not in done
    assert 1 <= done.count("droplets.list") <= 6, done


def test_absent_deletes_and_an_already_deleted_droplet_is_fine(do_sim, run):
    doomed = do_sim.app.seed_droplet("doomed", tags=[tag(UUID_A)])
    leaked = do_sim.app.seed_droplet("leaked", tags=[tag(UUID_B)])
    items = [{"resource_uuid": UUID_A, "backend_id": str(doomed["id"]), "state": "absent"},
             {"resource_uuid": UUID_B, "state": "absent", "name": "leaked"}]
    out = run(droplets=items)
    assert [(r["action"], r["changed"]) for r in out["results"]] == [("deleted", True), ("deleted", True)]
    assert do_sim.app.droplets() == []
    assert str(leaked["id"]) in out["results"][1]["msg"]

    again = run(droplets=items)
    assert [(r["action"], r["changed"], r["failed"]) for r in again["results"]] == [
        ("absent", False, False), ("absent", False, False)]
    assert again["results"][0]["msg"] == "droplet %s is already gone" % doomed["id"]


def test_check_mode_writes_nothing(do_sim, run):
    running = do_sim.app.seed_droplet("running", tags=[tag(UUID_A)])
    other = do_sim.app.seed_droplet("other", tags=[tag(UUID_B)])
    idle = do_sim.app.seed_droplet("idle", tags=[tag(UUID_D)])
    items = [create(UUID_C, "new", ssh_keys=[P.NEW_PUBLIC_KEY]),
             {"resource_uuid": UUID_A, "backend_id": str(running["id"]), "size": "s-2vcpu-2gb"},
             {"resource_uuid": UUID_B, "backend_id": str(other["id"]), "state": "absent"},
             {"resource_uuid": UUID_D, "backend_id": str(idle["id"]), "state": "off"}]
    out = run(droplets=items, check=True)
    assert [(r["action"], r["changed"]) for r in out["results"]] == [
        ("created", True), ("resized", True), ("deleted", True), ("powered_off", True)]
    assert all(r["msg"].startswith("would") for r in out["results"])
    assert "would add SSH key %s" % P.NEW_KEY_FINGERPRINT in out["results"][0]["msg"]
    assert do_sim.app.write_calls() == []
    assert len(do_sim.app.droplets()) == 3 and do_sim.app.droplet(idle["id"])["status"] == "active"


# ---- rate limits ----------------------------------------------------------------------

def test_429_bursts_are_retried(do_sim, run):
    do_sim.app.add_fault("droplets.list", status=429, times=2, retry_after=1)
    do_sim.app.add_fault("droplets.create", status=429, times=1, retry_after=1)
    out = run(droplets=[create(UUID_A, "web-a")])
    assert out["failed_count"] == 0 and out["results"][0]["action"] == "created"
    assert [c["status"] for c in do_sim.app.calls_of("droplets.create")] == [429, 202]
    assert out["api_retries"] >= 3
    assert len(do_sim.app.droplets()) == 1


def test_a_batch_past_the_rate_limit_finishes_without_failures(do_sim, run):
    # DigitalOcean's burst limit as the simulator enforces it, scaled down from 250 per
    # minute to 10 per 2 s so the test stays short; only Retry-After tells the client.
    do_sim.app.configure(enforce_limits=True, burst_limit=10, burst_window=2.0)
    items = [create("%032x" % (0xd0 + i), "web-%d" % i) for i in range(14)]  # ~20 requests
    started = time.monotonic()
    out = run(droplets=items, max_workers=8)
    assert out["failed_count"] == 0, [r["msg"] for r in out["results"] if r["failed"]]
    assert [r["action"] for r in out["results"]] == ["created"] * 14
    statuses = [c["status"] for c in do_sim.app.calls]
    assert statuses.count(429) >= 1 and len(statuses) > 10
    assert len(do_sim.app.droplets()) == 14
    assert time.monotonic() - started < 60


# ---- info -----------------------------------------------------------------------------

def test_info_reads_450_droplets_in_three_pages(do_sim, run):
    seeded = [do_sim.app.seed_droplet("d-%d" % i, tags=[tag("%032x" % i)]) for i in range(450)]
    ids = [str(d["id"]) for d in reversed(seeded)]
    out = run(module="do_droplet_info", backend_ids=ids)
    assert out["missing"] == []
    assert [d["backend_id"] for d in out["droplets"]] == ids
    assert all(d["found"] for d in out["droplets"])
    assert out["droplets"][0]["name"] == "d-449" and out["droplets"][0]["vcpus"] == 1
    assert out["droplets"][0]["backend_metadata"]["backend_type"] == "digitalocean"
    assert operations(do_sim) == ["droplets.list"] * 3
    assert out["api_calls"] == 3


def test_info_reports_missing_droplets(do_sim, run):
    alive = do_sim.app.seed_droplet("alive", status="off")
    out = run(module="do_droplet_info", backend_ids=[str(alive["id"]), "418999999"])
    assert out["missing"] == ["418999999"]
    assert [(d["found"], d.get("status")) for d in out["droplets"]] == [(True, "off"), (False, None)]


# ---- secrets --------------------------------------------------------------------------

def test_the_token_never_appears_in_verbose_output(do_sim, run):
    out = run(droplets=[create(UUID_A, "web-a")], verbosity=3)
    assert out["results"][0]["action"] == "created"
    assert P.DO_TOKEN not in run.last.output
    assert_verbose_module_output(run.last.output)  # so the token's absence means something

    wrong = "dop_v1_0123456789abcdef0123456789abcdef"
    rejected = run(droplets=[{"resource_uuid": UUID_B, "backend_id": "1", "state": "off"}],
                   token=wrong, verbosity=3)
    assert rejected["failed"] is True
    assert rejected["msg"].startswith("DigitalOcean rejected the token (401 Unable to authenticate you)")
    assert wrong not in run.last.output and wrong not in json.dumps(rejected)


def test_token_and_endpoint_from_the_environment(do_sim, run):
    seeded = do_sim.app.seed_droplet("env", status="off")
    out = run(module="do_droplet_info", backend_ids=[str(seeded["id"])],
              env={"DIGITALOCEAN_ACCESS_TOKEN": P.DO_TOKEN, "DIGITALOCEAN_END_POINT": do_sim.url + "/v2"})
    assert out["missing"] == [] and out["droplets"][0]["status"] == "off"
    assert do_sim.app.calls[0]["path"] == "/v2/droplets/"  # "/v2" without its slash still reaches /v2/
