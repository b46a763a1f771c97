#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_audit_info
short_description: What Waldur holds for an offering's audit - every resource and the stuck orders
version_added: 1.0.0
description:
  - Lists the offering's resources in every state, Terminated included
    (C(/api/marketplace-provider-resources/), all pages), and its orders in state C(executing)
    (C(/api/marketplace-orders/), all pages), for M(waldur.site_agent.do_audit) and
    M(waldur.site_agent.azure_audit).
  - An order is stuck when it has been executing, unchanged, for longer than O(stuck_after_hours); its
    age is counted from its last change (C(modified)), else from its creation.
  - Two listings, whatever the number of resources, asking Waldur only for the fields the audit reads;
    nothing is read one by one.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.waldur
  - waldur.site_agent.attributes.read_only
options:
  offering_uuid:
    description:
      - UUID of the Waldur offering.
    type: str
    required: true
  stuck_after_hours:
    description:
      - An order executing for longer than this many hours is stuck.
    type: float
    default: 1
"""

EXAMPLES = r"""
- name: What Waldur holds for the offering
  waldur.site_agent.waldur_audit_info:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: d0000000000000000000000000000001
    stuck_after_hours: 2
  register: waldur_side

- name: Name the stuck orders
  ansible.builtin.debug:
    msg: "{{ waldur_side.stuck_orders | map(attribute='uuid') | list }}"
"""

RETURN = r"""
resources:
  description:
    - Every resource of the offering, in every state, with the keys the audit reads (as
      M(waldur.site_agent.waldur_resources_info) returns them).
  returned: always
  type: list
  elements: dict
  contains:
    uuid:
      description: Resource UUID (32 hex).
      type: str
    name:
      description: Resource name.
      type: str
    state:
      description: Waldur resource state (C(Creating), C(OK), C(Erred), C(Updating), C(Terminating), C(Terminated)).
      type: str
    backend_id:
      description: Backend id (droplet id, ARM id), or an empty string.
      type: str
    limits:
      description: Current limits.
      type: dict
    attributes:
      description: Order attributes of the resource.
      type: dict
    paused:
      description: Whether the resource is paused.
      type: bool
    downscaled:
      description: Whether the resource is downscaled.
      type: bool
    backend_metadata:
      description: Metadata the agent stored for the resource.
      type: dict
orders:
  description: The offering's executing orders, each with C(age_hours).
  returned: always
  type: list
  elements: dict
  contains:
    uuid:
      description: Order UUID (32 hex).
      type: str
    type:
      description: C(Create), C(Update), C(Terminate) or C(Restore).
      type: str
    state:
      description: C(executing).
      type: str
    marketplace_resource_uuid:
      description: The resource the order is for.
      type: str
    resource_name:
      description: Its name.
      type: str
    created:
      description: When the order was placed.
      type: str
    modified:
      description: When it last changed.
      type: str
    error_message:
      description: The last error Waldur holds for it (empty when none).
      type: str
    age_hours:
      description: Hours since it last changed (else since it was placed); null when Waldur tells neither.
      type: float
stuck_orders:
  description: The orders of RV(orders) executing for longer than O(stuck_after_hours).
  returned: always
  type: list
  elements: dict
counts:
  description: Resources by state, and the number of executing and stuck orders.
  returned: always
  type: dict
  sample: {resources: {OK: 100, Terminated: 3}, executing_orders: 2, stuck_orders: 1}
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_marks import age_hours
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import utc_now
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import (
    normalize_order,
    normalize_resource,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule


# Only what the audit reads (Waldur's ``field=``): a resource is otherwise a few kilobytes.
RESOURCE_FIELDS = ("uuid", "name", "state", "backend_id", "limits", "attributes", "paused", "downscaled",
                   "backend_metadata", "offering_uuid")
ORDER_FIELDS = ("uuid", "type", "state", "offering_uuid", "marketplace_resource_uuid", "resource_name", "created",
                "modified", "error_message")
RESOURCE_KEYS = ("uuid", "name", "state", "backend_id", "limits", "attributes", "paused", "downscaled",
                 "backend_metadata")
ORDER_KEYS = ("uuid", "type", "state", "marketplace_resource_uuid", "resource_name", "created", "modified")


def executing_orders(client, offering_uuid, now):
    orders = []
    for raw in client.list("marketplace-orders/", params={"offering_uuid": offering_uuid, "state": "executing",
                                                          "field": list(ORDER_FIELDS)}):
        full = normalize_order(raw)
        # django-filter ignores filters it does not know, so check what came back
        if full["state"] != "executing" or (full["offering_uuid"] and full["offering_uuid"] != offering_uuid):
            continue
        order = dict((key, full[key]) for key in ORDER_KEYS)
        order["error_message"] = raw.get("error_message") or ""
        order["age_hours"] = age_hours(order["modified"] or order["created"], now)
        orders.append(order)
    return orders


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    module = WaldurModule(build=build, argument_spec=dict(
        offering_uuid=dict(type="str", required=True),
        stuck_after_hours=dict(type="float", default=1.0),
    ))
    offering_uuid = module.uuid_param(module.params["offering_uuid"], "offering_uuid")
    threshold = module.params["stuck_after_hours"]
    if threshold < 0:
        module.fail_json(msg="stuck_after_hours: expected 0 or more hours, got %s" % threshold)
    client = module.client()
    now = utc_now()
    try:
        resources, seen = [], set()
        for raw in client.list("marketplace-provider-resources/",
                               params={"offering_uuid": offering_uuid, "field": list(RESOURCE_FIELDS)}):
            resource = normalize_resource(raw)
            if resource["uuid"] in seen or (resource["offering_uuid"] and resource["offering_uuid"] != offering_uuid):
                continue
            seen.add(resource["uuid"])
            resources.append(dict((key, resource[key]) for key in RESOURCE_KEYS))
        orders = executing_orders(client, offering_uuid, now)
    except WaldurApiError as exc:
        module.fail_from_error(exc, msg="could not list what Waldur holds for offering %s" % offering_uuid)
    stuck = [order for order in orders if order["age_hours"] is not None and order["age_hours"] > threshold]
    by_state = {}
    for resource in resources:
        by_state[resource["state"]] = by_state.get(resource["state"], 0) + 1
    module.exit_json(changed=False, resources=resources, orders=orders, stuck_orders=stuck,
                     counts={"resources": by_state, "executing_orders": len(orders), "stuck_orders": len(stuck)})


if __name__ == "__main__":
    main()
