# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Planning, the part every backend shares: claimed orders -> the backend module's items.

``waldur_orders`` (claim) returns orders joined with their resources; a backend's ``plan`` (its
module in this package) turns them into the items of its module, with ``error`` (the order cannot be
carried out), ``skip`` (it needs no backend call) or ``comment`` (something it asked for is not
used). :func:`plan_parts` splits that into what the backend acts on, what settling reads without a
backend call, and the notes said to the operator. Backend items carry desired state only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import limits_equal
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import like, unpack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.order_types import (
    BUILD,
    CHANGE,
    REMOVE,
    action_of,
    builds,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends import backend, names


def unpacked(value, what):
    """The items of a list or packed list (``core/packed``), or a filter error naming ``what``."""
    try:
        return unpack(value, what)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


# Keys of a planned item that are the pass's, not the backend's (see _split_plan).
PLAN_KEYS = ("error", "skip", "comment", "resource_name")


def present(value):
    """Upstream treats an empty string as missing."""
    return value is not None and value != "" and value != []


def first(mapping, *keys):
    for key in keys:
        if present(mapping.get(key)):
            return mapping[key]
    return None


def as_list(value):
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def settings_of(backend_settings):
    if backend_settings is None:
        return {}
    if not isinstance(backend_settings, dict):
        raise AnsibleFilterError("backend_settings must be a mapping, got %s" % type(backend_settings).__name__)
    return backend_settings


def order_base(order):
    resource = order.get("resource") or {}
    resource_uuid = order.get("marketplace_resource_uuid") or resource.get("uuid")
    if not resource_uuid:
        raise AnsibleFilterError("order %s names no marketplace resource" % order.get("uuid"))
    return resource, {"order_uuid": normalize_uuid(order["uuid"]),
                      "resource_uuid": normalize_uuid(resource_uuid),
                      "resource_name": order.get("resource_name") or resource.get("name") or ""}


def provider_key(ssh_keys, wanted):
    """The service provider key whose UUID matches ``wanted`` in any form."""
    try:
        wanted = normalize_uuid(wanted)
    except ValueError:
        return None
    for key in ssh_keys or []:
        try:
            if normalize_uuid(key.get("uuid")) == wanted:
                return key
        except ValueError:
            continue
    return None


def update_skip_or_none(order, resource):
    target = order.get("target_limits") or order.get("limits") or {}
    if not target:
        return "the order carries no limits and the plan has no quotas; nothing to change"
    if limits_equal(target, resource.get("limits")):
        return "limits are unchanged; nothing to do on the backend"
    return None


def order_items(orders, backend_settings, create_params, update_params):
    """One item per order: ``create_params`` for Create/Restore, ``update_params`` for an
    Update whose limits changed, ``state: absent`` for Terminate."""
    settings = settings_of(backend_settings)
    items = []
    for order in unpacked(orders, "orders"):
        resource, item = order_base(order)
        order_type = order.get("type")
        action = action_of(order_type)
        backend_id = resource.get("backend_id") or None
        if action == BUILD:
            item.update(create_params(order, resource, settings))
            item["backend_id"] = backend_id
        elif action == CHANGE:
            item.update(state="present", backend_id=backend_id)
            skip = update_skip_or_none(order, resource)
            if skip:
                item["skip"] = skip
            else:
                item.update(update_params(order, resource, settings, backend_id))
        elif action == REMOVE:
            item.update(state="absent", backend_id=backend_id)
        else:
            item["error"] = "order type %r is not supported" % order_type
        items.append(item)
    return items


def power_items(resources, stopped_state, running_state):
    """Resources with a backend id -> power items: paused/downscaled stop, the others run
    (packed when the resources were, see core/packed)."""
    items = []
    for resource in unpacked(resources, "resources"):
        if not resource.get("backend_id"):
            continue
        stopped = bool(resource.get("paused") or resource.get("downscaled"))
        items.append({"resource_uuid": normalize_uuid(resource["uuid"]),
                      "backend_id": str(resource["backend_id"]),
                      "state": stopped_state if stopped else running_state})
    return like(items, resources)


def backend_items(planned):
    """The planned items the backend acts on, with desired state only."""
    return [dict((key, value) for key, value in item.items() if key not in PLAN_KEYS)
            for item in planned if not item.get("error") and not item.get("skip")]


def planned_outcomes(planned):
    """Settle outcomes of the orders the plan errs or skips: no backend call is made for them."""
    outcomes = []
    for item in planned:
        if not (item.get("error") or item.get("skip")):
            continue
        msg = item.get("error") or "; ".join(part for part in (item["skip"], item.get("comment")) if part)
        outcomes.append({"order_uuid": item["order_uuid"], "resource_uuid": item["resource_uuid"],
                         "resource_name": item.get("resource_name") or "", "backend_id": item.get("backend_id"),
                         "failed": bool(item.get("error")), "retry": False, "msg": msg})
    return outcomes


def notes_of(planned):
    return ["%s (order %s): %s" % (item.get("resource_name") or item["resource_uuid"], item["order_uuid"],
                                   item["comment"])
            for item in planned if item.get("comment") and not (item.get("error") or item.get("skip"))]


def plan_parts(planned, orders):
    return {"backend_items": like(backend_items(planned), orders), "set_aside": planned_outcomes(planned),
            "notes": notes_of(planned)}


def registered(backend_type, what):
    """The registered backend ``backend_type``, or a filter error naming ``what`` and the known ones."""
    entry = backend(backend_type)
    if entry is None:
        raise AnsibleFilterError("%s: backend must be one of %s, got %r" % (what, ", ".join(names()), backend_type))
    return entry


def plan(orders, backend_type, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """Claimed orders -> ``{backend_items, set_aside, notes}`` for ``backend_type``: the items its
    module acts on (packed when the orders were), the settle outcomes of the orders needing no call,
    and one line per order whose request was changed; one planning, the orders read once."""
    entry = registered(backend_type, "backend_plan")
    return plan_parts(entry.plan(orders, backend_settings, ssh_keys or [], offering_uuid), orders)


def membership_items(resources, backend_type):
    """Resources with a backend id -> the backend's power items: paused or downscaled ones stopped,
    the others running (packed when the resources were)."""
    stopped, running = registered(backend_type, "membership_items").power_states
    return power_items(resources, stopped, running)


def catalogue_items(orders, backend_settings=None, backend="digitalocean"):
    """Listed orders (``waldur_orders`` state listed) -> the machines their Creates and Restores would
    create, resolved as the act resolves them (the order's attributes, then the offering's defaults and
    mappings): ``order_uuid``, ``resource_uuid``, ``resource_name``, the backend's catalogue keys (region
    or location, size, image) and ``executing`` (already approved: it can only be erred). What the
    backend's catalogue check judges; an order the plan errs anyway, or whose machine exists (a backend
    id), is left out. Packed when the orders were."""
    entry = registered(str(backend or "").lower(), "catalogue_items")
    building = [order for order in unpacked(orders, "orders") if builds(order.get("type"))]
    # no SSH keys: the provider's keys are read by the claim, after the check (an order naming one is judged)
    planned = entry.plan(building, backend_settings, None, None)
    items = []
    for order, item in zip(building, planned):
        if item.get("error") or item.get("skip") or item.get("backend_id") or item.get("state") != "present":
            continue
        row = {"order_uuid": item["order_uuid"], "resource_uuid": item["resource_uuid"],
               "resource_name": item.get("resource_name") or "",
               "executing": order.get("state") == "executing"}
        for key in entry.catalogue_keys:
            value = item.get(key)
            row[key] = value if isinstance(value, dict) or value is None else str(value)
        items.append(row)
    return like(items, orders)
