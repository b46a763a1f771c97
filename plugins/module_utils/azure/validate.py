# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Judging machine items before any call: SSH keys, networks, admin names, what a create
needs; normalising the batch's UUIDs, refusing a second item per resource; the summary line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import ipaddress
import re
import secrets
import string

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.naming import InvalidImage, machine_names, parse_image
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid

DEFAULT_NETWORK_CIDR = "10.0.0.0/16"
DEFAULT_SUBNET_CIDR = "10.0.0.0/24"
DEFAULT_ADMIN_USERNAME = "waldur"
PASSWORD_LENGTH = 24
# The key types Azure accepts for Linux machines.
_SSH_KEY = re.compile(r"^(?:ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp(?:256|384|521))\s+(?P<data>[A-Za-z0-9+/]+={0,3})(?:\s.*)?$")
_ADMIN_USERNAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
# Names Azure refuses as a Linux administrator (VM create answers InvalidParameter).
RESERVED_ADMIN_USERNAMES = frozenset((
    "1", "123", "a", "actuser", "adm", "admin", "admin1", "admin2", "administrator", "aspnet", "backup",
    "console", "david", "guest", "john", "owner", "root", "server", "sql", "support", "support_388945a0",
    "sys", "test", "test1", "test2", "test3", "user", "user1", "user2", "user3", "user4", "user5",
))


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


def normalized_items(module, machines):
    """The machines with UUIDs normalised; a malformed UUID fails the module naming its key."""
    items = []
    for index, machine in enumerate(machines):
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
    """Items acting on a resource an earlier item of the batch already acts on get an error; so do
    creates of different resources whose names come out the same (see ``colliding_creates``)."""
    first = {}
    for index, item in enumerate(items):
        uuid = item["resource_uuid"]
        if uuid in first and not item.get("error"):
            item["error"] = ("machines[%d] acts on resource %s too; one item per resource and batch"
                             % (first[uuid], uuid))
        first.setdefault(uuid, index)
    colliding_creates(items)


def colliding_creates(items):
    """Creates of different resources in one batch whose derived names coincide (same group and
    machine name, e.g. two names that sanitize alike and share their first 8 hex in a shared group)
    are refused, all of them, before any write: built together, each would adopt or roll back the
    other's objects. The message names every resource concerned."""
    by_names = {}
    for index, item in enumerate(items):
        if item.get("error") or item.get("state", "present") != "present" or item.get("backend_id"):
            continue
        names = machine_names(item.get("name"), item["resource_uuid"], item.get("resource_group"))
        by_names.setdefault((names["group"].lower(), names["vm"].lower()), []).append((index, names))
    for clash in by_names.values():
        if len(clash) < 2:
            continue
        group, vm = clash[0][1]["group"], clash[0][1]["vm"]
        for index, _names in clash:
            others = ", ".join("machines[%d] (resource %s)" % (other, items[other]["resource_uuid"])
                               for other, _n in clash if other != index)
            items[index]["error"] = (
                "resource %s would get virtual machine %s in resource group %s, as would %s; nothing is created "
                "for either: rename one of them" % (items[index]["resource_uuid"], vm, group, others))


def summary(results):
    counts = {}
    for result in results:
        key = "failed" if result.get("failed") else result.get("action") or "none"
        if result.get("retry"):
            key = "retry"
        counts[key] = counts.get(key, 0) + 1
    return "%d machine(s): %s" % (len(results), ", ".join("%d %s" % (counts[key], key) for key in sorted(counts)))
