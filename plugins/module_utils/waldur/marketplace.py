# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Waldur's marketplace data shapes and API paths: what the modules read and write,
in the shape of the data contracts (docs/development.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import (
    BOOLEAN,
    LIST,
    NULL,
    NUMBER,
    OBJECT,
    STRING,
    ProvenObject,
    Shape,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import hex_uuid, normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.errors import WaldurApiError

TERMINAL_ORDER_STATES = frozenset(("done", "erred", "canceled", "rejected"))
ACTIONABLE_ORDER_STATES = ("pending-provider", "executing")
# Provider resource states while an order on them is executing (Create, Update, Terminate).
IN_FLIGHT_RESOURCE_STATES = ("Creating", "Updating", "Terminating")


# What the agent reads of Waldur's objects, and their JSON types (Waldur 7.0.7 and 8.x answer every
# one of these): an answer without them, or with another type, is not proof (``WaldurUnproven``).
# With ``field=``, only the fields asked for are required.
ORDER_SHAPE = Shape("order", required={
    "uuid": STRING, "state": STRING, "type": STRING, "marketplace_resource_uuid": (STRING, NULL),
    "offering_uuid": (STRING, NULL),
}, optional={
    "attributes": (OBJECT, NULL), "limits": (OBJECT, NULL), "created": (STRING, NULL), "modified": (STRING, NULL),
    "resource_uuid": (STRING, NULL), "provider_reviewed_at": (STRING, NULL), "error_message": (STRING, NULL),
    "plan_uuid": (STRING, NULL), "resource_name": (STRING, NULL), "project_uuid": (STRING, NULL),
})
RESOURCE_SHAPE = Shape("resource", required={
    "uuid": STRING, "state": STRING, "backend_id": (STRING, NULL),
}, optional={
    "name": (STRING, NULL), "limits": (OBJECT, NULL), "attributes": (OBJECT, NULL), "options": (OBJECT, NULL),
    "backend_metadata": (OBJECT, NULL), "paused": BOOLEAN, "downscaled": BOOLEAN, "offering_uuid": (STRING, NULL),
    "plan_uuid": (STRING, NULL), "project_uuid": (STRING, NULL), "offering_plugin_options": (OBJECT, NULL),
})
USAGE_SHAPE = Shape("component usage", required={
    "type": STRING, "usage": (STRING, NUMBER), "billing_period": STRING, "resource_uuid": STRING,
})
OFFERING_SHAPE = Shape("offering", required={"uuid": STRING, "components": LIST, "plans": LIST},
                       optional={"customer_uuid": (STRING, NULL), "state": STRING})
PLAN_SHAPE = Shape("plan", required={"uuid": STRING}, optional={"quotas": (OBJECT, NULL)})
SERVICE_PROVIDER_SHAPE = Shape("service provider", required={"uuid": STRING})
SSH_KEY_SHAPE = Shape("SSH key", required={"uuid": STRING, "public_key": STRING},
                      optional={"name": (STRING, NULL), "fingerprint_md5": (STRING, NULL), "fingerprint": (STRING, NULL)})
USER_SHAPE = Shape("Waldur user", required={"uuid": STRING, "username": STRING})
# Every Waldur endpoint the agent reads, by its path under /api/ (an item's uuid as <uuid>), and
# the shape of the objects it answers: the client checks every read against this table unless the
# caller gives a shape, so no read of these is taken on trust (tests/unit checks that every read
# the passes make is in it).
READ_SHAPES = (
    ("marketplace-orders/", ORDER_SHAPE),
    ("marketplace-orders/<uuid>/", ORDER_SHAPE),
    ("marketplace-provider-resources/", RESOURCE_SHAPE),
    ("marketplace-provider-resources/<uuid>/", RESOURCE_SHAPE),
    ("marketplace-resources/", RESOURCE_SHAPE),
    ("marketplace-resources/<uuid>/", RESOURCE_SHAPE),
    ("marketplace-provider-offerings/<uuid>/", OFFERING_SHAPE),
    ("marketplace-plans/<uuid>/", PLAN_SHAPE),
    ("marketplace-service-providers/", SERVICE_PROVIDER_SHAPE),
    ("marketplace-service-providers/<uuid>/keys/", SSH_KEY_SHAPE),
    ("marketplace-component-usages/", USAGE_SHAPE),
    ("users/me/", USER_SHAPE),
)
_UUID_SEGMENT = re.compile(r"^[0-9a-fA-F-]{32,36}$")


def read_shape(path):
    """The shape of what the read of ``path`` (relative to /api/, or absolute) answers, from
    :data:`READ_SHAPES`; None for an endpoint the table does not hold."""
    path = path.split("?", 1)[0]
    if "/api/" in path:
        path = path.split("/api/", 1)[1]
    segments = ["<uuid>" if _UUID_SEGMENT.match(segment) else segment for segment in path.strip("/").split("/")]
    key = "/".join(segments) + "/"
    for endpoint, shape in READ_SHAPES:
        if endpoint == key:
            return shape
    return None


def _mapping(value):
    return value if isinstance(value, dict) else {}


def _text(value):
    return value or ""


def _as_given(value):
    return value


# The fields of a normalised resource and order, in the order of the data contract, each with how
# Waldur's value becomes it (UUIDs as 32 hex, a missing text as "", a missing mapping as {}); each
# key is also the name of a Waldur field (``field=``).
RESOURCE_FIELDS = (
    ("uuid", hex_uuid), ("name", _text), ("slug", _text), ("state", _as_given), ("backend_id", _text),
    ("limits", _mapping), ("attributes", _mapping), ("options", _mapping), ("paused", bool), ("downscaled", bool),
    ("backend_metadata", _mapping), ("project_uuid", hex_uuid), ("project_slug", _text), ("customer_uuid", hex_uuid),
    ("customer_slug", _text), ("offering_uuid", hex_uuid), ("plan_uuid", hex_uuid),
    ("offering_plugin_options", _mapping),
)
ORDER_FIELDS = (
    ("uuid", hex_uuid), ("type", _as_given), ("state", _as_given), ("offering_uuid", hex_uuid),
    ("marketplace_resource_uuid", hex_uuid), ("resource_name", _text), ("project_uuid", hex_uuid),
    ("project_slug", _text), ("plan_uuid", hex_uuid), ("attributes", _mapping), ("limits", _mapping),
    ("created", _as_given), ("modified", _as_given),
)
RESOURCE_KEYS = tuple(key for key, _convert in RESOURCE_FIELDS)


def _normalized(raw, fields):
    """``raw`` in the shape of ``fields``; proof stays proof (a read layer's ``ProvenObject``)."""
    normalized = dict((key, convert((raw or {}).get(key))) for key, convert in fields)
    return ProvenObject(normalized, getattr(raw, "source", None)) if isinstance(raw, ProvenObject) else normalized


def normalize_resource(raw):
    """A provider resource in the shape of the data contract (``orders[].resource``); proof stays proof."""
    return _normalized(raw, RESOURCE_FIELDS)


def normalize_order(raw):
    """An order in the shape of the data contract (``orders[]`` without ``resource``); proof stays proof."""
    return _normalized(raw, ORDER_FIELDS)


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
    body = client.get(provider_offering_path(offering_uuid), params={"field": ["components"]}, shape=OFFERING_SHAPE)
    return [component for component in body["components"] if isinstance(component, dict)]


def find_of_offering(module, client, path, offering_uuid, uuids, states, fields=None, shape=None):
    """``{uuid: raw item}`` for those of ``uuids`` that one paged listing of the offering's
    ``path`` in ``states`` holds (``WaldurClient.find``: only where the listing pays for itself).
    A listing that fails is a warning and an empty answer: the caller reads each item on its own."""
    params = {"offering_uuid": offering_uuid, "state": list(states)}
    if fields:
        params["field"] = list(fields)
    try:
        return client.find(path, uuids, params=params, shape=shape)
    except WaldurApiError as exc:
        module.warn("could not list %s of offering %s, reading them one by one: %s"
                    % (path.rstrip("/"), offering_uuid, exc))
        return {}
