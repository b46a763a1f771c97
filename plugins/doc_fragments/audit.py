# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Options and returns of every audit module (module_utils.agent.audit_report.audit_argument_spec).
    DOCUMENTATION = r"""
options:
  offering:
    description:
      - Name of the offering, for the report's title.
    type: str
    default: ""
  offering_uuid:
    description:
      - UUID of the Waldur offering audited (dashed or not).
    type: str
    required: true
  resources:
    description:
      - Every resource of the offering, in every state, Terminated included, as
        M(waldur.site_agent.waldur_audit_info) returns them (C(uuid), C(name), C(state), C(backend_id),
        C(limits), C(attributes), C(paused), C(downscaled), C(backend_metadata)).
    type: list
    elements: dict
    required: true
  stuck_orders:
    description:
      - Orders executing for longer than the threshold, as M(waldur.site_agent.waldur_audit_info)
        returns them; each becomes a C(stuck_order) finding with what Waldur and the cloud hold for its
        resource.
    type: list
    elements: dict
    default: []
  cleanup:
    description:
      - Delete the orphans older than O(cleanup_min_age_hours) that carry this offering's owner mark, and
        only those O(cleanup_evidence) shows gone in Waldur, on two runs at least O(cleanup_grace_hours) apart.
      - "The first run that finds a holding's resource gone marks its objects with the tag
        C(waldur-orphan-since) (on DigitalOcean the droplet tag C(waldur-orphan-since:<UTC time>), on Azure
        the ARM tag C(waldur-orphan-since) with the time as its value, for example C(20261204T120000Z)) and
        deletes nothing; a later run deletes the holding when its resource is still shown gone and the mark is
        at least O(cleanup_grace_hours) old. A mark on a holding whose resource Waldur lists alive, or a direct
        read answers alive, is no evidence and is removed."
      - An object without the owner mark is never deleted, nor a holding that also holds an object without
        it, nor one whose mark names a resource Waldur still shows as live. In check mode nothing is deleted
        or marked and the report says what would be.
      - Without O(cleanup_evidence) nothing is deleted; RV(cleanup_candidates) names the resources to read in
        Waldur directly (the audit role does this, then runs the module again with the answers).
    type: bool
    default: false
  cleanup_min_age_hours:
    description:
      - Orphans whose youngest object is younger than this many hours (or whose age the cloud does not
        tell) are kept.
    type: float
    default: 24
  cleanup_grace_hours:
    description:
      - How long after the run that first found a holding's resource gone (and marked it) a run may delete it,
        when it finds the resource still gone.
    type: float
    default: 24
  cleanup_max:
    description:
      - The circuit breaker. When the cleanup would delete more holdings than this, it is refused whole;
        nothing is deleted and RV(cleanup_refused) says why. It is refused too when O(resources) is empty
        while the cloud holds objects carrying this offering's marks.
    type: int
    default: 5
  cleanup_evidence:
    description:
      - What a direct read of each candidate resource in Waldur answered, by resource UUID
        (C(not found) for Waldur's own 404, C(unproven ...) for an answer that proves nothing, else the
        resource's state, for example C(Terminated) or C(OK)). A holding's resource is shown gone only when its
        answer is C(not found) and O(resources) does not hold it, or C(Terminated) and O(resources) shows it
        Terminated; an absence from O(resources) is never enough.
    type: dict
  repair:
    description:
      - Bring a machine whose size drifted from its resource back to what Waldur records (a C(drift) finding with
        C(check) C(size), for example after Waldur erred an Update the backend had already carried out). It never
        deletes anything; power drift is left to the membership_sync pass, a machine behind an Erred resource
        is only reported.
      - Without O(repair_evidence) nothing is resized; RV(repair_candidates) names the resources to read in
        Waldur directly. A machine is resized only when its resource's answer there is C(OK) with the limits the
        audit judged on, after the machine is read again. Each repair's outcome (C(repaired), C(would repair)
        in check mode, C(refused) or C(failed), with why) is the finding's C(repair).
    type: bool
    default: false
  repair_max:
    description:
      - The circuit breaker of O(repair). When it would resize more machines than this, nothing is resized
        and RV(repair_refused) says why.
    type: int
    default: 5
  repair_evidence:
    description:
      - What a direct read of each repair candidate's resource in Waldur answered, by resource UUID - the
        resource (C(state), C(limits)) as M(waldur.site_agent.waldur_resources_info) returns it, or its
        answer (C(not found), a state) when the read returned none.
    type: dict
  report_dir:
    description:
      - Write the report to C(<report_dir>/<report_name>.json) and C(.md) (the directory is made when
        missing; each file is replaced whole). Written in check mode too - the report is what check mode
        shows.
    type: path
  report_name:
    description:
      - File name of the report without its suffix (no C(/)); default O(offering), else O(offering_uuid).
    type: str
  report_link:
    description:
      - Point C(<report_link>.json) and C(.md) at the report files, by links relative to their folder, each
        replaced whole - the latest report, when each run writes a report of its own. Needs O(report_dir).
    type: path
notes:
  - Reads only listings (pages of droplets, resource groups, machines); only O(cleanup) and O(repair) read
    and change single objects.
  - "Findings: C(orphan) (an object carrying an owner mark whose resource does not exist in this offering,
    is Terminated, or records another backend id), C(vanished) (a live resource whose backend object is
    gone), C(drift) with C(check) C(power), C(size), C(erred_resource) (the machine exists while Waldur shows
    its resource Erred), C(duplicate) or C(backend_id), C(stuck_order), and
    C(orphan_by_name) (information only: an unmarked machine named the way the agent names machines that
    no resource of this offering records)."
"""
