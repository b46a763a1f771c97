"""docs/faults.md states the fault matrix as it is: its figures are the inventory's and the
cases', so a read added to the passes (and to the inventory) without rendering the page fails."""

import re
from pathlib import Path

from tests.faults import matrix

PAGE = Path(__file__).resolve().parents[2] / "docs" / "faults.md"


def test_the_page_states_the_size_of_the_matrix():
    text = PAGE.read_text(encoding="utf-8")
    inventory = matrix.load_inventory()
    figures = dict(re.findall(r"^\| (reads|fault kinds|cases) \| (\d+) \|$", text, re.MULTILINE))
    assert figures == {"reads": str(sum(len(reads) for reads in inventory.values())),
                       "fault kinds": str(len(matrix.KINDS)), "cases": str(len(matrix.cases(inventory)))}, \
        "docs/faults.md is out of date: run .venv/bin/python -m tests.faults render (after make faults)"
    assert "| worlds (a pass and a backend) | %d: " % len(inventory) in text


def test_a_sample_draws_every_world_and_is_the_same_for_one_seed():
    every = matrix.cases(matrix.load_inventory())
    first, second = matrix.sample(every, 16, 20261204), matrix.sample(every, 16, 20261204)
    assert first == second and len(first) == 16
    assert set(case.world for case in first) == set(case.world for case in every)
    assert all(case.position == "first" or case.nth > 1 for case in every)
