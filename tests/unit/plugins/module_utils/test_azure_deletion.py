"""Issue 22's Azure rules in their parts: what a fresh listing says is this resource's, which
groups are a resource's own, creates whose names coincide, retries bounded by the deadline, and
plain-http endpoints. The SDK pipeline runs for real in the retry tests; only the transport is scripted."""

import time

import pytest
from azure.mgmt.resource.resources import models as resource_models

from ansible_collections.waldur.site_agent.plugins.module_utils.azure import policies
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import clients_from_module
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.endpoints import plain_http_endpoints
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import is_group_of_resource
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import kept_group, own_targets, sort_contents
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.validate import duplicate_errors
from tests.unit.plugins.module_utils.test_azure_clients import SECRET, ScriptedClients, arm_error

UUID = "1234abcd5678ef901234abcd5678ef90"
OTHER = "feedface" * 4
GROUP = "group-%s-web" % UUID
BASE = "/subscriptions/sub-1/resourceGroups/%s/providers/" % GROUP


def listed(kind_path, name, tags=None, managed_by=None, path=None):
    body = {"id": BASE + (path or kind_path + "/" + name), "name": name, "type": kind_path, "location": "westeurope"}
    if tags:
        body["tags"] = tags
    if managed_by:
        body["managedBy"] = managed_by
    return resource_models.GenericResourceExpanded(body)


VM = "Microsoft.Compute/virtualMachines"
ours = {"waldur-resource-uuid": UUID}


# ---- what a fresh listing says --------------------------------------------------------------------

def test_a_group_of_only_marked_objects_and_the_disk_its_machine_manages_is_all_ours():
    contents = [listed(VM, "web", ours), listed("Microsoft.Network/networkInterfaces", "nicweb", ours),
                listed("Microsoft.Compute/disks", "web_OsDisk_1", managed_by=BASE + VM + "/web"),
                listed(VM + "/extensions", "web/monitor", path=VM + "/web/extensions/monitor")]
    mine, foreign = sort_contents(contents, UUID)
    assert foreign == []
    targets, unmarked = own_targets(mine)
    assert targets == [("vm", "web"), ("disk", "web_OsDisk_1"), ("nic", "nicweb")]
    assert unmarked == {("disk", "web_osdisk_1"), (None, "web/monitor")}


def test_foreign_objects_are_named_with_their_owner_in_one_line():
    contents = [listed(VM, "web", ours), listed(VM, "db"), listed(VM, "theirs", {"waldur-resource-uuid": OTHER}),
                listed("Microsoft.Compute/disks", "db_OsDisk", managed_by=BASE + VM + "/db"),
                listed("Microsoft.Storage/storageAccounts", "logs")]
    mine, foreign = sort_contents(contents, UUID)
    assert [name for _kind, name, _marked in mine] == ["web"]
    assert kept_group(GROUP, foreign) == (
        "kept resource group %s: it holds virtual machine db (no owner tag), virtual machine theirs (owner tag "
        "waldur-resource-uuid=%s), OS disk db_OsDisk (no owner tag), Microsoft.Storage/storageAccounts logs "
        "(no owner tag)" % (GROUP, OTHER))


def test_an_untagged_group_reached_by_its_backend_id_counts_only_its_one_chain_as_ours():
    contents = [listed(VM, "old"), listed("Microsoft.Network/networkSecurityGroups", "NSGold"),
                listed("Microsoft.Network/virtualNetworks", "netold"), listed(VM, "handmade")]
    mine, foreign = sort_contents(contents, UUID, legacy_vm="old")
    assert sorted(name for _kind, name, _marked in mine) == ["NSGold", "netold", "old"]
    assert foreign == ["virtual machine handmade (no owner tag)"]
    # without the backend id's machine, none of it is ours
    assert sort_contents(contents, UUID)[0] == []


def test_only_the_groups_the_agent_names_for_a_resource_are_its_own():
    assert is_group_of_resource(GROUP, UUID) and is_group_of_resource(GROUP.upper(), UUID)
    assert not is_group_of_resource("customer-prod-rg", UUID)
    assert not is_group_of_resource("group-%s-web" % OTHER, UUID)
    assert not is_group_of_resource("group-1234-web", UUID)  # Mastermind's four hex: never found by tag


# ---- creates whose names coincide ----------------------------------------------------------------

def test_creates_whose_names_coincide_in_a_shared_group_are_all_refused_naming_each_other():
    first, second, third = UUID, "1234abcd" + "0" * 24, "99999999" + "0" * 24
    items = [dict(resource_uuid=first, name="Web Server", state="present", resource_group="shared"),
             dict(resource_uuid=second, name="web--server!", state="present", resource_group="shared"),
             dict(resource_uuid=third, name="Web Server", state="present", resource_group="shared"),
             dict(resource_uuid="1234abcd" + "1" * 24, name="web server", state="absent", resource_group="shared",
                  backend_id="/x")]
    duplicate_errors(items)
    assert second in items[0]["error"] and first in items[1]["error"]
    assert "virtual machine web-server-1234abcd in resource group shared" in items[0]["error"]
    assert "error" not in items[2] and "error" not in items[3]


