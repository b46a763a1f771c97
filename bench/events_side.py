"""The event path side by side: ours (ansible-rulebook with the collection's rulebook) and
upstream's ``waldur_site_agent -m event_process``, on the same private RabbitMQ (web-STOMP,
``tests/integration/broker.py``), Waldur and DigitalOcean simulators and site config.

``python -m bench.events_side [--agents ours,upstream] [--scenarios isolated,burst,...]
[--json PATH]``. Scenarios (:data:`SCENARIOS`):

* ``isolated``: orders 15 s apart (one order per run), droplets active at once;
* ``burst``: 20 orders within one second, droplets active at once;
* ``burst-boot10`` / ``burst-boot30``: the same burst, droplets booting 10 s / 30 s
  (the DigitalOcean simulator's ``boot_seconds``);
* ``azure-burst``: 10 VM orders within one second, the Azure simulator's realistic LROs
  (ours only: upstream's Azure plugin takes no endpoint, so it cannot reach a simulator).

Per order: create request sent -> ``set_state_done`` logged (median, p95, max), the time to the
last order done, Waldur and cloud API calls; for every done order, whether its machine was
running at that moment (upstream sets ``done`` once it has asked for the droplet; ours once
the droplet is ``active``). The two agents run one after the other (they would register the
same ``agent-<offering>`` identity and consume the same queue), each on fresh simulators.
Upstream is the bench's own install (``bench/harness.py:ensure_upstream``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.events import broker_version, load_average, pass_runs, percentile
from bench.harness import UPSTREAM_VENV, ensure_upstream
from bench.measure import cpu_times, stolen_share
from tests.integration.broker import RabbitBroker
from tests.integration.test_event_process import (PLAYBOOK_FINISHED, Rulebook, order_droplet, order_vm,
                                                  stomp_site_config, write_site_config)
from tests.simulators.common import SimulatorServer
from tests.simulators.digitalocean import DigitalOceanSimulator
from tests.simulators.waldur import WaldurSimulator

# name -> (orders, seconds between two orders, droplet boot seconds, backend)
SCENARIOS = {
    # far enough apart that ours finishes one order's run before the next order (about 10 s a run here)
    "isolated": (10, 15.0, 0.0, "digitalocean"),
    "burst": (20, 0.04, 0.0, "digitalocean"),
    "burst-boot10": (20, 0.04, 10.0, "digitalocean"),
    "burst-boot30": (20, 0.04, 30.0, "digitalocean"),
    "azure-burst": (10, 0.08, 0.0, "azure"),
}
# Targets of issue 26 (seconds): isolated median; a burst's last done within boot + 4 s.
ISOLATED_MEDIAN_TARGET_S = 2.0
BURST_MARGIN_S = 4.0
FINAL = ("done", "erred")


class Watch(threading.Thread):
    """Polls the simulators every 0.1 s: when an order turns final, whether its machine runs."""

    def __init__(self, waldur, cloud, backend, orders, expected):
        super().__init__(daemon=True)
        self.waldur, self.cloud, self.backend, self.orders = waldur, cloud, backend, orders
        # the orders are placed while it watches: it runs until all of them, not the ones
        # placed so far, are final
        self.expected = expected
        self.final: dict[str, tuple[str, float, bool | None]] = {}
        self.stop = threading.Event()

    def running(self, resource_uuid):
        resource = self.waldur.app.market.resources.get(resource_uuid) or {}
        backend_id = str(resource.get("backend_id") or "")
        if self.backend != "digitalocean":
            return None
        for droplet in self.cloud.app.droplets():
            if str(droplet["id"]) == backend_id or droplet["name"] == resource.get("name"):
                return droplet["status"] == "active"
        return False

    def run(self):
        while not self.stop.is_set() and len(self.final) < self.expected:
            for order_uuid, resource_uuid in list(self.orders.items()):
                if order_uuid in self.final:
                    continue
                state = self.waldur.app.order(order_uuid)["state"]
                if state in FINAL:
                    self.final[order_uuid] = (state, time.time(), self.running(resource_uuid))
            time.sleep(0.1)


def done_times(waldur_app, order_uuids):
    with waldur_app.lock:
        calls = list(waldur_app.calls)
    found = {}
    for call in calls:
        if call["operation"] == "orders.set_state_done" and call["status"] < 300:
            for uuid in order_uuids:
                if uuid in call["path"].replace("-", "") and uuid not in found:
                    found[uuid] = call["time"]
    return found


class Upstream:
    """``waldur_site_agent -m event_process -c <config>`` from the bench's upstream venv."""

    def __init__(self, workdir: Path, config: Path, env: dict):
        self.log_path = workdir / "upstream.log"
        self.log = open(self.log_path, "w")
        binary = UPSTREAM_VENV / "bin" / "waldur_site_agent"
        environ = dict(os.environ, **env)
        environ.pop("PYTHONPATH", None)  # upstream imports nothing of this checkout
        self.proc = subprocess.Popen([str(binary), "-m", "event_process", "-c", str(config)], stdout=self.log,
                                     stderr=subprocess.STDOUT, env=environ, start_new_session=True)

    def text(self):
        return self.log_path.read_text(errors="replace")

    def wait_for(self, what, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if what in self.text():
                return
            if self.proc.poll() is not None:
                raise RuntimeError("upstream exited: %s" % self.text()[-2000:])
            time.sleep(0.3)
        raise RuntimeError("upstream: no %r within %s s: %s" % (what, timeout, self.text()[-2000:]))

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def summarise(created, finished, watch):
    latencies = sorted(round(finished[uuid] - created[uuid], 3) for uuid in created if uuid in finished)
    done = [value for value in watch.final.values() if value[0] == "done"]
    first = min(created.values()) if created else 0.0
    return {
        "orders": len(created),
        "done": len(done),
        "erred": sum(1 for value in watch.final.values() if value[0] == "erred"),
        "median_s": round(statistics.median(latencies), 3) if latencies else None,
        "p95_s": percentile(latencies, 0.95),
        "max_s": max(latencies) if latencies else None,
        "last_done_s": round(max(finished.values()) - first, 3) if finished else None,
        "done_running": sum(1 for value in done if value[2]),
        "latencies_s": latencies,
    }


# Where an order run's time goes: each task of the order pass falls in the first phase whose
# words its name contains; the rest (configuration, lock, summary) is "other tasks".
PHASES = (
    ("offering check (Waldur)", ("offering exists",)),
    ("backend probe", ("Probe the backend", "Prove the")),
    ("listing and catalogue check", ("List the orders", "catalogue")),
    ("claim (approval, Waldur's processing)", ("Claim",)),
    ("create and wait (cloud)", ("Carry out", "Plan the orders", "Say what the orders", "Name the orders settled")),
    ("settle (Waldur)", ("Settle the orders",)),
)
OTHER_TASKS = "other tasks (configuration, lock, accounting, summary)"


def phase_split(profile_path: Path) -> dict | None:
    """Median seconds per phase over the order runs that carried out orders (their backend
    task ran, not skipped), from the bench_profile callback's lines; ``outside tasks`` is the rest of
    a run after the callback loaded (ansible's own start-up before it is not in it)."""
    if not profile_path.exists():
        return None
    splits = []
    for line in profile_path.read_text().splitlines():
        record = json.loads(line)
        if not any("Carry out the orders on" in task["name"] and set(task["statuses"]) - {"skipped"}
                   for task in record["tasks"]):
            continue  # a run with no order to carry out
        phases = dict.fromkeys([name for name, _words in PHASES] + [OTHER_TASKS], 0.0)
        for task in record["tasks"]:
            seconds = task["end"] - task["start"]
            phase = next((name for name, words in PHASES if any(word in task["name"] for word in words)), OTHER_TASKS)
            phases[phase] += seconds
        run_seconds = record["ended"] - record["playbook_started"]
        phases["outside tasks"] = max(0.0, run_seconds - sum(phases.values()))
        phases["run"] = run_seconds
        splits.append(phases)
    if not splits:
        return None
    return {name: round(statistics.median(split[name] for split in splits), 2) for name in splits[0]} | {
        "runs": len(splits)}


def run_scenario(agent: str, scenario: str, workdir: Path, settle_timeout_s: float = 300.0) -> dict:
    orders, gap_s, boot_s, backend = SCENARIOS[scenario]
    workdir.mkdir(parents=True, exist_ok=True)
    broker = RabbitBroker(workdir / "broker").start()
    waldur = cloud = runner = None
    env = {"WALDUR_SITE_AGENT_LOCK_DIR": str(workdir / "locks")}
    profile_path = workdir / "profile.jsonl"
    if agent == "ours":  # per-task times of every run, for the phase split
        env.update(ANSIBLE_CALLBACK_PLUGINS=str(Path(__file__).parent / "callback_plugins"),
                   ANSIBLE_CALLBACKS_ENABLED="bench_profile", BENCH_PROFILE_PATH=str(profile_path))
    try:
        waldur = SimulatorServer(WaldurSimulator(preset="empty", broker=broker)).start()
        if backend == "digitalocean":
            cloud = SimulatorServer(DigitalOceanSimulator(preset="default", latency=0.0,
                                                          boot_seconds=boot_s)).start()
            config = stomp_site_config(waldur, broker, "ws", do_sim=cloud)
        else:
            from tests.simulators.azure import AzureSimulator
            from tests.simulators.tls import make_tls

            context, ca_bundle = make_tls(str(workdir / "tls"))
            cloud = SimulatorServer(AzureSimulator(preset="default", lro="realistic"), ssl_context=context).start()
            env["REQUESTS_CA_BUNDLE"] = ca_bundle
            config = stomp_site_config(waldur, broker, "ws", azure_sim=cloud)
        config["offerings"] = [item for item in config["offerings"] if item["backend_type"] == backend]
        path = write_site_config(workdir, config)
        started = time.monotonic()
        if agent == "ours":
            (workdir / "rulebook").mkdir()
            runner = Rulebook(workdir / "rulebook", path, env)
            runner.wait_for("Subscribed to /amq/queue/consumer_", timeout=300)
            runner.wait_for(PLAYBOOK_FINISHED, timeout=300)  # the startup sweep
        else:
            # upstream's python-digitalocean reads its endpoint only from the environment
            runner = Upstream(workdir, path, dict(env, DIGITALOCEAN_END_POINT=cloud.url + "/v2/",
                                                  WALDUR_SITE_AGENT_HEARTBEAT_PATH=str(workdir / "heartbeat")))
            wait_until_queue(waldur, 300)
            time.sleep(3.0)  # its STOMP subscription follows the registration
        ready_s = time.monotonic() - started
        load_before = load_average()
        cpu_before = cpu_times()
        calls_before = len(waldur.app.calls)
        cloud_before = len(cloud.app.calls)
        created, resources = {}, {}
        order = order_droplet if backend == "digitalocean" else order_vm
        watch = Watch(waldur, cloud, backend, resources, orders)
        for index in range(orders):
            if index:
                time.sleep(gap_s)
            sent = time.time()
            order_uuid, resource_uuid = order(waldur, "bench-%s-%02d" % (scenario, index))
            order_uuid = order_uuid.replace("-", "")
            created[order_uuid] = sent
            resources[order_uuid] = resource_uuid.replace("-", "")
            if index == 0:
                watch.start()
        watch.join(timeout=settle_timeout_s)
        watch.stop.set()
        finished = done_times(waldur.app, set(created))
        result = summarise(created, finished, watch)
        result.update(agent=agent, scenario=scenario, boot_s=boot_s, gap_s=gap_s, backend=backend,
                      ready_s=round(ready_s, 1), waldur_calls=len(waldur.app.calls) - calls_before,
                      cloud_calls=len(cloud.app.calls) - cloud_before, load_before=load_before,
                      load_after=load_average(), steal_pct=stolen_share(cpu_before, cpu_times()),
                      broker=broker_version())
        if agent == "ours":
            # the last run sets its orders done before its summary tasks: let it finish
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and runner.log().count('"event": "playbook started"') > \
                    runner.log().count(PLAYBOOK_FINISHED):
                time.sleep(0.3)
            result["passes"] = pass_runs(runner.json_lines())
            result["phases"] = phase_split(profile_path)
        return result
    finally:
        if runner is not None:
            runner.stop()
        for server in (waldur, cloud):
            if server is not None:
                server.stop()
        broker.stop()


def wait_until_queue(waldur, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if waldur.app.events.queues:
            return
        time.sleep(0.3)
    raise RuntimeError("upstream registered no event queue within %s s" % timeout)


def targets(runs: list[dict]) -> list[dict]:
    """Issue 26's event targets, judged on ours, with upstream's figures of the same run beside."""
    by = {(run["agent"], run["scenario"]): run for run in runs}
    rows = []
    for scenario, (_orders, _gap, boot_s, _backend) in SCENARIOS.items():
        ours = by.get(("ours", scenario))
        if ours is None or scenario == "azure-burst":
            continue
        if scenario == "isolated":
            target, figure, what = ISOLATED_MEDIAN_TARGET_S, ours["median_s"], "isolated median create -> done"
        else:
            target, figure, what = boot_s + BURST_MARGIN_S, ours["last_done_s"], "%s: last of 20 done" % scenario
        upstream = by.get(("upstream", scenario)) or {}
        rows.append({"target": what, "limit_s": target, "ours_s": figure,
                     "upstream_s": upstream.get("median_s" if scenario == "isolated" else "last_done_s"),
                     "met": figure is not None and ours["done"] == ours["orders"] and figure <= target})
    return rows


def run_all(agents=("ours", "upstream"), scenarios=tuple(SCENARIOS), log=print) -> dict:
    results = {"runs": [], "load_start": load_average()}
    cpu_at_start = cpu_times()
    if "upstream" in agents:
        results["upstream_versions"] = ensure_upstream(log=log)
    with tempfile.TemporaryDirectory(prefix="bench-events-side-") as tmp:
        for scenario in scenarios:
            for agent in agents:
                if agent == "upstream" and SCENARIOS[scenario][3] == "azure":
                    continue
                log("events: %s %s" % (agent, scenario))
                try:
                    run = run_scenario(agent, scenario, Path(tmp) / ("%s-%s" % (agent, scenario)))
                except Exception as exc:  # one scenario failing leaves the others measured
                    run = {"agent": agent, "scenario": scenario, "error": "%s: %s" % (type(exc).__name__, exc)}
                shown = {key: value for key, value in run.items() if key not in ("latencies_s", "passes")}
                log("events: %s" % json.dumps(shown))
                results["runs"].append(run)
    results["load_end"] = load_average()
    results["steal_pct"] = stolen_share(cpu_at_start, cpu_times())
    results["targets"] = targets([run for run in results["runs"] if "error" not in run])
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.events_side", description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="ours,upstream")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    results = run_all(tuple(args.agents.split(",")), tuple(args.scenarios.split(",")),
                      log=lambda line: print(line, flush=True))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all("error" not in run for run in results["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
