# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""What the Azure audit reads: the subscription's resource groups, virtual machines and the
objects of the shared group, for one offering, from listings only. Judging what is read
(and deleting) is the audit module's (azure_audit) with agent/audit.py.

Besides the keys agent/audit.py documents, each holding carries ``youngest_at`` (the creation
time of its youngest object: for a dedicated group, of anything in the group, from this run's listing
of the subscription's resources with ``createdTime``) and ``unmarked`` (labels of what in the holding's group does not carry the
holding's owner mark, e.g. ``virtual machine db (no owner tag)``; empty for a shared-group chain,
which is its marked objects only) and ``object_tags`` (``[(ARM id, tags)]`` of the objects that
carry the holding's owner mark: the group of a dedicated chain, each object of a shared one; the
audit reads its marks from them and writes them there)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import plain, power_state
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import (
    InvalidAzureId,
    build_vm_id,
    is_dedicated_group,
    parse_resource_id,
    parse_vm_id,
    vm_name_of_companion,
    vm_name_of_dedicated_group,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import KIND_LABELS, kind_of, list_group_contents, sort_contents
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import (
    OFFERING_TAG,
    RESOURCE_TAG,
    owner_of,
    tag_filter,
    tag_value,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import run_batch
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import oldest, parse_time
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import is_uuid, normalize_uuid

# Listings run side by side, at most this many at a time.
MAX_LISTINGS = 4
POWER = {"running": "on", "starting": "on", "deallocated": "off", "deallocating": "off",
         "stopped": "stopped", "stopping": "stopped"}


def _lower(value):
    return str(value or "").lower()


def youngest(values):
    """The latest of some times, or None when none of them is a time."""
    moments = [moment for moment in (parse_time(value) for value in values) if moment is not None]
    return max(moments) if moments else None


def owners(obj):
    """``(resource uuid, offering uuid)`` of an object's owner tags (None where absent). The SDK
    builds its attributes on every access, so the tags are read once."""
    tags = getattr(obj, "tags", None) or {}
    offering = tag_value(tags, OFFERING_TAG)
    return owner_of({"tags": tags}), normalize_uuid(offering) if is_uuid(offering) else None


class Listing:
    """What the subscription holds for one offering, from listings only."""

    def __init__(self, module, clients, offering_uuid, deadline):
        self.module = module
        self.clients = clients
        self.offering_uuid = offering_uuid
        self.deadline = deadline
        self.subscription = _lower(clients.subscription_id)
        self.notes = []
        self.holdings = []
        self.machines = {}

    def _list(self, what, function, *args, **kwargs):
        return self.clients.listing(what, function, *args, **kwargs)

    def _group_contents(self, group):
        """The objects of a group with their creation times; None when the group is gone."""
        return list_group_contents(self.clients, group, deadline=self.deadline, created_time=True)

    def run(self, shared_group):
        resources = self.clients.resource
        machines = self.clients.compute.virtual_machines
        jobs = [
            lambda: self._list("listing the resource groups tagged %s=%s" % (OFFERING_TAG, self.offering_uuid),
                               resources.resource_groups.list, filter=tag_filter(self.offering_uuid, OFFERING_TAG)),
            lambda: self._list("listing the virtual machines of the subscription", machines.list_all),
            lambda: self._list("listing the power states of the virtual machines", machines.list_all,
                               status_only="true"),
            # Everything in the subscription with its creation time, in pages: what else the groups hold
            # and how young it is, without a call per group.
            lambda: self._list("listing the resources of the subscription", resources.resources.list,
                               expand="createdTime"),
        ]
        groups, vms, statuses, contents = self._together(jobs)
        power = dict((_lower(vm.id), power_state(getattr(vm, "instance_view", None))) for vm in statuses)
        dedicated = {}
        for group in groups:
            owner, offering = owners(group)
            if offering != self.offering_uuid:
                continue
            if owner is None:
                self.notes.append("resource group %s carries this offering's tag but no %s tag; it is left out"
                                  % (group.name, RESOURCE_TAG))
                continue
            name = group.name
            dedicated[_lower(name)] = {"name": name, "id": group.id, "owner": owner, "vms": [],
                                       "tags": dict(getattr(group, "tags", None) or {})}
        shared = {}
        if shared_group:
            shared[_lower(shared_group)] = shared_group
        for vm in vms:
            vm_id = vm.id
            try:
                _subscription, group, name = parse_vm_id(vm_id)
            except InvalidAzureId:
                continue
            key = _lower(vm_id)
            state = power.get(key)
            size = plain(getattr(getattr(vm, "hardware_profile", None), "vm_size", None))
            created = getattr(vm, "time_created", None)
            owner, offering = owners(vm)
            self.machines[key] = {
                "id": vm_id,
                "object": "virtual machine %s in resource group %s (%s, %s)" % (name, group, size, state or "?"),
                "power": POWER.get(state), "size": size, "created_at": created,
                "legacy_name": owner is None and is_dedicated_group(group, name),
            }
            if _lower(group) in dedicated:
                dedicated[_lower(group)]["vms"].append({"id": vm_id, "name": name, "created_at": created})
            elif offering == self.offering_uuid:
                shared.setdefault(_lower(group), group)
        in_group = {}
        for item in contents:
            parts = parse_resource_id(getattr(item, "id", None))
            if parts and _lower(parts["group"]) in dedicated:
                in_group.setdefault(_lower(parts["group"]), []).append(item)
        self._dedicated_holdings(dedicated, in_group)
        for group in sorted(set(shared) - set(dedicated)):
            self._shared_holdings(shared[group])
        return self.holdings, self.machines

    def _together(self, jobs):
        outcomes = run_batch(jobs, lambda job: {"value": job()}, max_workers=MAX_LISTINGS,
                             deadline_seconds=max(1.0, self.deadline - time.monotonic()))
        for outcome in outcomes:
            if "value" not in outcome:
                self.module.fail_json(msg=outcome.get("msg") or "listing failed", api_calls=self.clients.api_calls)
        return [outcome["value"] for outcome in outcomes]

    def _dedicated_holdings(self, dedicated, in_group):
        # Every group's contents, from this run's listing: how old is what is in it (its youngest object
        # bounds the cleanup's age), and what in it does not carry the group's owner mark.
        for key, entry in dedicated.items():
            listed = in_group.get(key, [])
            vm_name = vm_name_of_dedicated_group(entry["name"])
            match = set(_lower(vm["id"]) for vm in entry["vms"])
            if vm_name:
                match.add(_lower(build_vm_id(self.clients.subscription_id, entry["name"], vm_name)))
            machines = ", ".join("virtual machine %s" % vm["name"] for vm in entry["vms"]) or "no virtual machine"
            created = [vm["created_at"] for vm in entry["vms"]]
            listed_times = [getattr(item, "created_time", None) for item in listed]
            self.holdings.append({
                "key": _lower(entry["id"]), "owner": entry["owner"], "kind": "group", "group": entry["name"],
                "object": "resource group %s (a chain of its own: %s)" % (entry["name"], machines),
                "ids": [entry["id"]], "created_at": oldest(created) if created else oldest(listed_times),
                "youngest_at": youngest(created + listed_times),
                "unmarked": sort_contents(listed, entry["owner"])[1],
                "match": match, "marked": True, "object_tags": [(entry["id"], entry["tags"])],
            })

    def _shared_holdings(self, group):
        listed = self._group_contents(group)
        if listed is None:
            self.notes.append("resource group %s does not exist; nothing of this offering is in it" % group)
            return
        chains = {}
        for item in listed:
            (owner, offering), kind = owners(item), kind_of(item)
            if owner is None or kind is None or offering != self.offering_uuid:
                continue
            vm_name = vm_name_of_companion(kind, item.name)
            if kind == "disk":
                parts = parse_resource_id(getattr(item, "managed_by", None))
                vm_name = parts["name"] if parts else None
            chains.setdefault(owner, {}).setdefault(_lower(vm_name) if vm_name else None, []).append((kind, item))
        for owner, by_vm in sorted(chains.items()):
            loose = by_vm.pop(None, [])
            if loose and len(by_vm) == 1:  # a disk whose machine is gone belongs to the one chain there is
                list(by_vm.values())[0].extend(loose)
            elif loose:
                by_vm[None] = loose
            for vm_key, items in sorted(by_vm.items(), key=lambda pair: pair[0] or ""):
                names = dict((kind, item.name) for kind, item in items)
                vm_name = names.get("vm") or (next((vm_name_of_companion(kind, item.name) for kind, item in items
                                                    if kind != "disk"), None))
                labels = ", ".join("%s %s" % (KIND_LABELS[kind], item.name) for kind, item in items)
                self.holdings.append({
                    "key": "%s/%s/%s" % (_lower(group), owner, vm_key), "owner": owner, "kind": "shared",
                    "group": group, "objects": [(kind, item.name) for kind, item in items], "vnet": names.get("vnet"),
                    "object": "in resource group %s: %s" % (group, labels),
                    "ids": [item.id for _kind, item in items],
                    "created_at": oldest([getattr(item, "created_time", None) for _kind, item in items]),
                    "youngest_at": youngest([getattr(item, "created_time", None) for _kind, item in items]),
                    # the holding is the objects carrying its owner's mark, nothing else of the group
                    "unmarked": [],
                    "match": set([_lower(build_vm_id(self.clients.subscription_id, group, vm_name))]) if vm_name else set(),
                    "marked": True,
                    "object_tags": [(item.id, dict(getattr(item, "tags", None) or {})) for _kind, item in items],
                })

    def backend_key(self, backend_id):
        try:
            subscription = parse_vm_id(backend_id)[0]
        except InvalidAzureId:
            return None
        return _lower(backend_id) if _lower(subscription) == self.subscription else None
