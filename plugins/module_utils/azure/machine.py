# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""What every action on one machine shares: the calls with the batch deadline, reading the
machine and judging whose it is, the names of its chain, and its power.

``MachineWork`` is the base of ``removal.ChainRemoval``, ``build.ChainBuild`` and ``chain.VmChain``; ``RetryLater``
is the outcome ``retry`` of any of them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, outcome_unknown
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import (
    SizeCatalog,
    power_state,
    vm_addresses,
    vm_metadata,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.listings import LISTING_THRESHOLD, MachineListings, arm_key
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import (
    InvalidAzureId,
    machine_names,
    names_from_vm_id,
    names_in_group,
    vm_name_of_companion,
    vm_name_of_dedicated_group,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import kind_of
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.power_wait import PowerChangeFailed, PowerWaiter
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import (
    FAILED,
    FOREIGN,
    RESOURCE_TAG,
    RETRY,
    describe_owner,
    judge,
    owner_of,
    owner_tags,
    tag_filter,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError


class RetryLater(ItemError):
    """Nothing is wrong, but the item cannot finish now: Azure is still working on one of
    its objects, or a read failed once the machine exists. Outcome ``retry``: the order is
    left for the next pass, which finds the chain by its owner tag and finishes it."""


class MachineWork:
    """What every action on one machine shares (the state of one batch: clients, deadline, secrets)."""

    # ---- calls and reads ------------------------------------------------------------------
    def __init__(self, module, clients, deadline):
        self.module = module
        self.clients = clients
        self.check_mode = module.check_mode
        self.deadline = deadline
        self.sizes = SizeCatalog(clients, deadline)
        self._secret_lock = threading.Lock()
        # resource uuid -> backend id of a machine whose PUT ARM accepted, so an item cut
        # off by the batch deadline still reports the machine it made
        self.accepted_vms = {}
        # the power items' machines, from the subscription's listings (see plan_power)
        self._power_keys = frozenset()
        self._power_lock = threading.Lock()
        self._power_listed = None
        self._power_error = None
        # the power changes of the batch wait together (one read of their machines per round)
        self.power_waiter = PowerWaiter(clients, deadline, max_interval=max(1.0, float(
            getattr(clients, "polling_interval", None) or PowerWaiter.MAX_INTERVAL)))

    def _call(self, what, function, *args, **kwargs):
        return self.clients.call(what, function, *args, deadline=self.deadline, **kwargs)

    def _read(self, what, function, *args, **kwargs):
        return self.clients.read(what, function, *args, deadline=self.deadline, **kwargs)

    def _listing(self, what, function, *args, **kwargs):
        return self.clients.listing(what, function, *args, **kwargs)

    def _hide(self, value):
        # Belt and braces: whatever the module prints is scrubbed of this value.
        with self._secret_lock:
            self.module.no_log_values.add(value)

    def _check_subscription(self, names, backend_id):
        if names["subscription"].lower() != str(self.clients.subscription_id).lower():
            raise ItemError("backend id %s belongs to subscription %s, not to the configured subscription %s"
                            % (backend_id, names["subscription"], self.clients.subscription_id))

    def _read_vm(self, group, vm_name, instance_view=True):
        kwargs = {"expand": "instanceView"} if instance_view else {}
        return self._read("reading virtual machine %s" % vm_name,
                          self.clients.compute.virtual_machines.get, group, vm_name, **kwargs)

    def _metadata(self, vm, power=None, nic=None, public_ip=None):
        if power is None:
            power = power_state(getattr(vm, "instance_view", None))
        private_ip, public_address = vm_addresses(self.clients, vm, nic=nic, public_ip=public_ip,
                                                  deadline=self.deadline)
        return vm_metadata(vm, power=power, private_ip=private_ip, public_ip=public_address)

    @staticmethod
    def _tags(item):
        return owner_tags(item["resource_uuid"], item.get("offering_uuid"))

    def _names_from_id(self, backend_id):
        try:
            names = names_from_vm_id(backend_id)
        except InvalidAzureId as error:
            raise ItemError(str(error))
        self._check_subscription(names, backend_id)
        return names

    def _judge_vm(self, vm, names, item, legacy=False):
        """Raise unless the machine is this resource's and its provisioning succeeded."""
        label = "virtual machine %s in resource group %s" % (names["vm"], names["group"])
        verdict, reason = judge(label, vm, item["resource_uuid"], owned_by_parent=legacy)
        if verdict == FOREIGN:
            raise ItemError(reason)
        if verdict == FAILED:
            raise ItemError("%s; it is left as it is (terminate the resource, or delete it in Azure, to remove "
                            "it)" % reason)
        if verdict == RETRY:
            raise RetryLater(reason)

    # ---- the names of the chain -----------------------------------------------------------
    def _chain_names(self, item):
        """The names of this resource's chain: those of a chain found by its owner tag (so a
        resource renamed since an interrupted pass finishes its first chain), else the names
        derived from the resource's current name."""
        uuid = item["resource_uuid"]
        shared = item.get("resource_group")
        planned = machine_names(item.get("name"), uuid, shared)
        marker = "%s=%s" % (RESOURCE_TAG, uuid)
        if shared:
            try:
                listed = self._listing("listing the objects tagged %s in resource group %s" % (marker, shared),
                                       self.clients.resource.resources.list_by_resource_group, shared,
                                       filter=tag_filter(uuid))
            except AzureError as error:
                if error.not_found:  # the shared group does not exist yet
                    return planned
                raise
            vm_names = {}
            for resource in listed:
                kind = kind_of(resource)
                vm_name = vm_name_of_companion(kind, getattr(resource, "name", None)) if kind else None
                if vm_name:
                    vm_names.setdefault(vm_name.lower(), vm_name)
            if len(vm_names) > 1:
                raise ItemError("objects of %d machines (%s) carry owner tag %s in resource group %s; delete the "
                                "extra ones" % (len(vm_names), ", ".join(sorted(vm_names.values())), marker, shared))
            if vm_names:
                return names_in_group(list(vm_names.values())[0], shared, dedicated=False)
            return planned
        groups = self._listing("listing the resource groups tagged %s" % marker,
                               self.clients.resource.resource_groups.list, filter=tag_filter(uuid))
        if len(groups) > 1:
            raise ItemError("%d resource groups carry owner tag %s (%s); delete the extra ones"
                            % (len(groups), marker, ", ".join(sorted(group.name for group in groups))))
        if not groups:
            return planned
        group = groups[0].name
        vm_name = vm_name_of_dedicated_group(group)
        if vm_name is None:
            raise ItemError("resource group %s carries owner tag %s but is not named group-<uuid>-<machine>; it "
                            "is left as it is" % (group, marker))
        return names_in_group(vm_name, group, dedicated=True)

    # ---- power ----------------------------------------------------------------------------
    def plan_power(self, items):
        """Look at the whole batch before any item runs: from LISTING_THRESHOLD power items on,
        their machines (with power state, NIC and public IP) come from the subscription's listings,
        listed once, by the first power item that runs, instead of three reads per machine."""
        keys = frozenset(arm_key(item["backend_id"]) for item in items
                         if item.get("state") in ("deallocated", "running") and item.get("backend_id")
                         and not item.get("error"))
        self._power_keys = keys if len(keys) >= LISTING_THRESHOLD else frozenset()

    def _listed_machine(self, backend_id):
        """The machine as the listings saw it; None when this batch reads machines one by one, or
        the listings do not hold this one (or could not read its power state)."""
        key = arm_key(backend_id)
        if key not in self._power_keys:
            return None
        with self._power_lock:  # the other power items wait for the first one's listings
            if self._power_listed is None and self._power_error is None:
                try:
                    self._power_listed = MachineListings(
                        self.clients, self.deadline, self.module.params.get("max_workers") or 8).read(self._power_keys)
                except AzureError as error:
                    self._power_error = error
        if self._power_error is not None:
            raise self._power_error.retitled(self._power_error.message)
        listed = self._power_listed.get(key)
        return listed if listed is not None and listed.power is not None else None

    def power(self, item, result, wanted):
        if not item.get("backend_id"):
            raise ItemError("state %s needs the backend_id of the virtual machine" % wanted)
        names = self._names_from_id(item["backend_id"])
        listed = self._listed_machine(item["backend_id"])
        if listed is not None:
            vm, current, nic, public_ip = listed.vm, listed.power, listed.nic, listed.public_ip
        else:
            # One machine, or one the listings did not hold (gone, or made after they ran): its own read
            # says whether it exists.
            vm, nic, public_ip = self._read_vm(names["group"], names["vm"]), None, None
            current = power_state(getattr(vm, "instance_view", None))
        if vm is None:
            raise ItemError("Azure virtual machine %s (%s) does not exist" % (names["vm"], item["backend_id"]))
        owner = owner_of(vm)
        if owner not in (None, item["resource_uuid"]):
            raise ItemError("virtual machine %s in resource group %s has %s, not this resource's; its power is "
                            "left as it is" % (names["vm"], names["group"], describe_owner(owner)))
        if wanted == "deallocated":
            settled, operation, action = ("deallocated", "deallocating"), "begin_deallocate", "powered_off"
            verb, doing, done = "deallocate", "deallocating", "deallocated"
        else:
            settled, operation, action = ("running", "starting"), "begin_start", "powered_on"
            verb, doing, done = "start", "starting", "started"
        if current in settled:
            result.update(msg="virtual machine %s is already %s" % (names["vm"], current),
                          backend_metadata=self._metadata(vm, power=current, nic=nic, public_ip=public_ip))
            return
        if self.check_mode:
            result.update(changed=True, action=action, msg="would %s virtual machine %s (now %s)" % (
                verb, names["vm"], current),
                backend_metadata=self._metadata(vm, power=current, nic=nic, public_ip=public_ip))
            return
        # Sent without waiting on its own operation: the batch's power items share one wait
        # (power_wait.PowerWaiter), which reads their machines together.
        try:
            accepted = self._call("%s virtual machine %s" % (doing, names["vm"]),
                                  getattr(self.clients.compute.virtual_machines, operation), names["group"],
                                  names["vm"], polling=False, cls=lambda response, deserialized, headers: response)
        except AzureError as error:
            if outcome_unknown(error):  # no answer, or a 5xx: it may have been carried out
                result["action"] = "unknown"
            raise  # refused: nothing changed
        result.update(changed=True, action=action)  # accepted: Azure carries it out
        headers = getattr(getattr(accepted, "http_response", None), "headers", None) or {}
        try:
            now = self.power_waiter.wait(vm.id or item["backend_id"], arm_key(vm.id or item["backend_id"]),
                                         (wanted,), current, headers.get("Azure-AsyncOperation"))
        except PowerChangeFailed as error:
            raise ItemError("%s virtual machine %s: %s" % (doing, names["vm"], error))
        except AzureError as error:
            raise RetryLater("virtual machine %s was sent to %s, but %s; the next pass looks again"
                             % (names["vm"], verb, error))
        if now != wanted:
            raise RetryLater("virtual machine %s was sent to %s and is %s at the deadline; Azure carries it on, "
                             "the next pass looks again" % (names["vm"], verb, now))
        result.update(msg="%s virtual machine %s (was %s)" % (done, names["vm"], current),
                      backend_metadata=self._metadata(vm, power=wanted, nic=nic, public_ip=public_ip))
