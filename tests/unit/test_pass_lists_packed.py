"""The order, membership and report passes hand their per-item lists from task to task packed.

Ansible takes in and templates a list value by value: at 10,000 resources a list crossing a task
cost seconds (docs/performance.md). Every task of these passes that takes or returns such a list
uses the module's packed form; this test fails when one goes back to a plain list.
"""

from __future__ import annotations

import pytest
import yaml

from tests.helpers import REPO

# module -> (the list option it takes, packed) ; None: it takes none (it lists)
LIST_OPTIONS = {
    "waldur.site_agent.waldur_orders": None,  # claims (lists) or settles (outcomes_packed, checked below)
    "waldur.site_agent.waldur_resources_info": None,
    "waldur.site_agent.do_droplet": "droplets",
    "waldur.site_agent.azure_vm_chain": "machines",
    "waldur.site_agent.azure_vm_chain_info": "backend_ids",
    "waldur.site_agent.waldur_resource_metadata": "resources",
    "waldur.site_agent.waldur_usage": "usages",
}


def _tasks(path):
    def walk(tasks):
        for task in tasks or []:
            yield task
            for key in ("block", "rescue", "always"):
                yield from walk(task.get(key))
    return list(walk(yaml.safe_load(path.read_text())))


@pytest.mark.parametrize("task_file", ["order_process/tasks/orders.yml", "order_process/tasks/digitalocean.yml",
                                       "order_process/tasks/azure.yml", "membership_sync/tasks/main.yml", "membership_sync/tasks/digitalocean.yml",
                                       "membership_sync/tasks/azure.yml", "report/tasks/azure.yml",
                                       "report/tasks/azure_measure.yml"])
def test_every_list_of_the_pass_crosses_its_tasks_packed(task_file):
    checked = 0
    for task in _tasks(REPO / "roles" / task_file):
        for module, option in LIST_OPTIONS.items():
            if module not in task:
                continue
            args = task[module]
            assert args.get("packed") is True, "%s: %s returns a plain list" % (task_file, task["name"])
            if option is not None:
                assert option not in args and "%s_packed" % option in args, (
                    "%s: %s takes a plain list" % (task_file, task["name"]))
            if args.get("state") == "settled":
                assert "outcomes_packed" in args, "%s: %s settles a plain list" % (task_file, task["name"])
            checked += 1
    assert checked, "no task of %s takes or returns a list" % task_file
