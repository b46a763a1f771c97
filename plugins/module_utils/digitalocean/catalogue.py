# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""DigitalOcean's catalogue, read once per pass and offering before any order is approved, and the
verdict on the droplet an order asks for (region, size, image) against it.

``read_catalogue`` makes the calls (two listings and one read per distinct image); everything else
is a pure function of what it read, so the verdicts are unit-tested without a cloud.

The quota check (``read_quota``, ``quota_holds``): the account's ``droplet_limit`` and how many
droplets it has, and which pending orders fit in what is left, in the order they were placed; the
rest are held (left ``pending-provider``) with a line naming the limit, its use and the need.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import (
    BOOLEAN,
    LIST,
    STRING,
    Shape,
    Unproven,
    is_absent,
    require,
)

# What the verdicts read of a region and a size (DigitalOcean's OpenAPI types).
REGION_SHAPE = Shape("region", required={"slug": STRING, "available": BOOLEAN, "sizes": LIST})
SIZE_SHAPE = Shape("size", required={"slug": STRING, "available": BOOLEAN, "regions": LIST})

# How many names a message lists before "and N more".
NAMES_SHOWN = 12
# The offering's own settings the catalogue checks (provider-side: a miss fails the offering).
DEFAULT_KEYS = ("default_region", "default_size", "default_image")


def _names(names):
    names = sorted(str(name) for name in names)
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (" and %d more" % (len(names) - NAMES_SHOWN) if len(names) > NAMES_SHOWN else "")


def image_key(image):
    """How an image is named in the catalogue: a slug, or an id as text."""
    return str(image).strip()


def read_catalogue(client, images):
    """``{regions, sizes, images}`` of the account: every region (``GET /v2/regions``) and size
    (``GET /v2/sizes``) with their availability, and each image of ``images`` (one read each, by
    slug or id: public images, the account's snapshots and custom images), None for one
    DigitalOcean does not have. A read that fails raises: nothing is judged on half a catalogue."""
    listed = {}
    for path, key, shape in (("regions/", "regions", REGION_SHAPE), ("sizes/", "sizes", SIZE_SHAPE)):
        listed[key] = client.listing(path, key, shape=shape)
        if not listed[key]:
            # DigitalOcean always has regions and sizes: an empty answer is no catalogue to reject orders on
            raise Unproven("DigitalOcean GET /v2/%s listed no %s at all; that is not a catalogue to judge orders on"
                           % (path, key), call="GET /v2/" + path)
    regions = dict((region["slug"], {"available": region["available"], "sizes": [str(size) for size in region["sizes"]]})
                   for region in listed["regions"])
    sizes = dict((size["slug"], {"available": size["available"], "regions": [str(region) for region in size["regions"]]})
                 for size in listed["sizes"])
    found = {}
    for image in images:
        key = image_key(image)
        if key and key not in found:
            raw = client.image(key)
            found[key] = None if is_absent(raw) else {
                "id": raw.get("id"), "slug": raw.get("slug"), "name": raw.get("name") or "",
                "type": raw.get("type") or "", "public": bool(raw.get("public")),
                "regions": [str(region) for region in raw.get("regions") or []],
                "status": raw.get("status") or "available"}
    return {"regions": regions, "sizes": sizes, "images": found}


def _listed_problem(kind, slug, listed, what, unavailable):
    """Why ``slug`` cannot be used: not in the catalogue's ``listed`` (named ``what``), or listed
    unavailable; None when it is listed and available."""
    if slug not in listed:
        return "%s %r is not %s (%ss: %s)" % (kind, slug, what, kind, _names(listed))
    if not listed[slug]["available"]:
        return "%s %r %s" % (kind, slug, unavailable)
    return None


def region_problem(region, catalogue):
    return _listed_problem("region", region, catalogue["regions"], "a DigitalOcean region",
                           "does not take new droplets (DigitalOcean lists it unavailable)")


def size_problem(size, catalogue):
    return _listed_problem("size", size, catalogue["sizes"], "a DigitalOcean droplet size",
                           "is not available for new droplets")


def image_problem(image, catalogue):
    key = image_key(image)
    if catalogue["images"].get(key) is None:
        return ("image %r is neither a DigitalOcean image nor a snapshot or custom image of the account" % key)
    if catalogue["images"][key]["status"] not in ("available", ""):
        return "image %r is %s, not available" % (key, catalogue["images"][key]["status"])
    return None


