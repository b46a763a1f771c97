# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Packed lists: a list of items handed between the tasks of a pass as one JSON text.

Ansible takes in a module's result, and templates a task's arguments, value by value: a list
of 10,000 resources (or results, or usage rows) cost it seconds at every task it crossed,
most of a large pass's time outside the modules. The same list as one string costs it next
to nothing. So the batch modules can return their list as ``<name>_packed`` (option
``packed``), take their list as ``<name>_packed`` instead of ``<name>``, and the collection's
filters take a packed list wherever they take a list (and answer packed when given packed).
The items are the same either way; only their wrapping differs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.waldur.site_agent.plugins.module_utils.core.no_log import no_log_values


def pack(items):
    """``items`` (a list) as compact JSON text."""
    return json.dumps(list(items), separators=(",", ":"))


def is_packed(value):
    """Whether ``value`` is a packed list (text) rather than a list."""
    return isinstance(value, (str, bytes))


def unpack(value, what="the list"):
    """The items of ``value``: a list as it is, a packed list parsed; None is an empty list.
    Anything else raises ValueError naming ``what``."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if not is_packed(value):
        raise ValueError("%s must be a list or a packed list (JSON text), got %s" % (what, type(value).__name__))
    try:
        items = json.loads(value)
    except ValueError as exc:
        raise ValueError("%s is not a packed list: %s" % (what, exc))
    if not isinstance(items, list):
        raise ValueError("%s must pack a JSON list, got %s" % (what, type(items).__name__))
    return items


def like(items, template):
    """``items`` packed when ``template`` (a filter's input) was packed, else as a list."""
    return pack(items) if is_packed(template) else items


def list_option(module, name, suboptions=None, elements="dict"):
    """The items of the module's list option ``name``, given as the list itself or as
    ``<name>_packed``; packed items are checked against the same ``suboptions`` (types, choices,
    defaults) the list would have been, and a problem fails the module naming the option."""
    packed = module.params.get(name + "_packed")
    if packed is None:
        return module.params.get(name) or []
    try:
        items = unpack(packed, name + "_packed")
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    spec = dict(type="list", elements=elements)
    if suboptions is not None:
        spec["options"] = suboptions
    result = ArgumentSpecValidator({name: spec}).validate({name: items})
    if result.error_messages:
        module.fail_json(msg="%s_packed: %s" % (name, "; ".join(result.error_messages)))
    module.no_log_values.update(no_log_values({name: spec}, result.validated_parameters))
    return result.validated_parameters[name]
