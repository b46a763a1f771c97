# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The exit statuses of a pass run (docs/troubleshooting.md, "Exit statuses"): one table.

A pass records, per offering, what it left for later in the run's statistic
``waldur_site_agent_exit`` (``ansible.builtin.set_stats``, ``{offering name: reason}``); the
strategy plugin ``waldur.site_agent.agent_pass`` turns it into the run's exit status when no host
failed (a failure is ansible-playbook's own ``2``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

STAT = "waldur_site_agent_exit"
OK = 0
FAILED = 2
# Another pass of the offering held its lock: the offering was skipped, nothing failed.
LOCK_BUSY = 4
# Waldur or the cloud answered transport or server errors (5xx, 429, no answer): the work was left
# for the next run, nothing failed for good (sysexits' EX_UNAVAILABLE).
RETRY_LEFT = 69
# reason recorded by the roles -> exit status; the highest wins when offerings differ
REASONS = {"lock_busy": LOCK_BUSY, "retry_left": RETRY_LEFT}
ORDER = (RETRY_LEFT, LOCK_BUSY)


def exit_status(run_stats):
    """The exit status of a run whose hosts all succeeded, from its run-level custom statistics."""
    reasons = (run_stats or {}).get(STAT) or {}
    statuses = set(REASONS.get(reason) for reason in reasons.values() if reason in REASONS) \
        if isinstance(reasons, dict) else set()
    for status in ORDER:
        if status in statuses:
            return status
    return OK
