"""The shared concurrency (run_batch) and retry policy every client uses."""

import threading
import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import (
    BatchRunner,
    ItemError,
    api_call_counts,
    batch_argument_spec,
    batch_option_problem,
    count_results,
    run_batch,
)
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


# ---- the batch module engine ---------------------------------------------------------------

class Exited(Exception):
    pass


class FakeModule:
    """The AnsibleModule surface BatchRunner uses; exit and fail raise with what they were given."""

    def __init__(self, **params):
        self.params = dict({"max_workers": 2, "deadline": 30.0, "fail_on_item_error": False}, **params)

    def exit_json(self, **result):
        raise Exited(dict(result, failed=False))

    def fail_json(self, **result):
        raise Exited(dict(result, failed=True))


def finish(runner, *args, **kwargs):
    try:
        runner.finish(*args, **kwargs)
    except Exited as exc:
        return exc.args[0]
    raise AssertionError("finish() did not exit")


def test_batch_argument_spec_is_one_definition():
    spec = batch_argument_spec()
    assert spec == {"max_workers": {"type": "int", "default": 8}, "deadline": {"type": "float", "default": 900.0},
                    "fail_on_item_error": {"type": "bool", "default": False}}


def test_batch_options_out_of_range_fail_naming_the_option():
    assert batch_option_problem({"max_workers": 8, "deadline": 1.5}) is None
    assert batch_option_problem({"max_workers": 0, "deadline": 1.5}) == "max_workers must be a positive number, got 0"
    try:
        BatchRunner(FakeModule(deadline=-1.0), None, api_calls=lambda: api_call_counts(1))
    except Exited as exc:
        assert exc.args[0] == {"failed": True, "msg": "deadline must be a positive number, got -1.0",
                               "api_calls": {"reads": 1, "writes": 0, "retries": 0}}
    else:
        raise AssertionError("a negative deadline was accepted")


def test_results_are_shaped_in_input_order_with_the_item_key_echoed():
    def worker(item):
        if item["key"] == "b":
            raise ItemError("b is broken")
        return {"changed": item["key"] == "a", "msg": "did %s" % item["key"]}

    runner = BatchRunner(FakeModule(), worker, echo=("key",))
    results = runner.run([{"key": "a"}, {"key": "b"}, {"key": "c"}])
    assert [r["key"] for r in results] == ["a", "b", "c"]
    assert results[0] == {"key": "a", "changed": True, "failed": False, "retry": False, "msg": "did a"}
    assert (results[1]["failed"], results[1]["retry"], results[1]["msg"]) == (True, False, "b is broken")
    out = finish(runner, results, totals=count_results(results, failed=lambda r: r["failed"]))
    assert out["changed"] is True and out["failed"] is False and out["totals"] == {"failed": 1}


def test_an_item_cut_off_by_the_deadline_is_a_retry_that_still_names_its_item():
    release = threading.Event()

    def worker(item):
        if item["key"] == "slow":
            release.wait(5)
        return {"msg": "ok"}

    runner = BatchRunner(FakeModule(deadline=0.2), worker, echo=("key",))
    try:
        fast, slow = runner.run([{"key": "fast"}, {"key": "slow"}])
    finally:
        release.set()
    assert fast["failed"] is False
    assert (slow["key"], slow["failed"], slow["retry"]) == ("slow", True, True) and "deadline" in slow["msg"]


def test_fail_on_item_error_fails_with_the_module_message_and_one_api_calls_shape():
    module = FakeModule(fail_on_item_error=True)
    runner = BatchRunner(module, lambda item: {"failed": item == 2, "msg": "item %d" % item}, echo=(),
                         api_calls=lambda: api_call_counts(reads=3, writes=1, retries=2))
    results = runner.run([1, 2])
    out = finish(runner, results, msg="2 items", fail_msg=lambda failures, results: "%d of %d: %s" % (
        len(failures), len(results), failures[0]["msg"]))
    assert out["failed"] is True and out["msg"] == "1 of 2: item 2"
    assert out["api_calls"] == {"reads": 3, "writes": 1, "retries": 2} and len(out["results"]) == 2
    module.params["fail_on_item_error"] = False
    out = finish(runner, results, msg="2 items")
    assert out["failed"] is False and out["msg"] == "2 items" and out["changed"] is False


def test_the_default_failure_message_names_each_failed_item_by_its_key():
    runner = BatchRunner(FakeModule(fail_on_item_error=True), lambda item: {"failed": True, "msg": "no"},
                         echo=("resource_uuid",))
    out = finish(runner, runner.run([{"resource_uuid": "r1"}]))
    assert out["msg"] == "1 of 1 item(s) failed: r1: no"
