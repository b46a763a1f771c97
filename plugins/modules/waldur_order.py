#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_order
short_description: Order, change or terminate a Waldur marketplace resource as a consumer
version_added: 1.0.0
description:
  - The consumer side of the marketplace order flow, as the Waldur CLI's C(provision) and
    C(terminate) commands offer it. Submit an order, wait for it, get the resource.
  - O(state=present) submits a Create order for O(offering) in O(project) (with O(plan),
    O(attributes), O(limits)), accepting the terms of service.
  - O(state=updated) submits an Update order with new O(limits) for O(resource). When the limits
    already equal the resource's, nothing is submitted.
  - O(state=absent) submits a Terminate order for O(resource). When the resource is already
    terminated or gone, nothing is submitted.
  - With O(wait=true) the module polls the order until it is C(done) and returns it with the
    resource, or fails with the order's C(error_message) when it ends C(erred), C(rejected) or
    C(canceled). Timing out fails the task but does not cancel the order.
  - The request timeout of each HTTP call is the shared O(timeout) option; how long to wait for the
    order is O(wait_timeout).
notes:
  - Like the Waldur CLI's C(provision), O(state=present) submits a new Create order on every run;
    use O(state=updated) and O(state=absent) on the returned resource afterwards.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.waldur
attributes:
  check_mode:
    support: full
    details:
      - Submits nothing; returns in RV(request) the order body that would be submitted.
  diff_mode:
    support: none
options:
  state:
    description:
      - C(present) creates a resource, C(updated) changes its limits, C(absent) terminates it.
    type: str
    choices: [present, updated, absent]
    default: present
  offering:
    description:
      - The offering to order from, as a UUID or any Waldur URL ending in its UUID. Required with
        O(state=present).
      - The module sends the public-offering URL Waldur requires.
    type: str
  project:
    description:
      - The consumer project, as a UUID or URL. Required with O(state=present).
    type: str
  plan:
    description:
      - The plan, as a UUID or URL (C(/api/marketplace-public-offerings/<offering>/plans/<plan>/) or
        C(/api/marketplace-plans/<plan>/)).
    type: str
  attributes:
    description:
      - Order attributes, offering-specific (C(name) is expected by most offerings). With
        O(state=absent) they are passed as termination attributes.
    type: dict
  limits:
    description:
      - "Component limits, for example C({cpu: 2, ram: 4096, disk: 51200}). Required with
        O(state=updated)."
    type: dict
  resource:
    description:
      - The marketplace resource UUID (the C(uuid) or C(marketplace_resource_uuid) of a provisioned
        resource). Required with O(state=updated) and O(state=absent).
    type: str
    aliases: [resource_uuid]
  request_comment:
    description:
      - A comment stored with the order.
    type: str
  wait:
    description:
      - Wait for the order to reach a final state.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait for a final state before giving up (the order is not cancelled).
    type: int
    default: 600
    aliases: [order_timeout]
  interval:
    description:
      - Seconds between polls of the order.
    type: float
    default: 3
"""

EXAMPLES = r"""
- name: Order a droplet and wait for it
  waldur.site_agent.waldur_order:
    api_url: https://waldur.example.com/api/
    api_token: "{{ consumer_token }}"
    offering: d0000000000000000000000000000001
    project: c0000000000000000000000000000001
    plan: d0000000000000000000000000000002
    attributes:
      name: web-1
      region: ams3
    limits: {cpu: 1, ram: 1024, disk: 25600}
  register: web

- name: Submit without waiting, keep the order UUID
  waldur.site_agent.waldur_order:
    offering: d0000000000000000000000000000001
    project: c0000000000000000000000000000001
    attributes: {name: batch-1}
    wait: false
  register: submitted

- name: Grow it
  waldur.site_agent.waldur_order:
    state: updated
    resource: "{{ web.resource.uuid }}"
    limits: {cpu: 2, ram: 2048, disk: 51200}

- name: Tear it down
  waldur.site_agent.waldur_order:
    state: absent
    resource: "{{ web.resource.uuid }}"
    wait_timeout: 300
"""

RETURN = r"""
order:
  description: The order as Waldur returns it (the final state when O(wait=true)); null when nothing was submitted.
  returned: success
  type: dict
  sample:
    uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
    type: Create
    state: done
    marketplace_resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
    error_message: ""
order_uuid:
  description: UUID of the submitted order (32 hex); null when nothing was submitted.
  returned: success
  type: str
  sample: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
resource:
  description: >-
    The marketplace resource (C(GET /api/marketplace-resources/<uuid>/)) after a C(done) order, or
    the current resource when nothing was submitted; null when not waited for.
  returned: success
  type: dict
  sample:
    uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
    name: web-1
    state: OK
    backend_id: "412345678"
request:
  description: The body submitted (or, in check mode, that would be submitted).
  returned: when an order is (or would be) submitted
  type: dict
  sample:
    offering: https://waldur.example.com/api/marketplace-public-offerings/d0000000000000000000000000000001/
    project: https://waldur.example.com/api/projects/c0000000000000000000000000000001/
    plan: https://waldur.example.com/api/marketplace-public-offerings/d0000000000000000000000000000001/plans/d0000000000000000000000000000002/
    attributes: {name: web-1}
    limits: {cpu: 1}
    accepting_terms_of_service: true
