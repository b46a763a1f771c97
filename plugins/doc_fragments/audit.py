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
      - Delete the orphans older than O(cleanup_min_age_hours) that carry this offering's owner mark.
      - An object without the owner mark is never deleted, nor one whose mark names a resource Waldur
        still shows as live. In check mode nothing is deleted and the report says what would be.
    type: bool
    default: false
  cleanup_min_age_hours:
    description:
      - Orphans younger than this many hours (or whose age the cloud does not tell) are kept.
    type: float
    default: 24
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
notes:
  - Reads only listings (pages of droplets, resource groups, machines); only O(cleanup) reads and
    deletes single objects.
  - "Findings: C(orphan) (an object carrying an owner mark whose resource does not exist in this offering,
    is Terminated, or records another backend id), C(vanished) (a live resource whose backend object is
    gone), C(drift) with C(check) C(power), C(size), C(duplicate) or C(backend_id), C(stuck_order), and
    C(orphan_by_name) (information only: an unmarked machine named the way the agent names machines that
    no resource of this offering records)."
"""
