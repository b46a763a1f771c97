#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: do_catalogue_info
short_description: Check the droplets orders ask for against DigitalOcean's catalogue before approval
version_added: 1.0.0
description:
  - Reads DigitalOcean's catalogue once - every region (C(GET /v2/regions)) and size (C(GET /v2/sizes)) with
    their availability, and each distinct image the droplets and O(default_image) name (C(GET /v2/images/{id or
    slug}), which finds public images by slug or id and the account's snapshots and custom images by id) - and judges each
    droplet of O(droplets) against it - the region exists and takes new droplets, the size exists, is available
    and is offered in the region, the image exists, is available and (a snapshot or custom image) is in the
    region.
  - A droplet DigitalOcean would refuse gets a verdict in RV(verdicts) with the reason. The order pass turns
    its order down before approving it (C(waldur_orders) O(waldur.site_agent.waldur_orders#module:reject)),
    so the customer sees why and no droplet call is made for it.
  - A droplet of an order that is already executing (O(droplets[].executing)) gets a verdict only when no
    droplet carries its resource's tag (one listing by tag each) - a droplet made by an earlier, interrupted
    pass is adopted by C(do_droplet), not erred.
  - The offering's own settings (O(default_region), O(default_size), O(default_image), the sizes of
    O(size_mapping_sizes)) that name what the catalogue lacks are the provider's to fix, not a customer's
    order. The module then fails naming each C(backend_settings) key, and the order pass approves nothing.
  - When the catalogue cannot be read (DigitalOcean unreachable, 5xx past the retries, an answer that is not
    the JSON the call expects) the module fails saying so; nothing is judged on half a catalogue.
  - The quota - when a pending droplet passed the catalogue, the module reads the account's C(droplet_limit)
    (C(GET /v2/account)) and how many droplets it has (C(meta.total) of C(GET /v2/droplets?per_page=1)). Each
    droplet to create needs one more. The droplets of executing orders (O(droplets[].executing)) are counted
    first and never held; then each pending droplet, in the order its order was placed (the C(created) of
    O(listed_orders)), is approved if it fits in what is left, else returned in RV(held) with a line naming the
    limit, its use and the need. The order pass leaves those orders C(pending-provider) (C(waldur_orders)
    O(waldur.site_agent.waldur_orders#module:hold)) and ends with exit status 4. A resize needs no more droplets,
    so Update orders are never judged here.
  - When the limit or the number of droplets cannot be read (or the answer proves nothing, such as an HTML page
    or an account without C(droplet_limit)) the module fails saying so, and the order pass approves nothing.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.digitalocean
  - waldur.site_agent.attributes.read_only
options:
  droplets:
    description:
      - The droplets the orders would create (after the offering's defaults and mappings), one per order.
        The filter C(waldur.site_agent.catalogue_items) makes them from the listed orders.
    type: list
    elements: dict
    suboptions:
      order_uuid:
        description: The order.
        type: str
        required: true
      resource_uuid:
        description: The order's resource (its owner tag is looked for when O(droplets[].executing)).
        type: str
      resource_name:
        description: The resource's name, for the messages.
        type: str
      region:
        description: The region slug.
        type: str
      size:
        description: The size slug.
        type: str
      image:
        description: The image slug or id.
        type: str
      executing:
        description: The order is already executing (it cannot be rejected any more, only erred).
        type: bool
        default: false
  droplets_packed:
    description: O(droplets) packed, as one JSON text of the same items; at most one of the two is given.
    type: raw
  default_region:
    description: The offering's C(backend_settings.default_region), checked as the provider's setting.
    type: str
  default_size:
    description: The offering's C(backend_settings.default_size), checked as the provider's setting.
    type: str
  default_image:
    description: The offering's C(backend_settings.default_image), checked as the provider's setting.
    type: str
  size_mapping_sizes:
    description: The size slugs of the offering's C(backend_settings.size_mapping), checked as the provider's.
    type: list
    elements: str
    default: []
  listed_orders:
    description:
      - The orders of M(waldur.site_agent.waldur_orders) with O(waldur.site_agent.waldur_orders#module:state=listed)
        (a list, or packed as one JSON text), for their C(created) - the room under the droplet limit goes to the
        pending orders in the order they were placed, oldest first. Without it, in the order of O(droplets).
    type: raw
notes:
  - The catalogue is read once per run, so once per pass and offering; nothing is read when O(droplets) is empty.
  - The quota is read once per run, and only when a pending droplet passed the catalogue.
"""

EXAMPLES = r"""
- name: Check what the pending orders name against DigitalOcean's catalogue
  waldur.site_agent.do_catalogue_info:
    droplets_packed: "{{ listed.orders_packed | waldur.site_agent.catalogue_items(backend_settings, 'digitalocean') }}"
    default_region: "{{ backend_settings.default_region | default(omit) }}"
    default_size: "{{ backend_settings.default_size | default(omit) }}"
    default_image: "{{ backend_settings.default_image | default(omit) }}"
    listed_orders: "{{ listed.orders_packed }}"
  register: catalogue

- name: Approve the others, turn these down with the reason, leave those past the droplet limit pending
  waldur.site_agent.waldur_orders:
    offering_uuid: d0000000000000000000000000000001
    state: claimed
    reject: "{{ catalogue.verdicts }}"
    hold: "{{ catalogue.held }}"
"""

RETURN = r"""
verdicts:
  description: The droplets DigitalOcean would refuse, one per order, in the order of O(droplets).
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
      msg: "DigitalOcean would refuse this droplet: region 'xx9' is not a DigitalOcean region (regions: ams3, ...)"
held:
  description:
    - The pending droplets that do not fit in the account's droplet limit, one per order, in the order the orders
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
      description: The limit, its use and what the order needs.
      type: str
  sample:
    - order_uuid: 5f3c0a0e6d8b4f1e9a2b7c4d3e2f1a0b
      resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      resource_name: web-4
      msg: "DigitalOcean's droplet limit is 3 and 3 droplets exist; this order needs 1 more; left pending-provider
        (raise the limit, or free a droplet)"
quota:
  description:
    - The account's C(droplet_limit) and the number of C(droplets) it has, as read for the quota check; empty when
      it was not read (no pending droplet to judge).
  returned: success
  type: dict
  sample: {droplet_limit: 25, droplets: 3}
judged:
  description: How many droplets were judged.
  returned: success
  type: int
  sample: 20
catalogue:
  description: How many regions, sizes and images were read.
  returned: success
  type: dict
  sample: {regions: 14, sizes: 150, images: 2}
api_calls:
  description: HTTP requests sent to DigitalOcean, retries included.
  returned: always
  type: int
  sample: 4
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import list_option, unpack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import by_placement
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import Unproven
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.catalogue import (
    droplet_problem,
    quota_holds,
    read_catalogue,
    read_quota,
    settings_problems,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import client_from_module, digitalocean_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import resource_tag

DROPLET_OPTIONS = dict(
    order_uuid=dict(type="str", required=True),
    resource_uuid=dict(type="str"),
    resource_name=dict(type="str"),
    region=dict(type="str"),
    size=dict(type="str"),
    image=dict(type="str"),
    executing=dict(type="bool", default=False),
)


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = digitalocean_argument_spec()
    argument_spec.update(
        droplets=dict(type="list", elements="dict", options=DROPLET_OPTIONS),
        droplets_packed=dict(type="raw"),
        default_region=dict(type="str"),
        default_size=dict(type="str"),
        default_image=dict(type="str"),
        size_mapping_sizes=dict(type="list", elements="str", default=[]),
        listed_orders=dict(type="raw"),
    )
    module = build(argument_spec=argument_spec, supports_check_mode=True,
                   mutually_exclusive=[("droplets", "droplets_packed")])
    droplets = list_option(module, "droplets", DROPLET_OPTIONS)
    try:
        listed_orders = unpack(module.params["listed_orders"], "listed_orders")
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    if not droplets:
        module.exit_json(changed=False, verdicts=[], held=[], quota={}, judged=0, catalogue={}, api_calls=0)
    client = client_from_module(module, max_connections=1)
    params = module.params
    images = [droplet["image"] for droplet in droplets if droplet.get("image")]
    if params["default_image"]:
        images.append(params["default_image"])
    try:
        catalogue = read_catalogue(client, images)
    except (DigitalOceanError, Unproven) as exc:
        module.fail_json(msg="DigitalOcean's catalogue could not be read, so no order is approved: %s" % exc,
                         api_calls=client.api_calls)
    problems = settings_problems(params, params["size_mapping_sizes"], catalogue)
    if problems:
        module.fail_json(msg="the offering's settings name what DigitalOcean does not have, so no order is "
                             "approved (the provider's to fix): %s" % "; ".join(problems), api_calls=client.api_calls)
    verdicts = []
    try:
        for droplet in droplets:
            problem = droplet_problem(droplet.get("region"), droplet.get("size"), droplet.get("image"), catalogue)
            if not problem:
                continue
            if droplet["executing"] and droplet.get("resource_uuid") and client.droplets_carrying(
                    resource_tag(droplet["resource_uuid"])):
                continue  # an earlier pass made it: do_droplet adopts it
            verdicts.append({"order_uuid": droplet["order_uuid"], "resource_uuid": droplet.get("resource_uuid"),
                             "resource_name": droplet.get("resource_name") or "",
                             "msg": "DigitalOcean would refuse this droplet: %s" % problem})
    except DigitalOceanError as exc:
        module.fail_json(msg="DigitalOcean could not be read to judge the executing orders, so no order is "
                             "approved: %s" % exc, api_calls=client.api_calls)
    rejected = set(verdict["order_uuid"] for verdict in verdicts)
    held, quota = [], {}
    if any(not droplet["executing"] and droplet["order_uuid"] not in rejected for droplet in droplets):
        try:
            quota = read_quota(client)
        except (DigitalOceanError, Unproven) as exc:
            module.fail_json(msg="DigitalOcean's droplet limit could not be read, so no order is approved: %s" % exc,
                             api_calls=client.api_calls)
        held = quota_holds(by_placement(droplets, listed_orders), quota, rejected)
    module.exit_json(changed=False, verdicts=verdicts, held=held, quota=quota, judged=len(droplets),
                     catalogue=dict((key, len(catalogue[key])) for key in ("regions", "sizes", "images")),
                     api_calls=client.api_calls)


if __name__ == "__main__":
    main()
