#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: azure_catalogue_info
short_description: Check the machines orders ask for against Azure's catalogue before approval
version_added: 0.1.0
description:
  - Reads Azure's catalogue once - the subscription's locations (C(GET /subscriptions/{id}/locations)), the VM
    sizes offered in each location the machines name (C(Microsoft.Compute/locations/{location}/vmSizes), one
    listing per location) and each distinct marketplace image once per location (Virtual Machine Images - its
    versions for C(latest), else the version asked for) - and judges each machine of O(machines) against it.
  - A machine Azure would refuse (a location the subscription does not have, a size the location does not
    offer, an image that is not a C(publisher:offer:sku:version) reference or not in the location's
    marketplace) gets a verdict in RV(verdicts) with the reason. The order pass turns its order down before
    approving it (C(waldur_orders) O(waldur.site_agent.waldur_orders#module:reject)), so the customer sees why
    and nothing is created for it.
  - The offering's own defaults (O(default_location), O(default_size), O(default_image)) naming what the
    catalogue lacks are the provider's to fix; the module then fails naming each C(backend_settings) key, and
    the order pass approves nothing.
  - When the catalogue cannot be read, the module fails saying so; nothing is judged on half a catalogue.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.azure
  - waldur.site_agent.attributes.read_only
options:
  machines:
    description:
      - The machines the orders would create (after the offering's defaults), one per order, as the filter
        C(waldur.site_agent.catalogue_items) makes them from the listed orders.
    type: list
    elements: dict
    suboptions:
      order_uuid:
        description: The order.
        type: str
        required: true
      resource_uuid:
        description: The order's resource.
        type: str
      resource_name:
        description: The resource's name, for the messages.
        type: str
      location:
        description: The location.
        type: str
      size:
        description: The VM size.
        type: str
      image:
        description: The image, C(publisher:offer:sku:version) or a mapping of the four.
        type: raw
      executing:
        description: The order is already executing (it cannot be rejected any more, only erred).
        type: bool
        default: false
  machines_packed:
    description: O(machines) packed, as one JSON text of the same items; at most one of the two is given.
    type: raw
  default_location:
    description: The offering's C(backend_settings.default_location), checked as the provider's setting.
    type: str
  default_size:
    description: The offering's C(backend_settings.default_size), checked as the provider's setting.
    type: str
  default_image:
    description: The offering's C(backend_settings.default_image), checked as the provider's setting.
    type: raw
notes:
  - The catalogue is read once per run, so once per pass and offering; nothing is read when O(machines) is empty.
"""

EXAMPLES = r"""
- name: Check what the pending orders name against Azure's catalogue
  waldur.site_agent.azure_catalogue_info:
    machines_packed: "{{ listed.orders_packed | waldur.site_agent.catalogue_items(backend_settings, 'azure') }}"
    default_location: "{{ backend_settings.default_location | default(omit) }}"
    default_size: "{{ backend_settings.default_size | default(omit) }}"
    default_image: "{{ backend_settings.default_image | default(omit) }}"
  register: catalogue
"""

RETURN = r"""
verdicts:
  description: The machines Azure would refuse, one per order, in the order of O(machines).
  returned: success
  type: list
  elements: dict
  contains:
    order_uuid:
      description: The order.
      type: str
    resource_uuid:
      description: The order's resource.
      type: str
    resource_name:
      description: The resource's name.
      type: str
    msg:
      description: Why, naming what the catalogue lacks.
      type: str
  sample:
    - order_uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
      resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      resource_name: web-1
      msg: "Azure would refuse this machine: size 'Standard_E2s_v3' is not offered in location 'northeurope' (...)"
judged:
  description: How many machines were judged.
  returned: success
  type: int
  sample: 2
catalogue:
  description: How many locations were read, and in how many of them sizes and images were read.
  returned: success
  type: dict
  sample: {locations: 60, sizes: 2, images: 2}
api_calls:
  description: ARM requests sent, retries included.
  returned: always
  type: int
  sample: 4
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.catalogue import (
    machine_problem,
    read_catalogue,
    settings_problems,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import (
    AzureError,
    azure_argument_spec,
    clients_from_module,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import list_option

MACHINE_OPTIONS = dict(
    order_uuid=dict(type="str", required=True),
    resource_uuid=dict(type="str"),
    resource_name=dict(type="str"),
    location=dict(type="str"),
    size=dict(type="str"),
    image=dict(type="raw"),
    executing=dict(type="bool", default=False),
)


def main():
    argument_spec = azure_argument_spec()
    argument_spec.update(
        machines=dict(type="list", elements="dict", options=MACHINE_OPTIONS),
        machines_packed=dict(type="raw"),
        default_location=dict(type="str"),
        default_size=dict(type="str"),
        default_image=dict(type="raw"),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           mutually_exclusive=[("machines", "machines_packed")])
    machines = list_option(module, "machines", MACHINE_OPTIONS)
    if not machines:
        module.exit_json(changed=False, verdicts=[], judged=0, catalogue={}, api_calls=0)
    clients = clients_from_module(module)
    params = module.params
    defaults = dict((key, params[key]) for key in ("default_location", "default_size", "default_image"))
    wanted = list(machines)
    if defaults["default_location"]:
        wanted.append({"location": defaults["default_location"], "size": defaults["default_size"],
                       "image": defaults["default_image"]})
    try:
        catalogue = read_catalogue(clients, wanted)
    except AzureError as error:
        module.fail_json(msg="Azure's catalogue could not be read, so no order is approved: %s" % error,
                         api_calls=clients.api_calls)
    problems = settings_problems(defaults, catalogue)
    if problems:
        module.fail_json(msg="the offering's settings name what Azure does not have, so no order is approved "
                             "(the provider's to fix): %s" % "; ".join(problems), api_calls=clients.api_calls)
    verdicts = []
    for machine in machines:
        problem = machine_problem(machine.get("location"), machine.get("size"), machine.get("image"), catalogue)
        if problem:
            verdicts.append({"order_uuid": machine["order_uuid"], "resource_uuid": machine.get("resource_uuid"),
                             "resource_name": machine.get("resource_name") or "",
                             "msg": "Azure would refuse this machine: %s" % problem})
    module.exit_json(changed=False, verdicts=verdicts, judged=len(machines),
                     catalogue={"locations": len(catalogue["locations"]), "sizes": len(catalogue["sizes"]),
                                "images": len(catalogue["images"])},
                     api_calls=clients.api_calls)


if __name__ == "__main__":
    main()
