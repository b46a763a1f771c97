# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The one summary line of a pass over one offering, from the pass's registered results.

Operators, the JSON log callback, the docs and the tests read these lines key by key, so the
text of each pass's line is fixed here. A step of the pass that did not run (a skipped task,
or a result reset at the start of the offering) counts nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.filter.site_agent import api_call_count, listed

MEMBERSHIP_NOTE = "membership=not applicable (%s access is the SSH key of the order)"


def _step(results, name):
    step = results.get(name)
    return step if isinstance(step, dict) else {}


def _total(step, key):
    """A module's ``totals[key]`` as it reports it, 0 when the step did not run."""
    totals = step.get("totals")
    if isinstance(totals, dict) and key in totals:
        return totals[key]
    return 0


def _changed(step):
    return len([item for item in listed(step, "results") if isinstance(item, dict) and item.get("changed")])


def _resources(step):
    """How many resources a waldur_resources_info step returned (packed or not)."""
    return step["count"] if "count" in step else len(step.get("resources") or [])


def _calls(results, *names):
    return api_call_count([_step(results, name) for name in names])


def _order_process(results, options):
    report = _step(results, "report")
    return ["orders=%s" % report.get("orders", 0), report.get("summary", ""),
            "machines_changed=%d" % _changed(_step(results, "act")),
            "api_calls=%d" % _calls(results, "probe", "listed", "catalogue", "claim", "act", "settle")]


def _report(results, options):
    usage, recovered = _step(results, "usage"), _step(results, "recovered")
    period = usage["billing_period"] if "billing_period" in usage else (options.get("period") or "current")
    failed = int(_total(usage, "failed") or 0) + int(_total(recovered, "failed") or 0)
    return ["period=%s" % period,
            "resources=%d" % _resources(_step(results, "resources")),
            "sent=%s" % _total(usage, "sent"), "already_reported=%s" % _total(usage, "unchanged"),
            "refused=%s" % _total(usage, "refused"), "closed=%s" % _total(usage, "closed"),
            "failed=%d" % failed, "set_ok=%s" % _total(recovered, "set_ok"),
            "still_erred=%s" % _total(recovered, "unsupported"),
            "api_calls=%d" % _calls(results, "resources", "machines", "recovered", "usage")]


def _membership_sync(results, options):
    recovered = _step(results, "recovered")
    return ["resources=%d" % _resources(_step(results, "resources")),
            "machines_changed=%d" % _changed(_step(results, "act")),
            "metadata_updated=%d" % _changed(_step(results, "metadata")),
            "set_ok=%s" % _total(recovered, "set_ok"), "still_erred=%s" % _total(recovered, "unsupported"),
            MEMBERSHIP_NOTE % options.get("backend", ""),
            "api_calls=%d" % _calls(results, "resources", "act", "recovered", "metadata")]


def _audit(results, options):
    cloud = _step(results, "cloud")
    # Each count ends in a space, then the line goes on after one more: the text the audit
    # always printed, which its readers split on whitespace.
    counts = "".join("%s=%s " % (key, value) for key, value in (cloud.get("counts") or {}).items())
    return ["status=%s %s" % (cloud.get("status"), counts),
            "resources=%d" % len(_step(results, "waldur").get("resources") or []),
            "report=%s.json" % options.get("report", ""),
            "api_calls=%d" % _calls(results, "waldur", "cloud")]


PASSES = {"order_process": _order_process, "report": _report, "membership_sync": _membership_sync,
          "audit": _audit}


def pass_summary(results, pass_name, offering, started, now=None, **options):
    """``offering=<name> pass=<pass> key=value ... seconds=<s>`` for one offering.

    ``results``: the pass's registered results by step (order_process: probe, listed and
    catalogue (the orders listed and checked against the cloud's catalogue before approval),
    claim, act, settle and report, the order_pass_report; report: resources, machines, recovered, usage;
    membership_sync: resources, act, recovered, metadata; audit: waldur, cloud). ``started``:
    the pass's start (epoch seconds); ``now`` defaults to the current time. ``options``:
    report ``period`` (the asked billing month), membership_sync ``backend``, audit ``report``
    (the report's path without ``.json``)."""
    if pass_name not in PASSES:
        raise AnsibleFilterError("pass_summary: unknown pass %r (one of %s)" % (pass_name, ", ".join(sorted(PASSES))))
    if not isinstance(results, dict):
        raise AnsibleFilterError("pass_summary expects the registered results of the pass by step name")
    seconds = (time.time() if now is None else float(now)) - float(started)
    fields = ["offering=%s" % offering, "pass=%s" % pass_name] + PASSES[pass_name](results, options)
    fields.append("seconds=%.1f" % seconds)
    return " ".join(fields)


class FilterModule(object):
    """The summary line of a pass."""

    def filters(self):
        return {"pass_summary": pass_summary}
