"""The fault matrix (tests/faults): every read the passes make, answered wrong on purpose.

``make test`` runs a sample of the cases (FAULT_MATRIX_SAMPLE, 16; the seed is printed in the
session header and can be given back with FAULT_MATRIX_SEED); ``make faults`` (FAULT_MATRIX=all)
runs every case and writes the results that docs/faults.md states. ``test_every_read_is_in_the_matrix``
runs each world clean and fails on a read the inventory (tests/faults/reads.json) does not hold:
a new read must join the matrix (``python -m tests.faults inventory``)."""

from __future__ import annotations

import json
import os

import pytest

from tests.faults import matrix
from tests.faults.worlds import WORLDS, Sims

ALL = os.environ.get("FAULT_MATRIX") == "all"
CHOSEN, CASES, SEED = matrix.selection()
CLEAN = {}  # world -> the outcome of its clean run, once per worker


@pytest.fixture
def sims(waldur_sim, do_sim, azure_sim):
    return Sims(waldur_sim, do_sim, azure_sim)


def clean_outcome(tmp_path_factory, sims, world_name):
    if world_name not in CLEAN:
        tmp_path = tmp_path_factory.mktemp("clean")
        world, run, _before = matrix.run_world(tmp_path, sims, world_name)
        after = matrix.state_of(sims, world)
        CLEAN[world_name] = (matrix.outcome(world, after), run, world, after)
        for server in (sims.waldur, sims.do, sims.azure):
            server.app.reset("default")
    return CLEAN[world_name]


@pytest.mark.parametrize("world_name", sorted(WORLDS))
def test_every_read_is_in_the_matrix(tmp_path, sims, world_name):
    """A clean run of each world holds every invariant, and makes only the reads the inventory
    holds: a read the matrix does not cover fails here."""
    world, run, before = matrix.run_world(tmp_path, sims, world_name)
    after = matrix.state_of(sims, world)
    problems = matrix.check(world, sims, run, before, after, matrix.outcome(world, after), None)
    assert not problems, "\n".join(problems) + "\n" + run.output[-4000:]
    for uuid, (_type, _resource, expected) in world.orders.items():
        assert after["orders"][uuid] == expected, (uuid, after["orders"], run.output[-4000:])
    reads = matrix.reads_of(sims)
    known = matrix.load_inventory().get(world_name, {})
    new = sorted(set(reads) - set(known))
    assert not new, ("the %s pass makes reads the fault matrix does not cover: %s; run `python -m tests.faults "
                     "inventory` and the matrix" % (world_name, ", ".join(new)))


@pytest.mark.parametrize("case", CHOSEN, ids=[case.name for case in CHOSEN])
def test_a_faulted_read_decides_nothing(tmp_path, tmp_path_factory, sims, case):
    clean, _clean_run, _world, _after = clean_outcome(tmp_path_factory, sims, case.world)
    world, run, before = matrix.run_world(tmp_path, sims, case.world, case)
    after = matrix.state_of(sims, world)
    problems = matrix.check(world, sims, run, before, after, clean, case)
    if ALL:
        with open(matrix.results_path(), "a") as results:
            results.write(json.dumps({"case": case.name, "rc": run.rc, "problems": problems,
                                      "commit": matrix.commit()}) + "\n")
    assert not problems, "%s (seed %d):\n%s\n%s" % (case.name, SEED, "\n".join(problems), run.output[-5000:])
