#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_resources_info
short_description: List the provider resources of a Waldur offering
version_added: 1.0.0
description:
  - Lists the marketplace resources of an offering as its service provider sees them
    (C(/api/marketplace-provider-resources/), all pages), in the shape the other modules and filters
    of the collection use.
  - The first task of the report and membership passes.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.waldur
  - waldur.site_agent.packed
  - waldur.site_agent.attributes.read_only
options:
  offering_uuid:
    description:
      - UUID of the Waldur offering.
    type: str
    required: true
  states:
    description:
      - Resource states to return (Waldur's names, for example C(OK), C(Erred), C(Creating),
        C(Updating), C(Terminating), C(Terminated)).
    type: list
    elements: str
    default: [OK, Erred]
  resource_uuids:
    description:
      - Only these resources (read one by one instead of listing the offering). Resources of another
        offering, in another state or not found are left out and named in RV(missing), and so are those
        whose read proves nothing (a 404 that is not Waldur's own JSON not-found, an HTML page), with a
        warning.
    type: list
    elements: str
  with_backend_id_only:
    description:
      - Leave out resources that have no backend id yet (nothing exists on the backend for them).
    type: bool
    default: false
  fields:
    description:
      - Only these keys of each resource (any of those under RV(resources)); C(uuid) is always there.
      - Waldur is asked for these fields only (C(field=)), so less is sent and less is taken in.
        The report and membership passes name what they read. At 10,000 resources the whole
        resources are most of what Ansible spends outside the modules.
      - Default is every key.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Resources to meter
  waldur.site_agent.waldur_resources_info:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: d0000000000000000000000000000001
    with_backend_id_only: true
  register: waldur_resources

- name: One resource named by an event, in any live state
  waldur.site_agent.waldur_resources_info:
    offering_uuid: d0000000000000000000000000000001
    resource_uuids:
      - 7b1e0c9d-8a7f-4e3d-2c1b-0a9f8e7d6c5b
    states: [OK, Erred, Updating]

- name: Only what the power states need
  waldur.site_agent.waldur_resources_info:
    offering_uuid: d0000000000000000000000000000001
    with_backend_id_only: true
    fields: [name, state, backend_id, paused, downscaled]

- name: Thousands of resources, handed to the next task as one JSON text (as the passes do)
  waldur.site_agent.waldur_resources_info:
    offering_uuid: d0000000000000000000000000000001
    with_backend_id_only: true
    packed: true
  register: waldur_resources
  # then waldur_resources.resources_packed | waldur.site_agent.droplet_membership_items, and
  # waldur_resources.count for how many there are
"""

RETURN = r"""
resources_packed:
  description: RV(resources) packed, as one JSON text of the same resources.
  returned: when O(packed) is true
  type: str
  sample: '[{"uuid": "7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b", "name": "web-1", "state": "OK", "backend_id": "412345678"}]'
resources:
  description: The resources, in Waldur's listing order (or the order of O(resource_uuids)).
  returned: unless O(packed) is true
  type: list
  elements: dict
  contains:
    uuid:
      description: Resource UUID (32 hex).
      type: str
    name:
      description: Resource name.
      type: str
    slug:
      description: Resource slug.
      type: str
    state:
      description: Waldur resource state.
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
    options:
      description: Resource options.
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
    project_uuid:
      description: Project UUID.
      type: str
    project_slug:
      description: Project slug.
      type: str
    customer_uuid:
      description: Customer UUID.
      type: str
    customer_slug:
      description: Customer slug.
      type: str
    offering_uuid:
      description: Offering UUID.
      type: str
    plan_uuid:
      description: Plan UUID, or null.
      type: str
    offering_plugin_options:
      description: Plugin options of the offering.
      type: dict
  sample:
    - uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      name: web-1
      slug: web-1
      state: OK
      backend_id: "412345678"
      limits: {cpu: 2, ram: 2048, disk: 51200}
      paused: false
      downscaled: false
      backend_metadata: {status: active, region: ams3}
missing:
  description: Requested O(resource_uuids) that were not found or did not match O(states) or the offering.
  returned: when O(resource_uuids) is given
  type: list
  elements: dict
  contains:
    uuid:
      description: The resource UUID as asked for.
      type: str
    msg:
      description: Why it was left out.
      type: str
    answer:
      description: "What Waldur answered, in one word or a few (C(not found) for Waldur's own 404, the resource's
        state, C(resource of offering <uuid>), or C(unproven: <why>) when the answer proves nothing - a 404 that is
        not Waldur's JSON, an HTML page, another resource); the audit's cleanup takes only C(not found) and
        C(Terminated) as evidence."
      type: str
  sample:
    - uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      msg: resource is Terminated, not one of OK, Erred
      answer: Terminated
count:
  description: Number of resources returned.
  returned: always
  type: int
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import run_batch
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import pack
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import (
    RESOURCE_KEYS,
    normalize_resource,
    provider_resource_path,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule


# what the module itself reads of each resource, whatever fields are asked for
CHECKED_KEYS = ("uuid", "state", "backend_id", "offering_uuid")


def requested_fields(module):
    """The keys to return (None: all) from O(fields), or fail naming the one that is not a key."""
    fields = module.params["fields"]
    if fields is None:
        return None
    for index, field in enumerate(fields):
        if field not in RESOURCE_KEYS:
            module.fail_json(msg="fields[%d]: %r is not a resource key; expected some of %s"
                             % (index, field, ", ".join(RESOURCE_KEYS)))
    return ["uuid"] + [key for key in RESOURCE_KEYS if key in fields and key != "uuid"]


def field_params(fields):
    """``field=`` query parameters asking Waldur for ``fields`` and what the module checks."""
    if fields is None:
        return {}
    return {"field": [key for key in RESOURCE_KEYS if key in fields or key in CHECKED_KEYS]}


def unproven(uuid, why):
    """A direct read whose answer proves nothing about the resource: left out, never taken for
    "not found" (the audit keeps what it would act on)."""
    return {"missing": {"uuid": uuid, "msg": "could not be proven: %s" % why, "answer": "unproven: %s" % why}}


def read_one(client, uuid, offering_uuid, states, fields=None):
    try:
        resource = normalize_resource(client.get(provider_resource_path(uuid), params=field_params(fields)))
    except WaldurApiError as exc:
        if exc.not_found:  # Waldur's own JSON 404: the resource does not exist
            return {"missing": {"uuid": uuid, "msg": "resource not found", "answer": "not found"}}
        if exc.unproven or exc.status == 404:
            # an HTML or empty 404 (a proxy's, a wrong api_url) or a 2xx that is not the resource
            return unproven(uuid, exc)
        raise
    if resource["uuid"] != uuid:
        return unproven(uuid, "Waldur answered the read of resource %s with resource %s" % (uuid, resource["uuid"]))
    if resource["offering_uuid"] and resource["offering_uuid"] != offering_uuid:
        return {"missing": {"uuid": uuid, "msg": "resource belongs to offering %s" % resource["offering_uuid"],
                            "answer": "resource of offering %s" % resource["offering_uuid"]}}
    if resource["state"] not in states:
        return {"missing": {"uuid": uuid, "msg": "resource is %s, not one of %s"
                            % (resource["state"], ", ".join(states)), "answer": resource["state"]}}
    return {"resource": resource}


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = dict(
        offering_uuid=dict(type="str", required=True),
        states=dict(type="list", elements="str", default=["OK", "Erred"]),
        resource_uuids=dict(type="list", elements="str"),
        with_backend_id_only=dict(type="bool", default=False),
        fields=dict(type="list", elements="str"),
        packed=dict(type="bool", default=False),
    )
    module = WaldurModule(build=build, argument_spec=argument_spec)
    params = module.params
    offering_uuid = module.uuid_param(params["offering_uuid"], "offering_uuid")
    states = params["states"]
    if not states:
        module.fail_json(msg="states must name at least one resource state, for example [OK, Erred]")
    fields = requested_fields(module)
    client = module.client()
    result = {}
    try:
        if params["resource_uuids"] is not None:
            uuids = [module.uuid_param(value, "resource_uuids[%d]" % index)
                     for index, value in enumerate(params["resource_uuids"])]
            reads = run_batch(uuids, lambda uuid: read_one(client, uuid, offering_uuid, states, fields))
            resources, missing = [], []
            for uuid, read in zip(uuids, reads):
                if read.get("failed"):
                    module.fail_json(msg="could not read resource %s: %s" % (uuid, read["msg"]))
                if "missing" in read:
                    missing.append(read["missing"])
                    if read["missing"]["answer"].startswith("unproven"):
                        module.warn("resource %s is left out: its read %s" % (uuid, read["missing"]["msg"]))
                else:
                    resources.append(read["resource"])
            result["missing"] = missing
        else:
            raws = client.list("marketplace-provider-resources/",
                               params=dict(field_params(fields), offering_uuid=offering_uuid, state=list(states)))
            resources, seen = [], set()
            for raw in raws:
                resource = normalize_resource(raw)
                # django-filter ignores filters it does not know, so check what came back
                if resource["uuid"] in seen or resource["state"] not in states or \
                        (resource["offering_uuid"] and resource["offering_uuid"] != offering_uuid):
                    continue
                seen.add(resource["uuid"])
                resources.append(resource)
    except WaldurApiError as exc:
        module.fail_from_error(exc, msg="could not list the resources of offering %s" % offering_uuid)
    if params["with_backend_id_only"]:
        resources = [resource for resource in resources if resource["backend_id"]]
    if fields is not None:
        resources = [dict((key, resource[key]) for key in fields) for resource in resources]
    if module.params["packed"]:
        result["resources_packed"] = pack(resources)
    else:
        result["resources"] = resources
    module.exit_json(changed=False, count=len(resources), **result)


if __name__ == "__main__":
    main()
