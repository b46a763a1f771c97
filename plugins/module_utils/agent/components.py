# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Backend figures and the offering's components.

``figures_to_usages`` maps what a backend measured (cores, MiB of memory, MiB of
disk) onto the offering's components; ``size_for_limits`` picks the backend
size whose component values equal a resource's limits; ``limits_equal`` and
``limits_cover`` are the one way two limit mappings are compared.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# figure -> component names that mean it (lower-cased)
FIGURE_ALIASES = {
    "cores": ("cpu", "cores", "vcpu", "vcores"),
    "ram_mb": ("ram", "mem", "memory"),
    "disk_mb": ("disk", "storage"),
}
_ALIAS_TO_FIGURE = dict((alias, figure) for figure, aliases in FIGURE_ALIASES.items() for alias in aliases)


def figure_for_component(name, component=None):
    """Which figure a component measures: its ``backend_name`` if set, else by its name.

    Returns None for a component no figure describes.
    """
    backend_name = str((component or {}).get("backend_name") or "").strip().lower()
    for key in (backend_name, str(name or "").strip().lower()):
        if not key:
            continue
        if key in FIGURE_ALIASES:
            return key
        if key in _ALIAS_TO_FIGURE:
            return _ALIAS_TO_FIGURE[key]
        if key == backend_name:
            # an explicit backend_name that names nothing is not overridden by the name
            return None
    return None


def _number(value):
    """An int when the value is whole (4096, not 4096.0), else the float."""
    value = float(value)
    return int(value) if value.is_integer() else value


def unit_factor(component):
    try:
        factor = float((component or {}).get("unit_factor") or 1)
    except (TypeError, ValueError):
        factor = 1.0
    return factor or 1.0


def figures_to_usages(figures, backend_components):
    """``{component: amount}`` for every component a figure describes.

    ``figures`` holds ``cores``, ``ram_mb``, ``disk_mb`` (any may be missing or None);
    ``backend_components`` is the offering's mapping ``{name: {unit_factor, backend_name, ...}}``.
    Each amount is the figure divided by the component's ``unit_factor`` (default 1).
    A component no figure describes is left out, never reported as zero.
    """
    usages = {}
    for name, component in (backend_components or {}).items():
        figure = figure_for_component(name, component)
        if figure is None or (figures or {}).get(figure) is None:
            continue
        usages[name] = _number(float(figures[figure]) / unit_factor(component))
    return usages


def limit_values_equal(left, right):
    """The one rule for two limit values: numbers by value (``2 == 2.0 == "2"``), anything else as text."""
    try:
        return float(left) == float(right)
    except (TypeError, ValueError):
        return str(left) == str(right)


def limits_cover(wanted, current):
    """Whether ``current`` holds every key of ``wanted`` with an equal value.

    A key missing from ``current`` is not 0: Waldur leaves out what it never set, and a
    missing limit must not pass for a zero one (nor the other way round).
    """
    current = current or {}
    return all(key in current and limit_values_equal(value, current[key]) for key, value in (wanted or {}).items())


def limits_equal(left, right):
    """Whether two limit mappings have the same keys with equal values (None is empty)."""
    left, right = left or {}, right or {}
    return set(left) == set(right) and limits_cover(left, right)


def size_matches_limits(values, limits):
    """Whether a ``size_mapping`` entry's every component value equals ``limits`` (limits may hold more)."""
    return bool(values) and limits_cover(values, limits)


def size_for_limits(size_mapping, limits):
    """The first size slug whose every component value equals ``limits``; None when none does."""
    for slug, values in (size_mapping or {}).items():
        if size_matches_limits(values, limits):
            return slug
    return None
