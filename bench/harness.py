"""The benchmark's moving parts: simulator processes, workloads, and the two agents' passes.

One :class:`SimulatorSet` (three simulator processes with injected latency) serves every
scenario; before each run the simulators are reset and seeded with one offering's
workload, the pass runs once (ours: ``ansible-playbook playbooks/<pass>.yml``; upstream:
one cycle of ``waldur_site_agent -m <mode>``), and a :class:`RunResult` records wall time,
memory, the API calls each simulator logged, and (ours) ansible's tasks and module runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests
import yaml

from bench.measure import Measurement, run_measured
from tests.helpers import REPO, ansible_env, simulator_site_config
from tests.simulators.waldur import presets as waldur_presets

BENCH_DIR = REPO / "bench"
RESULTS_DIR = BENCH_DIR / "results"
# Under .cache/ (git-, lint- and build-ignored): a venv inside bench/ would end up in
# the collection artifact, which ansible-galaxy builds from everything not build_ignore'd.
UPSTREAM_VENV = REPO / ".cache" / "bench-upstream-venv"
UPSTREAM_PACKAGES = ("waldur-site-agent", "waldur-site-agent-digitalocean", "waldur-site-agent-azure")

# Latency of one API call, as the issue sets them (seconds).
LATENCY = {"waldur": 0.020, "digitalocean": 0.050, "azure": 0.050}
AZURE_LRO_SECONDS = 2.0

DO_LIMITS = dict(waldur_presets.DO_PLAN_QUOTAS)
AZURE_LIMITS = dict(waldur_presets.AZURE_PLAN_QUOTAS)
OFFERING_UUID = {"digitalocean": waldur_presets.DO_OFFERING_UUID, "azure": waldur_presets.AZURE_OFFERING_UUID}
COLLECTION_PREFIX = "waldur.site_agent."
ACTION_ONLY = ("pass_lock", "site_config")  # action plugins that run no module
MODES = {"order": "order_process", "report": "report", "audit": "audit", "membership": "membership_sync"}
# The membership pass's cycle with some changes: this share of the resources paused in Waldur.
MEMBERSHIP_CHANGED_SHARE = 0.1
# Scenario variants: what the simulators do differently from the plain workload.
VARIANTS = {
    "do-rate-limit": "the DigitalOcean simulator enforces DigitalOcean's documented limits "
                     "(250 requests per minute, 5,000 per hour) with 429 and Retry-After",
}


class BenchError(RuntimeError):
    """The harness could not set up or run a scenario."""


# --------------------------------------------------------------------------- simulators

@dataclass
class SimulatorProcess:
    name: str
    proc: subprocess.Popen
    url: str
    ca_bundle: str | None = None

    def control(self, method: str, path: str, payload: dict | None = None, timeout: float = 600) -> dict:
        response = requests.request(method, self.url + path, json=payload, timeout=timeout,
                                    verify=self.ca_bundle or True)
        if response.status_code >= 400:
            raise BenchError("%s %s on the %s simulator: %s %s" % (method, path, self.name,
                                                                   response.status_code, response.text[:300]))
        return response.json()

    def mark(self) -> int:
        return self.control("GET", "/_sim/bench/counts?since=0")["next"]

    def counts(self, since: int) -> dict:
        return self.control("GET", "/_sim/bench/counts?since=%d" % since)


class SimulatorSet:
    """The Waldur, DigitalOcean and Azure simulators, each in its own process."""

    def __init__(self, latency: dict | None = None, lro_seconds: float = AZURE_LRO_SECONDS,
                 workdir: Path | None = None, waldur_listings: str | None = None):
        self.waldur_listings = waldur_listings
        self.latency = dict(LATENCY if latency is None else latency)
        self.lro_seconds = lro_seconds
        self._own_workdir = workdir is None  # a temporary one, removed by stop()
        if workdir is None:
            (REPO / ".cache").mkdir(exist_ok=True)
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="bench-run-", dir=REPO / ".cache"))
        self.sims: dict[str, SimulatorProcess] = {}

    def __enter__(self) -> "SimulatorSet":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        options = {
            "waldur": [] if self.waldur_listings is None else ["listings=%s" % self.waldur_listings],
            # Enough droplets for the largest N; the other options keep their defaults.
            "digitalocean": ["droplet_limit=100000"],
            # Real ARM: every create/delete is a polled long-running operation.
            "azure": ["lro=%s" % ("realistic" if self.lro_seconds else "instant"),
                      "lro_seconds=%s" % self.lro_seconds, "retry_after=1"],
        }
        for name in ("waldur", "digitalocean", "azure"):
            cmd = [sys.executable, "-m", "bench.simulators", name, "--latency", str(self.latency[name]),
                   "--tls-dir", str(self.workdir / "ca")]
            for option in options[name]:
                cmd += ["--option", option]
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
            line = proc.stdout.readline()
            if not line:
                self.stop()
                proc.kill()
                raise BenchError("the %s simulator did not start: %s" % (name, " ".join(cmd)))
            info = json.loads(line)
            self.sims[name] = SimulatorProcess(name, proc, info["url"], info.get("ca_bundle"))

    def stop(self) -> None:
        for sim in self.sims.values():
            if sim.proc.poll() is None:
                sim.proc.terminate()
                try:
                    sim.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    sim.proc.kill()
        self.sims.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __getitem__(self, name: str) -> SimulatorProcess:
        return self.sims[name]

    @property
    def ca_bundle(self) -> str:
        return self.sims["azure"].ca_bundle

    def reset(self) -> None:
        self["waldur"].control("POST", "/_sim/reset", {"preset": "empty"})
        self["digitalocean"].control("POST", "/_sim/reset", {"preset": "default"})
        self["azure"].control("POST", "/_sim/reset", {"preset": "default"})

    def apply_variant(self, variant: str) -> None:
        """Switch the (freshly reset) simulators to a scenario variant; reset undoes it."""
        if variant == "do-rate-limit":
            self["digitalocean"].control("POST", "/_sim/options", {"enforce_limits": True})
        elif variant:
            raise BenchError("unknown scenario variant %r; known: %s" % (variant, ", ".join(VARIANTS)))

    def marks(self) -> dict:
        return {name: sim.mark() for name, sim in self.sims.items()}

    def calls_since(self, marks: dict) -> dict:
        return {name: sim.counts(marks[name]) for name, sim in self.sims.items()}

    # ---- workloads ----------------------------------------------------------------
    def seed(self, pass_name: str, backend: str, n: int) -> dict:
        """Put one offering's workload of size ``n`` into the (freshly reset) simulators."""
        waldur = self["waldur"]
        offering = OFFERING_UUID[backend]
        if pass_name == "order":
            attributes = {}
            if backend == "azure":
                attributes = {"ssh_key": waldur_presets.SSH_KEYS[0]["uuid"]}
            if n:
                waldur.control("POST", "/_sim/bench/orders", {
                    "offering_uuid": offering, "n": n, "name_prefix": "bench", "attributes": attributes,
                    "limits": DO_LIMITS if backend == "digitalocean" else AZURE_LIMITS})
            return {"orders": n}
        # The audit's and membership pass's machines carry the owner marks the order pass gives
        # them (a healthy world: nothing to find, only power states to keep).
        owners = [uuid.uuid4().hex for _index in range(n)] if pass_name in ("audit", "membership") else []
        if backend == "digitalocean":
            ids = self["digitalocean"].control("POST", "/_sim/bench/droplets", {
                "n": n, "name_prefix": "bench", "resource_uuids": owners})["droplets"] if n else []
            limits = DO_LIMITS
        else:
            names = ["bench-%d" % index for index in range(n)]
            ids = self["azure"].control("POST", "/_sim/bench/vms", {
                "names": names, "resource_uuids": owners, "offering_uuid": offering})["vms"] if n else []
            limits = AZURE_LIMITS
        if ids:
            waldur.control("POST", "/_sim/bench/resources", {
                "offering_uuid": offering, "limits": limits,
                "items": [dict({"name": "bench-%d" % index, "backend_id": str(backend_id)},
                               **({"uuid": owners[index]} if owners else {}))
                          for index, backend_id in enumerate(ids)]})
        return {"resources": len(ids)}

    def pause_some(self, backend: str, count: int) -> int:
        """Pause ``count`` of the offering's resources in Waldur (the membership pass's cycle with
        some changes): their machines must be shut down, the others stay as they are."""
        return len(self["waldur"].control("POST", "/_sim/bench/pause", {
            "offering_uuid": OFFERING_UUID[backend], "count": count})["paused"])

    def machine_states(self, backend: str) -> dict:
        """Machines by power state (DigitalOcean status, Azure power state)."""
        if backend == "digitalocean":
            return self["digitalocean"].control("GET", "/_sim/bench/droplet_states")
        return self["azure"].control("GET", "/_sim/bench/vm_power_states")

    def order_states(self) -> dict:
        return self["waldur"].control("GET", "/_sim/bench/orders_by_state")

    def usage_count(self) -> int:
        return self["waldur"].control("GET", "/_sim/bench/usage_count")["usages"]

    # ---- configuration --------------------------------------------------------------
    def site_config(self, backend: str) -> dict:
        """The site agent configuration (the upstream file format both agents read) with
        one offering on ``backend``: the simulators' offering, as the tests and demo use it.
        Ours reads DigitalOcean's endpoint from ``api_url``; upstream's python-digitalocean only
        reads DIGITALOCEAN_END_POINT, which the upstream runner sets."""
        urls = {"do_url": self["digitalocean"].url} if backend == "digitalocean" else {"azure_url": self["azure"].url}
        config = simulator_site_config(self["waldur"].url, **urls)
        config["offerings"][0]["name"] = "DigitalOcean bench" if backend == "digitalocean" else "Azure bench"
        return config

    def write_config(self, backend: str) -> Path:
        path = self.workdir / ("site-agent-%s.yaml" % backend)
        path.write_text(yaml.safe_dump(self.site_config(backend), sort_keys=False))
        return path


