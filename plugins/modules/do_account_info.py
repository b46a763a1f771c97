#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: do_account_info
short_description: Prove a DigitalOcean token with one cheap read of its account
version_added: 1.0.0
description:
  - Reads the account the token belongs to (C(GET /v2/account)) and fails, with one line saying why,
    when DigitalOcean rejects the token, cannot be reached, keeps failing past O(max_retry_seconds), or
    reports the account C(locked).
  - The order pass runs it before approving any order (a probe), so that orders are approved only when
    the backend can work on them.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.digitalocean
  - waldur.site_agent.attributes.read_only
notes:
  - The account's e-mail address is not returned.
"""

EXAMPLES = r"""
- name: Prove the DigitalOcean token before approving orders
  waldur.site_agent.do_account_info:
    token: "{{ digitalocean_token }}"
    max_retry_seconds: 20
"""

RETURN = r"""
account:
  description: The account - C(uuid), C(status) (C(active), C(warning) or C(locked)), C(status_message), C(droplet_limit).
  returned: success
  type: dict
  sample: {uuid: 0d2c0a3e-6f0e-4a4a-9a8e-6e1b0c2d3e4f, status: active, status_message: "", droplet_limit: 25}
api_calls:
  description: HTTP requests sent to DigitalOcean, retries included.
  returned: always
  type: int
  sample: 1
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import client_from_module, digitalocean_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError

KEYS = ("uuid", "status", "status_message", "droplet_limit")


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    module = build(argument_spec=digitalocean_argument_spec(), supports_check_mode=True)
    client = client_from_module(module, max_connections=1)
    try:
        raw = client.account()
    except DigitalOceanError as exc:
        module.fail_json(msg="DigitalOcean cannot be worked with: %s" % exc, api_calls=client.api_calls)
    account = dict((key, raw.get(key)) for key in KEYS)
    if account["status"] == "locked":
        module.fail_json(msg="DigitalOcean cannot be worked with: the account is locked (%s)"
                             % (account["status_message"] or "no reason given"),
                         account=account, api_calls=client.api_calls)
    module.exit_json(changed=False, account=account, api_calls=client.api_calls)


if __name__ == "__main__":
    main()
