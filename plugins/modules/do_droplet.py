#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: do_droplet
short_description: Create, adopt, resize, power and delete DigitalOcean droplets of Waldur resources
version_added: 0.1.0
description:
  - Works on a list of droplets, one per Waldur resource, concurrently on a bounded pool of workers,
    and returns one result per item in the order of the input.
  - Every droplet carries the tag C(waldur-resource:<resource uuid as 32 hex>). Ordered tags with that
    prefix are dropped, so one order cannot claim another resource's droplet.
  - Before creating, the droplets carrying the resource's tag are looked up. Exactly one (carrying no
    other resource's tag) is adopted instead of creating a second droplet; a droplet that also carries
    another resource's tag is never adopted, changed or deleted.
  - Two or more droplets carrying exactly the resource's tag are copies made by overlapping passes
    when they have the same name and size and were created within O(duplicate_window) seconds of each
    other; then the oldest is kept (and adopted) and the others are deleted, and the result says so.
    Otherwise the item fails naming the count and the ids, and nothing is deleted.
  - A droplet whose O(droplets[].backend_id) no longer exists is never re-created under a new id.
  - An item failing sets that item's C(failed) and C(msg); the task fails only when
    O(fail_on_item_error=true), or when DigitalOcean rejects the token.
  - A failure the next run should retry sets the item's C(retry) as well - DigitalOcean unreachable,
    throttling or answering 5xx after the retries, a create whose answer was lost, and every failure
    after the droplet exists (waiting for it, a power action or a resize that did not finish in time).
    Such an item carries the droplet's id in C(backend_id) when there is one, so C(waldur_orders)
    leaves its order for the next pass instead of erring it.
author:
  - Waldur site agent developers (@waldur)
options:
  droplets:
    description:
      - The droplets to act on, one per Waldur resource.
    type: list
    elements: dict
    required: true
    suboptions:
      resource_uuid:
        description:
          - UUID of the Waldur resource (dashed or not). Names the droplet's resource tag.
        type: str
        required: true
      order_uuid:
        description:
          - UUID of the Waldur order this item carries out; echoed in the result.
        type: str
      name:
        description:
          - Droplet name. Characters outside C([A-Za-z0-9.-]) become C(-) and the name is lower-cased;
            with no name the droplet is called C(waldur-<first 8 hex of the resource uuid>).
        type: str
      state:
        description:
          - V(present) creates the droplet (or adopts the one carrying the resource tag); with
            O(droplets[].backend_id) it checks the droplet exists and resizes it when
            O(droplets[].size) differs.
          - V(absent) deletes the droplet O(droplets[].backend_id) and every other droplet carrying
            exactly this resource's tag (copies an overlapping pass made). A droplet already gone is
            not an error.
          - V(off) shuts the droplet down (powering it off when a graceful shutdown does not finish
            within half of O(wait_timeout)); V(active) powers it on. Nothing is done when the droplet
            is already in that state.
        type: str
        choices: [present, absent, "off", active]
        default: present
      backend_id:
        description:
          - Id of the droplet Waldur knows for the resource. Empty means none.
        type: str
      region:
        description:
          - Region slug. Required to create.
        type: str
      image:
        description:
          - Image slug or id. Required to create.
        type: str
      size:
        description:
          - Size slug. Required to create; for the droplet O(droplets[].backend_id) a different slug
            resizes it (CPU and RAM only, never the disk), powering it off first. An adopted droplet
            is never resized. Leave it out to only check that the droplet exists (the order pass does
            so for Create and Restore orders, which never resize).
        type: str
      running:
        description:
          - With O(droplets[].backend_id), the power state the droplet should have after a resize
            (V(true) on, V(false) off). When V(true) and the droplet is off with its size already
            right, it is powered on; a resize interrupted after the power-off is finished this way.
          - Unset, a resized droplet is powered on again only if it was running.
        type: bool
      ssh_keys:
        description:
          - SSH keys for a new droplet, each a key id, an MD5 fingerprint (both must exist in the account)
            or an OpenSSH public key.
          - A public key is found among the account's keys by fingerprint (never by name) and added as
            C(waldur-<first 8 hex of the resource uuid>) when missing.
        type: list
        elements: str
        default: []
      user_data:
        description:
          - Cloud-init user data for a new droplet.
        type: str
      tags:
        description:
          - Tags for a new droplet. Tags starting with C(waldur-resource:) are dropped and listed in the
            result's RV(results[].dropped_tags).
        type: list
        elements: str
        default: []
  wait:
    description:
      - Wait for created droplets to become C(active) and for power actions to complete.
      - Droplets being started are waited for together; one paged listing of the account reads the
        status of all of them (a single GET when only one droplet is waited for).
      - A resize always waits for the power-off and the resize itself, which must finish before the
        droplet can be powered on again.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds one item may spend waiting for DigitalOcean (create, power actions, resize).
    type: int
    default: 300
  duplicate_window:
    description:
      - Seconds within which droplets carrying the same resource tag, name and size count as copies
        made by overlapping passes (see the description). Set it to the longest a pass runs (the order
        pass uses its deadline).
    type: float
    default: 900
