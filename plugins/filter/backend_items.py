# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Filters that turn Waldur orders and resources into backend module items.

They are the "glue" step of a pass: ``waldur_orders`` (claim) returns orders
joined with their resources; these filters apply the offering's
``backend_settings`` and produce the per-machine parameters of ``do_droplet`` /
``azure_vm_chain``; the results go back to ``waldur_orders`` (settle).

Backend items carry desired state only. An order that cannot be carried out
(``error``) or needs no backend call (``skip``) gets no item: ``droplet_outcomes`` /
``vm_outcomes`` return it as a settle outcome (erred, or done with that message), which
the order pass adds to the backend's results for ``waldur_orders`` (state settled).
What the filter noted about an order it did pass on (``droplet_notes``) is said, not sent.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.filter.site_agent import unpacked
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import (
    limits_equal,
    size_for_limits,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import like
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import (
    droplet_name,
    is_resource_tag,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.order_types import (
    BUILD,
    CHANGE,
    REMOVE,
    action_of,
    builds,
)

# Keys of a planned item that are the pass's, not the backend's (see _split_plan).
PLAN_KEYS = ("error", "skip", "comment", "resource_name")


def _present(value):
    """Upstream treats an empty string as missing."""
    return value is not None and value != "" and value != []


def _first(mapping, *keys):
    for key in keys:
        if _present(mapping.get(key)):
            return mapping[key]
    return None


def _as_list(value):
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _settings(backend_settings):
    if backend_settings is None:
        return {}
    if not isinstance(backend_settings, dict):
        raise AnsibleFilterError("backend_settings must be a mapping, got %s" % type(backend_settings).__name__)
    return backend_settings


def _order_base(order):
    resource = order.get("resource") or {}
    resource_uuid = order.get("marketplace_resource_uuid") or resource.get("uuid")
    if not resource_uuid:
        raise AnsibleFilterError("order %s names no marketplace resource" % order.get("uuid"))
    return resource, {"order_uuid": normalize_uuid(order["uuid"]),
                      "resource_uuid": normalize_uuid(resource_uuid),
                      "resource_name": order.get("resource_name") or resource.get("name") or ""}


def _provider_key(ssh_keys, wanted):
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


def _update_skip_or_none(order, resource):
    target = order.get("target_limits") or order.get("limits") or {}
    if not target:
        return "the order carries no limits and the plan has no quotas; nothing to change"
    if limits_equal(target, resource.get("limits")):
        return "limits are unchanged; nothing to do on the backend"
    return None


# ---------------------------------------------------------------- DigitalOcean

def _order_items(orders, backend_settings, create_params, update_params):
    """One item per order: ``create_params`` for Create/Restore, ``update_params`` for an
    Update whose limits changed, ``state: absent`` for Terminate."""
    settings = _settings(backend_settings)
    items = []
    for order in unpacked(orders, "orders"):
        resource, item = _order_base(order)
        order_type = order.get("type")
        action = action_of(order_type)
        backend_id = resource.get("backend_id") or None
        if action == BUILD:
            item.update(create_params(order, resource, settings))
            item["backend_id"] = backend_id
        elif action == CHANGE:
            item.update(state="present", backend_id=backend_id)
            skip = _update_skip_or_none(order, resource)
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


def _power_items(resources, stopped_state, running_state):
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


def _backend_items(planned):
    """The planned items the backend acts on, with desired state only."""
    return [dict((key, value) for key, value in item.items() if key not in PLAN_KEYS)
            for item in planned if not item.get("error") and not item.get("skip")]


def _planned_outcomes(planned):
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


def _notes(planned):
    return ["%s (order %s): %s" % (item.get("resource_name") or item["resource_uuid"], item["order_uuid"],
                                   item["comment"])
            for item in planned if item.get("comment") and not (item.get("error") or item.get("skip"))]


def droplet_items(orders, backend_settings=None, ssh_keys=None):
    """Claimed orders -> ``do_droplet`` items, for the orders that need DigitalOcean (packed when
    the orders were)."""
    return like(_backend_items(_droplet_plan(orders, backend_settings, ssh_keys)), orders)


def droplet_outcomes(orders, backend_settings=None, ssh_keys=None):
    """Claimed orders -> settle outcomes of those that need no DigitalOcean call (erred or skipped)."""
    return _planned_outcomes(_droplet_plan(orders, backend_settings, ssh_keys))


def droplet_notes(orders, backend_settings=None, ssh_keys=None):
    """Claimed orders -> one line per order whose request was changed (tags dropped, an unknown key)."""
    return _notes(_droplet_plan(orders, backend_settings, ssh_keys))


def droplet_plan(orders, backend_settings=None, ssh_keys=None):
    """Claimed orders -> ``{backend_items, set_aside, notes}``: ``droplet_items``, ``droplet_outcomes``
    and ``droplet_notes`` from one planning, so the order pass reads the claimed orders once
    (``backend_items`` packed when the orders were)."""
    return _plan_parts(_droplet_plan(orders, backend_settings, ssh_keys), orders)


def _plan_parts(planned, orders):
    return {"backend_items": like(_backend_items(planned), orders), "set_aside": _planned_outcomes(planned),
            "notes": _notes(planned)}


def _droplet_plan(orders, backend_settings=None, ssh_keys=None):
    """Claimed orders -> planned ``do_droplet`` items, with ``error``/``skip``/``comment`` (behaviour page)."""
    orders = unpacked(orders, "orders")

    def create(order, resource, settings):
        params = _droplet_create_params(order, resource, settings, ssh_keys)
        if resource.get("backend_id"):
            # The droplet exists: a Create or Restore only checks it, it never resizes it (the
            # size of the order or the defaults may differ from what Updates made of it).
            params.pop("size", None)
            params.pop("error", None)
        return params

    def update(order, resource, settings, backend_id):
        if not backend_id:
            return {"error": "the resource has no backend id, so there is no droplet to resize"}
        target = order.get("target_limits") or order.get("limits")
        mapping = settings.get("size_mapping") or {}
        slug = size_for_limits(mapping, target)
        if slug:
            # Powered on after the resize unless Waldur has it paused or downscaled; this also
            # finishes a resize an earlier pass left off after the power-off.
            return {"size": slug, "running": not (resource.get("paused") or resource.get("downscaled"))}
        # Waldur would show limits the droplet does not have: the order errs instead.
        return {"error": "limits %s match no size_mapping entry (%s); the droplet is left unchanged"
                         % (_render_limits(target), _render_mapping(mapping))}

    items = _order_items(orders, backend_settings, create, update)
    for order, item in zip(orders, items):
        resource = order.get("resource") or {}
        if builds(order.get("type")) and order.get("created"):
            # evidence for do_droplet: a droplet made for this order is not older than the order
            item["not_before"] = order["created"]
        if builds(order.get("type")) and order.get("approved_now"):
            # no earlier pass can have made its droplet: one listing proves there is none
            item["approved_now"] = True
        elif action_of(order.get("type")) == REMOVE:
            # do_droplet deletes a droplet found by its tag only under a name derived for the resource
            item["name"] = droplet_name(resource.get("name") or order.get("resource_name"), resource.get("slug"),
                                        item["resource_uuid"])
    return items


def _render_limits(limits):
    return ", ".join("%s=%s" % (key, limits[key]) for key in sorted(limits or {}))


def _render_mapping(mapping):
    if not mapping:
        return "size_mapping is empty"
    return "size_mapping: " + "; ".join("%s: %s" % (slug, _render_limits(mapping[slug])) for slug in sorted(mapping))


def _droplet_create_params(order, resource, settings, ssh_keys):
    # Resource options first, attributes override them (upstream DigitalOcean rule).
    attributes = dict(resource.get("options") or {})
    attributes.update(resource.get("attributes") or {})
    params = {
        "state": "present",
        "name": droplet_name(resource.get("name") or order.get("resource_name") or attributes.get("name"),
                             resource.get("slug"), resource.get("uuid") or order.get("marketplace_resource_uuid")),
        "region": _first(attributes, "backend_region_id", "region") or settings.get("default_region"),
        "image": _first(attributes, "backend_image_id", "image") or settings.get("default_image"),
        "size": (_first(attributes, "backend_size_id", "size", "size_slug") or settings.get("default_size")
                 or size_for_limits(settings.get("size_mapping") or {}, resource.get("limits") or order.get("limits"))),
        "user_data": _first(attributes, "user_data", "cloud_init") or settings.get("default_user_data"),
    }
    tags = _as_list(attributes.get("tags")) if _present(attributes.get("tags")) else _as_list(settings.get("default_tags"))
    dropped = [tag for tag in tags if is_resource_tag(tag)]
    params["tags"] = [str(tag) for tag in tags if tag not in dropped]
    notes = []
    if dropped:
        notes.append("dropped tags reserved for the agent: %s" % ", ".join(map(str, dropped)))
    params["ssh_keys"] = _droplet_ssh_keys(attributes, settings, ssh_keys, notes)
    missing = [what for what in ("region", "image", "size") if not params[what]]
    if missing:
        params["error"] = "DigitalOcean droplet %s is not specified" % missing[0]
    if notes:
        params["comment"] = "; ".join(notes)
    return params


def _droplet_ssh_keys(attributes, settings, ssh_keys, notes):
    key_id = _first(attributes, "ssh_key_id")
    if isinstance(key_id, bool):  # a bool is no key id (upstream ignores it)
        key_id = None
    fingerprint = _first(attributes, "ssh_key_fingerprint")
    public_key = _first(attributes, "ssh_public_key")
    provider_key_uuid = _first(attributes, "ssh_key", "ssh_key_uuid")
    if provider_key_uuid and not public_key:
        key = _provider_key(ssh_keys, provider_key_uuid)
        if key:
            public_key = key.get("public_key")
        else:
            notes.append("SSH key %s is not a key of the service provider" % provider_key_uuid)
    if key_id is not None:
        return [str(key_id)]
    if fingerprint:
        return [fingerprint]
    if public_key:
        return [public_key]
    default_id = settings.get("default_ssh_key_id")
    if _present(default_id) and not isinstance(default_id, bool):
        return [str(default_id)]
    for default in ("default_ssh_key_fingerprint", "default_ssh_public_key"):
        if _present(settings.get(default)):
            return [settings[default]]
    return []


def droplet_membership_items(resources):
    """Resources -> ``do_droplet`` power items: paused/downscaled -> off, else active."""
    return _power_items(resources, "off", "active")


# ---------------------------------------------------------------------- Azure

def vm_items(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """Claimed orders -> ``azure_vm_chain`` items, for the orders that need Azure.

    ``offering_uuid`` (else each order's own) goes into the owner tags of the objects made."""
    return like(_backend_items(_vm_plan(orders, backend_settings, ssh_keys or [], offering_uuid)), orders)


def vm_outcomes(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """Claimed orders -> settle outcomes of those that need no Azure call (erred or skipped)."""
    return _planned_outcomes(_vm_plan(orders, backend_settings, ssh_keys or [], offering_uuid))


def vm_plan(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """Claimed orders -> ``{backend_items, set_aside, notes}``: ``vm_items`` and ``vm_outcomes`` from
    one planning (``notes`` is empty: nothing an Azure order asks for is dropped)."""
    return _plan_parts(_vm_plan(orders, backend_settings, ssh_keys or [], offering_uuid), orders)


def _vm_plan(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    """Claimed orders -> planned ``azure_vm_chain`` items, with ``error``/``skip`` (behaviour page, Azure)."""
    orders = unpacked(orders, "orders")

    def create(order, resource, settings):
        params = _vm_create_params(order, resource, settings, ssh_keys)
        if resource.get("backend_id"):
            # The machine exists: a Create or Restore only checks it (azure_vm_chain reads it by its
            # backend id); what a new machine would need (an SSH key, a location) is not asked for.
            params.pop("error", None)
        return params

    # Azure machines are not resized (set_resource_limits refuses upstream too).
    items = _order_items(orders, backend_settings, create,
                         lambda *order_resource_settings_backend_id: {"error": "resizing is not supported on Azure"})
    for order, item in zip(orders, items):
        offering = offering_uuid or order.get("offering_uuid")
        if offering:
            try:
                item["offering_uuid"] = normalize_uuid(offering)
            except ValueError:
                raise AnsibleFilterError("offering_uuid: %r is not a UUID" % (offering,))
    return items


def _vm_create_params(order, resource, settings, ssh_keys):
    attributes = resource.get("attributes") or {}
    params = {
        "state": "present",
        "name": resource.get("name") or order.get("resource_name") or attributes.get("name") or resource.get("slug") or "",
        "location": _first(attributes, "location") or settings.get("default_location"),
        "size": _first(attributes, "size") or settings.get("default_size"),
        "image": _first(attributes, "image") or settings.get("default_image"),
        "admin_username": _first(attributes, "username") or "waldur",
        "custom_data": _first(attributes, "user_data", "cloud_init"),
        "resource_group": settings.get("default_resource_group") or None,
        "network_cidr": settings.get("network_cidr") or "10.0.0.0/16",
        "subnet_cidr": settings.get("subnet_cidr") or "10.0.0.0/24",
        "allowed_ssh_ranges": [str(r) for r in _as_list(settings.get("allowed_ssh_ranges"))],
    }
    for what in ("location", "size", "image"):
        if not params[what]:
            params["error"] = "Azure %s is set neither on the order nor in backend_settings" % what
            return params
    if ssh_keys is None:
        return params  # the catalogue check (no keys read yet) judges the location, size and image only
    public_key = _first(attributes, "ssh_public_key")
    if not public_key:
        key_uuid = _first(attributes, "ssh_key", "ssh_key_uuid")
        if not key_uuid:
            params["error"] = ("the order carries no SSH key (ssh_public_key, or ssh_key naming a service "
                               "provider key); a machine without one would admit nobody")
            return params
        key = _provider_key(ssh_keys, key_uuid)
        if not key or not key.get("public_key"):
            params["error"] = ("the order carries no SSH key: %s is not an SSH key of the service provider"
                               % key_uuid)
            return params
        public_key = key["public_key"]
    params["ssh_public_key"] = public_key
    return params


def vm_membership_items(resources):
    """Resources -> ``azure_vm_chain`` power items: paused/downscaled -> deallocated, else running."""
    return _power_items(resources, "deallocated", "running")


# ------------------------------------------------------- before approval: the catalogue

# What each backend's catalogue check judges of a machine the order would create.
CATALOGUE_KEYS = {"digitalocean": ("region", "size", "image"), "azure": ("location", "size", "image")}


def catalogue_items(orders, backend_settings=None, backend="digitalocean"):
    """Listed orders (``waldur_orders`` state listed) -> the machines their Creates and Restores would
    create, resolved as the act resolves them (the order's attributes, then the offering's defaults and
    mappings): ``order_uuid``, ``resource_uuid``, ``resource_name``, the region or location, size and
    image, and ``executing`` (already approved: it can only be erred). What ``do_catalogue_info`` /
    ``azure_catalogue_info`` check against the cloud's catalogue; an order the plan errs anyway, or
    whose machine exists (a backend id), is left out. Packed when the orders were."""
    backend = str(backend or "").lower()
    if backend not in CATALOGUE_KEYS:
        raise AnsibleFilterError("catalogue_items: backend must be one of %s, got %r"
                                 % (", ".join(sorted(CATALOGUE_KEYS)), backend))
    building = [order for order in unpacked(orders, "orders") if builds(order.get("type"))]
    if backend == "digitalocean":
        planned = _droplet_plan(building, backend_settings, [])
    else:
        # the provider's keys are read by the claim, after the check: an order naming one is still judged
        planned = _vm_plan(building, backend_settings, None)
    items = []
    for order, item in zip(building, planned):
        if item.get("error") or item.get("skip") or item.get("backend_id") or item.get("state") != "present":
            continue
        entry = {"order_uuid": item["order_uuid"], "resource_uuid": item["resource_uuid"],
                 "resource_name": item.get("resource_name") or "",
                 "executing": order.get("state") == "executing"}
        for key in CATALOGUE_KEYS[backend]:
            value = item.get(key)
            entry[key] = value if isinstance(value, dict) or value is None else str(value)
        items.append(entry)
    return like(items, orders)


# ----------------------------------------------------------------- all passes


class FilterModule(object):
    """Order and resource glue for the site agent passes: the DigitalOcean and Azure items."""

    def filters(self):
        return {
            "droplet_items": droplet_items,
            "droplet_outcomes": droplet_outcomes,
            "droplet_notes": droplet_notes,
            "droplet_plan": droplet_plan,
            "droplet_membership_items": droplet_membership_items,
            "vm_items": vm_items,
            "vm_outcomes": vm_outcomes,
            "vm_plan": vm_plan,
            "vm_membership_items": vm_membership_items,
            "catalogue_items": catalogue_items,
        }
