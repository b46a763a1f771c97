# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Names derived from Waldur identifiers: DigitalOcean tags and names."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid

RESOURCE_TAG_PREFIX = "waldur-resource:"
# The audit's mark of a droplet whose resource was first seen gone (do_audit): an order may not set it
# either, or a droplet could be ordered with an old mark and deleted by audit_cleanup early.
ORPHAN_MARK_PREFIX = "waldur-orphan-since:"


def resource_tag(resource_uuid):
    """The DigitalOcean tag that binds a droplet to its Waldur resource."""
    return RESOURCE_TAG_PREFIX + normalize_uuid(resource_uuid)


def droplet_name(name=None, slug=None, resource_uuid=None):
    """A valid droplet hostname: [a-z0-9.-], no leading/trailing '-'."""
    base = name or slug or ("waldur-%s" % normalize_uuid(resource_uuid)[:8] if resource_uuid else "")
    cleaned = re.sub(r"[^A-Za-z0-9.-]", "-", str(base)).strip("-").lower()
    return cleaned or "waldur-droplet"


def derived_names(name=None, resource_uuid=None, slug=None):
    """Every droplet name the agent derives for a resource: from its name (or slug) and the
    ``waldur-<8 hex>`` name it falls back to. A droplet carrying the resource's tag under another
    name was not made by the agent for it (a copied tag never makes a droplet ours)."""
    names = set([droplet_name(resource_uuid=resource_uuid)]) if resource_uuid else set()
    for given in (name, slug):
        if given:
            names.add(droplet_name(given, resource_uuid=resource_uuid))
    return names


def is_resource_tag(tag):
    """True for a tag reserved for the agent: ``waldur-resource:`` in any case, once stripped.

    The one rule for every caller (do_droplet, the order filters, ownership reads). Any
    case, because the tag is the agent's mark of ownership and DigitalOcean keeps a tag's
    first capitalisation as canonical: a user's ``Waldur-Resource:<uuid>`` must not claim
    (or shadow) a resource's droplet. Stripped, because do_droplet strips tags before use.
    """
    return str(tag).strip().lower().startswith(RESOURCE_TAG_PREFIX)


def droplet_tags(tags, resource_uuid):
    """``(tags, dropped)``: the ordered tags without reserved ones (so one order cannot
    claim another resource's droplet), de-duplicated, plus the resource's own tag."""
    own = resource_tag(resource_uuid)
    kept, dropped = [], []
    for tag in tags or []:
        tag = str(tag).strip()
        if not tag:
            continue
        if is_resource_tag(tag) or tag.lower().startswith(ORPHAN_MARK_PREFIX):
            dropped.append(tag)
        elif tag not in kept:
            kept.append(tag)
    return kept + [own], dropped


def ssh_key_name(resource_uuid):
    """Name of an SSH key the agent adds to DigitalOcean for a resource's public key."""
    return "waldur-%s" % normalize_uuid(resource_uuid)[:8]