# --------------------------------------------------------------------------- results

@dataclass
class RunResult:
    agent: str  # ours | upstream | ours-serial
    pass_name: str  # order | report
    backend: str  # digitalocean | azure
    n: int
    cycle: str  # only | first | steady
    rc: int
    wall_s: float
    peak_tree_pss_mib: float
    peak_tree_rss_mib: float
    max_process_rss_mib: float
    cpu_s: float  # user + system CPU seconds of the whole process tree
    runqueue_wait_s: float  # seconds the tree's main threads waited for a CPU (contention)
    cpu_stall_share: float | None  # system-wide share of the run with a task waiting for a CPU
    calls: dict  # simulator -> {total, writes, by_operation, ...}
    outcome: dict  # orders by state / usages stored after the run
    tasks: int | None = None
    module_runs: int | None = None
    module_s: float | None = None
    ansible_overhead_s: float | None = None  # wall time outside module processes
    ansible_cpu_s: float | None = None  # CPU seconds outside module processes
    task_times: list = field(default_factory=list)
    modules: list = field(default_factory=list)
    startup_s: float | None = None  # process start to first API call
    variant: str = ""  # "" or a VARIANTS key
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _api_calls(calls: dict) -> dict:
    return {name: {key: value for key, value in data.items() if key != "next"} for name, data in calls.items()}


