"""The quota check before approval (issue 39.1): which pending orders fit in the cloud's quota, in the
order they were placed, and the reads it decides on. The fitting is a pure function of what was read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.waldur.site_agent.plugins.filter.backend_items import catalogue_items
from ansible_collections.waldur.site_agent.plugins.filter.order_pass import order_pass_report
from ansible_collections.waldur.site_agent.plugins.module_utils.azure import catalogue as azure
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import ProvenList, ProvenObject, Unproven
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import by_placement
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean import catalogue as do
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur import claim as claim_module

DO_SETTINGS = {"default_region": "ams3", "default_image": "ubuntu-22-04-x64", "default_size": "s-1vcpu-1gb",
               "size_mapping": {"s-1vcpu-1gb": {"cpu": 1}, "s-2vcpu-4gb": {"cpu": 2}}}


def uuid(n: int) -> str:
    return ("%x" % n) * 32 if n < 16 else "%032x" % n


def create(n: int, state: str = "pending-provider", created: str | None = None, backend_id: str = "",
           order_type: str = "Create") -> dict:
    """A listed order (waldur_orders state listed) of resource web-<n>."""
    return {"uuid": uuid(n), "type": order_type, "state": state,
            "created": created or "2026-11-29T12:00:%02dZ" % n,
            "resource": {"uuid": "%031x%x" % (0xabc, n), "name": "web-%d" % n, "backend_id": backend_id}}


def droplets_of(orders: list) -> list:
    return catalogue_items(orders, DO_SETTINGS, "digitalocean")


# ---------------------------------------------------------------- DigitalOcean's droplet limit

def test_only_what_fits_in_the_droplet_limit_is_approved_in_the_order_of_placement():
    # Waldur lists the newest first: web-5 was placed last, web-1 first
    orders = [create(n) for n in (5, 4, 3, 2, 1)]
    droplets = by_placement(droplets_of(orders), orders)
    assert [droplet["resource_name"] for droplet in droplets] == ["web-1", "web-2", "web-3", "web-4", "web-5"]

    held = do.quota_holds(droplets, {"droplet_limit": 3, "droplets": 0})

    assert [entry["resource_name"] for entry in held] == ["web-4", "web-5"]
    assert held[0]["order_uuid"] == uuid(4) and held[0]["resource_uuid"] == orders[1]["resource"]["uuid"]
    assert held[0]["msg"] == ("DigitalOcean's droplet limit is 3 and 0 droplets exist, 3 more going to orders placed "
                              "before it; this order needs 1 more; left pending-provider (raise the limit, or free a "
                              "droplet)")


def test_a_full_account_holds_every_pending_create_naming_the_limit_and_its_use():
    held = do.quota_holds(droplets_of([create(4)]), {"droplet_limit": 3, "droplets": 3})
    assert [entry["msg"] for entry in held] == [
        "DigitalOcean's droplet limit is 3 and 3 droplets exist; this order needs 1 more; left pending-provider "
        "(raise the limit, or free a droplet)"]
    assert "1 droplet exists;" in do.quota_holds(droplets_of([create(4)]), {"droplet_limit": 1, "droplets": 1})[0]["msg"]


def test_an_executing_order_is_never_held_and_its_droplet_is_counted_first():
    # approved by an earlier pass that did not finish: its droplet may exist already, or be made now
    orders = [create(1, state="executing", created="2026-11-29T13:00:00Z"), create(2), create(3)]
    held = do.quota_holds(by_placement(droplets_of(orders), orders), {"droplet_limit": 2, "droplets": 0})
    assert [entry["order_uuid"] for entry in held] == [uuid(3)]
    # past the limit already: still never held (only a pending order can be left pending)
    assert do.quota_holds(droplets_of([create(1, state="executing")]), {"droplet_limit": 0, "droplets": 5}) == []


def test_an_order_the_catalogue_rejects_takes_no_room():
    orders = [create(1), create(2)]
    held = do.quota_holds(droplets_of(orders), {"droplet_limit": 1, "droplets": 0}, rejected=[uuid(1)])
    assert held == []


def test_a_restore_of_an_existing_machine_and_an_update_that_grows_a_droplet_need_nothing():
    orders = [create(1, order_type="Restore", backend_id="418000001"),
              {"uuid": uuid(2), "type": "Update", "state": "pending-provider", "limits": {"cpu": 2},
               "resource": {"uuid": "b" * 32, "name": "grown", "backend_id": "418000002", "limits": {"cpu": 1}}},
              create(3, order_type="Restore")]
    droplets = droplets_of(orders)
    # a resize is still one droplet, a Restore of an existing droplet builds none: neither is judged
    assert [droplet["order_uuid"] for droplet in droplets] == [uuid(3)]
    assert do.quota_holds(droplets, {"droplet_limit": 5, "droplets": 4}) == []
    assert [entry["order_uuid"] for entry in do.quota_holds(droplets, {"droplet_limit": 4, "droplets": 4})] == [uuid(3)]


def test_placement_follows_created_and_keeps_orders_without_a_time_last():
    items = [{"order_uuid": uuid(n)} for n in (1, 2, 3)]
    orders = [{"uuid": uuid(2), "created": "2026-11-29T12:00:00.5+00:00"},
              {"uuid": uuid(3).upper(), "created": "2026-11-29T11:59:59Z"}]
    assert [item["order_uuid"] for item in by_placement(items, orders)] == [uuid(3), uuid(2), uuid(1)]
    assert by_placement(items, None) == items


class FakeDigitalOcean:
    def __init__(self, account, count):
        self.account, self.count = account, count

    def account_limits(self):
        return self.account

    def droplet_count(self):
        return self.count


def test_the_quota_is_read_from_proven_answers_only():
    quota = do.read_quota(FakeDigitalOcean(ProvenObject({"droplet_limit": 3}, "GET /v2/account"),
                                           ProvenObject({"total": 2}, "GET /v2/droplets")))
    assert quota == {"droplet_limit": 3, "droplets": 2}
    assert do.headroom(quota) == "droplets 2 of 3 used"
    with pytest.raises(Unproven):
        do.read_quota(FakeDigitalOcean({"droplet_limit": 3}, ProvenObject({"total": 2}, "GET /v2/droplets")))


def test_the_read_layer_refuses_an_account_without_its_limit_and_a_count_that_does_not_add_up(do_sim):
    from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import DigitalOceanClient
    from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanUnproven
    from tests.simulators.digitalocean import presets

    client = DigitalOceanClient(presets.DO_TOKEN, api_url=do_sim.url + "/v2/", max_retry_seconds=0)
    do_sim.app.seed_droplet("one", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64", [])
    do_sim.app.seed_droplet("two", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64", [])
    do_sim.app.configure(droplet_limit=3)
    assert do.read_quota(client) == {"droplet_limit": 3, "droplets": 2}
    assert [call["query"] for call in do_sim.app.calls_of("droplets.list")] == ["page=1&per_page=1"]

    do_sim.app.add_fault("droplets.list", status=200, body={"droplets": [], "links": {}, "meta": {"total": 2}})
    with pytest.raises(DigitalOceanUnproven, match="a page of 0 droplet"):
        client.droplet_count()
    do_sim.app.add_fault("account.get", kind="html")
    with pytest.raises(DigitalOceanUnproven):
        client.account_limits()
    do_sim.app.add_fault("account.get", status=200, body={"account": {"uuid": "x", "status": "active"}})
    with pytest.raises(DigitalOceanUnproven, match="droplet_limit"):
        client.account_limits()


# ---------------------------------------------------------------- Azure's vCPU quotas

AZURE_CATALOGUE = {
    "locations": ["northeurope", "westeurope"],
    "sizes": {"westeurope": ["Standard_B1s", "Standard_B2s", "Standard_D2s_v3"]},
    "images": {},
    "cores": {"westeurope": {"standard_b1s": 1, "standard_b2s": 2, "standard_d2s_v3": 2}},
}


def azure_quota(cores=(0, 10), bs=(0, 10), dsv3=(0, 10)):
    usages = {"cores": {"name": "cores", "used": cores[0], "limit": cores[1]},
              "standardbsfamily": {"name": "standardBSFamily", "used": bs[0], "limit": bs[1]},
              "standarddsv3family": {"name": "standardDSv3Family", "used": dsv3[0], "limit": dsv3[1]}}
    return {"westeurope": {"usages": usages, "source": "GET /usages", "skus_source": "GET /skus",
                           "families": {"standard_b1s": "standardBSFamily", "standard_b2s": "standardBSFamily",
                                        "standard_d2s_v3": "standardDSv3Family"}}}


def machine(n, size="Standard_B2s", executing=False, location="westeurope"):
    return {"order_uuid": uuid(n), "resource_uuid": "b" * 32, "resource_name": "az-%d" % n, "location": location,
            "size": size, "executing": executing}


def test_a_machine_needs_its_vcpus_in_its_family_and_in_the_regional_total():
    machines = [machine(1), machine(2), machine(3)]
    held = azure.quota_holds(machines, AZURE_CATALOGUE, azure_quota(bs=(0, 4)))
    assert [entry["order_uuid"] for entry in held] == [uuid(3)]
    assert held[0]["msg"] == (
        "Azure's standardBSFamily vCPU quota in westeurope is 4 and 0 are in use, 4 more going to orders placed before "
        "it; this order's Standard_B2s needs 2 vCPUs more; left pending-provider (raise the quota, or free vCPUs in "
        "westeurope)")
    held = azure.quota_holds(machines, AZURE_CATALOGUE, azure_quota(cores=(8, 10)))
    assert [entry["order_uuid"] for entry in held] == [uuid(2), uuid(3)]
    assert held[0]["msg"].startswith("Azure's total regional vCPU quota in westeurope is 10 and 8 are in use, 2 more")


def test_every_quota_a_machine_would_exceed_is_named_and_a_later_smaller_one_may_fit():
    machines = [machine(1, size="Standard_D2s_v3"), machine(2, size="Standard_B1s")]
    held = azure.quota_holds(machines, AZURE_CATALOGUE, azure_quota(cores=(8, 9), dsv3=(0, 1)))
    assert [entry["order_uuid"] for entry in held] == [uuid(1)]
    assert ("standardDSv3Family vCPU quota in westeurope is 1 and 0 are in use; Azure's total regional vCPU quota in "
            "westeurope is 9 and 8 are in use; this order's Standard_D2s_v3 needs 2 vCPUs more") in held[0]["msg"]


def test_an_executing_azure_order_is_never_held_and_counted_first():
    machines = [machine(1), machine(2, executing=True)]
    held = azure.quota_holds(machines, AZURE_CATALOGUE, azure_quota(bs=(0, 2)))
    assert [entry["order_uuid"] for entry in held] == [uuid(1)]
    assert "2 more going to orders placed before it" in held[0]["msg"]
    assert azure.quota_holds([machine(1)], AZURE_CATALOGUE, azure_quota(bs=(0, 2)), rejected=[uuid(1)]) == []


@pytest.mark.parametrize("change, words", [
    (lambda quota, catalogue: quota["westeurope"]["families"].pop("standard_b2s"), "give no family for VM size"),
    (lambda quota, catalogue: quota["westeurope"]["usages"].pop("standardbsfamily"), "hold no quota of VM family"),
    (lambda quota, catalogue: catalogue["cores"]["westeurope"].update(standard_b2s=None), "give no numberOfCores"),
])
def test_a_machine_whose_need_is_not_known_approves_nothing(change, words):
    quota, catalogue = azure_quota(), {"cores": {"westeurope": dict(AZURE_CATALOGUE["cores"]["westeurope"])}}
    change(quota, catalogue)
    with pytest.raises(AzureUnproven, match=words):
        azure.quota_holds([machine(1)], catalogue, quota)


class FakeArm:
    def __init__(self, usages, skus):
        self.usages, self.skus, self.calls = usages, skus, []

    def vcpu_usages(self, location):
        self.calls.append(("usages", location))
        return ProvenList(self.usages, "GET /usages")

    def resource_skus(self, location):
        self.calls.append(("skus", location))
        return ProvenList(self.skus, "GET /skus")


USAGES = [{"name": {"value": "cores"}, "currentValue": 8, "limit": 10},
          {"name": {"value": "standardBSFamily"}, "currentValue": 4, "limit": 10},
          {"name": {"value": "virtualMachines"}, "currentValue": 3, "limit": 25000}]
SKUS = [{"resourceType": "virtualMachines", "name": "Standard_B2s", "family": "standardBSFamily"},
        {"resourceType": "disks", "name": "Premium_LRS", "family": "Premium_LRS"}]


def test_the_azure_quotas_are_read_once_per_location_and_show_as_headroom():
    arm = FakeArm(USAGES, SKUS)
    quota = azure.read_quota(arm, ["West Europe", "westeurope"])
    assert arm.calls == [("usages", "westeurope"), ("skus", "westeurope")]
    assert quota["westeurope"]["families"] == {"standard_b2s": "standardBSFamily"}
    assert azure.headroom("westeurope", quota, "Standard_B2s") == "vCPUs westeurope: 8 of 10 (standardBSFamily 4 of 10)"
    assert azure.headroom("westeurope", azure.read_quota(FakeArm(USAGES, SKUS), ["westeurope"], with_families=False),
                          "Standard_B2s") == "vCPUs westeurope: 8 of 10"
    with pytest.raises(AzureUnproven, match="no 'cores'"):
        azure.read_quota(FakeArm(USAGES[1:], SKUS), ["westeurope"])


# ---------------------------------------------------------------- the claim and the report

def test_the_claim_leaves_held_orders_pending_and_says_why(monkeypatch):
    pending = {"uuid": uuid(4), "state": "pending-provider", "type": "Create", "marketplace_resource_uuid": "a" * 32,
               "resource_name": "web-4", "offering_uuid": "f" * 32, "plan_uuid": None, "limits": {}}
    executing = dict(pending, uuid=uuid(5), state="executing", resource_name="web-5")
    approved = []

    class Approving(Exception):
        pass

    def run(self, items, work):  # the first batch after the holds: the approvals
        approved.extend(item["uuid"] for item in items)
        raise Approving

    monkeypatch.setattr(claim_module.Claim, "candidates", lambda self, *args, **kwargs: (
        [dict(pending), dict(executing)], skipped, []))
    monkeypatch.setattr(claim_module.Claim, "ssh_keys", lambda self: [])
    monkeypatch.setattr(claim_module.BatchRunner, "__init__", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(claim_module.BatchRunner, "run", run)
    skipped = []

    def fail_json(**kwargs):
        raise AssertionError(kwargs)

    module = SimpleNamespace(check_mode=False, fail_json=fail_json, uuid_param=lambda value, name: value)
    params = {"order_processing_settle_seconds": 1.0, "order_processing_wait_seconds": 30.0,
              "order_processing_stuck_seconds": 3600.0, "order_uuids": None, "max_workers": 2, "deadline": 60,
              "with_pending": False, "reject": [], "judged_orders": None, "packed": False,
              "hold": [{"order_uuid": uuid(4), "msg": "DigitalOcean's droplet limit is 3 and 3 droplets exist"},
                       {"order_uuid": uuid(5), "msg": "an executing order is never held"}]}

    with pytest.raises(Approving):
        claim_module.run_claim(module, SimpleNamespace(), "f" * 32, params)

    # only the executing order goes on to approval and the act; the held one stays pending, named
    assert approved == [uuid(5)]
    assert skipped == [{"uuid": uuid(4), "state": "pending-provider", "type": "Create", "resource_uuid": "a" * 32,
                        "resource_name": "web-4", "outcome": "held",
                        "msg": "DigitalOcean's droplet limit is 3 and 3 droplets exist"}]


def test_held_orders_are_counted_and_named_and_make_the_pass_end_4_not_2():
    claim = {"orders": [{"uuid": uuid(1), "resource_name": "web-1"}],
             "skipped_orders": [{"uuid": uuid(4), "resource_name": "web-4", "outcome": "held",
                                 "msg": "DigitalOcean's droplet limit is 3 and 3 droplets exist; this order needs 1 "
                                        "more; left pending-provider (raise the limit, or free a droplet)"}]}
    settle = {"results": [{"order_uuid": uuid(1), "outcome": "done"}]}
    report = order_pass_report(claim, settle, False)
    assert report["summary"].endswith("skipped=0 diverged=0 held=1")
    assert report["counts"]["held"] == 1 and report["held_for_quota"] == 1 and report["unfinished"] == 0
    assert report["lines"] == ["held: web-4 (order %s): DigitalOcean's droplet limit is 3 and 3 droplets exist; this "
                               "order needs 1 more; left pending-provider (raise the limit, or free a droplet)" % uuid(4)]
    checked = order_pass_report(claim, settle, True)
    assert checked["summary"].endswith("diverged=0 would_hold=1") and checked["lines"][0].startswith("would_hold: web-4")
    # without held orders the summary reads as before
    plain = order_pass_report({"orders": []}, settle, False)
    assert "held" not in plain["summary"] and plain["held_for_quota"] == 0
