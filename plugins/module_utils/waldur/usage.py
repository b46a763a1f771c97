# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The usage report of waldur_usage: billing periods, amounts, refusal recognition and the
per-resource worker that submits usage with set_usage."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP

from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import hex_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import (
    WaldurApiError,
    WaldurUnproven,
    error_message,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import USAGE_SHAPE

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
            "resource_uuid": resource_uuid, "billing_period": period_start}, shape=USAGE_SHAPE):
        if str(record.get("billing_period") or "")[:7] != period_start[:7] or not record.get("type"):
            continue
        held[record["type"]] = _stored_amount(client, record)
    return held


def _stored_amount(client, record):
    """A stored usage's amount; one that is not a number is not proof of what Waldur holds (taken as
    nothing, it would let a lower figure through)."""
    try:
        amount = Decimal(str(record.get("usage")))
    except (InvalidOperation, ValueError):
        amount = None
    if amount is None or not amount.is_finite():
        held = str(record.get("usage"))[:40]
        raise WaldurUnproven(200, "GET", client.api_path("marketplace-component-usages/"),
                             "a stored usage of component %s holds %r, not a number" % (record.get("type"), held))
    return amount


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
        items.append({"resource_uuid": uuid, "resource_name": entry.get("resource_name") or "", "amounts": amounts,
                      "problem": entry.get("problem") or ""})
    return items


def resource_label(item):
    """``name (uuid)`` for messages, or the UUID alone when no name was given."""
    return "%s (%s)" % (item["resource_name"], item["resource_uuid"]) if item.get("resource_name") \
        else item["resource_uuid"]


def stored_usages(client, offering_uuid, period_start):
    """``{resource_uuid: {component: [Decimal, ...]}}`` for the offering's month (one paged listing)."""
    stored = {}
    records = client.list("marketplace-component-usages/", params={
        "offering_uuid": offering_uuid, "billing_period": period_start}, shape=USAGE_SHAPE)
    for record in records:
        # filters a server does not know are ignored, so check the month ourselves
        period = str(record.get("billing_period") or period_start)
        if not period.startswith(period_start[:7]):
            continue
        resource = hex_uuid(record.get("resource_uuid"))
        if not resource or record.get("type") in (None, ""):
            raise WaldurUnproven(200, "GET", client.api_path("marketplace-component-usages/"),
                                 "a stored usage names no resource or component (%s)"
                                 % ", ".join("%s=%r" % (key, record.get(key)) for key in ("resource_uuid", "type")))
        stored.setdefault(resource, {}).setdefault(record["type"], []).append(_stored_amount(client, record))
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


def usage_worker(module, client, components, stored, date, period):
    """The batch worker ``submit`` and its ``on_error`` for one billing month."""

    def submit(item):
        if item.get("problem"):
            # measured wrong or not at all (usage_rows): a named failure, never a quiet gap in the bill
            return {"resource_uuid": item["resource_uuid"], "resource_name": item["resource_name"],
                    "changed": False, "failed": True, "closed": False, "sent": {}, "unchanged": [], "refused": [],
                    "omitted": [], "msg": "resource %s: %s" % (resource_label(item), item["problem"])}
        sent, unchanged, refused, omitted = plan_rows(item, components, stored)
        result = {"resource_uuid": item["resource_uuid"], "resource_name": item["resource_name"],
                  "changed": bool(sent), "failed": False, "closed": False,
                  "sent": sent, "unchanged": unchanged, "refused": refused, "omitted": omitted}
        if sent and module._diff:
            header = "usage of %s for %s" % (resource_label(item), period)
            result["diff"] = dict(usage_diff(stored.get(item["resource_uuid"], {}), sent),
                                  before_header=header, after_header=header)
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

    return submit, on_error
