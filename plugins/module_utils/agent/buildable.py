# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Can an offering build a machine at all? The fields of its order form in Waldur.

A Create order builds a machine from what the resource's attributes carry, which the customer fills
in through the offering's order form, else from a ``backend_settings`` default. When neither can
supply an input, every Create order of the offering would fail, and the failure would be the
customer's order going erred for what is the provider's settings. So the pass checks this before it
approves anything, and so do ``health`` and ``diagnostics``: each backend of the registry says what
its Create needs (``plugin_utils/backends``, ``create_inputs`` and ``create_gaps``); the order form's
fields are read here, where ``waldur_offering_info`` reads them too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


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