def test_dedicated_creates_never_coincide():
    items = [dict(resource_uuid=UUID, name="web", state="present"),
             dict(resource_uuid="1234abcd" + "0" * 24, name="web", state="present")]
    duplicate_errors(items)
    assert not [item for item in items if item.get("error")]


# ---- retries bounded by the deadline ---------------------------------------------------------------

def test_a_retry_after_past_the_deadline_is_not_waited_for():
    clients = ScriptedClients([("PUT", 429, {"Retry-After": "900"}, arm_error("SubscriptionRequestsThrottled", "slow"))])
    clients.deadline = time.monotonic() + 600
    started = time.monotonic()
    with pytest.raises(AzureError) as raised:
        clients.call("creating group", clients.resource.resource_groups.create_or_update, "g", {"location": "x"})
    assert raised.value.status == 429 and len(clients.transport.requests) == 1
    assert time.monotonic() - started < 5


def test_a_retry_after_within_the_deadline_is_retried_and_no_deadline_keeps_azure_cores_behaviour():
    script = [("PUT", 429, {"Retry-After": "1"}, arm_error("SubscriptionRequestsThrottled", "slow")),
              ("PUT", 200, {}, {"name": "g", "location": "x"})]
    for deadline in (time.monotonic() + 600, None):
        clients = ScriptedClients(list(script))
        clients.deadline = deadline
        clients.call("creating group", clients.resource.resource_groups.create_or_update, "g", {"location": "x"})
        assert len(clients.transport.requests) == 2
    # the margin: a deadline closer than the wait plus RETRY_DEADLINE_MARGIN stops at once
    clients = ScriptedClients(list(script))
    clients.deadline = time.monotonic() + policies.RETRY_DEADLINE_MARGIN
    with pytest.raises(AzureError):
        clients.call("creating group", clients.resource.resource_groups.create_or_update, "g", {"location": "x"})
    assert len(clients.transport.requests) == 1


# ---- plain http -------------------------------------------------------------------------------------

class WarnedModule:
    def __init__(self, params):
        self.params = params
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)

    def fail_json(self, **kwargs):
        raise SystemExit(kwargs)


def test_plain_http_endpoints_are_warned_about_naming_the_option():
    params = dict(subscription_id="sub-1", tenant="tenant-1", client_id="client-1", secret=SECRET,
                  arm_endpoint="http://arm.sovereign.example", authority_host="HTTP://login.sovereign.example",
                  polling_interval=5, timeout=60)
    module = WarnedModule(params)
    clients_from_module(module)
    assert [text.split(":")[0] for text in module.warnings] == ["arm_endpoint", "authority_host"]
    assert "http://arm.sovereign.example" in module.warnings[0] and "use https://" in module.warnings[0]
    assert SECRET not in " ".join(module.warnings)
    assert plain_http_endpoints(dict(params, arm_endpoint="https://a", authority_host="https://b")) == []


# ---- the audit's holdings ------------------------------------------------------------------------------

def test_a_dedicated_holding_carries_its_youngest_object_and_what_lacks_its_mark():
    from types import SimpleNamespace as Space

    from azure.mgmt.compute import models as compute_models

    from ansible_collections.waldur.site_agent.plugins.module_utils.azure.audit import Listing

    offering = "a" * 32
    marks = {"waldur-resource-uuid": UUID, "waldur-offering-uuid": offering}
    group = resource_models.ResourceGroup({"id": "/subscriptions/sub-1/resourceGroups/" + GROUP, "name": GROUP,
                                           "location": "westeurope", "tags": marks})
    machine = compute_models.VirtualMachine({"id": BASE + VM + "/web", "name": "web", "location": "westeurope",
                                             "tags": marks, "properties": {"timeCreated": "2026-01-01T00:00:00Z"}})
    contents = [resource_models.GenericResourceExpanded(dict(body, createdTime=created)) for body, created in (
        ({"id": BASE + VM + "/web", "name": "web", "type": VM, "tags": marks}, "2026-01-01T00:00:00Z"),
        ({"id": BASE + VM + "/young", "name": "young", "type": VM}, "2026-01-03T00:00:00Z"),
        ({"id": "/subscriptions/sub-1/resourceGroups/other/providers/" + VM + "/x", "name": "x", "type": VM},
         "2026-01-09T00:00:00Z"))]
    clients = Space(
        subscription_id="sub-1", api_calls=0,
        listing=lambda what, function, *args, **kwargs: list(function(*args, **kwargs)),
        resource=Space(resource_groups=Space(list=lambda filter=None: [group]),
                       resources=Space(list=lambda expand=None: contents if expand == "createdTime" else [])),
        compute=Space(virtual_machines=Space(list_all=lambda status_only=None: [machine])))
    holdings, _machines = Listing(Space(params={}), clients, offering, time.monotonic() + 60).run(None)
    [holding] = holdings
    assert holding["created_at"].isoformat() == "2026-01-01T00:00:00+00:00"  # as before: the machine's
    assert holding["youngest_at"].isoformat() == "2026-01-03T00:00:00+00:00"  # what else the group holds
    assert holding["unmarked"] == ["virtual machine young (no owner tag)"]
