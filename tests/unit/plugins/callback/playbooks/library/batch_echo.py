# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Test module: returns its items as a batch module's per-item ``results``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        items=dict(type="list", elements="dict", required=True),
        warning=dict(type="str"),
        deprecation=dict(type="str"),
        fail_msg=dict(type="str"),
    ))
    if module.params["warning"]:
        module.warn(module.params["warning"])
    if module.params["deprecation"]:
        module.deprecate(module.params["deprecation"], version="2.0.0", collection_name="waldur.site_agent")
    results = module.params["items"]
    if module.params["fail_msg"]:
        module.fail_json(msg=module.params["fail_msg"], results=results)
    module.exit_json(changed=any(item.get("changed") for item in results), results=results)


if __name__ == "__main__":
    main()
