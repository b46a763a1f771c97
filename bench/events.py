"""The event path measured end to end: order created in Waldur -> order ``done``.

``python -m bench.events [--orders 50] [--seed 14] [--span 60] [--json PATH]`` starts the
test harness's private RabbitMQ broker (``tests/integration/broker.py``), the Waldur
simulator publishing its events to it, the DigitalOcean simulator with no latency and
instant boot (a new droplet is ``active`` from its first read on), and
``ansible-rulebook --rulebook waldur.site_agent.event_process`` as the event tests start it
(``tests/integration/test_event_process.py``). After the rulebook's startup sweep, a
consumer creates ``orders`` droplet orders at Poisson arrival times (mean gap
``span / orders`` seconds, fixed seed) and the bench times each from the moment its
create request was sent to the moment the simulator logged the ``set_state_done`` call
that finished it.

:func:`run_event_bench` returns the figures as a dict (``results["events"]`` of the bench).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from tests.integration.broker import RabbitBroker
from tests.integration.test_event_process import (PLAYBOOK_FINISHED, Rulebook, order_droplet, stomp_site_config,
                                                  write_site_config)
from tests.simulators.common import SimulatorServer
from tests.simulators.digitalocean import DigitalOceanSimulator
from tests.simulators.waldur import WaldurSimulator

TARGET_MEDIAN_S = 2.0
TARGET_P95_S = 4.0
DEFAULT_SEED = 14
DEFAULT_SPAN_S = 60.0
FINAL_STATES = ("done", "erred")


def arrival_offsets(orders: int, span_s: float, seed: int) -> list[float]:
    """Poisson arrivals: exponential gaps of mean ``span_s / orders``, from 0 on."""
    rng = random.Random(seed)
    offsets, moment = [], 0.0
    for dummy in range(orders):
        offsets.append(round(moment, 3))
        moment += rng.expovariate(orders / span_s) if span_s > 0 else 0.0
    return offsets


def percentile(values: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile (no interpolation between two orders' times)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, int(-(-fraction * len(ordered) // 1)))  # ceil
    return ordered[min(rank, len(ordered)) - 1]


def broker_version() -> str:
    """``rabbitmq x.y.z`` of the installed server (Debian's package), else ``rabbitmq``."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"], capture_output=True,
                             text=True, timeout=10, check=False).stdout.strip()
    except OSError:
        out = ""
    return "rabbitmq " + out.split("-")[0] if out else "rabbitmq"


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def done_times(waldur_app, order_uuids: set[str]) -> dict[str, float]:
    """When the simulator logged each order's ``set_state_done`` (wall clock, seconds)."""
    with waldur_app.lock:
        calls = list(waldur_app.calls)
    found = {}
    for call in calls:
        if call["operation"] != "orders.set_state_done" or call["status"] >= 300:
            continue
        for uuid in order_uuids:
            if uuid in call["path"].replace("-", "") and uuid not in found:
                found[uuid] = call["time"]
    return found


def pass_runs(json_lines: list[dict]) -> dict:
    """How many order and membership passes the rulebook ran, how long its playbook runs took
    and the gap between one run's end and the next one's start (ansible-rulebook starting
    ansible-runner, which starts ansible-playbook), median and maximum seconds, from its JSON
    log lines. The gaps are measured only while the runs were back to back (under 30 s)."""
    runs = {"order_process": 0, "membership_sync": 0}
    seconds, gaps, last_end = [], [], None
    for line in json_lines:
        event = line.get("event")
        if event == "pass summary" and line.get("pass") in runs:
            runs[line["pass"]] += 1
        elif event == "playbook finished" and isinstance(line.get("seconds"), (int, float)):
            seconds.append(line["seconds"])
            last_end = _moment(line.get("timestamp"))
        elif event == "playbook started":
            start = _moment(line.get("timestamp"))
            if last_end is not None and start is not None and 0 <= start - last_end < 30:
                gaps.append(round(start - last_end, 3))
    runs["playbooks"] = len(seconds)
    runs["playbook_median_s"] = round(statistics.median(seconds), 3) if seconds else None
    runs["playbook_max_s"] = max(seconds) if seconds else None
    runs["start_gap_median_s"] = round(statistics.median(gaps), 3) if gaps else None
    return runs


def _moment(timestamp) -> float | None:
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except (TypeError, ValueError):
        return None


def summarise(orders: int, created: dict[str, float], finished: dict[str, float], states: dict[str, str]) -> dict:
    """The figures of one run: each order's latency (create sent -> done logged), their
    median, p95 and maximum, how many orders ended done or erred, and whether the targets hold."""
    latencies = [round(finished[uuid] - created[uuid], 3) for uuid in created if uuid in finished]
    result = {
        "orders": orders,
        "done": sum(1 for state in states.values() if state == "done"),
        "erred": sum(1 for state in states.values() if state == "erred"),
        "median_s": round(statistics.median(latencies), 3) if latencies else None,
        "p95_s": percentile(latencies, 0.95),
        "max_s": max(latencies) if latencies else None,
        "latencies_s": latencies,
        # median, p95 and max are over the finished orders only: these had not finished
        "unfinished": orders - len(latencies),
        "targets": {"median_s": TARGET_MEDIAN_S, "p95_s": TARGET_P95_S},
    }
    result["met"] = bool(latencies) and result["done"] == orders and \
        result["median_s"] <= TARGET_MEDIAN_S and result["p95_s"] <= TARGET_P95_S
    return result


