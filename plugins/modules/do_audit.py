#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: do_audit
short_description: Set a DigitalOcean account's droplets beside a Waldur offering's resources
version_added: 1.0.0
description:
  - Lists every droplet of the account (pages of 200, one listing; never one read per droplet) and
    compares it with the offering's resources, in every state.
  - "Orphans: droplets carrying a C(waldur-resource:<uuid>) tag whose resource is not one of this
    offering's, is Terminated, is Erred without a backend id, or records another droplet; and the
    droplet a Terminated resource still records. Vanished: a live resource (OK, Erred, Updating) whose
    droplet is gone. Drift: power against the paused and downscaled flags, size against
    O(size_mapping) (Waldur's limits against the droplet's size), a droplet behind an Erred resource
    (DigitalOcean bills it while Waldur shows it failed), two droplets carrying one resource's tag, a live resource recording no backend id
    while a droplet carries its tag, two resources recording one droplet."
  - With O(cleanup), deletes the orphans older than O(cleanup_min_age_hours) whose tag names a
    Terminated resource of this offering, once its resource was shown gone on two runs at least
    O(cleanup_grace_hours) apart (the first tags the droplet C(waldur-orphan-since:<UTC time>)), after
    reading each again right before deleting it to see that it still carries exactly that tag, that mark
    and a name the agent derives for that resource (its name, or C(waldur-<first 8 hex of its uuid>));
    otherwise it is kept, and its C(cleanup) says why. A copied tag never makes a droplet the resource's.
    A droplet without the tag, or whose tag names no resource of this offering (another offering may share
    the account), is never deleted.
  - With O(repair), resizes a droplet whose size drifted back to the size its resource's limits map to in
    O(size_mapping) (CPU and RAM only, powered off for it and left as it was, as do_droplet resizes), after
    reading it again, only when it carries that resource's C(waldur-resource:) tag and no other (never an
    untagged droplet, never another resource's a backend id points at) and only when the target size's disk
    is at least the droplet's (DigitalOcean cannot shrink a disk); it never deletes.
author:
  - Waldur site agent developers (@waldur)
options:
  size_mapping:
    description:
      - "The offering's C(size_mapping) (C({slug: {component: value}})). A droplet whose size's entry
        differs from its resource's limits, or whose size has no entry while the limits match another
        one, is drift. Without it sizes are not compared."
    type: dict
    default: {}
  repair_wait_timeout:
    description:
      - Seconds one repair may take (power off, resize, power on) before it is given up as failed.
    type: float
    default: 600
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.digitalocean
  - waldur.site_agent.audit
attributes:
  check_mode:
    support: full
    details:
      - With O(cleanup), the report says which droplets would be deleted; with O(repair), which would be resized.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read the offering's resources and its stuck orders
  waldur.site_agent.waldur_audit_info:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: d0000000000000000000000000000001
  register: waldur_side

- name: Audit the DigitalOcean account against them
  waldur.site_agent.do_audit:
    token: "{{ digitalocean_token }}"
    offering: DigitalOcean VM
    offering_uuid: d0000000000000000000000000000001
    resources: "{{ waldur_side.resources }}"
    stuck_orders: "{{ waldur_side.stuck_orders }}"
    size_mapping:
      s-1vcpu-1gb: {cpu: 1, ram: 1024}
  register: audit

- name: Show the findings
  ansible.builtin.debug:
    msg: "{{ audit.table }}"
"""

RETURN = r"""
status:
  description: C(clean) when nothing but information was found, else C(findings).
  returned: success
  type: str
  sample: findings
counts:
  description: Findings by kind (C(orphans), C(vanished), C(drift), C(stuck_orders), C(orphans_by_name)),
    the cleanup's C(deleted), C(would_delete), C(cleanup_failed), C(marked) and C(would_mark) (holdings
    first seen gone, marked C(waldur-orphan-since)), and the repair's C(repaired), C(would_repair) and
    C(repair_failed).
  returned: success
  type: dict
  sample: {orphans: 1, vanished: 0, drift: 2, stuck_orders: 0, orphans_by_name: 0, deleted: 1, would_delete: 0,
           cleanup_failed: 0, marked: 0, would_mark: 0, repaired: 0, would_repair: 0, repair_failed: 0}
