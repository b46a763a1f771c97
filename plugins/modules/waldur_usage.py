#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_usage
short_description: Report component usage of Waldur resources for a billing month, idempotently
version_added: 0.1.0
description:
  - The last task of the report pass. Takes the usage measured for a batch of resources and submits
    it to Waldur with C(set_usage), one call per resource that has something new.
  - Reads the offering's components once, and what Waldur already stores for the whole offering and
    billing month in a few paged calls.
  - Per resource and component, leaves out components the offering does not have, or that Waldur
    does not meter (only C(usage) and C(limit) components take usage), and reports them in
    RV(results[].omitted).
  - Rounds amounts to 2 decimals and skips those equal to what Waldur stores (RV(results[].unchanged)).
  - Refuses an amount lower than the stored one (usage never decreases within a month) and reports
    it in RV(results[].refused); the resource's other components still go.
  - Sends the rest in one C(set_usage) call per resource, with C(usages) (C(type) and C(amount) of
    each component), C(resource) and C(date), the first day of the billing month at midnight in
    O(timezone).
  - Resources are worked on concurrently; one failing never stops the others. A usage Waldur refuses
    (for example C(Resource is not in valid state.) for an C(Erred) resource) is a failed item naming
    the resource; with O(fail_on_item_error) the task fails.
  - A month after the current one (in O(timezone)) is refused before any call.
  - For another month than the current one, the first resource is sent alone and its usage read back
    by C(billing_period). When Waldur put it elsewhere (Waldur 7.x ignores C(date) and stores usage
    in the current month) the task fails at once saying so, and nothing more is sent.
  - A past month that Waldur no longer takes (a 400 about C(date)) is a warning, not a failure, because
    the period is closed.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.waldur
  - waldur.site_agent.batch
attributes:
  check_mode:
    description: Can run in check mode and return the changes it would make, without making them.
    support: full
    details:
      - Reads and compares; RV(results[].sent) lists the rows that would be sent, nothing is sent.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) with C(--diff).
    support: full
    details:
      - Each resource whose usage is (or would be) sent carries RV(results[].diff).
options:
  offering_uuid:
    description:
      - UUID of the offering the resources belong to.
    type: str
    required: true
  usages:
    description:
      - What was measured, one entry per resource.
    type: list
    elements: dict
    required: true
    suboptions:
      resource_uuid:
        description:
          - UUID of the provider resource.
        type: str
        required: true
      resource_name:
        description:
          - Name of the resource, for the messages.
        type: str
      usages:
        description:
          - "Amount per component type (for example C({cpu: 2, ram: 4096, disk: 51200})), in the
            offering's units. A null amount is left out."
        type: dict
        required: true
  billing_period:
    description:
      - The billing month, C(YYYY-MM). Defaults to the current month in O(timezone). A later month is
        refused.
    type: str
  timezone:
    description:
      - Time zone (IANA name) that decides the current month and the offset of the usage C(date).
    type: str
    default: UTC
notes:
  - Waldur takes a usage for the current month. Current Waldur takes C(date) for a past month too
    (service providers, limit-based components); some servers refuse closed past months (reported as
    not submitted, a warning); Waldur 7.x ignores C(date) (detected by the read-back, a failure).
"""

EXAMPLES = r"""
- name: Report what the backend measured
  waldur.site_agent.waldur_usage:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: a0000000000000000000000000000001
    usages:
      - resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
        usages: {cpu: 2, ram: 4096, disk: 30720}
  register: report

- name: Report for a given month in local time
  waldur.site_agent.waldur_usage:
    offering_uuid: a0000000000000000000000000000001
    billing_period: "2026-11"
    timezone: Europe/Tallinn
    usages: "{{ measured }}"
