"""azure_vm_chain_info: figures (mapped onto components by the glue), not-found handling and the number of calls."""

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import figures_to_usages
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.chain import VmChain
from ansible_collections.waldur.site_agent.plugins.modules.azure_vm_chain_info import Reader
from tests.unit.plugins.modules.azure_fake import SUBSCRIPTION, FakeAzure

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMvXn2Qm1bTeM0N3z6yC3mD0pS3y3b2c6dVw9ZpR3Q1x user@host"
COMPONENTS = {"cpu": {"unit_factor": 1}, "ram": {"unit_factor": 1024}, "disk": {}, "licenses": {}}


class FakeModule:
    check_mode = False

    def __init__(self):
        self.no_log_values = set()
        self.params = {"max_workers": 4}

    def fail_json(self, **kwargs):
        raise SystemExit(kwargs)


def make_machines(fake, count, size="Standard_B2s"):
    chain = VmChain(FakeModule(), fake, None)
    ids = []
    for index in range(count):
        result = chain.run(dict(resource_uuid="%032x" % (index + 1), name="vm%d" % index, state="present",
                                location="westeurope", size=size, image="a:b:c:d", ssh_public_key=KEY))
        assert not result["failed"], result["msg"]
        ids.append(result["backend_id"])
    return ids


def read(fake, backend_ids):
    module = FakeModule()
    before = len(fake.calls)
    entries = Reader(module, fake, None).run(backend_ids)
    return entries, fake.calls[before:]


def test_one_machine_is_read_directly_with_figures_that_map_onto_components():
    fake = FakeAzure()
    [backend_id] = make_machines(fake, 1)
    [entry], calls = read(fake, [backend_id])
    assert entry["found"] and entry["size"] == "Standard_B2s" and entry["power_state"] == "running"
    assert (entry["cores"], entry["memory_mb"], entry["disk_mb"]) == (2, 4096, 30720 + 8192)
    assert entry["figures"] == {"cores": 2, "ram_mb": 4096, "disk_mb": 30720 + 8192}
    assert "usages" not in entry  # the backend knows no Waldur components
    usages = figures_to_usages(entry["figures"], COMPONENTS)
    assert usages == {"cpu": 2, "ram": 4, "disk": 38912}
    assert "licenses" not in usages
    assert entry["backend_metadata"]["virtual_machine"]["public_ip"].startswith("20.0.0.")
    assert not any(verb.startswith("list_all") for verb, kind, name in calls)


def test_many_machines_are_read_from_listings_not_one_by_one():
    fake = FakeAzure()
    ids = make_machines(fake, 5)
    entries, calls = read(fake, ids)
    assert all(entry["found"] for entry in entries)
    assert [entry["backend_id"] for entry in entries] == ids
    assert not any(verb == "get" and kind == "vm" for verb, kind, name in calls)
    # one subscription-wide listing each of machines, power states, NICs and public IPs; no group listing
    assert sorted((verb, kind) for verb, kind, name in calls if verb.startswith("list_all")) == [
        ("list_all", "nic"), ("list_all", "public_ip"), ("list_all", "vm"), ("list_all_status", "vm")]
    assert [call for call in calls if call[0] == "list" and call[1] == "sizes"] == [("list", "sizes", "westeurope")]
    assert not [call for call in calls if call[0] == "list" and call[1] != "sizes"]
    assert not any(verb in ("get", "instance_view") for verb, kind, name in calls)
    assert all(entry["backend_metadata"]["virtual_machine"]["private_ip"] == "10.0.0.4" for entry in entries)
    assert all(entry["backend_metadata"]["virtual_machine"]["public_ip"] for entry in entries)
    assert all(entry["power_state"] == "running" and entry["msg"] == "" for entry in entries)


