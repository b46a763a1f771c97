# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Plain facts of droplets, from python-digitalocean objects or the API's JSON."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import is_resource_tag


def _value(obj, name, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _slug(value):
    if isinstance(value, dict):
        return value.get("slug") or value.get("name") or value.get("id")
    return value


def _image_id(value):
    return value.get("id") if isinstance(value, dict) else None


def droplet_networks(networks):
    """``{public_ipv4, private_ipv4, public_ipv6}`` from DigitalOcean's ``networks``."""
    networks = networks if isinstance(networks, dict) else {}
    found = {"public_ipv4": None, "private_ipv4": None, "public_ipv6": None}
    for net in networks.get("v4") or []:
        key = {"public": "public_ipv4", "private": "private_ipv4"}.get(net.get("type"))
        if key and not found[key]:
            found[key] = net.get("ip_address")
    for net in networks.get("v6") or []:
        if net.get("type", "public") == "public" and not found["public_ipv6"]:
            found["public_ipv6"] = net.get("ip_address")
    return found


def droplet_facts(droplet):
    """Plain facts of a droplet (a library ``Droplet`` or the API's JSON)."""
    size_slug = _value(droplet, "size_slug") or _slug(_value(droplet, "size"))
    return {
        "id": _value(droplet, "id"),
        "name": _value(droplet, "name"),
        "status": _value(droplet, "status"),
        "region": _slug(_value(droplet, "region")),
        "size_slug": size_slug,
        "image": _slug(_value(droplet, "image")),
        # an order may name its image by id: telling a copy of the order from a look-alike needs both
        "image_id": _image_id(_value(droplet, "image")),
        "vcpus": _value(droplet, "vcpus"),
        "memory": _value(droplet, "memory"),
        "disk": _value(droplet, "disk"),
        "networks": droplet_networks(_value(droplet, "networks")),
        "tags": list(_value(droplet, "tags") or []),
        "created_at": _value(droplet, "created_at"),
    }


def backend_metadata(facts):
    """What Waldur stores as the resource's ``backend_metadata`` (the upstream agent's shape)."""
    keys = ("id", "name", "status", "region", "size_slug", "image", "created_at", "networks")
    return {"backend_type": "digitalocean", "droplet": dict((key, facts.get(key)) for key in keys)}


def resource_tags(tags):
    """The ``waldur-resource:`` tags among ``tags``, lower-cased."""
    return set(str(tag).lower() for tag in tags or [] if is_resource_tag(tag))


def describe_droplet(facts):
    """One droplet as the operator tells it from a look-alike: id, name, region, size, created_at."""
    return "%s %s (%s, %s, created %s)" % (facts["id"], facts.get("name"), facts.get("region"),
                                           facts.get("size_slug"), facts.get("created_at") or "at an unknown time")