"""

RETURN = r"""
results:
  description: One result per resource, in input order.
  returned: always
  type: list
  elements: dict
  contains:
    resource_uuid:
      description: Resource UUID (32 hex).
      type: str
    resource_name:
      description: Resource name, when given.
      type: str
    changed:
      description: Whether usage was (or in check mode would be) sent.
      type: bool
    failed:
      description: Whether the submission failed.
      type: bool
    msg:
      description: What happened.
      type: str
    sent:
      description: Component amounts sent (or that would be sent), as 2-decimal strings.
      type: dict
    unchanged:
      description: Components whose amount equals what Waldur stores.
      type: list
      elements: str
    refused:
      description: Components not sent, with C(component), C(amount), C(stored) and C(reason).
      type: list
      elements: dict
    omitted:
      description: Components left out, with C(component) and C(reason).
      type: list
      elements: dict
    closed:
      description: Whether Waldur refused the usage because the billing month is closed.
      type: bool
    retry:
      description: Whether the resource was cut off by the deadline (the next run picks it up).
      type: bool
    diff:
      description: The amounts Waldur stores for the month before and after (C(before), C(after)), as
        2-decimal strings by component.
      returned: with C(--diff), when usage was (or would be) sent
      type: dict
  sample:
    - resource_uuid: 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b
      changed: true
      failed: false
      msg: "sent cpu, ram; 1 refused"
      sent: {cpu: "2.00", ram: "4096.00"}
      unchanged: []
      refused:
        - component: disk
          amount: "20480.00"
          stored: "30720.00"
          reason: "lower than the 30720.00 Waldur stores for this month; usage never decreases"
      omitted:
        - component: gpu
          reason: the offering has no component gpu
totals:
  description: Counts over all resources (C(resources), C(submitted) resources, C(sent) rows, C(unchanged),
    C(refused) rows (never a decrease), C(omitted) rows, C(closed) resources whose month Waldur no longer
    takes, and C(failed) resources whose usage Waldur refused or that could not be sent).
  returned: always
  type: dict
  sample: {resources: 10, submitted: 3, sent: 5, unchanged: 24, refused: 1, omitted: 0, closed: 0, failed: 0}
billing_period:
  description: The billing month used, C(YYYY-MM).
  returned: always
  type: str
  sample: "2026-11"
