# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The module azure_vm_chain_info runs in the task's worker process, not a new Python
(plugins/plugin_utils/controller_module.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.plugin_utils.controller_module import preload
from ansible_collections.waldur.site_agent.plugins.plugin_utils.module_action import ActionModule  # noqa: F401 pylint: disable=unused-import

# What the module imports, imported once in the controller before any worker forks.
preload(__name__)
