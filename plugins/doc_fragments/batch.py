# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The options of every batch module (module_utils core/batch.py batch_argument_spec()).
    DOCUMENTATION = r"""
notes:
  - The items are worked on concurrently (at most O(max_workers) at a time, all within O(deadline));
    one failing never stops the others. RV(results) holds one result per item, in input order, each
    with the item's key (for example C(resource_uuid) or C(order_uuid)), C(changed), C(failed),
    C(retry) (the item was cut off by the deadline or failed transiently; the next run picks it up)
    and C(msg). RV(api_calls) counts the HTTP calls as C(reads), C(writes) and C(retries).
options:
  max_workers:
    description:
      - Items worked on at the same time. Must be positive.
    type: int
    default: 8
  deadline:
    description:
      - Seconds for the whole batch. Items not finished by then are failed with C(retry) and are
        picked up by the next run. Must be positive.
    type: float
    default: 900
  fail_on_item_error:
    description:
      - Fail the task when any item failed. By default failed items are reported in RV(results)
        and the task succeeds.
    type: bool
    default: false
"""
