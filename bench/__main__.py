"""``python -m bench``: the passes at N orders/resources, ours and upstream, side by side.

Runs every scenario of the plan against the bench simulators (realistic latency: Waldur
20 ms, DigitalOcean 50 ms, Azure ARM 50 ms per call, Azure long-running operations 2 s),
writes ``bench/results/<timestamp>.json`` after every run (an interrupted benchmark keeps
what it measured) and, for a full run, renders ``docs/performance.md`` and
``docs/performance.png`` and refreshes ``bench/results/summary.json``.

  python -m bench                   the whole plan (about an hour on 2 CPUs: paced DigitalOcean
                                    creates, one-at-a-time Azure creates and upstream dominate)
  python -m bench --quick           N = 10 and 100 only (and N = 10 for Azure creates)
  python -m bench --only ours       one agent only (ours | upstream)
  python -m bench --include REGEX   only the scenarios whose label matches (--append FILE: into FILE)
  python -m bench --render FILE     re-render docs/performance.md and its plots from a results file

Membership passes run three cycles (first: metadata recorded; steady: nothing to change; changes:
a tenth of the resources paused in Waldur); report and membership go up to N = 10,000 (ours).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench import render
from bench.measure import cpu_times, stolen_share
from bench.harness import (AZURE_LRO_SECONDS, LATENCY, MEMBERSHIP_CHANGED_SHARE, RESULTS_DIR, VARIANTS, BenchError,
                           SimulatorSet, ensure_upstream, run_ours, run_upstream, upstream_import_footprint)
from tests.helpers import REPO

SUMMARY = RESULTS_DIR / "summary.json"


@dataclass(frozen=True)
class Step:
    """One scenario: an agent, a pass on one offering, a workload size, the cycles to run."""

    agent: str  # ours | ours-serial | upstream
    pass_name: str  # order | report | audit | membership
    backend: str  # digitalocean | azure
    n: int
    variant: str = ""  # "" or a harness.VARIANTS key

    @property
    def cycles(self) -> tuple:
        # A report pass writes usage the first time and nothing after: measure both. A
        # membership pass records the machines' metadata the first time, then has nothing to
        # change (steady), then finds a tenth of the resources paused in Waldur (changes).
        if self.pass_name == "report" and self.n:
            return ("first", "steady")
        if self.pass_name == "membership" and self.n:
            return ("first", "steady", "changes")
        return ("only",)

    def label(self) -> str:
        return "%s %s/%s N=%d%s" % (self.agent, self.pass_name, self.backend, self.n,
                                    " [%s]" % self.variant if self.variant else "")


def build_plan(quick: bool = False, only: str | None = None) -> list[Step]:
    sizes = (0, 10, 100) if quick else (0, 10, 100, 1000)
    # Report and membership at 10,000 resources (ours): their calls must grow with pages.
    large = (0, 10, 100) if quick else (0, 10, 100, 1000, 10000)
    do_orders = (0, 10, 100) if quick else (0, 10, 100, 200, 1000)
    # Azure creates are bound by the 2 s long-running operations (~7 per machine): 1000 of
    # them would take a quarter of an hour even 24 at a time, so the plan stops at 100.
    azure_orders = (0, 10) if quick else (0, 10, 50, 100)
    serial_orders = (10,) if quick else (10, 50)
    # Against DigitalOcean's real limits: more creates than one minute's 250 requests allow.
    limited = () if quick else (300, 1000)
    ours = ([Step("ours", "order", "digitalocean", n) for n in do_orders]
            + [Step("ours", "report", "digitalocean", n) for n in large]
            + [Step("ours", "membership", backend, n) for backend in ("digitalocean", "azure") for n in large]
            + [Step("ours", "order", "azure", n) for n in azure_orders]
            + [Step("ours-serial", "order", "azure", n) for n in serial_orders]
            + [Step("ours", "report", "azure", n) for n in large]
            + [Step("ours", "audit", backend, n) for backend in ("digitalocean", "azure") for n in sizes]
            + [Step("ours", "order", "digitalocean", n, "do-rate-limit") for n in limited])
    # The upstream Azure plugin builds its SDK clients without a base URL: it only talks to
    # management.azure.com, so only its Waldur and DigitalOcean sides can be measured here.
    upstream = ([Step("upstream", "order", "digitalocean", n) for n in do_orders]
                + [Step("upstream", "report", "digitalocean", n) for n in sizes]
                + [Step("upstream", "membership", "digitalocean", n) for n in sizes]
                + [Step("upstream", "order", "digitalocean", n, "do-rate-limit") for n in limited])
    if only == "ours":
        return ours
    if only == "upstream":
        return upstream
    return ours + upstream


def host_info() -> dict:
    def version_of(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.splitlines()[0].strip()
        except (OSError, IndexError):
            return None

    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "ansible": version_of([str(Path(sys.executable).parent / "ansible-playbook"), "--version"]),
    }


def collection_version() -> str:
    for line in (REPO / "galaxy.yml").read_text().splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def collection_commit() -> str | None:
    """The commit measured (``git rev-parse --short HEAD``), marked when the tree held uncommitted
    changes: a figure is only worth as much as knowing which code it came from."""
    def git(*args):
        try:
            done = subprocess.run(["git", "-C", str(REPO)] + list(args), capture_output=True, text=True, check=False)
        except OSError:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:
        return None
    # bench/results/ is written by the bench itself while it runs
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results")
    return commit + (" with uncommitted changes" if changed else "")


def run_plan(plan: list[Step], results: dict, out_path: Path, sims: SimulatorSet, log=print) -> None:
    logs = out_path.with_suffix("")
    logs.mkdir(parents=True, exist_ok=True)
    for step in plan:
        sims.reset()
        sims.apply_variant(step.variant)
        seeded = sims.seed(step.pass_name, step.backend, step.n)
        for cycle in step.cycles:
            if cycle == "changes":
                seeded["paused"] = sims.pause_some(step.backend, max(1, int(step.n * MEMBERSHIP_CHANGED_SHARE)))
            load = os.getloadavg()[0]
            cpu_before = cpu_times()
            if step.agent == "upstream":
                result = run_upstream(sims, step.pass_name, step.backend, step.n, cycle, logs=logs,
                                      variant=step.variant)
            else:
                extra = {"order_process_azure_max_workers": 1} if step.agent == "ours-serial" else None
                result = run_ours(sims, step.pass_name, step.backend, step.n, cycle, extra_vars=extra,
                                  agent=step.agent, logs=logs, variant=step.variant)
            if not step.variant:  # a variant may leave work undone: that is what it measures
                check_outcome(result, seeded)
            data = result.as_dict()
            data["load_before"] = round(load, 2)
            data["steal_pct"] = stolen_share(cpu_before, cpu_times())
            data["measured_at"] = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            results["runs"].append(data)
            out_path.write_text(results_text(results))
            log("%-40s %-6s %8.2f s  calls %s  peak PSS %.0f MiB%s" % (
                step.label(), cycle, result.wall_s, render.calls_text(data), result.peak_tree_pss_mib,
                ("  NOTE: " + result.note) if result.note else ""))


# Tasks shorter than this are left out of a results file's task_times (each run still counts
# its tasks): the many short ones made summary.json, which is committed, too large to review.
SHORT_TASK_S = 0.2


def results_text(results: dict) -> str:
    """``results`` as written to a results file, each run's short tasks left out."""
    runs = [dict(run, task_times=[task for task in run.get("task_times") or [] if task["seconds"] >= SHORT_TASK_S])
            for run in results.get("runs") or []]
    return json.dumps(dict(results, runs=runs), indent=1)