date:
  description: The C(date) sent with each usage.
  returned: always
  type: str
  sample: "2026-11-01T00:00:00+00:00"
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
"""

import datetime
import re
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import BatchRunner, batch_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import hex_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError, error_message
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import offering_components
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule

try:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
except ImportError:  # Python < 3.9: only UTC
    ZoneInfo = None
    ZoneInfoNotFoundError = KeyError

CENT = Decimal("0.01")
TOLERANCE = Decimal("0.000001")
METERED_BILLING_TYPES = ("usage", "limit")
# Older servers word a closed past period in the message only; current ones name the date field.
PAST_PERIOD_MARKERS = ("backfilling past billing periods", "usage of a past month")
# DRF's keys of an error that is about no field.
NO_FIELD_KEYS = frozenset(("detail", "non_field_errors"))
STATE_HINT = " (Waldur takes usage only for resources in state OK, Updating or Terminating)"
_PERIOD = re.compile(r"^(\d{4})-(\d{2})(?:-01)?$")


def billing_month(billing_period, timezone):
    """(year, month, tzinfo) for ``YYYY-MM`` (or the current month in ``timezone``)."""
    if timezone in ("UTC", "Etc/UTC", "utc"):
        tzinfo = datetime.timezone.utc
    elif ZoneInfo is None:
        raise ValueError("timezone %r needs Python 3.9 or later (zoneinfo); use UTC" % timezone)
    else:
        try:
            tzinfo = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("timezone must be an IANA time zone name such as UTC or Europe/Tallinn, got %r"
                             % timezone)
    if billing_period in (None, ""):
        now = datetime.datetime.now(tzinfo)
        return now.year, now.month, tzinfo
    match = _PERIOD.match(str(billing_period).strip())
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise ValueError("billing_period must be a month as YYYY-MM (for example 2026-11), got %r" % billing_period)
    return int(match.group(1)), int(match.group(2)), tzinfo


def future_month_problem(year, month, tzinfo, timezone):
    """A message when ``year-month`` is after the current month in ``tzinfo``, else None."""
    now = datetime.datetime.now(tzinfo)
    if (year, month) > (now.year, now.month):
        return ("billing_period %04d-%02d is in the future: the current month in %s is %04d-%02d; nothing was sent"
                % (year, month, timezone, now.year, now.month))
    return None


def is_current_month(year, month, tzinfo):
    now = datetime.datetime.now(tzinfo)
    return (year, month) == (now.year, now.month)


def is_closed_period_refusal(exc):
    """A 400 refusing the month itself: by the ``date`` field its body names. A body that names
    no field (``detail`` or ``non_field_errors`` only) is matched by the old servers' words: the
    recorded samples (tests/simulators/waldur/real-waldur-samples.md) hold no such refusal."""
    if exc.status != 400:
        return False
    fields = exc.fields() - NO_FIELD_KEYS
    if fields:
        return "date" in fields
    return any(marker in exc.message.lower() for marker in PAST_PERIOD_MARKERS)


def stored_in_period(client, resource_uuid, period_start):
    """``{component: Decimal}`` Waldur holds for one resource in the month of ``period_start``."""
    held = {}
    for record in client.list("marketplace-component-usages/", params={
            "resource_uuid": resource_uuid, "billing_period": period_start}):
        if str(record.get("billing_period") or "")[:7] != period_start[:7] or not record.get("type"):
            continue
        try:
            held[record["type"]] = Decimal(str(record.get("usage")))
        except (InvalidOperation, ValueError):
            continue
    return held


def usage_date(year, month, tzinfo):
    """First day of the month at midnight in ``tzinfo``, ISO 8601 with offset."""
    return datetime.datetime(year, month, 1, tzinfo=tzinfo).isoformat()


def to_cents(value):
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)


def parse_items(module, usages):
    """Validated ``[(resource_uuid, {component: Decimal or None})]``; bad input fails naming the key."""
    items, seen = [], {}
    for index, entry in enumerate(usages):
        where = "usages[%d]" % index
        uuid = module.uuid_param(entry["resource_uuid"], "%s.resource_uuid" % where)
        if uuid in seen:
            module.fail_json(msg="%s.resource_uuid repeats usages[%d].resource_uuid (%s); give one entry per "
                                 "resource" % (where, seen[uuid], uuid))
        seen[uuid] = index
        amounts = {}
        for component, amount in entry["usages"].items():
            if amount is None:
                amounts[str(component)] = None
                continue
            if isinstance(amount, bool):
                module.fail_json(msg="%s.usages.%s must be a number, got %r" % (where, component, amount))
            try:
                amounts[str(component)] = to_cents(amount)
            except (InvalidOperation, ValueError):
                module.fail_json(msg="%s.usages.%s must be a number, got %r" % (where, component, amount))
            if not amounts[str(component)].is_finite():
                module.fail_json(msg="%s.usages.%s must be a finite number, got %r" % (where, component, amount))
        items.append({"resource_uuid": uuid, "resource_name": entry.get("resource_name") or "", "amounts": amounts})
    return items


def resource_label(item):
    """``name (uuid)`` for messages, or the UUID alone when no name was given."""
    return "%s (%s)" % (item["resource_name"], item["resource_uuid"]) if item.get("resource_name") \
        else item["resource_uuid"]


def stored_usages(client, offering_uuid, period_start):
    """``{resource_uuid: {component: [Decimal, ...]}}`` for the offering's month (one paged listing)."""
    stored = {}
    records = client.list("marketplace-component-usages/", params={
        "offering_uuid": offering_uuid, "billing_period": period_start})
    for record in records:
        # filters a server does not know are ignored, so check the month ourselves
        period = str(record.get("billing_period") or period_start)
        if not period.startswith(period_start[:7]):
            continue
        resource = hex_uuid(record.get("resource_uuid"))
        if not resource or record.get("type") in (None, ""):
            continue
        try:
            amount = Decimal(str(record.get("usage")))
        except (InvalidOperation, ValueError):
            continue
        stored.setdefault(resource, {}).setdefault(record["type"], []).append(amount)
    return stored