def _first_call_delay(calls: dict, started_wall: float) -> float | None:
    firsts = [data["first"] for data in calls.values() if data.get("first")]
    return round(min(firsts) - started_wall, 3) if firsts else None


# --------------------------------------------------------------------------- our passes

def _log_name(agent, pass_name, backend, n, cycle, variant) -> str:
    return "%s-%s-%s-%d-%s%s.log" % (agent, pass_name, backend, n, cycle, "-" + variant if variant else "")


def run_ours(sims: SimulatorSet, pass_name: str, backend: str, n: int, cycle: str = "only",
             extra_vars: dict | None = None, agent: str = "ours", logs: Path | None = None,
             variant: str = "") -> RunResult:
    """One ``ansible-playbook playbooks/<mode>.yml`` run over the already seeded simulators."""
    config = sims.write_config(backend)
    profile = sims.workdir / "profile.json"
    if profile.exists():
        profile.unlink()
    env = ansible_env({
        "WALDUR_SITE_AGENT_CONFIG": str(config),
        "REQUESTS_CA_BUNDLE": sims.ca_bundle,
        "ANSIBLE_CALLBACK_PLUGINS": str(BENCH_DIR / "callback_plugins"),
        "ANSIBLE_CALLBACKS_ENABLED": "bench_profile",
        "BENCH_PROFILE_PATH": str(profile),
    })
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), str(REPO / "playbooks" / ("%s.yml" % MODES[pass_name]))]
    if pass_name == "audit":
        extra_vars = dict(extra_vars or {}, audit_report_dir=str(sims.workdir / "audit"))
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    marks = sims.marks()
    started_wall = time.time()
    log_path = (logs or sims.workdir) / _log_name(agent, pass_name, backend, n, cycle, variant)
    measured = run_measured(cmd, env=env, cwd=REPO, stdout_path=log_path, timeout=3600)
    calls = sims.calls_since(marks)
    result = _result(agent, pass_name, backend, n, cycle, measured, calls, sims)
    result.variant = variant
    result.startup_s = _first_call_delay(calls, started_wall)
    profile_data = json.loads(profile.read_text()) if profile.exists() else {"tasks": []}
    tasks = profile_data["tasks"]
    result.tasks = len(tasks)
    result.task_times = [{"name": t["name"], "action": t["action"], "seconds": round(t["end"] - t["start"], 3),
                          "results": t["results"]} for t in tasks]
    if measured.module_runs:  # modules run the usual way (waldur_site_agent_in_process: false)
        result.modules = [{"module": m.module, "seconds": round(m.seconds, 3), "cpu_s": round(m.cpu_s, 2),
                           "peak_rss_mib": round(m.peak_rss_kib / 1024, 1)} for m in measured.module_runs]
        result.ansible_cpu_s = round(measured.cpu_s - sum(m.cpu_s for m in measured.module_runs), 2)
    else:
        result.modules = modules_in_workers(tasks)
    result.module_runs = len(result.modules)
    result.module_s = round(sum(m["seconds"] for m in result.modules), 3)
    result.ansible_overhead_s = round(measured.wall_s - result.module_s, 3)
    if measured.rc != 0:
        result.note = "ansible-playbook rc=%d, log %s" % (measured.rc, log_path)
    return result


