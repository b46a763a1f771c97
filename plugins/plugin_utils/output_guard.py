# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The one guard against a dead stdout: what the controller prints once nobody reads it.

ansible-runner ignores SIGHUP, so a pass outlives the pty of a killed ansible-rulebook or AWX job;
a pipe's reader can end. The controller's results thread prints what the workers send (loop items,
warnings, progress lines) and hands their results to the play; a write to the gone output raises in
that thread, which ends without a word, and the controller then waits for ever, holding the pass
lock. Two sides look at it, both here:

* the ``waldur_json`` callback wraps the controller's ``sys.stdout`` and ``sys.stderr``
  (``guard_output``): a write that finds the output gone is dropped, and so is every later one;
* the batch action plugin, in the task's worker, looks at the controller's stdout before each
  progress line (``controller_output_gone``) and prints nothing more once it is gone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import select
import sys

# A write that fails with these finds the output gone: the terminal hung up (EIO), the pipe's
# reader ended (EPIPE). Anything else (a full disk) is an error worth raising.
GONE_ERRNOS = (errno.EIO, errno.EPIPE)


class OutputGuard:
    """The controller's ``sys.stdout`` or ``sys.stderr`` while the callback prints. Once a write
    finds the output gone, it and every later write are dropped instead of raised: raised in
    ansible-core's results thread, the error ends that thread without a word and the controller then
    waits for ever for the task results it would have handed over, with the pass lock held."""

    def __init__(self, stream):
        self.stream = stream
        self.gone = False

    def _guarded(self, operation, *args):
        if self.gone:
            return None
        try:
            return operation(*args)
        except OSError as exc:
            if exc.errno not in GONE_ERRNOS:
                raise
            self.gone = True
            return None

    def write(self, text):
        written = self._guarded(self.stream.write, text)
        return len(text) if written is None else written

    def flush(self):
        self._guarded(self.stream.flush)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def guard_output():
    """Put an ``OutputGuard`` around ``sys.stdout`` and ``sys.stderr`` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, OutputGuard):
            setattr(sys, name, OutputGuard(stream))


def controller_output_gone(controller_pid):
    """True when the controller's stdout can no longer be written: a terminal hung up (its pty's
    master closed) or a pipe nobody reads. A worker's own stdout is /dev/null, so this looks at
    the controller's through /proc; where that cannot tell (no /proc, a socket), the output is
    taken to be there."""
    path = "/proc/%d/fd/1" % controller_pid
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as exc:
        return exc.errno == errno.EIO  # a hung-up terminal cannot be opened again
    try:
        poller = select.poll()
        poller.register(descriptor, select.POLLOUT)
        return any(mask & (select.POLLHUP | select.POLLERR) for _descriptor, mask in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False
    finally:
        os.close(descriptor)
