# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Azure's catalogue, read once per pass and offering before any order is approved, and the verdict
on the machine an order asks for (location, VM size, marketplace image) against it.

``read_catalogue`` makes the calls (the subscription's locations, the VM sizes of each location
named, each distinct image once per location); the verdicts are pure functions of what it read.

The quota check (``read_quota``, ``quota_holds``): per location, the subscription's vCPU quotas (Usage -
List: the regional total ``cores`` and one per VM family) and each VM size's family (Resource Skus -
List, as ARM names the family's quota); a machine needs its size's vCPUs (``numberOfCores`` of the VM
sizes listing) in both. The pending orders that fit in what is left are approved in the order they were
placed; the rest are held (left ``pending-provider``) with a line naming the quota, its use and the need.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import normalize_location, plain
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import InvalidImage, parse_image
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import require

NAMES_SHOWN = 12


def _names(names):
    names = sorted(str(name) for name in names)
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (" and %d more" % (len(names) - NAMES_SHOWN) if len(names) > NAMES_SHOWN else "")


def image_text(image):
    """``publisher:offer:sku:version`` of an image, or None when it is not a marketplace reference."""
    try:
        parts = parse_image(image)
    except InvalidImage:
        return None
    return "%(publisher)s:%(offer)s:%(sku)s:%(version)s" % parts


def read_catalogue(clients, machines, deadline=None):
    """``{locations, sizes, images}``: the subscription's locations, the VM sizes offered in each
    location the machines name (one listing per location), and for each distinct marketplace image
    per location whether it exists (its versions, or the one version asked for). An AzureError of a
    read raises: nothing is judged on half a catalogue."""
    locations = set(normalize_location(plain(entry.get("name"))) for entry in clients.locations()
                    if isinstance(entry, dict) and entry.get("name"))
    sizes, images, cores = {}, {}, {}
    compute = None
    for machine in machines:
        location = normalize_location(machine.get("location") or "")
        if location not in locations:
            continue
        if location not in sizes:
            listed = clients.listing("listing the VM sizes of location %s" % location,
                                     clients.compute.virtual_machine_sizes.list, location)
            if not listed:
                # ARM lists VM sizes for every location it has: none at all would reject every order
                raise AzureUnproven("ARM listed no VM size at all in location %s; that is not a catalogue to judge "
                                    "orders on" % location)
            sizes[location] = sorted(plain(size.name) for size in listed)
            # the vCPUs a machine of each size takes from the location's quotas
            cores[location] = dict((plain(size.name).lower(), getattr(size, "number_of_cores", None))
                                   for size in listed)
        text = image_text(machine.get("image"))
        if text is None or (location, text.lower()) in images:
            continue
        compute = compute or clients.compute
        parts = parse_image(machine["image"])
        if parts["version"].lower() == "latest":
            found = clients.read("listing the versions of image %s in %s" % (text, location),
                                 compute.virtual_machine_images.list, location, parts["publisher"], parts["offer"],
                                 parts["sku"])
            found = bool(found)
        else:
            found = clients.read("reading image %s in %s" % (text, location), compute.virtual_machine_images.get,
                                 location, parts["publisher"], parts["offer"], parts["sku"],
                                 parts["version"]) is not None
        images[(location, text.lower())] = found
    return {"locations": sorted(locations), "sizes": sizes, "images": images, "cores": cores}


def machine_problem(location, size, image, catalogue):
    """Why Azure would refuse a machine of ``size`` from ``image`` in ``location`` (reasons joined),
    or None when the catalogue holds them together."""
    problems = []
    location = normalize_location(location or "")
    text = image_text(image)
    if text is None:
        try:
            parse_image(image)
        except InvalidImage as error:
            problems.append(str(error))
    if location not in catalogue["locations"]:
        problems.append("location %r is not an Azure location of the subscription (locations: %s)"
                        % (location, _names(catalogue["locations"])))
        return "; ".join(problems)
    offered = catalogue["sizes"].get(location) or []
    if str(size or "").lower() not in set(name.lower() for name in offered):
        problems.append("size %r is not offered in location %r (offered there: %s)" % (size, location, _names(offered)))
    if text is not None and not catalogue["images"].get((location, text.lower()), True):
        problems.append("image %r is not in the marketplace of location %r" % (text, location))
    return "; ".join(problems) or None


def settings_problems(defaults, catalogue):
    """The offering's own defaults that name what the catalogue lacks, each naming its key."""
    problems = []
    location = normalize_location((defaults or {}).get("default_location") or "")
    if location and location not in catalogue["locations"]:
        problems.append("backend_settings.default_location: location %r is not an Azure location of the "
                        "subscription (locations: %s)" % (location, _names(catalogue["locations"])))
    elif location:
        size = defaults.get("default_size")
        offered = catalogue["sizes"].get(location)
        if size and offered is not None and str(size).lower() not in set(name.lower() for name in offered):
            problems.append("backend_settings.default_size: size %r is not offered in location %r" % (size, location))
        image = defaults.get("default_image")
        if image:
            text = image_text(image)
            if text is None:
                problems.append("backend_settings.default_image: %s" % machine_problem(location, None, image, catalogue)
                                .split("; ", 1)[0])
            elif not catalogue["images"].get((location, text.lower()), True):
                problems.append("backend_settings.default_image: image %r is not in the marketplace of location %r"
                                % (text, location))
    return problems


# ---------------------------------------------------------------- the quota before approval

# The name of the total regional vCPU quota in ARM's usages ("Total Regional vCPUs").
REGIONAL = "cores"
HELD_ADVICE = "left pending-provider (raise the quota, or free vCPUs in %s)"


