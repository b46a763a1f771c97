#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_resource_metadata
short_description: Record backend metadata on Waldur provider resources, only where it changed
version_added: 1.0.0
description:
  - For each resource, compares the wanted backend metadata with what Waldur holds and calls
    C(set_backend_metadata) only where they differ.
  - What Waldur holds is taken from C(current_metadata) when the item gives it (for example from
    M(waldur.site_agent.waldur_resources_info)), so no read is needed; otherwise the resource is read.
  - Resources are worked on concurrently; one failing never stops the others.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.waldur
  - waldur.site_agent.batch
  - waldur.site_agent.packed
attributes:
  check_mode:
    support: full
    details:
      - Reads and compares, writes nothing; RV(results[].changed) says what would be written.
  diff_mode:
    support: full
    details:
      - Each changed result carries RV(results[].diff) with the metadata before and after.
options:
  resources_packed:
    description:
      - O(resources) packed, as one JSON text of the same items (see the description); exactly one
        of the two is given. Each item is checked as an item of O(resources) would be.
    type: raw
  resources:
    description:
      - The resources to update. Required unless O(resources_packed) is given.
    type: list
    elements: dict
    suboptions:
      resource_uuid:
        description:
          - UUID of the provider resource.
        type: str
        required: true
      backend_metadata:
        description:
          - The metadata Waldur should hold.
        type: dict
        required: true
      current_metadata:
        description:
          - What Waldur holds now, when known. Saves reading the resource.
        type: dict
"""

EXAMPLES = r"""
- name: Record what the backend reported
  waldur.site_agent.waldur_resource_metadata:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    resources:
      - resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
        backend_metadata: {status: active, region: ams3, ip_address: 203.0.113.10}
        current_metadata: {status: "off", region: ams3, ip_address: 203.0.113.10}

- name: Record what a membership pass found, the lists handed over packed
  waldur.site_agent.waldur_resource_metadata:
    resources_packed: "{{ power_states.results_packed | waldur.site_agent.metadata_updates(waldur_resources.resources_packed) }}"
    packed: true
"""

RETURN = r"""
diff:
  description:
    - With C(--diff), one entry per resource that changed (or would change), for Ansible's diff
      output; C(before_header) and C(after_header) name the resource.
  returned: with C(--diff), when backend metadata changed (or would change)
  type: list
  elements: dict
  sample:
    - before: {power_state: running}
      after: {power_state: "off"}
      before_header: resource 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      after_header: resource 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
results_packed:
  description: RV(results) packed, as one JSON text of the same results.
  returned: when O(packed) is true
  type: str
  sample: '[{"resource_uuid": "7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b", "changed": true, "msg": "backend metadata updated"}]'
failures:
  description: The results that failed (as in RV(results)), so that a packed run still names them.
  returned: when O(packed) is true
  type: list
  elements: dict
results:
  description: One result per resource, in input order.
  returned: unless O(packed) is true
  type: list
  elements: dict
  contains:
    resource_uuid:
      description: Resource UUID (32 hex).
      type: str
    changed:
      description: Whether the metadata was (or in check mode would be) written.
      type: bool
    failed:
      description: Whether this resource could not be handled.
      type: bool
    retry:
      description: Whether the resource was cut off by the deadline (the next run picks it up).
      type: bool
    diff:
      description: The backend metadata before and after (C(before), C(after)).
      returned: with C(--diff), when the metadata changed (or would change)
      type: dict
    msg:
      description: What happened.
      type: str
  sample:
    - resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      changed: true
      failed: false
      msg: backend metadata updated
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import BatchRunner, batch_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import list_option
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import error_message
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import provider_resource_path
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule


RESOURCE_OPTIONS = dict(
    resource_uuid=dict(type="str", required=True),
    backend_metadata=dict(type="dict", required=True),
    current_metadata=dict(type="dict"),
)


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = dict(
        resources=dict(type="list", elements="dict", options=RESOURCE_OPTIONS),
        resources_packed=dict(type="raw"),
        packed=dict(type="bool", default=False),
    )
    argument_spec.update(batch_argument_spec())
    module = WaldurModule(build=build, argument_spec=argument_spec, required_one_of=[("resources", "resources_packed")],
                          mutually_exclusive=[("resources", "resources_packed")])
    params = module.params
    items = []
    seen = {}
    for index, item in enumerate(list_option(module, "resources", RESOURCE_OPTIONS)):
        uuid = module.uuid_param(item["resource_uuid"], "resources[%d].resource_uuid" % index)
        if uuid in seen:
            module.fail_json(msg="resources[%d].resource_uuid repeats resources[%d].resource_uuid (%s)"
                             % (index, seen[uuid], uuid))
        seen[uuid] = index
        items.append(dict(item, resource_uuid=uuid))
    client = module.client(pool_size=params["max_workers"])

    def update(item):
        uuid = item["resource_uuid"]
        current = item["current_metadata"]
        if current is None:
            current = (client.get(provider_resource_path(uuid)) or {}).get("backend_metadata") or {}
        if current == item["backend_metadata"]:
            return {"msg": "backend metadata unchanged"}
        changed = {"changed": True}
        if module._diff:
            changed["diff"] = {"before": current, "after": item["backend_metadata"]}
        if module.check_mode:
            return dict(changed, msg="would update backend metadata")
        client.post(provider_resource_path(uuid, "set_backend_metadata"),
                    json={"backend_metadata": item["backend_metadata"]})
        return dict(changed, msg="backend metadata updated")

    def on_error(item, exc):
        return {"failed": True, "msg": error_message(exc)}

    runner = BatchRunner(module, update, echo=("resource_uuid",), on_error=on_error)
    runner.finish(runner.run(items), packed=params["packed"], fail_msg=lambda failures, results: "%d of %d resource(s) failed: %s" % (
        len(failures), len(results), "; ".join("%s: %s" % (r["resource_uuid"], r["msg"]) for r in failures)))


if __name__ == "__main__":
    main()
