"""The batch action plugin's look at the controller's stdout (plugins/plugin_utils/batch_action.py):
a hung-up terminal and an unread pipe are gone, a live terminal, a pipe being read and a file are
not; the progress watcher prints nothing once the output was gone, even if it seems back."""

from __future__ import annotations

import json
import os
import pty
import signal
import time

from ansible_collections.waldur.site_agent.plugins.plugin_utils.batch_action import (
    ProgressWatcher,
    controller_output_gone,
)


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


def test_the_watcher_stops_for_good_once_the_output_was_gone(tmp_path):
    path = tmp_path / "progress.json"
    path.write_text(json.dumps({"total": 3, "done": 1, "failed": 0, "deadline": 900, "started": time.time(),
                                "now": time.time(), "running": [], "running_count": 0}))
    printed, answers = [], iter([True, False] + [True] * 10)
    watcher = ProgressWatcher(str(path), lambda lines, state: printed.append(lines), 0.01, 0.01,
                              output_alive=lambda: next(answers)).start()
    time.sleep(3.5)
    watcher.stop()
    assert not watcher.thread.is_alive()
    # the first look: the first line and a progress line in one message; then gone, and never again
    assert len(printed) == 1 and printed[0][0].startswith("3 items, deadline 900 s") and "1/3 done" in printed[0][1]
