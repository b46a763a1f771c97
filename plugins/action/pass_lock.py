# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Take and release a pass's lock on the controller (see plugins/module_utils/core/pass_lock.py).

An action plugin, because the lock names the ansible-playbook controller process: the
worker running this task is its child, so ``os.getppid()`` is the process whose life the
lock follows. The lock is released by the pass's last task, and taken over by the next pass
when the controller died without releasing it and every module registered with it has ended.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_lock import (
    PassLock,
    default_directory,
    describe_holder,
    describe_workers,
)

STATES = ("held", "released", "skipped")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("state", "key", "directory", "wait", "label", "token", "skipped"))
    # Taking the lock is bookkeeping on the controller, the same in check mode.
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = self._task.args
        result["changed"] = False
        state = args.get("state", "held")
        if state not in STATES:
            return self._failed(result, "state must be one of %s, got %r" % (", ".join(STATES), state))
        if state == "skipped":
            return self._skipped(result, args.get("skipped") or [])
        directory = os.path.expanduser(to_text(args.get("directory") or default_directory()))
        try:
            lock = PassLock(directory, to_text(args.get("key") or ""), os.getppid(),
                            label=to_text(args.get("label") or "pass"))
        except ValueError as exc:
            return self._failed(result, "key: %s" % exc)
        result["path"] = lock.path
        try:
            if state == "released":
                if not args.get("token"):
                    return self._failed(result, "token is required to release a lock (the token the lock's "
                                                "state=held task returned)")
                result["released"] = lock.release(to_text(args["token"]))
                result["msg"] = ("released %s" % lock.path if result["released"] else
                                 "%s was not ours any more; left as it is" % lock.path)
                return result
            try:
                wait = float(args.get("wait") or 0)
            except (TypeError, ValueError):
                return self._failed(result, "wait must be a number of seconds, got %r" % (args.get("wait"),))
            outcome = lock.acquire(wait=wait)
        except (IOError, OSError) as exc:
            return self._failed(result, "cannot use the lock directory %s: %s (set agent_pass_lock_dir or "
                                        "WALDUR_SITE_AGENT_LOCK_DIR to a directory this user may write)"
                                % (directory, exc))
        holder = outcome["holder"]
        result.update(acquired=outcome["acquired"], waited=outcome["waited"],
                      holder=dict((key, holder.get(key)) for key in ("pid", "host", "label", "since")))
        if outcome["acquired"]:
            result["token"] = holder["token"]
            result["msg"] = "took %s" % lock.path
            if outcome["took_over"] is not None:
                result["took_over"] = dict((key, outcome["took_over"].get(key))
                                           for key in ("pid", "host", "label", "since"))
                result["msg"] += " from %s: its lock was stale (%s)" % (
                    describe_holder(outcome["took_over"]), outcome["stale"])
                if outcome["survivors"]:
                    result["msg"] += "; waited %s seconds for %s, which outlived it" % (
                        outcome["waited"], describe_workers(outcome["survivors"]))
                result["warnings"] = [result["msg"]]
        else:
            result["msg"] = "%s holds %s; waited %s seconds for it" % (
                describe_holder(holder), lock.path, outcome["waited"])
            if outcome["survivors"]:
                result["msg"] += " (its controller has ended, but %s still runs)" % describe_workers(
                    outcome["survivors"])
        return result

    @staticmethod
    def _failed(result, msg):
        result.update(failed=True, msg=msg)
        return result

    def _skipped(self, result, skipped):
        """End the host as unreachable, so that ansible-playbook exits with 4: some offering was
        not processed because another pass held its lock, or left work for the next run after
        transient failures (failures end the run with 2 first). ansible-playbook's exit statuses
        come from its hosts' results only; an unreachable host is the one way, on public API, to a
        status that is neither success nor failure."""
        lines = [to_text(line) for line in skipped if line]
        if not lines:
            result["msg"] = "no offering was skipped"
            return result
        result.update(unreachable=True, skipped_offerings=lines,
                      msg="nothing failed, but work was left for a later run: %s" % "; ".join(lines))
        return result
