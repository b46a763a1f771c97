"""Accounting of the order pass: six outcomes, counted and named, would_ in check mode."""

import json

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
    assert report["counts"] == {"done": 1, "erred": 0, "rejected": 0, "retry": 1, "refused": 1, "failed": 1,
                                "skipped": 1, "diverged": 0}
    assert report["orders"] == 5 and report["unfinished"] == 2
    assert report["summary"] == "done=1 erred=0 rejected=0 retry=1 refused=1 failed=1 skipped=1 diverged=0"
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
    assert report["summary"] == "would_done=1 would_erred=1 would_reject=0 retry=0 refused=0 failed=0 skipped=0 diverged=0"
    assert report["lines"] == ["would_done: web-a (order %s): would set done" % A,
                               "would_erred: web-b (order %s): would set erred: no region" % B]


def test_a_dry_run_names_every_order_with_what_the_backend_and_settling_would_do():
    # The act results come packed, as the order pass hands them; an order the backend had no item
    # for (an unchanged update) is named with what settling would do alone.
    act = {"results_packed": json.dumps([
        {"order_uuid": A, "msg": "would create droplet web-a in ams3 (s-1vcpu-1gb, ubuntu-22-04-x64)"},
        {"order_uuid": B, "msg": "x" * 400}])}
    results = {"results": [{"order_uuid": A, "outcome": "done", "msg": "would approve and set done"},
                           {"order_uuid": B, "outcome": "done", "msg": "would approve and set done"},
                           {"order_uuid": E, "outcome": "done", "msg": "would set done (nothing to change)",
                            "resource_name": "web-e"}]}
    report = order_pass_report({"orders": claim()["orders"]}, results, check_mode=True, act=act)
    assert report["lines"][0] == ("would_done: web-a (order %s): would create droplet web-a in ams3 "
                                  "(s-1vcpu-1gb, ubuntu-22-04-x64); would approve and set done" % A)
    # a long plan is cut on its own, and what settling would write still shows
    assert report["lines"][1].endswith("x...; would approve and set done")
    assert report["lines"][2] == "would_done: web-e (order %s): would set done (nothing to change)" % E
    # outside check mode a done order is not news, whatever the backend said
    assert order_pass_report({"orders": claim()["orders"]}, results, act=act)["lines"] == []


def test_a_pass_with_nothing_to_do():
    assert order_pass_report({"orders": [], "skipped_orders": [], "errors": []}, {})["orders"] == 0


def test_a_failed_backend_task_leaves_each_order_for_the_next_pass_with_one_short_line():
    reason = "DigitalOcean rejected the token (401)\n" + "x" * 1000
    outcomes = unfinished_outcomes(claim()["orders"], reason)
    assert [(o["order_uuid"], o["failed"], o["retry"], o["backend_id"], o["resource_name"]) for o in outcomes] == [
        (A, True, True, None, "web-a"), (B, True, True, "77", "web-b")]
    # cut at the last whole word (the run of x is one word longer than the limit)
    assert outcomes[0]["msg"] == "the backend task failed as a whole: DigitalOcean rejected the token (401)..."
    assert len(outcomes[0]["msg"]) < 350 and "\n" not in outcomes[0]["msg"]


def test_one_line():
    assert one_line("a\n  b\tc") == "a b c"
    assert one_line("x" * 10, limit=8) == "xxxxx..."
    # never half a word: an Azure message cut at the limit ends at the last whole word
    text = "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent is the value"
    assert one_line(text, limit=60) == "AADSTS7000215: Invalid client secret provided. Ensure the..."
    assert one_line("one, two three", limit=12) == "one, two..."


def test_the_order_pass_filters_take_the_claim_and_settle_packed():
    import json

    from ansible_collections.waldur.site_agent.plugins.filter.backend_items import droplet_plan
    from ansible_collections.waldur.site_agent.plugins.filter.order_pass import order_pass_report, unfinished_outcomes

    orders = [{"uuid": "a" * 32, "type": "Terminate", "marketplace_resource_uuid": "b" * 32,
               "resource": {"uuid": "b" * 32, "name": "web-1", "backend_id": "7"}},
              {"uuid": "c" * 32, "type": "Frobnicate", "marketplace_resource_uuid": "d" * 32,
               "resource": {"uuid": "d" * 32, "name": "web-2"}}]
    listed, packed = droplet_plan(orders), droplet_plan(json.dumps(orders))
    assert isinstance(packed["backend_items"], str) and json.loads(packed["backend_items"]) == listed["backend_items"]
    assert packed["set_aside"] == listed["set_aside"] != [] and packed["notes"] == listed["notes"]
    assert json.loads(unfinished_outcomes(json.dumps(orders), "boom")) == unfinished_outcomes(orders, "boom")
    results = [{"order_uuid": "a" * 32, "outcome": "done"}, {"order_uuid": "c" * 32, "outcome": "erred", "msg": "no"}]
    claim = {"orders": orders, "skipped_orders": [], "errors": []}
    report = order_pass_report(claim, {"results": results})
    packed_report = order_pass_report({"orders_packed": json.dumps(orders), "skipped_orders": [], "errors": []},
                                      {"results_packed": json.dumps(results)})
    assert packed_report == report and report["lines"] == ["erred: web-2 (order %s): no" % ("c" * 32)]
