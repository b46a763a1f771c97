#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_offering_info
short_description: Check that a Waldur offering exists and is provided by the token's organisation
version_added: 1.0.0
description:
  - One read of the offering as its service provider sees it
    (C(/api/marketplace-provider-offerings/<uuid>/)). Waldur shows there only the offerings of the
    organisations the token's user may manage, so the read proves both that the offering exists and
    that it belongs to this token's provider.
  - The first step of every pass (C(waldur.site_agent.agent_pass)). A wrong C(waldur_offering_uuid) or
    a token of another provider fails the offering with one line naming the UUID, instead of a pass
    that finds no orders and no resources and stays green.
  - When the read fails otherwise than by a rejected token or a transient failure (a 404, an HTML page,
    JSON of another shape), one read of C(users/me/) tells a Waldur that does not show the offering
    from a URL that is not the Waldur API (another service, a web site, a wrong path). The latter fails
    naming C(waldur_api_url) and what answered, not the offering UUID and the token.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.waldur
  - waldur.site_agent.attributes.read_only
options:
  offering_uuid:
    description:
      - UUID of the Waldur offering (dashed or not).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Check the offering before the pass
  waldur.site_agent.waldur_offering_info:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: d0000000000000000000000000000001
  register: offering
"""

RETURN = r"""
offering:
  description:
    - The offering - C(uuid) (32 hex), C(name), C(type), C(state), C(customer_uuid), C(customer_name).
    - C(order_form) is the sorted field names of the offering's order form (Waldur's C(options)),
      the attributes a customer's order can carry. The order pass checks with
      P(waldur.site_agent.create_gaps#filter) that every create input has a source.
  returned: success
  type: dict
  sample:
    uuid: d0000000000000000000000000000001
    name: DigitalOcean droplets
    type: Marketplace.Slurm
    state: Active
    customer_uuid: b0000000000000000000000000000001
    customer_name: Provider Org
    order_form: [image, region]
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
  sample: {reads: 1, writes: 0, retries: 0}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.buildable import order_form_fields
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import hex_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.errors import not_waldur
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import provider_offering_path
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule

FIELDS = ["uuid", "name", "type", "state", "customer_uuid", "customer_name"]


def _wrong_url(module, why):
    return ("waldur_api_url %s does not answer as the Waldur API: %s; set waldur_api_url to the API root of Waldur "
            "(for example https://waldur.example.com/api/)" % (module.params["api_url"], why))


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    module = WaldurModule(build=build, argument_spec=dict(offering_uuid=dict(type="str", required=True)))
    offering_uuid = module.uuid_param(module.params["offering_uuid"], "offering_uuid")
    client = module.client(pool_size=1)
    try:
        raw = client.get(provider_offering_path(offering_uuid), params={"field": FIELDS + ["options"]}) or {}
    except WaldurApiError as exc:
        stranger = None if exc.status == 401 or exc.transient else not_waldur(client)
        if stranger:
            module.fail_json(msg="offering %s could not be read, and %s" % (offering_uuid, _wrong_url(module, stranger)),
                             status=exc.status)
        if exc.status in (403, 404):
            module.fail_json(msg="offering %s: Waldur shows no such offering to this token (HTTP %s); check "
                                 "waldur_offering_uuid, and that waldur_api_token belongs to a manager of the "
                                 "organisation providing it" % (offering_uuid, exc.status), status=exc.status)
        if exc.status == 401:
            module.fail_json(msg="offering %s: Waldur rejected waldur_api_token (HTTP 401: %s)"
                                 % (offering_uuid, exc.message), status=exc.status)
        module.fail_from_error(exc, msg="offering %s: could not be read" % offering_uuid)
    if not raw.get("uuid"):
        # JSON, but not an offering: another service's answer, or a Waldur that answers oddly
        stranger = not_waldur(client)
        module.fail_json(msg="offering %s: Waldur GET %s answered JSON without the offering's uuid%s" % (
            offering_uuid, client.api_path(provider_offering_path(offering_uuid)),
            "; " + _wrong_url(module, stranger) if stranger else ""))
    offering = dict((key, raw.get(key)) for key in FIELDS)
    offering["uuid"] = hex_uuid(offering["uuid"]) or offering_uuid
    offering["customer_uuid"] = hex_uuid(offering["customer_uuid"])
    form = order_form_fields(raw.get("options"))
    offering["order_form"] = sorted(form) if form is not None else None
    if offering["uuid"] != offering_uuid:
        module.fail_json(msg="offering %s: Waldur answered with offering %s" % (offering_uuid, offering["uuid"]))
    module.exit_json(changed=False, offering=offering)


if __name__ == "__main__":
    main()
