# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Filters that turn Waldur orders and resources into backend module items.

They are the "glue" step of a pass: ``waldur_orders`` (claim) returns orders joined with their
resources; ``backend_plan`` applies the offering's ``backend_settings`` through the backend's own
planning (the backend registry, ``plugin_utils/backends``) and gives its module's items; the results
go back to ``waldur_orders`` (settle). ``membership_items`` and ``catalogue_items`` do the same for
the membership pass and the check before approval. The ``droplet_*`` and ``vm_*`` filters are the
same plannings under the names of their backends.

Backend items carry desired state only. An order that cannot be carried out (``error``) or needs no
backend call (``skip``) gets no item: it is returned as a settle outcome (erred, or done with that
message), which the order pass adds to the backend's results for ``waldur_orders`` (state settled).
What the planning noted about an order it did pass on (``notes``) is said, not sent.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import like
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends.planning import (
    backend_items,
    catalogue_items,
    membership_items,
    notes_of,
    plan,
    planned_outcomes,
    registered,
)


def backend_plan(orders, backend_type, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """Claimed orders -> ``{backend_items, set_aside, notes}`` for the offering's backend."""
    return plan(orders, backend_type, backend_settings, ssh_keys, offering_uuid)


def _planned(backend_type, orders, backend_settings, ssh_keys, offering_uuid=None):
    return registered(backend_type, backend_type).plan(orders, backend_settings, ssh_keys or [], offering_uuid)


def probe_failure(result, backend_type):
    """The registered result of the order pass's probe -> why the backend's cloud cannot be worked
    with, or "" when it can (its registry entry reads the result)."""
    return registered(backend_type, "probe_failure").probe_failure(result if isinstance(result, dict) else {})


def droplet_plan(orders, backend_settings=None, ssh_keys=None):
    """``backend_plan`` for DigitalOcean."""
    return plan(orders, "digitalocean", backend_settings, ssh_keys)


def droplet_items(orders, backend_settings=None, ssh_keys=None):
    """Claimed orders -> ``do_droplet`` items (packed when the orders were)."""
    return like(backend_items(_planned("digitalocean", orders, backend_settings, ssh_keys)), orders)


def droplet_outcomes(orders, backend_settings=None, ssh_keys=None):
    """Claimed orders -> settle outcomes of those that need no DigitalOcean call (erred or skipped)."""
    return planned_outcomes(_planned("digitalocean", orders, backend_settings, ssh_keys))


def droplet_notes(orders, backend_settings=None, ssh_keys=None):
    """Claimed orders -> one line per order whose request was changed (tags dropped, an unknown key)."""
    return notes_of(_planned("digitalocean", orders, backend_settings, ssh_keys))


def droplet_membership_items(resources):
    """Resources -> ``do_droplet`` power items: paused/downscaled -> off, else active."""
    return membership_items(resources, "digitalocean")


def vm_plan(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """``backend_plan`` for Azure (``offering_uuid``, else each order's own, goes into the owner tags)."""
    return plan(orders, "azure", backend_settings, ssh_keys, offering_uuid)


def vm_items(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """Claimed orders -> ``azure_vm_chain`` items (packed when the orders were)."""
    return like(backend_items(_planned("azure", orders, backend_settings, ssh_keys, offering_uuid)), orders)


def vm_outcomes(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """Claimed orders -> settle outcomes of those that need no Azure call (erred or skipped)."""
    return planned_outcomes(_planned("azure", orders, backend_settings, ssh_keys, offering_uuid))


def vm_membership_items(resources):
    """Resources -> ``azure_vm_chain`` power items: paused/downscaled -> deallocated, else running."""
    return membership_items(resources, "azure")


class FilterModule(object):
    """Order and resource glue for the site agent passes, through the backend registry."""

    def filters(self):
        return {
            "backend_plan": backend_plan,
            "membership_items": membership_items,
            "catalogue_items": catalogue_items,
            "probe_failure": probe_failure,
            "droplet_items": droplet_items,
            "droplet_outcomes": droplet_outcomes,
            "droplet_notes": droplet_notes,
            "droplet_plan": droplet_plan,
            "droplet_membership_items": droplet_membership_items,
            "vm_items": vm_items,
            "vm_outcomes": vm_outcomes,
            "vm_plan": vm_plan,
            "vm_membership_items": vm_membership_items,
        }
