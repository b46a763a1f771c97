"""Run a command and measure it: wall time, memory of its whole process tree, module runs.

Memory is sampled from ``/proc`` (no psutil needed) every ``interval`` seconds:

* ``peak_tree_pss_mib``: the largest sum of PSS over the tree at one instant. ansible
  forks a worker per task and starts a Python process per module run; forked workers
  share most pages with their parent, so summing RSS would count those pages several
  times. PSS splits shared pages between the processes that map them, so the sum is
  what the tree really occupies.
* ``peak_tree_rss_mib``: the same with RSS (an upper bound).
* ``max_process_rss_mib``: the largest RSS any single process of the tree reached,
  from ``wait4``'s ``ru_maxrss`` (the kernel's high-water mark, so nothing is missed
  between samples); comparable with a single-process agent's figure.

Every process whose command line names an ``AnsiballZ_<module>.py`` is a module run;
its lifetime (kernel start time to last sighting) is recorded, so the harness can tell
the time spent inside modules from ansible's own time.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

_CLK_TCK = os.sysconf("SC_CLK_TCK")
_MODULE = re.compile(r"AnsiballZ_([A-Za-z0-9_]+)\.py")


def cpu_times() -> tuple[int, int] | None:
    """``(all, stolen)`` CPU time of the machine so far, in ticks, from ``/proc/stat``. On a
    virtual machine the host may run other guests on our CPUs: that time is *steal*, which the
    load average does not show, and a bench figure taken while much is stolen is slower than
    the code."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    # user nice system idle iowait irq softirq steal (guest time is already counted in user)
    return sum(fields[:8]), (fields[7] if len(fields) > 7 else 0)


def stolen_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The percentage of the machine's CPU time the host took between two :func:`cpu_times`."""
    if not before or not after or after[0] <= before[0]:
        return None
    return round(100.0 * (after[1] - before[1]) / (after[0] - before[0]), 1)


def now() -> float:
    """Seconds on the clock ``/proc/<pid>/stat`` start times use (boot time)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return None


def _stat(pid: int) -> tuple[int, float, float] | None:
    """``(ppid, start time in seconds since boot, CPU seconds used)`` of a process, or
    None once gone."""
    text = _read("/proc/%d/stat" % pid)
    if not text:
        return None
    # The command name is in parentheses and may contain spaces: split after the last ')'.
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19]) / _CLK_TCK, (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _runqueue_wait_s(pid: int) -> float | None:
    """Seconds the process's main thread spent runnable but waiting for a CPU."""
    text = _read("/proc/%d/schedstat" % pid)
    try:
        return int(text.split()[1]) / 1e9 if text else None
    except (IndexError, ValueError):
        return None


def cpu_stall_us() -> int | None:
    """Microseconds during which some runnable task waited for a CPU, system-wide (PSI)."""
    text = _read("/proc/pressure/cpu")
    if not text:
        return None
    for part in text.splitlines()[0].split():
        if part.startswith("total="):
            return int(part[len("total="):])
    return None


def _memory_kib(pid: int) -> tuple[int, int] | None:
    """``(rss, pss)`` in KiB from ``smaps_rollup``."""
    text = _read("/proc/%d/smaps_rollup" % pid)
    if not text:
        return None
    rss = pss = 0
    for line in text.splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1])
        elif line.startswith("Pss:"):
            pss = int(line.split()[1])
    return rss, pss


def _module_of(argv: list[str]):
    """The module a process runs: a Python interpreter started on ``AnsiballZ_<name>.py``
    (not the ``/bin/sh -c`` wrappers ansible starts it through)."""
    if not argv or not os.path.basename(argv[0]).startswith("python"):
        return None
    for arg in argv[1:3]:
        match = _MODULE.search(arg)
        if match:
            return match
    return None


@dataclass
class ModuleRun:
    module: str
    pid: int
    started: float
    last_seen: float
    peak_rss_kib: int = 0
    cpu_s: float = 0.0  # user + system, at the last sighting

    @property
    def seconds(self) -> float:
        return max(0.0, self.last_seen - self.started)