def run_label(run: dict) -> str:
    return render.run_label(run)


def check_outcome(result, seeded: dict) -> None:
    """Make a pass that did not do its work visible: a fast wrong pass is no result."""
    problems = []
    if result.rc != 0:
        problems.append("exit status %d" % result.rc)
    if result.pass_name == "order":
        done = result.outcome["orders"].get("done", 0)
        if done != seeded["orders"]:
            problems.append("%d of %d orders done (%s)" % (done, seeded["orders"], result.outcome["orders"]))
    if result.pass_name == "membership":
        machines = result.outcome["machines"]
        stopped = sum(count for state, count in machines.items() if state not in ("active", "running"))
        if stopped != seeded.get("paused", 0):
            problems.append("%d machines stopped, %d resources paused (%s)"
                            % (stopped, seeded.get("paused", 0), machines))
    if problems:
        result.note = "; ".join(filter(None, [result.note] + problems))


def run_events(args, plan_filtered: bool) -> bool:
    """The event-latency bench (``bench/events.py``, when present) runs in a full plan, or when
    ``--include`` matches ``events``."""
    if importlib.util.find_spec("bench.events") is None:
        return False
    return not plan_filtered or bool(args.include and re.search(args.include, "events"))


def measure_events() -> dict:
    """``bench.events.run_event_bench()`` with its defaults, the load it ran under beside it."""
    from bench import events  # written beside this harness; optional until it exists
    load = os.getloadavg()[0]
    figures = dict(events.run_event_bench())
    figures.setdefault("load_before", round(load, 2))
    print("events: median %s s, p95 %s s over %s orders (load %.1f)" % (
        figures.get("median_s"), figures.get("p95_s"), figures.get("orders"), load), flush=True)
    return figures


