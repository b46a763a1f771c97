#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: azure_vm_chain
short_description: Create, delete, deallocate and start the Azure virtual machines of Waldur resources
version_added: 0.1.0
description:
  - Works on a list of machines at once, concurrently, and returns one result per machine in input order.
    One machine failing never stops the others.
  - O(machines[].state=present) builds the chain of one machine, in this order. The chain is resource group,
    virtual network, subnet, Standard static public IP address, network security group (only with
    O(machines[].allowed_ssh_ranges)), network interface, virtual machine. Every object of the chain is read
    before anything is written, so that a rerun adopts what exists. An existing virtual machine is never
    written again.
  - Owner tags. Every object made carries the tags C(waldur-resource-uuid) (the Waldur resource, 32
    lower-case hex digits) and C(waldur-offering-uuid) (O(machines[].offering_uuid)); a subnet cannot carry
    tags and belongs to its virtual network; the OS disk, which Azure does not tag with its machine, is
    tagged once the machine exists. A shared group the module has to make carries only the offering tag.
  - An existing object is adopted only when it carries this resource's C(waldur-resource-uuid) tag and its
    provisioning succeeded. An object at a wanted name without that tag (another resource's, or nobody's)
    is never adopted, changed or deleted, and the item fails naming it and its owner before anything is
    written. One of this resource's objects still being provisioned makes the item a C(retry); one whose
    provisioning failed fails the item with Azure's reason (a failed machine left by an earlier run is
    deleted with everything carrying its owner tag, as Waldur keeps no resource to terminate it by).
  - The chain is looked up by its owner tag first (resource groups in the subscription, or the objects in
    the shared group), so a resource renamed since an interrupted run finishes its first chain; only when
    nothing carries the tag are the names derived from the current name.
  - Location, size, image and SSH key are checked before anything is created. A chain that fails part-way
    before its machine exists is rolled back, deleting only what this run made (its own group only when the
    group holds nothing else) and never while one of its operations is still running; the item fails with
    the cause.
  - Once the virtual machine exists (Azure accepted its creation), nothing fails the item. A deadline hit
    while Azure works on an operation, or a failed read afterwards, makes it a C(retry) carrying the
    machine's ARM id, and the next run adopts the machine by its owner tag.
  - Without O(machines[].resource_group) every machine gets a group of its own,
    C(group-<the whole resource uuid, 32 hex>-<name>); in a shared group the machine name carries the first
    8 hex digits of the resource uuid, C(<name>-<8 hex>).
  - The machine's OS disk and network interface are deleted with it, password login is disabled, the SSH
    key is installed for the admin user, custom data is sent base64-encoded. A random administrator
    password satisfies Azure and is never reported.
  - O(machines[].state=absent) reads the deletion route from the machine's ARM id, never from the current
    settings. A dedicated group is deleted whole, in a shared group exactly the machine's objects are
    (an object carrying another resource's owner tag is left and named). Machines made before owner tags
    (Waldur Mastermind, C(group-<4 hex>-<name>)) are reached this way, by their ARM id only. Without a
    backend id, what carries the resource's owner tag is deleted (a create that never reported its
    machine).
  - O(machines[].state=deallocated) and O(machines[].state=running) deallocate or start a machine only when
    its instance view says otherwise.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.azure
  - waldur.site_agent.batch
  - waldur.site_agent.batch.BACKEND_ATTRIBUTES
