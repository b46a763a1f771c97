# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Strategy plugin: ansible-core's linear strategy, ending the run with the pass's exit status."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: agent_pass
short_description: The linear strategy, ending the run with the Waldur site agent pass's exit status
version_added: 0.1.0
description:
  - Runs the play exactly as C(ansible.builtin.linear) does.
  - When the play ended without a failed or unreachable host, the run's exit status says what the
    passes left for later, from the run's C(waldur_site_agent_exit) statistic (set with
    M(ansible.builtin.set_stats) by the C(waldur.site_agent.agent_pass) role), C(4) when an offering
    was skipped because another pass held its lock, C(69) when Waldur or the cloud answered with
    transient errors and work was left for the next run. A failure still ends the run with
    ansible-playbook's own C(2).
  - The collection's pass playbooks use it; a playbook of your own that includes the pass roles gets
    the same exit statuses when its play names this strategy (the play keyword C(strategy)).
author:
  - Waldur site agent developers
"""

from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

from ansible_collections.waldur.site_agent.plugins.plugin_utils.exit_status import exit_status


class StrategyModule(LinearStrategyModule):
    """linear, then the pass's exit status (plugin_utils/exit_status.py)."""

    def run(self, iterator, play_context):
        result = super(StrategyModule, self).run(iterator, play_context)
        if result != self._tqm.RUN_OK:
            return result
        return exit_status(self._tqm._stats.custom.get("_run", {}))
