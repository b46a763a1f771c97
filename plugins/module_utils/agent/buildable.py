# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Can an offering build a machine at all? What a create needs, and where it may come from.

A Create order builds a droplet from a region, an image and a size (a virtual machine from a
location, a size and an image). Each comes from the resource's attributes, which the customer
fills in through the offering's order form in Waldur, else from a ``backend_settings`` default.
When neither can supply one, every Create order of the offering would fail, and the failure
would be the customer's order going erred for what is the provider's settings. So the pass
checks this before it approves anything, and so do ``health`` and ``diagnostics``.

``CREATE_INPUTS`` says where each input comes from; ``filter/backend_items.py`` reads the
same attributes (tests/unit/plugins/module_utils/test_buildable.py holds the two together).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# backend -> ((input, the backend_settings keys that can supply it, the attributes that can carry it), ...)
CREATE_INPUTS = {
    "digitalocean": (
        ("region", ("default_region",), ("backend_region_id", "region")),
        ("image", ("default_image",), ("backend_image_id", "image")),
        ("size", ("default_size", "size_mapping"), ("backend_size_id", "size", "size_slug")),
    ),
    "azure": (
        ("location", ("default_location",), ("location",)),
        ("size", ("default_size",), ("size",)),
        ("image", ("default_image",), ("image",)),
    ),
}
MACHINE = {"digitalocean": "droplet", "azure": "virtual machine"}


def attribute_names(backend_type, wanted):
    """The resource attributes that carry ``wanted`` (``region``, ``image`` ...) for the backend."""
    for name, _settings, attributes in CREATE_INPUTS[backend_type]:
        if name == wanted:
            return attributes
    raise KeyError(wanted)


def order_form_fields(order_form):
    """The field names of an offering's order form: Waldur's ``options`` of the offering
    (``{"order": [names], "options": {name: field}}``) or a list of names. None when unknown."""
    if order_form is None:
        return None
    if isinstance(order_form, (list, tuple)):
        return frozenset(str(name) for name in order_form)
    if isinstance(order_form, dict):
        fields = order_form.get("options")
        names = set(fields) if isinstance(fields, dict) else set()
        order = order_form.get("order")
        names.update(str(name) for name in (order if isinstance(order, list) else []))
        return frozenset(names)
    return None


def _set(value):
    if isinstance(value, str):
        return bool(value.strip())
    return bool(value)


def create_gaps(backend_type, settings, order_form):
    """What no Create order of the offering could be built without: one line per missing input,
    naming the ``backend_settings`` key to set. Empty when every input has a source, and when the
    order form is unknown (``order_form`` None: nothing to judge by)."""
    fields = order_form_fields(order_form)
    backend_type = str(backend_type or "").strip().lower()
    if fields is None or backend_type not in CREATE_INPUTS:
        return []
    settings = settings if isinstance(settings, dict) else {}
    gaps = []
    for name, keys, attributes in CREATE_INPUTS[backend_type]:
        if any(_set(settings.get(key)) for key in keys) or fields.intersection(attributes):
            continue
        gaps.append("backend_settings.%s is not set and the offering's order form in Waldur has no %s field (%s): "
                    "no Create order could name the %s of its %s; set backend_settings.%s%s"
                    % (keys[0], name, " or ".join(attributes), name, MACHINE[backend_type], keys[0],
                       " (or size_mapping)" if len(keys) > 1 else ""))
    return gaps
