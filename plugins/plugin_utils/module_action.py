# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The action plugin of a module without one of its own: ansible-core's ``normal`` action, with the
module run in the task's worker (``plugin_utils/in_process.py``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action.normal import ActionModule as NormalAction

from ansible_collections.waldur.site_agent.plugins.plugin_utils.in_process import InProcessModule


class ActionModule(InProcessModule, NormalAction):
    """``normal`` in every other respect (check mode, async, the module's result)."""