@dataclass
class Measurement:
    rc: int
    wall_s: float
    peak_tree_pss_mib: float
    peak_tree_rss_mib: float
    max_process_rss_mib: float
    max_processes: int
    samples: int
    cpu_s: float  # user + system CPU of the whole tree
    runqueue_wait_s: float  # main threads of the tree's processes, waiting for a CPU
    cpu_stall_share: float | None  # share of the run during which some task waited for a CPU
    module_runs: list = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0

    def as_dict(self) -> dict:
        data = asdict(self)
        data["module_runs"] = [dict(module=m.module, seconds=round(m.seconds, 3), started=m.started,
                                    cpu_s=round(m.cpu_s, 2), peak_rss_mib=round(m.peak_rss_kib / 1024, 1))
                               for m in self.module_runs]
        return data


class _TreeSampler(threading.Thread):
    """Samples the memory of a process and all its descendants until told to stop."""

    def __init__(self, root_pid: int, interval: float):
        super().__init__(daemon=True, name="tree-sampler")
        self.root_pid = root_pid
        self.interval = interval
        self.stopped = threading.Event()
        self.peak_pss = self.peak_rss = 0
        self.max_processes = 0
        self.samples = 0
        self.modules: dict[tuple[int, float], ModuleRun] = {}
        self.waits: dict[tuple[int, float], float] = {}
        self._cmdlines: dict[tuple[int, float], str] = {}

    def _tree(self) -> list[tuple[int, float, float]]:
        """``(pid, start, cpu seconds)`` of the root and all its descendants."""
        children: dict[int, list[tuple[int, float, float]]] = {}
        root = None
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            stat = _stat(int(entry))
            if stat is None:
                continue
            ppid, started, cpu = stat
            if int(entry) == self.root_pid:
                root = (self.root_pid, started, cpu)
            children.setdefault(ppid, []).append((int(entry), started, cpu))
        if root is None:
            return []
        tree, queue = [], [root]
        while queue:
            process = queue.pop()
            tree.append(process)
            queue.extend(children.get(process[0], ()))
        return tree

    def sample(self) -> None:
        tree = self._tree()
        moment = now()
        total_rss = total_pss = 0
        for pid, started, cpu in tree:
            memory = _memory_kib(pid)
            if memory is None:
                continue
            total_rss += memory[0]
            total_pss += memory[1]
            key = (pid, started)
            wait = _runqueue_wait_s(pid)
            if wait is not None:
                self.waits[key] = wait
            if key not in self._cmdlines:
                self._cmdlines[key] = (_read("/proc/%d/cmdline" % pid) or "").split("\0")
            match = _module_of(self._cmdlines[key])
            if match:
                run = self.modules.setdefault(key, ModuleRun(match.group(1), pid, started, moment))
                run.last_seen = moment
                run.cpu_s = cpu
                run.peak_rss_kib = max(run.peak_rss_kib, memory[0])
        self.samples += 1
        self.max_processes = max(self.max_processes, len(tree))
        self.peak_rss = max(self.peak_rss, total_rss)
        self.peak_pss = max(self.peak_pss, total_pss)

    def run(self) -> None:
        while not self.stopped.is_set():
            self.sample()
            self.stopped.wait(self.interval)


def run_measured(cmd: list[str], env: dict | None = None, cwd: str | Path | None = None,
                 stdout_path: str | Path | None = None, timeout: float = 3600,
                 interval: float = 0.05) -> Measurement:
    """Run ``cmd`` to completion, sampling its process tree; stdout+stderr go to
    ``stdout_path`` (or are discarded)."""
    sink = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    try:
        stall_before = cpu_stall_us()
        started = now()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
        sampler = _TreeSampler(proc.pid, interval)
        sampler.start()
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, 9))
        timer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
            sampler.stopped.set()
            sampler.join()
        ended = now()
        stall_after = cpu_stall_us()
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stdout_path:
            sink.close()
    modules = sorted(sampler.modules.values(), key=lambda run: run.started)
    return Measurement(
        rc=proc.returncode, wall_s=ended - started,
        peak_tree_pss_mib=sampler.peak_pss / 1024, peak_tree_rss_mib=sampler.peak_rss / 1024,
        max_process_rss_mib=usage.ru_maxrss / 1024, max_processes=sampler.max_processes,
        samples=sampler.samples, cpu_s=usage.ru_utime + usage.ru_stime,
        runqueue_wait_s=sum(sampler.waits.values()),
        cpu_stall_share=(None if stall_before is None or stall_after is None
                         else (stall_after - stall_before) / 1e6 / max(ended - started, 1e-6)), module_runs=modules, started=started, ended=ended)
