#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: do_droplet_info
short_description: Facts of many DigitalOcean droplets at once
version_added: 1.0.0
description:
  - Looks up droplets by id and returns their facts and the backend metadata Waldur stores, in the order
    of O(backend_ids).
  - Reads the account's droplets page by page (200 per page) instead of one request per droplet; ids
    the listing did not show are confirmed with a direct read before they are reported missing, and
    a few ids in a large account are read directly.
author:
  - Waldur site agent developers (@waldur)
options:
  backend_ids:
    description:
      - Droplet ids (as Waldur stores them in C(backend_id)). Empty entries are skipped.
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.digitalocean
  - waldur.site_agent.attributes.read_only
"""

EXAMPLES = r"""
- name: Read the droplets of the offering's resources
  waldur.site_agent.do_droplet_info:
    token: "{{ digitalocean_token }}"
    backend_ids: "{{ resources | map(attribute='backend_id') | select | list }}"
  register: droplets

- name: Show the droplets that no longer exist
  ansible.builtin.debug:
    var: droplets.missing
"""

RETURN = r"""
droplets:
  description: One entry per id of O(backend_ids), in the same order.
  returned: always
  type: list
  elements: dict
  contains:
    backend_id:
      description: The id as given.
      type: str
      sample: "3164444"
    found:
      description: Whether the droplet exists.
      type: bool
    msg:
      description: Why the droplet was not found.
      type: str
      returned: when not found
    bad_backend_id:
      description: True when the backend id is not a droplet id (not a number); the report would count such a
        resource failed instead of leaving its usage out.
      type: bool
      returned: when true
    id:
      description: Droplet id.
      type: int
      returned: when found
    name:
      description: Droplet name.
      type: str
      returned: when found
    status:
      description: C(new), C(active), C(off) or C(archive).
      type: str
      returned: when found
    region:
      description: Region slug.
      type: str
      returned: when found
    size_slug:
      description: Size slug.
      type: str
      returned: when found
    image:
      description: Image slug (or name, or id).
      type: str
      returned: when found
    vcpus:
      description: Virtual CPUs.
      type: int
      returned: when found
    memory:
      description: Memory in MiB.
      type: int
      returned: when found
    disk:
      description: Disk in GB.
      type: int
      returned: when found
    networks:
      description: Addresses, C(public_ipv4), C(private_ipv4) and C(public_ipv6) (null when none).
      type: dict
      returned: when found
    tags:
      description: The droplet's tags.
      type: list
      elements: str
      returned: when found
    created_at:
      description: Creation time (ISO 8601).
      type: str
      returned: when found
    backend_metadata:
      description: What Waldur stores as the resource's backend metadata; null when not found.
      type: dict
missing:
  description: The ids of O(backend_ids) with no droplet.
  returned: always
  type: list
  elements: str
  sample: ["3164450"]
api_calls:
  description: HTTP requests sent to DigitalOcean, retries included.
  returned: always
  type: int
  sample: 3
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import client_from_module, digitalocean_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import backend_metadata


def droplet_entries(backend_ids, found):
    """``(droplets, missing)`` in the order of ``backend_ids`` from ``{int id: facts or None}``."""
    droplets, missing = [], []
    for backend_id in backend_ids:
        facts = found.get(int(backend_id)) if backend_id.isdigit() else None
        if not facts:  # proven absent (DigitalOcean's own not_found), or not a droplet id
            missing.append(backend_id)
            reason = "no droplet %s" % backend_id if backend_id.isdigit() else "not a DigitalOcean droplet id"
            droplets.append({"backend_id": backend_id, "found": False, "msg": reason, "backend_metadata": None})
            if not backend_id.isdigit():
                droplets[-1]["bad_backend_id"] = True
            continue
        entry = dict(facts)
        entry.update(backend_id=backend_id, found=True, backend_metadata=backend_metadata(facts))
        droplets.append(entry)
    return droplets, missing


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = digitalocean_argument_spec()
    argument_spec.update(backend_ids=dict(type="list", elements="str", required=True))
    module = build(argument_spec=argument_spec, supports_check_mode=True)
    backend_ids = [str(value).strip() for value in module.params["backend_ids"] if str(value or "").strip()]
    client = client_from_module(module)
    try:
        found = client.find_droplets(sorted(set(int(value) for value in backend_ids if value.isdigit())))
    except DigitalOceanError as exc:
        module.fail_json(msg=str(exc), api_calls=client.api_calls)
    droplets, missing = droplet_entries(backend_ids, found)
    module.exit_json(changed=False, droplets=droplets, missing=missing, api_calls=client.api_calls)


if __name__ == "__main__":
    main()