extends_documentation_fragment:
  - waldur.site_agent.digitalocean
  - waldur.site_agent.batch
  - waldur.site_agent.attributes.backend
"""

EXAMPLES = r"""
- name: Create a droplet for a Waldur resource
  waldur.site_agent.do_droplet:
    token: "{{ digitalocean_token }}"
    droplets:
      - resource_uuid: 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b
        order_uuid: 0a1b2c3d4e5f40718293a4b5c6d7e8f9
        name: web-1
        region: ams3
        image: ubuntu-22-04-x64
        size: s-1vcpu-1gb
        ssh_keys:
          - "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@example.com"
        tags: [waldur]
  register: created

- name: Pause (shut down) and terminate droplets Waldur knows
  waldur.site_agent.do_droplet:
    token: "{{ digitalocean_token }}"
    droplets:
      - resource_uuid: 5f0f2b4c-9a8e-4d3f-8a1b-2c3d4e5f6a7b
        backend_id: "3164444"
        state: "off"
      - resource_uuid: 7a6b5c4d3e2f41a09b8c7d6e5f4a3b2c
        backend_id: "3164450"
        state: absent

- name: Resize a droplet to another size slug
  waldur.site_agent.do_droplet:
    token: "{{ digitalocean_token }}"
    droplets:
      - resource_uuid: 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b
        backend_id: "3164444"
        size: s-2vcpu-4gb
"""

RETURN = r"""
results:
  description: One result per item of O(droplets), in the same order.
  returned: always
  type: list
  elements: dict
  contains:
    resource_uuid:
      description: The item's resource UUID as 32 lower-case hex digits.
      type: str
      sample: 5f0f2b4c9a8e4d3f8a1b2c3d4e5f6a7b
    order_uuid:
      description: The item's order UUID as 32 lower-case hex digits, or null.
      type: str
      sample: 0a1b2c3d4e5f40718293a4b5c6d7e8f9
    backend_id:
      description: Id of the droplet the item is about, as a string; null when there is none.
      type: str
      sample: "3164444"
    changed:
      description: Whether the item changed anything on DigitalOcean (or would, in check mode).
      type: bool
    failed:
      description: Whether the item failed.
      type: bool
    retry:
      description: >-
        Set (with C(failed)) when a later run should retry the item rather than its order be erred:
        a transient failure, or a failure after the droplet exists.
      type: bool
      returned: when the item failed and may be retried
    cloud:
      description: What exists on DigitalOcean for the item, for messages (C(droplet <id> <name> (<status>))); null when nothing.
      type: str
      sample: droplet 3164444 web-1 (active)
    msg:
      description: What happened, or why the item failed.
      type: str
      sample: created droplet 3164444 web-1 in ams3 (s-1vcpu-1gb, ubuntu-22-04-x64)
    action:
      description: What was done.
      type: str
      choices: [created, adopted, deleted, absent, resized, powered_off, powered_on, none]
    droplet:
      description: Facts of the droplet after the action; null when there is no droplet.
      type: dict
      contains:
        id:
          description: Droplet id.
          type: int
        name:
          description: Droplet name.
          type: str
        status:
          description: C(new), C(active), C(off) or C(archive).
          type: str
        region:
          description: Region slug.
          type: str
        size_slug:
          description: Size slug.
          type: str
        image:
          description: Image slug (or name, or id).
          type: str
        vcpus:
          description: Virtual CPUs.
          type: int
        memory:
          description: Memory in MiB.
          type: int
        disk:
          description: Disk in GB.
          type: int
        networks:
          description: Addresses, C(public_ipv4), C(private_ipv4) and C(public_ipv6) (null when none).
          type: dict
        tags:
          description: The droplet's tags.
          type: list
          elements: str
        created_at:
          description: Creation time (ISO 8601).
          type: str
    backend_metadata:
      description:
        - What Waldur stores as the resource's backend metadata, C({backend_type, droplet}) with the
          droplet's id, name, status, region, size_slug, image, created_at and networks.
        - Null when there is no droplet.
      type: dict
    dropped_tags:
      description: Ordered tags dropped because their C(waldur-resource:) prefix is reserved.
      type: list
      elements: str
