"""The shared concurrency (run_batch) and retry policy every client uses."""

import threading
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError, run_batch
from ansible_collections.waldur.site_agent.plugins.module_utils.core.retry import RetryPolicy, parse_retry_after


def test_results_come_back_in_input_order_and_a_failure_stays_with_its_item():
    def worker(item):
        time.sleep(0.01 * (5 - item))  # later items finish first
        if item == 2:
            raise ItemError("item two is broken")
        if item == 3:
            raise KeyError("boom")
        return {"item": item, "failed": False}

    results = run_batch(range(5), worker, max_workers=5)
    assert [r.get("item") for r in results] == [0, 1, None, None, 4]
    assert results[2]["failed"] and results[2]["msg"] == "item two is broken"
    assert results[3]["failed"] and results[3]["msg"].startswith("KeyError") and "Traceback" in results[3]["exception"]


def test_concurrency_is_bounded():
    running, peak, lock = [0], [0], threading.Lock()

    def worker(item):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return {"item": item}

    started = time.monotonic()
    results = run_batch(range(12), worker, max_workers=3)
    assert len(results) == 12 and peak[0] == 3
    assert time.monotonic() - started < 12 * 0.02  # concurrent, not one at a time


def test_the_deadline_returns_at_once_and_marks_unfinished_items_for_retry():
    release = threading.Event()

    def worker(item):
        if item == "slow":
            release.wait(10)
        return {"item": item, "failed": False}

    started = time.monotonic()
    results = run_batch(["fast", "slow"], worker, max_workers=2, deadline_seconds=0.3)
    elapsed = time.monotonic() - started
    release.set()
    assert elapsed < 2
    assert results[0] == {"item": "fast", "failed": False}
    assert results[1]["failed"] and results[1]["retry"] and "deadline" in results[1]["msg"]


def test_custom_error_shape_and_empty_batch():
    assert run_batch([], lambda item: {}) == []
    results = run_batch([1], lambda item: 1 / 0, on_error=lambda item, exc: {"failed": True, "why": type(exc).__name__})
    assert results == [{"failed": True, "why": "ZeroDivisionError"}]


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_retry_policy_honours_retry_after_and_bounds():
    clock = FakeClock()
    policy = RetryPolicy(max_attempts=3, base_delay=1, max_delay=4, max_retry_seconds=10, clock=clock)
    deadline = policy.start()
    assert policy.delay(1, deadline, retry_after=7) == 7
    assert 0 <= policy.delay(2, deadline) <= 2
    assert policy.delay(3, deadline) is None          # attempts used up
    assert policy.delay(1, deadline, retry_after=11) is None  # would pass the bound
    clock.now = 9.5
    assert policy.delay(1, deadline, retry_after=1) is None


def test_parse_retry_after():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0 ") == 0.0
    assert parse_retry_after("-2") == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert parse_retry_after(None) is None
