# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""``VmChain``: one machine item of ``azure_vm_chain``, end to end.

Here is ``state: present`` (create or adopt: survey every object first, refuse what is
not this resource's, build the rest, roll back what this run made when it fails before
the machine exists); the build comes from ``build``, deletion and rollback from ``removal``,
reads and power from ``machine``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import traceback

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.build import CHAIN_ORDER, ChainBuild, ChainState, in_message_order
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, AzureUnproven, OperationStillRunning, outcome_unknown
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import normalize_location, power_state
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.machine import RetryLater
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import build_vm_id, parse_image
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import KIND_LABELS
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import FAILED, FOREIGN, RETRY, judge, owner_of
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.validate import creation_problem, ssh_ranges
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import Unproven
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError

# ARM's error codes for a location it does not offer (answered 400, or 404 by some API versions)
UNKNOWN_LOCATION_CODES = frozenset(("noregisteredproviderfound", "locationnotavailableforresourcetype", "invalidlocation"))


class VmChain(ChainBuild):
    """Carries out one machine item (create, adopt, delete, power); used concurrently by the batch workers.
    Takes ``branches`` and ``pacer`` as ``build.ChainBuild`` does."""

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
