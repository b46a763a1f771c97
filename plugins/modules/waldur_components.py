#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: waldur_components
short_description: Create or update the components of a Waldur offering from the agent configuration
version_added: 1.0.0
description:
  - Loads the C(backend_components) of a site-agent offering configuration into Waldur, as the
    upstream C(waldur_site_load_components) command does.
  - A component whose type Waldur does not have is created (C(create_offering_component)); one that
    exists but differs is updated (C(update_offering_component)); one that already matches is left
    alone, so a second run makes no write call.
  - C(accounting_type) becomes Waldur's C(billing_type) (C(one) also sets C(is_prepaid)), C(label)
    the C(name), C(limit) the C(limit_amount). C(unit_factor) and other agent-only keys (for example
    C(backend_name)) are not sent. When no C(limit_period) is configured the component keeps the
    one Waldur has.
  - Components that Waldur has and the configuration does not are left alone.
  - Then every plan of the offering gets a price for every component of the offering with
    C(update_prices) on the plan. The price is the configured C(price), else the one the plan already
    has, else 0. Waldur cannot finish an Update order whose limits name a component without a price in
    the resource's plan (HTTP 500 C(PlanComponent matching query does not exist)), so a component
    is never left unpriced. A plan whose prices already match is not written.
  - A plan that has resources may take new prices from the next billing period (Waldur 7.0.7's
    C(update_prices) writes them as the plan's C(future_prices) and its C(prices) stay). A plan to be
    priced is read first, its future prices are what is compared, and it is read again after the
    write; the result says when the new prices apply from the next period (RV(plans[].next_period)).
    A second run writes nothing.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
  - waldur.site_agent.waldur
attributes:
  check_mode:
    support: full
    details:
      - Reads and compares; RV(results[].action) says what would be done, nothing is written.
  diff_mode:
    support: full
    details:
      - RV(diff) lists each component and plan that changed, with its fields before and after.
options:
  offering_uuid:
    description:
      - UUID of the offering.
    type: str
    required: true
  components:
    description:
      - The offering's C(backend_components) mapping from the agent configuration, component type
        to settings.
      - Required per component, C(measured_unit), C(accounting_type) (C(usage), C(limit), C(one),
        C(fixed) or C(few)) and C(label).
      - Optional, sent to Waldur when given, C(limit), C(description), C(min_value), C(max_value),
        C(max_available_limit), C(default_limit), C(limit_period) (C(month), C(quarterly),
        C(annual), C(total)), C(article_code), C(is_boolean), C(is_prepaid),
        C(min_prepaid_duration), C(max_prepaid_duration).
      - C(price), a number of 0 or more, is the component's price in every plan of the offering
        (not a component field; see the description).
      - Other keys are ignored.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Load the components of an offering
  waldur.site_agent.waldur_components:
    api_url: https://waldur.example.com/api/
    api_token: "{{ waldur_api_token }}"
    offering_uuid: a0000000000000000000000000000001
    components:
      cpu:
        measured_unit: Cores
        accounting_type: limit
        label: CPU cores
        unit_factor: 1
        backend_name: cores
      ram:
        measured_unit: MiB
        accounting_type: limit
        label: Memory
        limit: 65536
        price: 0.002
"""

RETURN = r"""
diff:
  description:
    - With C(--diff), one entry per component created or updated and per plan whose prices changed
      (or would change), for Ansible's diff output; C(before_header) and C(after_header) name the
      offering and the component or plan.
  returned: with C(--diff), when something changed
  type: list
  elements: dict
  sample:
    - before: {price: "0.50"}
      after: {price: "0.75"}
      before_header: offering 0b5e5f2a9d3c4e7f8a1b2c3d4e5f6a7b plan Basic (6c1f2e3d4c5b4a69788796a5b4c3d2e1) prices
      after_header: offering 0b5e5f2a9d3c4e7f8a1b2c3d4e5f6a7b plan Basic (6c1f2e3d4c5b4a69788796a5b4c3d2e1) prices
results:
  description: One result per configured component, sorted by type.
  returned: always
  type: list
  elements: dict
  contains:
    type:
      description: Component type.
      type: str
    action:
      description: C(created), C(updated) or C(unchanged) (what would be done, in check mode).
      type: str
    changed:
      description: Whether the component was (or would be) written.
      type: bool
    failed:
      description: Whether Waldur refused the component.
      type: bool
    msg:
      description: What happened.
      type: str
    changes:
      description: For C(updated), the fields that differ, each with its C(before) and C(after) value.
      type: dict
  sample:
    - type: cpu
      action: updated
      changed: true
      failed: false
      msg: "updated: name"
      changes: {name: {before: CPU, after: CPU cores}}
    - type: gpu
      action: created
      changed: true
      failed: false
      msg: created
plans:
  description: One result per plan of the offering, with the prices it was (or would be) given.
  returned: always
  type: list
  elements: dict
  contains:
    uuid:
      description: Plan UUID.
      type: str
    name:
      description: Plan name.
      type: str
    action:
      description: C(priced) or C(unchanged) (what would be done, in check mode).
      type: str
    changed:
      description: Whether the plan's prices were (or would be) written.
      type: bool
    failed:
      description: Whether Waldur refused the prices.
      type: bool
    msg:
      description: What happened.
      type: str
    changes:
      description: For C(priced), each component whose price changes, with its C(before) (null when it had
        none; for a plan with resources, its future price where it has one) and C(after) price.
      type: dict
    next_period:
      description: For C(priced), whether the prices apply from the next billing period (Waldur stored
        them as the plan's future prices, as 7.0.7 does for a plan that has resources).
      type: bool
  sample:
    - uuid: d0000000000000000000000000000002
      name: Default plan
      action: priced
      changed: true
      failed: false
      msg: "priced: gpu none -> 0"
      changes: {gpu: {before: null, after: 0.0}}
      next_period: false
api_calls:
  description: Waldur HTTP calls made by this task (C(reads), C(writes), C(retries)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from decimal import Decimal, InvalidOperation

from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import WaldurApiError
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import provider_offering_path
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.module import WaldurModule

REQUIRED_KEYS = ("measured_unit", "accounting_type", "label")
BILLING_TYPES = ("usage", "limit", "one", "fixed", "few")
LIMIT_PERIODS = ("month", "quarterly", "annual", "total")
# configuration key -> Waldur field, for the optional keys Waldur's component API takes
OPTIONAL_FIELDS = (
    ("limit", "limit_amount"),
    ("description", "description"),
    ("min_value", "min_value"),
    ("max_value", "max_value"),
    ("max_available_limit", "max_available_limit"),
    ("default_limit", "default_limit"),
    ("limit_period", "limit_period"),
    ("article_code", "article_code"),
    ("is_boolean", "is_boolean"),
    ("is_prepaid", "is_prepaid"),
    ("min_prepaid_duration", "min_prepaid_duration"),
    ("max_prepaid_duration", "max_prepaid_duration"),
)
# The configuration key holding a component's price in the offering's plans (not a component field).
PRICE_KEY = "price"
INTEGER_FIELDS = ("limit_amount", "min_value", "max_value", "max_available_limit", "default_limit",
                  "min_prepaid_duration", "max_prepaid_duration")


def component_body(module, component_type, config):
    """The Waldur request body for one configured component; bad config fails naming the key."""
    where = "components.%s" % component_type
    if not isinstance(config, dict):
        module.fail_json(msg="%s must be a mapping of settings, got %s" % (where, type(config).__name__))
    missing = [key for key in REQUIRED_KEYS if config.get(key) in (None, "")]
    if missing:
        module.fail_json(msg="%s is missing %s (required: %s)" % (where, ", ".join(missing), ", ".join(REQUIRED_KEYS)))
    billing_type = str(config["accounting_type"])
    if billing_type not in BILLING_TYPES:
        module.fail_json(msg="%s.accounting_type must be one of %s, got %r"
                         % (where, ", ".join(BILLING_TYPES), config["accounting_type"]))
    body = {"type": component_type, "billing_type": billing_type, "name": str(config["label"]),
            "measured_unit": str(config["measured_unit"])}
    for key, field in OPTIONAL_FIELDS:
        if key not in config or config[key] is None:
            continue
        value = config[key]
        if field in INTEGER_FIELDS:
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = None
            if number is None or isinstance(value, bool) or number != int(number):
                module.fail_json(msg="%s.%s must be a whole number, got %r" % (where, key, value))
            value = int(number)
        elif field == "limit_period" and value not in LIMIT_PERIODS:
            module.fail_json(msg="%s.limit_period must be one of %s, got %r" % (where, ", ".join(LIMIT_PERIODS), value))
        body[field] = value
    if billing_type == "one" and "is_prepaid" not in body:
        body["is_prepaid"] = True
    return body


def _same(wanted, existing):
    if isinstance(wanted, bool) or isinstance(existing, bool):
        return bool(wanted) == bool(existing) if existing is not None else False
    if isinstance(wanted, (int, float)) and existing is not None:
        try:
            return float(wanted) == float(existing)
        except (TypeError, ValueError):
            return False
    if wanted == "" and existing is None:
        return True
    return wanted == existing


def differences(body, existing):
    return dict((field, {"before": existing.get(field), "after": value})
                for field, value in sorted(body.items())
                if field != "type" and not _same(value, existing.get(field)))


def configured_price(module, component_type, config):
    """The configured ``price`` as a Decimal, None when not given; bad values fail naming the key."""
    value = config.get(PRICE_KEY)
    if value is None:
        return None
    try:
        price = Decimal(str(value))
    except InvalidOperation:
        price = None
    if price is None or isinstance(value, bool) or not price.is_finite() or price < 0:
        module.fail_json(msg="components.%s.price must be a number of 0 or more, got %r" % (component_type, value))
    return price


def _decimal(value):
    try:
        return Decimal(str(value)) if value is not None else None
    except InvalidOperation:
        return None


def _current_prices(plan):
    """What the plan will charge for each component: its future price where Waldur holds one
    (``update_prices`` on a plan that has resources writes ``future_prices`` and keeps ``prices``),
    else its price."""
    current = dict((key, _decimal(value)) for key, value in (plan.get("prices") or {}).items())
    current.update((key, _decimal(value)) for key, value in (plan.get("future_prices") or {}).items()
                   if _decimal(value) is not None)
    return current


def wanted_prices(plan, component_types, configured):
    """``(prices, changes)`` for one plan: every component priced (configured, else the plan's
    own, else 0), and the components whose price differs from what the plan has (its future
    price where it has one)."""
    current = _current_prices(plan)
    prices, changes = {}, {}
    for component_type in sorted(component_types):
        before = current.get(component_type)
        after = configured.get(component_type)
        if after is None:
            after = before if before is not None else Decimal(0)
        prices[component_type] = after
        if before is None or before != after:
            changes[component_type] = {"before": float(before) if before is not None else None, "after": float(after)}
    return prices, changes


def _read_plan(module, client, plan):
    try:
        return dict(plan, **(client.get("marketplace-plans/%s/" % plan.get("uuid")) or {}))
    except WaldurApiError as exc:
        module.warn("could not read plan %s (%s): %s" % (plan.get("name"), plan.get("uuid"), exc))
        return None


def price_plans(module, client, plans, component_types, configured):
    """Give every plan a price for every component; one ``update_prices`` per plan that needs it.
    A plan that seems to need it is read first (the offering's listing of plans may not carry
    ``future_prices``), and read again after the write: on a plan that has resources Waldur keeps
    the prices and stores the new ones as future prices, from the next billing period, which the
    result says (``next_period``). A price already set for then is not written again."""
    results = []
    for plan in plans:
        prices, changes = wanted_prices(plan, component_types, configured)
        if changes:
            plan = _read_plan(module, client, plan) or plan
            prices, changes = wanted_prices(plan, component_types, configured)
        result = {"uuid": plan.get("uuid"), "name": plan.get("name") or "", "changed": False, "failed": False}
        if not changes:
            results.append(dict(result, action="unchanged", msg="unchanged"))
            continue
        named = ", ".join("%s %s -> %s" % (key, "none" if change["before"] is None else _plain(change["before"]),
                                           _plain(change["after"])) for key, change in sorted(changes.items()))
        result.update(action="priced", changed=True, changes=changes, next_period=False, msg="priced: %s" % named)
        if module.check_mode:
            result["msg"] = "would be " + result["msg"]
            results.append(result)
            continue
        try:
            client.post("marketplace-plans/%s/update_prices/" % plan.get("uuid"),
                        json={"prices": dict((key, str(value)) for key, value in prices.items())})
        except WaldurApiError as exc:
            result.update(changed=False, failed=True, msg="update_prices failed: %s" % exc)
            results.append(result)
            continue
        stored = _read_plan(module, client, plan) or {}
        now = dict((key, _decimal(value)) for key, value in (stored.get("prices") or {}).items())
        future = dict((key, _decimal(value)) for key, value in (stored.get("future_prices") or {}).items())
        later = sorted(key for key in changes if now.get(key) != prices[key] and future.get(key) == prices[key])
        if later:
            result.update(next_period=True, msg=(
                "priced from the next billing period: %s (the plan has resources: Waldur keeps the current "
                "prices until then)" % named))
        results.append(result)
    return results


def _plain(number):
    """A price as people write it (0.003, 4, not 0.0030000000 or 4.0)."""
    text = ("%.10f" % number).rstrip("0").rstrip(".")
    return text or "0"


def main(build=AnsibleModule):
    # build: AnsibleModule, or what the action plugin runs the module with (plugin_utils/controller_module.py)
    argument_spec = dict(
        offering_uuid=dict(type="str", required=True),
        components=dict(type="dict", required=True),
    )
    module = WaldurModule(build=build, argument_spec=argument_spec)
    params = module.params
    offering_uuid = module.uuid_param(params["offering_uuid"], "offering_uuid")
    if not params["components"]:
        module.fail_json(msg="components is empty: give the offering's backend_components mapping")
    bodies = [(str(name), component_body(module, str(name), config))
              for name, config in sorted(params["components"].items(), key=lambda pair: str(pair[0]))]
    configured = dict((str(name), configured_price(module, str(name), config))
                      for name, config in params["components"].items() if isinstance(config, dict))
    configured = dict((key, value) for key, value in configured.items() if value is not None)
    client = module.client()
    try:
        offering = client.get(provider_offering_path(offering_uuid), params={"field": ["components", "plans"]}) or {}
    except WaldurApiError as exc:
        module.fail_from_error(exc, msg="could not read the components of offering %s" % offering_uuid)
    existing = dict((component.get("type"), component) for component in offering.get("components") or []
                    if isinstance(component, dict))
    plans = [plan for plan in offering.get("plans") or [] if isinstance(plan, dict) and plan.get("uuid")]

    results, diffs = [], []
    for component_type, body in bodies:
        current = existing.get(component_type)
        result = {"type": component_type, "changed": False, "failed": False}
        if current is None:
            result.update(action="created", changed=True, msg="created")
            diff = {"before": {}, "after": body}
            call = ("create_offering_component", body)
        else:
            if "limit_period" not in body and current.get("limit_period"):
                body["limit_period"] = current["limit_period"]  # keep what Waldur has
            changes = differences(body, current)
            if not changes:
                results.append(dict(result, action="unchanged", msg="unchanged"))
                continue
            result.update(action="updated", changed=True, changes=changes, msg="updated: %s" % ", ".join(changes))
            diff = {"before": dict((field, change["before"]) for field, change in changes.items()),
                    "after": dict((field, change["after"]) for field, change in changes.items())}
            call = ("update_offering_component", dict(body, uuid=current.get("uuid")))
        if module.check_mode:
            result["msg"] = "would be " + result["msg"]
        else:
            try:
                client.post(provider_offering_path(offering_uuid, call[0]), json=call[1])
            except WaldurApiError as exc:
                result.update(changed=False, failed=True, msg="%s failed: %s" % (call[0], exc))
        if result["changed"]:
            header = "offering %s component %s" % (offering_uuid, component_type)
            diffs.append(dict(diff, before_header=header, after_header=header))
        results.append(result)

    # Components Waldur has after this run (a refused creation is not one).
    component_types = set(existing) | set(r["type"] for r in results if r["action"] == "created" and not r["failed"])
    plan_results = price_plans(module, client, plans, component_types, configured)
    for plan in plan_results:
        if plan["changed"]:
            header = "offering %s plan %s (%s) prices" % (offering_uuid, plan.get("name"), plan["uuid"])
            diffs.append({"before": dict((key, change["before"]) for key, change in plan["changes"].items()),
                          "after": dict((key, change["after"]) for key, change in plan["changes"].items()),
                          "before_header": header, "after_header": header})

    failures = ["component %s: %s" % (r["type"], r["msg"]) for r in results if r["failed"]]
    failures += ["plan %s (%s): %s" % (r["name"], r["uuid"], r["msg"]) for r in plan_results if r["failed"]]
    summary = dict(changed=any(result["changed"] for result in results + plan_results), results=results,
                   plans=plan_results)
    if module._diff and diffs:
        summary["diff"] = diffs
    if failures:
        module.fail_json(msg="; ".join(failures), **summary)
    module.exit_json(**summary)


if __name__ == "__main__":
    main()
