"""The one HTTP retry loop (core/http.py) under both clients, driven directly with fakes."""

import pytest
import requests
import urllib3

from ansible_collections.waldur.site_agent.plugins.module_utils.core.http import (
    DONE,
    EXHAUSTED,
    FATAL,
    NOT_RESENDABLE,
    Retry,
    request_never_sent,
    send_with_retries,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.retry import RetryPolicy
from tests.unit.plugins.module_utils.test_waldur_api import FakeTime


class Failed(Exception):
    pass


def connection_refused():
    reason = urllib3.exceptions.NewConnectionError(None, "Connection refused")
    return requests.exceptions.ConnectionError(urllib3.exceptions.MaxRetryError(None, "/", reason))


def reply_lost():
    return requests.exceptions.ConnectionError("Connection aborted: RemoteDisconnected")


def run(outcomes, idempotent=True, max_attempts=4, max_retry_seconds=60, retry_after=None, **kwargs):
    """Send through the loop; ``outcomes`` are status codes or exceptions, one per attempt."""
    clock = FakeTime()
    policy = RetryPolicy(max_attempts=max_attempts, max_retry_seconds=max_retry_seconds,
                         sleep=clock.sleep, clock=clock.clock)
    seen = {"attempts": [], "retries": 0, "gave_up": None}
    queue = list(outcomes)

    def send_once(attempt):
        seen["attempts"].append(attempt)
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def classify(status, attempt):
        if status < 400:
            return DONE
        if status in (429, 503):
            return Retry(lambda: Failed("HTTP %d after %d" % (status, attempt)), retry_after=retry_after)
        raise Failed("HTTP %d" % status)

    def connection_error(failure):
        seen["gave_up"] = (failure.reason, failure.attempt, failure.never_sent)
        return Failed(failure.reason)

    def on_retry(attempt):
        seen["retries"] += 1

    try:
        result = send_with_retries(send_once, classify, connection_error, policy, idempotent,
                                   on_retry=on_retry, **kwargs)
    except Failed as exc:
        result = exc
    return result, seen, clock


def test_a_success_returns_the_response_at_once():
    result, seen, clock = run([200])
    assert result == 200 and seen["attempts"] == [1] and clock.sleeps == []


def test_transient_statuses_are_retried_then_succeed():
    result, seen, clock = run([503, 429, 200])
    assert result == 200 and seen["attempts"] == [1, 2, 3] and seen["retries"] == 2 and len(clock.sleeps) == 2


def test_the_client_error_is_raised_when_attempts_run_out():
    result, seen, _clock = run([503] * 4)
    assert str(result) == "HTTP 503 after 4" and seen["attempts"] == [1, 2, 3, 4]


def test_a_refusal_is_not_retried():
    result, seen, _clock = run([400, 200])
    assert str(result) == "HTTP 400" and seen["attempts"] == [1]


def test_retry_after_is_waited_and_a_retry_after_past_the_deadline_gives_up():
    result, _seen, clock = run([429, 200], retry_after=7.0)
    assert result == 200 and clock.sleeps == [7.0]
    result, seen, clock = run([429, 200], retry_after=600.0)
    assert isinstance(result, Failed) and seen["attempts"] == [1] and clock.sleeps == []


def test_a_lost_reply_is_resent_only_for_idempotent_requests():
    result, seen, _clock = run([reply_lost(), 200], idempotent=True)
    assert result == 200 and seen["attempts"] == [1, 2]
    result, seen, _clock = run([reply_lost(), 200], idempotent=False)
    assert str(result) == NOT_RESENDABLE and seen["gave_up"] == (NOT_RESENDABLE, 1, False)


def test_a_write_that_never_left_is_resent():
    result, seen, _clock = run([connection_refused(), 201], idempotent=False)
    assert result == 201 and seen["attempts"] == [1, 2]


def test_a_service_that_cannot_be_reached_is_given_up_on_at_the_connection_deadline():
    clock_start = 0.0
    result, seen, clock = run([connection_refused()] * 50, max_attempts=50, connection_deadline=clock_start + 3)
    assert str(result) == EXHAUSTED and seen["gave_up"][0] == EXHAUSTED and seen["gave_up"][2] is True
    assert clock.now <= clock_start + 3
    # a lost reply is bounded by the overall deadline, not by the connection deadline
    result, seen, clock = run([reply_lost()] * 3 + [200], max_attempts=50, connection_deadline=clock_start)
    assert result == 200


def test_a_fatal_connection_error_is_not_retried():
    ssl_error = requests.exceptions.SSLError("certificate verify failed")
    result, seen, _clock = run([ssl_error, 200], fatal=lambda exc: isinstance(exc, requests.exceptions.SSLError))
    assert str(result) == FATAL and seen["attempts"] == [1]


def test_retry_hooks_choose_the_policy_count_and_waiter():
    clock = FakeTime()
    policy = RetryPolicy(max_attempts=2, sleep=clock.sleep, clock=clock.clock)
    patient = RetryPolicy(max_attempts=100, sleep=clock.sleep, clock=clock.clock)
    paused = []
    statuses = [429, 429, 429, 200]
    response = send_with_retries(
        lambda attempt: statuses.pop(0),
        lambda status, attempt: DONE if status == 200 else Retry(
            lambda: Failed("never"), retry_after=2.0, policy=patient, count=attempt, wait_with=paused.append),
        lambda failure: Failed("connection"), policy, True)
    # the loop's own policy allows 2 attempts; the hook's policy allowed all four
    assert response == 200 and paused == [2.0, 2.0, 2.0] and clock.sleeps == []


@pytest.mark.parametrize("exc, expected", [
    (requests.exceptions.ConnectTimeout("connect timed out"), True),
    (requests.exceptions.SSLError("handshake"), True),
    (connection_refused(), True),
    (reply_lost(), False),
    (requests.exceptions.ReadTimeout("read timed out"), False),
])
def test_request_never_sent(exc, expected):
    assert request_never_sent(exc) is expected
