"""The fault matrix: the reads of each world's pass (from the simulators' call logs), the cases
(every read x every fault kind x the first call and a later one), one run of a case, and the
invariants checked after it.

A case answers one call of one read wrong and lets every other call through. Whatever it answered,
after the run:

1. at most one machine per resource;
2. no machine touched that is not proven the resource's: the foreign machines the world planted
   keep their size and power, and no cloud write at all where the pass must only read;
3. no order ``done`` without its machine (a Terminate without its machine gone), no Create or
   Restore ``erred`` while its machine runs, and no order erred on an answer that was not the
   service's own not-found when a clean run sets it done;
4. no stored usage lowered;
5. the exit status is non-zero whenever the run did not end as a clean run does (something was left
   unproven, for retry, or failed);
6. no secret in the output.
"""

from __future__ import annotations

import datetime
import json
import os
import random
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from tests.faults.worlds import LABELS, WORLDS, Sims, do_tag, usage_of
from tests.helpers import REPO, run_playbook
from tests.integration.azure_state import RESOURCE_TAG
from tests.simulators.azure import presets as AZ
from tests.simulators.digitalocean import presets as DO
from tests.simulators.waldur import presets as W

INVENTORY = Path(__file__).with_name("reads.json")
# What a faulted read answers: the simulators' spoilt answers (tests/simulators/common.py) and the
# statuses of the service's own errors (its JSON error body).
KINDS = {
    "html": {"kind": "html"},
    "empty_body": {"kind": "empty_body"},
    "empty_items": {"kind": "empty_items"},
    "truncated": {"kind": "truncated"},
    "wrong_shape": {"kind": "wrong_shape"},
    "field_missing": {"kind": "field_missing"},
    "field_type": {"kind": "field_type"},
    "html_404": {"kind": "html_404"},
    "not_found": {"status": 404},
    "503": {"status": 503},
    "429": {"status": 429, "retry_after": 1},
    "reset": {"kind": "reset"},
    "timeout": {"kind": "timeout"},
}
POSITIONS = ("first", "later")
SECRETS = (W.PROVIDER_TOKEN, DO.DO_TOKEN, AZ.CLIENT_SECRET)
# Calls that are not reads of a service: the sign-in (a POST to the token endpoint).
NOT_READS = {"azure": ("token", "openid", "instance_discovery")}


@dataclass(frozen=True)
class Case:
    world: str
    sim: str
    operation: str
    kind: str
    position: str
    nth: int

    @property
    def name(self) -> str:
        return "%s:%s:%s:%s:%s" % (self.world, self.sim, self.operation, self.kind, self.position)


# ---- the inventory of reads ---------------------------------------------------------------------

def reads_of(sims: Sims) -> dict:
    """``{"sim:operation": calls}`` of the GETs the simulators answered in this run."""
    counted = {}
    for name, server in (("waldur", sims.waldur), ("digitalocean", sims.do), ("azure", sims.azure)):
        for call in server.app.calls:
            if call["method"] != "GET" or call["operation"] in NOT_READS.get(name, ()) or \
                    call["operation"] == "unknown":
                continue
            key = "%s:%s" % (name, call["operation"])
            counted[key] = counted.get(key, 0) + 1
    return counted


def load_inventory() -> dict:
    return json.loads(INVENTORY.read_text())


def cases(inventory: dict) -> list[Case]:
    """Every read of every world x every kind x the first call and, when the clean run makes it
    more than once, a later one (the last)."""
    found = []
    for world in sorted(inventory):
        for key, count in sorted(inventory[world].items()):
            sim, operation = key.split(":", 1)
            for kind in KINDS:
                found.append(Case(world, sim, operation, kind, "first", 1))
                if count >= 2:
                    found.append(Case(world, sim, operation, kind, "later", count))
    return found


def sample(all_cases: list[Case], size: int, seed: int) -> list[Case]:
    """``size`` cases drawn with ``seed``, every world at least once when the size allows."""
    rng = random.Random(seed)
    by_world = {}
    for case in all_cases:
        by_world.setdefault(case.world, []).append(case)
    chosen = [rng.choice(by_world[world]) for world in sorted(by_world)][:size]
    rest = [case for case in all_cases if case not in chosen]
    chosen += rng.sample(rest, max(0, min(len(rest), size - len(chosen))))
    return chosen


