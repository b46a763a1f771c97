# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Filters that carry backend results back to Waldur: metadata updates, usage rows, API call
counts, and the lines naming what a pass changed or would change.

The filters that turn orders into backend items are in ``backend_items.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import figures_to_usages
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import like, unpack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import hex_uuid, normalize_uuid


def unpacked(value, what):
    """The items of a list or packed list (``core/packed``), or a filter error naming ``what``."""
    try:
        return unpack(value, what)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def listed(step, name):
    """A registered step's list ``name``: as it is, or read back from ``<name>_packed``; a step
    that did not run (skipped, or not a result at all) lists nothing."""
    if not isinstance(step, dict):
        return []
    packed = step.get(name + "_packed")
    return unpacked(packed, name + "_packed") if packed is not None else step.get(name) or []


def metadata_updates(results, resources):
    """Backend results + Waldur resources -> ``waldur_resource_metadata`` items, only changed ones
    (packed when the results were, see core/packed)."""
    current = {}
    for resource in unpacked(resources, "resources"):
        current[normalize_uuid(resource["uuid"])] = resource.get("backend_metadata") or {}
    updates = []
    for result in unpacked(results, "results"):
        metadata = result.get("backend_metadata")
        if result.get("failed") or not metadata:
            continue
        resource_uuid = normalize_uuid(result["resource_uuid"])
        if current.get(resource_uuid) != metadata:
            updates.append({"resource_uuid": resource_uuid, "backend_metadata": metadata,
                            "current_metadata": current.get(resource_uuid, {})})
    return like(updates, results)


def usage_rows(machines, resources, components=None):
    """Backend info + Waldur resources -> ``waldur_usage`` rows (packed when the machines were).

    A machine's ``figures`` (cores, ram_mb, disk_mb) are mapped onto ``components``
    (the offering's ``backend_components``) here, so the backend need not know Waldur's
    components; a machine that carries ``usages`` instead is taken as already mapped.
    Machines that were not found or have no usages are left out (never zeros).

    Usage is never lost quietly: a resource whose backend id the backend module refused
    (``bad_backend_id``: not an id of this backend, or of another subscription), and every
    resource sharing its backend id with another, gets a row with a ``problem`` and no usages,
    which ``waldur_usage`` reports as a failed item naming the resource; the others are billed."""
    holders = {}
    for resource in unpacked(resources, "resources"):
        if resource.get("backend_id"):
            holders.setdefault(str(resource["backend_id"]).lower(), []).append(resource)
    measured = {}
    for machine in unpacked(machines, "machines"):
        measured.setdefault(str(machine.get("backend_id") or "").lower(), machine)
    rows = []
    for key, sharing in holders.items():
        for resource in sharing:
            row = {"resource_uuid": normalize_uuid(resource["uuid"]), "resource_name": resource.get("name") or "",
                   "usages": {}}
            problem = _usage_problem(resource, sharing, measured.get(key))
            if problem:
                rows.append(dict(row, problem=problem))
                continue
            machine = measured.get(key) or {}
            if not machine.get("found"):
                continue
            usages = figures_to_usages(machine["figures"], components) if machine.get("figures") \
                else machine.get("usages")
            if usages:
                rows.append(dict(row, usages=usages))
    return like(rows, machines)


def _usage_problem(resource, sharing, machine):
    """Why no usage can be sent for ``resource`` (its backend id is shared, or the backend
    refused it), or None."""
    others = [other for other in sharing if other is not resource]
    if others:
        return ("no usage sent: its backend id %s is also the backend id of resource %s; give each resource its "
                "own machine in Waldur" % (resource["backend_id"], ", ".join(
                    "%s (%s)" % (other.get("name") or "", normalize_uuid(other["uuid"])) for other in others)))
    if machine and machine.get("bad_backend_id"):
        return "no usage measured: backend id %s: %s" % (resource["backend_id"], machine.get("msg") or "refused")
    if machine and machine.get("read_failed"):
        return "no usage measured: its machine %s %s" % (resource["backend_id"], machine.get("msg") or "could not be read")
    return None


