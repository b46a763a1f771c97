"""The verdicts of the catalogue check before approval: pure functions of what was read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import ProvenAbsence
from ansible_collections.waldur.site_agent.plugins.filter.backend_items import catalogue_items
from ansible_collections.waldur.site_agent.plugins.filter.order_pass import order_pass_report
from ansible_collections.waldur.site_agent.plugins.module_utils.azure import catalogue as azure
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean import catalogue as do
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.claim import Claim
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.errors import WaldurApiError

DO_CATALOGUE = {
    "regions": {"ams3": {"available": True, "sizes": ["s-1vcpu-1gb", "c-2"]},
                "blr1": {"available": True, "sizes": ["s-1vcpu-1gb"]},
                "sfo1": {"available": False, "sizes": []}},
    "sizes": {"s-1vcpu-1gb": {"available": True, "regions": ["ams3", "blr1"]},
              "c-2": {"available": True, "regions": ["ams3"]},
              "old-1": {"available": False, "regions": ["ams3"]}},
    "images": {"ubuntu-22-04-x64": {"regions": [], "status": "available"},
               "170000001": {"regions": ["ams3"], "status": "available"},
               "no-such-image": None},
}


def test_a_droplet_the_catalogue_holds_gets_no_verdict():
    assert do.droplet_problem("ams3", "c-2", "ubuntu-22-04-x64", DO_CATALOGUE) is None
    assert do.droplet_problem("ams3", "s-1vcpu-1gb", 170000001, DO_CATALOGUE) is None


@pytest.mark.parametrize("region, size, image, reason", [
    ("xx9", "s-1vcpu-1gb", "ubuntu-22-04-x64", "region 'xx9' is not a DigitalOcean region (regions: ams3, blr1, sfo1)"),
    ("sfo1", "s-1vcpu-1gb", "ubuntu-22-04-x64", "region 'sfo1' does not take new droplets"),
    ("ams3", "huge-999", "ubuntu-22-04-x64", "size 'huge-999' is not a DigitalOcean droplet size"),
    ("ams3", "old-1", "ubuntu-22-04-x64", "size 'old-1' is not available for new droplets"),
    ("blr1", "c-2", "ubuntu-22-04-x64", "size 'c-2' is not offered in region 'blr1' (offered there: s-1vcpu-1gb)"),
    ("ams3", "c-2", "no-such-image", "image 'no-such-image' is neither a DigitalOcean image nor a snapshot"),
    ("blr1", "s-1vcpu-1gb", "170000001", "image '170000001' is not in region 'blr1' (it is in ams3)"),
])
def test_each_thing_digitalocean_would_refuse_is_named(region, size, image, reason):
    assert reason in do.droplet_problem(region, size, image, DO_CATALOGUE)


def test_the_offering_settings_missing_from_the_catalogue_name_their_keys():
    problems = do.settings_problems({"default_region": "xx9", "default_size": "s-1vcpu-1gb",
                                     "default_image": "no-such-image"}, ["huge-999", "c-2"], DO_CATALOGUE)
    assert [problem.split(":")[0] for problem in problems] == [
        "backend_settings.default_region", "backend_settings.default_image", "backend_settings.size_mapping"]
    assert do.settings_problems({"default_region": "ams3"}, [], DO_CATALOGUE) == []


def test_reading_the_catalogue_reads_each_image_once():
    calls = []

    class Client:
        def listing(self, path, key, shape=None):  # noqa: ARG002 (the read layer's own)
            calls.append(path)
            return [{"slug": "ams3", "available": True, "sizes": ["s-1vcpu-1gb"]}] if key == "regions" else [
                {"slug": "s-1vcpu-1gb", "available": True, "regions": ["ams3"]}]

        def image(self, image):
            calls.append("images/" + image)
            if image == "gone":
                return ProvenAbsence("GET /v2/images/gone")
            return {"id": 1, "slug": image, "regions": ["ams3"]}

    catalogue = do.read_catalogue(Client(), ["ubuntu-22-04-x64", "gone", "ubuntu-22-04-x64", 7])
    assert calls == ["regions/", "sizes/", "images/ubuntu-22-04-x64", "images/gone", "images/7"]
    assert catalogue["images"]["gone"] is None and catalogue["images"]["7"]["regions"] == ["ams3"]


AZURE_CATALOGUE = {
    "locations": ["northeurope", "westeurope"],
    "sizes": {"northeurope": ["Standard_B1s"], "westeurope": ["Standard_B1s", "Standard_E2s_v3"]},
    "images": {("westeurope", "canonical:ubuntu:22_04:latest"): True,
               ("westeurope", "canonical:ubuntu:nope:latest"): False},
}


@pytest.mark.parametrize("location, size, image, reason", [
    ("West Europe", "standard_e2s_v3", "Canonical:ubuntu:22_04:latest", None),
    ("northeurope", "Standard_E2s_v3", "Canonical:ubuntu:22_04:latest",
     "size 'Standard_E2s_v3' is not offered in location 'northeurope' (offered there: Standard_B1s)"),
    ("mars", "Standard_B1s", "Canonical:ubuntu:22_04:latest", "location 'mars' is not an Azure location"),
    ("westeurope", "Standard_B1s", "Canonical:ubuntu:nope:latest", "is not in the marketplace of location"),
    ("westeurope", "Standard_B1s", "ubuntu", "is not of the form publisher:offer:sku:version"),
])
def test_each_thing_azure_would_refuse_is_named(location, size, image, reason):
    problem = azure.machine_problem(location, size, image, AZURE_CATALOGUE)
    assert problem == reason if reason is None else reason in problem


def test_the_azure_defaults_missing_from_the_catalogue_name_their_keys():
    problems = azure.settings_problems({"default_location": "westeurope", "default_size": "Standard_D99",
                                        "default_image": "Canonical:ubuntu:nope:latest"}, AZURE_CATALOGUE)
    keys = [problem.split(":")[0] for problem in problems]
    assert keys == ["backend_settings.default_size", "backend_settings.default_image"]


def test_catalogue_items_resolve_what_the_act_would_build():
    orders = [
        {"uuid": "1" * 32, "type": "Create", "state": "pending-provider",
         "resource": {"uuid": "a" * 32, "name": "web", "attributes": {"region": "xx9"}}},
        {"uuid": "2" * 32, "type": "Create", "state": "executing", "limits": {"cpu": 2},
         "resource": {"uuid": "b" * 32, "name": "big", "limits": {"cpu": 2}}},
        {"uuid": "3" * 32, "type": "Create", "state": "executing",
         "resource": {"uuid": "c" * 32, "name": "built", "backend_id": "418"}},
        {"uuid": "4" * 32, "type": "Terminate", "resource": {"uuid": "d" * 32, "backend_id": "419"}},
    ]
    settings = {"default_region": "ams3", "default_image": "ubuntu-22-04-x64", "size_mapping": {"c-2": {"cpu": 2}}}
    items = catalogue_items(orders, settings, "digitalocean")
    by_order = dict((item["order_uuid"], item) for item in items)
    assert set(by_order) == {"2" * 32}  # the first has no size at all (the plan errs it), the others build nothing
    assert (by_order["2" * 32]["region"], by_order["2" * 32]["size"], by_order["2" * 32]["executing"]) == (
        "ams3", "c-2", True)
    settings["default_size"] = "s-1vcpu-1gb"
    first = catalogue_items(orders, settings, "digitalocean")[0]
    assert (first["region"], first["size"], first["image"], first["executing"]) == (
        "xx9", "s-1vcpu-1gb", "ubuntu-22-04-x64", False)


class FakeWaldur:
    def __init__(self, conflict=False):
        self.posts, self.conflict = [], conflict

    def post(self, path, json=None):
        self.posts.append((path, json))
        if self.conflict and path.endswith("/reject_by_provider/"):
            raise WaldurApiError(409, "POST", path, "conflict")

    def get(self, path, params=None, shape=None):  # noqa: ARG002 (the read layer's own)
        return {"uuid": "1" * 32, "state": "executing"}


def turn_down(state, check_mode=False, conflict=False):
    client = FakeWaldur(conflict)
    claim = Claim(SimpleNamespace(check_mode=check_mode), client, "f" * 32)
    order = {"uuid": "1" * 32, "state": state, "type": "Create", "marketplace_resource_uuid": "a" * 32,
             "resource_name": "web"}
    return claim.turn_down(order, "size 'huge' is not a droplet size"), client.posts


def test_a_pending_order_is_rejected_with_the_reason_the_customer_sees():
    result, posts = turn_down("pending-provider")
    assert result["rejected"]["outcome"] == "rejected" and result["rejected"]["state"] == "rejected"
    assert posts == [("marketplace-orders/%s/reject_by_provider/" % ("1" * 32),
                      {"provider_rejection_comment": "size 'huge' is not a droplet size"})]


def test_an_executing_order_is_erred_and_check_mode_writes_nothing():
    result, posts = turn_down("executing")
    assert result["rejected"]["outcome"] == "erred" and posts[0][0].endswith("/set_state_erred/")
    result, posts = turn_down("pending-provider", check_mode=True)
    assert result["rejected"]["outcome"] == "rejected" and posts == []


def test_an_order_approved_meanwhile_is_erred_instead():
    result, posts = turn_down("pending-provider", conflict=True)
    assert [path.rsplit("/", 2)[-2] for path, body in posts] == ["reject_by_provider", "set_state_erred"]


def test_the_pass_counts_rejected_orders_and_would_reject_in_check_mode():
    claim = {"orders": [], "rejected_orders": [
        {"uuid": "1" * 32, "resource_name": "web", "outcome": "rejected", "msg": "region 'xx9' ..."},
        {"uuid": "2" * 32, "resource_name": "late", "outcome": "erred", "msg": "size ..."}]}
    report = order_pass_report(claim, {}, False)
    assert (report["counts"]["rejected"], report["counts"]["erred"]) == (1, 1)
    assert report["lines"][0] == "rejected: web (order %s): region 'xx9' ..." % ("1" * 32)
    checked = order_pass_report(claim, {}, True)
    assert "would_erred=1 would_reject=1" in checked["summary"]
    assert checked["lines"][0].startswith("would_reject: web")
