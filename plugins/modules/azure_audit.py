#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: azure_audit
short_description: Set an Azure subscription's machines beside a Waldur offering's resources
version_added: 1.0.0
description:
  - Reads listings only, run side by side - the resource groups carrying this offering's owner tag
    C(waldur-offering-uuid), the virtual machines of the subscription and their power states, the
    resources of the subscription with their creation times (what else each group holds, and how young it
    is), and the objects of each shared resource group that holds this offering's machines (or is O(resource_group))
    - and compares them with the offering's resources, in every state. A machine is never read on its own.
  - "A chain is what one resource owns: its dedicated resource group (carrying the owner tags), or the
    objects carrying its owner tags in a shared group. Orphans: chains whose resource is not one of this
    offering's, is Terminated, is Erred without a backend id, or records another machine; and a machine
    only a Terminated resource still records. Vanished: a live resource (OK, Erred, Updating) whose virtual
    machine is gone. Drift: power against the paused and downscaled flags (paused means deallocated), the
    machine's size against the size the resource ordered (or recorded), a machine that exists behind an
    Erred resource, two chains carrying one resource's owner tag, two resources recording one machine."
  - Machines without owner tags in groups named C(group-<4 or 32 hex>-<machine>) (made by Waldur Mastermind
    or before owner tags) that no resource of this offering records are reported as C(orphan_by_name),
    for information, and never deleted.
  - O(repair) resizes nothing on Azure (the agent has no resize of an Azure machine); each size drift's
    C(repair) says so, and what to resize it to by hand.
  - With O(cleanup), deletes the orphan chains older than O(cleanup_min_age_hours) that carry this
    offering's owner tag and whose resource is absent or Terminated, once it was shown gone on two runs at
    least O(cleanup_grace_hours) apart (the first sets the ARM tag C(waldur-orphan-since) on the group, or on
    each object of a chain in a shared group, with ARM's Tags API) - a
    dedicated group whole only when a fresh listing of it shows nothing without that resource's owner tag
    (otherwise its tagged objects one by one, and the group is kept, its cleanup naming what else it
    holds), the objects of a shared group one by one (each read again first, and left when it no longer
    carries that resource's owner tag).
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.azure
  - waldur.site_agent.audit
options:
  resource_group:
    description:
      - The offering's C(default_resource_group), a shared group listed even when none of this offering's
        machines is in it (an orphan chain whose machine is gone is found there).
      - Objects of this offering in a shared group that is neither this one nor the group of one of its
        machines are not seen.
    type: str
  deadline:
    description:
      - Seconds for the whole run, deletions included (Azure carries on with a deletion still running then).
    type: float
    default: 600
attributes:
  check_mode:
    support: full
    details:
      - With O(cleanup), the report says which chains would be deleted.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read the offering's resources and its stuck orders
  waldur.site_agent.waldur_audit_info:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: a0000000000000000000000000000001
  register: waldur_side

- name: Audit the subscription against them, deleting orphans older than two days
  waldur.site_agent.azure_audit:
    offering: Azure VM
    offering_uuid: a0000000000000000000000000000001
    resources: "{{ waldur_side.resources }}"
    stuck_orders: "{{ waldur_side.stuck_orders }}"
    cleanup: true
    cleanup_min_age_hours: 48
  register: audit
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
  sample: {orphans: 1, vanished: 0, drift: 1, stuck_orders: 0, orphans_by_name: 1, deleted: 0, would_delete: 0,
           cleanup_failed: 0, marked: 0, would_mark: 0, repaired: 0, would_repair: 0, repair_failed: 0}
findings:
  description: One entry per finding, orphans first (the fields of M(waldur.site_agent.do_audit)'s findings).
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
      description: The chain, machine or order, as the operator reads it.
      type: str
    object_ids:
      description: ARM ids (or the order UUID).
      type: list
      elements: str
    age_hours:
      description: Hours since the machine (or the oldest object of a chain without one) was created; for a
        stuck order, since it last changed; null when Azure does not tell.
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
      description:
        - "C(deleted), C(would delete), C(failed ...) or why it is kept (for example C(kept: first seen gone at
          <time> (marked waldur-orphan-since <time>); deleted after 24 h if still gone)); empty for other kinds."
        - A dedicated group that holds something without the chain's owner tag is kept, and only the chain's
          tagged objects in it are deleted; the text starts with C(kept), names the group and each object it
          holds with its owner, then what was deleted.
      type: str
    repair:
      description: For size drift with O(repair), C(refused) and why (the agent does not resize Azure machines);
        else empty.
      type: str
notes:
  description: What was left out, with the reason (a backend id of another subscription, a tagged group
    without a resource tag, a shared group that does not exist).
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
  description: How many chains carry this offering's owner tags (C(holdings)) and how many virtual machines
    the subscription has (C(machines)).
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
  description: ARM requests sent by this task.
  returned: always
  type: int
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit import Auditor, power_check
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_cleanup import DELETED, WOULD_DELETE
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_marks import ORPHAN_MARK, holding_mark
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_report import audit_argument_spec, checked_params, finish
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.audit import Listing, owners
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import (
    azure_argument_spec,
    clients_from_module,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, OperationStillRunning
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.objects import (
    OWNED_DELETION_ORDER,
    delete_objects,
    kept_group,
    list_group_contents,
    own_targets,
    sort_contents,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.ownership import provisioning_state, tag_value


def size_check(resource, machine):
    """The machine's size against the size the resource ordered (else the one the agent recorded)."""
    ordered = str((resource.get("attributes") or {}).get("size") or "")
    recorded = str(((resource.get("backend_metadata") or {}).get("virtual_machine") or {}).get("size") or "")
    wanted = ordered or recorded
    actual = str(machine.get("size") or "")
    if not wanted or not actual or wanted.lower() == actual.lower():
        return None
    return ("size", "the virtual machine is %s, Waldur keeps %s (the size the resource %s)" % (
        actual, wanted, "ordered" if ordered else "recorded"),
        "find out who resized it; resize it back to %s by hand (the agent does not resize Azure machines), or "
        "correct the resource in Waldur if %s is what is wanted" % (wanted, actual),
        {"size": wanted, "from": actual})


# Why audit_repair refuses on Azure: the collection has no resize of an Azure machine to reuse.
REPAIR_UNSUPPORTED = "the agent does not resize Azure virtual machines; resize it by hand"


def _lower_id(value):
    return str(value or "").lower()


def marks_of(tags):
    """The ``waldur-orphan-since`` mark among an object's ARM tags, as a list (empty without one)."""
    value = tag_value(tags, ORPHAN_MARK)
    return [value] if value else []


def arm_not_found(error):
    """ARM's own not-found: a 404 whose error code ends in ``NotFound`` (``ResourceGroupNotFound``,
    ``ResourceNotFound``); a 404 without one (a proxy's page, an empty body) proves nothing."""
    return error.not_found and str(error.code or "").endswith("NotFound")


class AuditListing(Listing):
    """The listing (azure/audit.py), with the cleanup of the audit."""

    # set by main(): the audit's clock and audit_cleanup's grace period
    now = None
    grace_hours = 0.0

    def holdings_with_marks(self, holdings):
        for holding in holdings:
            holding["marks"] = [marks_of(tags) for _id, tags in holding.get("object_tags") or ()]
        return holdings

    # ---- marks -------------------------------------------------------------------------------
    def _tags_at(self, scope, operation, tags):
        # ARM's Tags API changes these tags only, on a group or any resource, whatever else it carries
        self.clients.call("%s tag %s on %s" % ("setting" if operation == "Merge" else "removing", ORPHAN_MARK, scope),
                          self.clients.resource.tags.begin_update_at_scope, scope.lstrip("/"),
                          {"operation": operation, "properties": {"tags": tags}}, deadline=self.deadline)

    def mark(self, holding, value):
        """Tag every object of the holding carrying its owner mark ``waldur-orphan-since: <value>``."""
        try:
            for scope, _tags in holding.get("object_tags") or ():
                self._tags_at(scope, "Merge", {ORPHAN_MARK: value})
        except AzureError as error:
            return str(error)
        return None

    def unmark(self, holding):
        try:
            for scope, tags in holding.get("object_tags") or ():
                for value in marks_of(tags):
                    self._tags_at(scope, "Delete", {ORPHAN_MARK: value})
        except AzureError as error:
            return str(error)
        return None

    def _mark_still_old_enough(self, holding, tag_sets):
        since = holding_mark(dict(holding, marks=[marks_of(tags) for tags in tag_sets]), self.now)[0]
        return since is not None and (self.now - since).total_seconds() >= self.grace_hours * 3600

    # ---- cleanup ---------------------------------------------------------------------------
    def delete(self, holding):
        try:
            if holding["kind"] == "group":
                return self._delete_group(holding)
            listed = list_group_contents(self.clients, holding["group"], deadline=self.deadline)
            if listed is None:
                return "kept: already gone"
            fresh = dict((_lower_id(item.id), dict(getattr(item, "tags", None) or {})) for item in listed)
            if not self._mark_still_old_enough(holding, [fresh.get(_lower_id(scope), {})
                                                         for scope, _tags in holding.get("object_tags") or ()]):
                return "kept: its %s mark changed since it was listed" % ORPHAN_MARK
            targets = [(kind, name) for kind in OWNED_DELETION_ORDER
                       for found_kind, name in holding["objects"] if found_kind == kind]
            deleted, left = delete_objects(self.clients, holding["group"], holding.get("vnet"), targets,
                                           resource_uuid=holding["owner"], check_mode=self.module.check_mode,
                                           deadline=self.deadline, require_mark=True)
        except OperationStillRunning as error:
            return "failed: a deletion is still running (%s); the next audit looks again" % error
        except AzureError as error:
            return "failed: %s" % error
        if left:
            return "failed: left %s (they no longer carry this resource's owner tag)%s" % (
                ", ".join(left), "; deleted %s" % ", ".join(deleted) if deleted else "")
        if not deleted:
            return "kept: already gone"
        return WOULD_DELETE if self.module.check_mode else DELETED

    def _delete_group(self, holding):
        """The group whole only when a fresh listing shows everything in it carrying the holding's
        owner mark (or belonging to an object that does); otherwise only the marked objects, and the
        group is kept, naming what else it holds."""
        groups = self.clients.resource.resource_groups
        try:
            current = self.clients.call("reading resource group %s" % holding["group"], groups.get, holding["group"],
                                        deadline=self.deadline)
        except AzureError as error:
            if arm_not_found(error):
                return "kept: already gone"
            if error.not_found:
                return "kept: whether resource group %s still exists could not be proven (%s)" % (
                    holding["group"], error)
            raise
        if owners(current) != (holding["owner"], self.offering_uuid):
            return "kept: its owner tags changed since it was listed"
        if not self._mark_still_old_enough(holding, [dict(getattr(current, "tags", None) or {})]):
            return "kept: its %s mark changed since it was listed" % ORPHAN_MARK
        if provisioning_state(current) == "deleting":
            return "kept: Azure is already deleting it"
        listed = list_group_contents(self.clients, holding["group"], deadline=self.deadline)
        if listed is None:
            return "kept: already gone"
        ours, foreign = sort_contents(listed, holding["owner"])
        if foreign:
            targets, unmarked = own_targets(ours)
            deleted, left = delete_objects(self.clients, holding["group"],
                                           next((name for kind, name in targets if kind == "vnet"), None), targets,
                                           resource_uuid=holding["owner"], check_mode=self.module.check_mode,
                                           deadline=self.deadline, require_mark=True, unmarked_ok=unmarked)
            done = "; %s %s" % (WOULD_DELETE if self.module.check_mode else DELETED, ", ".join(deleted)) \
                if deleted else ""
            return "kept: %s%s%s" % (kept_group(holding["group"], foreign)[len("kept "):], done,
                                     "; left %s" % ", ".join(left) if left else "")
        if self.module.check_mode:
            return WOULD_DELETE
        self.clients.call("deleting resource group %s" % holding["group"], groups.begin_delete, holding["group"],
                          deadline=self.deadline)
        return DELETED


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = azure_argument_spec()
    argument_spec.update(audit_argument_spec())
    argument_spec.update(resource_group=dict(type="str"), deadline=dict(type="float", default=600))
    module = build(argument_spec=argument_spec, supports_check_mode=True)
    offering_uuid, resources = checked_params(module)
    clients = clients_from_module(module)
    clients.deadline = time.monotonic() + module.params["deadline"]  # no SDK retry waits past it
    try:
        clients.authenticate()
        listing = AuditListing(module, clients, offering_uuid, clients.deadline)
        holdings, machines = listing.run(module.params["resource_group"])
    except AzureError as error:
        module.fail_json(msg=str(error), api_calls=clients.api_calls)
    auditor = Auditor(resources, backend_key=listing.backend_key, checks=[power_check, size_check],
                      cloud="the Azure subscription")
    auditor.notes.extend(listing.notes)
    listing.now, listing.grace_hours = auditor.now, module.params["cleanup_grace_hours"]
    finish(module, "azure", offering_uuid, auditor, listing.holdings_with_marks(holdings), machines, listing.delete,
           lambda: clients.api_calls, repair_unsupported=REPAIR_UNSUPPORTED, mark=listing.mark, unmark=listing.unmark)


if __name__ == "__main__":
    main()