# ---- one run ------------------------------------------------------------------------------------

def server_of(sims: Sims, name: str):
    return {"waldur": sims.waldur, "digitalocean": sims.do, "azure": sims.azure}[name]


def run_world(tmp_path: Path, sims: Sims, world_name: str, case: Case | None = None):
    """Seed ``world_name``, fault one call when ``case`` says so, run its pass as an operator does.
    Returns ``(world, run, before)``: the world, the playbook's run and the state before it."""
    world = WORLDS[world_name](tmp_path, sims)
    for server in (sims.waldur, sims.do, sims.azure):
        server.app.calls.clear()
    before = state_of(sims, world)
    if case is not None:
        server_of(sims, case.sim).app.add_fault(case.operation, nth=case.nth, **KINDS[case.kind])
    env = {"WALDUR_SITE_AGENT_CONFIG": str(world.config), "REQUESTS_CA_BUNDLE": sims.azure.ca_bundle,
           # a lock directory of the run's own: cases running side by side never share one
           "WALDUR_SITE_AGENT_LOCK_DIR": str(tmp_path / "locks")}
    run = run_playbook(world.playbook, extra_vars=dict(world.extra_vars, order_process_waldur_max_retry_seconds=20)
                       or None, env=env)
    with sims.waldur.app.lock:
        sims.waldur.app.exchanges.clear()  # a faulted answer is not Waldur's contract to check
    return world, run, before


def state_of(sims: Sims, world) -> dict:
    """What the invariants compare: the machines (by id), the orders, the stored usage."""
    machines = {}
    if world.backend == "digitalocean":
        for droplet in sims.do.app.droplets():
            machines[str(droplet["id"])] = {"size": droplet["size_slug"], "power": droplet["status"],
                                            "tags": sorted(droplet["tags"])}
    else:
        for machine_id in sims.azure.app.resources():
            if machine_id.lower().rstrip("/").split("/")[-2:-1] != ["virtualmachines"]:
                continue  # a machine itself, not its network or disks
            body = sims.azure.app.get(machine_id) or {}
            machines[machine_id.lower()] = {
                "size": ((body.get("properties") or {}).get("hardwareProfile") or {}).get("vmSize"),
                "power": sims.azure.app.vm_power_state(machine_id),
                "tags": [((body.get("tags") or {}).get(RESOURCE_TAG) or "")]}
    orders = {}
    for uuid in world.orders:
        record = sims.waldur.app.order(uuid)
        orders[uuid] = record["state"] if record else None
    return {"machines": machines, "orders": orders, "usage": usage_of(sims, list(world.machines))}


def owners(world, state) -> dict:
    """``{resource uuid: [machine ids]}`` of the machines carrying each resource's owner tag."""
    found = {}
    resources = set(world.machines) | set(resource for _type, resource, _state in world.orders.values())
    for machine_id, machine in state["machines"].items():
        for resource_uuid in resources:
            mark = do_tag(resource_uuid) if world.backend == "digitalocean" else resource_uuid
            if mark in machine["tags"]:
                found.setdefault(resource_uuid, []).append(machine_id)
    return found


def outcome(world, state) -> dict:
    """What a run leaves, as a clean run is compared with a faulted one: each order (by its type and
    its resource's name), the stored usage and each machine by its owner's name (the uuids and the
    ids of machines a run creates are new each run)."""
    def label(key):
        return LABELS.get(key, key)

    by_owner = dict((machine_id, resource) for resource, ids in owners(world, state).items() for machine_id in ids)
    machines = {}
    for machine_id, machine in state["machines"].items():
        key = label(by_owner.get(machine_id, machine_id))
        machines.setdefault(key, []).append("%s/%s" % (machine["size"], machine["power"]))
    orders = dict(("%s %s" % (world.orders[uuid][0], label(world.orders[uuid][1])), order_state)
                  for uuid, order_state in state["orders"].items())
    usage = dict(("%s %s" % (label(resource), component), str(amount))
                 for (resource, component), amount in state["usage"].items())
    return {"orders": orders, "usage": usage, "machines": dict((key, sorted(value)) for key, value in machines.items())}


