"""The DigitalOcean simulator, driven by the real python-digitalocean and by plain HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from urllib.parse import parse_qs

import digitalocean
import pytest
import requests
from werkzeug.test import Client

from tests.simulators.digitalocean import DigitalOceanSimulator, fingerprint_of
from tests.simulators.digitalocean.presets import (
    ADMIN_KEY_FINGERPRINT, ADMIN_PUBLIC_KEY, DO_TOKEN, NEW_KEY_FINGERPRINT, NEW_PUBLIC_KEY,
    OPS_KEY_FINGERPRINT, OPS_KEY_ID, OPS_PUBLIC_KEY,
)

POLL = 0.01  # Action.wait interval: the simulator completes actions at the next read
AUTH = {"Authorization": f"Bearer {DO_TOKEN}"}


@pytest.fixture
def do(do_sim, monkeypatch):
    """The simulator with python-digitalocean pointed at it (the env var reaches the
    objects the library builds internally; ``end_point=`` would not)."""
    monkeypatch.setenv("DIGITALOCEAN_END_POINT", do_sim.url + "/v2/")
    monkeypatch.setenv("PYTHON_DIGITALOCEAN_REQUEST_TIMEOUT_SEC", "10")
    return do_sim


@pytest.fixture
def manager(do):
    return digitalocean.Manager(token=DO_TOKEN)


def api(sim, method, path, **kwargs):
    headers = {**AUTH, **kwargs.pop("headers", {})}
    return requests.request(method, sim.url + path, headers=headers, timeout=10, **kwargs)


def create_droplet(name="web-1", **overrides):
    fields = dict(token=DO_TOKEN, name=name, region="ams3", size_slug="s-1vcpu-1gb",
                  image="ubuntu-22-04-x64")
    fields.update(overrides)
    droplet = digitalocean.Droplet(**fields)
    droplet.create()
    return droplet


def last_exchange(sim, method, path_part):
    return next(e for e in reversed(sim.app.exchanges)
                if e["method"] == method and path_part in e["url"])


# ---- droplet lifecycle ------------------------------------------------------------------

def test_create_answers_new_and_the_droplet_turns_active_with_networks(do):
    droplet = create_droplet(ssh_keys=[OPS_KEY_ID, ADMIN_KEY_FINGERPRINT],
                             tags=["waldur-resource:0123", "env"], user_data="#cloud-config\n")

    created = json.loads(last_exchange(do, "POST", "/v2/droplets")["response_body"])
    assert created["droplet"]["status"] == "new"
    assert created["droplet"]["networks"] == {"v4": [], "v6": []}
    assert created["links"]["actions"][0]["rel"] == "create"
    assert created["links"]["actions"][0]["href"] == \
        f"{do.url}/v2/actions/{droplet.action_ids[0]}"

    create_action = droplet.get_action(droplet.action_ids[0])
    assert create_action.type == "create"
    assert create_action.wait(update_every_seconds=POLL)
    droplet.load()
    assert droplet.status == "active"
    assert droplet.ip_address.startswith("164.90.")
    assert droplet.private_ip_address.startswith("10.110.")
    assert droplet.tags == ["waldur-resource:0123", "env"]
    stored = do.app.droplet(droplet.id)
    assert stored["user_data"] == "#cloud-config\n"
    assert stored["ssh_key_ids"] == [OPS_KEY_ID, 512190]
    assert set(do.app.tags()) == {"waldur-resource:0123", "env"}  # created implicitly


def test_droplet_stays_new_until_boot_seconds_pass(do, manager):
    do.app.configure(boot_seconds=0.3)
    droplet = create_droplet(ipv6=True)
    assert manager.get_droplet(droplet.id).status == "new"
    assert manager.get_droplet(droplet.id).networks["v4"] == []
    time.sleep(0.35)
    booted = manager.get_droplet(droplet.id)
    assert booted.status == "active"
    assert booted.ip_v6_address.startswith("2a03:b0c0:")


def test_create_validates_region_size_image_and_keys(do, manager):
    cases = [
        (dict(region="mars1"), "You specified an invalid region for Droplet creation."),
        (dict(size_slug="s-64vcpu-1tb"), "You specified an invalid size for Droplet creation."),
        (dict(image="windows-11"), "You specified an invalid image for Droplet creation."),
        (dict(ssh_keys=[424242]), "You specified an invalid SSH key for Droplet creation: 424242."),
        (dict(name="bad name!"), "Only valid hostname characters are allowed. (a-z, A-Z, 0-9, . and -)"),
    ]
    for overrides, message in cases:
        with pytest.raises(digitalocean.DataReadError) as raised:
            create_droplet(**overrides)
        assert str(raised.value) == message
        body = json.loads(last_exchange(do, "POST", "/v2/droplets")["response_body"])
        assert body["id"] == "unprocessable_entity"
    assert manager.get_all_droplets() == []


def test_image_may_be_given_by_id_and_region_defaults(do):
    response = api(do, "POST", "/v2/droplets",
                   json={"name": "by-id", "size": "s-1vcpu-1gb", "image": 148747795})
    assert response.status_code == 202
    droplet = response.json()["droplet"]
    assert droplet["image"]["slug"] == "debian-12-x64"
    assert droplet["region"]["slug"] == "nyc1"


def test_droplet_limit_is_enforced(do):
    do.app.configure(droplet_limit=1)
    create_droplet("first")
    with pytest.raises(digitalocean.DataReadError, match="exceed your droplet limit"):
        create_droplet("second")


def test_a_restricted_region_is_listed_available_but_refuses_creates_until_reset(do, manager):
    do.app.restrict_region("sfo3")
    [listed] = [region for region in api(do, "GET", "/v2/regions").json()["regions"] if region["slug"] == "sfo3"]
    assert listed["available"] and "s-1vcpu-1gb" in listed["sizes"]
    with pytest.raises(digitalocean.DataReadError) as raised:
        create_droplet(region="sfo3")
    assert str(raised.value) == "Region is not available"
    create_droplet("elsewhere", region="fra1")
    assert [droplet.name for droplet in manager.get_all_droplets()] == ["elsewhere"]
    with pytest.raises(ValueError, match="unknown region 'mars1'"):
        do.app.restrict_region("mars1")
    do.app.reset("default")
    create_droplet(region="sfo3")


def test_multi_create_and_delete_by_tag(do):
    response = api(do, "POST", "/v2/droplets/", json={
        "names": ["a-1", "a-2"], "size": "s-1vcpu-1gb", "image": "ubuntu-24-04-x64",
        "region": "fra1", "tags": ["batch"]})
    assert response.status_code == 202
    body = response.json()
    assert [d["name"] for d in body["droplets"]] == ["a-1", "a-2"]
    assert len(body["links"]["actions"]) == 2
    do.app.seed_droplet("keep", tags=["other"])

    assert api(do, "DELETE", "/v2/droplets", params={"tag_name": "batch"}).status_code == 204
    assert [d["name"] for d in do.app.droplets()] == ["keep"]
    missing = api(do, "DELETE", "/v2/droplets", params={"tag_name": "never-created"})
    assert missing.status_code == 404


def test_tag_and_name_filters(do, manager):
    mine = do.app.seed_droplet("mine", tags=["waldur-resource:aaaa"])
    do.app.seed_droplet("theirs", tags=["waldur-resource:bbbb"])
    do.app.seed_droplet("untagged")

    found = manager.get_all_droplets(tag_name="waldur-resource:aaaa")
    assert [d.id for d in found] == [mine["id"]]
    assert found[0].ip_address == mine["networks"]["v4"][1]["ip_address"]
    by_name = api(do, "GET", "/v2/droplets", params={"name": "untagged"}).json()
    assert [d["name"] for d in by_name["droplets"]] == ["untagged"]
    both = api(do, "GET", "/v2/droplets", params={"name": "mine", "tag_name": "x"})
    assert both.status_code == 422


def test_pagination_follows_absolute_links_over_450_droplets(do, manager):
    seeded = [do.app.seed_droplet(f"node-{i}")["id"] for i in range(450)]
    since = len(do.app.calls)

    listed = manager.get_all_droplets()

    assert sorted(d.id for d in listed) == seeded  # nothing missed, nothing doubled
    pages = do.app.calls_of("droplets.list", since)
    assert [parse_qs(c["query"]) for c in pages] == [
        {"per_page": ["200"]},
        {"page": ["2"], "per_page": ["200"]},
        {"page": ["3"], "per_page": ["200"]},
    ]
    first = json.loads(next(e for e in do.app.exchanges if "droplets" in e["url"])["response_body"])
    assert first["meta"] == {"total": 450}
    assert first["links"]["pages"] == {
        "next": f"{do.url}/v2/droplets?page=2&per_page=200",
        "last": f"{do.url}/v2/droplets?page=3&per_page=200",
    }


def test_paging_defaults_caps_and_keeps_filters(do):
    for i in range(45):
        do.app.seed_droplet(f"n-{i}", tags=["t"])
    default = api(do, "GET", "/v2/droplets").json()
    assert len(default["droplets"]) == 20
    capped = api(do, "GET", "/v2/droplets", params={"per_page": 500}).json()
    assert len(capped["droplets"]) == 45 and capped["links"] == {}
    last = api(do, "GET", "/v2/droplets", params={"tag_name": "t", "page": 3}).json()
    assert len(last["droplets"]) == 5
    assert last["links"]["pages"] == {
        "first": f"{do.url}/v2/droplets?tag_name=t&page=1&per_page=20",
        "prev": f"{do.url}/v2/droplets?tag_name=t&page=2&per_page=20",
    }
    assert api(do, "GET", "/v2/droplets", params={"per_page": 0}).status_code == 400


def test_shutdown_resize_power_on_lifecycle(do, manager):
    seeded = do.app.seed_droplet("app", size="s-1vcpu-1gb")
    droplet = manager.get_droplet(seeded["id"])

    with pytest.raises(digitalocean.DataReadError) as raised:
        droplet.resize("s-2vcpu-4gb", disk=False)
    assert str(raised.value) == "Droplet is currently on. Please power it off to run this event."

    assert droplet.shutdown(return_dict=False).wait(update_every_seconds=POLL)
    assert droplet.load().status == "off"

    # CPU/RAM only: the plan changes, the disk stays.
    assert droplet.resize("s-2vcpu-4gb", disk=False, return_dict=False).wait(update_every_seconds=POLL)
    droplet.load()
    assert (droplet.size_slug, droplet.vcpus, droplet.memory, droplet.disk) == ("s-2vcpu-4gb", 2, 4096, 25)
    # disk=True (sent as the string "true" by the library) grows the disk.
    assert droplet.resize("s-4vcpu-8gb", disk=True, return_dict=False).wait(update_every_seconds=POLL)
    droplet.load()
    assert (droplet.size_slug, droplet.disk, droplet.status) == ("s-4vcpu-8gb", 160, "off")
    with pytest.raises(digitalocean.DataReadError, match="smaller disk"):
        droplet.resize("s-2vcpu-4gb", disk=False)

    assert droplet.power_on(return_dict=False).wait(update_every_seconds=POLL)
    assert droplet.load().status == "active"
    assert [a["type"] for a in do.app.actions(droplet.id)] == ["shutdown", "resize", "resize", "power_on"]


def test_second_action_while_one_is_pending_is_422(do, manager):
    seeded = do.app.seed_droplet("busy", status="off")
    droplet = digitalocean.Droplet(token=DO_TOKEN, id=seeded["id"])
    droplet.power_on()  # no read in between: the power_on is still in progress
    with pytest.raises(digitalocean.DataReadError) as raised:
        droplet.shutdown()
    assert str(raised.value) == "Droplet already has a pending event."
    assert manager.get_droplet(seeded["id"]).status == "active"  # the read completed it
    droplet.shutdown()


def test_actions_take_action_seconds_and_are_listed(do, manager):
    do.app.configure(action_seconds=0.3)
    droplet = manager.get_droplet(do.app.seed_droplet("slow")["id"])
    action = droplet.shutdown(return_dict=False)
    action.load()
    assert action.status == "in-progress"
    assert manager.get_droplet(droplet.id).status == "active"
    assert action.wait(update_every_seconds=0.1)
    assert manager.get_droplet(droplet.id).status == "off"

    listed = droplet.get_actions()  # droplet_actions.list, then droplet_actions.get each
    assert [(a.type, a.status) for a in listed] == [("shutdown", "completed")]
    assert do.app.calls_of("droplet_actions.get")
    assert manager.get_action(action.id).completed_at is not None


def test_destroy_then_not_found(do, manager):
    droplet = create_droplet()
    assert droplet.destroy() is True
    with pytest.raises(digitalocean.NotFoundError):
        manager.get_droplet(droplet.id)
    with pytest.raises(digitalocean.NotFoundError):
        droplet.destroy()
    body = json.loads(last_exchange(do, "DELETE", f"/droplets/{droplet.id}")["response_body"])
    assert body["id"] == "not_found"
    assert body["message"] == "The resource you were accessing could not be found."
    # The create action was cut short by the destroy.
    assert [a["status"] for a in do.app.actions(droplet.id)] == ["errored"]


def test_trailing_slashes_per_page_and_empty_delete_bodies_are_tolerated(do):
    droplet_id = do.app.seed_droplet("slashes")["id"]
    assert api(do, "GET", f"/v2/droplets/{droplet_id}/?per_page=200").status_code == 200
    assert api(do, "GET", "/v2/account/?per_page=200").status_code == 200
    response = api(do, "DELETE", f"/v2/droplets/{droplet_id}/", data="{}",
                   headers={"content-type": "application/json"})
    assert response.status_code == 204 and response.content == b""
    assert do.app.droplet(droplet_id) is None


# ---- keys, sizes, tags, account ---------------------------------------------------------

def test_fingerprint_is_md5_of_the_key_blob():
    assert fingerprint_of(OPS_PUBLIC_KEY) == OPS_KEY_FINGERPRINT
    assert fingerprint_of(ADMIN_PUBLIC_KEY) == ADMIN_KEY_FINGERPRINT
    for bad in ("ssh-ed25519", "ssh-rsa not-base64!", "ssh-rsa " + OPS_PUBLIC_KEY.split()[1], "hello"):
        with pytest.raises(ValueError):
            fingerprint_of(bad)


def test_public_key_in_create_is_uploaded_and_found_by_fingerprint(do):
    droplet = create_droplet("with-key", ssh_keys=[NEW_PUBLIC_KEY])
    uploaded = [k for k in do.app.keys() if k["fingerprint"] == NEW_KEY_FINGERPRINT]
    assert len(uploaded) == 1 and uploaded[0]["name"] == "SSH Key with-key"
    assert do.app.droplet(droplet.id)["ssh_key_ids"] == [uploaded[0]["id"]]

    key = digitalocean.SSHKey(token=DO_TOKEN, fingerprint=NEW_KEY_FINGERPRINT)
    key.load()
    assert key.id == uploaded[0]["id"] and key.public_key == NEW_PUBLIC_KEY

    again = digitalocean.SSHKey(token=DO_TOKEN, name="dup", public_key=NEW_PUBLIC_KEY)
    with pytest.raises(digitalocean.DataReadError) as raised:
        again.create()
    assert str(raised.value) == "SSH Key is already in use on your account"


def test_keys_by_id_and_fingerprint(do, manager):
    assert [k.fingerprint for k in manager.get_all_sshkeys()] == [OPS_KEY_FINGERPRINT, ADMIN_KEY_FINGERPRINT]
    assert manager.get_ssh_key(OPS_KEY_ID).name == "waldur-ops"
    renamed = api(do, "PUT", f"/v2/account/keys/{ADMIN_KEY_FINGERPRINT}", json={"name": "renamed"})
    assert renamed.json()["ssh_key"]["name"] == "renamed"
    assert api(do, "DELETE", f"/v2/account/keys/{ADMIN_KEY_FINGERPRINT}").status_code == 204
    assert api(do, "GET", f"/v2/account/keys/{ADMIN_KEY_FINGERPRINT}").status_code == 404
    invalid = api(do, "POST", "/v2/account/keys", json={"name": "x", "public_key": "not a key"})
    assert invalid.status_code == 422 and invalid.json()["id"] == "unprocessable_entity"
    assert [k["id"] for k in do.app.keys()] == [OPS_KEY_ID]


def test_sizes_and_account(manager):
    sizes = {s.slug: s for s in manager.get_all_sizes()}
    assert {"s-1vcpu-1gb", "s-1vcpu-2gb", "s-2vcpu-2gb", "s-2vcpu-4gb", "s-4vcpu-8gb"} <= set(sizes)
    small = sizes["s-2vcpu-4gb"]
    assert (small.memory, small.vcpus, small.disk, small.price_monthly) == (4096, 2, 80, 24.0)
    assert "ams3" in small.regions
    account = manager.get_account()
    assert account.droplet_limit == 100 and account.status == "active"


def test_tags_create_get_delete_untags(do, manager):
    tag = digitalocean.Tag(token=DO_TOKEN, name="team-a")
    tag.create()
    droplet_id = do.app.seed_droplet("tagged", tags=["team-a"])["id"]
    loaded = digitalocean.Tag(token=DO_TOKEN, name="team-a").load()
    assert loaded.resources["droplets"] == {
        "count": 1, "last_tagged_uri": f"{do.url}/v2/droplets/{droplet_id}"}
    assert [t.name for t in manager.get_all_tags()] == ["team-a"]
    bad = api(do, "POST", "/v2/tags", json={"name": "no spaces"})
    assert bad.status_code == 400 and {"id", "message", "error"} <= set(bad.json())
    assert tag.delete() is True
    assert do.app.droplet(droplet_id)["tags"] == []
    with pytest.raises(digitalocean.NotFoundError):
        digitalocean.Tag(token=DO_TOKEN, name="team-a").load()


# ---- auth, rate limits, faults ----------------------------------------------------------

def test_wrong_or_missing_token_is_401(do):
    with pytest.raises(digitalocean.DataReadError) as raised:
        digitalocean.Manager(token="not-the-token").get_account()
    assert str(raised.value) == "Unable to authenticate you."
    response = requests.get(do.url + "/v2/droplets", timeout=10)
    assert response.status_code == 401
    assert response.json()["id"] == "unauthorized"
    assert do.app.calls[-1]["status"] == 401


def test_every_response_carries_rate_limit_headers(do, manager):
    manager.get_all_sizes()
    assert manager.ratelimit_limit == "5000"
    first = int(manager.ratelimit_remaining)
    manager.get_all_sizes()
    assert int(manager.ratelimit_remaining) == first - 1
    assert int(manager.ratelimit_reset) > time.time()
    not_found = api(do, "GET", "/v2/droplets/1")
    assert {"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"} <= set(not_found.headers)


def test_429_burst_carries_retry_after_and_do_error_body(do, manager):
    do.app.add_fault("droplets.list", 429, retry_after=7)
    with pytest.raises(digitalocean.DataReadError) as raised:
        manager.get_all_droplets()
    assert str(raised.value) == "API Rate limit exceeded."
    throttled = last_exchange(do, "GET", "/v2/droplets")
    assert throttled["status"] == 429
    assert throttled["response_headers"]["Retry-After"] == "7"
    assert throttled["response_headers"]["ratelimit-remaining"] == "0"
    assert json.loads(throttled["response_body"])["id"] == "too_many_requests"
    assert manager.get_all_droplets() == []  # the burst is over

    do.app.set_rate_limit(2, window=60)
    assert api(do, "GET", "/v2/account").status_code == 200
    assert api(do, "GET", "/v2/account").status_code == 200
    limited = api(do, "GET", "/v2/account")
    assert limited.status_code == 429 and 55 <= int(limited.headers["Retry-After"]) <= 60


def test_enforce_limits_applies_the_documented_250_per_minute():
    app = DigitalOceanSimulator(enforce_limits=True)
    client = Client(app)
    statuses = [client.get("/v2/sizes", headers=AUTH).status_code for attempt in range(251)]
    assert statuses[:250] == [200] * 250
    assert statuses[250] == 429
    throttled = client.get("/v2/sizes", headers=AUTH)
    assert 1 <= int(throttled.headers["Retry-After"]) <= 60
    assert DigitalOceanSimulator(enforce_limits="false").rate_limit is None


def test_enforce_limits_windows_and_hourly_allowance(do):
    do.app.configure(enforce_limits=True, burst_limit=3, burst_window=0.5)
    assert [api(do, "GET", "/v2/account").status_code for attempt in range(4)] == [200, 200, 200, 429]
    time.sleep(0.55)
    assert api(do, "GET", "/v2/account").status_code == 200  # the window moved on

    do.app.configure(burst_limit=100, hourly_limit=1)
    hourly = api(do, "GET", "/v2/account")
    assert hourly.status_code == 429 and int(hourly.headers["Retry-After"]) > 3000


def test_injected_fault_fails_one_call_without_side_effects(do, manager):
    do.app.add_fault("droplets.create", 500)
    with pytest.raises(digitalocean.DataReadError, match="Injected fault on droplets.create"):
        create_droplet()
    assert do.app.droplets() == []
    create_droplet()
    assert len(do.app.droplets()) == 1


def _wait_for(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_barrier_holds_the_first_calls_until_all_clients_sent_theirs(do):
    barrier = do.app.add_barrier("droplets.list", clients=2, timeout=30)
    answers = {}

    def look_up(name):
        answers[name] = api(do, "GET", "/v2/droplets", params={"tag_name": name}).status_code

    first = threading.Thread(target=look_up, args=("first",))
    first.start()
    _wait_for(lambda: barrier.describe()["arrived"] == 1)
    assert first.is_alive() and answers == {}  # held: the second client has not asked yet
    look_up("second")
    first.join(10)
    assert answers == {"first": 200, "second": 200}
    assert barrier.describe() == {"operation": "droplets.list", "clients": 2, "timeout": 30.0,
                                  "query": None, "arrived": 2, "timed_out": False}
    assert api(do, "GET", "/v2/droplets").status_code == 200  # later calls pass at once


def test_barrier_lets_a_lone_client_through_at_its_timeout(do):
    response = requests.post(do.url + "/_sim/barrier", json={"operation": "account.get", "clients": 3,
                                                             "timeout": 0.2}, timeout=10)
    assert response.status_code == 201
    assert api(do, "GET", "/v2/account").status_code == 200
    [barrier] = requests.get(do.url + "/_sim/barrier", timeout=10).json()
    assert (barrier["arrived"], barrier["timed_out"]) == (1, True)
    assert requests.post(do.url + "/_sim/barrier", json={"operation": "account.get", "clients": 0},
                         timeout=10).status_code == 400
    do.app.reset("default")
    assert do.app.barriers == {}


def test_call_log_marks_successful_writes_only(do, manager):
    since = len(do.app.calls)
    manager.get_all_droplets()
    create_droplet("ok")
    with pytest.raises(digitalocean.DataReadError):
        create_droplet("bad", size_slug="nope")
    writes = do.app.write_calls(since)
    assert [(c["operation"], c["status"]) for c in writes] == [("droplets.create", 202)]
    assert [c["write"] for c in do.app.calls[since:]] == [False, True, False]


def test_reset_restores_preset_options_and_clears_records(do):
    do.app.configure(action_seconds=5, droplet_limit=1)
    create_droplet()
    do.app.add_fault("droplets.list", 500, times=-1)
    api(do, "POST", "/v2/account/keys", json={"name": "n", "public_key": NEW_PUBLIC_KEY})

    do.app.reset("default")
    assert do.app.droplets() == [] and do.app.tags() == []
    assert [k["fingerprint"] for k in do.app.keys()] == [OPS_KEY_FINGERPRINT, ADMIN_KEY_FINGERPRINT]
    assert do.app.settings["action_seconds"] == 0 and do.app.settings["droplet_limit"] == 100
    assert len(do.app.exchanges) == 0 and do.app.calls == []
    assert api(do, "GET", "/v2/droplets").status_code == 200

    do.app.reset("empty")
    assert do.app.keys() == []


def test_control_api_sets_options_and_dumps_state(do):
    response = requests.post(do.url + "/_sim/options", json={"action_seconds": "0.5"}, timeout=10)
    assert response.json()["action_seconds"] == 0.5
    assert requests.post(do.url + "/_sim/options", json={"nope": 1}, timeout=10).status_code == 400
    do.app.seed_droplet("state")
    state = requests.get(do.url + "/_sim/state", timeout=10).json()
    assert set(state) == {"droplets", "actions", "keys", "tags"}
    assert [d["name"] for d in state["droplets"]] == ["state"]
    api(do, "GET", "/v2/account")
    exchanges = requests.get(do.url + "/_sim/exchanges", timeout=10).json()
    assert exchanges[-1]["url"].endswith("/v2/account") and exchanges[-1]["status"] == 200
    assert len(do.app.calls) == 1  # control calls are not logged


def test_command_line_starts_and_prints_its_url():
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.simulators", "digitalocean", "--port", "0",
         "--option", "action_seconds=0.2"],
        stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        info = json.loads(process.stdout.readline())
        assert info["simulator"] == "digitalocean"
        response = requests.get(info["url"] + "/v2/account", headers=AUTH, timeout=10)
        assert response.status_code == 200 and response.json()["account"]["status"] == "active"
        assert requests.get(info["url"] + "/_sim/options", timeout=10).json()["action_seconds"] == 0.2
    finally:
        process.terminate()
        process.wait(timeout=10)
