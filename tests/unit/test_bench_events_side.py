"""bench/events_side.py judges issue 26's event targets on ours and renders both agents side by
side (pure functions; the scenarios themselves need a broker and run in ``make bench``)."""

from __future__ import annotations

from bench.events_side import SCENARIOS, targets
from bench.render_events import event_side_lines


def run(agent, scenario, median, last, done=20, orders=20, running=20):
    return {"agent": agent, "scenario": scenario, "backend": "digitalocean", "orders": orders, "done": done,
            "median_s": median, "p95_s": last, "max_s": last, "last_done_s": last, "done_running": running,
            "waldur_calls": 100, "cloud_calls": 40, "load_before": "1.0 1.0 1.0"}


def test_targets_are_boot_plus_four_seconds_for_a_burst_and_two_for_isolated_orders():
    assert SCENARIOS["burst-boot10"][2] == 10 and SCENARIOS["burst"][0] == 20
    rows = {row["target"]: row for row in targets([
        run("ours", "isolated", 2.5, 3.0, 10, 10), run("upstream", "isolated", 0.1, 0.1, 10, 10, 10),
        run("ours", "burst-boot10", 9.0, 13.5), run("upstream", "burst-boot10", 0.5, 1.1, running=0)])}
    assert rows["isolated median create -> done"]["met"] is False
    assert rows["burst-boot10: last of 20 done"] == {"target": "burst-boot10: last of 20 done", "limit_s": 14.0,
                                                     "ours_s": 13.5, "upstream_s": 1.1, "met": True}


def test_a_burst_with_an_order_not_done_misses_its_target():
    (row,) = targets([run("ours", "burst", 1.0, 3.0, done=19)])
    assert row["met"] is False


def test_both_agents_are_rendered_with_how_many_done_orders_had_a_running_droplet():
    lines = event_side_lines({"runs": [run("ours", "burst", 2.0, 3.5), run("upstream", "burst", 0.5, 1.0, running=3),
                                       {"agent": "upstream", "scenario": "burst-boot30", "error": "RuntimeError: x"}],
                              "targets": targets([run("ours", "burst", 2.0, 3.5)]),
                              "load_start": "5.0", "load_end": "6.0"})
    text = "\n".join(lines)
    assert "| burst | upstream | 20 / 20 | 0.50 / 1.00 / 1.00 | 1.00 | 3 of 20 |" in text
    assert "| burst-boot30 | upstream | failed: RuntimeError: x |" in text
    assert "| burst: last of 20 done | 4.00 | 3.50 | - | yes |" in text
    assert "Load average 5.0 at the start, 6.0 at the end" in text
    assert event_side_lines(None) == []


def test_the_phase_note_gives_the_start_gap_of_the_same_run():
    phased = dict(run("ours", "isolated", 1.5, 1.7), phases={"claim": 0.1, "run": 1.3, "runs": 10})
    text = "\n".join(event_side_lines({"runs": [phased]}, start_gap_s=0.61))
    assert "`ansible-playbook` (0.61 s from one run's end to the next one's start" in text
    assert "0.61 s" not in "\n".join(event_side_lines({"runs": [phased]}))