def modules_in_workers(tasks: list) -> list:
    """The module runs of a pass whose modules run in the task's worker (the default,
    ``plugins/plugin_utils/controller_module.py``): no process of their own to watch, so each is the
    time of its task from the per-task profile (the worker's fork, ~0.05 s, included). The
    collection's action-only plugins (pass_lock, site_config) are bookkeeping, not modules."""
    runs = []
    for task in tasks:
        action = task.get("action") or ""
        if not action.startswith(COLLECTION_PREFIX) or action[len(COLLECTION_PREFIX):] in ACTION_ONLY:
            continue
        if not set(task.get("statuses") or {"skipped": 1}) - {"skipped"}:
            continue  # its condition was false: no module ran
        runs.append({"module": action[len(COLLECTION_PREFIX):], "seconds": round(task["end"] - task["start"], 3),
                     "cpu_s": None, "peak_rss_mib": None})
    return runs


def _result(agent, pass_name, backend, n, cycle, measured: Measurement, calls: dict, sims: SimulatorSet) -> RunResult:
    if pass_name == "order":
        outcome = {"orders": sims.order_states()}
    elif pass_name == "membership":
        outcome = {"machines": sims.machine_states(backend)}
    else:
        outcome = {"usages": sims.usage_count()}
    return RunResult(agent=agent, pass_name=pass_name, backend=backend, n=n, cycle=cycle, rc=measured.rc,
                     wall_s=round(measured.wall_s, 3), peak_tree_pss_mib=round(measured.peak_tree_pss_mib, 1),
                     peak_tree_rss_mib=round(measured.peak_tree_rss_mib, 1),
                     max_process_rss_mib=round(measured.max_process_rss_mib, 1),
                     cpu_s=round(measured.cpu_s, 2), runqueue_wait_s=round(measured.runqueue_wait_s, 2),
                     cpu_stall_share=(None if measured.cpu_stall_share is None
                                      else round(measured.cpu_stall_share, 2)),
                     calls=_api_calls(calls),
                     outcome=outcome)