findings:
  description: One entry per finding, orphans first.
  returned: success
  type: list
  elements: dict
  contains:
    kind:
      description: C(orphan), C(vanished), C(drift), C(stuck_order) or C(orphan_by_name).
      type: str
    check:
      description: For drift, what differs (C(power), C(size), C(erred_resource), C(duplicate), C(backend_id));
        else null.
      type: str
    resource_uuid:
      description: The Waldur resource concerned (32 hex), or null.
      type: str
    resource_name:
      description: Its name.
      type: str
    resource_state:
      description: Its Waldur state; C(absent) for an orphan whose resource does not exist.
      type: str
    object:
      description: The droplet (or order), as the operator reads it.
      type: str
    object_ids:
      description: The droplet ids (or order UUID).
      type: list
      elements: str
    age_hours:
      description: Hours since the droplet was created (for a stuck order, since it last changed).
      type: float
    detail:
      description: Why this is a finding.
      type: str
    action:
      description: What to do about it.
      type: str
    deletable:
      description: Whether O(cleanup) may delete it (once old enough).
      type: bool
    cleanup:
      description: "C(deleted), C(would delete), C(failed ...) or why it is kept (for example
        C(kept: first seen gone at <time> (marked waldur-orphan-since <time>); deleted after 24 h if still gone));
        empty for other kinds."
      type: str
    repair:
      description: For size drift, the repair's outcome - C(repaired:), C(would repair:), C(refused:) or
        C(failed:) and what was done or why not; without O(repair), what it would do; empty for other findings.
      type: str
notes:
  description: Resources that could not be checked (a backend id that is not a droplet id), with the reason.
  returned: success
  type: list
  elements: str
report:
  description: The machine-readable report (offering, status, counts, cleanup settings, findings, notes,
    api_calls, generated_at).
  returned: success
  type: dict
markdown:
  description: The report as Markdown, for a ticket.
  returned: success
  type: str
report_files:
  description: The report files written (empty without O(report_dir)).
  returned: success
  type: list
  elements: str
table:
  description: The findings as lines of a plain-text table, for the pass's output.
  returned: success
  type: list
  elements: str
listed:
  description: How many droplets carry an owner tag (C(holdings)) and how many the account has (C(machines)).
  returned: success
  type: dict
cleanup_candidates:
  description: With O(cleanup) and no O(cleanup_evidence), the resource UUIDs whose holdings the cleanup would
    delete once a direct read in Waldur shows them gone (empty when the circuit breaker refused).
  returned: success
  type: list
  elements: str
cleanup_refused:
  description: Why the circuit breaker refused the whole cleanup (nothing was deleted); empty when it did not.
  returned: success
  type: str
repair_candidates:
  description: With O(repair) and no O(repair_evidence), the resource UUIDs whose machines the repair would resize
    once a direct read in Waldur shows them OK with the limits judged on (empty when the circuit breaker refused).
  returned: success
  type: list
  elements: str
repair_refused:
  description: Why the circuit breaker refused the whole repair (nothing was resized); empty when it did not.
  returned: success
  type: str
api_calls:
  description: HTTP requests sent to DigitalOcean, retries included.
  returned: always
  type: int
