#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: site_config
short_description: Read and validate a Waldur site agent configuration file
version_added: 1.0.0
description:
  - Reads the upstream Waldur site agent's YAML configuration (an C(offerings) list with
    C(waldur_api_url), C(waldur_api_token), C(waldur_offering_uuid), C(backend_type),
    the role backends, C(backend_settings) and C(backend_components)) and validates it
    before any call is made.
  - Every problem is reported at once, each with its key path, for example
    C(offerings[1].backend_settings.client_secret) followed by C(required).
    Values of secrets never appear in messages.
  - A value of the wrong kind is named in the words of the file - C(integer), C(number), C(string),
    C(boolean), C(list), C(mapping), C(null) - for example C(expected a number, got a string)
    followed by the value when it is a number, a flag or a short word (never a secret's). A file that
    is not valid YAML fails naming the file, the line and the column and what is wrong there, never
    quoting the line (it may hold a token).
  - Refused, besides wrong or missing keys, are an offering that has only OIDC credentials (this
    collection authenticates with C(waldur_api_token)), two offerings with one
    C(waldur_offering_uuid), and a file larger than 1 MiB or whose YAML aliases would expand it
    beyond 100000 values (checked before the file is loaded).
  - Offerings of other backends (C(backend_type) other than C(azure) and C(digitalocean), for example
    C(slurm)) are left to their own agent, named in one warning, and not returned.
  - Warnings, given once per run (by the play's first host), for unknown keys (naming the known key a
    misspelt one resembles), offerings of other backends, a token sent over plain C(http://) to a host
    other than the loopback, and a file readable by its group or other users.
  - With O(pass_role), offerings without that pass's role backend are named in a warning and left out,
    and a file where no offering has it fails (a misspelt role key must not turn the agent off).
  - Runs on the controller as an action plugin, so files encrypted with ansible-vault
    (whole file or C(!vault) values) are decrypted by Ansible.
  - Secrets missing from the file are taken from the environment, so they can come from AWX/AAP
    credentials instead - E(WALDUR_API_TOKEN) for C(waldur_api_token), E(DIGITALOCEAN_ACCESS_TOKEN)
    or E(DO_API_TOKEN) for a DigitalOcean C(token), and the E(AZURE_SUBSCRIPTION_ID),
    E(AZURE_TENANT), E(AZURE_CLIENT_ID), E(AZURE_SECRET) variables of the built-in Azure
    credential for C(subscription_id), C(tenant_id), C(client_id), C(client_secret).
    A value in the file always wins.
  - On success the result holds the offerings, secrets included, and is marked C(no_log)
    so no callback prints it. Register it and pass the values to the other modules.
author:
  - Waldur site agent developers (@waldur)
options:
  path:
    description:
      - Path of the configuration file.
      - Defaults to the environment variable E(WALDUR_SITE_AGENT_CONFIG).
    type: path
  pass_role:
    description:
      - Only return the offerings that have this pass's role backend set
        (C(order_processing_backend), C(reporting_backend) or C(membership_sync_backend); the audit
        looks at the offerings that process orders).
    type: str
    choices: [order_process, report, membership_sync, audit]
  offering:
    description:
      - Only return the offering with this name or C(waldur_offering_uuid) (dashes optional).
        The inventory plugin sets this per host.
    type: str
extends_documentation_fragment:
  - waldur.site_agent.attributes
attributes:
  check_mode:
    support: full
    details:
      - It only reads the file, so check mode changes nothing.
  diff_mode:
    support: none
notes:
  - The whole configuration is validated even when O(offering) selects one offering.
  - When O(offering) names an offering without the pass's role backend, no offering is returned (a
    warning says so) and the task does not fail.
"""

EXAMPLES = r"""
- name: Read the site agent configuration
  waldur.site_agent.site_config:
    path: /etc/waldur/waldur-site-agent-config.yaml
    pass_role: order_process
  register: site_agent

- name: Show which offerings the pass will process (names only, no secrets)
  ansible.builtin.debug:
    msg: "{{ site_agent.offerings | map(attribute='name') | list }}"
"""

RETURN = r"""
path:
  description: Absolute path of the file that was read.
  returned: success
  type: str
  sample: /etc/waldur/waldur-site-agent-config.yaml
offerings:
  description: The selected offerings, as in the file (secrets included; the result is no_log).
  returned: success
  type: list
  elements: dict
left_out:
  description: Names of the offerings left out of the pass because their role backend is not set.
  returned: success
  type: list
  elements: str
  sample: ["Azure VM"]
root:
  description: The root options of the file other than C(offerings) and C(sentry_dsn).
  returned: success
  type: dict
sentry_dsn:
  description: The C(sentry_dsn) root option, or an empty string.
  returned: success
  type: str
secrets_from_environment:
  description: The secrets taken from the environment, as C(<key path> <- <variable>) (names only).
  returned: success
  type: list
  elements: str
  sample: ["offerings[0].backend_settings.client_secret <- AZURE_SECRET"]
errors:
  description: Every problem found, each prefixed by its key path.
  returned: failure
  type: list
  elements: str
  sample: ["offerings[1].backend_settings.client_secret: required"]
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            pass_role=dict(type="str", choices=["order_process", "report", "membership_sync", "audit"]),
            offering=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    # The work happens in the action plugin of the same name on the controller.
    module.fail_json(msg="waldur.site_agent.site_config runs as an action plugin; it cannot run as a plain module")


if __name__ == "__main__":
    main()
