# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The batch module waldur_orders runs through the collection's batch action plugin: progress lines while
it runs, its items one line each at -v (plugins/plugin_utils/batch_action.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.plugin_utils.controller_module import preload
from ansible_collections.waldur.site_agent.plugins.plugin_utils.batch_action import ActionModule  # noqa: F401 pylint: disable=unused-import

# What the module imports, imported once in the controller before any worker forks.
preload(__name__)
