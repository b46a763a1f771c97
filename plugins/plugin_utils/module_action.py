# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The action plugin of a module that is not a batch module: run in the task's worker
(``plugin_utils/controller_module.py``) and displayed as a batch module is (``plugin_utils/batch_action.py``):
a line at least every 30 seconds once it has run 10 (a listing of 10,000 resources takes minutes),
and at -v a few lines for a result holding a list (``resources_packed``, ``machines_packed``)
rather than the whole of it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.plugin_utils.batch_action import ActionModule as BatchAction


class ActionModule(BatchAction):
    """The batch action in every respect; a module without a batch runner writes no progress file,
    so its lines say what it reads and for how long."""
