# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""A module that outlives its pass never writes: the one check before every write.

Killing only the ansible-playbook controller (the OOM killer, ``timeout -s KILL``) leaves the
module it was waiting for running: the module is a child of a forked worker in a session of its
own. The next pass would find the lock stale and work on the same orders while the survivor's
calls are still answered, so the two would build (and roll back) the same machines.

The ``agent_pass`` role runs each offering's pass with the environment variables
:data:`LOCK_VARIABLE` (the lock file, ``core/pass_lock.py``) and :data:`TOKEN_VARIABLE` (the
token of the pass holding it). The clients call :func:`check_write` before every write (a
Waldur POST/PUT/PATCH/DELETE, a DigitalOcean non-GET, an ARM non-GET, each attempt): the first
one registers this process with the lock (its PID and start time, removed when it exits), so the
next pass waits for it instead of taking over; every one checks that the controller named by
the lock still runs, else raises :class:`PassEnded` and nothing more is written. The batch engine
(``core/batch.py``) starts no further item then and ends the unfinished ones ``retry``.

Without the variables (a module run on its own, a playbook of the operator's) nothing is checked.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import threading

from ansible_collections.waldur.site_agent.plugins.module_utils.core.module_end import at_module_end
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_lock import (
    PassLock,
    process_alive,
    process_start_time,
)

LOCK_VARIABLE = "WALDUR_SITE_AGENT_PASS_LOCK"
TOKEN_VARIABLE = "WALDUR_SITE_AGENT_PASS_TOKEN"


class PassEnded(Exception):
    """The pass that started this module has ended: nothing more may be written."""


class PassGuard(object):
    """The pass this process works for: ``lock_path`` and ``token`` from the environment (None:
    no pass, nothing is checked)."""

    def __init__(self, lock_path=None, token=None, pid=None):
        self.lock_path = lock_path or None
        self.token = token or None
        self.pid = os.getpid() if pid is None else pid
        self.controller = None  # {"pid", "start_time"} of the pass's controller, once registered
        self.ended = None  # the message, once the pass is known to have ended
        self.registered = False
        self._lock = threading.Lock()

    @property
    def active(self):
        return bool(self.lock_path and self.token)

    def _lock_file(self):
        directory, name = os.path.split(self.lock_path)
        return PassLock(directory, name[:-len(".lock")] if name.endswith(".lock") else name, self.pid)

    def _end(self, pid=None, why=None):
        self.ended = ("the pass that started this run%s has ended%s; nothing more is written; "
                      "the next pass finishes it" % (" (PID %s)" % pid if pid is not None else "",
                                                     " (%s)" % why if why else ""))
        return self.ended

    def _register(self):
        """Register this process with the pass's lock (once); the controller it names, or None."""
        try:
            holder = self._lock_file().register_worker(self.token, self.pid, process_start_time(self.pid))
        except (IOError, OSError, ValueError) as exc:
            if getattr(exc, "errno", None) == errno.ENOENT and not os.path.isdir(os.path.dirname(self.lock_path)):
                # not the controller's host: its lock cannot be seen, nor its process checked
                self.lock_path = None
                return None
            self._end(why="its lock %s could not be read: %s" % (self.lock_path, exc))
            return None
        if holder is None:
            self._end(why="its lock %s is no longer its own" % self.lock_path)
            return None
        self.controller = {"pid": holder.get("pid"), "start_time": holder.get("start_time")}
        self.registered = True
        at_module_end(self.unregister)
        return self.controller

    def unregister(self):
        """Remove this process from the lock's workers (at exit; best effort)."""
        if not self.registered:
            return
        self.registered = False
        try:
            self._lock_file().unregister_worker(self.token, self.pid)
        except (IOError, OSError, ValueError):
            pass  # a dead worker in the list is skipped by the liveness rule anyway

    def alive(self):
        """Whether writing may go on: no pass to follow, or its controller still runs. Cheap (one
        ``kill(pid, 0)`` and one read of ``/proc``); never registers."""
        if self.ended:
            return False
        if not self.active or self.controller is None:
            return True
        if process_alive(self.controller["pid"], self.controller["start_time"]):
            return True
        self._end(self.controller["pid"])
        return False

    def check(self):
        """Raise :class:`PassEnded` unless this process may write (registering it on first use)."""
        if self.ended:
            raise PassEnded(self.ended)
        if not self.active:
            return
        if self.controller is None:
            with self._lock:
                if self.controller is None and not self.ended and self.active:
                    self._register()
        if not self.alive():
            raise PassEnded(self.ended)


_GUARD = []
_GUARD_LOCK = threading.Lock()


def current(environ=None):
    """This process's guard, from :data:`LOCK_VARIABLE` and :data:`TOKEN_VARIABLE`."""
    if not _GUARD:
        with _GUARD_LOCK:
            if not _GUARD:
                environ = os.environ if environ is None else environ
                _GUARD.append(PassGuard(environ.get(LOCK_VARIABLE), environ.get(TOKEN_VARIABLE)))
    return _GUARD[0]


def check_write():
    """Before a write: raise :class:`PassEnded` when the pass that started this run has ended."""
    current().check()


def ended():
    """The message saying the pass has ended, or None while writing may go on."""
    guard = current()
    return None if guard.alive() else guard.ended
