"""The summary of every pass: the line operators and the docs read, the same fields as data for
the JSON log, and an offering whose steps did not run counting nothing."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.filter.summary import pass_summary, pass_summary_data

SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def order_results():
    return {
        "probe": {"api_calls": 1},
        "claim": {"orders": [{"uuid": "a"}, {"uuid": "b"}], "api_calls": {"reads": 3, "writes": 2, "retries": 4}},
        "act": {"api_calls": 5, "results": [{"changed": True}, {"changed": False}, {"failed": True}]},
        "settle": {"api_calls": {"reads": 1, "writes": 2}},
        "report": {"orders": 3, "counts": {"done": 1, "erred": 1, "rejected": 0, "retry": 1, "refused": 0, "failed": 0,
                                           "skipped": 0, "diverged": 0}},
    }


def test_the_order_line_counts_changed_machines_and_every_call():
    line = pass_summary(order_results(), "order_process", "My DO", 100.0, now=112.34)
    assert line == ("offering=My DO pass=order_process orders=3 done=1 erred=1 rejected=0 retry=1 refused=0 failed=0 "
                    "skipped=0 diverged=0 machines_changed=1 api_calls=14 seconds=12.3")


def test_an_offering_with_nothing_to_do_shows_zero_whatever_ran_before():
    # The act was reset at the start of the offering and settle was skipped.
    results = dict(order_results(), claim={"orders": [], "api_calls": {"reads": 1, "writes": 0}}, act={},
                   settle=SKIPPED, report={"orders": 0, "counts": {"done": 0}})
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


def test_the_data_holds_the_lines_fields_typed_and_in_order():
    summary = pass_summary_data(order_results(), "order_process", "My DO", 100.0, now=112.34)
    assert summary["line"] == pass_summary(order_results(), "order_process", "My DO", 100.0, now=112.34)
    assert list(summary["fields"].items()) == [
        ("offering", "My DO"), ("pass", "order_process"), ("orders", 3), ("done", 1), ("erred", 1), ("rejected", 0),
        ("retry", 1), ("refused", 0), ("failed", 0), ("skipped", 0), ("diverged", 0), ("machines_changed", 1),
        ("api_calls", 14), ("seconds", 12.3)]
    # every field is in the line, as the line shows it
    assert summary["line"] == " ".join("%s=%s" % pair for pair in summary["fields"].items())


def test_the_data_keeps_what_a_line_could_not_carry():
    # an offering named like a number, or with "key=" in its name: the line reads ambiguously, the data does not
    results = {"waldur": {"resources": []}, "cloud": {"status": "clean", "counts": {}}}
    summary = pass_summary_data(results, "audit", "42 pass=x", 0, now=0, report="/audit/42")
    assert summary["fields"]["offering"] == "42 pass=x" and summary["fields"]["pass"] == "audit"
    assert summary["fields"]["status"] == "clean" and summary["fields"]["seconds"] == 0.0
    assert summary["line"] == "offering=42 pass=x pass=audit status=clean  resources=0 report=/audit/42.json api_calls=0 seconds=0.0"
    membership = pass_summary_data({}, "membership_sync", "My DO", 0, now=0, backend="Azure")["fields"]
    assert membership["membership"] == "not applicable (Azure access is the SSH key of the order)"


def test_a_check_mode_order_pass_shows_what_it_would_do_in_the_summarys_order():
    from ansible_collections.waldur.site_agent.plugins.filter.order_pass import order_pass_report

    report = order_pass_report({"orders": []}, {"results": [{"order_uuid": "o1", "outcome": "done"}]}, True)
    fields = pass_summary_data(dict(order_results(), report=report), "order_process", "My DO", 0, now=0)["fields"]
    assert list(fields)[2:11] == ["orders", "would_done", "would_erred", "would_reject", "retry", "refused", "failed",
                                  "skipped", "diverged"]
    assert fields["would_done"] == 1 and report["summary"].startswith("would_done=1 would_erred=0 would_reject=0 retry=0")


def test_a_backend_without_usage_says_so_and_counts_nothing():
    summary = pass_summary_data({}, "report", "DigitalOcean VM", 0, now=2.04,
                                no_usage="DigitalOcean droplets report no usage (nothing is sent, not even zeros)")
    assert summary["line"] == ("offering=DigitalOcean VM pass=report DigitalOcean droplets report no usage "
                               "(nothing is sent, not even zeros) sent=0 api_calls=0 seconds=2.0")
    assert summary["fields"] == {"offering": "DigitalOcean VM", "pass": "report",
                                 "note": "DigitalOcean droplets report no usage (nothing is sent, not even zeros)",
                                 "sent": 0, "api_calls": 0, "seconds": 2.0}
