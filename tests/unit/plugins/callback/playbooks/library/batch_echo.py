# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Test module: returns its items as a batch module's per-item ``results`` (or, with
``packed``, as ``results_packed``, one JSON text, the way the collection's batch modules do),
and ``rejected_orders`` as given (the orders a claim turned down before approval)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        items=dict(type="list", elements="dict", required=True),
        warning=dict(type="str"),
        deprecation=dict(type="str"),
        fail_msg=dict(type="str"),
        packed=dict(type="bool", default=False),
        rejected_orders=dict(type="list", elements="dict"),
    ))
    if module.params["warning"]:
        module.warn(module.params["warning"])
    if module.params["deprecation"]:
        module.deprecate(module.params["deprecation"], version="2.0.0", collection_name="waldur.site_agent")
    results = module.params["items"]
    if module.params["fail_msg"]:
        module.fail_json(msg=module.params["fail_msg"], results=results)
    changed = any(item.get("changed") for item in results)
    if module.params["rejected_orders"] is not None:
        module.exit_json(changed=changed, results=results, rejected_orders=module.params["rejected_orders"])
    if module.params["packed"]:
        module.exit_json(changed=changed, results_packed=json.dumps(results), failures=[])
    module.exit_json(changed=changed, results=results)


if __name__ == "__main__":
    main()