"""

import time
from urllib.parse import quote

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit import Auditor, power_check
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_cleanup import DELETED, WOULD_DELETE
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_marks import ORPHAN_MARK, holding_mark
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_repair import (
    FAILED,
    REFUSED,
    REPAIRED,
    WOULD_REPAIR,
    limits_text,
    not_owned_text,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_report import audit_argument_spec, checked_params, finish
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import size_for_limits, size_matches_limits
from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import Unproven, is_absent, require
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import client_from_module, digitalocean_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.droplets import DropletWorker
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import RESOURCE_TAG_PREFIX, derived_names

# A listing that saw the account change while paging is taken again, this many times at most.
LISTING_ATTEMPTS = 3
POWER = {"active": "on", "off": "off"}
# The first sighting of a holding whose resource is gone (agent/audit_marks.py ORPHAN_MARK), as a
# droplet tag: tags are names on DigitalOcean, so the time is part of the name.
MARK_TAG_PREFIX = ORPHAN_MARK + ":"


def read_droplet(client, droplet_id):
    """The droplet as DigitalOcean shows it now (its facts, proof), or ProvenAbsence when DigitalOcean
    answered its own not-found (a JSON body with the id ``not_found``). Anything else (a 404 without
    it: a proxy's page, an empty body) proves nothing: Unproven, and nothing is done on it."""
    current = client.get_droplet(droplet_id)
    if current is None:
        # a read layer that does not tell DigitalOcean's own not-found from any other 404
        raise Unproven("GET /v2/droplets/%s answered 404 without proof that it is DigitalOcean's own not_found"
                       % droplet_id, "GET /v2/droplets/%s" % droplet_id)
    return require(current, "droplet %s as read just now" % droplet_id)


def mark_tags(tags):
    """The ``waldur-orphan-since:`` tags among a droplet's tags, as they are spelt."""
    return [str(tag) for tag in tags or [] if str(tag).strip().lower().startswith(MARK_TAG_PREFIX)]


def list_droplets(client):
    """Every droplet of the account from one consistent paged listing (see ``scan_droplets``)."""
    for _attempt in range(LISTING_ATTEMPTS):
        droplets = client.scan_droplets(max_pages=10 ** 6)
        if droplets is not None:
            return droplets
    raise DigitalOceanError("the droplets of the account changed while they were listed, %d times running; "
                            "run the audit again" % LISTING_ATTEMPTS)


def droplet_label(droplet):
    # region and creation time: what tells two droplets carrying one resource's tag apart
    return "droplet %s %s (%s, %s, %s, created %s)" % (
        droplet["id"], droplet.get("name") or "", droplet.get("region"), droplet.get("size_slug"),
        droplet.get("status"), droplet.get("created_at") or "at an unknown time")


def holdings_of(droplets, resource_uuids):
    """Droplets carrying a ``waldur-resource:`` tag, one holding per tag they carry."""
    holdings = []
    for droplet in droplets:
        tags = sorted(resource_tags(droplet["tags"]))
        for tag in tags:
            owner = tag[len(RESOURCE_TAG_PREFIX):]
            label = droplet_label(droplet)
            if len(tags) > 1:
                label += " (carries the tags of %d resources)" % len(tags)
            holdings.append({
                "key": str(droplet["id"]), "owner": owner, "object": label, "ids": [str(droplet["id"])],
                "created_at": droplet.get("created_at"), "match": set([str(droplet["id"])]), "tag": tag,
                # a droplet is one marked object: its youngest part is itself, and nothing in it is unmarked
                "youngest_at": droplet.get("created_at"), "unmarked": [],
                # the first sighting of its resource gone, as the droplet's tags remember it
                "mark_tags": mark_tags(droplet["tags"]),
                "marks": [[tag.strip()[len(MARK_TAG_PREFIX):] for tag in mark_tags(droplet["tags"])]],
                # the tag names a resource of this offering, and no other resource's
                "marked": owner in resource_uuids and len(tags) == 1,
            })
    return holdings


def owners_of(tags):
    """The resource UUIDs a droplet's ``waldur-resource:`` tags name."""
    return sorted(tag[len(RESOURCE_TAG_PREFIX):] for tag in resource_tags(tags))


def machines_of(droplets):
    return dict((str(droplet["id"]), {
        "id": str(droplet["id"]), "object": droplet_label(droplet), "power": POWER.get(droplet.get("status")),
        "size": droplet.get("size_slug"), "created_at": droplet.get("created_at"),
        "owners": owners_of(droplet["tags"]), "label": "droplet %s" % droplet["id"],
    }) for droplet in droplets)


def size_check(size_mapping):
    def check(resource, machine):
        limits = resource.get("limits") or {}
        slug = machine.get("size")
        if not limits or not size_mapping or not slug:
            return None
        expected = size_for_limits(size_mapping, limits)
        if slug in size_mapping:
            if size_matches_limits(size_mapping[slug], limits):
                return None
        elif expected is None:
            return None  # neither the droplet's size nor the limits are in the mapping: nothing to compare
        # Waldur's limits against the droplet's size: what an Update Waldur erred after the resize leaves
        return ("size", "droplet %s is %s, Waldur keeps %s (which %s)" % (
            machine.get("id"), slug, limits_text(limits),
            "size_mapping maps to %s" % expected if expected else "match no size_mapping entry"),
            "audit_repair resizes it back to %s (or resize it by hand); if the droplet's size is what was wanted, "
            "order an Update to it in Waldur" % expected if expected
            else "correct the resource's limits in Waldur or the offering's size_mapping",
            {"size": expected, "from": slug} if expected else None)
    return check


class DropletRepair:
    """``audit_repair`` on DigitalOcean: resize a droplet back to the size Waldur's limits map to,
    with do_droplet's resize (CPU and RAM only; powered off for it and left as it was)."""

    def __init__(self, client, check_mode, wait_timeout):
        self.client = client
        self.worker = DropletWorker(client, check_mode=check_mode, wait_timeout=wait_timeout)
        self.wait_timeout = wait_timeout
        self.sizes = None

    def _size(self, slug):
        if self.sizes is None:  # read once, and only when something is to be repaired
            self.sizes = dict((size.get("slug"), size) for size in self.client.listing("sizes/", "sizes"))
        return self.sizes.get(slug)

    def __call__(self, finding):
        plan = finding["_repair"]
        droplet_id, target = int(plan["key"]), plan["size"]
        try:
            # read fresh right before acting: the listing may be minutes old
            current = read_droplet(self.client, droplet_id)
            if is_absent(current):
                return "%s: droplet %s is gone since it was listed (%s)" % (REFUSED, droplet_id, current)
            # only this resource's own droplet: a backend id pointing at another resource's droplet,
            # or at one without the tag, never makes it this resource's to power off and resize
            not_owned = not_owned_text("droplet %s" % droplet_id, owners_of(current["tags"]), finding["resource_uuid"])
            if not_owned:
                return "%s: %s" % (REFUSED, not_owned)
            if current.get("size_slug") != plan["from"]:
                return "%s: droplet %s is %s now, not %s as listed" % (
                    REFUSED, droplet_id, current.get("size_slug"), plan["from"])
            size = self._size(target)
            if size is None:
                return "%s: DigitalOcean offers no size %s" % (REFUSED, target)
            if current.get("region") not in (size.get("regions") or [current.get("region")]):
                return "%s: size %s is not offered in region %s" % (REFUSED, target, current.get("region"))
            if current.get("disk") is not None and size.get("disk") is not None and size["disk"] < current["disk"]:
                # a resize never shrinks a disk: DigitalOcean refuses it
                return "%s: %s has a %s GB disk, smaller than droplet %s's %s GB disk, and DigitalOcean cannot " \
                       "shrink a disk; correct the resource's limits in Waldur instead" % (
                           REFUSED, target, size["disk"], droplet_id, current["disk"])
            result = {}
            self.worker.resize(result, current, target, time.monotonic() + self.wait_timeout)
        except Unproven as exc:
            return "%s: that droplet %s is this resource's, as listed, could not be proven (%s)" % (
                REFUSED, droplet_id, exc.message)
        except (DigitalOceanError, ItemError) as exc:
            return "%s: %s" % (FAILED, exc)
        return "%s: %s" % (WOULD_REPAIR if self.worker.check_mode else REPAIRED,
                           result["msg"][len("would "):] if self.worker.check_mode else result["msg"])


class DropletCleanup:
    """``audit_cleanup`` on DigitalOcean: mark a droplet first seen gone, take a mark away, delete a
    droplet (each returns its outcome, never raises)."""

    def __init__(self, client, resources, check_mode, now, grace_hours):
        self.client = client
        self.by_uuid = dict((resource["uuid"], resource) for resource in resources)
        self.check_mode = check_mode
        self.now = now
        self.grace_hours = grace_hours

    def delete(self, holding):
        resource = self.by_uuid.get(holding["owner"]) or {}
        names = derived_names(resource.get("name"), holding["owner"], resource.get("slug"))
        try:
            # read fresh right before deleting: the listing may be minutes old
            current = read_droplet(self.client, int(holding["key"]))
            if is_absent(current):
                return "kept: already gone (%s)" % current
            if resource_tags(current["tags"]) != set([holding["tag"]]):
                return "kept: its tags changed since it was listed"
            fresh = dict(holding, marks=[[tag.strip()[len(MARK_TAG_PREFIX):] for tag in mark_tags(current["tags"])]])
            since = holding_mark(fresh, self.now)[0]
            if since is None or (self.now - since).total_seconds() < self.grace_hours * 3600:
                return "kept: its %s mark changed since it was listed" % ORPHAN_MARK
            if current.get("name") not in names:
                # a copied tag never makes a droplet the resource's
                return "kept: its name %s is not one the agent derives for resource %s (%s)" % (
                    current.get("name"), holding["owner"], ", ".join(sorted(names)))
            if self.check_mode:
                return WOULD_DELETE
            self.client.destroy_droplet(int(holding["key"]))
        except Unproven as exc:
            return "kept: whether droplet %s still exists could not be proven (%s)" % (holding["key"], exc.message)
        except DigitalOceanError as exc:
            return "failed: %s" % exc
        return DELETED

    def _tag(self, method, tag, droplet_id):
        self.client.send(method, "tags/%s/resources" % quote(tag, safe=":"),
                         {"resources": [{"resource_id": str(droplet_id), "resource_type": "droplet"}]},
                         retry_writes=method == "POST")

    def mark(self, holding, value):
        """Tag the droplet ``waldur-orphan-since:<value>`` (the tag is made first, as DigitalOcean
        wants), then untag the marks it carried that were no evidence (in the future, older than it)."""
        tag = MARK_TAG_PREFIX + value
        try:
            self.client.send("POST", "tags", {"name": tag}, retry_writes=True)
            self._tag("POST", tag, holding["key"])
            for old in holding.get("mark_tags") or ():
                if old.strip().lower() != tag.lower():
                    self._tag("DELETE", old, holding["key"])
        except DigitalOceanError as exc:
            return str(exc)
        return None

    def unmark(self, holding):
        try:
            for old in holding.get("mark_tags") or ():
                self._tag("DELETE", old, holding["key"])
        except DigitalOceanError as exc:
            return str(exc)
        return None


def backend_key(backend_id):
    return backend_id if backend_id.isdigit() else None


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = digitalocean_argument_spec()
    argument_spec.update(audit_argument_spec())
    argument_spec.update(size_mapping=dict(type="dict", default={}), repair_wait_timeout=dict(type="float", default=600))
    module = build(argument_spec=argument_spec, supports_check_mode=True)
    offering_uuid, resources = checked_params(module)
    client = client_from_module(module)
    try:
        droplets = list_droplets(client)
    except DigitalOceanError as exc:
        module.fail_json(msg="could not list the droplets: %s" % exc, api_calls=client.api_calls)

    auditor = Auditor(resources, backend_key=backend_key, cloud="the DigitalOcean account",
                      checks=[power_check, size_check(module.params["size_mapping"] or {})])
    cleanup = DropletCleanup(client, resources, module.check_mode, auditor.now, module.params["cleanup_grace_hours"])
    finish(module, "digitalocean", offering_uuid, auditor,
           holdings_of(droplets, set(resource["uuid"] for resource in resources)), machines_of(droplets),
           cleanup.delete, lambda: client.api_calls,
           repair=DropletRepair(client, module.check_mode, module.params["repair_wait_timeout"]),
           mark=cleanup.mark, unmark=cleanup.unmark)


if __name__ == "__main__":
    main()
