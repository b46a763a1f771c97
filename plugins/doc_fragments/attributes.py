# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attributes of a module that only reads: one definition for every info module.
    READ_ONLY = r"""
attributes:
  check_mode:
    description: Can run in check mode and return the changes it would make, without making them.
    support: full
    details:
      - The module only reads.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) with C(--diff).
    support: none
"""

    # The attributes of a backend batch module (do_droplet, azure_vm_chain).
    BACKEND = r"""
attributes:
  check_mode:
    description: Can run in check mode and return the changes it would make, without making them.
    support: full
    details:
      - Reads are made, nothing is created, changed or deleted, and each result says what would change.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) with C(--diff).
    support: full
    details:
      - Each machine created, deleted, resized, powered on or off (or that would be) has a diff of
        its backend id, power state and size, headed by its resource; RV(diff) lists them all.
"""
