"""The summary line of every pass: the text operators, the JSON log and the docs read, and an
offering whose steps did not run counting nothing."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.filter.summary import pass_summary

SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def order_results():
    return {
        "probe": {"api_calls": 1},
        "claim": {"orders": [{"uuid": "a"}, {"uuid": "b"}], "api_calls": {"reads": 3, "writes": 2, "retries": 4}},
        "act": {"api_calls": 5, "results": [{"changed": True}, {"changed": False}, {"failed": True}]},
        "settle": {"api_calls": {"reads": 1, "writes": 2}},
        "report": {"orders": 3, "summary": "done=1 erred=1 rejected=0 retry=1 refused=0 failed=0 skipped=0 diverged=0"},
    }


def test_the_order_line_counts_changed_machines_and_every_call():
    line = pass_summary(order_results(), "order_process", "My DO", 100.0, now=112.34)
    assert line == ("offering=My DO pass=order_process orders=3 done=1 erred=1 rejected=0 retry=1 refused=0 failed=0 "
                    "skipped=0 diverged=0 machines_changed=1 api_calls=14 seconds=12.3")


def test_an_offering_with_nothing_to_do_shows_zero_whatever_ran_before():
    # The act was reset at the start of the offering and settle was skipped.
    results = dict(order_results(), claim={"orders": [], "api_calls": {"reads": 1, "writes": 0}}, act={},
                   settle=SKIPPED, report={"orders": 0, "summary": "done=0"})
    line = pass_summary(results, "order_process", "Azure VM", "100.0", now=100)
    assert line == "offering=Azure VM pass=order_process orders=0 done=0 machines_changed=0 api_calls=2 seconds=0.0"


def test_the_report_line_adds_the_failures_of_usage_and_of_set_ok():
    results = {
        "resources": {"resources": [{}, {}], "api_calls": {"reads": 1}},
        "machines": {"api_calls": 2},
        "recovered": {"totals": {"set_ok": 1, "unsupported": 0, "failed": 2}, "api_calls": {"writes": 3}},
        "usage": {"billing_period": "2026-11", "api_calls": {"reads": 1, "writes": 4},
                  "totals": {"sent": 3, "unchanged": 1, "refused": 0, "closed": 0, "failed": 1}},
    }
    line = pass_summary(results, "report", "Azure VM", 0, now=4.06, period="")
    assert line == ("offering=Azure VM pass=report period=2026-11 resources=2 sent=3 already_reported=1 refused=0 "
                    "closed=0 failed=3 set_ok=1 still_erred=0 api_calls=11 seconds=4.1")


@pytest.mark.parametrize("period, shown", [("", "current"), ("2026-10", "2026-10")])
def test_a_report_of_no_resources_names_the_asked_month(period, shown):
    results = {"resources": {"resources": [], "api_calls": {"reads": 1}}, "machines": SKIPPED,
               "recovered": SKIPPED, "usage": SKIPPED}
    line = pass_summary(results, "report", "Azure VM", 0, now=0, period=period)
    assert line == ("offering=Azure VM pass=report period=%s resources=0 sent=0 already_reported=0 refused=0 "
                    "closed=0 failed=0 set_ok=0 still_erred=0 api_calls=1 seconds=0.0" % shown)


def test_the_membership_line_counts_changed_machines_and_metadata():
    results = {
        "resources": {"resources": [{}], "api_calls": {"reads": 2}},
        "act": {"api_calls": 3, "results": [{"changed": True}, {"changed": True}]},
        "recovered": SKIPPED,
        "metadata": {"api_calls": {"writes": 1}, "results": [{"changed": True}, {"changed": False}]},
    }
    line = pass_summary(results, "membership_sync", "My DO", 0, now=0, backend="DigitalOcean")
    assert line == ("offering=My DO pass=membership_sync resources=1 machines_changed=2 metadata_updated=1 set_ok=0 "
                    "still_erred=0 membership=not applicable (DigitalOcean access is the SSH key of the order) "
                    "api_calls=6 seconds=0.0")


def test_packed_steps_count_as_listed_ones():
    """The passes hand their lists over packed: the counts come from ``count`` and the packed results."""
    results = {
        "resources": {"count": 1, "resources_packed": '[{"uuid": "a"}]', "api_calls": {"reads": 2}},
        "act": {"api_calls": 3, "results_packed": '[{"changed": true}, {"changed": true}]'},
        "recovered": SKIPPED,
        "metadata": {"api_calls": {"writes": 1}, "results_packed": '[{"changed": true}, {"changed": false}]'},
    }
    line = pass_summary(results, "membership_sync", "My DO", 0, now=0, backend="DigitalOcean")
    assert "resources=1 machines_changed=2 metadata_updated=1 " in line and "api_calls=6" in line


def test_the_audit_line_lists_every_count_in_order():
    results = {"waldur": {"resources": [{}, {}, {}], "api_calls": {"reads": 2}},
               "cloud": {"status": "findings", "counts": {"orphans": 1, "vanished": 0, "drift": 2}, "api_calls": 4}}
    line = pass_summary(results, "audit", "My DO", 0, now=0, report="/audit/My-DO")
    assert line == ("offering=My DO pass=audit status=findings orphans=1 vanished=0 drift=2  resources=3 "
                    "report=/audit/My-DO.json api_calls=6 seconds=0.0")


def test_an_unknown_pass_or_no_results_is_an_error():
    with pytest.raises(AnsibleFilterError, match="unknown pass 'orders'"):
        pass_summary({}, "orders", "My DO", 0)
    with pytest.raises(AnsibleFilterError, match="registered results"):
        pass_summary([], "audit", "My DO", 0)