def yes_or_no(text: str) -> bool:
    if text.lower() in ("true", "yes", "1", "on"):
        return True
    if text.lower() in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError("true or false, not %r" % text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="N = 10 and 100 only")
    parser.add_argument("--only", choices=("ours", "upstream"), help="run one agent only")
    parser.add_argument("--docs", nargs="?", const=True, default=None, type=yes_or_no, metavar="true|false",
                        help="render docs/performance.md and the plots (default: after a full run of both agents)")
    parser.add_argument("--no-docs", dest="docs", action="store_false", help="the same as --docs false")
    parser.add_argument("--include", metavar="REGEX",
                        help="only the scenarios whose label matches, e.g. 'upstream order' or 'rate-limit'")
    parser.add_argument("--append", metavar="RESULTS_JSON",
                        help="add the runs to this results file (replacing runs of the same scenarios)")
    parser.add_argument("--render", metavar="RESULTS_JSON", help="only re-render the docs from a results file")
    args = parser.parse_args(argv)

    render_docs = args.docs or (args.docs is None and not args.quick and args.only is None and not args.include)
    if (args.render or render_docs) and importlib.util.find_spec("matplotlib") is None:
        # Fail now rather than after an hour of measuring.
        print("bench: the plot needs matplotlib (requirements-dev.txt): %s -m pip install matplotlib"
              % sys.executable, file=sys.stderr)
        return 2
    if args.render:
        results = json.loads(Path(args.render).read_text())
        print("rendered %s" % ", ".join(str(path) for path in render.write_docs(results)))
        return 0

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    plan = build_plan(args.quick, args.only)
    if args.include:
        plan = [step for step in plan if re.search(args.include, step.label())]
    if args.append:
        out_path = Path(args.append)
        results = json.loads(out_path.read_text())
        labels = {step.label() for step in plan}
        results["runs"] = [run for run in results["runs"] if run_label(run) not in labels]
        results.setdefault("appended", []).append({"started": stamp, "only": args.only, "include": args.include,
                                                   "commit": collection_commit(),
                                                   "scenarios": len(plan), "labels": sorted(labels)})
    else:
        out_path = RESULTS_DIR / ("%s.json" % stamp)
        results = {
            "started": stamp, "quick": args.quick, "only": args.only, "host": host_info(),
            "latency_s": LATENCY, "azure_lro_s": AZURE_LRO_SECONDS, "collection_version": collection_version(),
            "collection_commit": collection_commit(), "upstream_versions": None, "variants": VARIANTS, "runs": [],
        }
    if any(step.agent == "upstream" for step in plan):
        results["upstream_versions"] = ensure_upstream()
        results["upstream_import"] = upstream_import_footprint()
    print("bench: %d scenarios, results in %s" % (len(plan), out_path), flush=True)
    started = time.monotonic()
    cpu_at_start = cpu_times()
    try:
        with SimulatorSet() as sims:
            run_plan(plan, results, out_path, sims, log=lambda line: print(line, flush=True))
    except BenchError as exc:
        print("bench: %s" % exc, file=sys.stderr)
        return 1
    if run_events(args, plan_filtered=bool(args.quick or args.only or args.include)):
        if args.append:
            results["appended"][-1]["events"] = True
        results["events"] = measure_events()
        from bench import events_side  # ours and upstream's event_process side by side

        results["events_side"] = events_side.run_all(log=lambda line: print(line, flush=True))
        out_path.write_text(results_text(results))
    results["duration_s"] = round(time.monotonic() - started, 1)
    results["steal_pct"] = stolen_share(cpu_at_start, cpu_times())
    out_path.write_text(results_text(results))
    print("bench: finished in %.0f s (%s%% of the CPU time stolen by the host); results %s"
          % (results["duration_s"], results["steal_pct"], out_path))
    if render_docs:
        SUMMARY.write_text(results_text(results))
        written = render.write_docs(results)
        print("bench: rendered %s; summary %s" % (", ".join(str(path) for path in written), SUMMARY))
    failed = [run for run in results["runs"] if run.get("note")]
    for run in failed:
        fields = (run["agent"], run["pass_name"], run["backend"], run["n"], run["cycle"], run["note"])
        print("bench: %s %s/%s N=%d %s: %s" % fields, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
