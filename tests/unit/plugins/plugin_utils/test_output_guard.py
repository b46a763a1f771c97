"""The one guard against a dead stdout (plugins/plugin_utils/output_guard.py): the callback's
wrapper drops writes once the output is gone (a full disk still raises); the action's look at the
controller's stdout finds a hung-up terminal and an unread pipe gone, and a live terminal, a pipe
being read and a file there; and no other file of plugins/ holds a second guard."""

from __future__ import annotations

import errno
import os
import pty
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.waldur.site_agent.plugins.plugin_utils.output_guard import (
    OutputGuard,
    controller_output_gone,
    guard_output,
)

PLUGINS = Path(__file__).resolve().parents[4] / "plugins"


def test_output_that_is_gone_is_dropped_and_other_errors_still_raise():
    """Once nobody reads the pipe (or the terminal hung up), writes are dropped instead of raised;
    a full disk is still an error."""
    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "w", buffering=1)
    guard = OutputGuard(stream)
    try:
        guard.write("one\n")
        assert os.read(read_end, 16) == b"one\n" and not guard.gone
        os.close(read_end)
        assert guard.write("two\n") == 4 and guard.gone
        guard.write("three\n")
        guard.flush()
        assert guard.fileno() == write_end  # the rest is the stream's
    finally:
        try:
            stream.close()
        except OSError:
            pass

    class FullDisk:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError):
        OutputGuard(FullDisk()).write("line\n")


def test_a_hung_up_terminal_is_gone_too():
    class HungUp:
        def write(self, text):
            raise OSError(errno.EIO, "Input/output error")

        def flush(self):
            raise OSError(errno.EIO, "Input/output error")

    guard = OutputGuard(HungUp())
    assert guard.write("line\n") == 5 and guard.gone
    guard.flush()  # dropped, not raised


def test_stdout_and_stderr_are_wrapped_once(monkeypatch):
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    guard_output()
    first = sys.stdout
    guard_output()
    assert isinstance(first, OutputGuard) and sys.stdout is first and isinstance(sys.stderr, OutputGuard)
    assert not isinstance(first.stream, OutputGuard)


def stand_in(stdout_fd=None, terminal=False, close=()):
    """A process whose fd 1 is ``stdout_fd`` (or a new pty's slave), with the descriptors in
    ``close`` closed: (pid, pty master or None)."""
    if terminal:
        pid, master = pty.fork()
    else:
        master, pid = None, os.fork()
    if pid == 0:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as ansible-runner starts a pass
        if stdout_fd is not None:
            os.dup2(stdout_fd, 1)
        for descriptor in close:
            os.close(descriptor)
        time.sleep(30)
        os._exit(0)
    return pid, master


def end(pid):
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_a_terminal_is_there_until_its_master_closes():
    pid, master = stand_in(terminal=True)
    try:
        time.sleep(0.2)
        assert not controller_output_gone(pid)
        os.close(master)
        time.sleep(0.2)
        assert controller_output_gone(pid)
    finally:
        end(pid)


def test_a_pipe_is_there_while_it_is_read(tmp_path):
    read_end, write_end = os.pipe()
    pid = stand_in(write_end, close=(read_end,))[0]
    os.close(write_end)
    try:
        time.sleep(0.2)
        assert not controller_output_gone(pid)
        os.close(read_end)
        assert controller_output_gone(pid)
    finally:
        end(pid)


def test_a_file_and_a_missing_process_are_taken_to_be_there(tmp_path):
    with open(tmp_path / "out.log", "w") as log:
        pid = stand_in(log.fileno())[0]
    try:
        time.sleep(0.2)
        assert not controller_output_gone(pid)
    finally:
        end(pid)
    assert not controller_output_gone(pid)  # no /proc entry: nothing to tell, so no reason to go quiet


def test_there_is_one_guard():
    """The callback and the batch action use this guard; no other file of plugins/ decides that
    an output is gone (the callback once had its own copy, the action another)."""
    home = PLUGINS / "plugin_utils" / "output_guard.py"
    tell_tale = re.compile(r"errno\.(EIO|EPIPE)\b|/proc/%d/fd/1|class OutputGuard|POLLHUP")
    assert tell_tale.search(home.read_text())
    elsewhere = sorted(str(path.relative_to(PLUGINS)) for path in PLUGINS.rglob("*.py")
                       if path != home and tell_tale.search(path.read_text(encoding="utf-8")))
    assert elsewhere == []
    for user in ("callback/waldur_json.py", "plugin_utils/batch_action.py"):
        assert "plugin_utils.output_guard import" in (PLUGINS / user).read_text()