changed:
  description: Whether any item changed something.
  returned: always
  type: bool
failed_count:
  description: How many items failed.
  returned: always
  type: int
  sample: 0
api_calls:
  description: HTTP requests sent to DigitalOcean, retries included, as C(reads) (GETs), C(writes) (the
    other methods) and C(retries) (requests repeated).
  returned: always
  type: dict
  sample: {reads: 9, writes: 3, retries: 0}
api_retries:
  description: Requests repeated after a rate-limit answer, a server error or a lost connection.
  returned: always
  type: int
  sample: 0
msg:
  description: Summary of the batch.
  returned: always
  type: str
  sample: "3 droplets: 2 created, 1 none; 0 failed"
"""

import datetime
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import (
    BatchRunner,
    ItemError,
    api_call_counts,
    batch_argument_spec,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import client_from_module, digitalocean_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import backend_metadata, resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.waiter import DropletWaiter
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import (
    droplet_name,
    droplet_tags,
    resource_tag,
    ssh_key_name,
)

ACTIONS = ("created", "adopted", "deleted", "absent", "resized", "powered_off", "powered_on", "none")
UTC = datetime.timezone.utc


def base_result(item):
    return {
        "resource_uuid": item["resource_uuid"],
        "order_uuid": item.get("order_uuid"),
        "backend_id": item.get("backend_id"),
        "changed": False,
        "failed": False,
        "msg": "",
        "action": "none",
        "droplet": None,
        "backend_metadata": None,
        "cloud": None,
        "dropped_tags": [],
    }


class RetryLater(ItemError):
    """A failure a later pass should retry: the droplet exists (or may), only a step failed."""


def _retryable(exc):
    """Whether the next pass should retry rather than the order be erred: DigitalOcean
    unreachable, throttling or failing after the retries, a write whose effect is unknown,
    or a step that failed after the droplet exists."""
    if isinstance(exc, RetryLater):
        return True
    if isinstance(exc, DigitalOceanError):
        return exc.ambiguous or exc.status is None or exc.status == 429 or exc.status >= 500
    return False


def _created(facts):
    text = facts.get("created_at")
    if not text:
        return None
    try:
        moment = datetime.datetime.strptime(str(text).replace("Z", "+00:00")[:25], "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return None
    return moment.astimezone(UTC)


def _seconds(value):
    return ("%g" % value) if isinstance(value, float) else str(value)


class DropletWorker:
    """Brings one item's droplet to its state. ``__call__`` never raises: failures
    become the item's result."""

    def __init__(self, client, check_mode=False, wait=True, wait_timeout=300, clock=time.monotonic,
                 waiter=None, duplicate_window=900):
        self.client = client
        self.duplicate_window = duplicate_window
        # one waiter for all workers: droplets being started are read together
        self.waiter = waiter or DropletWaiter(client, clock=clock)
        self.check_mode = check_mode
        self.wait = wait
        self.wait_timeout = wait_timeout
        self.clock = clock
        self.known = {}
        self.by_tag = {}

    def prefetch(self, items):
        """Read what the items need from paged listings (one call per 200 droplets)
        instead of one call per item: the droplets they name and, when several items
        look droplets up by their resource tag, the droplets carrying each tag. Each
        item uses its entry once."""
        ids = set(int(item["backend_id"]) for item in items
                  if item.get("backend_id") and str(item["backend_id"]).isdigit()
                  and item.get("state") in ("present", "off", "active"))
        tags = set(resource_tag(item["resource_uuid"]) for item in items if self._looks_up_tag(item))
        if len(tags) > 1:
            # worth it only when the whole listing takes fewer calls than one per tag
            droplets = self.client.scan_droplets(max_pages=len(tags) - 1)
            if droplets is not None:
                by_tag = dict((tag, []) for tag in tags)
                for facts in droplets:
                    for tag in resource_tags(facts["tags"]) & tags:
                        by_tag[tag].append(facts)
                    if facts["id"] in ids:
                        self.known[facts["id"]] = facts
                self.by_tag = by_tag
                ids = set()  # ids the listing did not show are read one by one, to confirm they are gone
        if len(ids) > 1:
            self.known = self.client.find_droplets(sorted(ids))

    @staticmethod
    def _looks_up_tag(item):
        """Whether the item reads the droplets carrying its resource tag."""
        if item.get("state") == "absent":
            return True  # every droplet carrying the tag goes, the one Waldur knows and any copy
        if item.get("backend_id"):
            return False
        if (item.get("state") or "present") == "present":
            return all(item.get(field) for field in ("region", "image", "size"))
        return True

    def tagged(self, tag):
        """Droplets carrying ``tag`` (from the prefetched listing when there is one)."""
        if tag in self.by_tag:
            return self.by_tag.pop(tag)
        return self.client.list_droplets(tag_name=tag)

    def read(self, backend_id):
        """Facts of droplet ``backend_id`` (None if it does not exist)."""
        key = int(backend_id)
        if key in self.known:
            return self.known.pop(key)
        return self.client.get_droplet(backend_id)

    def __call__(self, item):
        result = base_result(item)
        notes = []
        tags, dropped = droplet_tags(item.get("tags"), item["resource_uuid"])
        result["dropped_tags"] = dropped
        if dropped:
            notes.append("dropped tag(s) %s: the waldur-resource: prefix is reserved" % ", ".join(dropped))
        try:
            if self.client.auth_error is not None:  # one 401 settles it for every item
                raise self.client.auth_error
            backend_id = item.get("backend_id")
            if backend_id and not str(backend_id).isdigit():
                raise ItemError("backend_id %r is not a DigitalOcean droplet id" % backend_id)
            deadline = self.clock() + self.wait_timeout
            state = item.get("state") or "present"
            if state == "present":
                self.present(item, result, notes, tags, deadline)
            elif state == "absent":
                self.absent(item, result, notes)
            else:
                self.power(item, result, notes, state, deadline)
        except (DigitalOceanError, ItemError, ValueError) as exc:
            result.update(failed=True, msg=str(exc))
            if _retryable(exc):
                # transient, or the droplet exists and only a later step failed: the next pass
                # finds it by its tag (or id) and carries on; the order is not erred
                result["retry"] = True
        return self._finish(result, notes)

    @staticmethod
    def _finish(result, notes):
        parts = [result["msg"]] + notes
        result["msg"] = "; ".join(part for part in parts if part)
        return result

    def _describe(self, result, facts):
        result["droplet"] = facts
        result["backend_metadata"] = backend_metadata(facts) if facts else None
        if facts:
            result["backend_id"] = str(facts["id"])
            result["cloud"] = "droplet %s %s (%s)" % (facts["id"], facts["name"], facts["status"])

    # ---- present ----------------------------------------------------------------------
    def present(self, item, result, notes, tags, deadline):
        backend_id = item.get("backend_id")
        if backend_id:
            facts = self.read(backend_id)
            if facts is None:
                raise ItemError("droplet %s no longer exists and cannot be re-created under the same id; "
                                "terminate the resource and order a new one" % backend_id)
            if item.get("size") and facts["size_slug"] != item["size"]:
                return self.resize(result, facts, item["size"], deadline, item.get("running"))
            if facts["status"] == "new" and self.wait and not self.check_mode:
                facts = self._wait_started(facts, deadline, notes)
            self._describe(result, facts)
            result["msg"] = "droplet %s exists (%s)" % (backend_id, facts["status"])
            if item.get("running") and facts["status"] == "off":
                # a resize interrupted after the power-off left it off; Waldur wants it running
                return self._power_on_after_resize(result, facts, deadline)
            return None

        missing = [field for field in ("region", "image", "size") if not item.get(field)]
        if missing:
            raise ItemError("; ".join("DigitalOcean droplet %s is not specified" % field for field in missing))
        tag = resource_tag(item["resource_uuid"])
        tagged = self.tagged(tag)
        own = [d for d in tagged if resource_tags(d["tags"]) == set([tag])]
        shared = [d for d in tagged if d not in own]
        if len(own) > 1:
            own = [self._remove_duplicates(own, tag, result, notes)]
        if shared:
            notes.append("droplet(s) %s carry another resource's tag as well and were not adopted"
                         % ", ".join(str(d["id"]) for d in shared))
        if own:
            facts = own[0]
            if facts["status"] == "new" and self.wait and not self.check_mode:
                facts = self._wait_started(facts, deadline, notes)
            self._describe(result, facts)
            result.update(action="adopted", msg="adopted droplet %s %s carrying tag %s"
                          % (facts["id"], facts["name"], tag))
            return None

        name = droplet_name(item.get("name"), resource_uuid=item["resource_uuid"])
        key_ids, key_notes = self.client.resolve_ssh_keys(
            item.get("ssh_keys"), ssh_key_name(item["resource_uuid"]), check_mode=self.check_mode)
        spec = "%s (%s, %s)" % (item["region"], item["size"], item["image"])
        result.update(action="created", changed=True)
        if self.check_mode:
            result["msg"] = "would create droplet %s in %s" % (name, spec)
            notes.extend(key_notes)
            return None
        facts = self.client.create_droplet(
            name, item["region"], item["size"], item["image"], ssh_keys=key_ids, tags=tags,
            user_data=item.get("user_data"), resource_tag=tag)
        notes.extend(key_notes)
        self._describe(result, facts)
        result["msg"] = "created droplet %s %s in %s" % (facts["id"], name, spec)
        if self.wait:
            try:
                self._describe(result, self._wait_started(facts, deadline, notes))
            except DigitalOceanError as exc:
                # the droplet exists: whatever failed while waiting, the next pass adopts it by its tag
                raise RetryLater("created droplet %s %s, then reading it failed: %s" % (facts["id"], name, exc))
        return None

    def _remove_duplicates(self, own, tag, result, notes):
        """Several droplets carry this resource's tag. When they are copies one order made twice
        (overlapping passes: same name, same size, created within ``duplicate_window`` seconds of
        each other) the oldest is kept and the others deleted; otherwise the item fails naming them."""
        ordered = sorted(own, key=lambda d: (_created(d) or datetime.datetime.max.replace(tzinfo=UTC), d["id"]))
        ids = ", ".join(str(d["id"]) for d in sorted(own, key=lambda d: d["id"]))
        created = [_created(d) for d in ordered]
        if len(set(d["name"] for d in ordered)) > 1:
            differ = "their names differ"
        elif len(set(d["size_slug"] for d in ordered)) > 1:
            differ = "their sizes differ"
        elif None in created:
            differ = "a creation time is unknown"
        elif (created[-1] - created[0]).total_seconds() > self.duplicate_window:
            differ = "they were created more than %s seconds apart" % _seconds(self.duplicate_window)
        else:
            differ = None
        if differ:
            raise ItemError("%d droplets carry tag %s (ids %s); delete the extra ones before retrying (none was "
                            "deleted: %s, so they are not copies made by an overlapping pass)"
                            % (len(own), tag, ids, differ))
        keep, extras = ordered[0], ordered[1:]
        extra_ids = ", ".join(str(d["id"]) for d in extras)
        result["changed"] = True
        if self.check_mode:
            notes.append("would delete duplicate droplet(s) %s made by an overlapping pass, keeping the oldest, %s"
                         % (extra_ids, keep["id"]))
            return keep
        for droplet in extras:
            self.client.destroy_droplet(droplet["id"])
        notes.append("deleted duplicate droplet(s) %s carrying tag %s, made by an overlapping pass (same name "
                     "and size, created within %s seconds); kept the oldest, %s"
                     % (extra_ids, tag, _seconds(self.duplicate_window), keep["id"]))
        return keep

    def _wait_started(self, facts, deadline, notes):
        latest = self.waiter.wait(facts, ("active", "off"), deadline)
        if latest is None:
            raise ItemError("droplet %s disappeared while it was being created" % facts["id"])
        if latest["status"] == "new":
            notes.append("still new after %s seconds; it keeps starting" % self.wait_timeout)
        return latest

    # ---- resize -----------------------------------------------------------------------
    def resize(self, result, facts, size, deadline, running=None):
        """Resize to ``size`` (CPU and RAM only). The droplet is powered off for it and then left
        as ``running`` says (on when true), or as it was when ``running`` is None."""
        droplet_id = facts["id"]
        old_size = facts["size_slug"]
        result.update(action="resized", changed=True)
        self._describe(result, facts)
        was_running = facts["status"] != "off"
        power_on = was_running if running is None else bool(running)
        if self.check_mode:
            steps = []
            if was_running:
                steps.append("powered off for it")
            if power_on:
                steps.append("powered on afterwards")
            result["msg"] = ("would resize droplet %s from %s to %s (CPU and RAM only%s)"
                             % (droplet_id, old_size, size, "".join("; " + step for step in steps)))
            return None
        if facts["status"] == "new":
            facts = self.waiter.wait(facts, ("active", "off"), deadline) or facts
            was_running = facts["status"] != "off"
        steps = []
        if was_running:
            facts, how = self._power_off(droplet_id, deadline)
            steps.append(how)
        try:
            action = self.client.droplet_action(droplet_id, "resize", size=size)
            status = self.client.wait_for_action(droplet_id, action, deadline)
            if status == "errored":
                raise ItemError("resize of droplet %s to %s failed" % (droplet_id, size))
            if status != "completed":
                raise RetryLater("resize of droplet %s to %s did not finish within %s seconds"
                                 % (droplet_id, size, self.wait_timeout))
        except (DigitalOceanError, ItemError) as exc:
            if power_on:
                error = RetryLater if _retryable(exc) else ItemError
                raise error("%s; %s" % (exc, self._power_on_after_failure(droplet_id, deadline)))
            raise
        steps.append("resized")
        if power_on:
            action = self.client.droplet_action(droplet_id, "power_on")
            if self.wait:
                status = self.client.wait_for_action(droplet_id, action, deadline)
                steps.append("powered on" if status == "completed" else "power on %s" % status)
            else:
                steps.append("power on requested")
        self._describe(result, self.client.get_droplet(droplet_id) or facts)
        result["msg"] = "resized droplet %s from %s to %s (%s)" % (droplet_id, old_size, size, ", ".join(steps))
        return None

    def _power_on_after_resize(self, result, facts, deadline):
        droplet_id = facts["id"]
        result.update(action="powered_on", changed=True)
        if self.check_mode:
            result["msg"] += "; would power it on (a resize left it off)"
            return None
        action = self.client.droplet_action(droplet_id, "power_on")
        status = self.client.wait_for_action(droplet_id, action, deadline) if self.wait else "requested"
        self._describe(result, self.client.get_droplet(droplet_id) or facts)
        result["msg"] = "droplet %s has size %s; powered it on (an interrupted resize had left it off)%s" % (
            droplet_id, facts["size_slug"], "" if status in ("completed", "requested") else ": power on %s" % status)
        if status not in ("completed", "requested"):
            raise RetryLater(result["msg"])
        return None

    def _power_on_after_failure(self, droplet_id, deadline):
        try:
            action = self.client.droplet_action(droplet_id, "power_on")
            self.client.wait_for_action(droplet_id, action, deadline)
        except DigitalOceanError as exc:
            return "powering it back on failed too: %s" % exc
        return "powered it back on"

    def _power_off(self, droplet_id, deadline):
        """Graceful shutdown for half the time left, then a hard power off. Returns
        ``(facts, how)`` with the droplet off, or raises."""
        now = self.clock()
        grace_deadline = now + max(0.0, deadline - now) / 2
        try:
            action = self.client.droplet_action(droplet_id, "shutdown")
            status = self.client.wait_for_action(droplet_id, action, grace_deadline)
        except DigitalOceanError as exc:
            if exc.status != 422:
                raise
            status = "refused (%s)" % exc.service_message
        if status == "completed":
            facts = self.client.get_droplet(droplet_id)
            if facts is not None and facts["status"] == "off":
                return facts, "shut down"
        action = self.client.droplet_action(droplet_id, "power_off")
        status = self.client.wait_for_action(droplet_id, action, deadline)
        facts = self.client.get_droplet(droplet_id)
        if facts is None:
            raise ItemError("droplet %s disappeared while powering off" % droplet_id)
        if status != "completed" or facts["status"] != "off":
            raise RetryLater("droplet %s did not power off within %s seconds (power_off %s, status %s)"
                             % (droplet_id, self.wait_timeout, status, facts["status"]))
        return facts, "graceful shutdown did not finish; powered off"

    # ---- absent -----------------------------------------------------------------------
    def absent(self, item, result, notes):
        backend_id = item.get("backend_id")
        tag = resource_tag(item["resource_uuid"])
        if backend_id:
            if self.check_mode:
                facts = self.client.get_droplet(backend_id)
                if facts is None:
                    result.update(action="absent", msg="droplet %s is already gone" % backend_id)
                else:
                    result.update(action="deleted", changed=True, msg="would delete droplet %s" % backend_id)
            elif self.client.destroy_droplet(backend_id):
                result.update(action="deleted", changed=True, msg="deleted droplet %s" % backend_id)
            else:
                result.update(action="absent", msg="droplet %s is already gone" % backend_id)
            # copies an overlapping pass made carry the same tag: they go with the resource
            others = [d for d in self._own(tag, notes, "left alone") if str(d["id"]) != str(backend_id)]
            if others:
                ids = ", ".join(str(d["id"]) for d in others)
                result.update(action="deleted", changed=True)
                if self.check_mode:
                    notes.append("would also delete droplet(s) %s carrying tag %s" % (ids, tag))
                    return None
                for droplet in others:
                    self.client.destroy_droplet(droplet["id"])
                notes.append("also deleted droplet(s) %s carrying tag %s" % (ids, tag))
            return None

        own = self._own(tag, notes, "left alone")
        if not own:
            result.update(action="absent", msg="no droplet carries tag %s" % tag)
            return None
        ids = ", ".join(str(d["id"]) for d in own)
        result.update(action="deleted", changed=True)
        if self.check_mode:
            result["msg"] = "would delete droplet(s) %s carrying tag %s" % (ids, tag)
            return None
        for droplet in own:
            self.client.destroy_droplet(droplet["id"])
        result["msg"] = "deleted droplet(s) %s carrying tag %s" % (ids, tag)
        return None

    def _own(self, tag, notes, verb):
        """Droplets carrying exactly ``tag`` (this resource's and no other's); the ones that carry
        another resource's tag as well are named in ``notes`` and never touched."""
        tagged = self.tagged(tag)
        own = [d for d in tagged if resource_tags(d["tags"]) == set([tag])]
        shared = [d for d in tagged if d not in own]
        if shared:
            notes.append("droplet(s) %s carry another resource's tag as well and were %s"
                         % (", ".join(str(d["id"]) for d in shared), verb))
        return own

    # ---- off / active -----------------------------------------------------------------
    def _locate(self, item):
        backend_id = item.get("backend_id")
        if backend_id:
            facts = self.read(backend_id)
            if facts is None:
                raise ItemError("droplet %s no longer exists" % backend_id)
            return facts
        tag = resource_tag(item["resource_uuid"])
        own = [d for d in self.tagged(tag) if resource_tags(d["tags"]) == set([tag])]
        if len(own) != 1:
            raise ItemError("no backend_id given and %d droplets carry tag %s" % (len(own), tag))
        return own[0]

    def power(self, item, result, notes, state, deadline):
        facts = self._locate(item)
        droplet_id = facts["id"]
        self._describe(result, facts)
        if facts["status"] == "new":
            if not self.wait or self.check_mode:
                raise ItemError("droplet %s is still being created; try again when it is active" % droplet_id)
            facts = self._wait_started(facts, deadline, notes)
            self._describe(result, facts)
        if facts["status"] not in ("active", "off"):
            raise ItemError("droplet %s is %s and cannot be powered %s" % (
                droplet_id, facts["status"], "off" if state == "off" else "on"))
        if facts["status"] == state:
            result["msg"] = "droplet %s is already %s" % (droplet_id, state)
            return None
        if state == "off":
            result.update(action="powered_off", changed=True)
            if self.check_mode:
                result["msg"] = "would shut down droplet %s" % droplet_id
            elif self.wait:
                facts, how = self._power_off(droplet_id, deadline)
                self._describe(result, facts)
                result["msg"] = "droplet %s %s" % (droplet_id, how)
            else:
                self.client.droplet_action(droplet_id, "shutdown")
                result["msg"] = "shutdown of droplet %s requested" % droplet_id
            return None
        result.update(action="powered_on", changed=True)
        if self.check_mode:
            result["msg"] = "would power on droplet %s" % droplet_id
            return None
        action = self.client.droplet_action(droplet_id, "power_on")
        if not self.wait:
            result["msg"] = "power on of droplet %s requested" % droplet_id
            return None
        status = self.client.wait_for_action(droplet_id, action, deadline)
        self._describe(result, self.client.get_droplet(droplet_id) or facts)
        if status != "completed":
            raise ItemError("power on of droplet %s %s" % (
                droplet_id, "failed" if status == "errored" else
                "did not finish within %s seconds" % self.wait_timeout))
        result["msg"] = "powered on droplet %s" % droplet_id
        return None


