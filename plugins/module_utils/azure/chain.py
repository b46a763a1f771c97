# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""``VmChain``: one machine item of ``azure_vm_chain``, end to end.

Here is ``state: present`` (create or adopt: survey every object first, refuse what is
not this resource's, build the rest, roll back what this run made when it fails before
the machine exists); deletion and rollback come from ``removal``, reads and power from
``machine``.

The build runs in branches: after the resource group, the public IP, the NSG and the
VNet -> subnet are independent ARM objects, so their long-running operations run at the
same time; the NIC waits for all three (it references each), the machine for the NIC.
Every write start takes a token of :class:`WritePacer`, ARM's documented write bucket kept
on this side, so a large batch stays under the subscription's write limit.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time
import traceback

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
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, AzureUnproven, OperationStillRunning, outcome_unknown
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import normalize_location, power_state
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.machine import RetryLater
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import build_vm_id, parse_image, parse_resource_id
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import KIND_LABELS, object_operations
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import (
    FAILED,
    FOREIGN,
    RETRY,
    has_owner_tags,
    judge,
    owner_of,
    provisioning_state,
    with_owner_tags,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.removal import ChainRemoval
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.validate import (
    DEFAULT_ADMIN_USERNAME,
    DEFAULT_NETWORK_CIDR,
    DEFAULT_SUBNET_CIDR,
    admin_password,
    creation_problem,
    ssh_ranges,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import Unproven
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError

# Kinds of the chain before the machine, in the order messages name them (the build runs
# the public IP, the NSG and the VNet -> subnet side by side, see VmChain._build).
CHAIN_ORDER = ("group", "vnet", "subnet", "public_ip", "nsg", "nic")
MESSAGE_ORDER = CHAIN_ORDER + ("vm",)

# ARM's documented write bucket per subscription and service principal (Azure Resource Manager
# request limits and throttling, docs/scaling.md): 200 tokens, refilled at 10 a second.
ARM_WRITE_BURST = 200
ARM_WRITES_PER_SECOND = 10.0


# ARM's error codes for a location it does not offer (answered 400, or 404 by some API versions)
UNKNOWN_LOCATION_CODES = frozenset(("noregisteredproviderfound", "locationnotavailableforresourcetype", "invalidlocation"))


class WritePacer:
    """A token bucket on the writes this batch starts, sized like ARM's own (``burst`` tokens,
    ``per_second`` refill), so machines in parallel x branches never outrun the subscription's
    write limit and draw 429s; a write that finds the bucket empty waits its turn here."""

    def __init__(self, burst=ARM_WRITE_BURST, per_second=ARM_WRITES_PER_SECOND, clock=time.monotonic,
                 sleep=time.sleep):
        self.burst = float(burst)
        self.per_second = float(per_second)
        self._clock, self._sleep = clock, sleep
        self._tokens = self.burst
        self._stamp = clock()
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds writes spent waiting for a token (for tests and tuning)

    def take(self):
        """Take one token, waiting until the bucket has refilled enough (reservations queue up)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.per_second)
            self._stamp = now
            self._tokens -= 1
            wait = -self._tokens / self.per_second if self._tokens < 0 else 0.0
            self.waited += wait
        if wait:
            self._sleep(wait)


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


class VmChain(ChainRemoval):
    """Carries out one machine item (create, adopt, delete, power); used concurrently by the batch workers.

    ``branches``: build the public IP, the NSG and the VNet -> subnet side by side (False: one
    after the other). ``pacer``: the :class:`WritePacer` every write start of the batch takes a
    token from (None: unpaced)."""

    def __init__(self, module, clients, deadline, branches=True, pacer=None):
        super(VmChain, self).__init__(module, clients, deadline)
        self.branches = branches
        self.pacer = pacer

    # ---- entry point ---------------------------------------------------------------------
    def run(self, item):
        result = {
            "resource_uuid": item["resource_uuid"],
            "order_uuid": item.get("order_uuid"),
            "backend_id": item.get("backend_id") or None,
            "changed": False,
            "failed": False,
            "retry": False,
            "msg": "",
            "action": "none",
            "backend_metadata": None,
        }
        try:
            if item.get("error"):  # set by validate.duplicate_errors, never by the caller
                raise ItemError(item["error"])
            if item["state"] == "absent":
                self.absent(item, result)
            elif item["state"] in ("deallocated", "running"):
                self.power(item, result, item["state"])
            elif item.get("backend_id"):
                self.existing(item, result)
            else:
                self.create(item, result)
        except RetryLater as error:
            result.update(failed=True, retry=True, msg=str(error))
        except Unproven as error:
            # an answer that proves nothing: the item is left as it is (never erred) and the pass fails
            result.update(failed=True, retry=True, held=True, msg=str(error))
        except OperationStillRunning as error:
            result.update(failed=True, retry=True, msg="%s; the next pass looks again" % error)
        except (ItemError, AzureError) as error:
            result.update(failed=True, msg=str(error))
        except Exception as error:  # a bug must fail its item, not the batch
            result.update(failed=True, msg="%s: %s" % (type(error).__name__, error),
                          exception=traceback.format_exc())
        return result

    # ---- present, with a backend id -------------------------------------------------------
    def existing(self, item, result):
        names = self._names_from_id(item["backend_id"])
        try:
            vm = self._read_vm(names["group"], names["vm"])
            if vm is None and self._read_vm(names["group"], names["vm"], instance_view=False) is not None:
                # an order erred for its machine being gone: gone on two reads, one not-found is not enough
                raise AzureUnproven("virtual machine %s answered not found, then answered: two reads disagree; the "
                                    "order waits for the next pass" % names["vm"])
        except Unproven:
            raise
        except AzureError as error:
            raise RetryLater("%s; the machine is known by its backend id, so the order waits for the next pass"
                             % error)
        if vm is None:
            raise ItemError("Azure virtual machine %s (%s) no longer exists; it is not re-created under its old "
                            "id" % (names["vm"], item["backend_id"]))
        # Waldur's backend id is itself the owner record: a machine made before owner tags
        # (Mastermind, earlier versions) has none and keeps its route, untouched.
        legacy = owner_of(vm) is None
        self._judge_vm(vm, names, item, legacy=legacy)
        if not legacy:  # a pass stopped before it tagged the disk
            self._after_vm(lambda: self._tag_os_disk(vm, item), "virtual machine %s exists" % names["vm"])
        result["backend_metadata"] = self._after_vm(
            lambda: self._metadata(vm), "virtual machine %s exists" % names["vm"])
        result["msg"] = "virtual machine %s exists; nothing to do" % names["vm"]

    def _clear_failed_machine(self, vm, names, item, result):
        """A machine of this resource whose provisioning failed after an earlier pass made it: the
        order errs, and Waldur, which holds no backend id for it, drops the resource. So nothing
        would ever delete what the earlier pass made: delete what carries the owner tag, then err."""
        label = "virtual machine %s in resource group %s" % (names["vm"], names["group"])
        verdict, reason = judge(label, vm, item["resource_uuid"])
        if verdict != FAILED:
            return
        result["backend_id"] = None
        try:
            deleted, notes = self._delete_owned(item["resource_uuid"])
        except (AzureError, ItemError) as error:
            raise ItemError("%s; deleting what carries its owner tag failed, objects may be left: %s"
                            % (reason, error))
        result["changed"] = bool(deleted)
        raise ItemError("%s; %s %s%s" % (reason, "would delete" if self.check_mode else "deleted",
                                         ", ".join(deleted) or "nothing (nothing was left)",
                                         "".join("; " + note for note in notes)))

    def _after_vm(self, work, what):
        """Run ``work`` once the machine exists: an Azure failure there is a ``retry``, never an error."""
        try:
            return work()
        except AzureError as error:
            raise RetryLater("%s, but %s; the order waits for the next pass" % (what, error))

    # ---- present, create or adopt ---------------------------------------------------------
    def _validate_remote(self, location, size_name):
        try:
            sizes = self.sizes.sizes(location)
        except AzureError as error:
            if not isinstance(error, Unproven) and error.code and (
                    error.status == 400 or str(error.code).lower() in UNKNOWN_LOCATION_CODES):
                # ARM's own answer for a location it does not know (NoRegisteredProviderFound)
                raise ItemError("Azure location %r is not available: %s" % (location, error))
            if error.status == 404 and not isinstance(error, Unproven):
                raise AzureUnproven("%s (a listing answered not found proves nothing of the location)" % error.message,
                                    status=404)
            raise
        if not sizes:
            raise ItemError("Azure location %r offers no virtual machine sizes" % location)
        size = sizes.get(size_name.lower())
        if size is None:
            raise ItemError("Azure size %r is not offered in location %r" % (size_name, location))
        return size

    def create(self, item, result):
        problem = creation_problem(item)
        if problem:
            raise ItemError(problem)
        names = self._chain_names(item)
        location = normalize_location(item["location"])
        image = parse_image(item["image"])
        backend_id = build_vm_id(self.clients.subscription_id, names["group"], names["vm"])
        state = ChainState(names, item["resource_uuid"])

        self._survey(item, state)
        vm = state.found.get("vm")
        if vm is not None:
            # An earlier run was stopped after the machine was made: adopt it, never write it again.
            self._adopt_vm(vm, names, item, result, backend_id)
            return

        size = self._validate_remote(location, item["size"])
        self._judge_found(item, state)
        try:
            self._build(item, state, location, image, size, backend_id)
        except AzureError as error:
            # What happened on Azure: an object ARM confirmed made (a refused write made nothing);
            # a write whose answer was lost may have been carried out (``unknown``), below.
            result["changed"] = bool(state.made)
            if state.vm_accepted:
                result["backend_id"] = backend_id
            if isinstance(error, OperationStillRunning) or self._still_running(state):
                # ARM is still working on an object of this run: deleting now would race it
                # (and a group being deleted refuses the next pass). Leave it to the next pass.
                raise RetryLater("%s; nothing is rolled back while Azure is working on it: the next pass adopts "
                                 "the chain" % error)
            if "vm" in state.unconfirmed:
                # ARM may have made the machine although it did not say so (a 409 because it was
                # made meanwhile, a 500 after carrying the PUT out): read it before anything else.
                vm = self._read_vm(names["group"], names["vm"])
                if vm is not None:
                    result["changed"] = True
                    self._adopt_vm(vm, names, item, result, backend_id,
                                   how="adopted virtual machine %s in resource group %s, which Azure made although "
                                       "it answered the create with: %s" % (names["vm"], names["group"],
                                                                            state.unconfirmed["vm"]))
                    return
            unknown = [kind for kind, refusal in state.unconfirmed.items() if outcome_unknown(refusal)]
            if unknown:
                # Transient (throttled, a 5xx, no answer): the object may exist or appear; the next pass
                # reads again and adopts what carries this resource's mark. Nothing is rolled back.
                result["action"] = "unknown"
                raise RetryLater("%s; nothing is rolled back: the next pass adopts what Azure made" % error)
            message = str(error)
            if state.written:
                message += self._rollback(state)
                result["changed"] = bool(state.made) and not state.rolled_back
            raise ItemError(message)

        result["backend_id"] = backend_id
        result["changed"] = bool(state.created)
        if self.check_mode:
            result.update(action="created" if state.created else "none",
                          msg="would create %s" % ", ".join(
                              "%s %s" % (KIND_LABELS[kind], names["group"] if kind == "group" else names[kind])
                              for kind in in_message_order(state.created)))
            return
        vm = state.objects["vm"]
        result.update(backend_id=vm.id or backend_id, action="created")
        built = "created virtual machine %s in resource group %s" % (names["vm"], names["group"])

        def finish():
            self._tag_os_disk(vm, item, fresh=True)
            view = self._read("reading the instance view of virtual machine %s" % names["vm"],
                              self.clients.compute.virtual_machines.instance_view, names["group"], names["vm"])
            return self._metadata(vm, power=power_state(view), nic=state.objects.get("nic"),
                                  public_ip=state.objects.get("public_ip"))

        result["backend_metadata"] = self._after_vm(finish, built)
        result["msg"] = "%s (%s%s)" % (
            built, "created: " + ", ".join(KIND_LABELS[kind] for kind in in_message_order(state.created)),
            "; adopted: " + ", ".join(KIND_LABELS[kind] for kind in in_message_order(state.adopted))
            if state.adopted else "")

    def _adopt_vm(self, vm, names, item, result, backend_id, how=None):
        """Adopt this resource's machine (refused unless it carries this resource's mark and its
        provisioning succeeded; a failed one left by an earlier run is cleared, see above)."""
        if owner_of(vm) == item["resource_uuid"]:
            result["backend_id"] = vm.id or backend_id
            self._clear_failed_machine(vm, names, item, result)
        self._judge_vm(vm, names, item)
        self._after_vm(lambda: self._tag_os_disk(vm, item), "virtual machine %s exists" % names["vm"])
        result.update(
            action="adopted",
            msg=how or "adopted the existing virtual machine %s in resource group %s" % (names["vm"], names["group"]),
            backend_metadata=self._after_vm(lambda: self._metadata(vm),
                                            "virtual machine %s was adopted" % names["vm"]))

    def _survey(self, item, state):
        """Read every object of the chain before anything is written (what exists decides
        what is adopted, refused or made). Stops at the machine when it exists."""
        names, found = state.names, state.found
        group = names["group"]
        network = self.clients.network
        found["group"] = self._read("reading resource group %s" % group,
                                    self.clients.resource.resource_groups.get, group)
        if found["group"] is None:
            return
        found["vm"] = self._read_vm(group, names["vm"])
        if found["vm"] is not None:
            return
        found["vnet"] = self._read("reading virtual network %s" % names["vnet"],
                                   network.virtual_networks.get, group, names["vnet"])
        if found["vnet"] is not None:
            found["subnet"] = self._read("reading subnet %s" % names["subnet"],
                                         network.subnets.get, group, names["vnet"], names["subnet"])
        found["public_ip"] = self._read("reading public IP address %s" % names["public_ip"],
                                        network.public_ip_addresses.get, group, names["public_ip"])
        if ssh_ranges(item):
            found["nsg"] = self._read("reading network security group %s" % names["nsg"],
                                      network.network_security_groups.get, group, names["nsg"])
        found["nic"] = self._read("reading network interface %s" % names["nic"],
                                  network.network_interfaces.get, group, names["nic"])

    def _judge_found(self, item, state):
        """Refuse before any write when an object at a wanted name is not this resource's
        (naming every such object and its owner) or its provisioning failed; ``retry`` when
        one of this resource's objects is still being provisioned or deleted."""
        names = state.names
        refused, waiting = [], []
        for kind in CHAIN_ORDER:
            obj = state.found.get(kind)
            if obj is None:
                continue
            name = names["group"] if kind == "group" else names[kind]
            label = "%s %s" % (KIND_LABELS[kind], name)
            if kind != "group":
                label += " in resource group %s" % names["group"]
            # A shared group is the operator's (named in the configuration), a subnet belongs to its network.
            not_tagged = (kind == "group" and not names["dedicated"]) or kind == "subnet"
            verdict, reason = judge(label, obj, item["resource_uuid"], owned_by_parent=not_tagged)
            if verdict in (FOREIGN, FAILED):
                refused.append(reason)
            elif verdict == RETRY:
                waiting.append(reason)
        if refused:
            raise ItemError("; ".join(refused) + "; nothing was created")
        if waiting:
            raise RetryLater("; ".join(waiting))

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
