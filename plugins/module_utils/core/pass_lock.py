# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""One pass per offering at a time: lock files that name the process holding them.

A pass holds the lock for the whole pass, but every task of it runs in a short-lived
process, so no file descriptor (``flock``) can stay open that long. The lock is a file
instead, ``<directory>/<key>.lock``, naming its holder: the ansible-playbook controller
process (PID and its start time from ``/proc``, so a PID the kernel reused is not taken
for the holder), the host, the pass and a random token. It is written atomically (a
temporary file renamed into place) while a short ``flock`` on ``<key>.guard`` keeps two
takers from reading and writing it at the same time.

A lock whose holder process is gone (killed, crashed: nothing released it) is stale and is
taken over, saying whose it was. A lock written on another host cannot be checked and is
respected. Releasing needs the token the taker got, so a pass never removes a lock that
is not its own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import errno
import json
import os
import re
import socket
import time
import uuid

try:
    import fcntl
except ImportError:  # not a POSIX controller
    fcntl = None

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
POLL_SECONDS = 1.0


def default_directory(environ=None):
    """E(WALDUR_SITE_AGENT_LOCK_DIR), else ``~/.cache/waldur-site-agent/locks``."""
    environ = os.environ if environ is None else environ
    configured = environ.get("WALDUR_SITE_AGENT_LOCK_DIR")
    if configured:
        return os.path.expanduser(configured)
    return os.path.join(os.path.expanduser("~"), ".cache", "waldur-site-agent", "locks")


def process_start_time(pid):
    """The start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat``
    field 22), or None where there is no ``/proc``."""
    try:
        with open("/proc/%d/stat" % int(pid)) as stat:
            text = stat.read()
    except (IOError, OSError, ValueError):
        return None
    # the command name (field 2) may hold spaces and parentheses: count fields after its end
    fields = text[text.rfind(")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def process_alive(pid, start_time=None):
    """Whether process ``pid`` runs, and is the one that started at ``start_time`` when given."""
    try:
        os.kill(int(pid), 0)
    except OSError as exc:
        if exc.errno != errno.EPERM:  # EPERM: it exists, owned by someone else
            return False
    except (TypeError, ValueError):
        return False
    if start_time is None:
        return True
    current = process_start_time(pid)
    return current is None or current == start_time


def describe_holder(holder):
    """``the order_process pass (PID 123 on host-a since 2026-...)`` for messages."""
    if not isinstance(holder, dict):
        return "an unreadable lock file"
    return "the %s (PID %s on %s since %s)" % (
        holder.get("label") or "pass", holder.get("pid"), holder.get("host"), holder.get("since"))


class PassLock(object):
    """The lock ``key`` under ``directory``, taken for process ``pid``."""

    def __init__(self, directory, key, pid, label="", host=None, clock=time.monotonic, sleep=time.sleep):
        if not _KEY.match(str(key or "")):
            raise ValueError("key must be 1 to 200 characters of letters, digits, '.', '_' and '-' "
                             "starting with a letter or digit, got %r" % (key,))
        self.directory = directory
        self.key = key
        self.path = os.path.join(directory, key + ".lock")
        self.guard_path = os.path.join(directory, key + ".guard")
        self.pid = int(pid)
        self.label = label
        self.host = host or socket.gethostname()
        self._clock = clock
        self._sleep = sleep

    # ---- the file -----------------------------------------------------------------------
    def _ensure_directory(self):
        if not os.path.isdir(self.directory):
            os.makedirs(self.directory, 0o700)

    def _read(self):
        """The holder written in the lock file; None when there is none; ``{}`` when unreadable."""
        try:
            with open(self.path) as handle:
                holder = json.load(handle)
        except (IOError, OSError) as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise
        except ValueError:
            return {}
        return holder if isinstance(holder, dict) else {}

    def _write(self, holder):
        temporary = "%s.%s.tmp" % (self.path, holder["token"])
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(holder, handle, sort_keys=True)
            handle.write("\n")
        os.rename(temporary, self.path)

    def _guarded(self, action):
        """Run ``action`` holding the guard's flock (a few milliseconds)."""
        self._ensure_directory()
        descriptor = os.open(self.guard_path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            if fcntl is not None:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            return action()
        finally:
            os.close(descriptor)  # closing releases the flock

    # ---- holders ------------------------------------------------------------------------
    def _stale(self, holder):
        """Why ``holder`` no longer holds the lock (None while it does)."""
        if holder == {}:
            return "the lock file could not be read"
        if holder.get("host") != self.host:
            return None  # another host's process cannot be checked from here
        if not process_alive(holder.get("pid"), holder.get("start_time")):
            return "process %s has ended" % holder.get("pid")
        return None

    def _mine(self, holder):
        return (holder.get("host") == self.host and holder.get("pid") == self.pid
                and holder.get("start_time") == process_start_time(self.pid))

    def _new_holder(self):
        return {"token": uuid.uuid4().hex, "pid": self.pid, "start_time": process_start_time(self.pid),
                "host": self.host, "label": self.label, "key": self.key,
                "since": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}

    # ---- taking and releasing -----------------------------------------------------------
    def try_acquire(self):
        """``{"acquired": True, "holder": ours, "took_over": previous or None, "stale": why}`` or
        ``{"acquired": False, "holder": theirs}``."""
        def attempt():
            current = self._read()
            stale = None if current is None else self._stale(current)
            if current is not None and stale is None and not self._mine(current):
                return {"acquired": False, "holder": current}
            holder = self._new_holder()
            self._write(holder)
            took_over = current if current is not None and stale is not None else None
            return {"acquired": True, "holder": holder, "took_over": took_over, "stale": stale}
        return self._guarded(attempt)

    def acquire(self, wait=0.0):
        """Take the lock, waiting up to ``wait`` seconds for its holder to release it."""
        deadline = self._clock() + max(0.0, float(wait))
        waited = 0.0
        while True:
            outcome = self.try_acquire()
            left = deadline - self._clock()
            if outcome["acquired"] or left <= 0:
                outcome["waited"] = round(waited, 1)
                return outcome
            pause = min(POLL_SECONDS, left)
            self._sleep(pause)
            waited += pause

    def release(self, token):
        """Remove the lock when ``token`` is its holder's; returns whether it did."""
        def attempt():
            current = self._read()
            if not current or current.get("token") != token:
                return False
            os.unlink(self.path)
            return True
        return self._guarded(attempt)