options:
  machines:
    description:
      - The machines to act on, usually made from Waldur orders by the P(waldur.site_agent.vm_items#filter) filter.
    type: list
    elements: dict
    required: true
    suboptions:
      resource_uuid:
        description:
          - UUID of the Waldur resource (dashed or not). Names of the Azure objects derive from it.
        type: str
        required: true
      order_uuid:
        description:
          - UUID of the Waldur order, echoed in the result.
        type: str
      offering_uuid:
        description:
          - UUID of the Waldur offering, written in the C(waldur-offering-uuid) tag of the objects made.
        type: str
      name:
        description:
          - Name of the Waldur resource. Transliterated to Latin letters (Cyrillic, Greek, accents), sanitized to
            C([a-z0-9-]), at most 50 characters. A name with nothing left (CJK characters, symbols only) becomes
            C(vm-<first 8 hex of the resource uuid>).
        type: str
      state:
        description:
          - V(present) creates or adopts the machine; V(absent) deletes it; V(deallocated) and V(running)
            set its power state.
        type: str
        choices: [present, absent, deallocated, running]
        default: present
      backend_id:
        description:
          - ARM id of the machine, once Waldur knows it. With V(present), a machine under this id is left
            as it is and a missing one fails the item; it is never re-created under its old id.
        type: str
      location:
        description:
          - Azure location, for example C(westeurope). Required to create.
        type: str
      size:
        description:
          - VM size, for example C(Standard_B1s); must be offered in the location. Required to create.
        type: str
      image:
        description:
          - Marketplace image, C(publisher:offer:sku:version) or a dict with those four keys. Required to
            create.
        type: raw
      ssh_public_key:
        description:
          - OpenSSH public key installed for the admin user. Required to create.
        type: str
      admin_username:
        description:
          - Name of the administrator account.
        type: str
        default: waldur
      custom_data:
        description:
          - Cloud-init user data, sent base64-encoded as the machine's custom data.
        type: str
      resource_group:
        description:
          - A shared resource group. Unset, the machine gets a dedicated group.
        type: str
      network_cidr:
        description:
          - Address space of the machine's virtual network.
        type: str
        default: 10.0.0.0/16
      subnet_cidr:
        description:
          - Address prefix of the machine's subnet, inside O(machines[].network_cidr).
        type: str
        default: 10.0.0.0/24
      allowed_ssh_ranges:
        description:
          - Addresses, CIDRs or service tags that may connect on TCP port 22. A network security group with
            one inbound rule admitting exactly these is created; none, and no inbound traffic is admitted.
        type: list
        elements: str
  deadline:
    description:
      - Seconds for the whole batch. Machines not finished by then are a C(retry) with a message saying so
        (with the machine's ARM id once Azure accepted its creation); nothing is rolled back while Azure is
        still working on an operation, and the next run picks them up.
    type: float
    default: 900
notes:
  - Supports check mode. Everything is read, nothing is written, and each result says what would change.
"""

EXAMPLES = r"""
- name: Create a machine in a dedicated resource group
  waldur.site_agent.azure_vm_chain:
    machines:
      - resource_uuid: 1234abcd5678ef901234abcd5678ef90
        order_uuid: 0f0e0d0c0b0a09080706050403020100
        offering_uuid: 5c1e0ffe5c1e0ffe5c1e0ffe5c1e0ffe
        name: Web Server
        location: westeurope
        size: Standard_B1s
        image: Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest
        ssh_public_key: "{{ lookup('ansible.builtin.file', '~/.ssh/id_ed25519.pub') }}"
        allowed_ssh_ranges:
          - 203.0.113.0/24
  register: created

- name: Deallocate a paused machine
  waldur.site_agent.azure_vm_chain:
    machines:
      - resource_uuid: 1234abcd5678ef901234abcd5678ef90
        backend_id: "{{ created.results[0].backend_id }}"
        state: deallocated

- name: Delete it (the route, whole group or single objects, is read from the id)
  waldur.site_agent.azure_vm_chain:
    machines:
      - resource_uuid: 1234abcd5678ef901234abcd5678ef90
        backend_id: "{{ created.results[0].backend_id }}"
        state: absent
"""

RETURN = r"""
msg:
  description: How many machines ended how.
  returned: always
  type: str
  sample: "3 machine(s): 1 created, 1 failed, 1 retry"
results:
  description: One result per machine, in the order of O(machines).
  returned: always
  type: list
  elements: dict
  contains:
    resource_uuid:
      description: The machine's resource UUID, 32 lower-case hex digits.
      type: str
      sample: 1234abcd5678ef901234abcd5678ef90
    order_uuid:
      description: The order UUID given with the item, normalised; null without one.
      type: str
    backend_id:
      description: ARM id of the virtual machine (also of a C(retry) once the machine exists); null when there is none.
      type: str
      sample: /subscriptions/0000/resourceGroups/group-1234abcd5678ef901234abcd5678ef90-web-server/providers/Microsoft.Compute/virtualMachines/web-server
    changed:
      description: Whether anything was (or in check mode would be) written on Azure.
      type: bool
    failed:
      description: Whether this item failed (true for a C(retry) too).
      type: bool
    retry:
      description:
        - Whether the item did not finish but nothing is wrong (Azure still working, a read failed once the
          machine existed, the deadline); C(waldur.site_agent.waldur_orders) leaves its order for the next run.
      type: bool
    msg:
      description: What happened, or why the item failed.
      type: str
    action:
      description: What was done.
      type: str
      choices: [created, adopted, deleted, absent, powered_off, powered_on, none]
    backend_metadata:
      description: What Waldur stores as the resource's backend metadata; null when there is no machine.
      type: dict
      contains:
        backend_type:
          description: Always C(azure).
          type: str
        virtual_machine:
          description: C(id), C(name), C(location), C(size), C(power_state), C(public_ip), C(private_ip).
          type: dict
    exception:
      description: Traceback of an unexpected error (a bug) that failed the item.
      returned: when such an error happened
      type: str
api_calls:
  description: ARM requests sent by this task (retries and long-running-operation polls included), as
    C(reads) (GETs) and C(writes) (the other methods); C(retries) is 0, because the SDK's own retries
    are counted as reads and writes.
  returned: always
  type: dict
  sample: {reads: 30, writes: 12, retries: 0}
"""

import base64
import ipaddress
import re
import secrets
import string
import threading
import time
import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import (
    AzureError,
    OperationStillRunning,
    SizeCatalog,
    azure_argument_spec,
    clients_from_module,
    normalize_location,
    power_state,
    vm_addresses,
    vm_metadata,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import (
    InvalidAzureId,
    InvalidImage,
    build_vm_id,
    machine_names,
    names_from_vm_id,
    names_in_group,
    parse_image,
    parse_resource_id,
    same_name,
    vm_name_of_companion,
    vm_name_of_dedicated_group,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import (
    DELETION_ORDER,
    KIND_LABELS,
    OWNED_DELETION_ORDER,
    TOP_LEVEL_TYPES,
    delete_objects,
    kind_of,
    object_operations,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import (
    FAILED,
    FOREIGN,
    RESOURCE_TAG,
    RETRY,
    describe_owner,
    has_owner_tags,
    judge,
    owner_of,
    owner_tags,
    provisioning_state,
    tag_filter,
    with_owner_tags,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import (
    BatchRunner,
    ItemError,
    api_call_counts,
    batch_argument_spec,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import normalize_uuid

DEFAULT_NETWORK_CIDR = "10.0.0.0/16"
DEFAULT_SUBNET_CIDR = "10.0.0.0/24"
DEFAULT_ADMIN_USERNAME = "waldur"
PASSWORD_LENGTH = 24
SSH_RULE_NAME = "default-allow-ssh"
SSH_RULE_PRIORITY = 1000
# The key types Azure accepts for Linux machines.
_SSH_KEY = re.compile(r"^(?:ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp(?:256|384|521))\s+(?P<data>[A-Za-z0-9+/]+={0,3})(?:\s.*)?$")
_ADMIN_USERNAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
# Names Azure refuses as a Linux administrator (VM create answers InvalidParameter).
RESERVED_ADMIN_USERNAMES = frozenset((
    "1", "123", "a", "actuser", "adm", "admin", "admin1", "admin2", "administrator", "aspnet", "backup",
    "console", "david", "guest", "john", "owner", "root", "server", "sql", "support", "support_388945a0",
    "sys", "test", "test1", "test2", "test3", "user", "user1", "user2", "user3", "user4", "user5",
))
# Kinds of the chain before the machine, in the order they are made.
CHAIN_ORDER = ("group", "vnet", "subnet", "public_ip", "nsg", "nic")


def admin_password():
    """24 random letters and digits with at least one lower, one upper and one digit (Azure's rule)."""
    alphabet = string.ascii_letters + string.digits
    while True:
        password = "".join(secrets.choice(alphabet) for dummy in range(PASSWORD_LENGTH))
        if (any(c.islower() for c in password) and any(c.isupper() for c in password)
                and any(c.isdigit() for c in password)):
            return password


def ssh_key_problem(key):
    match = _SSH_KEY.match((key or "").strip())
    if not match:
        return ("ssh_public_key is not an OpenSSH public key of a type Azure accepts (ssh-rsa, ssh-ed25519, "
                "ecdsa-sha2-nistp256/384/521)")
    try:
        base64.b64decode(match.group("data"), validate=True)
    except (ValueError, TypeError):
        return "ssh_public_key is not an OpenSSH public key: its key data is not base64"
    return None


def network_problem(network_cidr, subnet_cidr):
    try:
        network = ipaddress.ip_network(network_cidr, strict=False)
    except ValueError:
        return "network_cidr %r is not a CIDR" % (network_cidr,)
    try:
        subnet = ipaddress.ip_network(subnet_cidr, strict=False)
    except ValueError:
        return "subnet_cidr %r is not a CIDR" % (subnet_cidr,)
    if subnet.version != network.version or not subnet.subnet_of(network):
        return "subnet_cidr %s is not inside network_cidr %s" % (subnet_cidr, network_cidr)
    return None


def ssh_ranges(item):
    """The item's allowed SSH ranges without blanks; none means no network security group."""
    return [str(entry) for entry in item.get("allowed_ssh_ranges") or [] if str(entry).strip()]


def creation_problem(item):
    """Why this item cannot be created, judged without any call (None when it can)."""
    for what in ("location", "size", "image"):
        if not item.get(what):
            return "Azure %s is set neither on the order nor in backend_settings" % what
    try:
        parse_image(item["image"])
    except InvalidImage as error:
        return str(error)
    if not (item.get("ssh_public_key") or "").strip():
        return ("the order carries no SSH key (ssh_public_key); a machine without one would admit nobody, "
                "so nothing was created")
    problem = ssh_key_problem(item["ssh_public_key"])
    if problem:
        return problem
    username = item.get("admin_username") or DEFAULT_ADMIN_USERNAME
    if not _ADMIN_USERNAME.match(username):
        return ("admin username %r is not valid on Azure Linux: lower-case letters, digits, '_', '.', '-', "
                "starting with a letter or '_', at most 32 characters" % username)
    if username in RESERVED_ADMIN_USERNAMES:
        return "admin username %r is reserved on Azure" % username
    return network_problem(item.get("network_cidr") or DEFAULT_NETWORK_CIDR,
                           item.get("subnet_cidr") or DEFAULT_SUBNET_CIDR)


class RetryLater(ItemError):
    """Nothing is wrong, but the item cannot finish now: Azure is still working on one of
    its objects, or a read failed once the machine exists. Outcome ``retry``: the order is
    left for the next pass, which finds the chain by its owner tag and finishes it."""


class ChainState:
    """What one create run has found and done, for check mode and rollback."""

    def __init__(self, names):
        self.names = names
        self.found = {}          # kind -> object that existed before this run wrote anything
        self.created = []        # kinds this run created (or, in check mode, would)
        self.adopted = []        # kinds that existed already and carry this resource's owner tag
        self.objects = {}        # kind -> SDK object
        self.written = False
        self.in_flight = None    # the kind being written when an error came
        self.vm_accepted = False  # ARM accepted the VM PUT: the machine exists from here on


class VmChain:
    """Carries out one machine item; used concurrently by the batch workers."""

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

    # ---- helpers -------------------------------------------------------------------------
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
            if item.get("error"):
                raise ItemError(item["error"])
            if item.get("skip"):
                result["msg"] = item["skip"]
            elif item["state"] == "absent":
                self.absent(item, result)
            elif item["state"] in ("deallocated", "running"):
                self.power(item, result, item["state"])
            elif item.get("backend_id"):
                self.existing(item, result)
            else:
                self.create(item, result)
        except RetryLater as error:
            result.update(failed=True, retry=True, msg=str(error))
        except OperationStillRunning as error:
            result.update(failed=True, retry=True, msg="%s; the next pass looks again" % error)
        except (ItemError, AzureError) as error:
            result.update(failed=True, msg=str(error))
        except Exception as error:  # a bug must fail its item, not the batch
            result.update(failed=True, msg="%s: %s" % (type(error).__name__, error),
                          exception=traceback.format_exc())
        if item.get("comment"):
            result["msg"] = "%s; %s" % (result["msg"], item["comment"]) if result["msg"] else item["comment"]
        return result

    # ---- present, with a backend id -------------------------------------------------------
    def _names_from_id(self, backend_id):
        try:
            names = names_from_vm_id(backend_id)
        except InvalidAzureId as error:
            raise ItemError(str(error))
        self._check_subscription(names, backend_id)
        return names

    def existing(self, item, result):
        names = self._names_from_id(item["backend_id"])
        try:
            vm = self._read_vm(names["group"], names["vm"])
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
            deleted = self._delete_owned(item["resource_uuid"])
        except (AzureError, ItemError) as error:
            raise ItemError("%s; deleting what carries its owner tag failed, objects may be left: %s"
                            % (reason, error))
        result["changed"] = bool(deleted)
        raise ItemError("%s; %s %s" % (reason, "would delete" if self.check_mode else "deleted",
                                       ", ".join(deleted) or "nothing (nothing was left)"))

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
            if error.status in (400, 404):  # ARM's answer for a location it does not know
                raise ItemError("Azure location %r is not available: %s" % (location, error))
            raise
        if not sizes:
            raise ItemError("Azure location %r offers no virtual machine sizes" % location)
        size = sizes.get(size_name.lower())
        if size is None:
            raise ItemError("Azure size %r is not offered in location %r" % (size_name, location))
        return size

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

    def create(self, item, result):
        problem = creation_problem(item)
        if problem:
            raise ItemError(problem)
        names = self._chain_names(item)
        location = normalize_location(item["location"])
        image = parse_image(item["image"])
        backend_id = build_vm_id(self.clients.subscription_id, names["group"], names["vm"])
        state = ChainState(names)

        self._survey(item, state)
        vm = state.found.get("vm")
        if vm is not None:
            # An earlier run was stopped after the machine was made: adopt it, never write it again.
            if owner_of(vm) == item["resource_uuid"]:
                result["backend_id"] = vm.id or backend_id
                self._clear_failed_machine(vm, names, item, result)
            self._judge_vm(vm, names, item)
            self._after_vm(lambda: self._tag_os_disk(vm, item), "virtual machine %s exists" % names["vm"])
            result.update(
                action="adopted",
                msg="adopted the existing virtual machine %s in resource group %s" % (names["vm"], names["group"]),
                backend_metadata=self._after_vm(lambda: self._metadata(vm),
                                                "virtual machine %s was adopted" % names["vm"]))
            return

        size = self._validate_remote(location, item["size"])
        self._judge_found(item, state)
        try:
            self._build(item, state, location, image, size, backend_id)
        except AzureError as error:
            result["changed"] = state.written
            if state.vm_accepted:
                result["backend_id"] = backend_id
            if isinstance(error, OperationStillRunning) or self._still_running(state):
                # ARM is still working on an object of this run: deleting now would race it
                # (and a group being deleted refuses the next pass). Leave it to the next pass.
                raise RetryLater("%s; nothing is rolled back while Azure is working on it: the next pass adopts "
                                 "the chain" % error)
            message = str(error)
            if state.written:
                message += self._rollback(state)
            raise ItemError(message)

        result["backend_id"] = backend_id
        result["changed"] = bool(state.created)
        if self.check_mode:
            result.update(action="created" if state.created else "none",
                          msg="would create %s" % ", ".join(
                              "%s %s" % (KIND_LABELS[kind], names["group"] if kind == "group" else names[kind])
                              for kind in state.created))
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
            built, "created: " + ", ".join(KIND_LABELS[kind] for kind in state.created),
            "; adopted: " + ", ".join(KIND_LABELS[kind] for kind in state.adopted) if state.adopted else "")

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
        """Adopt the object found by the survey, else create it (in check mode, note that it would be)."""
        existing = state.found.get(kind)
        if existing is not None:
            state.adopted.append(kind)
            state.objects[kind] = existing
            return existing
        state.created.append(kind)
        if self.check_mode:
            return None
        name = state.names["group"] if kind == "group" else state.names[kind]
        state.written = True
        state.in_flight = kind
        state.objects[kind] = self._call("creating %s %s" % (KIND_LABELS[kind], name), create,
                                         accepted=on_accepted)
        state.in_flight = None
        return state.objects[kind]

    def _build(self, item, state, location, image, size, backend_id):
        names = state.names
        group = names["group"]
        network = self.clients.network
        resources = self.clients.resource.resource_groups
        tags = self._tags(item)
        if names["dedicated"]:
            group_tags = tags
        else:  # a shared group made for the offering belongs to no single resource
            group_tags = dict((key, value) for key, value in tags.items() if key != RESOURCE_TAG)

        self._step(state, "group", lambda: resources.create_or_update(group, {
            "location": location, "tags": group_tags}))
        self._step(state, "vnet", lambda: network.virtual_networks.begin_create_or_update(group, names["vnet"], {
            "location": location,
            "tags": tags,
            "properties": {"addressSpace": {"addressPrefixes": [item.get("network_cidr") or DEFAULT_NETWORK_CIDR]}},
        }))
        # Subnets cannot carry tags: a subnet belongs to its (tagged) network.
        subnet = self._step(state, "subnet", lambda: network.subnets.begin_create_or_update(
            group, names["vnet"], names["subnet"],
            {"properties": {"addressPrefix": item.get("subnet_cidr") or DEFAULT_SUBNET_CIDR}}))
        public_ip = self._step(state, "public_ip", lambda: network.public_ip_addresses.begin_create_or_update(
            group, names["public_ip"], {
                "location": location,
                "tags": tags,
                "sku": {"name": "Standard"},
                "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"},
            }))

        nsg = None
        ranges = ssh_ranges(item)
        if ranges:
            nsg = self._step(state, "nsg", lambda: network.network_security_groups.begin_create_or_update(
                group, names["nsg"], {
                    "location": location,
                    "tags": tags,
                    "properties": {"securityRules": [{
                        "name": SSH_RULE_NAME,
                        "properties": {
                            "protocol": "Tcp",
                            "sourcePortRange": "*",
                            "destinationPortRange": "22",
                            "sourceAddressPrefixes": ranges,
                            "destinationAddressPrefix": "*",
                            "access": "Allow",
                            "priority": SSH_RULE_PRIORITY,
                            "direction": "Inbound",
                        },
                    }]},
                }))

        def nic_body():
            body = {
                "location": location,
                "tags": tags,
                "properties": {"ipConfigurations": [{
                    "name": names["ip_config"],
                    "properties": {
                        "privateIPAllocationMethod": "Dynamic",
                        "subnet": {"id": subnet.id},
                        "publicIPAddress": {"id": public_ip.id},
                    },
                }]},
            }
            if nsg is not None:
                body["properties"]["networkSecurityGroup"] = {"id": nsg.id}
            return body

        nic = self._step(state, "nic", lambda: network.network_interfaces.begin_create_or_update(
            group, names["nic"], nic_body()))

        def vm_body():
            username = item.get("admin_username") or DEFAULT_ADMIN_USERNAME
            password = admin_password()
            self._hide(password)
            os_profile = {
                "computerName": names["vm"],
                "adminUsername": username,
                "adminPassword": password,
                "linuxConfiguration": {
                    "disablePasswordAuthentication": True,
                    "ssh": {"publicKeys": [{
                        "path": "/home/%s/.ssh/authorized_keys" % username,
                        "keyData": item["ssh_public_key"].strip(),
                    }]},
                },
            }
            if item.get("custom_data"):
                os_profile["customData"] = base64.b64encode(
                    item["custom_data"].encode("utf-8")).decode("ascii")
            return {
                "location": location,
                "tags": tags,
                "properties": {
                    "hardwareProfile": {"vmSize": size.name},
                    "storageProfile": {
                        "imageReference": dict(image),
                        "osDisk": {"createOption": "FromImage", "deleteOption": "Delete"},
                    },
                    "osProfile": os_profile,
                    "networkProfile": {"networkInterfaces": [{
                        "id": nic.id,
                        "properties": {"primary": True, "deleteOption": "Delete"},
                    }]},
                },
            }

        def accepted():
            state.vm_accepted = True
            self.accepted_vms[item["resource_uuid"]] = backend_id

        compute = self.clients.compute.virtual_machines
        # The survey found no machine, so this PUT makes one (a PUT on an existing VM would change it).
        self._step(state, "vm", lambda: compute.begin_create_or_update(group, names["vm"], vm_body()),
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
        self._call("tagging OS disk %s" % parts["name"], disks.begin_update, parts["group"], parts["name"],
                   {"tags": tags})

    def _still_running(self, state):
        """Whether the object whose write failed is still being provisioned by ARM (a failed
        status poll is not a failed operation)."""
        kind = state.in_flight
        if kind is None or kind == "group":  # a group PUT is synchronous
            return False
        read = object_operations(self.clients, state.names["group"], state.names["vnet"])[kind][0]
        try:
            obj = self._read("reading %s %s" % (KIND_LABELS[kind], state.names[kind]), read, state.names[kind])
        except AzureError:
            return True  # cannot tell: deleting blind could race the operation
        return obj is not None and provisioning_state(obj) not in (None, "succeeded", "failed", "canceled")

    # ---- rollback and deletion ------------------------------------------------------------
    def _delete_group(self, group, current=None):
        """Delete a whole resource group; False when it was already gone."""
        resources = self.clients.resource.resource_groups
        if current is None and self._read("reading resource group %s" % group, resources.get, group) is None:
            return False
        if not self.check_mode:
            try:
                self._call("deleting resource group %s" % group, resources.begin_delete, group)
            except AzureError as error:
                if not error.not_found:
                    raise
        return True

    def _delete_objects(self, group, vnet_name, targets, resource_uuid=None):
        """Delete ``[(kind, name)]`` in order, tolerating 404 (see ``azure_objects.delete_objects``).
        Returns ``(deleted labels, left labels)``."""
        return delete_objects(self.clients, group, vnet_name, targets, resource_uuid=resource_uuid,
                              check_mode=self.check_mode, deadline=self.deadline)

    def _foreign_in_group(self, state):
        """What the dedicated group holds that this run did not make (the run's own objects and
        the OS disk its machine made are not counted)."""
        names = state.names
        group = names["group"]
        subscription = self.clients.subscription_id
        ours = set()
        for kind in state.created:
            if kind in TOP_LEVEL_TYPES:
                provider, type_name = TOP_LEVEL_TYPES[kind]
                ours.add(("/subscriptions/%s/resourceGroups/%s/providers/%s/%s/%s"
                          % (subscription, group, provider, type_name, names[kind])).lower())
        vm_id = build_vm_id(subscription, group, names["vm"]).lower()
        listed = self._listing("listing resource group %s" % group,
                               self.clients.resource.resources.list_by_resource_group, group)
        return [resource.id for resource in listed
                if str(resource.id).lower() not in ours
                and str(getattr(resource, "managed_by", None) or "").lower() != vm_id]

    def _rollback(self, state):
        """Delete what this run created (never what it adopted, never anything of another owner)."""
        names = state.names
        group = names["group"]
        targets = [(kind, names[kind]) for kind in DELETION_ORDER if kind in state.created]
        try:
            foreign = None
            if names["dedicated"] and "group" in state.created:
                try:
                    foreign = self._foreign_in_group(state)
                except AzureError as error:
                    if not error.not_found:
                        raise
                    return "; rolled back: nothing was left (resource group %s does not exist)" % group
                if not foreign:
                    self._delete_group(group)
                    return "; rolled back: deleted resource group %s" % group
            deleted = self._delete_objects(group, names["vnet"], targets)[0]
            message = "; rolled back: deleted %s" % (", ".join(deleted) or "nothing (nothing was left)")
            if foreign:
                message += ("; resource group %s is left: it holds %s, which this run did not make"
                            % (group, ", ".join(foreign)))
            return message
        except AzureError as error:
            return "; rollback failed, objects may be left in resource group %s: %s" % (group, error)

    def _shared_targets(self, names):
        """This machine's objects in a shared group, as ``[(kind, name)]`` in deletion order.

        Names are derived from the VM name in the id; the names the machine's NIC
        actually references are added when they are this machine's under another
        spelling (a Mastermind-era ``NSG<vm>``), so nothing of a neighbour is touched.
        """
        group = names["group"]
        network = self.clients.network
        nic = self._read("reading network interface %s" % names["nic"], network.network_interfaces.get,
                         group, names["nic"])
        candidates = {kind: [names[kind]] for kind in DELETION_ORDER}
        candidates["nsg"].append("NSG" + names["vm"])
        if nic is not None:
            referenced = {"nsg": getattr(nic, "network_security_group", None)}
            for ip_configuration in getattr(nic, "ip_configurations", None) or []:
                referenced.setdefault("public_ip", getattr(ip_configuration, "public_ip_address", None))
            for kind, reference in referenced.items():
                parts = parse_resource_id(getattr(reference, "id", None))
                if parts and same_name(parts["group"], group) and same_name(parts["name"], names[kind]):
                    candidates[kind].insert(0, parts["name"])
        targets = []
        for kind in DELETION_ORDER:
            seen = set()
            for name in candidates[kind]:
                if name not in seen:
                    seen.add(name)
                    targets.append((kind, name))
        return targets

    def absent(self, item, result):
        backend_id = item.get("backend_id")
        if not backend_id:
            self._absent_by_owner_tag(item, result)
            return
        names = self._names_from_id(backend_id)
        uuid = item["resource_uuid"]
        verb = "would delete" if self.check_mode else "deleted"
        if names["dedicated"]:
            group = self._read("reading resource group %s" % names["group"],
                               self.clients.resource.resource_groups.get, names["group"])
            if group is None:
                result.update(action="absent", msg="resource group %s is already gone" % names["group"])
                return
            owner = owner_of(group)
            if owner not in (None, uuid):  # no tag: a group made before owner tags, reached by its backend id
                raise ItemError("resource group %s has %s, not this resource's; it is not deleted"
                                % (names["group"], describe_owner(owner)))
            if provisioning_state(group) == "deleting":
                raise RetryLater("resource group %s is being deleted; the next pass checks that it is gone"
                                 % names["group"])
            self._delete_group(names["group"], current=group)
            result.update(changed=True, action="deleted",
                          msg="%s resource group %s with everything in it" % (verb, names["group"]))
            return
        deleted, left = self._delete_objects(names["group"], names["vnet"], self._shared_targets(names), uuid)
        note = "; left: %s" % ", ".join(left) if left else ""
        if not deleted:
            result.update(action="absent", msg="virtual machine %s and its objects are already gone in resource "
                                               "group %s%s" % (names["vm"], names["group"], note))
            return
        result.update(changed=True, action="deleted",
                      msg="%s %s from resource group %s%s" % (verb, ", ".join(deleted), names["group"], note))

    def _absent_by_owner_tag(self, item, result):
        """Terminate a resource Waldur holds no backend id for (its create was interrupted, or its
        machine failed): delete what carries its owner tag, and only that."""
        marker = "%s=%s" % (RESOURCE_TAG, item["resource_uuid"])
        deleted = self._delete_owned(item["resource_uuid"])
        if not deleted:
            result.update(action="absent", msg="no backend id, and no Azure object carries owner tag %s: there is "
                                               "no virtual machine to delete" % marker)
            return
        result.update(changed=True, action="deleted", msg="%s %s (found by owner tag %s)" % (
            "would delete" if self.check_mode else "deleted", ", ".join(deleted), marker))

    def _delete_owned(self, uuid):
        """Delete every object carrying this resource's owner tag: tagged groups whole, other
        tagged objects one by one (machine first). Returns the labels of what was deleted."""
        marker = "%s=%s" % (RESOURCE_TAG, uuid)
        resources = self.clients.resource
        groups = self._listing("listing the resource groups tagged %s" % marker, resources.resource_groups.list,
                               filter=tag_filter(uuid))
        listed = self._listing("listing the resources tagged %s" % marker, resources.resources.list,
                               filter=tag_filter(uuid))
        deleted = []
        for group in groups:
            if provisioning_state(group) == "deleting":
                raise RetryLater("resource group %s is being deleted; the next pass checks that it is gone"
                                 % group.name)
            if self._delete_group(group.name, current=group):
                deleted.append("resource group %s" % group.name)
        in_groups = set(group.name.lower() for group in groups)
        by_group = {}
        for resource in listed:
            parts = parse_resource_id(resource.id)
            kind = kind_of(resource)
            if parts and kind and parts["group"].lower() not in in_groups:
                by_group.setdefault(parts["group"], {})[kind] = parts["name"]
        for group, kinds in sorted(by_group.items()):
            targets = [(kind, kinds[kind]) for kind in OWNED_DELETION_ORDER if kind in kinds]
            deleted += ["%s from resource group %s" % (label, group) for label in
                        self._delete_objects(group, kinds.get("vnet"), targets, uuid)[0]]
        return deleted

    # ---- power ----------------------------------------------------------------------------
    def power(self, item, result, wanted):
        if not item.get("backend_id"):
            raise ItemError("state %s needs the backend_id of the virtual machine" % wanted)
        names = self._names_from_id(item["backend_id"])
        vm = self._read_vm(names["group"], names["vm"])
        if vm is None:
            raise ItemError("Azure virtual machine %s (%s) does not exist" % (names["vm"], item["backend_id"]))
        owner = owner_of(vm)
        if owner not in (None, item["resource_uuid"]):
            raise ItemError("virtual machine %s in resource group %s has %s, not this resource's; its power is "
                            "left as it is" % (names["vm"], names["group"], describe_owner(owner)))
        current = power_state(getattr(vm, "instance_view", None))
        machines = self.clients.compute.virtual_machines
        if wanted == "deallocated":
            settled, operation, action = ("deallocated", "deallocating"), machines.begin_deallocate, "powered_off"
            verb, doing, done = "deallocate", "deallocating", "deallocated"
        else:
            settled, operation, action = ("running", "starting"), machines.begin_start, "powered_on"
            verb, doing, done = "start", "starting", "started"
        if current in settled:
            result.update(msg="virtual machine %s is already %s" % (names["vm"], current),
                          backend_metadata=self._metadata(vm, power=current))
            return
        result.update(changed=True, action=action)
        if self.check_mode:
            result.update(msg="would %s virtual machine %s (now %s)" % (verb, names["vm"], current),
                          backend_metadata=self._metadata(vm, power=current))
            return
        self._call("%s virtual machine %s" % (doing, names["vm"]), operation, names["group"], names["vm"])
        result.update(msg="%s virtual machine %s (was %s)" % (done, names["vm"], current),
                      backend_metadata=self._metadata(vm, power=wanted))


def normalized_items(module):
    """The machines with UUIDs normalised; a malformed UUID fails the module naming its key."""
    items = []
    for index, machine in enumerate(module.params["machines"]):
        item = dict(machine)
        for key in ("resource_uuid", "order_uuid", "offering_uuid"):
            if item.get(key) is None:
                continue
            try:
                item[key] = normalize_uuid(item[key])
            except ValueError:
                module.fail_json(msg="machines[%d].%s: %r is not a UUID" % (index, key, item[key]))
        items.append(item)
    return items


def duplicate_errors(items):
    """Items acting on a resource an earlier item of the batch already acts on get an error."""
    first = {}
    for index, item in enumerate(items):
        uuid = item["resource_uuid"]
        if uuid in first and not item.get("error"):
            item["error"] = ("machines[%d] acts on resource %s too; one item per resource and batch"
                             % (first[uuid], uuid))
        first.setdefault(uuid, index)


def summary(results):
    counts = {}
    for result in results:
        key = "failed" if result.get("failed") else result.get("action") or "none"
        if result.get("retry"):
            key = "retry"
        counts[key] = counts.get(key, 0) + 1
    return "%d machine(s): %s" % (len(results), ", ".join("%d %s" % (counts[key], key) for key in sorted(counts)))


def main():
    machine_options = dict(
        resource_uuid=dict(type="str", required=True),
        order_uuid=dict(type="str"),
        offering_uuid=dict(type="str"),
        name=dict(type="str"),
        state=dict(type="str", default="present", choices=["present", "absent", "deallocated", "running"]),
        backend_id=dict(type="str"),
        location=dict(type="str"),
        size=dict(type="str"),
        image=dict(type="raw"),
        ssh_public_key=dict(type="str", no_log=False),
        admin_username=dict(type="str", default=DEFAULT_ADMIN_USERNAME),
        custom_data=dict(type="str"),
        resource_group=dict(type="str"),
        network_cidr=dict(type="str", default=DEFAULT_NETWORK_CIDR),
        subnet_cidr=dict(type="str", default=DEFAULT_SUBNET_CIDR),
        allowed_ssh_ranges=dict(type="list", elements="str"),
    )
    argument_spec = azure_argument_spec()
    argument_spec.update(
        machines=dict(type="list", elements="dict", required=True, options=machine_options),
    )
    argument_spec.update(batch_argument_spec())
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)

    BatchRunner(module, None)  # the batch options, before any call
    items = normalized_items(module)
    duplicate_errors(items)
    clients = clients_from_module(module)

    def api_calls():
        # azure-core retries inside the SDK: each attempt counts as a read or a write, not as a retry
        return api_call_counts(clients.counter.reads, clients.counter.writes, 0)

    runner = BatchRunner(module, None, echo=("resource_uuid", "order_uuid"), api_calls=api_calls)
    if any(not item.get("error") for item in items):  # duplicates carry an error and need no call
        try:
            clients.authenticate()
        except AzureError as error:
            runner.fail("%s; no machine was touched" % error)
    deadline_seconds = module.params["deadline"]
    chain = VmChain(module, clients, time.monotonic() + deadline_seconds)

    results = runner.run(items, chain.run)
    for item, result in zip(items, results):
        # items cut off by the deadline come back with only failed/changed/retry/msg
        result.setdefault("backend_id", item.get("backend_id") or chain.accepted_vms.get(item["resource_uuid"]))
        result.setdefault("action", "none")
        result.setdefault("backend_metadata", None)
    runner.finish(results, msg=summary(results), fail_msg=lambda failures, results: "%d of %d machine(s) failed: %s" % (
        len(failures), len(results), failures[0]["msg"]))

if __name__ == "__main__":
    main()