def test_the_listings_keep_a_few_fields_of_each_object_not_its_json():
    """At 10,000 machines four listings held whole took hundreds of MiB: each listed object is cut
    down to the fields a pass reads as its page arrives, and no page outlives the join. The pages
    are ARM's JSON, not SDK models, whose construction cost a millisecond of CPU per object."""
    import gc

    from ansible_collections.waldur.site_agent.plugins.module_utils.azure.listings import (
        MachineListings, SlimNic, SlimPublicIp, SlimVm, arm_key)
    fake = FakeAzure()
    ids = make_machines(fake, 3)
    fake.body("vm", "vm0")["properties"]["storageProfile"]["osDisk"]["diskSizeGB"] = 64
    found = MachineListings(fake).read([arm_key(backend_id) for backend_id in ids])
    gc.collect()
    assert len(fake.pages) == 4 and not [ref for ref in fake.pages if ref() is not None]
    for backend_id in ids:
        machine = found[arm_key(backend_id)]
        assert isinstance(machine.vm, SlimVm) and isinstance(machine.nic, SlimNic) and isinstance(machine.public_ip, SlimPublicIp)
        assert machine.power == "running" and machine.vm.id == backend_id and machine.vm.vm_size == "Standard_B2s"
        assert machine.addresses[0] == "10.0.0.4" and machine.addresses[1].startswith("20.0.0.")
        assert machine.vm.hardware_profile.vm_size == "Standard_B2s"  # read as an SDK model is
        assert machine.vm.tags["waldur-resource-uuid"] == "%032x" % (ids.index(backend_id) + 1)
        assert not hasattr(machine.vm, "__dict__") and not hasattr(machine.nic, "__dict__")
    assert found[arm_key(ids[0])].vm.storage_profile.os_disk.disk_size_gb == 64
    assert found[arm_key(ids[0])].vm.network_profile.network_interfaces[0].id.lower().endswith("/nicvm0")


def test_what_a_listing_missed_is_read_on_its_own_and_a_failed_read_is_said():
    """A NIC or public IP made while the listings ran is in the machine listing's references but
    not in its own listing: it is read by id, and only that one; one that cannot be read is named."""
    from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
    fake = FakeAzure()
    ids = make_machines(fake, 3)
    fake.unlisted = {"nic": {"nicvm1"}, "public_ip": {"pubipvm2"}}
    fake.faults[("get", "public_ip")] = AzureError("Service unavailable", 503, "ServiceUnavailable")
    entries, calls = read(fake, ids)
    assert [call[:2] for call in calls if call[0] == "get"] == [("get", "nic"), ("get", "public_ip")]
    assert [name.lower() for verb, kind, name in calls if verb == "get"] == ["nicvm1", "pubipvm2"]
    assert entries[1]["backend_metadata"]["virtual_machine"]["private_ip"] == "10.0.0.4" and entries[1]["msg"] == ""
    assert entries[2]["found"] and entries[2]["figures"] and entries[2]["backend_metadata"]["virtual_machine"][
        "public_ip"] is None
    assert "not read" in entries[2]["msg"] and "Service unavailable" in entries[2]["msg"]
    assert entries[0]["msg"] == ""


def test_a_machine_the_machine_listing_misses_is_read_on_its_own_not_taken_as_gone():
    """A listing's silence proves nothing (an empty page, a partial one, one older than the machine):
    the machines it does not hold are read directly, and only ARM's own not-found says one is gone."""
    fake = FakeAzure()
    ids = make_machines(fake, 3)
    gone = ids[0].replace("vm0", "gone")
    fake.unlisted = {"vm": {"vm0", "vm1", "vm2"}}  # the machine listing answers no machine at all
    entries, calls = read(fake, ids + [gone])
    assert [entry["found"] for entry in entries] == [True, True, True, False]
    assert all(entry["figures"] == {"cores": 2, "ram_mb": 4096, "disk_mb": 30720 + 8192} for entry in entries[:3])
    assert sorted(name.lower() for verb, kind, name in calls if verb == "get" and kind == "vm") == [
        "gone", "vm0", "vm1", "vm2"]
    assert entries[3]["msg"] == "the virtual machine does not exist"


