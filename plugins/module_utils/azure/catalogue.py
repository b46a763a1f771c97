# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Azure's catalogue, read once per pass and offering before any order is approved, and the verdict
on the machine an order asks for (location, VM size, marketplace image) against it.

``read_catalogue`` makes the calls (the subscription's locations, the VM sizes of each location
named, each distinct image once per location); the verdicts are pure functions of what it read.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import normalize_location, plain
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import InvalidImage, parse_image

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
    sizes, images = {}, {}
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
    return {"locations": sorted(locations), "sizes": sizes, "images": images}


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
