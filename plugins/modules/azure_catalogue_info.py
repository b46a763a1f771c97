#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: azure_catalogue_info
short_description: Check the machines orders ask for against Azure's catalogue before approval
version_added: 1.0.0
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
  - The quota - when a pending machine passed the catalogue, the module reads, for each location of the machines,
    the subscription's vCPU quotas (Usage - List, C(GET /subscriptions/{id}/providers/Microsoft.Compute/locations/{location}/usages))
    and the VM sizes' families (Resource Skus - List, C(GET /subscriptions/{id}/providers/Microsoft.Compute/skus) for
    the location; a size's C(family), such as C(standardBSFamily), names its vCPU quota). A machine needs its
    size's vCPUs (C(numberOfCores) of the VM sizes listing) in its family's quota and in the regional total
    (C(cores)). The machines of executing orders (O(machines[].executing)) are counted first and never held; then
    each pending machine, in the order its order was placed (the C(created) of O(listed_orders)), is approved if
    it fits in what is left, else returned in RV(held) with a line naming each quota it would exceed, its use
    and the need. The order pass leaves those orders C(pending-provider) (C(waldur_orders)
    O(waldur.site_agent.waldur_orders#module:hold)) and ends with exit status 4. Azure machines are not resized,
    so Update orders are never judged here.
  - When the quotas or the families cannot be read, or prove nothing (an HTML page, no regional total, a size
    without a family or a family without a quota), the module fails saying so, and the order pass approves
    nothing.
  - With O(headroom_only), only the quotas of O(default_location) are read (and the family of O(default_size)),
    for C(health) - RV(headroom).
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
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
  listed_orders:
    description:
      - The orders of M(waldur.site_agent.waldur_orders) with O(waldur.site_agent.waldur_orders#module:state=listed)
        (a list, or packed as one JSON text), for their C(created) - the room under the quotas goes to the pending
        orders in the order they were placed, oldest first. Without it, in the order of O(machines).
    type: raw
  headroom_only:
    description:
      - Read only the vCPU quotas of O(default_location) (and, with O(default_size), the size's family) and return
        RV(headroom); no catalogue, no verdicts. Nothing is read without O(default_location).
    type: bool
    default: false
notes:
  - The catalogue is read once per run, so once per pass and offering; nothing is read when O(machines) is empty.
  - The quotas are read once per run and location, and only when a pending machine passed the catalogue.
  - The family of a VM size is the one ARM's Resource Skus give it (C(family)); the same names are the quotas of
    the Usage listing.
"""

EXAMPLES = r"""
- name: Check what the pending orders name against Azure's catalogue
  waldur.site_agent.azure_catalogue_info:
    machines_packed: "{{ listed.orders_packed | waldur.site_agent.catalogue_items(backend_settings, 'azure') }}"
    default_location: "{{ backend_settings.default_location | default(omit) }}"
    default_size: "{{ backend_settings.default_size | default(omit) }}"
    default_image: "{{ backend_settings.default_image | default(omit) }}"
    listed_orders: "{{ listed.orders_packed }}"
  register: catalogue

- name: The vCPU headroom of the offering's default location
  waldur.site_agent.azure_catalogue_info:
    headroom_only: true
    default_location: westeurope
    default_size: Standard_B2s
  register: quota
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
held:
  description:
    - The pending machines that do not fit in their location's vCPU quotas, one per order, in the order the orders
      were placed; their orders are left C(pending-provider) for a later pass.
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
      description: Each quota the machine would exceed, its use and what the order needs.
      type: str
  sample:
    - order_uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
      resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      resource_name: web-3
      msg: "Azure's standardBSFamily vCPU quota in westeurope is 4 and 4 are in use; this order's Standard_B2s needs
        2 vCPUs more; left pending-provider (raise the quota, or free vCPUs in westeurope)"
quota:
  description:
    - Per location read, each vCPU quota by its name (C(cores), the regional total, and the families) with its
      C(limit) and how many are C(used); empty when nothing was read.
  returned: success
  type: dict
  sample: {westeurope: {cores: {limit: 10, used: 8}, standardBSFamily: {limit: 10, used: 4}}}
headroom:
  description: With O(headroom_only), the vCPUs of O(default_location) in use of the quota, and of the family of
    O(default_size); empty when nothing was read.
  returned: success
  type: str
  sample: "vCPUs westeurope: 8 of 10 (standardBSFamily 4 of 10)"
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
    REGIONAL,
    headroom,
    machine_problem,
    quota_holds,
    read_catalogue,
    read_quota,
    settings_problems,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import (
    azure_argument_spec,
    clients_from_module,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import normalize_location
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import Unproven
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import list_option, unpack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import by_placement

MACHINE_OPTIONS = dict(
    order_uuid=dict(type="str", required=True),
    resource_uuid=dict(type="str"),
    resource_name=dict(type="str"),
    location=dict(type="str"),
    size=dict(type="str"),
    image=dict(type="raw"),
    executing=dict(type="bool", default=False),
)


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = azure_argument_spec()
    argument_spec.update(
        machines=dict(type="list", elements="dict", options=MACHINE_OPTIONS),
        machines_packed=dict(type="raw"),
        default_location=dict(type="str"),
        default_size=dict(type="str"),
        default_image=dict(type="raw"),
        listed_orders=dict(type="raw"),
        headroom_only=dict(type="bool", default=False),
    )
    module = build(argument_spec=argument_spec, supports_check_mode=True,
                   mutually_exclusive=[("machines", "machines_packed")])
    params = module.params
    if params["headroom_only"]:
        show_headroom(module)
    machines = list_option(module, "machines", MACHINE_OPTIONS)
    try:
        listed_orders = unpack(params["listed_orders"], "listed_orders")
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    if not machines:
        module.exit_json(changed=False, verdicts=[], held=[], quota={}, judged=0, catalogue={}, api_calls=0)
    clients = clients_from_module(module)
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
    rejected = set(verdict["order_uuid"] for verdict in verdicts)
    wanted = [machine for machine in machines if machine["order_uuid"] not in rejected]
    held, quota = [], {}
    if any(not machine["executing"] for machine in wanted):
        try:
            quota = read_quota(clients, [machine.get("location") for machine in wanted])
            held = quota_holds(by_placement(machines, listed_orders), catalogue, quota, rejected)
        except (AzureError, Unproven) as error:
            module.fail_json(msg="Azure's vCPU quotas could not be read, so no order is approved: %s" % error,
                             api_calls=clients.api_calls)
    module.exit_json(changed=False, verdicts=verdicts, held=held, quota=quota_numbers(quota), judged=len(machines),
                     catalogue={"locations": len(catalogue["locations"]), "sizes": len(catalogue["sizes"]),
                                "images": len(catalogue["images"])},
                     api_calls=clients.api_calls)


def quota_numbers(quota):
    """``{location: {quota name: {limit, used}}}`` of the vCPU quotas ``read_quota`` read (the regional total
    and the families; ARM lists other quotas beside them, such as availability sets)."""
    return dict((location, dict((usage["name"], {"limit": usage["limit"], "used": usage["used"]})
                                for key, usage in read["usages"].items()
                                if key == REGIONAL or key.endswith("family")))
                for location, read in quota.items())


def show_headroom(module):
    """O(headroom_only): the vCPU quotas of the default location (and the default size's family)."""
    params = module.params
    location = normalize_location(params["default_location"] or "")
    if not location:
        module.exit_json(changed=False, headroom="", quota={}, api_calls=0)
    clients = clients_from_module(module)
    try:
        quota = read_quota(clients, [location], with_families=bool(params["default_size"]))
    except (AzureError, Unproven) as error:
        module.fail_json(msg="Azure's vCPU quotas could not be read: %s" % error, api_calls=clients.api_calls)
    module.exit_json(changed=False, headroom=headroom(location, quota, params["default_size"]),
                     quota=quota_numbers(quota), api_calls=clients.api_calls)


if __name__ == "__main__":
    main()