def test_missing_and_malformed_ids_are_not_found_and_not_measured():
    fake = FakeAzure()
    ids = make_machines(fake, 2)
    gone = ids[0].replace("vm0", "gone")
    other = ids[0].replace(SUBSCRIPTION, "00000000-0000-0000-0000-000000000000")
    entries, calls = read(fake, [ids[1], gone, "droplet-1", "", other, ids[0].upper().replace(
        SUBSCRIPTION.upper(), SUBSCRIPTION)])
    found = [entry["found"] for entry in entries]
    assert found == [True, False, False, False, False, True]
    assert entries[1]["msg"] == "the virtual machine does not exist" and entries[1]["figures"] == {}
    assert "Not an Azure virtual machine id" in entries[2]["msg"]
    assert "subscription" in entries[4]["msg"]


def test_a_size_not_listed_in_the_location_is_found_but_not_measured():
    fake = FakeAzure()
    [backend_id] = make_machines(fake, 1)
    fake.body("vm", "vm0")["properties"]["hardwareProfile"]["vmSize"] = "Standard_Z9"
    [entry], calls = read(fake, [backend_id])
    assert entry["found"] and entry["figures"] == {} and entry["read_failed"]
    assert entry["msg"] == "is not measured: size Standard_Z9 is not listed in location westeurope"


def test_a_size_listing_that_fails_leaves_the_machine_unmeasured_and_named_by_the_report():
    """The location's VM sizes answering an error (or nothing at all): the machine is found, not
    measured, and its resource gets a usage row with a problem (a failed item), never no row."""
    from ansible_collections.waldur.site_agent.plugins.filter.site_agent import usage_rows
    from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
    fake = FakeAzure()
    [backend_id] = make_machines(fake, 1)
    fake.faults[("list", "sizes")] = AzureError("Service unavailable", 503, "ServiceUnavailable")
    original = fake._clients["compute"].virtual_machine_sizes.list

    def failing(location):
        original(location)
        raise fake.faults[("list", "sizes")]
    fake._clients["compute"].virtual_machine_sizes.list = failing
    [entry], calls = read(fake, [backend_id])
    assert entry["found"] and entry["figures"] == {} and entry["read_failed"]
    assert entry["msg"].startswith("is not measured: ") and "Service unavailable" in entry["msg"]
    resource = {"uuid": "%032x" % 1, "name": "vm0", "backend_id": backend_id}
    [row] = usage_rows([entry], [resource], COMPONENTS)
    assert row["usages"] == {} and row["problem"].startswith(
        "no usage measured: its machine %s is not measured: " % backend_id)


def test_an_unreadable_machine_is_left_out(monkeypatch):
    from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
    fake = FakeAzure()
    [backend_id] = make_machines(fake, 1)
    fake.faults[("get", "vm")] = AzureError("Service unavailable", 503, "ServiceUnavailable")
    [entry], calls = read(fake, [backend_id])
    assert not entry["found"] and entry["figures"] == {} and "Service unavailable" in entry["msg"]


def test_a_failed_listing_fails_the_module():
    from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
    fake = FakeAzure()
    ids = make_machines(fake, 2)
    fake.faults[("list_all", "vm")] = AzureError("Service unavailable", 503, "ServiceUnavailable")
    with pytest.raises(SystemExit) as failure:
        read(fake, ids)
    assert "listing the virtual machines of the subscription: Service unavailable" in failure.value.args[0]["msg"]


def test_the_module_takes_its_ids_and_returns_its_machines_packed(capsys, monkeypatch):
    import json

    from ansible_collections.waldur.site_agent.plugins.modules import azure_vm_chain_info
    from tests.unit.compat import patch_module_args

    fake = FakeAzure()
    ids = make_machines(fake, 3) + [""]
    fake.authenticate = lambda: None
    monkeypatch.setattr(FakeAzure, "api_calls", 7)  # the fake's counter names its objects
    monkeypatch.setattr(azure_vm_chain_info, "clients_from_module", lambda module: fake)

    def run(**args):
        with patch_module_args(dict(args, subscription_id=SUBSCRIPTION)), pytest.raises(SystemExit):
            azure_vm_chain_info.main()
        return json.loads(capsys.readouterr().out)

    listed = run(backend_ids=ids)
    packed = run(backend_ids_packed=json.dumps(ids), packed=True)
    assert "machines" not in packed and json.loads(packed["machines_packed"]) == listed["machines"]
    assert [machine["found"] for machine in listed["machines"]] == [True, True, True, False]