# --------------------------------------------------------------------------- upstream

def upstream_python() -> Path:
    return UPSTREAM_VENV / "bin" / "python"


def ensure_upstream(log=print) -> dict:
    """Create ``.cache/bench-upstream-venv`` with the upstream agent and its two plugins (the
    newest releases, pre-releases included: the Azure plugin only has those)."""
    python = upstream_python()
    if not python.exists():
        log("creating %s" % UPSTREAM_VENV)
        subprocess.run([sys.executable, "-m", "venv", str(UPSTREAM_VENV)], check=True)
    probe = subprocess.run([str(python), "-c", "import waldur_site_agent, waldur_site_agent_digitalocean, "
                            "waldur_site_agent_azure"], capture_output=True, check=False)
    if probe.returncode != 0:
        log("installing %s into %s" % (", ".join(UPSTREAM_PACKAGES), UPSTREAM_VENV))
        install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--pre",
                                  *UPSTREAM_PACKAGES], capture_output=True, text=True, check=False)
        if install.returncode != 0:
            # pip's own lines, without the notes about unreachable extra indexes
            output = [line for line in (install.stdout + install.stderr).splitlines() if "is ignored" not in line]
            raise BenchError("installing the upstream agent failed:\n" + "\n".join(output[-20:]))
    versions = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in %r}))"
         % (UPSTREAM_PACKAGES + ("waldur-api-client", "python-digitalocean"),)],
        capture_output=True, text=True, check=True)
    return json.loads(versions.stdout)


_IMPORT_PROBE = """
import importlib.metadata as metadata, json, resource, sys, time
if sys.argv[1] == "without-azure":
    everything = metadata.entry_points
    metadata.entry_points = lambda **kw: metadata.EntryPoints(
        [ep for ep in everything(**kw) if "azure" not in ep.value])
started = time.process_time()
import waldur_site_agent.main  # noqa: F401 - loads every backend plugin through its entry point
print(json.dumps({"rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                  "cpu_s": time.process_time() - started}))
"""


def upstream_import_footprint() -> dict:
    """Peak RSS and CPU time of importing the upstream agent, with all its installed plugins
    and with the Azure plugin's entry point hidden (the agent imports every backend plugin
    at start-up, whatever the configuration uses)."""
    footprint = {}
    for variant in ("all-plugins", "without-azure"):
        probe = subprocess.run([str(upstream_python()), "-P", "-c", _IMPORT_PROBE, variant], capture_output=True,
                               text=True, check=True, cwd=tempfile.gettempdir())
        footprint[variant] = {key: round(value, 2) for key, value in json.loads(probe.stdout).items()}
    return footprint


def run_upstream(sims: SimulatorSet, pass_name: str, backend: str, n: int, cycle: str = "only",
                 logs: Path | None = None, variant: str = "") -> RunResult:
    """One cycle of ``waldur_site_agent -m <mode>`` (see ``bench/upstream_once.py``)."""
    config = sims.write_config(backend)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update({
        "DIGITALOCEAN_END_POINT": sims["digitalocean"].url + "/v2/",
        "WALDUR_SITE_AGENT_HEARTBEAT_PATH": str(sims.workdir / "upstream-heartbeat"),
        "REQUESTS_CA_BUNDLE": sims.ca_bundle,
    })
    cmd = [str(upstream_python()), "-P", str(BENCH_DIR / "upstream_once.py"), "-m", MODES[pass_name],
           "-c", str(config)]
    marks = sims.marks()
    started_wall = time.time()
    log_path = (logs or sims.workdir) / _log_name("upstream", pass_name, backend, n, cycle, variant)
    measured = run_measured(cmd, env=env, cwd=sims.workdir, stdout_path=log_path, timeout=3600)
    calls = sims.calls_since(marks)
    result = _result("upstream", pass_name, backend, n, cycle, measured, calls, sims)
    result.variant = variant
    result.startup_s = _first_call_delay(calls, started_wall)
    if measured.rc != 0:
        result.note = "upstream rc=%d, log %s" % (measured.rc, log_path)
    return result
