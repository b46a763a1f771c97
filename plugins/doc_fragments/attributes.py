# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # What every module of the collection shares: the attributes' descriptions (each module says
    # only its support and details), and the action plugin that does its work on the controller.
    DOCUMENTATION = r"""
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
  check_mode:
    description: Can run in check mode and return the changes it would make, without making them.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) with C(--diff).
"""

    # A module that only reads: every info module.
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    details:
      - The module only reads.
  diff_mode:
    support: none
"""

    # A backend batch module (do_droplet, azure_vm_chain).
    BACKEND = r"""
attributes:
  check_mode:
    support: full
    details:
      - Reads are made, nothing is created, changed or deleted, and each result says what would change.
  diff_mode:
    support: full
    details:
      - Each machine created, deleted, resized, powered on or off (or that would be) has a diff of
        its backend id, power state and size, headed by its resource; RV(diff) lists them all.
"""