def read_quota(clients, locations, with_families=True):
    """``{location: {"usages": {name (lower case): {name, limit, used}}, "families": {size (lower case):
    family}, "source": call}}`` for each of ``locations``: the subscription's Compute quotas there (Usage -
    List) and the family of each VM size (Resource Skus - List: the family is the name of the size's vCPU
    quota; not read without ``with_families``). A read that proves nothing raises, and so does a usage
    listing without the regional total."""
    quota = {}
    for location in sorted(set(normalize_location(location) for location in locations if location)):
        usages = require(clients.vcpu_usages(location), "the vCPU quotas in %s" % location)
        listed = {}
        for usage in usages:
            listed[usage["name"]["value"].lower()] = {"name": usage["name"]["value"], "limit": usage["limit"],
                                                      "used": usage["currentValue"]}
        if REGIONAL not in listed:
            # every subscription has the regional total: a listing without it is not the quotas
            raise AzureUnproven("%s: ARM's usages name no %r (the total regional vCPUs); nothing is approved on them"
                                % (usages.source, REGIONAL))
        families, skus_source = {}, None
        if with_families:
            skus = require(clients.resource_skus(location), "the VM sizes' families in %s" % location)
            families = dict((sku["name"].lower(), sku["family"]) for sku in skus
                            if sku["resourceType"].lower() == "virtualmachines" and sku.get("family"))
            skus_source = skus.source
        quota[location] = {"usages": listed, "families": families, "source": usages.source,
                           "skus_source": skus_source}
    return quota


def machine_needs(machine, catalogue, quota):
    """``(location, size, vCPUs, [quota names])``: the vCPUs a machine of ``machine``'s size takes, in its
    family's quota and in the regional total of its location. Raises AzureUnproven when what was read
    does not say (a size without ``numberOfCores``, a size the SKUs give no family, a family without a
    quota in the usages): nothing is approved on a guess."""
    location = normalize_location(machine.get("location") or "")
    size = str(machine.get("size") or "")
    read = quota[location]
    cores = (catalogue.get("cores") or {}).get(location, {}).get(size.lower())
    if not isinstance(cores, int) or isinstance(cores, bool) or cores < 0:
        raise AzureUnproven("ARM's VM sizes of location %s give no numberOfCores for %s; its vCPUs are not known"
                            % (location, size))
    family = read["families"].get(size.lower())
    if not family:
        raise AzureUnproven("%s: ARM's SKUs give no family for VM size %s; its vCPU quota is not known"
                            % (read["skus_source"], size))
    if family.lower() not in read["usages"]:
        raise AzureUnproven("%s: ARM's usages hold no quota of VM family %s (size %s); it is not known"
                            % (read["source"], family, size))
    return location, size, cores, [family.lower(), REGIONAL]


def _quota_words(usage, location):
    if usage["name"].lower() == REGIONAL:
        return "Azure's total regional vCPU quota in %s" % location
    return "Azure's %s vCPU quota in %s" % (usage["name"], location)


def quota_holds(machines, catalogue, quota, rejected=()):
    """The pending machines that do not fit in their location's vCPU quotas, as ``held`` entries
    (``order_uuid``, ``resource_uuid``, ``resource_name``, ``msg``), in the order of ``machines``
    (their placement). A machine needs its size's vCPUs both in its family's quota and in the regional
    total. An executing order's machine (approved by an earlier pass) is never held: its vCPUs are
    counted first, whether or not it already exists. Then each pending machine that fits in what is
    left takes its vCPUs; one that does not is held, naming each quota it would exceed. ``rejected``:
    the orders the catalogue turns down (they take nothing)."""
    rejected = set(rejected or ())
    wanted = [machine for machine in machines if machine["order_uuid"] not in rejected]
    planned = {}
    for machine in wanted:
        if machine.get("executing"):
            location, _size, cores, names = machine_needs(machine, catalogue, quota)
            for name in names:
                planned[(location, name)] = planned.get((location, name), 0) + cores
    held = []
    for machine in wanted:
        if machine.get("executing"):
            continue
        location, size, cores, names = machine_needs(machine, catalogue, quota)
        usages = quota[location]["usages"]
        short = [name for name in names
                 if usages[name]["used"] + planned.get((location, name), 0) + cores > usages[name]["limit"]]
        if not short:
            for name in names:
                planned[(location, name)] = planned.get((location, name), 0) + cores
            continue
        parts = []
        for name in short:
            before = planned.get((location, name), 0)
            parts.append("%s is %d and %d are in use%s" % (
                _quota_words(usages[name], location), usages[name]["limit"], usages[name]["used"],
                (", %d more going to orders placed before it" % before) if before else ""))
        held.append({"order_uuid": machine["order_uuid"], "resource_uuid": machine.get("resource_uuid"),
                     "resource_name": machine.get("resource_name") or "",
                     "msg": "%s; this order's %s needs %d vCPU%s more; %s" % (
                         "; ".join(parts), size, cores, "" if cores == 1 else "s", HELD_ADVICE % location)})
    return held


def headroom(location, quota, size=None):
    """A location's vCPU headroom as ``health`` shows it: ``vCPUs westeurope: 8 of 10`` and, for ``size``,
    its family's (``(standardBSFamily 4 of 10)``)."""
    location = normalize_location(location)
    read = quota[location]
    regional = read["usages"][REGIONAL]
    text = "vCPUs %s: %d of %d" % (location, regional["used"], regional["limit"])
    family = read["families"].get(str(size or "").lower())
    usage = read["usages"].get(family.lower()) if family else None
    if usage:
        text += " (%s %d of %d)" % (usage["name"], usage["used"], usage["limit"])
    return text
