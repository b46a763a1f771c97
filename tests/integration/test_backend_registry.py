"""A third cloud joins the way docs/extending.md says: a module of the backend registry and its line,
its module and its task files. A toy cloud (each machine a JSON file in a folder) is added to a copy of
the collection and the real order pass runs it against the Waldur simulator: the order is claimed,
planned by the toy's own planning, carried out by its module and settled done; a second pass changes
nothing; its probe failing leaves the order pending and the pass failing; site_config refuses its
settings by the toy's own schema."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import yaml

from tests.helpers import copy_working_tree, run_playbook, simulator_site_config
from tests.integration.passes import assert_done, waldur_writes
from tests.simulators.waldur import presets as W

TOY_BACKEND = '''
"""A toy cloud: each machine a JSON file in the folder backend_settings.root."""

from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends import Backend
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends.planning import first, order_items, unpacked


def plan(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    def create(order, resource, settings):
        attributes = resource.get("attributes") or {}
        flavour = first(attributes, "flavour") or settings.get("default_flavour")
        params = {"state": "present", "name": resource.get("name") or order.get("resource_name") or "", "flavour": flavour}
        if not flavour:
            params["error"] = "toy flavour is not specified"
        return params

    def update(order, resource, settings, backend_id):
        return {"error": "toy machines are not resized"}

    return order_items(unpacked(orders, "orders"), backend_settings, create, update)


def check_settings(path, settings, problems):
    if not settings.get("root"):
        problems.error(path + ".root", "required")


def probe_failure(result):
    return "" if (result.get("stat") or {}).get("isdir") else "the toy cloud's root is not a folder"


BACKEND = Backend(
    name="toy", title="Toy cloud", machine="toy machine", credentials=("root",),
    settings={"default_flavour": "str"},
    create_inputs=(("flavour", ("default_flavour",), ("flavour",)),), catalogue_keys=("flavour",),
    plan=plan, power_states=("stopped", "running"), check_settings=check_settings, probe_failure=probe_failure,
)
'''

TOY_MODULE = '''#!/usr/bin/python
DOCUMENTATION = r"""
module: toy_machine
short_description: Toy machines, one JSON file each
description: The toy cloud of tests/integration/test_backend_registry.py.
options:
  root: {description: The folder of the machines., type: path, required: true}
  machines_packed: {description: The planned items, packed., type: raw, required: true}
author: Waldur site agent developers
"""
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import like, unpack


def main():
    module = AnsibleModule(argument_spec=dict(root=dict(type="path", required=True),
                                              machines_packed=dict(type="raw", required=True)),
                           supports_check_mode=True)
    results = []
    for item in unpack(module.params["machines_packed"], "machines_packed"):
        path = os.path.join(module.params["root"], item["resource_uuid"] + ".json")
        backend_id = "toy-" + item["resource_uuid"]
        exists = os.path.exists(path)
        changed = exists != (item["state"] == "present")
        if changed and not module.check_mode:
            if item["state"] == "present":
                with open(path, "w") as machine:
                    json.dump({"name": item["name"], "flavour": item["flavour"]}, machine)
            else:
                os.unlink(path)
        results.append({"order_uuid": item["order_uuid"], "resource_uuid": item["resource_uuid"],
                        "resource_name": item.get("name") or "", "failed": False, "retry": False,
                        "changed": changed, "msg": "",
                        "backend_id": backend_id if item["state"] == "present" else item.get("backend_id"),
                        "backend_metadata": {"toy": {"flavour": item.get("flavour")}} if item["state"] == "present"
                        else {}})
    module.exit_json(changed=any(r["changed"] for r in results), results_packed=like(results, module.params["machines_packed"]))


if __name__ == "__main__":
    main()
'''

# the toy's task files, one per step of the order pass that names its backend
PROBE = """---
- name: Prove the toy cloud's root folder
  ansible.builtin.stat:
    path: "{{ waldur_offering.backend_settings.root }}"
  register: order_process_probe
"""
CATALOGUE = """---
- name: The toy cloud has every flavour
  ansible.builtin.set_fact:
    order_process_catalogue: {verdicts: [], held: []}
"""
ACT = """---
- name: Keep the orders set aside for settling
  ansible.builtin.set_fact:
    order_process_plan:
      set_aside: "{{ order_process_planned.set_aside }}"
      notes: "{{ order_process_planned.notes }}"

- name: Carry out the orders on the toy cloud
  waldur.site_agent.toy_machine:
    root: "{{ waldur_offering.backend_settings.root }}"
    machines_packed: "{{ order_process_planned.backend_items }}"
  register: order_process_act