def check(world, sims: Sims, run, before, after, clean: dict, case: Case | None) -> list[str]:
    """The invariants (module docstring) after a run: a list of what broke, empty when all hold."""
    problems = []
    holders = owners(world, after)
    for resource_uuid, machines in sorted(holders.items()):
        if len(machines) > 1:
            problems.append("resource %s has %d machines: %s" % (resource_uuid, len(machines), ", ".join(machines)))
    for machine_id in world.foreign:
        key = str(machine_id).lower() if world.backend == "azure" else str(machine_id)
        was, now = before["machines"].get(key), after["machines"].get(key)
        if was is not None and (now is None or (now["size"], now["power"]) != (was["size"], was["power"])):
            problems.append("foreign machine %s was touched: %s -> %s" % (machine_id, was, now))
    if not world.cloud_writes:
        cloud = sims.do if world.backend == "digitalocean" else sims.azure
        writes = [call["operation"] for call in cloud.app.write_calls() if call["operation"] not in ("token",)]
        if writes:
            problems.append("the pass wrote to the cloud although it only reads: %s" % ", ".join(writes))
    for uuid, (order_type, resource_uuid, clean_state) in world.orders.items():
        state = after["orders"].get(uuid)
        machines = holders.get(resource_uuid, [])
        running = [m for m in machines if after["machines"][m]["power"] in ("active", "running")]
        if state == "done" and order_type == "Terminate" and machines:
            problems.append("Terminate %s is done while machine(s) %s remain" % (uuid, ", ".join(machines)))
        if state == "done" and order_type != "Terminate" and not machines:
            problems.append("%s %s is done without its machine" % (order_type, uuid))
        if state == "erred" and order_type in ("Create", "Restore") and running:
            problems.append("%s %s is erred while its machine %s runs" % (order_type, uuid, running[0]))
        if state == "erred" and clean_state == "done" and (case is None or case.kind != "not_found"):
            problems.append("%s %s erred on an answer that proves nothing (a clean run sets it done)"
                            % (order_type, uuid))
    for key, amount in before["usage"].items():
        now = after["usage"].get(key)
        if now is None or Decimal(now) < Decimal(amount):
            problems.append("usage %s of resource %s went from %s to %s" % (key[1], key[0], amount, now))
    if outcome(world, after) != clean and run.rc == 0:
        problems.append("the run did not end as a clean run does, yet exited 0:\n  clean: %s\n  this:  %s"
                        % (clean, outcome(world, after)))
    if case is None and run.rc != world.clean_rc:
        problems.append("a clean run exited %d, not %d" % (run.rc, world.clean_rc))
    for secret in SECRETS:
        if secret in run.output:
            problems.append("a secret is in the output")
    return problems


def results_path() -> Path:
    """One JSON line per case run with FAULT_MATRIX=all (``make faults`` starts it afresh; a case run
    again later, after a fix, appends its new result)."""
    return REPO / ".cache" / "fault-matrix-results.json"


def commit() -> str:
    """The checkout's commit (short), which a result line names."""
    import subprocess
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False,
                          cwd=str(REPO)).stdout.strip()


def env_sample() -> tuple[int, int]:
    """``(size, seed)`` of the sample ``make test`` runs: FAULT_MATRIX_SAMPLE (16) cases drawn with
    FAULT_MATRIX_SEED, else with the day's date (YYYYMMDD, UTC): the same in every process of a
    session (xdist's workers each collect the cases), another sample each day, printed in the
    session's header."""
    size = int(os.environ.get("FAULT_MATRIX_SAMPLE") or 16)
    seed = os.environ.get("FAULT_MATRIX_SEED") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
    return size, int(seed)


def selection():
    """``(chosen cases, every case, seed)``: all of them with FAULT_MATRIX=all, else a sample."""
    size, seed = env_sample()
    every = cases(load_inventory())
    chosen = every if os.environ.get("FAULT_MATRIX") == "all" else sample(every, size, seed)
    return chosen, every, seed
