# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""What each Waldur order type asks of the backend: one table, read by the claim, the settle and
the planning filters. A new order type is a row here; a type with no row is refused by name."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The backend action an order type asks for.
BUILD = "build"  # make the machine (Create; Restore makes it again): the backend id is recorded
CHANGE = "change"  # change the machine that exists (Update: its size)
REMOVE = "remove"  # remove the machine (Terminate)

# type -> action; the trace Waldur's processor leaves when it has finished with an executing order
# (real-waldur-samples.md sections 5 and 6c), in the words of the claim's waiting line, and how to
# see it in the order and its resource. A Restore leaves none: then only time says so.
ORDER_TYPES = {
    "Create": {"action": BUILD, "processed_when": "the order's resource_uuid (the plugin object the processor makes)",
               "processed": lambda order, resource: bool(order.get("resource_uuid"))},
    "Restore": {"action": BUILD},
    "Update": {"action": CHANGE, "processed_when": "the resource in state Updating",
               "processed": lambda order, resource: resource.get("state") == "Updating"},
    "Terminate": {"action": REMOVE, "processed_when": "the resource in state Terminating",
                  "processed": lambda order, resource: resource.get("state") == "Terminating"},
}


def action_of(order_type):
    """BUILD, CHANGE or REMOVE; None for a type the table does not know."""
    return ORDER_TYPES.get(order_type, {}).get("action")


def builds(order_type):
    return action_of(order_type) == BUILD


def needs_a_live_resource(order_type):
    """Orders that build or change a machine are never carried out for a resource Waldur gave up on."""
    return action_of(order_type) in (BUILD, CHANGE)


def processing_trace(order_type):
    """What the claim waits to see of Waldur's processor, or None."""
    return ORDER_TYPES.get(order_type, {}).get("processed_when")


def processing_signal(order_type, raw_order, resource):
    """Whether Waldur's processor is seen to have finished with an executing order; None for a
    type it leaves no trace of."""
    processed = ORDER_TYPES.get(order_type, {}).get("processed")
    return None if processed is None else processed(raw_order, resource)
