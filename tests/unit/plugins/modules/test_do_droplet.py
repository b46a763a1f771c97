"""Per-item decisions of do_droplet (with a fake client) and the module's own checks."""

from __future__ import annotations

import copy
import json
import time
from types import SimpleNamespace

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import (
    ProvenAbsence,
    ProvenList,
    ProvenObject,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import run_batch
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean import droplets
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import DigitalOceanClient
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.modules import do_droplet
from tests.simulators.digitalocean import presets

UUID = "5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b"
OTHER = "7a6b5c4d3e2f41a09b8c7d6e5f4a3b2c"
TAG = "waldur-resource:" + UUID
OTHER_TAG = "waldur-resource:" + OTHER
THIRD = "c0ffee00c0ffee00c0ffee00c0ffee00"
WRITES = ("create_droplet", "destroy_droplet", "droplet_action")


def facts(droplet_id, status="active", tags=(TAG,), size="s-1vcpu-1gb"):
    return {"id": droplet_id, "name": "web-%d" % droplet_id, "status": status, "region": "ams3",
            "size_slug": size, "image": "ubuntu-22-04-x64", "vcpus": 1, "memory": 1024, "disk": 25,
            "networks": {"public_ipv4": None, "private_ipv4": None, "public_ipv6": None},
            "tags": list(tags), "created_at": "2026-01-02T03:04:05Z"}


class FakeClient:
    """The DigitalOceanClient interface over a dict of droplets; records every call."""

    def __init__(self, *droplets, outcomes=None):
        self.droplets = dict((d["id"], copy.deepcopy(d)) for d in droplets)
        self.calls = []
        self.outcomes = outcomes or {}  # action type -> status wait_for_action reports
        self.auth_error = None
        self.api_calls = 0
        self.stats = SimpleNamespace(reads=0, writes=0, retries=0)
        self.next_id = 900

    def writes(self):
        return [call for call in self.calls if call[0] in WRITES]

    # the read layer's answers are proof (core/evidence.py): so are the fake's
    def get_droplet(self, droplet_id):
        self.calls.append(("get_droplet", int(droplet_id)))
        found = self.droplets.get(int(droplet_id))
        return ProvenObject(copy.deepcopy(found), "fake") if found else ProvenAbsence("fake")

    def find_droplets(self, droplet_ids):
        self.calls.append(("find_droplets", sorted(droplet_ids)))
        return dict((i, ProvenObject(copy.deepcopy(self.droplets[i]), "fake") if i in self.droplets
                     else ProvenAbsence("fake")) for i in droplet_ids)

    def list_droplets(self, tag_name=None):
        self.calls.append(("list_droplets", tag_name))
        return ProvenList([copy.deepcopy(d) for d in self.droplets.values() if tag_name in d["tags"]], "fake")

    def resolve_ssh_keys(self, entries, key_name, check_mode=False):
        self.calls.append(("resolve_ssh_keys", list(entries or []), key_name, check_mode))
        return [int(e) for e in entries or []], []

    def create_droplet(self, name, region, size, image, ssh_keys=None, tags=None, user_data=None,
                       resource_tag=None):
        self.calls.append(("create_droplet", dict(name=name, region=region, size=size, image=image,
                                                  ssh_keys=ssh_keys, tags=tags, user_data=user_data)))
        self.next_id += 1
        droplet = facts(self.next_id, status="new", tags=tags, size=size)
        droplet["name"] = name
        self.droplets[droplet["id"]] = droplet
        return copy.deepcopy(droplet)

    def destroy_droplet(self, droplet_id):
        self.calls.append(("destroy_droplet", int(droplet_id)))
        return self.droplets.pop(int(droplet_id), None) is not None

    def droplet_action(self, droplet_id, action_type, size=None):
        self.calls.append(("droplet_action", int(droplet_id), action_type) + ((size,) if size else ()))
        droplet = self.droplets[int(droplet_id)]
        if action_type == "resize" and droplet["status"] != "off":
            raise DigitalOceanError("DigitalOcean refused the request (422 Droplet is currently on)", status=422)
        return {"id": len(self.calls), "status": "in-progress", "type": action_type, "size": size,
                "droplet": int(droplet_id)}

    def action_status(self, droplet_id, action):
        self.calls.append(("action_status", int(droplet_id), action["type"]))
        return self.outcomes.get(action["type"], "completed")

    def wait_for_action(self, droplet_id, action, deadline):
        self.calls.append(("wait_for_action", int(droplet_id), action["type"]))
        status = self.outcomes.get(action["type"], "completed")
        if status == "completed":
            droplet = self.droplets[int(droplet_id)]
            if action["type"] in ("shutdown", "power_off"):
                droplet["status"] = "off"
            elif action["type"] == "power_on":
                droplet["status"] = "active"
            elif action["type"] == "resize":
                droplet["size_slug"] = action["size"]
        return status


class FakeWaiter:
    """The DropletWaiter interface over a FakeClient: a droplet being started is up at once, and
    a power action ends at once as the client's ``outcomes`` say (completed unless told)."""

    def __init__(self, client):
        self.client = client

    def _settle(self, droplet_id):
        droplet = self.client.droplets.get(int(droplet_id))
        if droplet and droplet["status"] == "new":
            droplet["status"] = "active"
        actions = [call[2] for call in self.client.calls if call[0] == "droplet_action" and call[1] == int(droplet_id)]
        if droplet and actions and self.client.outcomes.get(actions[-1], "completed") == "completed":
            droplet["status"] = {"shutdown": "off", "power_off": "off", "power_on": "active"}.get(
                actions[-1], droplet["status"])
        return copy.deepcopy(droplet) if droplet else None

    def wait_all(self, requests):
        self.client.calls.append(("wait_all", [facts["id"] for facts, dummy, dummy in requests]))
        return [self._settle(facts["id"]) for facts, dummy, dummy in requests]

    def wait(self, facts, statuses, deadline):
        self.client.calls.append(("wait", facts["id"]))
        return self._settle(facts["id"])


def item(**fields):
    base = {"resource_uuid": UUID, "order_uuid": None, "state": "present", "backend_id": None, "name": None,
            "region": None, "image": None, "size": None, "ssh_keys": [], "user_data": None, "tags": []}
    base.update(fields)
    return base


def create_item(**fields):
    return item(name="Web 1", region="ams3", image="ubuntu-22-04-x64", size="s-1vcpu-1gb", **fields)


def run(client, one, check_mode=False, wait=True, waiter=None):
    """One item as do_droplet works on it: the worker, then the batch's shared wait."""
    worker = do_droplet.DropletWorker(client, check_mode=check_mode, wait=wait, wait_timeout=60,
                                      waiter=waiter or FakeWaiter(client))
    return worker.finish_waits([one], [worker(one)], float("inf"))[0]


# ---- validation ----------------------------------------------------------

def test_missing_region_image_size_fail_before_any_call():
    client = FakeClient()
    result = run(client, item(image="ubuntu-22-04-x64"))
    assert result["failed"] is True
    assert result["msg"] == ("DigitalOcean droplet region is not specified; "
                             "DigitalOcean droplet size is not specified")
    assert client.calls == []


def test_backend_id_must_be_a_droplet_id():
    client = FakeClient()
    result = run(client, item(backend_id="/subscriptions/x/vm"))
    assert result["failed"] and "is not a DigitalOcean droplet id" in result["msg"]
    assert client.calls == []


# ---- create and adopt -----------------------------------------------------------------

def test_create_tags_the_droplet_and_drops_reserved_tags():
    client = FakeClient()
    result = run(client, create_item(tags=["web", OTHER_TAG, "web"], ssh_keys=["512189"], user_data="#cloud-config"))
    created = [call for call in client.calls if call[0] == "create_droplet"]
    assert created == [("create_droplet", {
        "name": "web-1", "region": "ams3", "size": "s-1vcpu-1gb", "image": "ubuntu-22-04-x64",
        "ssh_keys": [512189], "tags": ["web", TAG], "user_data": "#cloud-config"})]
    assert client.calls[0] == ("list_droplets", TAG)  # looked for a droplet to adopt first
    assert (result["action"], result["changed"], result["failed"]) == ("created", True, False)
    assert result["backend_id"] == "901"
    assert result["droplet"]["status"] == "active"  # waited
    assert result["backend_metadata"]["backend_type"] == "digitalocean"
    assert result["backend_metadata"]["droplet"]["id"] == 901
    assert result["dropped_tags"] == [OTHER_TAG]
    assert "dropped tag(s) %s" % OTHER_TAG in result["msg"]


def test_create_without_wait_returns_the_new_droplet():
    client = FakeClient()
    result = run(client, create_item(), wait=False)
    assert result["droplet"]["status"] == "new"
    assert not [call for call in client.calls if call[0] == "wait"]


def test_exactly_one_tagged_droplet_is_adopted():
    client = FakeClient(facts(7, tags=["web", TAG]))
    result = run(client, create_item())
    assert (result["action"], result["changed"], result["backend_id"]) == ("adopted", False, "7")
    assert client.writes() == []


def copy_of(droplet_id, created_at, **fields):
    """A droplet as one order's create makes it (same name and size), created at ``created_at``."""
    droplet = facts(droplet_id, **fields)
    droplet.update(name="web-1", created_at=created_at)
    return droplet


ORDERED = "2026-01-02T03:00:00Z"  # the order's creation time (the item's not_before)


@pytest.mark.parametrize("second, why", [
    (dict(facts(8), name="web-8", created_at="2026-01-02T03:04:06Z"), "droplet 8 differs from the order (name web-8, not web-1)"),
    (copy_of(8, "2026-01-02T03:04:06Z", size="s-2vcpu-4gb"), "droplet 8 differs from the order (size s-2vcpu-4gb, not s-1vcpu-1gb)"),
    (copy_of(8, "2026-01-02T03:20:06Z"), "they were created more than 900 seconds apart"),
])
def test_tagged_droplets_that_are_not_copies_are_all_kept_naming_each(second, why):
    client = FakeClient(copy_of(7, "2026-01-02T03:04:05Z"), second)
    result = run(client, create_item(not_before=ORDERED))
    assert (result["failed"], result["retry"], result["held"], result["backend_id"]) == (True, True, True, None)
    assert result["msg"].startswith("2 droplets carry tag %s and none was deleted or adopted, since %s: 7 web-1 "
                                    "(ams3, s-1vcpu-1gb, created 2026-01-02T03:04:05Z); 8 " % (TAG, why))
    assert client.writes() == []


def test_copies_made_by_overlapping_passes_are_deleted_keeping_the_oldest():
    client = FakeClient(copy_of(9, "2026-01-02T03:04:09Z"), copy_of(7, "2026-01-02T03:04:07Z"),
                        copy_of(8, "2026-01-02T03:14:05Z"))
    result = run(client, create_item(not_before=ORDERED))
    assert (result["action"], result["changed"], result["failed"], result["backend_id"]) == (
        "adopted", True, False, "7")
    assert sorted(client.writes()) == [("destroy_droplet", 8), ("destroy_droplet", 9)]
    assert sorted(client.droplets) == [7]
    assert ("deleted duplicate droplet(s) 9, 8 carrying tag %s, made by an overlapping pass (identical to the order "
            "and to each other, created after it and within 900 seconds); kept the oldest, 7" % TAG) in result["msg"]


def test_check_mode_only_says_which_copies_it_would_delete():
    client = FakeClient(copy_of(7, "2026-01-02T03:04:07Z"), copy_of(8, "2026-01-02T03:04:08Z"))
    result = run(client, create_item(not_before=ORDERED), check_mode=True)
    assert client.writes() == [] and result["backend_id"] == "7"
    assert "would delete duplicate droplet(s) 8 made by an overlapping pass, keeping the oldest, 7" in result["msg"]


def test_a_droplet_carrying_another_resources_tag_is_never_adopted():
    client = FakeClient(facts(7, tags=[TAG, OTHER_TAG]))
    result = run(client, create_item())
    assert result["action"] == "created" and result["backend_id"] != "7"
    assert "droplet(s) 7 carry another resource's tag as well and were not adopted" in result["msg"]


def test_check_mode_create_writes_nothing():
    client = FakeClient()
    result = run(client, create_item(ssh_keys=["1"]), check_mode=True)
    assert (result["action"], result["changed"], result["backend_id"]) == ("created", True, None)
    assert result["msg"].startswith("would create droplet web-1 in ams3 (s-1vcpu-1gb, ubuntu-22-04-x64)")
    assert client.writes() == []
    assert ("resolve_ssh_keys", ["1"], "waldur-5f0f2b4c", True) in client.calls


# ---- present with a backend id, resize ------------------------------------------------

def test_existing_droplet_is_left_alone():
    client = FakeClient(facts(7))
    result = run(client, create_item(backend_id="7"))
    assert (result["action"], result["changed"], result["failed"]) == ("none", False, False)
    assert result["msg"] == "droplet 7 exists (active)"
    assert client.writes() == []
    assert result["backend_metadata"]["droplet"]["size_slug"] == "s-1vcpu-1gb"


def test_a_vanished_droplet_is_never_recreated():
    client = FakeClient()
    result = run(client, create_item(backend_id="7"))
    assert result["failed"] is True
    assert result["msg"] == ("droplet 7 no longer exists and cannot be re-created under the same id; "
                             "terminate the resource and order a new one")
    assert client.writes() == []


def test_resize_of_a_running_droplet_powers_it_off_and_on():
    client = FakeClient(facts(7))
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb"))
    assert [call for call in client.calls if call[0] == "droplet_action"] == [
        ("droplet_action", 7, "shutdown"), ("droplet_action", 7, "resize", "s-2vcpu-2gb"),
        ("droplet_action", 7, "power_on")]
    assert (result["action"], result["changed"], result["failed"]) == ("resized", True, False)
    assert result["droplet"]["size_slug"] == "s-2vcpu-2gb" and result["droplet"]["status"] == "active"
    assert result["msg"] == "resized droplet 7 from s-1vcpu-1gb to s-2vcpu-2gb (shut down, resized, powered on)"


def test_resize_of_a_stopped_droplet_leaves_it_off():
    client = FakeClient(facts(7, status="off"))
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb"))
    assert [call[2] for call in client.writes()] == ["resize"]
    assert result["droplet"]["status"] == "off"


def test_same_size_is_no_resize():
    client = FakeClient(facts(7))
    result = run(client, item(backend_id="7", size="s-1vcpu-1gb"))
    assert result["action"] == "none" and client.writes() == []


def test_resize_powers_on_a_stopped_droplet_waldur_wants_running():
    client = FakeClient(facts(7, status="off"))
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb", running=True))
    assert [call[2] for call in client.writes()] == ["resize", "power_on"]
    assert result["msg"] == "resized droplet 7 from s-1vcpu-1gb to s-2vcpu-2gb (resized, powered on)"


def test_resize_leaves_a_droplet_waldur_wants_stopped_off():
    client = FakeClient(facts(7))
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb", running=False))
    assert [call[2] for call in client.writes()] == ["shutdown", "resize"]
    assert result["droplet"]["status"] == "off"


def test_a_resize_interrupted_before_power_on_is_finished_by_powering_on():
    client = FakeClient(facts(7, status="off", size="s-2vcpu-2gb"))
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb", running=True))
    assert [call[2] for call in client.writes()] == ["power_on"]
    assert (result["action"], result["changed"], result["droplet"]["status"]) == ("powered_on", True, "active")
    assert result["msg"] == ("droplet 7 has size s-2vcpu-2gb; powered it on (an interrupted resize had left it off)")


def test_shutdown_that_does_not_finish_falls_back_to_power_off():
    client = FakeClient(facts(7), outcomes={"shutdown": "in-progress"})
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb"))
    assert [call[2] for call in client.writes()] == ["shutdown", "power_off", "resize", "power_on"]
    assert "graceful shutdown did not finish; powered off" in result["msg"]
    assert result["failed"] is False


def test_failed_resize_powers_the_droplet_back_on():
    client = FakeClient(facts(7), outcomes={"resize": "errored"})
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb"))
    assert result["failed"] is True and result["changed"] is True
    assert result["msg"] == "resize of droplet 7 to s-2vcpu-2gb failed; powered it back on"
    assert [call[2] for call in client.writes()] == ["shutdown", "resize", "power_on"]


def test_a_resize_that_does_not_finish_in_time_is_retried_not_erred():
    client = FakeClient(facts(7), outcomes={"resize": "in-progress"})
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb"))
    assert (result["failed"], result["retry"], result["backend_id"]) == (True, True, "7")
    assert result["msg"].startswith("resize of droplet 7 to s-2vcpu-2gb did not finish within 60 seconds")


def test_check_mode_resize_writes_nothing():
    client = FakeClient(facts(7))
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb"), check_mode=True)
    assert result["action"] == "resized" and result["changed"] is True
    assert result["msg"].startswith("would resize droplet 7 from s-1vcpu-1gb to s-2vcpu-2gb")
    assert client.writes() == []


# ---- absent ---------------------------------------------------------------------------

def test_absent_deletes_by_backend_id():
    client = FakeClient(facts(7))
    result = run(client, item(state="absent", backend_id="7"))
    assert (result["action"], result["changed"], result["msg"]) == ("deleted", True, "deleted droplet 7")
    assert 7 not in client.droplets


def test_absent_of_a_deleted_droplet_is_fine():
    client = FakeClient()
    result = run(client, item(state="absent", backend_id="7"))
    assert (result["action"], result["changed"], result["failed"]) == ("absent", False, False)
    assert result["msg"] == "droplet 7 is already gone"


def test_absent_without_backend_id_deletes_only_droplets_carrying_exactly_this_tag():
    client = FakeClient(facts(7), facts(8, tags=[TAG, OTHER_TAG]), facts(9, tags=[OTHER_TAG]))
    result = run(client, item(state="absent", name="web-7"))
    assert client.writes() == [("destroy_droplet", 7)]
    assert result["action"] == "deleted" and "left alone" in result["msg"]


def test_absent_by_backend_id_deletes_the_copies_carrying_the_tag_too():
    client = FakeClient(facts(7), dict(facts(8), name="web-7"), facts(9, tags=[TAG, OTHER_TAG]))
    result = run(client, item(state="absent", backend_id="7", name="web-7"))
    assert client.writes() == [("destroy_droplet", 7), ("destroy_droplet", 8)]
    assert result["msg"] == ("deleted droplet 7; droplet(s) 9 carry another resource's tag as well and were left "
                             "alone; also deleted droplet(s) 8 carrying tag %s" % TAG)


def test_check_mode_absent_writes_nothing():
    client = FakeClient(facts(7))
    result = run(client, item(state="absent", backend_id="7"), check_mode=True)
    assert (result["action"], result["changed"]) == ("deleted", True)
    assert client.writes() == [] and 7 in client.droplets


# ---- off / active ---------------------------------------------------------------------

@pytest.mark.parametrize("state, status", [("off", "off"), ("active", "active")])
def test_nothing_to_do_when_already_in_state(state, status):
    client = FakeClient(facts(7, status=status))
    result = run(client, item(state=state, backend_id="7"))
    assert (result["action"], result["changed"]) == ("none", False)
    assert result["msg"] == "droplet 7 is already %s" % state
    assert client.writes() == []


def test_off_shuts_down_and_active_powers_on():
    client = FakeClient(facts(7), facts(8, status="off"))
    off = run(client, item(state="off", backend_id="7"))
    on = run(client, item(state="active", backend_id="8"))
    assert (off["action"], off["droplet"]["status"]) == ("powered_off", "off")
    assert (on["action"], on["droplet"]["status"]) == ("powered_on", "active")
    assert [call[1:] for call in client.writes()] == [(7, "shutdown"), (8, "power_on")]


def test_power_without_wait_only_requests():
    client = FakeClient(facts(7))
    result = run(client, item(state="off", backend_id="7"), wait=False)
    assert result["msg"] == "shutdown of droplet 7 requested"
    assert not [call for call in client.calls if call[0] == "wait_for_action"]


def test_power_on_a_vanished_droplet_fails():
    result = run(FakeClient(), item(state="active", backend_id="7"))
    assert result["failed"] and result["msg"] == "droplet 7 no longer exists"


def test_check_mode_power_writes_nothing():
    client = FakeClient(facts(7))
    result = run(client, item(state="off", backend_id="7"), check_mode=True)
    assert result["msg"] == "would shut down droplet 7" and client.writes() == []


def test_a_rejected_token_fails_every_item_without_calls():
    client = FakeClient(facts(7))
    client.auth_error = DigitalOceanError("DigitalOcean rejected the token (401 Unable to authenticate you)",
                                          status=401)
    result = run(client, item(state="off", backend_id="7"))
    assert result["failed"] and result["msg"].startswith("DigitalOcean rejected the token")
    assert client.calls == []


@pytest.mark.parametrize("error, retry", [
    (DigitalOceanError("DigitalOcean server error after 6 attempts (503 busy)", status=503), True),
    (DigitalOceanError("cannot reach DigitalOcean", status=None), True),
    (DigitalOceanError("DigitalOcean rate limit still exceeded", status=429), True),
    (DigitalOceanError("DigitalOcean refused the request (422 invalid size)", status=422), False),
])
def test_transient_failures_are_retried_and_refusals_are_not(error, retry):
    client = FakeClient()

    def failing(*args, **kwargs):
        raise error

    client.create_droplet = failing
    result = run(client, create_item())
    assert result["failed"] is True and bool(result.get("retry")) is retry and result["msg"] == str(error)


def test_a_failure_after_the_create_is_retried_with_the_droplet_id():
    client = FakeClient()

    class BrokenWaiter:
        def wait_all(self, requests):
            return [DigitalOceanError("DigitalOcean refused the request (403 forbidden): GET /v2/droplets/901",
                                      status=403)]

    result = run(client, create_item(), waiter=BrokenWaiter())
    assert (result["failed"], result["retry"], result["backend_id"]) == (True, True, "901")
    assert result["cloud"] == "droplet 901 web-1 (new)"
    assert result["msg"].startswith("created droplet 901 web-1 in ams3 (s-1vcpu-1gb, ubuntu-22-04-x64), "
                                    "then reading it failed: DigitalOcean refused")


def test_prefetch_reads_many_droplets_in_one_go():
    client = FakeClient(facts(7), facts(8, status="off"))
    worker = do_droplet.DropletWorker(client, wait_timeout=60, waiter=FakeWaiter(client))
    items = [item(state="off", backend_id="7"), item(state="active", backend_id="8"),
             item(state="absent", backend_id="9")]
    worker.prefetch(items)
    results = [worker(one) for one in items[:2]]
    assert client.calls[0] == ("find_droplets", [7, 8])
    assert not [call for call in client.calls[:3] if call[0] == "get_droplet"]
    assert [r["action"] for r in results] == ["powered_off", "powered_on"]


# ---- the module -----------------------------------------------------------------------

@pytest.fixture
def run_module(monkeypatch, capsys):
    def run(args, client):
        monkeypatch.setattr(do_droplet, "client_from_module", lambda module, max_connections=10: client)
        monkeypatch.setattr(droplets, "DropletWaiter", lambda client, clock=None: FakeWaiter(client))
        args = dict({"token": "dop_v1_secret-token", "api_url": "http://127.0.0.1:1/v2/"}, **args)
        with patch_module_args(args), pytest.raises(SystemExit):
            do_droplet.main()
        return json.loads(capsys.readouterr().out)
    return run


def test_module_returns_results_in_input_order(run_module):
    client = FakeClient(facts(7, tags=("waldur-resource:" + THIRD,)), facts(8, status="off"))
    out = run_module({"droplets": [
        {"resource_uuid": "5f0f2b4c-9a8e-4d3f-8a1b-2c3d4e5f6a7b", "backend_id": "8", "state": "active",
         "order_uuid": "0A1B2C3D-4E5F-4071-8293-A4B5C6D7E8F9"},
        {"resource_uuid": OTHER, "region": "ams3"},
        {"resource_uuid": THIRD, "backend_id": "7", "state": "off"},
    ]}, client)
    assert [r["action"] for r in out["results"]] == ["powered_on", "none", "powered_off"]
    assert out["results"][0]["resource_uuid"] == UUID
    assert out["results"][0]["order_uuid"] == "0a1b2c3d4e5f40718293a4b5c6d7e8f9"
    assert out["results"][1]["failed"] is True and out["results"][1]["resource_uuid"] == OTHER
    assert out["failed_count"] == 1 and out["changed"] is True and not out.get("failed")
    assert out["msg"] == "3 droplets: 1 powered_off, 1 powered_on; 1 failed"
    assert "dop_v1_secret-token" not in json.dumps(out)


def test_module_leaves_the_facts_out_when_asked_but_keeps_the_metadata(run_module):
    items = [{"resource_uuid": UUID, "backend_id": "7", "state": "off"}]
    full = run_module({"droplets": items}, FakeClient(facts(7)))["results"][0]
    compact = run_module({"droplets": items, "return_facts": False}, FakeClient(facts(7)))["results"][0]
    assert full["droplet"]["id"] == 7 and "droplet" not in compact
    assert compact == dict((key, value) for key, value in full.items() if key != "droplet")
    assert compact["backend_metadata"]["droplet"]["id"] == 7


def test_module_takes_and_returns_its_lists_packed(run_module):
    """droplets_packed and packed: the same items and results as one JSON text each (the
    membership pass's way at 10,000 droplets), the failures named beside the packed results."""
    items = [{"resource_uuid": UUID, "backend_id": "7", "state": "off"},
             {"resource_uuid": OTHER, "region": "ams3"}]
    listed = run_module({"droplets": items}, FakeClient(facts(7)))
    packed = run_module({"droplets_packed": json.dumps(items), "packed": True}, FakeClient(facts(7)))
    assert isinstance(packed["results_packed"], str) and "results" not in packed
    assert json.loads(packed["results_packed"]) == listed["results"]
    assert [failure["resource_uuid"] for failure in packed["failures"]] == [OTHER]
    assert (packed["msg"], packed["failed_count"]) == (listed["msg"], 1)


@pytest.mark.parametrize("packed, message", [
    ('[{"resource_uuid": "%s", "state": "gone"}]' % UUID,
     "droplets_packed: value of state must be one of: present, absent, off, active, got: gone"),
    ('{"resource_uuid": "%s"}' % UUID, "droplets_packed must pack a JSON list, got dict"),
    ("[{", "droplets_packed is not a packed list"),
])
def test_packed_items_are_checked_as_listed_ones_are(run_module, packed, message):
    client = FakeClient(facts(7))
    out = run_module({"droplets_packed": packed}, client)
    assert out["failed"] is True and message in out["msg"]
    assert client.calls == []


def test_module_fails_on_item_error_when_asked(run_module):
    out = run_module({"fail_on_item_error": True, "droplets": [{"resource_uuid": UUID, "region": "ams3"}]},
                     FakeClient())
    assert out["failed"] is True
    assert out["msg"].startswith("1 droplets: nothing; 1 failed; first failure (resource %s)" % UUID)


def test_module_rejects_a_bad_uuid_naming_the_key(run_module):
    out = run_module({"droplets": [{"resource_uuid": UUID}, {"resource_uuid": "not-a-uuid"}]}, FakeClient())
    assert out["failed"] is True
    assert out["msg"] == ("droplets[1].resource_uuid: 'not-a-uuid' is not a UUID "
                          "(expected 32 hex digits, dashed or not)")


def test_module_fails_when_the_token_is_rejected(run_module):
    client = FakeClient(facts(7))
    error = DigitalOceanError("DigitalOcean rejected the token (401 Unable to authenticate you): GET /v2/droplets/7",
                              status=401)

    def rejected(droplet_id):
        client.auth_error = error
        raise error

    client.get_droplet = rejected
    out = run_module({"droplets": [{"resource_uuid": UUID, "backend_id": "7", "state": "off"}]}, client)
    assert out["failed"] is True
    assert out["msg"] == str(error)
    # one line for the whole task: the items' results (all failing alike) are not repeated
    assert "results" not in out and out["failed_count"] == 1


def test_module_returns_api_calls_as_reads_writes_and_retries(run_module):
    client = FakeClient(facts(7))
    client.stats = SimpleNamespace(reads=4, writes=2, retries=1)
    out = run_module({"droplets": [{"resource_uuid": UUID, "backend_id": "7", "state": "off"}]}, client)
    assert out["api_calls"] == {"reads": 4, "writes": 2, "retries": 1}
    assert out["api_retries"] == 1
    assert out["results"][0]["retry"] is False


@pytest.mark.parametrize("plumbing", ["error", "skip", "comment"])
def test_module_items_carry_desired_state_only(run_module, plumbing):
    """Orders the filter errs or skips go straight to settle (droplet_outcomes): no such option."""
    out = run_module({"droplets": [{"resource_uuid": UUID, "backend_id": "7", plumbing: "x"}]}, FakeClient())
    assert out["failed"] is True and plumbing in out["msg"] and "results" not in out


def test_module_checks_the_batch_options_before_any_call(run_module):
    client = FakeClient(facts(7))
    out = run_module({"max_workers": 0, "droplets": [{"resource_uuid": UUID, "backend_id": "7"}]}, client)
    assert out["failed"] is True and out["msg"] == "max_workers must be a positive number, got 0"
    assert client.calls == []


def test_a_droplet_of_another_resource_is_never_powered_or_resized():
    """Ownership before every write: a backend id pointing at a droplet that carries another
    resource's tag (a copied or stale id) is refused, nothing is done to the droplet."""
    client = FakeClient(facts(7, tags=(OTHER_TAG,)))
    for item_ in (item(state="off", backend_id="7"), dict(create_item(backend_id="7"), size="s-2vcpu-4gb")):
        result = run(client, item_)
        assert result["failed"] is True and "not provably this resource's machine" in result["msg"], result
    assert client.writes() == []


def test_deferred_creates_are_all_sent_before_one_shared_wait():
    client = FakeClient()
    worker = do_droplet.DropletWorker(client, wait_timeout=60, waiter=FakeWaiter(client))
    items = [dict(create_item(resource_uuid="%032x" % (index + 1)), name="web-%d" % index) for index in range(3)]
    raw = run_batch(items, worker, max_workers=1)
    assert [r["deferred"] for r in raw] == [True] * 3
    assert "wait_all" not in [call[0] for call in client.calls]  # no worker waited for its droplet

    results = worker.finish_waits(items, raw, deadline=float("inf"))

    operations = [call[0] for call in client.calls if call[0] in ("create_droplet", "wait_all", "wait")]
    assert operations == ["create_droplet"] * 3 + ["wait_all"]
    assert [r["droplet"]["status"] for r in results] == ["active"] * 3
    assert ["deferred" in r for r in results] == [False] * 3
    assert [r["msg"] for r in results] == ["created droplet %d web-%d in ams3 (s-1vcpu-1gb, ubuntu-22-04-x64)"
                                           % (901 + index, index) for index in range(3)]


def power_items(*pairs):
    """Power items whose droplets carry their resource's tag (``facts(id, tags=own_tags(id))``)."""
    return [item(resource_uuid="%032x" % droplet_id, backend_id=str(droplet_id), state=state)
            for droplet_id, state in pairs]


def own_tags(droplet_id):
    return ("waldur-resource:%032x" % droplet_id,)


def test_deferred_power_changes_are_all_asked_for_before_one_shared_wait():
    client = FakeClient(facts(7, tags=own_tags(7)), facts(8, status="off", tags=own_tags(8)), facts(9, tags=own_tags(9)))
    worker = do_droplet.DropletWorker(client, wait_timeout=60, waiter=FakeWaiter(client))
    items = power_items((7, "off"), (8, "active"), (9, "active"))
    raw = run_batch(items, worker, max_workers=1)
    assert [r.get("deferred", False) for r in raw] == [True, True, False]  # 9 is already active
    results = worker.finish_waits(items, raw, deadline=float("inf"))

    operations = [call[:3] for call in client.calls if call[0] in ("droplet_action", "wait_all", "wait_for_action")]
    assert operations == [("droplet_action", 7, "shutdown"), ("droplet_action", 8, "power_on"), ("wait_all", [7, 8])]
    assert [r["msg"] for r in results] == ["droplet 7 shut down", "powered on droplet 8", "droplet 9 is already active"]
    assert [r["droplet"]["status"] for r in results] == ["off", "active", "active"]
    assert [r["backend_metadata"]["droplet"]["status"] for r in results] == ["off", "active", "active"]
    assert [r["changed"] for r in results] == [True, True, False] and not any(r["failed"] for r in results)


def test_a_deferred_shutdown_that_does_not_finish_is_followed_by_one_power_off_waited_for_together():
    client = FakeClient(facts(7, tags=own_tags(7)), facts(8, tags=own_tags(8)), outcomes={"shutdown": "in-progress"})
    worker = do_droplet.DropletWorker(client, wait_timeout=60, waiter=FakeWaiter(client))
    items = power_items((7, "off"), (8, "off"))
    results = worker.finish_waits(items, run_batch(items, worker, max_workers=1), deadline=float("inf"))
    operations = [call[:3] for call in client.calls if call[0] in ("droplet_action", "wait_all")]
    assert operations == [("droplet_action", 7, "shutdown"), ("droplet_action", 8, "shutdown"), ("wait_all", [7, 8]),
                          ("droplet_action", 7, "power_off"), ("droplet_action", 8, "power_off"), ("wait_all", [7, 8])]
    assert [r["msg"] for r in results] == ["droplet %d graceful shutdown did not finish; powered off" % i for i in (7, 8)]
    assert [r["droplet"]["status"] for r in results] == ["off", "off"]


def test_a_shutdown_the_batchs_deadline_cuts_short_is_left_to_a_later_pass_not_powered_off():
    client = FakeClient(facts(7, tags=own_tags(7)), outcomes={"shutdown": "in-progress"})
    worker = do_droplet.DropletWorker(client, wait_timeout=60, waiter=FakeWaiter(client))
    items = power_items((7, "off"))
    raw = run_batch(items, worker, max_workers=1)
    results = worker.finish_waits(items, raw, deadline=worker.clock() + 5)  # before half of the 60 s
    assert [call[2] for call in client.calls if call[0] == "droplet_action"] == ["shutdown"]
    assert (results[0]["failed"], results[0]["retry"]) == (True, True)
    assert results[0]["msg"] == "droplet 7 did not power off within 60 seconds (shutdown in-progress, status active)"


def test_a_refused_deferred_shutdown_goes_straight_to_the_power_off():
    client = FakeClient(facts(7, tags=own_tags(7)))
    asked = client.droplet_action

    def droplet_action(droplet_id, action_type, size=None):
        if action_type == "shutdown":
            client.calls.append(("droplet_action", int(droplet_id), action_type))
            raise DigitalOceanError("DigitalOcean refused the request (422 unprocessable)", status=422)
        return asked(droplet_id, action_type, size)

    client.droplet_action = droplet_action
    worker = do_droplet.DropletWorker(client, wait_timeout=60, waiter=FakeWaiter(client))
    items = power_items((7, "off"))
    results = worker.finish_waits(items, run_batch(items, worker, max_workers=1), deadline=float("inf"))
    operations = [call[:3] for call in client.calls if call[0] in ("droplet_action", "wait_all")]
    assert operations == [("droplet_action", 7, "shutdown"), ("droplet_action", 7, "power_off"), ("wait_all", [7])]
    assert results[0]["msg"] == "droplet 7 graceful shutdown did not finish; powered off"
    assert results[0]["droplet"]["status"] == "off" and not results[0]["failed"]


def test_a_deferred_power_change_that_does_not_happen_fails_naming_the_actions_status():
    outcomes = {"power_on": "errored", "shutdown": "in-progress", "power_off": "in-progress"}
    client = FakeClient(facts(7, status="off", tags=own_tags(7)), facts(8, tags=own_tags(8)), outcomes=outcomes)
    worker = do_droplet.DropletWorker(client, wait_timeout=60, waiter=FakeWaiter(client))
    items = power_items((7, "active"), (8, "off"))
    results = worker.finish_waits(items, run_batch(items, worker, max_workers=1), deadline=float("inf"))
    assert (results[0]["failed"], results[0]["msg"]) == (True, "power on of droplet 7 failed")
    assert "retry" not in results[0]
    assert (results[1]["failed"], results[1]["retry"]) == (True, True)  # the droplet runs on: a later pass retries
    assert results[1]["msg"] == "droplet 8 did not power off within 60 seconds (power_off in-progress, status active)"
    assert [call for call in client.calls if call[0] == "action_status"] == [("action_status", 7, "power_on"),
                                                                             ("action_status", 8, "power_off")]


def test_a_deferred_wait_that_fails_or_finds_the_droplet_gone_ends_the_item_with_a_reason():
    client = FakeClient()

    class Waiter:
        def wait_all(self, requests):
            client.droplets.pop(902)  # gone: the second read, the droplet's own, agrees
            return [DigitalOceanError("DigitalOcean refused the request (403 forbidden)", status=403), None]

    worker = do_droplet.DropletWorker(client, wait_timeout=60, waiter=Waiter())
    items = [dict(create_item(resource_uuid="%032x" % (index + 1)), name="web-%d" % index) for index in range(2)]
    results = worker.finish_waits(items, run_batch(items, worker, max_workers=1), deadline=float("inf"))
    assert (results[0]["failed"], results[0]["retry"], results[0]["backend_id"]) == (True, True, "901")
    assert "then reading it failed: DigitalOcean refused the request (403 forbidden)" in results[0]["msg"]
    assert results[1]["failed"] is True and "retry" not in results[1]
    assert results[1]["msg"] == "droplet 902 disappeared while it was being created"


def test_a_new_droplet_that_answers_not_found_once_is_not_taken_for_gone():
    """The waiter saw the new droplet gone, its own read then answers: the order waits, never erred."""
    client = FakeClient()

    class Waiter:
        def wait_all(self, requests):
            return [None]

    worker = do_droplet.DropletWorker(client, wait_timeout=60, waiter=Waiter())
    items = [dict(create_item(resource_uuid="%032x" % 1), name="web-0")]
    results = worker.finish_waits(items, run_batch(items, worker, max_workers=1), deadline=float("inf"))
    assert results[0]["failed"] is True and results[0]["retry"] is True, results[0]
    assert "answered not found while it was being created, then answered" in results[0]["msg"]


# ---- many creates against the simulator ---------------------------------------------------

def test_fifty_creates_wait_together_with_a_few_reads(do_sim):
    """The workers send every create, then one wait for all of them reads them boot: a handful
    of account listings, not a poll per droplet."""
    do_sim.app.configure(boot_seconds=1.0)
    client = DigitalOceanClient(presets.DO_TOKEN, api_url=do_sim.url, max_connections=50)
    worker = do_droplet.DropletWorker(client, wait_timeout=10)
    # orders approved by this pass (approved_now): no earlier pass can have made their droplets, so
    # the one listing is the whole proof of their absence
    items = [dict(create_item(resource_uuid="%032x" % (index + 1)), name="bulk-%02d" % index, approved_now=True)
             for index in range(50)]

    worker.prefetch(items)  # as the module does: one listing answers all tag lookups
    results = worker.finish_waits(items, run_batch(items, worker, max_workers=50, deadline_seconds=60),
                                  time.monotonic() + 60)

    assert [r["action"] for r in results if not r["failed"]] == ["created"] * 50
    assert [r["droplet"]["status"] for r in results] == ["active"] * 50
    # facts come from the listing entry: the addresses assigned at boot are there
    assert all(r["backend_metadata"]["droplet"]["networks"]["public_ipv4"] for r in results)
    assert sorted(r["backend_id"] for r in results) == sorted(str(d["id"]) for d in do_sim.app.droplets())
    operations = [call["operation"] for call in do_sim.app.calls]
    assert operations.count("droplets.create") == 50
    waits = [op for op in operations[operations.index("droplets.create"):] if op != "droplets.create"]
    assert set(waits) <= {"droplets.list", "droplets.get"}
    assert 1 <= len(waits) <= 8, operations  # one poll per droplet would be 50 or more
    # a call counted here but not there was resent after a dropped connection
    assert len(operations) == 1 + 50 + len(waits) == client.api_calls, "retries: %d" % client.stats.retries


# ---- changed and action say what happened on DigitalOcean (issue 24) ---------------------------

REFUSED = DigitalOceanError("DigitalOcean refused the request (422 unprocessable)", status=422)
LOST = DigitalOceanError("no answer from DigitalOcean to POST /v2/droplets", status=None, ambiguous=True)


def refusing(client, error, *action_types):
    """``client`` with every write of ``action_types`` (droplet actions, or "create"/"destroy") answered by ``error``."""
    asked = client.droplet_action

    def droplet_action(droplet_id, action_type, size=None):
        if action_type in action_types:
            client.calls.append(("droplet_action", int(droplet_id), action_type))
            raise error
        return asked(droplet_id, action_type, size)

    def fail(*args, **kwargs):
        raise error

    client.droplet_action = droplet_action
    if "create" in action_types:
        client.create_droplet = fail
    if "destroy" in action_types:
        client.destroy_droplet = fail
    return client


@pytest.mark.parametrize("error, action", [(REFUSED, "none"), (LOST, "unknown")])
def test_a_refused_create_is_not_changed_and_a_lost_answer_is_unknown(error, action):
    result = run(refusing(FakeClient(), error, "create"), create_item())
    assert (result["failed"], result["changed"], result["action"]) == (True, False, action)


@pytest.mark.parametrize("state, status, refused", [("off", "active", ("shutdown", "power_off")),
                                                    ("active", "off", ("power_on",))])
@pytest.mark.parametrize("wait", [True, False])
def test_a_refused_power_action_is_not_changed(state, status, refused, wait):
    client = refusing(FakeClient(facts(7, status=status)), REFUSED, *refused)
    worker = do_droplet.DropletWorker(client, wait=wait, wait_timeout=60, waiter=FakeWaiter(client))
    items = power_items((7, state))
    result = worker.finish_waits(items, run_batch(items, worker, max_workers=1), deadline=float("inf"))[0]
    assert (result["failed"], result["changed"], result["action"]) == (True, False, "none")


def test_a_refused_resize_of_a_stopped_droplet_is_not_changed_nor_resized():
    client = refusing(FakeClient(facts(7, status="off")), REFUSED, "resize")
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb"))
    assert (result["failed"], result["changed"], result["action"]) == (True, False, "none")


def test_a_refused_resize_of_a_running_droplet_is_changed_by_the_power_cycle_but_not_resized():
    client = refusing(FakeClient(facts(7)), REFUSED, "resize")
    result = run(client, item(backend_id="7", size="s-2vcpu-2gb"))
    assert (result["failed"], result["changed"], result["action"]) == (True, True, "none")
    assert client.droplets[7]["size_slug"] == "s-1vcpu-1gb"


def test_a_refused_delete_is_not_changed():
    client = refusing(FakeClient(facts(7)), DigitalOceanError("DigitalOcean refused the request (403 forbidden)",
                                                              status=403), "destroy")
    result = run(client, item(state="absent", backend_id="7"))
    assert (result["failed"], result["changed"], result["action"]) == (True, False, "none")
