# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The one summary of a pass over one offering, from the pass's registered results: as data,
which the pass hands to the JSON log callback (the ``agent_pass_summary`` fact), and as the line
the pass prints, from the same fields.

Operators, the JSON log callback, the docs and the tests read these summaries key by key, so the
fields of each pass, their order and the text of its line are fixed here. A step of the pass that
did not run (a skipped task, or a result reset at the start of the offering) counts nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleFilterError

from ansible_collections.waldur.site_agent.plugins.filter.site_agent import api_call_count, listed

MEMBERSHIP_NOTE = "not applicable (%s access is the SSH key of the order)"


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


# An empty piece of the line: the audit's counts each end in a space and the line goes on after one
# more, the text the audit always printed (its readers split on whitespace).
GAP = None
# The third part of a piece whose line shows its value alone (a sentence, not a count).
BARE = "bare"


def _order_process(results, options):
    report = _step(results, "report")
    counts = report.get("counts") if isinstance(report.get("counts"), dict) else {}
    return ([("orders", report.get("orders", 0))] + list(counts.items())
            + [("machines_changed", _changed(_step(results, "act"))),
               ("api_calls", _calls(results, "probe", "listed", "catalogue", "claim", "act", "settle"))])


def _report(results, options):
    if options.get("no_usage"):
        # a backend that reports no usage: the reason, shown as it is, and nothing counted
        return [("note", options["no_usage"], BARE), ("sent", 0), ("api_calls", 0)]
    usage, recovered = _step(results, "usage"), _step(results, "recovered")
    period = usage["billing_period"] if "billing_period" in usage else (options.get("period") or "current")
    failed = int(_total(usage, "failed") or 0) + int(_total(recovered, "failed") or 0)
    return [("period", period), ("resources", _resources(_step(results, "resources"))),
            ("sent", _total(usage, "sent")), ("already_reported", _total(usage, "unchanged")),
            ("refused", _total(usage, "refused")), ("closed", _total(usage, "closed")),
            ("failed", failed), ("set_ok", _total(recovered, "set_ok")),
            ("still_erred", _total(recovered, "unsupported")),
            ("api_calls", _calls(results, "resources", "machines", "recovered", "usage"))]


def _membership_sync(results, options):
    recovered = _step(results, "recovered")
    return [("resources", _resources(_step(results, "resources"))),
            ("machines_changed", _changed(_step(results, "act"))),
            ("metadata_updated", _changed(_step(results, "metadata"))),
            ("set_ok", _total(recovered, "set_ok")), ("still_erred", _total(recovered, "unsupported")),
            ("membership", MEMBERSHIP_NOTE % options.get("backend", "")),
            ("api_calls", _calls(results, "resources", "act", "recovered", "metadata"))]


def _audit(results, options):
    cloud = _step(results, "cloud")
    return ([("status", cloud.get("status"))] + list((cloud.get("counts") or {}).items())
            + [GAP, ("resources", len(_step(results, "waldur").get("resources") or [])),
               ("report", "%s.json" % options.get("report", "")),
               ("api_calls", _calls(results, "waldur", "cloud"))])


PASSES = {"order_process": _order_process, "report": _report, "membership_sync": _membership_sync,
          "audit": _audit}


def _text(key, value, shown=None):
    if shown == BARE:
        return "%s" % (value,)
    return "%s=%.1f" % (key, value) if key == "seconds" else "%s=%s" % (key, value)


def pass_summary_data(results, pass_name, offering, started, now=None, **options):
    """``{fields, line}`` of one offering's pass: ``fields`` its summary as data, in order
    (``offering``, ``pass``, the pass's counts, ``seconds``), which the JSON log callback logs as
    they are; ``line`` the same as text, ``offering=<name> pass=<pass> key=value ... seconds=<s>``,
    which the pass prints.

    ``results``: the pass's registered results by step (order_process: probe, listed and
    catalogue (the orders listed and checked against the cloud's catalogue before approval),
    claim, act, settle and report, the order_pass_report; report: resources, machines, recovered, usage;
    membership_sync: resources, act, recovered, metadata; audit: waldur, cloud). ``started``:
    the pass's start (epoch seconds); ``now`` defaults to the current time. ``options``:
    report ``period`` (the asked billing month) and ``no_usage`` (why the backend reports no
    usage: the line says so, sends nothing and counts nothing), membership_sync ``backend``, audit
    ``report`` (the report's path without ``.json``)."""
    if pass_name not in PASSES:
        raise AnsibleFilterError("pass_summary: unknown pass %r (one of %s)" % (pass_name, ", ".join(sorted(PASSES))))
    if not isinstance(results, dict):
        raise AnsibleFilterError("pass_summary expects the registered results of the pass by step name")
    seconds = (time.time() if now is None else float(now)) - float(started)
    pieces = ([("offering", offering), ("pass", pass_name)] + PASSES[pass_name](results, options)
              + [("seconds", float("%.1f" % seconds))])
    fields = dict(piece[:2] for piece in pieces if piece is not GAP)
    line = " ".join("" if piece is GAP else _text(*piece) for piece in pieces)
    return {"fields": fields, "line": line}


def pass_summary(results, pass_name, offering, started, now=None, **options):
    """``offering=<name> pass=<pass> key=value ... seconds=<s>`` for one offering: the ``line`` of
    ``pass_summary_data``."""
    return pass_summary_data(results, pass_name, offering, started, now=now, **options)["line"]


class FilterModule(object):
    """The summary of a pass, as a line and as data."""

    def filters(self):
        return {"pass_summary": pass_summary, "pass_summary_data": pass_summary_data}