def droplet_problem(region, size, image, catalogue):
    """Why DigitalOcean would refuse to create a droplet of ``size`` from ``image`` in ``region``
    (one sentence per reason, joined), or None when the catalogue holds all three together."""
    problems = [problem for problem in (region_problem(region, catalogue), size_problem(size, catalogue),
                                        image_problem(image, catalogue)) if problem]
    region_ok = region in catalogue["regions"]
    if region_ok and size in catalogue["sizes"] and region not in catalogue["sizes"][size]["regions"]:
        problems.append("size %r is not offered in region %r (offered there: %s)" % (
            size, region, _names(catalogue["regions"][region]["sizes"])))
    image_found = catalogue["images"].get(image_key(image))
    if region_ok and image_found and image_found["regions"] and region not in image_found["regions"]:
        problems.append("image %r is not in region %r (it is in %s)" % (
            image_key(image), region, _names(image_found["regions"])))
    return "; ".join(problems) or None


def settings_problems(defaults, mapped_sizes, catalogue):
    """The offering's own settings that name what the catalogue lacks, each naming its key
    (``backend_settings.default_region``): the provider's to fix, never a customer's order."""
    problems = []
    checks = (("default_region", region_problem), ("default_size", size_problem), ("default_image", image_problem))
    for key, check in checks:
        value = (defaults or {}).get(key)
        if value not in (None, ""):
            problem = check(value, catalogue)
            if problem:
                problems.append("backend_settings.%s: %s" % (key, problem))
    for size in sorted(set(mapped_sizes or [])):
        problem = size_problem(size, catalogue)
        if problem:
            problems.append("backend_settings.size_mapping: %s" % problem)
    return problems


# ---------------------------------------------------------------- the quota before approval

# What an order that is held waits for (the end of its line).
HELD_ADVICE = "left pending-provider (raise the limit, or free a droplet)"


def read_quota(client):
    """``{droplet_limit, droplets}``: the account's limit (``GET /v2/account``) and how many
    droplets it has (``meta.total`` of ``GET /v2/droplets?per_page=1``), both from checked reads;
    a read that proves nothing raises, and nothing is approved on it."""
    account = require(client.account_limits(), "the account's droplet limit")
    count = require(client.droplet_count(), "the number of droplets")
    return {"droplet_limit": account["droplet_limit"], "droplets": count["total"]}


def _droplets(count):
    return "%d droplet%s" % (count, "" if count == 1 else "s")


def quota_holds(droplets, quota, rejected=()):
    """The pending droplets that do not fit in the account's droplet limit, as ``held`` entries
    (``order_uuid``, ``resource_uuid``, ``resource_name``, ``msg``), in the order of ``droplets``
    (their placement). Each droplet to create needs one more droplet. An executing order's (approved
    by an earlier pass) is never held: its droplet is counted first, whether or not it already
    exists, so a pending order is never approved on room that droplet may take. Then each pending
    order that fits in what is left takes its droplet; one that does not is held. ``rejected``:
    the orders the catalogue turns down (they take nothing)."""
    rejected = set(rejected or ())
    limit, existing = quota["droplet_limit"], quota["droplets"]
    wanted = [droplet for droplet in droplets if droplet["order_uuid"] not in rejected]
    planned = sum(1 for droplet in wanted if droplet.get("executing"))
    held = []
    for droplet in wanted:
        if droplet.get("executing"):
            continue
        if existing + planned + 1 <= limit:
            planned += 1
            continue
        before = (", %d more going to orders placed before it" % planned) if planned else ""
        held.append({"order_uuid": droplet["order_uuid"], "resource_uuid": droplet.get("resource_uuid"),
                     "resource_name": droplet.get("resource_name") or "",
                     "msg": "DigitalOcean's droplet limit is %d and %s exist%s%s; this order needs 1 more; %s"
                            % (limit, _droplets(existing), "s" if existing == 1 else "", before, HELD_ADVICE)})
    return held


def headroom(quota):
    """The account's headroom as ``health`` shows it: ``droplets 3 of 3 used``."""
    return "droplets %d of %d used" % (quota["droplets"], quota["droplet_limit"])