def prepare_items(module):
    """Items with normalised UUIDs and empty strings as None; bad input fails the task."""
    items = []
    for index, raw in enumerate(module.params["droplets"]):
        item = dict(raw)
        for key in ("resource_uuid", "order_uuid"):
            try:
                item[key] = normalize_uuid(item.get(key) or None)
            except ValueError:
                module.fail_json(msg="droplets[%d].%s: %r is not a UUID (expected 32 hex digits, dashed or not)"
                                 % (index, key, raw.get(key)))
        for key in ("backend_id", "name", "region", "image", "size", "user_data"):
            value = item.get(key)
            item[key] = str(value).strip() if value is not None and str(value).strip() else None
        if item["user_data"] is not None:
            item["user_data"] = raw["user_data"]  # user data keeps its whitespace
        items.append(item)
    return items


def summarize(results):
    counts = {}
    for result in results:
        if not result["failed"]:
            counts[result["action"]] = counts.get(result["action"], 0) + 1
    done = ", ".join("%d %s" % (counts[action], action) for action in ACTIONS if counts.get(action))
    failed = sum(1 for result in results if result["failed"])
    return "%d droplets: %s; %d failed" % (len(results), done or "nothing", failed), failed


def main():
    argument_spec = digitalocean_argument_spec()
    argument_spec.update(
        droplets=dict(type="list", elements="dict", required=True, options=dict(
            resource_uuid=dict(type="str", required=True),
            order_uuid=dict(type="str"),
            name=dict(type="str"),
            state=dict(type="str", default="present", choices=["present", "absent", "off", "active"]),
            backend_id=dict(type="str"),
            region=dict(type="str"),
            image=dict(type="str"),
            size=dict(type="str"),
            ssh_keys=dict(type="list", elements="str", default=[], no_log=False),
            user_data=dict(type="str"),
            tags=dict(type="list", elements="str", default=[]),
            running=dict(type="bool"),
        )),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=300),
        duplicate_window=dict(type="float", default=900),
    )
    argument_spec.update(batch_argument_spec())
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    for option in ("wait_timeout", "duplicate_window"):
        if module.params[option] <= 0:
            module.fail_json(msg="%s must be a positive number, got %s" % (option, module.params[option]))
    BatchRunner(module, None)  # the batch options, before any call
    items = prepare_items(module)
    client = client_from_module(module, max_connections=module.params["max_workers"])
    worker = DropletWorker(client, check_mode=module.check_mode, wait=module.params["wait"],
                           wait_timeout=module.params["wait_timeout"],
                           duplicate_window=module.params["duplicate_window"])

    def on_error(item, exc):  # a defect in the worker still yields the item's result
        result = base_result(item)
        result.update(failed=True, msg="%s: %s" % (type(exc).__name__, exc))
        return result

    def api_calls():
        return api_call_counts(client.stats.reads, client.stats.writes, client.stats.retries)

    runner = BatchRunner(module, worker, echo=(), on_error=on_error, api_calls=api_calls)
    try:
        worker.prefetch(items)
    except DigitalOceanError:
        worker.known, worker.by_tag = {}, {}  # each item reads itself (and a 401 fails them all)
    # items cut off by the deadline come back without their keys: base_result gives them
    results = [dict(base_result(item), **result) for item, result in zip(items, runner.run(items))]
    summary, failed = summarize(results)
    if client.auth_error is not None:
        # One line for the whole task (every item failed the same way): no per-item results
        # in the failure, which the default callback would print whole.
        runner.fail(str(client.auth_error), changed=any(result["changed"] for result in results),
                    failed_count=failed, api_retries=client.stats.retries)

    def first_failure(failures, results):
        return "%s; first failure (resource %s): %s" % (summary, failures[0]["resource_uuid"], failures[0]["msg"])

    runner.finish(results, fail_msg=first_failure, failed_count=failed, api_retries=client.stats.retries,
                  msg=summary)


if __name__ == "__main__":
    main()