def backend_ids(resources):
    """Waldur resources -> their backend ids, in order (packed when the resources were)."""
    return like([str(resource.get("backend_id") or "") for resource in unpacked(resources, "resources")], resources)


def recoverable_resources(resources, machines):
    """Waldur resources + measured machines -> ``waldur_resource_state`` items: the ``Erred``
    resources whose machine was found (an erred Update leaves the machine running on)."""
    found = set(str(machine.get("backend_id") or "").lower() for machine in unpacked(machines, "machines")
                if machine.get("found"))
    return [{"resource_uuid": resource["uuid"], "name": resource.get("name")}
            for resource in unpacked(resources, "resources")
            if resource.get("state") == "Erred" and str(resource.get("backend_id") or "").lower() in found]


def healed_resources(resources, results):
    """Waldur resources + membership results -> ``waldur_resource_state`` items: the ``Erred``
    resources whose machine this pass found and set (a result that did not fail and carries
    backend metadata). An erred Update leaves its resource Erred although the machine runs on."""
    healthy = set(normalize_uuid(result.get("resource_uuid")) for result in unpacked(results, "results")
                  if not result.get("failed") and result.get("backend_metadata"))
    return [{"resource_uuid": resource["uuid"], "name": resource.get("name")}
            for resource in unpacked(resources, "resources")
            if resource.get("state") == "Erred" and normalize_uuid(resource.get("uuid")) in healthy]


def api_call_count(results):
    """Total API calls reported by registered module results: batch modules report
    ``{reads, writes, retries}`` (reads and writes count), the backend info and audit modules
    still a number; skipped tasks count nothing."""
    total = 0
    for result in results or []:
        calls = result.get("api_calls") if isinstance(result, dict) else None
        if isinstance(calls, dict):
            total += int(calls.get("reads") or 0) + int(calls.get("writes") or 0)
        elif isinstance(calls, int) and not isinstance(calls, bool):
            total += calls
    return total


def change_lines(steps, resources=None, limit=None):
    """Registered results of batch modules -> one line per item that changed (or, in check mode,
    would change): ``<name> (resource <uuid>): <msg>``, the name from the item or ``resources``.
    A dry run is read for what it would do, and the modules' results cross the pass packed.
    With ``limit``, more lines than that end as the first ``limit`` and ``and N more``."""
    if isinstance(steps, dict):
        steps = [steps]
    if not isinstance(steps, (list, tuple)):
        raise AnsibleFilterError("change_lines expects a list of registered module results, got %s"
                                 % type(steps).__name__)
    names = dict((hex_uuid(resource.get("uuid")), resource.get("name"))
                 for resource in unpacked(resources, "resources") if isinstance(resource, dict))
    lines = []
    for step in steps:
        for item in listed(step, "results"):
            if not (isinstance(item, dict) and item.get("changed") and item.get("msg")):
                continue
            uuid = item.get("resource_uuid")
            name = item.get("resource_name") or names.get(hex_uuid(uuid))
            what = "%s (resource %s)" % (name, uuid) if name else "resource %s" % uuid
            lines.append("%s: %s" % (what, " ".join(str(item["msg"]).split())))
    if limit is not None and len(lines) > int(limit):
        lines = lines[:int(limit)] + ["and %d more" % (len(lines) - int(limit))]
    return lines


class FilterModule(object):
    """Order and resource glue for the site agent passes: results back to Waldur."""

    def filters(self):
        return {
            "metadata_updates": metadata_updates,
            "usage_rows": usage_rows,
            "backend_ids": backend_ids,
            "recoverable_resources": recoverable_resources,
            "healed_resources": healed_resources,
            "api_call_count": api_call_count,
            "change_lines": change_lines,
        }
