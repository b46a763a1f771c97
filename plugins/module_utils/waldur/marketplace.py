# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Waldur's marketplace data shapes and API paths: what the modules read and write,
in the shape of the data contracts (docs/development.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import hex_uuid, normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.errors import WaldurApiError

TERMINAL_ORDER_STATES = frozenset(("done", "erred", "canceled", "rejected"))
ACTIONABLE_ORDER_STATES = ("pending-provider", "executing")
# Provider resource states while an order on them is executing (Create, Update, Terminate).
IN_FLIGHT_RESOURCE_STATES = ("Creating", "Updating", "Terminating")


def _mapping(value):
    return value if isinstance(value, dict) else {}


# the keys of a normalised resource, each also the name of a Waldur field (``field=``)
RESOURCE_KEYS = ("uuid", "name", "slug", "state", "backend_id", "limits", "attributes", "options", "paused",
                 "downscaled", "backend_metadata", "project_uuid", "project_slug", "customer_uuid",
                 "customer_slug", "offering_uuid", "plan_uuid", "offering_plugin_options")


def normalize_resource(raw):
    """A provider resource in the shape of the data contract (``orders[].resource``)."""
    raw = raw or {}
    return {
        "uuid": hex_uuid(raw.get("uuid")),
        "name": raw.get("name") or "",
        "slug": raw.get("slug") or "",
        "state": raw.get("state"),
        "backend_id": raw.get("backend_id") or "",
        "limits": _mapping(raw.get("limits")),
        "attributes": _mapping(raw.get("attributes")),
        "options": _mapping(raw.get("options")),
        "paused": bool(raw.get("paused")),
        "downscaled": bool(raw.get("downscaled")),
        "backend_metadata": _mapping(raw.get("backend_metadata")),
        "project_uuid": hex_uuid(raw.get("project_uuid")),
        "project_slug": raw.get("project_slug") or "",
        "customer_uuid": hex_uuid(raw.get("customer_uuid")),
        "customer_slug": raw.get("customer_slug") or "",
        "offering_uuid": hex_uuid(raw.get("offering_uuid")),
        "plan_uuid": hex_uuid(raw.get("plan_uuid")),
        "offering_plugin_options": _mapping(raw.get("offering_plugin_options")),
    }


def normalize_order(raw):
    """An order in the shape of the data contract (``orders[]`` without ``resource``)."""
    raw = raw or {}
    return {
        "uuid": hex_uuid(raw.get("uuid")),
        "type": raw.get("type"),
        "state": raw.get("state"),
        "offering_uuid": hex_uuid(raw.get("offering_uuid")),
        "marketplace_resource_uuid": hex_uuid(raw.get("marketplace_resource_uuid")),
        "resource_name": raw.get("resource_name") or "",
        "project_uuid": hex_uuid(raw.get("project_uuid")),
        "project_slug": raw.get("project_slug") or "",
        "plan_uuid": hex_uuid(raw.get("plan_uuid")),
        "attributes": _mapping(raw.get("attributes")),
        "limits": _mapping(raw.get("limits")),
        "created": raw.get("created"),
        "modified": raw.get("modified"),
    }


def order_path(order_uuid, action=None):
    return "marketplace-orders/%s/%s" % (normalize_uuid(order_uuid), "%s/" % action if action else "")


def provider_resource_path(resource_uuid, action=None):
    return "marketplace-provider-resources/%s/%s" % (
        normalize_uuid(resource_uuid), "%s/" % action if action else "")


def provider_offering_path(offering_uuid, action=None):
    return "marketplace-provider-offerings/%s/%s" % (
        normalize_uuid(offering_uuid), "%s/" % action if action else "")


def offering_components(client, offering_uuid):
    """The offering's components as Waldur lists them (``GET provider offering?field=components``)."""
    body = client.get(provider_offering_path(offering_uuid), params={"field": ["components"]}) or {}
    return [component for component in body.get("components") or [] if isinstance(component, dict)]


def find_of_offering(module, client, path, offering_uuid, uuids, states, fields=None):
    """``{uuid: raw item}`` for those of ``uuids`` that one paged listing of the offering's
    ``path`` in ``states`` holds (``WaldurClient.find``: only where the listing pays for itself).
    A listing that fails is a warning and an empty answer: the caller reads each item on its own."""
    params = {"offering_uuid": offering_uuid, "state": list(states)}
    if fields:
        params["field"] = list(fields)
    try:
        return client.find(path, uuids, params=params)
    except WaldurApiError as exc:
        module.warn("could not list %s of offering %s, reading them one by one: %s"
                    % (path.rstrip("/"), offering_uuid, exc))
        return {}