def run_event_bench(orders: int = 50, seed: int = DEFAULT_SEED, workdir: str | os.PathLike | None = None,
                    span_s: float = DEFAULT_SPAN_S, settle_timeout_s: float = 600.0) -> dict:
    """Run the rulebook against the broker and simulators, create ``orders`` orders at
    Poisson moments over about ``span_s`` seconds, and time each to ``done``."""
    own_dir = None
    if workdir is None:
        own_dir = tempfile.TemporaryDirectory(prefix="bench-events-")
        workdir = own_dir.name
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    broker = RabbitBroker(workdir / "broker").start()
    waldur = do = rulebook = None
    try:
        waldur = SimulatorServer(WaldurSimulator(preset="empty", broker=broker)).start()
        # boot_seconds=0: a new droplet is active from its first read on (instant boot).
        do = SimulatorServer(DigitalOceanSimulator(preset="default", latency=0.0, boot_seconds=0)).start()
        config = write_site_config(workdir, stomp_site_config(waldur, broker, "ws", do_sim=do))
        rulebook_dir = workdir / "rulebook"
        rulebook_dir.mkdir(exist_ok=True)
        started = time.monotonic()
        rulebook = Rulebook(rulebook_dir, config, {"WALDUR_SITE_AGENT_LOCK_DIR": str(workdir / "locks")})
        rulebook.wait_for("Subscribed to /amq/queue/consumer_", timeout=180)
        rulebook.wait_for(PLAYBOOK_FINISHED, timeout=180)  # the startup sweep: nothing pending
        ready_s = time.monotonic() - started

        offsets = arrival_offsets(orders, span_s, seed)
        created: dict[str, float] = {}
        errors: list[str] = []
        load_before = load_average()
        origin = time.monotonic()
        for index, offset in enumerate(offsets):
            delay = origin + offset - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent = time.time()
            try:
                order_uuid, _resource = order_droplet(waldur, "bench-event-%03d" % index)
            except AssertionError as exc:
                errors.append("order %d not created: %s" % (index, exc))
                continue
            created[order_uuid.replace("-", "")] = sent
        created_s = time.monotonic() - origin

        deadline = time.monotonic() + settle_timeout_s
        while time.monotonic() < deadline:
            states = {uuid: waldur.app.order(uuid)["state"] for uuid in created}
            if all(state in FINAL_STATES for state in states.values()):
                break
            time.sleep(0.25)
        states = {uuid: waldur.app.order(uuid)["state"] for uuid in created}
        finished = done_times(waldur.app, set(created))
        runs = pass_runs(rulebook.json_lines())
        waldur_ops = [call["operation"] for call in waldur.app.calls]
        result = summarise(orders, created, finished, states)
        result.update({
            "broker": broker_version(),
            "seed": seed,
            "span_s": span_s,
            "arrivals_s": round(created_s, 3),
            "rulebook_ready_s": round(ready_s, 3),
            "passes": runs,
            "waldur_calls": len(waldur_ops),
            "orders_get": waldur_ops.count("orders.get"),
            "orders_list": waldur_ops.count("orders.list"),
            "do_creates": len(do.app.calls_of("droplets.create")),
            "load_before": load_before,
            "load_after": load_average(),
        })
        result["note"] = ("%d orders at Poisson moments over %.0f s (seed %d) through ansible-rulebook, %s and the "
                          "Waldur simulator, DigitalOcean simulator instant; %d order and %d membership passes ran, "
                          "a playbook run took %s s (median); load average %s before, %s after"
                          % (orders, span_s, seed, result["broker"], runs["order_process"], runs["membership_sync"],
                             runs["playbook_median_s"], load_before, result["load_after"]))
        if errors:
            result["errors"] = errors
        return result
    finally:
        if rulebook is not None:
            rulebook.stop()
        for server in (waldur, do):
            if server is not None:
                server.stop()
        broker.stop()
        if own_dir is not None:
            own_dir.cleanup()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.events", description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=50)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--span", type=float, default=DEFAULT_SPAN_S, help="seconds the arrivals spread over")
    parser.add_argument("--settle-timeout", type=float, default=900.0,
                        help="seconds to wait after the last arrival for every order to finish")
    parser.add_argument("--workdir", help="keep the broker's, rulebook's and simulators' files here")
    parser.add_argument("--json", help="write the result to this file")
    args = parser.parse_args(argv)
    result = run_event_bench(orders=args.orders, seed=args.seed, workdir=args.workdir, span_s=args.span,
                             settle_timeout_s=args.settle_timeout)
    shown = {key: value for key, value in result.items() if key != "latencies_s"}
    print(json.dumps(shown, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["done"] == result["orders"] else 1


if __name__ == "__main__":
    sys.exit(main())
