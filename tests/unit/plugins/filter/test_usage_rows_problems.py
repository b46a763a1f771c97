"""Issue 22 rule 7: usage_rows loses no usage quietly. A backend id the backend module refused
(DigitalOcean: not a droplet id; Azure: not an ARM VM id, or another subscription's) and a
backend id two resources share give rows with a ``problem``, which waldur_usage counts failed by
name; every other resource keeps its row."""

from __future__ import annotations

from ansible_collections.waldur.site_agent.plugins.filter.site_agent import usage_rows
from ansible_collections.waldur.site_agent.plugins.modules.do_droplet_info import droplet_entries

FIGURES = {"cores": 2, "ram_mb": 4096, "disk_mb": 38912}
COMPONENTS = {"cpu": {"unit_factor": 1}, "ram": {"unit_factor": 1}}
SUB = "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/"


def resource(letter, backend_id, name=None):
    return {"uuid": letter * 32, "name": name or "vm-" + letter, "backend_id": backend_id}


def test_digitalocean_a_backend_id_that_is_no_droplet_id_is_a_named_problem_the_others_are_measured():
    droplets, missing = droplet_entries(["418000001", "web-1", "418000002"], {418000001: {"id": 418000001}})
    assert [d.get("bad_backend_id", False) for d in droplets] == [False, True, False]
    assert missing == ["web-1", "418000002"]
    droplets[0]["usages"] = {"cpu": 1}
    rows = usage_rows(droplets, [resource("a", "418000001"), resource("b", "web-1"), resource("c", "418000002")])
    assert rows == [
        {"resource_uuid": "a" * 32, "resource_name": "vm-a", "usages": {"cpu": 1}},
        {"resource_uuid": "b" * 32, "resource_name": "vm-b", "usages": {},
         "problem": "no usage measured: backend id web-1: not a DigitalOcean droplet id"},
    ]  # 418000002: the droplet is gone, nothing to bill (not a problem of the id)


def test_azure_refused_and_shared_backend_ids_are_named_problems_while_the_rest_is_billed():
    machines = [
        {"backend_id": SUB + "billed", "found": True, "figures": FIGURES},
        {"backend_id": "418000001", "found": False, "bad_backend_id": True,
         "msg": "Not an Azure virtual machine id: '418000001'"},
        {"backend_id": SUB + "shared", "found": True, "figures": FIGURES},
        {"backend_id": SUB.upper() + "SHARED", "found": True, "figures": FIGURES},
    ]
    resources = [resource("a", SUB + "billed"), resource("b", "418000001"),
                 resource("c", SUB + "shared", "twin-1"), resource("d", SUB.upper() + "SHARED", "twin-2")]
    rows = usage_rows(machines, resources, COMPONENTS)
    assert rows[0] == {"resource_uuid": "a" * 32, "resource_name": "vm-a", "usages": {"cpu": 2, "ram": 4096}}
    assert rows[1]["problem"] == ("no usage measured: backend id 418000001: Not an Azure virtual machine id: "
                                  "'418000001'")
    # compared case-insensitively, as ARM ids are: each twin names the other, neither is billed
    assert rows[2] == {"resource_uuid": "c" * 32, "resource_name": "twin-1", "usages": {}, "problem": (
        "no usage sent: its backend id %sshared is also the backend id of resource twin-2 (%s); give each "
        "resource its own machine in Waldur" % (SUB, "d" * 32))}
    assert rows[3]["usages"] == {} and "resource twin-1 (%s)" % ("c" * 32) in rows[3]["problem"]
    assert len(rows) == 4
