# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The build of a machine's chain: each object adopted or created, in branches side by side, paced.

After the resource group, the public IP, the NSG and the VNet -> subnet are independent ARM
objects, so their long-running operations run at the same time; the NIC waits for all three (it
references each), the machine for the NIC. Every write start takes a token of the batch's
``pacing.WritePacer``, so a large batch stays under the subscription's write limit. What the run
found and made is kept in :class:`ChainState`, for check mode and the rollback (``removal``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.bodies import (
    disk_tags_body,
    group_body,
    group_tags,
    nic_body,
    nsg_body,
    public_ip_body,
    subnet_body,
    vm_body,
    vnet_body,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, OperationStillRunning
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import parse_resource_id
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import KIND_LABELS, object_operations
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import has_owner_tags, owner_of, provisioning_state, with_owner_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.removal import ChainRemoval
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.validate import (
    DEFAULT_ADMIN_USERNAME,
    DEFAULT_NETWORK_CIDR,
    DEFAULT_SUBNET_CIDR,
    admin_password,
    ssh_ranges,
)

# Kinds of the chain before the machine, in the order messages name them (the build runs
# the public IP, the NSG and the VNet -> subnet side by side, see ChainBuild._build).
CHAIN_ORDER = ("group", "vnet", "subnet", "public_ip", "nsg", "nic")
MESSAGE_ORDER = CHAIN_ORDER + ("vm",)


class ChainState:
    """What one create run has found and done, for check mode and rollback (shared by its branches)."""

    def __init__(self, names, resource_uuid=None):
        self.names = names
        self.resource_uuid = resource_uuid
        self.found = {}          # kind -> object that existed before this run wrote anything
        self.created = []        # kinds this run creates (or, in check mode, would): the survey read them free
        # Kinds ARM confirmed this run made (it answered the create with success on a name the survey
        # read free): the only ones a rollback may delete. A write refused, or whose answer never came
        # (a 409, a 5xx, a connection lost), never marks an object made: it is read again instead.
        self.made = []
        self.unconfirmed = {}    # kind -> the AzureError of a create ARM did not confirm
        self.adopted = []        # kinds that existed already and carry this resource's owner tag
        self.objects = {}        # kind -> SDK object
        self.written = False
        self.in_flight = set()   # kinds whose write was sent and has not succeeded (those that failed, at the end)
        self.vm_accepted = False  # ARM accepted the VM PUT: the machine exists from here on
        self.rolled_back = False  # the rollback deleted everything this run made
        self.lock = threading.Lock()
        self.abandoned = threading.Event()  # a branch failed: the others start no further write


def in_message_order(kinds):
    return sorted(kinds, key=MESSAGE_ORDER.index)


class ChainBuild(ChainRemoval):
    """Builds a machine's chain for ``VmChain``.

    ``branches``: build the public IP, the NSG and the VNet -> subnet side by side (False: one
    after the other). ``pacer``: the ``pacing.WritePacer`` every write start of the batch takes a
    token from (None: unpaced)."""

    def __init__(self, module, clients, deadline, branches=True, pacer=None):
        super(ChainBuild, self).__init__(module, clients, deadline)
        self.branches = branches
        self.pacer = pacer

    def _step(self, state, kind, create, on_accepted=None):
        """Adopt the object found by the survey, else create it (in check mode, note that it would be).
        Branches call this at the same time: what it records in ``state`` is under its lock."""
        existing = state.found.get(kind)
        if existing is not None:
            with state.lock:
                state.adopted.append(kind)
                state.objects[kind] = existing
            return existing
        with state.lock:
            state.created.append(kind)
        if self.check_mode:
            return None
        name = state.names["group"] if kind == "group" else state.names[kind]
        if self.pacer is not None:
            self.pacer.take()
        with state.lock:
            state.written = True
            state.in_flight.add(kind)

        def confirmed():  # ARM answered the create with success: this run made the object
            with state.lock:
                state.made.append(kind)
            if on_accepted is not None:
                on_accepted()

        try:
            made = self._call("creating %s %s" % (KIND_LABELS[kind], name), create, accepted=confirmed)
        except AzureError as error:
            with state.lock:
                if kind not in state.made:  # refused, or no answer: never counted as made
                    state.unconfirmed[kind] = error
                    state.in_flight.discard(kind)
            raise
        with state.lock:
            if kind not in state.made:  # a synchronous create (the resource group)
                state.made.append(kind)
            state.objects[kind] = made
            state.in_flight.discard(kind)
        return made

    def _side_by_side(self, state, branches):
        """Run ``branches`` (callables) at the same time and wait for every one of them: an
        operation ARM accepted cannot be called back, and a rollback must not race one still
        running. A failed branch sets ``state.abandoned``, so the others start no further write.
        One failure is raised as it is; several as one error naming them all; a deadline hit
        (``OperationStillRunning``) wins, as nothing may be rolled back then."""
        if not self.branches or self.check_mode or len(branches) < 2:  # check mode waits on nothing
            for branch in branches:
                branch()
            return
        errors = [None] * len(branches)

        def run(index):
            try:
                branches[index]()
            except Exception as error:  # re-raised below, in the item's own thread
                errors[index] = error
                state.abandoned.set()

        helpers = [threading.Thread(target=run, args=(index,), daemon=True,  # daemons: the batch deadline
                                    name="%s-branch-%d" % (threading.current_thread().name, index))
                   for index in range(1, len(branches))]
        for helper in helpers:
            helper.start()
        run(0)
        for helper in helpers:
            helper.join()
        failures = [error for error in errors if error is not None]
        if not failures:
            return
        bugs = [error for error in failures if not isinstance(error, AzureError)]
        if bugs:
            raise bugs[0]
        if len(failures) == 1:
            raise failures[0]
        still = [error for error in failures if isinstance(error, OperationStillRunning)]
        kind = type(still[0]) if still else AzureError
        raise kind("; ".join(str(error) for error in failures))

    def _build(self, item, state, location, image, size, backend_id):
        names = state.names
        group = names["group"]
        network = self.clients.network
        tags = self._tags(item)
        network_cidr = item.get("network_cidr") or DEFAULT_NETWORK_CIDR
        subnet_cidr = item.get("subnet_cidr") or DEFAULT_SUBNET_CIDR
        ranges = ssh_ranges(item)

        self._step(state, "group", lambda: self.clients.resource.resource_groups.create_or_update(
            group, group_body(location, group_tags(tags, names["dedicated"]))))

        def network_branch():
            self._step(state, "vnet", lambda: network.virtual_networks.begin_create_or_update(
                group, names["vnet"], vnet_body(location, tags, network_cidr)))
            if state.abandoned.is_set():  # a sibling failed: a subnet now would only be rolled back
                return
            self._step(state, "subnet", lambda: network.subnets.begin_create_or_update(
                group, names["vnet"], names["subnet"], subnet_body(subnet_cidr)))

        def public_ip_branch():
            self._step(state, "public_ip", lambda: network.public_ip_addresses.begin_create_or_update(
                group, names["public_ip"], public_ip_body(location, tags)))

        def nsg_branch():
            self._step(state, "nsg", lambda: network.network_security_groups.begin_create_or_update(
                group, names["nsg"], nsg_body(location, tags, ranges)))

        # The network first in the item's own thread: it is the longest branch (two operations).
        self._side_by_side(state, [network_branch, public_ip_branch] + ([nsg_branch] if ranges else []))
        subnet, public_ip, nsg = (state.objects.get(kind) for kind in ("subnet", "public_ip", "nsg"))
        nic = self._step(state, "nic", lambda: network.network_interfaces.begin_create_or_update(
            group, names["nic"], nic_body(location, tags, names["ip_config"], subnet.id, public_ip.id,
                                          nsg.id if nsg is not None else None)))

        def new_vm_body():
            password = admin_password()
            self._hide(password)
            return vm_body(location, tags, names["vm"], size.name, image, nic.id,
                           item.get("admin_username") or DEFAULT_ADMIN_USERNAME, password,
                           item["ssh_public_key"], item.get("custom_data"))

        def accepted():
            state.vm_accepted = True
            self.accepted_vms[item["resource_uuid"]] = backend_id

        compute = self.clients.compute.virtual_machines
        # The survey found no machine, so this PUT makes one (a PUT on an existing VM would change it).
        self._step(state, "vm", lambda: compute.begin_create_or_update(group, names["vm"], new_vm_body()),
                   on_accepted=accepted)

    def _tag_os_disk(self, vm, item, fresh=False):
        """Put the owner tags on the machine's OS disk: ARM does not copy a VM's tags to the
        disk it makes. ``fresh``: this run made the machine, so the disk has no tags yet."""
        storage = getattr(vm, "storage_profile", None)
        os_disk = getattr(storage, "os_disk", None)
        parts = parse_resource_id(getattr(getattr(os_disk, "managed_disk", None), "id", None))
        if not parts:
            return
        disks = self.clients.compute.disks
        current_tags = None
        if not fresh:
            disk = self._read("reading OS disk %s" % parts["name"], disks.get, parts["group"], parts["name"])
            if disk is None or has_owner_tags(disk, item["resource_uuid"], item.get("offering_uuid")):
                return
            if owner_of(disk) not in (None, item["resource_uuid"]):
                return  # another resource's mark is never overwritten
            current_tags = getattr(disk, "tags", None)
        if self.check_mode:
            return
        tags = with_owner_tags(current_tags, item["resource_uuid"], item.get("offering_uuid"))
        if self.pacer is not None:
            self.pacer.take()
        self._call("tagging OS disk %s" % parts["name"], disks.begin_update, parts["group"], parts["name"],
                   disk_tags_body(tags))

    def _still_running(self, state):
        """Whether an object whose write failed is still being provisioned by ARM (a failed
        status poll is not a failed operation)."""
        return any(self._kind_still_running(state, kind) for kind in in_message_order(state.in_flight))

    def _kind_still_running(self, state, kind):
        if kind == "group":  # a group PUT is synchronous
            return False
        read = object_operations(self.clients, state.names["group"], state.names["vnet"])[kind][0]
        try:
            obj = self._read("reading %s %s" % (KIND_LABELS[kind], state.names[kind]), read, state.names[kind])
        except AzureError:
            return True  # cannot tell: deleting blind could race the operation
        return obj is not None and provisioning_state(obj) not in (None, "succeeded", "failed", "canceled")
