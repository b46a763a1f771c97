"""The event latency bench's own smoke test: arrivals, percentiles, done times, the CLI.

The bench itself (broker, simulators, ansible-rulebook) runs in ``make bench``; here only
its arithmetic and its output, so a broken bench is found without a broker.
"""

from __future__ import annotations

import json
import threading

from bench import events


def test_arrivals_are_poisson_with_the_seed_fixing_them():
    offsets = events.arrival_offsets(50, 60.0, seed=14)
    assert offsets == events.arrival_offsets(50, 60.0, seed=14)
    assert offsets != events.arrival_offsets(50, 60.0, seed=15)
    assert len(offsets) == 50 and offsets[0] == 0.0
    assert offsets == sorted(offsets)
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    # exponential gaps of mean 1.2 s: uneven (bursts and lulls), the whole spread near 60 s
    assert min(gaps) < 0.3 < 3.0 < max(gaps)
    assert 30.0 < offsets[-1] < 90.0


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert events.percentile(values, 0.95) == 19.0
    assert events.percentile(values, 0.5) == 10.0
    assert events.percentile([3.0], 0.95) == 3.0
    assert events.percentile([], 0.95) is None


class FakeWaldur:
    def __init__(self, calls):
        self.calls = calls
        self.lock = threading.Lock()


def test_done_times_come_from_the_set_state_done_calls():
    first, second = "a" * 32, "b" * 32
    dashed = "%s-%s-%s-%s-%s" % (first[:8], first[8:12], first[12:16], first[16:20], first[20:])
    app = FakeWaldur([
        {"operation": "orders.set_state_executing", "path": "/api/marketplace-orders/%s/set_state_executing/"
         % first, "status": 200, "time": 10.0},
        {"operation": "orders.set_state_done", "path": "/api/marketplace-orders/%s/set_state_done/" % dashed,
         "status": 200, "time": 12.5},
        {"operation": "orders.set_state_done", "path": "/api/marketplace-orders/%s/set_state_done/" % second,
         "status": 409, "time": 13.0},  # refused: not done by this call
    ])
    assert events.done_times(app, {first, second}) == {first: 12.5}


def test_the_cli_prints_the_result_and_writes_it_as_json(tmp_path, monkeypatch, capsys):
    result = {"orders": 2, "done": 2, "median_s": 1.5, "p95_s": 2.0, "max_s": 2.0, "latencies_s": [1.0, 2.0],
              "broker": "rabbitmq 3.10.8", "note": "two orders"}
    seen = {}

    def fake_bench(**kwargs):
        seen.update(kwargs)
        return dict(result)

    monkeypatch.setattr(events, "run_event_bench", fake_bench)
    target = tmp_path / "events.json"
    assert events.main(["--orders", "2", "--seed", "3", "--json", str(target)]) == 0
    assert seen["orders"] == 2 and seen["seed"] == 3
    assert json.loads(target.read_text()) == result
    printed = json.loads(capsys.readouterr().out)
    assert printed["median_s"] == 1.5 and "latencies_s" not in printed


def test_the_cli_fails_when_an_order_did_not_finish(monkeypatch, capsys):
    monkeypatch.setattr(events, "run_event_bench", lambda **kwargs: {"orders": 2, "done": 1})
    assert events.main([]) == 1


def test_a_run_is_summarised_per_order_and_against_the_targets():
    created = {"a": 100.0, "b": 101.0, "c": 102.0}
    finished = {"a": 101.5, "b": 103.0}  # c never finished
    summary = events.summarise(3, created, finished, {"a": "done", "b": "done", "c": "executing"})
    assert summary["latencies_s"] == [1.5, 2.0]
    assert (summary["done"], summary["erred"], summary["median_s"], summary["p95_s"], summary["max_s"]) == \
        (2, 0, 1.75, 2.0, 2.0)
    assert summary["unfinished"] == 1
    assert summary["met"] is False  # one order short
    start, done = {"a": 0.0, "b": 0.0, "c": 0.0}, {"a": "done", "b": "done", "c": "done"}
    assert events.summarise(3, start, {"a": 1.0, "b": 2.0, "c": 3.9}, done)["met"]
    assert not events.summarise(3, start, {"a": 1.0, "b": 2.5, "c": 2.5}, done)["met"]  # the median
    assert not events.summarise(3, start, {"a": 1.0, "b": 1.0, "c": 4.5}, done)["met"]  # the p95


def test_the_rulebook_runs_are_counted_from_its_json_lines():
    def at(second):
        return "2026-12-01T14:41:%02d.000000+00:00" % second

    lines = [{"event": "playbook started", "timestamp": at(0)},
             {"event": "pass summary", "pass": "order_process"},
             {"event": "playbook finished", "seconds": 7.5, "timestamp": at(8)},
             {"event": "playbook started", "timestamp": at(11)},
             {"event": "pass summary", "pass": "order_process"},
             {"event": "playbook finished", "seconds": 12.0, "timestamp": at(23)},
             {"event": "playbook started", "timestamp": at(25)},
             {"event": "pass summary", "pass": "membership_sync"},
             {"event": "playbook finished", "seconds": 9.0, "timestamp": at(34)},
             {"event": "task ok", "seconds": 99}]
    assert events.pass_runs(lines) == {"order_process": 2, "membership_sync": 1, "playbooks": 3,
                                       "playbook_median_s": 9.0, "playbook_max_s": 12.0, "start_gap_median_s": 2.5}