msg:
  description: What happened.
  returned: always
  type: str
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import limits_cover
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import find_uuids, hex_uuid, normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import (
    TERMINAL_ORDER_STATES,
    order_path,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule


def reference_uuid(module, value, name):
    """The UUID of a UUID-or-URL option: the value itself, or the last UUID in the URL's path."""
    text = str(value).strip()
    if "/" in text:
        found = find_uuids(text.split("?", 1)[0])
        if not found:
            module.fail_json(msg="%s must be a UUID or a Waldur URL ending in one, got %r" % (name, value))
        text = found[-1]
    return module.uuid_param(text, name)


def resource_path(uuid, action=None):
    return "marketplace-resources/%s/%s" % (normalize_uuid(uuid), "%s/" % action if action else "")


def wait_for(module, client, order_uuid, timeout, interval):
    """Poll the order until it is terminal; fail when it does not end done or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        order = client.get(order_path(order_uuid)) or {}
        state = order.get("state")
        if state in TERMINAL_ORDER_STATES:
            break
        if time.monotonic() + interval > deadline:
            module.fail_json(msg="order %s is still %s after %s seconds; it was not cancelled and Waldur will "
                                 "go on with it" % (order_uuid, state, timeout), order=order, order_uuid=order_uuid)
        time.sleep(interval)
    if state != "done":
        reason = order.get("error_message") or "Waldur gives no error message"
        module.fail_json(msg="order %s is %s: %s" % (order_uuid, state, reason), order=order, order_uuid=order_uuid)
    return order


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = dict(
        state=dict(type="str", default="present", choices=["present", "updated", "absent"]),
        offering=dict(type="str"),
        project=dict(type="str"),
        plan=dict(type="str"),
        attributes=dict(type="dict"),
        limits=dict(type="dict"),
        resource=dict(type="str", aliases=["resource_uuid"]),
        request_comment=dict(type="str"),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=600, aliases=["order_timeout"]),
        interval=dict(type="float", default=3.0),
    )
    module = WaldurModule(
        build=build,
        argument_spec=argument_spec,
        required_if=[
            ("state", "present", ("offering", "project")),
            ("state", "updated", ("resource", "limits")),
            ("state", "absent", ("resource",)),
        ],
    )
    params = module.params
    if params["interval"] <= 0:
        module.fail_json(msg="interval must be a positive number of seconds, got %s" % params["interval"])
    client = module.client()
    state = params["state"]

    try:
        if state == "present":
            offering = reference_uuid(module, params["offering"], "offering")
            project = reference_uuid(module, params["project"], "project")
            request = {
                "offering": client.url("marketplace-public-offerings/%s/" % offering),
                "project": client.url("projects/%s/" % project),
                "attributes": params["attributes"] or {},
                "accepting_terms_of_service": True,
            }
            if params["plan"]:
                plan = reference_uuid(module, params["plan"], "plan")
                request["plan"] = client.url("marketplace-public-offerings/%s/plans/%s/" % (offering, plan))
            if params["limits"]:
                request["limits"] = params["limits"]
            if params["request_comment"]:
                request["request_comment"] = params["request_comment"]
            path = "marketplace-orders/"
            current_resource = None
        else:
            resource_uuid = module.uuid_param(params["resource"], "resource")
            try:
                current_resource = client.get(resource_path(resource_uuid)) or {}
            except WaldurApiError as exc:
                if not (exc.not_found and state == "absent"):
                    raise
                module.exit_json(changed=False, order=None, order_uuid=None, resource=None,
                                 msg="resource %s does not exist; nothing to terminate" % resource_uuid)
            if state == "updated":
                if limits_cover(params["limits"], current_resource.get("limits")):
                    module.exit_json(changed=False, order=None, order_uuid=None, resource=current_resource,
                                     msg="the resource already has these limits")
                request = {"limits": params["limits"]}
                if params["request_comment"]:
                    request["request_comment"] = params["request_comment"]
                path = resource_path(resource_uuid, "update_limits")
            else:
                if current_resource.get("state") == "Terminated":
                    module.exit_json(changed=False, order=None, order_uuid=None, resource=current_resource,
                                     msg="resource %s is already terminated" % resource_uuid)
                if current_resource.get("state") == "Terminating":
                    module.exit_json(changed=False, order=None, order_uuid=None, resource=current_resource,
                                     msg="resource %s is already being terminated" % resource_uuid)
                request = {"attributes": params["attributes"]} if params["attributes"] else {}
                path = resource_path(resource_uuid, "terminate")

        if module.check_mode:
            module.exit_json(changed=True, order=None, order_uuid=None, resource=current_resource, request=request,
                             msg="check mode: the order would be submitted")

        # Creating an order is not idempotent: never resend it after a reply that may have been lost.
        response = client.post(path, json=request, idempotent=False)
        order_uuid = hex_uuid(response.get("uuid") or response.get("order_uuid"))
        if not order_uuid:
            module.fail_json(msg="Waldur accepted the order but returned no order UUID", request=request)
        order = response if response.get("state") else None
        if not params["wait"]:
            if order is None:
                order = client.get(order_path(order_uuid))
            module.exit_json(changed=True, order=order, order_uuid=order_uuid, resource=None, request=request,
                             msg="order %s submitted (%s)" % (order_uuid, order.get("state")))
        order = wait_for(module, client, order_uuid, params["wait_timeout"], params["interval"])
        resource = None
        resource_uuid = order.get("marketplace_resource_uuid")
        if resource_uuid:
            try:
                resource = client.get(resource_path(resource_uuid))
            except WaldurApiError as exc:
                if not exc.not_found:
                    raise
        module.exit_json(changed=True, order=order, order_uuid=order_uuid, resource=resource, request=request,
                         msg="order %s is done" % order_uuid)
    except WaldurApiError as exc:
        module.fail_from_error(exc)


if __name__ == "__main__":
    main()