"""


def collection_with_a_toy_cloud(tmp_path: Path) -> Path:
    """A copy of the collection with the toy cloud added as docs/extending.md says; the root of its
    collections path."""
    root = tmp_path / "collections"
    copy = copy_working_tree(root / "ansible_collections" / "waldur" / "site_agent")
    backends = copy / "plugins" / "plugin_utils" / "backends"
    (backends / "toy.py").write_text(textwrap.dedent(TOY_BACKEND).lstrip())
    registry = backends / "__init__.py"
    text = registry.read_text()
    line = '    "digitalocean": "digitalocean",\n'
    assert line in text
    registry.write_text(text.replace(line, line + '    "toy": "toy",\n'))  # the registry line
    (copy / "plugins" / "modules" / "toy_machine.py").write_text(TOY_MODULE)
    tasks = copy / "roles" / "order_process" / "tasks"
    (tasks / "probe_toy.yml").write_text(PROBE)
    (tasks / "catalogue_toy.yml").write_text(CATALOGUE)
    (tasks / "toy.yml").write_text(ACT)
    return root


def toy_config(tmp_path: Path, waldur, cloud: Path, **settings) -> Path:
    """The simulator's DigitalOcean offering, served by the toy cloud instead."""
    offering = simulator_site_config(waldur.url, do_url="http://127.0.0.1:9")["offerings"][0]
    offering.update(backend_type="toy", order_processing_backend="toy", reporting_backend=None,
                    membership_sync_backend=None,
                    backend_settings=dict({"root": str(cloud), "default_flavour": "small"}, **settings))
    offering = {key: value for key, value in offering.items() if value is not None}
    path = tmp_path / "toy-config.yaml"
    path.write_text(yaml.safe_dump({"offerings": [offering]}, sort_keys=False))
    return path


def order_pass(collections: Path, config: Path, **options):
    copy = collections / "ansible_collections" / "waldur" / "site_agent"
    return run_playbook(copy / "playbooks" / "order_process.yml",
                        env={"WALDUR_SITE_AGENT_CONFIG": str(config), "ANSIBLE_COLLECTIONS_PATH": str(collections),
                             "ANSIBLE_ROLES_PATH": str(copy / "roles")}, **options)


def test_a_toy_cloud_added_to_the_registry_runs_through_the_order_pass(tmp_path, waldur_sim):
    waldur = waldur_sim
    collections = collection_with_a_toy_cloud(tmp_path)
    cloud = tmp_path / "cloud"
    cloud.mkdir()
    config = toy_config(tmp_path, waldur, cloud)

    run = order_pass(collections, config)
    assert run.rc == 0, run.output[-6000:]
    assert_done(waldur, W.DO_ORDER_UUID)
    machine = cloud / (W.DO_RESOURCE_UUID + ".json")
    # planned by the toy's own planning (its settings' default), carried out by its module
    assert json.loads(machine.read_text()) == {"name": waldur.app.resource(W.DO_RESOURCE_UUID)["name"],
                                               "flavour": "small"}
    resource = waldur.app.resource(W.DO_RESOURCE_UUID)
    assert resource["backend_id"] == "toy-" + W.DO_RESOURCE_UUID
    assert resource["backend_metadata"] == {"toy": {"flavour": "small"}}

    # a second pass has nothing to do
    since = len(waldur.app.calls)
    again = order_pass(collections, config)
    assert again.rc == 0, again.output[-6000:]
    assert waldur_writes(waldur, since) == [] and sorted(path.name for path in cloud.iterdir()) == [machine.name]


def test_the_toy_probe_and_schema_are_its_own(tmp_path, waldur_sim):
    waldur = waldur_sim
    collections = collection_with_a_toy_cloud(tmp_path)
    # its probe fails: nothing approved, the order stays pending, the pass fails naming why
    config = toy_config(tmp_path, waldur, tmp_path / "no-such-folder")
    run = order_pass(collections, config)
    assert run.rc == 2, run.output[-6000:]
    assert "the toy cloud's root is not a folder" in run.output
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"
    assert waldur_writes(waldur) == []

    # its settings are checked by its own schema and check, naming the key
    config = toy_config(tmp_path, waldur, tmp_path, root=None, default_flavour=3, flavor="x")
    run = order_pass(collections, config)
    assert run.rc != 0
    assert "offerings[0].backend_settings.root: required" in run.output
    assert "offerings[0].backend_settings.default_flavour: expected a string" in run.output
    assert "flavor" in run.output and "default_flavour" in run.output  # an unknown key, named with its likely meaning
    assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"
