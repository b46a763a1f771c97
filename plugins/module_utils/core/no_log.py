# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The values a result must never show: those of the options declared ``no_log``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.text.converters import to_text


def no_log_values(argument_spec, params):
    """The values of every ``no_log`` option in ``params`` (suboptions too), as AnsibleModule
    removes them from a result."""
    found = set()
    for name, spec in (argument_spec or {}).items():
        value = (params or {}).get(name)
        if value is None:
            continue
        if spec.get("no_log"):
            if isinstance(value, dict):
                found.update(to_text(entry) for entry in value.values() if entry not in (None, ""))
            elif isinstance(value, (list, tuple)):
                found.update(to_text(entry) for entry in value if entry not in (None, ""))
            elif value != "":
                found.add(to_text(value))
        if spec.get("options"):
            for entry in value if isinstance(value, list) else [value]:
                if isinstance(entry, dict):
                    found |= no_log_values(spec["options"], entry)
    return found
