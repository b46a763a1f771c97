"""``python -m tests.faults inventory``: run every world clean against fresh simulators and write
the reads each pass makes to tests/faults/reads.json (the fault matrix's rows).

``python -m tests.faults render``: docs/faults.md from the results of the last whole run
(``make faults``, .cache/fault-matrix-results.json)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from tests.helpers import import_collection_from_checkout


def inventory() -> dict:
    from tests.faults import matrix
    from tests.faults.worlds import WORLDS, Sims
    from tests.simulators import simulator_class
    from tests.simulators.common import SimulatorServer
    from tests.simulators.tls import make_tls

    with tempfile.TemporaryDirectory() as scratch:
        context, ca_path = make_tls(os.path.join(scratch, "ca"))
        servers = [SimulatorServer(simulator_class("waldur")()).start(),
                   SimulatorServer(simulator_class("digitalocean")()).start(),
                   SimulatorServer(simulator_class("azure")(), ssl_context=context).start()]
        servers[2].ca_bundle = ca_path
        sims = Sims(*servers)
        found = {}
        try:
            for name in sorted(WORLDS):
                for server in servers:
                    server.app.reset("default")
                world, run, _before = matrix.run_world(Path(tempfile.mkdtemp(dir=scratch)), sims, name)
                print("%s: exit %d" % (name, run.rc))
                found[name] = dict(sorted(matrix.reads_of(sims).items()))
        finally:
            for server in servers:
                server.stop()
    return found


def render() -> str:
    """docs/faults.md: the matrix's size, the last whole run's result, its failures."""
    import datetime

    from tests.faults import matrix

    inventory = matrix.load_inventory()
    every = matrix.cases(inventory)
    lines_read = [json.loads(line) for line in matrix.results_path().read_text().splitlines() if line.strip()] \
        if matrix.results_path().exists() else []
    # the whole run, then cases run again after a fix: the last result of each case stands
    whole_commit = lines_read[0].get("commit", "?") if lines_read else None
    latest = {}
    for row in lines_read:
        latest[row["case"]] = row
    rows = list(latest.values())
    failed = [row for row in rows if row["problems"]]
    whole = [row for row in lines_read if row.get("commit", "?") == whole_commit]
    fixed = sorted(row["case"] for row in rows if not row["problems"] and any(
        earlier["case"] == row["case"] and earlier["problems"] for earlier in whole))
    rerun = [row for row in lines_read if row.get("commit", "?") != whole_commit]
    reads = sum(len(reads) for reads in inventory.values())
    lines = [
        "# The fault matrix",
        "",
        "<!-- rendered by `python -m tests.faults render` after `make faults`; do not edit by hand -->",
        "",
        "Every read the passes make (`tests/faults/reads.json`, enumerated from the simulators' call logs",
        "by `python -m tests.faults inventory`), answered wrong on purpose at its first call and, when a",
        "clean run makes it more than once, at its last: %s." % ", ".join("`%s`" % kind for kind in matrix.KINDS),
        "After each run the invariants of `tests/faults/matrix.py` are checked: at most one machine per",
        "resource; no machine touched that is not proven the resource's (a foreign machine beside them",
        "keeps its size and power; no cloud write where the pass only reads); no order done without its",
        "machine and none erred while its machine runs or on an answer that proves nothing; no usage",
        "lowered; a non-zero exit status whenever the run did not end as a clean run does; no secret in",
        "the output. `make test` runs a sample of the cases (its seed in the session header,",
        "`FAULT_MATRIX_SEED` to run it again); `make faults` runs them all and renders this page.",
        "",
        "| | |",
        "|---|---|",
        "| worlds (a pass and a backend) | %d: %s |" % (len(inventory), ", ".join(sorted(inventory))),
        "| reads | %d |" % reads,
        "| fault kinds | %d |" % len(matrix.KINDS),
        "| cases | %d |" % len(every),
    ]
    if rows:
        whole_failed = [row for row in whole if row["problems"]]
        lines += [
            "| last %s | %s, commit %s: %d of the %d cases run, %d passed, %d failed |" % (
                "whole run" if len(whole) >= len(every) - len(rerun) else "run (cut short, the rest not run)",
                datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), whole_commit, len(whole),
                len(every), len(whole) - len(whole_failed), len(whole_failed)),
        ]
        if rerun:
            commits = ", ".join(sorted(set(row.get("commit", "?") for row in rerun)))
            lines.append("| cases run after it (again after fixes, or new) | %d, at commit %s: %d of the %d failed "
                         "cases now pass; %d of the %d cases run fail |" % (
                             len(rerun), commits, len(fixed), len(whole_failed), len(failed), len(rows)))
    if fixed:
        lines += ["", "## Cases the whole run found, fixed since (run again, they pass)", ""]
        lines += ["* `%s`" % case for case in fixed]
    if failed:
        lines += ["", "## Cases that fail", ""]
        for row in failed:
            lines.append("* `%s` (exit %s): %s" % (row["case"], row["rc"], "; ".join(
                problem.splitlines()[0] for problem in row["problems"])))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import_collection_from_checkout()
    if sys.argv[1:] == ["render"]:
        target = Path(__file__).resolve().parents[2] / "docs" / "faults.md"
        target.write_text(render())
        print("wrote %s" % target)
        sys.exit(0)
    if sys.argv[1:] != ["inventory"]:
        sys.exit("usage: python -m tests.faults inventory | render")
    from tests.faults.matrix import INVENTORY
    data = inventory()
    INVENTORY.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print("%d reads of %d worlds written to %s" % (sum(len(v) for v in data.values()), len(data), INVENTORY))
