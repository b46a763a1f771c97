#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_usage
short_description: Report component usage of Waldur resources for a billing month, idempotently
version_added: 1.0.0
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
  - waldur.site_agent.attributes
  - waldur.site_agent.waldur
  - waldur.site_agent.batch
  - waldur.site_agent.packed
attributes:
  check_mode:
    support: full
    details:
      - Reads and compares; RV(results[].sent) lists the rows that would be sent, nothing is sent.
  diff_mode:
    support: full
    details:
      - Each resource whose usage is (or would be) sent carries RV(results[].diff).
options:
  offering_uuid:
    description:
      - UUID of the offering the resources belong to.
    type: str
    required: true
  usages_packed:
    description:
      - O(usages) packed, as one JSON text of the same entries (see the description); exactly one of
        the two is given. Each entry is checked as an entry of O(usages) would be.
    type: raw
  usages:
    description:
      - What was measured, one entry per resource. Required unless O(usages_packed) is given.
    type: list
    elements: dict
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
      problem:
        description:
          - Why no usage can be sent for this resource (C(usage_rows) gives one for a backend id the backend
            refused or that several resources share). The entry is a failed result naming the resource, and
            nothing is sent for it; the other entries go through.
        type: str
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

- name: Thousands of resources, the lists handed over packed (as the report pass does)
  waldur.site_agent.waldur_usage:
    offering_uuid: a0000000000000000000000000000001
    usages_packed: "{{ measured.machines_packed | waldur.site_agent.usage_rows(waldur_resources.resources_packed, backend_components) }}"
    packed: true
  register: report
  # report.failures names the resources whose usage was not recorded
"""

RETURN = r"""
diff:
  description:
    - With C(--diff), one entry per resource that changed (or would change), for Ansible's diff
      output; C(before_header) and C(after_header) name the resource.
  returned: with C(--diff), when usage was (or would be) sent
  type: list
  elements: dict
  sample:
    - before: {cpu: "1.00"}
      after: {cpu: "2.00", ram: "4096.00"}
      before_header: vm-1 (resource 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b)
      after_header: vm-1 (resource 7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b)
results_packed:
  description: RV(results) packed, as one JSON text of the same results.
  returned: when O(packed) is true
  type: str
  sample: '[{"resource_uuid": "7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b", "sent": {"cpu": 2}, "changed": true}]'
failures:
  description: The results that failed (as in RV(results)), so that a packed run still names them.
  returned: when O(packed) is true
  type: list
  elements: dict
results:
  description: One result per resource, in input order.
  returned: unless O(packed) is true
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

from ansible.module_utils.basic import AnsibleModule

from decimal import Decimal

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import BatchRunner, batch_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import list_option
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError, WaldurUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import offering_components
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.usage import (
    billing_month,
    future_month_problem,
    is_current_month,
    parse_items,
    plan_rows,
    resource_label,
    stored_in_period,
    stored_usages,
    usage_date,
    usage_worker,
)


USAGE_OPTIONS = dict(
    resource_uuid=dict(type="str", required=True),
    resource_name=dict(type="str"),
    usages=dict(type="dict", required=True),
    problem=dict(type="str"),
)


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = dict(
        offering_uuid=dict(type="str", required=True),
        usages=dict(type="list", elements="dict", options=USAGE_OPTIONS),
        usages_packed=dict(type="raw"),
        packed=dict(type="bool", default=False),
        billing_period=dict(type="str"),
        timezone=dict(type="str", default="UTC"),
    )
    argument_spec.update(batch_argument_spec())
    module = WaldurModule(build=build, argument_spec=argument_spec, required_one_of=[("usages", "usages_packed")],
                          mutually_exclusive=[("usages", "usages_packed")])
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
    items = parse_items(module, list_option(module, "usages", USAGE_OPTIONS))
    client = module.client(pool_size=params["max_workers"])

    base = dict(billing_period=period, date=date)
    if not items:
        nothing = dict(results_packed="[]", failures=[]) if params["packed"] else dict(results=[])
        nothing.update(base)
        module.exit_json(changed=False, totals=dict(resources=0, submitted=0, sent=0, unchanged=0, refused=0,
                                                    omitted=0, closed=0, failed=0), **nothing)
    try:
        components = dict((component.get("type"), component.get("billing_type"))
                          for component in offering_components(client, offering_uuid))
        stored = stored_usages(client, offering_uuid, period_start)
        if stored and any(set(plan_rows(item, components, stored)[0]) - set(stored.get(item["resource_uuid"], {}))
                          for item in items):
            # Usage never goes down because of a read: a figure is sent where Waldur showed none this
            # month only when a second read of the month agrees (one answer that lost records would
            # otherwise overwrite a higher stored figure). An empty month the client read twice already.
            confirmed = stored_usages(client, offering_uuid, period_start)
            if confirmed != stored:
                raise WaldurUnproven(200, "GET", client.api_path("marketplace-component-usages/"), (
                    "two reads of the usage Waldur stores for %s disagree (%d and %d resources with usage); "
                    "nothing was sent, so that no usage is lowered on a wrong view" % (
                        period, len(stored), len(confirmed))))
    except WaldurApiError as exc:
        module.fail_from_error(exc, msg="could not read the components and stored usage of offering %s; nothing "
                               "was sent" % offering_uuid, **base)

    submit, on_error = usage_worker(module, client, components, stored, date, period)

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
    runner.finish(results, totals=totals, packed=params["packed"], fail_msg=lambda failures, results: (
        "usage of %d of %d resource(s) could not be submitted: %s"
        % (len(failures), len(results), "; ".join(r["msg"] for r in failures))), **base)


if __name__ == "__main__":
    main()
