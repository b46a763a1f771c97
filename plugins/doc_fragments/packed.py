# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The packed lists of the modules that take or return thousands of items (module_utils core/packed.py).
    DOCUMENTATION = r"""
notes:
  - A list this module takes or returns can be handed over packed, as one JSON text of the same items
    (the C(*_packed) option and return value). Ansible takes in and templates a list value by value,
    which at 10,000 items cost seconds at every task the list crossed; a packed list costs it next
    to nothing. The collection's filters take a packed list wherever they take a list, and answer
    packed when given packed; the passes hand their lists over packed. A C(*_packed) option takes
    the list itself as well.
options:
  packed:
    description:
      - Return the module's list as one JSON text (its C(*_packed) return value) instead of a list.
    type: bool
    default: false
"""
