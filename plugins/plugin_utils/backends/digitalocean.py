# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""DigitalOcean in the backend registry: droplets from a region, an image and a size, signed in
with one token. Its modules are ``do_droplet`` (the act), ``do_account_info`` (the probe),
``do_catalogue_info`` and ``do_audit``; its planning and its health and diagnostics judgements
are here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import size_for_limits
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import (
    droplet_name,
    is_resource_tag,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.options import (
    TOKEN_ENV_VARS,
    plain_http_warning,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.order_types import REMOVE, action_of, builds
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends import Backend
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends.answers import (
    dig,
    http_failure,
    is_int,
    or_default,
    settings_of,
    status_of,
    text,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends.planning import (
    as_list,
    first,
    order_items,
    present,
    provider_key,
    unpacked,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config_checks import _secret_present

API_URL = "https://api.digitalocean.com/v2/"


# ---------------------------------------------------------------- planning: orders -> do_droplet items

def plan(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):  # pylint: disable=unused-argument
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

    items = order_items(orders, backend_settings, create, update)
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
        "region": first(attributes, "backend_region_id", "region") or settings.get("default_region"),
        "image": first(attributes, "backend_image_id", "image") or settings.get("default_image"),
        "size": (first(attributes, "backend_size_id", "size", "size_slug") or settings.get("default_size")
                 or size_for_limits(settings.get("size_mapping") or {}, resource.get("limits") or order.get("limits"))),
        "user_data": first(attributes, "user_data", "cloud_init") or settings.get("default_user_data"),
    }
    tags = as_list(attributes.get("tags")) if present(attributes.get("tags")) else as_list(settings.get("default_tags"))
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
    key_id = first(attributes, "ssh_key_id")
    if isinstance(key_id, bool):  # a bool is no key id (upstream ignores it)
        key_id = None
    fingerprint = first(attributes, "ssh_key_fingerprint")
    public_key = first(attributes, "ssh_public_key")
    provider_key_uuid = first(attributes, "ssh_key", "ssh_key_uuid")
    if provider_key_uuid and not public_key:
        key = provider_key(ssh_keys, provider_key_uuid)
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
    if present(default_id) and not isinstance(default_id, bool):
        return [str(default_id)]
    for default in ("default_ssh_key_fingerprint", "default_ssh_public_key"):
        if present(settings.get(default)):
            return [settings[default]]
    return []


# ---------------------------------------------------------------- configuration, health, diagnostics

def check_settings(path, settings, problems):
    """The token is required (here or from the environment); an API over plain HTTP is named."""
    if not _secret_present(settings.get("token")):
        problems.error(path + ".token", "required")
    warning = plain_http_warning(settings["api_url"]) if isinstance(settings.get("api_url"), str) else None
    if warning:
        problems.warn(path + ".api_url", warning)


def probe_failure(result):
    """do_account_info's result: the account read, or why not."""
    return "" if "account" in result else str(result.get("msg") or "the account could not be read")


def health(offering, reads, notes):
    """``reads``: ``account`` (GET /account) and ``droplet_count`` (one droplet per page, meta.total)."""
    account, count = reads.get("account", {}), reads.get("droplet_count", {})
    where = or_default(dig(settings_of(offering), "api_url"), API_URL)
    if status_of(account) != 200:
        return (http_failure(account, "DigitalOcean", where).replace("the credentials", "the token")
                + ("; check backend_settings.token" if status_of(account) == 401 else ""))
    notes.append("DigitalOcean account %s" % text(dig(account, "json", "account", "status")))
    # headroom, never a fault: the order pass holds the orders past the droplet limit
    limit = dig(account, "json", "account", "droplet_limit")
    total = (dig(count, "json", "meta", "total")
             if status_of(count) == 200 and isinstance(dig(count, "json"), Mapping) else None)
    if is_int(limit) and is_int(total):
        notes.append("droplets %s of %s used" % (total, limit))
    else:
        notes.append("droplet headroom not read (%s)" % (
            "no droplet_limit in the account" if not is_int(limit)
            else "GET droplets answered HTTP %s" % text(dig(count, "status"), "nothing")))
    return ""


def diagnose(offering, reads, lines, problems):
    """``reads``: ``account`` (GET /account)."""
    account = reads.get("account", {})
    where = or_default(dig(settings_of(offering), "api_url"), API_URL)
    if status_of(account) == 200:
        lines.append("DigitalOcean %s: reachable, account %s, droplet limit %s" % (
            where, text(dig(account, "json", "account", "status")),
            text(dig(account, "json", "account", "droplet_limit"))))
    else:
        fix = "; check backend_settings.token" if status_of(account) == 401 else ""
        lines.append("DigitalOcean %s: %s%s" % (where, http_failure(account, "DigitalOcean"), fix))
        problems.append(http_failure(account, "DigitalOcean") + fix)


BACKEND = Backend(
    name="digitalocean",
    title="DigitalOcean",
    machine="droplet",
    credentials=("token",),
    settings={
        "default_region": "str", "default_image": "str", "default_size": "str", "default_user_data": "str",
        "default_tags": "str_or_list", "default_ssh_key_id": "int", "default_ssh_key_fingerprint": "str",
        "default_ssh_key_name": "str", "default_ssh_public_key": "str", "size_mapping": "size_mapping",
        "api_url": "url",
    },
    secret_settings=("token",),
    environment={"token": TOKEN_ENV_VARS},  # community.digitalocean's order
    secret_environment=TOKEN_ENV_VARS,
    create_inputs=(
        ("region", ("default_region",), ("backend_region_id", "region")),
        ("image", ("default_image",), ("backend_image_id", "image")),
        ("size", ("default_size", "size_mapping"), ("backend_size_id", "size", "size_slug")),
    ),
    catalogue_keys=("region", "size", "image"),
    plan=plan,
    power_states=("off", "active"),
    check_settings=check_settings,
    probe_failure=probe_failure,
    health=health,
    diagnose=diagnose,
)
