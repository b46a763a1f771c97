"""Accounting of the order pass: six outcomes, counted and named, would_ in check mode."""

from ansible_collections.waldur.site_agent.plugins.filter.order_pass import (
    one_line,
    order_pass_report,
    unfinished_outcomes,
)

A, B, C, D, E = ("%032x" % number for number in range(1, 6))


def claim():
    return {
        "orders": [{"uuid": A, "resource_name": "web-a", "marketplace_resource_uuid": "1" * 32, "resource": {}},
                   {"uuid": B, "resource_name": "", "marketplace_resource_uuid": "2" * 32,
                    "resource": {"name": "web-b", "backend_id": "77"}}],
        "skipped_orders": [{"uuid": C, "resource_name": "", "msg": "order is erred after approval, not executing"}],
        "errors": [{"uuid": D, "msg": "Waldur GET failed (HTTP 500)"}],
    }


def settle():
    return {"results": [
        {"order_uuid": A, "outcome": "done", "msg": "set done", "resource_name": "web-a"},
        {"order_uuid": B, "outcome": "retry", "msg": "left executing for the next pass:\n  deadline", "resource_name": ""},
        {"order_uuid": E, "outcome": "refused", "failed": True, "msg": "Waldur refused set_state_done",
         "resource_name": "web-e"},
    ]}


def test_every_order_is_counted_once_and_named_unless_done():
    report = order_pass_report(claim(), settle())
    assert report["counts"] == {"done": 1, "erred": 0, "retry": 1, "refused": 1, "failed": 1, "skipped": 1}
    assert report["orders"] == 5 and report["unfinished"] == 2
    assert report["summary"] == "done=1 erred=0 retry=1 refused=1 failed=1 skipped=1"
    assert report["lines"] == [
        "skipped: (no name) (order %s): order is erred after approval, not executing" % C,
        "failed: (no name) (order %s): could not be claimed: Waldur GET failed (HTTP 500)" % D,
        "retry: web-b (order %s): left executing for the next pass: deadline" % B,
        "refused: web-e (order %s): Waldur refused set_state_done" % E,
    ]


def test_check_mode_counts_what_would_be_done():
    results = {"results": [{"order_uuid": A, "outcome": "done", "msg": "would set done"},
                           {"order_uuid": B, "outcome": "erred", "msg": "would set erred: no region"}]}
    report = order_pass_report({"orders": claim()["orders"]}, results, check_mode=True)
    assert report["summary"] == "would_done=1 would_erred=1 retry=0 refused=0 failed=0 skipped=0"
    assert report["lines"] == ["would_erred: web-b (order %s): would set erred: no region" % B]


def test_a_pass_with_nothing_to_do():
    assert order_pass_report({"orders": [], "skipped_orders": [], "errors": []}, {})["orders"] == 0


def test_a_failed_backend_task_leaves_each_order_for_the_next_pass_with_one_short_line():
    reason = "DigitalOcean rejected the token (401)\n" + "x" * 1000
    outcomes = unfinished_outcomes(claim()["orders"], reason)
    assert [(o["order_uuid"], o["failed"], o["retry"], o["backend_id"], o["resource_name"]) for o in outcomes] == [
        (A, True, True, None, "web-a"), (B, True, True, "77", "web-b")]
    assert outcomes[0]["msg"].startswith("the backend task failed as a whole: DigitalOcean rejected the token (401) xx")
    assert len(outcomes[0]["msg"]) < 350 and "\n" not in outcomes[0]["msg"]


def test_one_line():
    assert one_line("a\n  b\tc") == "a b c"
    assert one_line("x" * 10, limit=8) == "xxxxx..."
