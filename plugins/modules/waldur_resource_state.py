#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_resource_state
short_description: Set Erred Waldur resources OK again once their machines are known to be healthy
version_added: 1.0.0
description:
  - Waldur marks a resource C(Erred) when one of its orders is erred, for example an Update order
    that cannot be carried out, although the machine is unchanged and running. Waldur then refuses
    the resource's usage (C(Resource is not in valid state.)) until the resource is OK again.
  - Give this module the resources whose machines the pass has just found healthy. For each one it
    reads the resource and, when it is C(Erred) with no order in progress, calls C(set_as_ok) on the
    provider resource (current Waldur), which sets it OK and clears its error.
  - A resource that is not C(Erred) any more, or has an order in progress (the order pass settles it),
    is left alone.
  - A Waldur without C(set_as_ok) (Waldur 7.x answers 404) cannot be told. The resource is reported
    in RV(results[].unsupported) and a warning names it, on every run until someone sets it OK in
    Waldur.
  - Resources are worked on concurrently; one failing never stops the others.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.waldur
  - waldur.site_agent.batch
attributes:
  check_mode:
    support: full
    details:
      - Reads, writes nothing; RV(results[].changed) says which resources would be set OK.
  diff_mode:
    support: none
options:
  resources:
    description:
      - The resources whose machines are healthy.
    type: list
    elements: dict
    required: true
    suboptions:
      resource_uuid:
        description:
          - UUID of the provider resource.
        type: str
        required: true
      name:
        description:
          - Name of the resource, for the messages.
        type: str
  state:
    description:
      - The state to set. Only V(OK) is supported.
    type: str
    choices: [OK]
    default: OK
"""

EXAMPLES = r"""
- name: Set OK the Erred resources whose machines were measured
  waldur.site_agent.waldur_resource_state:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    resources:
      - resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
        name: web-1
  register: recovered
"""

RETURN = r"""
results:
  description: One result per resource, in input order.
  returned: always
  type: list
  elements: dict
  contains:
    resource_uuid:
      description: Resource UUID (32 hex).
      type: str
    name:
      description: Resource name (as given, else as Waldur has it).
      type: str
    changed:
      description: Whether the resource was (or in check mode would be) set OK.
      type: bool
    failed:
      description: Whether the resource could not be read or set.
      type: bool
    unsupported:
      description: Whether Waldur has no C(set_as_ok), so the resource stays Erred.
      type: bool
    retry:
      description: Whether the resource was cut off by the deadline (the next run picks it up).
      type: bool
    msg:
      description: What happened.
      type: str
  sample:
    - resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      name: web-1
      changed: true
      failed: false
      unsupported: false
      msg: set OK (was Erred; its machine is healthy)
totals:
  description: Counts over all resources (C(set_ok), C(unchanged), C(unsupported), C(failed)).
  returned: always
  type: dict
  sample: {set_ok: 1, unchanged: 0, unsupported: 0, failed: 0}
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import (
    BatchRunner,
    batch_argument_spec,
    count_results,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError, error_message
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import provider_resource_path
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule

# Statuses of a POST to an action the server's version does not have.
MISSING_ACTION_STATUSES = (404, 405)


def label(item):
    return "%s (%s)" % (item["name"], item["resource_uuid"]) if item["name"] else item["resource_uuid"]


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = dict(
        resources=dict(type="list", elements="dict", required=True, options=dict(
            resource_uuid=dict(type="str", required=True),
            name=dict(type="str"),
        )),
        state=dict(type="str", choices=["OK"], default="OK"),
    )
    argument_spec.update(batch_argument_spec())
    module = WaldurModule(build=build, argument_spec=argument_spec)
    params = module.params
    items, seen = [], {}
    for index, entry in enumerate(params["resources"]):
        uuid = module.uuid_param(entry["resource_uuid"], "resources[%d].resource_uuid" % index)
        if uuid in seen:
            module.fail_json(msg="resources[%d].resource_uuid repeats resources[%d].resource_uuid (%s)"
                             % (index, seen[uuid], uuid))
        seen[uuid] = index
        items.append({"resource_uuid": uuid, "name": entry.get("name") or ""})
    client = module.client(pool_size=params["max_workers"])

    def set_ok(item):
        result = {"resource_uuid": item["resource_uuid"], "name": item["name"], "changed": False, "failed": False,
                  "unsupported": False}
        resource = client.get(provider_resource_path(item["resource_uuid"]),
                              params={"field": ["name", "state", "order_in_progress"]}) or {}
        item["name"] = item["name"] or resource.get("name") or ""
        result["name"] = item["name"]
        if resource.get("state") != "Erred":
            return dict(result, msg="left alone: the resource is %s" % resource.get("state"))
        in_progress = resource.get("order_in_progress")
        if isinstance(in_progress, dict) and in_progress.get("uuid"):
            return dict(result, msg="left Erred: its %s order %s is in progress (the order pass settles it)"
                        % (in_progress.get("type") or "", in_progress["uuid"]))
        if module.check_mode:
            return dict(result, changed=True, msg="would set OK (Erred; its machine is healthy)")
        try:
            client.post(provider_resource_path(item["resource_uuid"], "set_as_ok"))
        except WaldurApiError as exc:
            if exc.status in MISSING_ACTION_STATUSES:
                return dict(result, unsupported=True, msg=(
                    "resource %s is Erred in Waldur although its machine is healthy, and this Waldur has no "
                    "set_as_ok (older than 8.x): set it OK in Waldur, or Waldur keeps refusing its usage"
                    % label(item)))
            raise
        return dict(result, changed=True, msg="set OK (was Erred; its machine is healthy)")

    def on_error(item, exc):
        return {"resource_uuid": item["resource_uuid"], "name": item["name"], "changed": False, "failed": True,
                "unsupported": False, "msg": "resource %s: %s" % (label(item), error_message(exc))}

    runner = BatchRunner(module, set_ok, echo=("resource_uuid", "name"), on_error=on_error)
    results = runner.run(items)
    for result in results:
        result.setdefault("unsupported", False)
        if result["unsupported"]:
            module.warn(result["msg"])
    totals = count_results(
        results,
        set_ok=lambda result: result["changed"],
        unchanged=lambda result: not (result["changed"] or result["failed"] or result["unsupported"]),
        unsupported=lambda result: result["unsupported"],
        failed=lambda result: result["failed"],
    )
    runner.finish(results, changed=totals["set_ok"] > 0, totals=totals)


if __name__ == "__main__":
    main()