def plan_rows(item, components, stored):
    """Split one resource's amounts into sent / unchanged / refused / omitted."""
    sent, unchanged, refused, omitted = {}, [], [], []
    held = stored.get(item["resource_uuid"], {})
    for component in sorted(item["amounts"]):
        amount = item["amounts"][component]
        if amount is None:
            omitted.append({"component": component, "reason": "no amount measured"})
            continue
        if component not in components:
            omitted.append({"component": component, "reason": "the offering has no component %s" % component})
            continue
        billing_type = components[component]
        if billing_type and billing_type not in METERED_BILLING_TYPES:
            omitted.append({"component": component, "reason": "component %s is billed as %s; Waldur takes usage "
                            "only for usage and limit components" % (component, billing_type)})
            continue
        text = "%.2f" % amount
        if amount < 0:
            refused.append({"component": component, "amount": text, "stored": None,
                            "reason": "negative amount"})
            continue
        records = held.get(component, [])
        if len(records) > 1:
            refused.append({"component": component, "amount": text, "stored": None,
                            "reason": "Waldur holds %d records for this component this month; not overwriting "
                                      "an ambiguous value" % len(records)})
            continue
        if records:
            current = records[0]
            if abs(current - amount) <= TOLERANCE:
                unchanged.append(component)
                continue
            if amount < current:
                refused.append({"component": component, "amount": text, "stored": "%.2f" % current,
                                "reason": "lower than the %.2f Waldur stores for this month; usage never "
                                          "decreases" % current})
                continue
        sent[component] = text
    return sent, unchanged, refused, omitted


def usage_diff(held, sent):
    """``{before, after}``: the stored amounts of the components sent, and what they become."""
    before = dict((component, "%.2f" % held[component][0]) for component in sorted(sent)
                  if len(held.get(component) or []) == 1)
    after = dict(before)
    after.update(sent)
    return {"before": before, "after": after}


def summary_message(sent, unchanged, refused, omitted, verb="sent"):
    parts = []
    if sent:
        parts.append("%s %s" % (verb, ", ".join(sorted(sent))))
    if unchanged and not sent:
        parts.append("unchanged")
    elif unchanged:
        parts.append("%d unchanged" % len(unchanged))
    if refused:
        parts.append("%d refused (%s)" % (len(refused), ", ".join(r["component"] for r in refused)))
    if omitted:
        parts.append("%d omitted (%s)" % (len(omitted), ", ".join(o["component"] for o in omitted)))
    return "; ".join(parts) or "nothing to report"


