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

A module of the pass that writes registers its own process with the lock (``workers``: PID and
start time, under the guard, removed when it ends; ``core/pass_guard.py``): killing only the
controller leaves its modules running, and they may still be writing.

A lock whose holder process is gone (killed, crashed: nothing released it) and whose registered
workers have all ended is stale and is taken over, saying whose it was; while a worker outlives its
controller the lock stays held, so the next pass waits for it. A lock written on another host
cannot be checked and is respected. Releasing needs the token the taker got, so a pass never
removes a lock that is not its own.
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


def _proc_stat(pid):
    """The fields of ``/proc/<pid>/stat`` from field 3 (the state) on, or None where there is no
    such file."""
    try:
        with open("/proc/%d/stat" % int(pid)) as stat:
            text = stat.read()
    except (IOError, OSError, ValueError):
        return None
    # the command name (field 2) may hold spaces and parentheses: count fields after its end
    return text[text.rfind(")") + 2:].split()


def _start_time(fields):
    try:
        return int(fields[19])  # field 22
    except (TypeError, IndexError, ValueError):
        return None


def process_start_time(pid):
    """The start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat``
    field 22), or None where there is no ``/proc``."""
    return _start_time(_proc_stat(pid))


def process_alive(pid, start_time=None):
    """Whether process ``pid`` runs, and is the one that started at ``start_time`` when given.
    A zombie (exited, not yet reaped by its parent, which may be an init that never reaps) runs
    no code and holds nothing: it counts as ended."""
    try:
        os.kill(int(pid), 0)
    except OSError as exc:
        if exc.errno != errno.EPERM:  # EPERM: it exists, owned by someone else
            return False
    except (TypeError, ValueError):
        return False
    fields = _proc_stat(pid)
    if fields and fields[0] in ("Z", "X"):
        return False
    if start_time is None:
        return True
    current = _start_time(fields)
    return current is None or current == start_time


def live_workers(holder):
    """The workers registered with ``holder`` that still run (same /proc start-time rule)."""
    return [worker for worker in holder.get("workers") or []
            if isinstance(worker, dict) and process_alive(worker.get("pid"), worker.get("start_time"))]


def describe_workers(workers):
    """``its module (PID 456)`` or ``its modules (PIDs 456, 789)`` for messages."""
    pids = [str(worker.get("pid")) for worker in workers]
    return "its module%s (PID%s %s)" % ("s" if len(pids) > 1 else "", "s" if len(pids) > 1 else "",
                                        ", ".join(pids))


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
        # a name of its own each time: a writer killed before its rename must not block the next
        temporary = "%s.%s.tmp" % (self.path, uuid.uuid4().hex)
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
        """Why ``holder`` no longer holds the lock (None while it does): its controller and every
        worker registered with it have ended."""
        if holder == {}:
            return "the lock file could not be read"
        if holder.get("host") != self.host:
            return None  # another host's process cannot be checked from here
        if not process_alive(holder.get("pid"), holder.get("start_time")):
            if live_workers(holder):
                return None
            return "process %s has ended" % holder.get("pid")
        return None

    def _mine(self, holder):
        return (holder.get("host") == self.host and holder.get("pid") == self.pid
                and holder.get("start_time") == process_start_time(self.pid))

    def _new_holder(self):
        return {"token": uuid.uuid4().hex, "pid": self.pid, "start_time": process_start_time(self.pid),
                "host": self.host, "label": self.label, "key": self.key,
                "since": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}

    # ---- the workers of a pass ----------------------------------------------------------
    def register_worker(self, token, pid, start_time):
        """Record process ``pid`` as working for the pass holding ``token``. Returns that pass's
        holder (its controller's ``pid`` and ``start_time``), or None when the lock is no longer
        the pass's (released, taken over) or its controller has ended: then nothing is recorded
        and the worker must not write."""
        def attempt():
            current = self._read()
            if not current or current.get("token") != token:
                return None
            if not process_alive(current.get("pid"), current.get("start_time")):
                return None
            workers = [worker for worker in current.get("workers") or []
                       if isinstance(worker, dict) and worker.get("pid") != pid
                       and process_alive(worker.get("pid"), worker.get("start_time"))]
            workers.append({"pid": pid, "start_time": start_time})
            current["workers"] = workers
            self._write(current)
            return current
        return self._guarded(attempt)

    def unregister_worker(self, token, pid):
        """Remove process ``pid`` from the workers of the pass holding ``token``; whether it did."""
        def attempt():
            current = self._read()
            if not current or current.get("token") != token:
                return False
            workers = current.get("workers") or []
            kept = [worker for worker in workers if not (isinstance(worker, dict) and worker.get("pid") == pid)]
            if len(kept) == len(workers):
                return False
            current["workers"] = kept
            self._write(current)
            return True
        return self._guarded(attempt)

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
        """Take the lock, waiting up to ``wait`` seconds for its holder to release it.
        ``survivors``: the workers seen outliving their ended controller while waiting."""
        deadline = self._clock() + max(0.0, float(wait))
        waited = 0.0
        survivors = []
        while True:
            outcome = self.try_acquire()
            if not outcome["acquired"] and outcome["holder"].get("host") == self.host \
                    and not process_alive(outcome["holder"].get("pid"), outcome["holder"].get("start_time")):
                for worker in live_workers(outcome["holder"]):
                    if worker["pid"] not in [seen["pid"] for seen in survivors]:
                        survivors.append(worker)
            left = deadline - self._clock()
            if outcome["acquired"] or left <= 0:
                outcome["waited"] = round(waited, 1)
                outcome["survivors"] = survivors
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