def main():
    argument_spec = dict(
        offering_uuid=dict(type="str", required=True),
        usages=dict(type="list", elements="dict", required=True, options=dict(
            resource_uuid=dict(type="str", required=True),
            resource_name=dict(type="str"),
            usages=dict(type="dict", required=True),
        )),
        billing_period=dict(type="str"),
        timezone=dict(type="str", default="UTC"),
    )
    argument_spec.update(batch_argument_spec())
    module = WaldurModule(argument_spec=argument_spec)
    params = module.params
    offering_uuid = module.uuid_param(params["offering_uuid"], "offering_uuid")
    try:
        year, month, tzinfo = billing_month(params["billing_period"], params["timezone"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    problem = future_month_problem(year, month, tzinfo, params["timezone"])
    if problem:
        module.fail_json(msg=problem)
    period = "%04d-%02d" % (year, month)
    period_start = period + "-01"
    date = usage_date(year, month, tzinfo)
    items = parse_items(module, params["usages"])
    client = module.client(pool_size=params["max_workers"])

    base = dict(billing_period=period, date=date)
    if not items:
        module.exit_json(changed=False, results=[], totals=dict(resources=0, submitted=0, sent=0, unchanged=0,
                                                                refused=0, omitted=0, closed=0, failed=0), **base)
    try:
        components = dict((component.get("type"), component.get("billing_type"))
                          for component in offering_components(client, offering_uuid))
        stored = stored_usages(client, offering_uuid, period_start)
    except WaldurApiError as exc:
        module.fail_from_error(exc, msg="could not read the components and stored usage of offering %s"
                               % offering_uuid, **base)

    def submit(item):
        sent, unchanged, refused, omitted = plan_rows(item, components, stored)
        result = {"resource_uuid": item["resource_uuid"], "resource_name": item["resource_name"],
                  "changed": bool(sent), "failed": False, "closed": False,
                  "sent": sent, "unchanged": unchanged, "refused": refused, "omitted": omitted}
        if sent and module._diff:
            result["diff"] = usage_diff(stored.get(item["resource_uuid"], {}), sent)
        if not sent or module.check_mode:
            result["msg"] = summary_message(sent, unchanged, refused, omitted,
                                            "would send" if module.check_mode else "sent")
            return result
        body = {"usages": [{"type": component, "amount": sent[component]} for component in sorted(sent)],
                "resource": item["resource_uuid"], "date": date}
        try:
            client.post("marketplace-component-usages/set_usage/", json=body)
        except WaldurApiError as exc:
            result.pop("diff", None)  # nothing changed
            if is_closed_period_refusal(exc):
                result.update(changed=False, sent={}, closed=True, msg="Waldur does not accept usage for %s any "
                              "more: %s" % (period, exc.message))
                return result
            hint = STATE_HINT if exc.status == 400 and "resource" in exc.fields() else ""
            result.update(changed=False, failed=True, sent={},
                          msg="resource %s: Waldur refused the usage for %s (%s): %s%s"
                          % (resource_label(item), period, "HTTP %s" % exc.status if exc.status else "no response",
                             exc.message, hint))
            return result
        result["msg"] = summary_message(sent, unchanged, refused, omitted)
        return result

    def on_error(item, exc):
        return {"resource_uuid": item["resource_uuid"], "resource_name": item["resource_name"], "changed": False,
                "failed": True, "closed": False, "msg": "resource %s: %s" % (resource_label(item), error_message(exc)),
                "sent": {}, "unchanged": [], "refused": [], "omitted": []}

    runner = BatchRunner(module, submit, echo=("resource_uuid", "resource_name"), on_error=on_error)
    batch = runner.run

    first = None
    if not is_current_month(year, month, tzinfo) and not module.check_mode:
        # Another month: prove with one resource that Waldur stores it there before sending more.
        first = next((index for index, item in enumerate(items) if plan_rows(item, components, stored)[0]), None)
    if first is None:
        results = batch(items)
    else:
        results = [None] * len(items)
        results[first] = batch([items[first]])[0]
        probe = results[first]
        if probe["sent"] and not probe.get("failed"):
            try:
                held = stored_in_period(client, items[first]["resource_uuid"], period_start)
            except WaldurApiError as exc:
                module.fail_from_error(exc, msg="could not read back the usage of resource %s for %s; nothing "
                                       "more was sent" % (resource_label(items[first]), period), **base)
            missing = sorted(component for component, amount in probe["sent"].items()
                             if held.get(component) != Decimal(amount))
            if missing:
                module.fail_json(msg=(
                    "usage for %s did not land in %s: after set_usage answered success, Waldur holds no such usage "
                    "of resource %s (%s) in that month. This Waldur ignores set_usage's date (as Waldur 7.x does) "
                    "and stored the figures in the current month; nothing more was sent. Report past months only "
                    "to a Waldur that takes date, and run the report pass for the current month to put its "
                    "figures back." % (period, period, resource_label(items[first]), ", ".join(missing))),
                    results=[probe], totals=dict(resources=len(items), submitted=1, sent=len(probe["sent"]),
                                                 unchanged=0, refused=0, omitted=0, closed=0, failed=1), **base)
        rest = [index for index in range(len(items)) if index != first]
        for index, result in zip(rest, batch([items[index] for index in rest])):
            results[index] = result
    for result in results:
        for key, empty in (("sent", {}), ("unchanged", []), ("refused", []), ("omitted", []), ("closed", False)):
            result.setdefault(key, empty)
    for item, result in zip(items, results):
        if result.get("refused"):
            module.warn("usage of resource %s not sent for %s: %s" % (
                resource_label(item), period,
                "; ".join("%s %s (%s)" % (r["component"], r["amount"], r["reason"]) for r in result["refused"])))
        if result.get("closed"):
            module.warn("usage of resource %s for %s not sent: %s" % (resource_label(item), period, result["msg"]))
    totals = dict(
        resources=len(results),
        submitted=sum(1 for result in results if result["sent"] and not result.get("failed")),
        sent=sum(len(result["sent"]) for result in results if not result.get("failed")),
        unchanged=sum(len(result["unchanged"]) for result in results),
        refused=sum(len(result["refused"]) for result in results),
        omitted=sum(len(result["omitted"]) for result in results),
        closed=sum(1 for result in results if result.get("closed")),
        failed=sum(1 for result in results if result.get("failed")),
    )
    runner.finish(results, totals=totals, fail_msg=lambda failures, results: (
        "usage of %d of %d resource(s) could not be submitted: %s"
        % (len(failures), len(results), "; ".join(r["msg"] for r in failures))), **base)


if __name__ == "__main__":
    main()
