"""The state of the Waldur simulator: the marketplace objects, their state machines and
their API representations.

Everything here is plain dicts behind :class:`Marketplace`; the HTTP layer
(``simulator.py``) does auth, paging and filters and calls into it. Rules follow what a
real Waldur does (reference: real-waldur-samples.md section 5 and waldur-site-agent.md
section 2.1); where the simulator chooses, the choice is stated where it is made.
"""

from __future__ import annotations

import copy
import itertools
import re
import uuid as uuid_lib
from datetime import date, datetime, timezone
from decimal import Decimal, InvalidOperation

from tests.simulators.waldur import presets

ORDER_STATES = ("pending-consumer", "pending-provider", "pending-project", "pending-start-date",
                "executing", "done", "erred", "canceled", "rejected")
ORDER_IN_PROGRESS = ("pending-consumer", "pending-provider", "pending-project",
                     "pending-start-date", "executing")
ORDER_TYPES = ("Create", "Update", "Terminate", "Restore")
RESOURCE_STATES = ("Creating", "OK", "Erred", "Updating", "Terminating", "Terminated")
BILLING_TYPES = ("fixed", "usage", "limit", "one", "few")
LIMIT_PERIODS = ("month", "quarterly", "annual", "total", "", None)
USAGE_STATES = ("OK", "Updating", "Terminating")  # resource states that accept usage
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_TWO_PLACES = Decimal("0.01")


class ApiError(Exception):
    """An error answer: HTTP status and the JSON body Waldur would send."""

    def __init__(self, status: int, body):
        super().__init__(status, body)
        self.status = status
        self.body = body if isinstance(body, (dict, list)) else {"detail": body}


class HtmlError(Exception):
    """An error Django answers with an HTML page (DEBUG=True): an unhandled exception (500)
    or a URL the server does not have (404)."""

    def __init__(self, status: int, title: str):
        super().__init__(status, title)
        self.status = status
        self.title = title

    def page(self) -> str:
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><title>{self.title}</title></head>"
                f"<body><h1>{self.title}</h1></body></html>\n")


def normalize_uuid(value) -> str | None:
    """32 lower-case hex digits for a dashed or undashed UUID, else None."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower().replace("-", "")
    return text if _HEX32.match(text) else None


def new_uuid() -> str:
    return uuid_lib.uuid4().hex


def now() -> datetime:
    return datetime.now(timezone.utc)


def iso(moment: datetime | None) -> str | None:
    """Waldur's timestamp format: ``2026-11-29T12:04:26.244102Z``."""
    if moment is None:
        return None
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")[:50].strip("-")
    return slug or "resource"


def waldur_slug(name: str, taken) -> str:
    """Waldur 7.0.7's generated slug: the first 8 characters of the slugified name, a dash and
    a number (``alloc-one`` -> ``alloc-on-1``, ``Consumer Project`` -> ``consumer-1``); an empty
    or odd name keeps only ``-N`` (``-3``). ``taken``: the slugs that exist already."""
    prefix = re.sub(r"[^a-z0-9]+", "-", str(name or "").lower()).strip("-")[:8]
    return "%s-%d" % (prefix, 1 + sum(1 for slug in taken if slug.startswith(prefix)))


# The message of Waldur 7.0.7's Slurm update processor when the resource's allocation is not OK:
# it stays Creation Scheduled (5) after a Create and Update Scheduled (1) after an Update.
BACKING_STATE_CODES = {"creation_scheduled": 5, "update_scheduled": 1}
SCHEDULE_UPDATING_ERROR = "Can't switch from state '%d' using method 'schedule_updating'"


def decimal_string(amount: Decimal) -> str:
    """Usage as Waldur returns it: a decimal string with two places (``"15.00"``)."""
    return str(amount.quantize(_TWO_PLACES))


def month_start(day: date) -> date:
    return day.replace(day=1)


def valid_states_error(states) -> ApiError:
    return ApiError(409, {"detail": "Valid states for operation: %s." % ", ".join(states)})


def not_found(model: str) -> ApiError:
    return ApiError(404, {"detail": f"No {model} matches the given query."})


class Marketplace:
    """All objects of one simulated Waldur. ``url`` turns an API path into an absolute URL."""

    def __init__(self, url):
        self.url = url
        # The simulator's quirks (a callable: the simulator replaces its dict on reset) and how a
        # processor runs later (``schedule(delay, order)``; None runs it at once).
        self.quirks = lambda: {}
        self.schedule = None
        self._seq = itertools.count(1)
        self.customers: dict[str, dict] = {}
        self.projects: dict[str, dict] = {}
        self.users: dict[str, dict] = {}
        self.offerings: dict[str, dict] = {}
        self.plans: dict[str, dict] = {}
        self.service_providers: dict[str, dict] = {}
        self.ssh_keys: list[dict] = []
        self.orders: dict[str, dict] = {}
        self.resources: dict[str, dict] = {}
        self.usages: list[dict] = []
        # the usages of each resource (a database index): a report pass over 10,000 resources
        # must not cost a scan of every stored usage per set_usage, under the simulator's lock
        self.usages_by_resource: dict[str, list[dict]] = {}

    # ------------------------------------------------------------------ seeding
    def load(self, preset: str | None) -> None:
        preset = preset or "default"
        if preset not in presets.PRESETS:
            raise ValueError(f"unknown Waldur preset {preset!r}; known: {', '.join(presets.PRESETS)}")
        created = now()
        self.customers = {
            presets.PROVIDER_CUSTOMER_UUID: dict(uuid=presets.PROVIDER_CUSTOMER_UUID, name="Provider Org",
                                                 slug="provider-org", abbreviation="PRV"),
            presets.CONSUMER_CUSTOMER_UUID: dict(uuid=presets.CONSUMER_CUSTOMER_UUID, name="Consumer Org",
                                                 slug="consumer-org", abbreviation="CNS"),
        }
        self.projects = {
            presets.PROJECT_UUID: dict(uuid=presets.PROJECT_UUID, name="Consumer Project",
                                       slug="consumer-project", description="Machines of the consumer",
                                       customer_uuid=presets.CONSUMER_CUSTOMER_UUID,
                                       team=[dict(user_uuid=u, role=r) for u, r in presets.PROJECT_TEAM]),
        }
        self.users = {}
        for uuid, username, first, last, email, token, staff, owner_of in presets.USERS:
            self.users[uuid] = dict(uuid=uuid, username=username, first_name=first, last_name=last,
                                    full_name=f"{first} {last}", email=email, token=token,
                                    is_staff=staff, owner_of=[owner_of] if owner_of else [],
                                    date_joined=created)
        self.offerings, self.plans = {}, {}
        for offering_uuid, name, plan_uuid, plan_name, quotas, prices, component_prefix in presets.OFFERINGS:
            components = [
                self._component(dict(uuid=f"{component_prefix}{index:02d}", type=ctype, name=cname,
                                     measured_unit=unit, billing_type="limit", limit_period="total",
                                     unit_factor=1))
                for index, (ctype, cname, unit) in enumerate(presets.COMPONENTS, start=1)
            ]
            self.offerings[offering_uuid] = dict(
                uuid=offering_uuid, name=name, slug=slugify(name), type="Marketplace.Slurm",
                customer_uuid=presets.PROVIDER_CUSTOMER_UUID, description=f"{name} sold by the site agent",
                components=components, plugin_options={}, state="Active", shared=True, billable=True,
                backend_id="", created=created, order_form={"order": [], "options": {}})
            self.plans[plan_uuid] = dict(uuid=plan_uuid, name=plan_name, offering_uuid=offering_uuid,
                                         quotas=dict(quotas), unit="month", description="", created=created,
                                         prices={ctype: Decimal(price) for ctype, price in prices.items()})
        self.service_providers = {
            presets.SERVICE_PROVIDER_UUID: dict(uuid=presets.SERVICE_PROVIDER_UUID,
                                                customer_uuid=presets.PROVIDER_CUSTOMER_UUID,
                                                description="Site agent provider", created=created),
        }
        self.ssh_keys = [dict(key, user_uuid=presets.PROVIDER_USER_UUID, created=created)
                         for key in presets.SSH_KEYS]
        self.orders, self.resources, self.usages, self.usages_by_resource = {}, {}, [], {}
        if preset == "default":
            for order_uuid, resource_uuid, offering_uuid, plan_uuid, attributes, limits in presets.DEFAULT_ORDERS:
                self.seed_order(offering_uuid, type="Create", state="pending-provider", uuid=order_uuid,
                                resource_uuid=resource_uuid, plan_uuid=plan_uuid,
                                attributes=attributes, limits=limits)

    @staticmethod
    def _component(data: dict) -> dict:
        component = dict(description="", measured_unit="", unit_factor=1, limit_period=None,
                         limit_amount=None, article_code="", max_value=None, min_value=None,
                         max_available_limit=None, is_boolean=False, default_limit=None,
                         is_prepaid=False, overage_component=None, min_prepaid_duration=None,
                         max_prepaid_duration=None)
        component.update(data)
        return component

    def seed_resource(self, offering_uuid, name, backend_id="", state="OK", attributes=None, limits=None,
                      uuid=None, plan_uuid=None, project_uuid=presets.PROJECT_UUID, options=None,
                      backend_metadata=None, paused=False, downscaled=False) -> dict:
        """Put a provider resource straight into the state (no order). Returns its record."""
        offering_uuid = self._existing(self.offerings, offering_uuid, "Offering")
        if state not in RESOURCE_STATES:
            raise ValueError(f"resource state must be one of {RESOURCE_STATES}, not {state!r}")
        if plan_uuid is None:
            plan_uuid = next((p["uuid"] for p in self.plans.values() if p["offering_uuid"] == offering_uuid), None)
        stamp = now()
        resource_uuid = normalize_uuid(uuid) if uuid else new_uuid()
        slug = (waldur_slug(name, [r["slug"] for r in self.resources.values()])
                if self.quirks().get("waldur_slugs") else slugify(name))
        resource = dict(
            uuid=resource_uuid, seq=next(self._seq), name=name, slug=slug,
            offering_uuid=offering_uuid, plan_uuid=normalize_uuid(plan_uuid) if plan_uuid else None,
            project_uuid=self._existing(self.projects, project_uuid, "Project"), state=state,
            backend_id=backend_id or "", attributes=dict(attributes or {"name": name}),
            limits=dict(limits or {}), options=dict(options or {}),
            backend_metadata=dict(backend_metadata or {}), paused=paused, downscaled=downscaled,
            restrict_member_access=False, error_message="", error_traceback="", description="",
            scope_uuid=new_uuid() if state != "Creating" else None, created=stamp, modified=stamp,
            last_sync=stamp, creation_order_uuid=None,
            # the state of the plugin's own record behind the resource (7.0.7's Slurm allocation):
            # creation_scheduled after a Create, update_scheduled after an Update, or ok once the
            # provider set it so (``set_backing_state``); only processor_errs_updates reads it
            backing_state="creation_scheduled")
        self.resources[resource_uuid] = resource
        return resource

    def seed_order(self, offering_uuid, type="Create", state="pending-provider", resource_uuid=None,
                   name=None, attributes=None, limits=None, uuid=None, plan_uuid=None,
                   project_uuid=presets.PROJECT_UUID, backend_id="", created_by=presets.CONSUMER_USER_UUID,
                   processed=True) -> dict:
        """Put an order straight into the state. A Create order without ``resource_uuid``
        (or naming a resource that does not exist) gets a new ``Creating`` resource; other
        types need an existing resource. An ``executing`` order looks as Waldur leaves it once its
        processor has run (``processed``): approved, a Create's plugin object made, an Update's
        resource ``Updating``, a Terminate's ``Terminating``; ``processed=False`` seeds one the
        worker has not reached yet. Returns the order record."""
        offering_uuid = self._existing(self.offerings, offering_uuid, "Offering")
        if type not in ORDER_TYPES:
            raise ValueError(f"order type must be one of {ORDER_TYPES}, not {type!r}")
        if type == "Restore" and self.quirks().get("no_restore"):
            raise ValueError('"Restore" is not a valid choice.')
        if state not in ORDER_STATES:
            raise ValueError(f"order state must be one of {ORDER_STATES}, not {state!r}")
        attributes = dict(attributes or {})
        resource = self.resources.get(normalize_uuid(resource_uuid) or "")
        if resource is None:
            if type != "Create":
                raise ValueError(f"a {type} order needs an existing resource_uuid")
            name = name or attributes.get("name") or f"resource-{len(self.resources) + 1}"
            attributes.setdefault("name", name)
            resource = self.seed_resource(offering_uuid, name, state="Creating", attributes=attributes,
                                          limits=limits, uuid=resource_uuid, plan_uuid=plan_uuid,
                                          project_uuid=project_uuid)
        order = self._new_order(type, resource, attributes, dict(limits or {}), created_by,
                                state=state, uuid=uuid, plan_uuid=plan_uuid or resource["plan_uuid"])
        order["backend_id"] = backend_id
        if type == "Create" and resource["creation_order_uuid"] is None:
            resource["creation_order_uuid"] = order["uuid"]
        if state == "executing":
            order.update(provider_reviewed_by=presets.PROVIDER_USER_UUID, provider_reviewed_at=order["created"])
            if processed:  # the trace a processor that ran without error leaves (process_order)
                if type == "Create":
                    resource["scope_uuid"] = resource["scope_uuid"] or new_uuid()
                    order["scope_uuid"] = resource["scope_uuid"]
                elif type == "Update" and resource["state"] not in ("Erred", "Terminated"):
                    resource["state"] = "Updating"
                elif type == "Terminate":
                    resource["state"] = "Terminating"
        return order

    def _new_order(self, type, resource, attributes, limits, created_by, state, uuid=None, plan_uuid=None):
        stamp = now()
        order = dict(
            uuid=normalize_uuid(uuid) if uuid else new_uuid(), seq=next(self._seq), type=type, state=state,
            offering_uuid=resource["offering_uuid"], plan_uuid=plan_uuid, project_uuid=resource["project_uuid"],
            resource_uuid=resource["uuid"], attributes=attributes, limits=limits, created_by=created_by,
            created=stamp, modified=stamp, error_message="", error_traceback="", backend_id="",
            consumer_reviewed_by=None, consumer_reviewed_at=None, provider_reviewed_by=None,
            provider_reviewed_at=None, completed_at=None,
            # Waldur puts the plugin's own object (the "scope") here once processing starts;
            # it is NOT the marketplace resource uuid (that is marketplace_resource_uuid).
            scope_uuid=resource["scope_uuid"] if type != "Create" else None)
        self.orders[order["uuid"]] = order
        return order

    @staticmethod
    def _existing(table: dict, value, model: str) -> str:
        key = normalize_uuid(value)
        if key is None or key not in table:
            raise ValueError(f"no {model} {value!r}")
        return key

    # ------------------------------------------------------------------ lookups
    def get(self, table: dict, key, model: str) -> dict:
        record = table.get(normalize_uuid(key) or "")
        if record is None:
            raise not_found(model)
        return record

    def order_in_progress(self, resource_uuid: str) -> dict | None:
        for order in sorted(self.orders.values(), key=lambda o: o["seq"]):
            if order["resource_uuid"] == resource_uuid and order["state"] in ORDER_IN_PROGRESS:
                return order
        return None

    def offering_component_types(self, offering_uuid: str, billing_types=None) -> list[str]:
        return [c["type"] for c in self.offerings[offering_uuid]["components"]
                if billing_types is None or c["billing_type"] in billing_types]

    # ------------------------------------------------------------------ order state machine
    @staticmethod
    def _require(order: dict, states) -> None:
        if order["state"] not in states:
            raise valid_states_error(states)

    def touch(self, *records) -> None:
        stamp = now()
        for record in records:
            record["modified"] = stamp

    def _resource_of(self, order: dict) -> dict | None:
        return self.resources.get(order["resource_uuid"])

    def approve_by_consumer(self, order: dict, user: dict) -> None:
        self._require(order, ("pending-consumer",))
        order.update(state="pending-provider", consumer_reviewed_by=user["uuid"], consumer_reviewed_at=now())
        self.touch(order)

    def approve_by_provider(self, order: dict, user: dict) -> None:
        """pending-provider -> executing; then Waldur's order processor runs (its Celery task):
        at once, or ``processing_delay`` seconds later (``schedule``), as a background worker does."""
        self._require(order, ("pending-provider",))
        order.update(state="executing", provider_reviewed_by=user["uuid"], provider_reviewed_at=now(),
                     processor_pending=True)
        self.touch(order)
        delay = float(self.quirks().get("processing_delay") or 0)
        if delay > 0 and self.schedule is not None:
            self.schedule(delay, order)
        else:
            self.process_order(order)

    def process_order(self, order: dict) -> bool:
        """What Waldur's processor does for an approved order (once; False when it had run or the
        order was withdrawn). A Create without a name is erred whenever it runs, even once the
        order is done (done -> erred, the resource Erred with its backend id kept), as 7.0.7's
        Slurm processor reads ``attributes["name"]``. Otherwise a Create gets its plugin scope,
        an Update moves the resource to Updating (with ``processor_errs_updates``, as 7.0.7, it
        errs the Update unless the resource's backing record was set ok; the resource stays as it
        was) and a Terminate moves it to Terminating. Resource moves happen only while the order
        is still executing."""
        if not order.pop("processor_pending", False) or order["state"] in ("canceled", "rejected", "erred"):
            return False
        resource = self._resource_of(order)
        if order["type"] == "Create" and not str(order["attributes"].get("name") or "").strip():
            self._processor_erred(order, "'name'", "Traceback (most recent call last):\n"
                                  "  File \"waldur_mastermind/marketplace_slurm/processors.py\", in "
                                  "get_resource_name\nKeyError: 'name'")
            return True
        executing = order["state"] == "executing"
        if resource is not None:
            if order["type"] == "Create":
                resource["scope_uuid"] = resource["scope_uuid"] or new_uuid()
                order["scope_uuid"] = resource["scope_uuid"]
                resource["backing_state"] = "creation_scheduled"
            elif order["type"] == "Update":
                code = BACKING_STATE_CODES.get(resource.get("backing_state"))
                if self.quirks().get("processor_errs_updates") and code is not None:
                    self._processor_erred(order, SCHEDULE_UPDATING_ERROR % code,
                                          "Traceback (most recent call last):\n  File \"django_fsm/__init__.py\", "
                                          "in change_state\ndjango_fsm.TransitionNotAllowed: "
                                          + SCHEDULE_UPDATING_ERROR % code)
                    return True
                resource["backing_state"] = "update_scheduled"
                if executing:
                    resource["state"] = "Updating"
            elif order["type"] == "Terminate" and executing:
                resource["state"] = "Terminating"
            self.touch(resource)
        self.touch(order)
        return True

    def _processor_erred(self, order: dict, message: str, traceback: str) -> None:
        """The processor failed: the order is erred whatever its state (a done one too). A
        Create's resource becomes Erred, keeping its backend id; an Update's keeps its state (7.0.7
        left it OK); a Terminate's goes back to OK."""
        order.update(state="erred", error_message=message, error_traceback=traceback, completed_at=now())
        resource = self._resource_of(order)
        if resource is not None:
            if order["type"] in ("Create", "Restore"):
                resource.update(state="Erred", error_message=message, error_traceback=traceback)
            elif order["type"] == "Terminate" or resource["state"] == "Updating":
                resource["state"] = "OK"
            self.touch(resource)
        self.touch(order)

    def set_backing_state(self, resource: dict, state: str) -> None:
        """The provider's ``POST /api/marketplace-slurm-remote/<uuid>/set_state/ {"state": "ok"}``
        of 7.0.7 (not in the 8.0.5 schema, so the simulator offers it on its control API)."""
        if state not in ("ok", "creation_scheduled", "update_scheduled"):
            raise ValueError("backing state must be ok, creation_scheduled or update_scheduled, not %r" % state)
        resource["backing_state"] = state

    def reject_by_provider(self, order: dict, user: dict, comment: str | None = None) -> None:
        self._require(order, ("pending-consumer", "pending-provider"))
        order.update(state="rejected", provider_reviewed_by=user["uuid"], provider_reviewed_at=now(),
                     completed_at=now())
        if comment is not None:  # the reason the consumer sees (OrderProviderRejectionRequest)
            order["provider_rejection_comment"] = str(comment)
        resource = self._resource_of(order)
        if resource is not None and order["type"] == "Create":
            resource["state"] = "Terminated"
            self.touch(resource)
        self.touch(order)

    def set_state_executing(self, order: dict) -> None:
        """Moves the order only: unlike approve_by_provider no processor runs."""
        self._require(order, ("pending-consumer", "pending-provider", "erred"))
        order["state"] = "executing"
        self.touch(order)

    def set_state_done(self, order: dict) -> None:
        self._require(order, ("executing",))
        if self.unpriced_limit_components(order):  # the transaction rolls back: the order stays executing
            raise HtmlError(500, "DoesNotExist: PlanComponent matching query does not exist.")
        order.update(state="done", completed_at=now())
        resource = self._resource_of(order)
        if resource is not None:
            if order["type"] in ("Create", "Restore"):
                resource["state"] = "OK"
            elif order["type"] == "Update":
                resource["state"] = "OK"
                if order["limits"]:
                    resource["limits"] = dict(order["limits"])
                if order["plan_uuid"]:
                    resource["plan_uuid"] = order["plan_uuid"]
            elif order["type"] == "Terminate":
                resource["state"] = "Terminated"
            resource.update(error_message="", error_traceback="")
            self.touch(resource)
        self.touch(order)

    def set_state_erred(self, order: dict, error_message: str, error_traceback: str) -> None:
        """Any state -> erred (as Waldur allows). A Create's resource becomes Erred (kept,
        with or without a backend id, as Waldur 7.0.7 does); an Update's resource becomes
        Erred; a Terminate's resource stays (back to) OK."""
        order.update(state="erred", error_message=error_message, error_traceback=error_traceback,
                     completed_at=now())
        resource = self._resource_of(order)
        if resource is not None:
            if order["type"] in ("Create", "Update"):
                resource.update(state="Erred", error_message=error_message, error_traceback=error_traceback)
                self.touch(resource)
            elif order["type"] == "Terminate":
                resource["state"] = "OK"
                self.touch(resource)
        self.touch(order)

    # ------------------------------------------------------------------ consumer actions
    def create_order(self, user: dict, offering_uuid: str, project_uuid: str, plan_uuid: str | None,
                     attributes: dict, limits: dict) -> dict:
        """A Create order as the consumer submits it. The consumer token is an owner of the
        consumer organisation (and staff is staff), so the order skips pending-consumer
        and starts in pending-provider, as Waldur does for such users."""
        # Waldur takes an order without a name; the processor fails on it at approval.
        name = str(attributes.get("name") or "")
        resource = self.seed_resource(offering_uuid, name, state="Creating", attributes=attributes,
                                      limits=limits, plan_uuid=plan_uuid, project_uuid=project_uuid)
        order = self._new_order("Create", resource, dict(attributes), dict(limits), user["uuid"],
                                state="pending-provider", plan_uuid=plan_uuid)
        order.update(consumer_reviewed_by=user["uuid"], consumer_reviewed_at=order["created"])
        resource["creation_order_uuid"] = order["uuid"]
        return order

    def _check_no_order_in_progress(self, resource: dict) -> None:
        if self.order_in_progress(resource["uuid"]) is not None:
            raise ApiError(409, {"detail": "Resource already has an order in progress."})

    def update_limits(self, user: dict, resource: dict, limits: dict) -> dict:
        if resource["state"] != "OK":
            raise valid_states_error(("OK",))
        self._check_no_order_in_progress(resource)
        order = self._new_order("Update", resource, {}, dict(limits), user["uuid"],
                                state="pending-provider", plan_uuid=resource["plan_uuid"])
        order.update(consumer_reviewed_by=user["uuid"], consumer_reviewed_at=order["created"])
        return order

    def terminate(self, user: dict, resource: dict, attributes: dict) -> dict:
        if resource["state"] not in ("OK", "Erred"):
            raise valid_states_error(("OK", "Erred"))
        self._check_no_order_in_progress(resource)
        order = self._new_order("Terminate", resource, dict(attributes), {}, user["uuid"],
                                state="pending-provider", plan_uuid=resource["plan_uuid"])
        order.update(consumer_reviewed_by=user["uuid"], consumer_reviewed_at=order["created"])
        return order

    # ------------------------------------------------------------------ plan prices
    def unpriced_limit_components(self, order: dict) -> list[str]:
        """The components of an Update order's limits that have no price in the resource's
        plan. Waldur computes the new cost from the plan's PlanComponent rows when the order is
        done, so such an order cannot be finished (real-waldur-samples.md section 6b)."""
        if order["type"] != "Update":
            return []
        resource = self._resource_of(order)
        plan = self.plans.get(order["plan_uuid"] or (resource or {}).get("plan_uuid") or "")
        if plan is None:
            return []
        return sorted(key for key in order["limits"] if key not in plan["prices"])

    def plan_in_use(self, plan: dict) -> bool:
        return any(r["plan_uuid"] == plan["uuid"] and r["state"] != "Terminated" for r in self.resources.values())

    def update_prices(self, plan: dict, prices: dict) -> None:
        """Set the plan's price of each component given; the others keep theirs. With the
        ``future_prices`` quirk (7.0.7's serializer) a plan that has resources gets them as future
        prices, from the next billing period, and its current prices stay (a component that had
        no price row gets one, priced 0 until then)."""
        known = set(self.offering_component_types(plan["offering_uuid"]))
        unknown = sorted(set(prices) - known)
        if unknown:
            raise ApiError(400, {"prices": ["These components are invalid: %s." % ", ".join(unknown)]})
        if self.quirks().get("future_prices") and self.plan_in_use(plan):
            for key, value in prices.items():
                plan["prices"].setdefault(key, Decimal(0))
                plan.setdefault("future_prices", {})[key] = value
            return
        plan["prices"].update(prices)

    # ------------------------------------------------------------------ provider resource state
    def set_as_ok(self, resource: dict) -> None:
        """Erred (or any state but Terminated) -> OK, clearing the error, as newer Waldur's
        ``set_as_ok`` does for a service provider."""
        if resource["state"] == "Terminated":
            raise valid_states_error(("Creating", "OK", "Erred", "Updating", "Terminating"))
        resource.update(state="OK", error_message="", error_traceback="")
        self.touch(resource)

    # ------------------------------------------------------------------ usage
    def set_usage(self, resource: dict, usages: list[dict], billing_period: date, moment: datetime) -> None:
        """Validate every item first, then store; the same component and month overwrites."""
        if resource["state"] not in USAGE_STATES:
            # Real Waldur's words (an Erred resource takes no usage until it is set OK again).
            raise ApiError(400, {"resource": ["Resource is not in valid state."]})
        allowed = self.offering_component_types(resource["offering_uuid"], ("usage", "limit"))
        invalid = [item["type"] for item in usages if item["type"] not in allowed]
        if invalid:
            raise ApiError(400, {"non_field_errors": ["These components are invalid: %s." % ", ".join(invalid)]})
        components = {c["type"]: c for c in self.offerings[resource["offering_uuid"]]["components"]}
        for item in usages:
            existing = next((u for u in self.usages_by_resource.get(resource["uuid"], ())
                             if u["type"] == item["type"] and u["billing_period"] == billing_period), None)
            if existing is None:
                existing = dict(uuid=new_uuid(), seq=next(self._seq), resource_uuid=resource["uuid"],
                                type=item["type"], name=components[item["type"]]["name"],
                                measured_unit=components[item["type"]]["measured_unit"],
                                billing_period=billing_period, created=now())
                self.usages.append(existing)
                self.usages_by_resource.setdefault(resource["uuid"], []).append(existing)
            existing.update(usage=item["amount"], description=item.get("description", ""),
                            recurring=bool(item.get("recurring", False)), date=moment, modified=now())

    @staticmethod
    def _decimal_field(value, decimal_places: int) -> Decimal:
        """A value as DRF's DecimalField reads it (any number or numeric string), or ValueError
        with DRF's words."""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError("A valid number is required.")
        try:
            amount = Decimal(str(value).strip())
        except InvalidOperation:
            raise ValueError("A valid number is required.") from None
        if not amount.is_finite():
            raise ValueError("A valid number is required.")
        if amount.as_tuple().exponent < -decimal_places:  # DRF counts trailing zeros too ("1.500")
            raise ValueError(f"Ensure that there are no more than {decimal_places} decimal places.")
        return amount

    @classmethod
    def parse_price(cls, value) -> Decimal:
        """A plan price as Waldur's DecimalField(max_digits=22, decimal_places=10, min_value=0) reads it."""
        amount = cls._decimal_field(value, 10)
        if amount < 0:
            raise ValueError("Ensure this value is greater than or equal to 0.")
        return amount

    @classmethod
    def parse_amount(cls, value) -> Decimal:
        """A usage amount as Waldur's DecimalField(max_digits=18, decimal_places=2) reads it."""
        amount = cls._decimal_field(value, 2)
        if len(amount.quantize(_TWO_PLACES).as_tuple().digits) > 18:
            raise ValueError("Ensure that there are no more than 18 digits in total.")
        return amount

    # ------------------------------------------------------------------ offering components
    def create_component(self, offering: dict, data: dict) -> dict:
        if data["type"] in [c["type"] for c in offering["components"]]:
            raise ApiError(400, {"type": [f"Component with type {data['type']} already exists."]})
        component = self._component(dict(data, uuid=new_uuid()))
        offering["components"].append(component)
        return component

    def update_component(self, offering: dict, data: dict) -> dict:
        component = next((c for c in offering["components"] if c["uuid"] == data["uuid"]), None)
        if component is None:
            raise not_found("OfferingComponent")
        clash = [c for c in offering["components"] if c["type"] == data["type"] and c is not component]
        if clash:
            raise ApiError(400, {"type": [f"Component with type {data['type']} already exists."]})
        component.update({k: v for k, v in data.items() if k != "uuid"})
        return component

    # ------------------------------------------------------------------ representations
    def _customer_fields(self, customer_uuid: str, prefix: str = "customer") -> dict:
        customer = self.customers[customer_uuid]
        return {f"{prefix}_name": customer["name"], f"{prefix}_uuid": customer_uuid,
                f"{prefix}_slug": customer["slug"]}

    def component_repr(self, component: dict) -> dict:
        data = {k: component[k] for k in (
            "uuid", "billing_type", "type", "name", "description", "measured_unit", "unit_factor",
            "limit_period", "limit_amount", "article_code", "max_value", "min_value", "max_available_limit",
            "is_boolean", "default_limit", "is_prepaid", "overage_component", "min_prepaid_duration",
            "max_prepaid_duration")}
        data.update(factor=None, is_builtin=False)
        return data

    def _plan_common(self, plan: dict) -> dict:
        offering = self.offerings[plan["offering_uuid"]]
        return dict(
            url=self.url(f"/api/marketplace-plans/{plan['uuid']}/"), uuid=plan["uuid"], name=plan["name"],
            description=plan["description"], article_code="", max_amount=None, archived=False, is_active=True,
            unit_price="0.0000000000", unit=plan["unit"], init_price=0.0, switch_price=0.0, backend_id="",
            organization_groups=[],
            # Only priced components have a PlanComponent row, so only they are listed.
            components=[dict(type=c["type"], name=c["name"], measured_unit=c["measured_unit"],
                             amount=int(plan["quotas"].get(c["type"], 0)),
                             price="%.10f" % plan["prices"][c["type"]],
                             future_price=("%.10f" % plan["future_prices"][c["type"]]
                                           if c["type"] in plan.get("future_prices", {}) else None),
                             discount_threshold=None, discount_rate=None)
                        for c in offering["components"] if c["type"] in plan["prices"]],
            prices={c["type"]: float(plan["prices"][c["type"]]) for c in offering["components"]
                    if c["type"] in plan["prices"]},
            future_prices={k: float(v) for k, v in plan.get("future_prices", {}).items()},
            quotas=dict(plan["quotas"]),
            resources_count=sum(1 for r in self.resources.values()
                                if r["plan_uuid"] == plan["uuid"] and r["state"] != "Terminated"),
            plan_type="limit", minimal_price=0.0)

    def plan_repr(self, plan: dict) -> dict:
        data = self._plan_common(plan)
        data["offering"] = self.url(f"/api/marketplace-provider-offerings/{plan['offering_uuid']}/")
        return data

    def offering_repr(self, offering: dict) -> dict:
        customer = self.customers[offering["customer_uuid"]]
        plans = [p for p in self.plans.values() if p["offering_uuid"] == offering["uuid"]]
        return dict(
            url=self.url(f"/api/marketplace-provider-offerings/{offering['uuid']}/"), uuid=offering["uuid"],
            created=iso(offering["created"]), name=offering["name"], slug=offering["slug"],
            description=offering["description"], full_description="", endpoints=[], partitions=[], roles=[],
            customer=self.url(f"/api/customers/{customer['uuid']}/"), customer_uuid=customer["uuid"],
            customer_name=customer["name"], project=None, project_uuid=None, project_name=None,
            category=self.url(f"/api/marketplace-categories/{presets.CATEGORY_UUID}/"),
            category_uuid=presets.CATEGORY_UUID, category_title="Virtual machines", attributes={},
            options=copy.deepcopy(offering["order_form"]), resource_options={"order": [], "options": {}},
            components=[self.component_repr(c) for c in offering["components"]],
            plugin_options=dict(offering["plugin_options"]), state=offering["state"],
            vendor_details="", getting_started="", integration_guide="", thumbnail=None,
            order_count=sum(1 for o in self.orders.values() if o["offering_uuid"] == offering["uuid"]),
            plans=[self._plan_common(p) for p in plans], screenshots=[], type=offering["type"],
            shared=offering["shared"], billable=offering["billable"], scope_uuid=None, scope_name=None,
            paused_reason="", backend_id=offering["backend_id"], organization_groups=[], tags=[], image=None,
            parent_description=None, parent_uuid=None, parent_name=None)

    def _order_summary(self, order: dict | None) -> dict | None:
        if order is None:
            return None
        return dict(uuid=order["uuid"], type=order["type"], state=order["state"],
                    url=self.url(f"/api/marketplace-orders/{order['uuid']}/"),
                    created=iso(order["created"]), modified=iso(order["modified"]))

    def _offering_fields(self, offering_uuid: str, plan_uuid: str | None) -> dict:
        offering = self.offerings[offering_uuid]
        provider = self.customers[offering["customer_uuid"]]
        plan = self.plans.get(plan_uuid or "")
        return dict(
            offering=self.url(f"/api/marketplace-public-offerings/{offering_uuid}/"),
            offering_name=offering["name"], offering_uuid=offering_uuid, offering_description=offering["description"],
            offering_type=offering["type"], offering_shared=offering["shared"],
            offering_billable=offering["billable"], offering_plugin_options=dict(offering["plugin_options"]),
            provider_name=provider["name"], provider_uuid=provider["uuid"], provider_slug=provider["slug"],
            category_title="Virtual machines", category_uuid=presets.CATEGORY_UUID,
            plan=self.url(f"/api/marketplace-public-offerings/{offering_uuid}/plans/{plan['uuid']}/") if plan else None,
            plan_unit=plan["unit"] if plan else None, plan_name=plan["name"] if plan else None,
            plan_uuid=plan["uuid"] if plan else None, plan_description=plan["description"] if plan else None)

    def _username(self, user_uuid: str | None) -> str | None:
        user = self.users.get(user_uuid or "")
        return user["username"] if user else None

    def _full_name(self, user_uuid: str | None) -> str | None:
        user = self.users.get(user_uuid or "")
        return user["full_name"] if user else None

    def order_repr(self, order: dict) -> dict:
        project = self.projects[order["project_uuid"]]
        resource = self.resources.get(order["resource_uuid"])
        creator = self.users.get(order["created_by"] or "") or {}
        data = self._offering_fields(order["offering_uuid"], order["plan_uuid"])
        data.update(
            attributes=copy.deepcopy(order["attributes"]), limits=dict(order["limits"]), uuid=order["uuid"],
            created=iso(order["created"]), modified=iso(order["modified"]),
            resource_uuid=order["scope_uuid"], resource_type="SLURM.Allocation" if order["scope_uuid"] else None,
            resource_name=resource["name"] if resource else order["attributes"].get("name", ""),
            cost=None, state=order["state"], output="", marketplace_resource_uuid=order["resource_uuid"],
            error_message=order["error_message"], error_traceback=order["error_traceback"], callback_url=None,
            completed_at=iso(order["completed_at"]), request_comment=None, attachment=None, type=order["type"],
            start_date=None, slug=slugify(f"{order['type']}-{order['uuid'][:8]}"),
            url=self.url(f"/api/marketplace-orders/{order['uuid']}/"),
            consumer_reviewed_by=self._username(order["consumer_reviewed_by"]),
            consumer_reviewed_by_full_name=self._full_name(order["consumer_reviewed_by"]),
            consumer_reviewed_by_username=self._username(order["consumer_reviewed_by"]),
            consumer_reviewed_at=iso(order["consumer_reviewed_at"]),
            provider_reviewed_by=self._username(order["provider_reviewed_by"]),
            provider_reviewed_by_full_name=self._full_name(order["provider_reviewed_by"]),
            provider_reviewed_by_username=self._username(order["provider_reviewed_by"]),
            provider_reviewed_at=iso(order["provider_reviewed_at"]),
            created_by_username=creator.get("username", ""), created_by_full_name=creator.get("full_name", ""),
            created_by_civil_number=None, created_by_email=creator.get("email"),
            created_by_organization=None, created_by_organization_registry_code=None,
            project_name=project["name"], project_uuid=project["uuid"], project_description=project["description"],
            project_slug=project["slug"], old_plan_name=None, new_plan_name=None, old_plan_uuid=None,
            new_plan_uuid=None, old_cost_estimate=0.0, new_cost_estimate=None,
            can_terminate=False, fixed_price=0.0, activation_price=0.0, termination_comment=None,
            backend_id=order["backend_id"], order_subtype=None, provider_message="", consumer_message="",
            consumer_rejection_comment="", provider_rejection_comment=order.get("provider_rejection_comment", ""),
            issue=None)
        data.update(self._customer_fields(project["customer_uuid"]))
        return data

    def current_usages(self, resource: dict) -> dict:
        period = month_start(now().date())
        return {u["type"]: decimal_string(u["usage"]) for u in self.usages_by_resource.get(resource["uuid"], ())
                if u["billing_period"] == period}

    def resource_repr(self, resource: dict) -> dict:
        project = self.projects[resource["project_uuid"]]
        offering = self.offerings[resource["offering_uuid"]]
        in_progress = self.order_in_progress(resource["uuid"])
        current = self.current_usages(resource)
        billing_types = {c["billing_type"] for c in offering["components"]}
        data = self._offering_fields(resource["offering_uuid"], resource["plan_uuid"])
        data.update(
            attributes=copy.deepcopy(resource["attributes"]), limits=dict(resource["limits"]),
            uuid=resource["uuid"], created=iso(resource["created"]), modified=iso(resource["modified"]),
            url=self.url(f"/api/marketplace-resources/{resource['uuid']}/"),
            scope=self.url(f"/api/slurm-allocations/{resource['scope_uuid']}/") if resource["scope_uuid"] else "",
            description=resource["description"], state=resource["state"], resource_uuid=resource["scope_uuid"],
            backend_id=resource["backend_id"], effective_id="",
            resource_type="SLURM.Allocation" if resource["scope_uuid"] else None,
            project=self.url(f"/api/projects/{project['uuid']}/"), project_uuid=project["uuid"],
            project_name=project["name"], project_description=project["description"], project_end_date=None,
            offering_slug=offering["slug"], offering_backend_id=offering["backend_id"],
            backend_metadata=copy.deepcopy(resource["backend_metadata"]),
            is_usage_based="usage" in billing_types, is_limit_based="limit" in billing_types,
            name=resource["name"], slug=resource["slug"],
            # Real Waldur sends current usages as decimal strings (the schema says number).
            current_usages=current,
            can_terminate=resource["state"] in ("OK", "Erred") and in_progress is None,
            end_date=None, end_date_requested_by=None, username=None,
            limit_usage={k: float(v) for k, v in current.items() if k in resource["limits"]},
            downscaled=resource["downscaled"], restrict_member_access=resource["restrict_member_access"],
            paused=resource["paused"], endpoints=[], error_message=resource["error_message"],
            error_traceback=resource["error_traceback"], options=copy.deepcopy(resource["options"]),
            available_actions=[], last_sync=iso(resource["last_sync"]),
            order_in_progress=self._order_summary(in_progress),
            creation_order=self._order_summary(self.orders.get(resource["creation_order_uuid"] or "")),
            project_slug=project["slug"], user_requires_reconsent=False, renewal_date=None,
            offering_state=offering["state"],
            offering_components=[self.component_repr(c) for c in offering["components"]])
        data.update(self._customer_fields(project["customer_uuid"]))
        return data

    def usage_repr(self, usage: dict) -> dict:
        resource = self.resources.get(usage["resource_uuid"])
        project = self.projects[resource["project_uuid"]] if resource else None
        offering = self.offerings[resource["offering_uuid"]] if resource else None
        customer = self.customers[project["customer_uuid"]] if project else None
        return dict(
            uuid=usage["uuid"], created=iso(usage["created"]), description=usage["description"],
            type=usage["type"], name=usage["name"], measured_unit=usage["measured_unit"],
            usage=decimal_string(usage["usage"]),  # a decimal string, as real Waldur sends it
            date=iso(usage["date"]), recurring=usage["recurring"],
            resource_name=resource["name"] if resource else "", resource_uuid=usage["resource_uuid"],
            offering_name=offering["name"] if offering else "",
            offering_uuid=offering["uuid"] if offering else None,
            project_name=project["name"] if project else "", project_uuid=project["uuid"] if project else None,
            customer_name=customer["name"] if customer else "",
            customer_uuid=customer["uuid"] if customer else None,
            billing_period=usage["billing_period"].isoformat(), modified_by=None)

    def service_provider_repr(self, provider: dict) -> dict:
        customer = self.customers[provider["customer_uuid"]]
        return dict(
            url=self.url(f"/api/marketplace-service-providers/{provider['uuid']}/"), uuid=provider["uuid"],
            created=iso(provider["created"]), description=provider["description"], enable_notifications=True,
            customer=self.url(f"/api/customers/{customer['uuid']}/"), customer_name=customer["name"],
            customer_uuid=customer["uuid"], customer_abbreviation=customer["abbreviation"],
            customer_slug=customer["slug"], customer_native_name="", customer_country="", image=None,
            organization_groups=[],
            offering_count=sum(1 for o in self.offerings.values() if o["customer_uuid"] == customer["uuid"]))

    def ssh_key_repr(self, key: dict) -> dict:
        return dict(url=self.url(f"/api/keys/{key['uuid']}/"), uuid=key["uuid"], name=key["name"],
                    public_key=key["public_key"], fingerprint_md5=key["fingerprint_md5"],
                    fingerprint_sha256=key["fingerprint_sha256"], fingerprint_sha512=key["fingerprint_sha512"],
                    user_uuid=key["user_uuid"], is_shared=False, type=key["type"])

    def team_repr(self, resource: dict) -> list[dict]:
        members = []
        for member in self.projects[resource["project_uuid"]]["team"]:
            user = self.users[member["user_uuid"]]
            members.append(dict(url=self.url(f"/api/users/{user['uuid']}/"), uuid=user["uuid"],
                                username=user["username"], full_name=user["full_name"], email=user["email"],
                                role=member["role"], expiration_time=None, offering_user_username=None,
                                offering_user_state=None))
        return members

    def user_repr(self, user: dict) -> dict:
        permissions = []
        for customer_uuid in user["owner_of"]:
            customer = self.customers[customer_uuid]
            permissions.append(dict(
                user_uuid=user["uuid"], user_name=user["full_name"], user_slug=slugify(user["username"]),
                created=iso(user["date_joined"]), expiration_time=None, created_by_full_name="",
                created_by_username="staff", role_name="CUSTOMER.OWNER", role_description="Organization owner",
                role_uuid="f6cc3d1f89df4e1b9dc4fd8682f507a0", scope_type="customer", scope_uuid=customer_uuid,
                scope_name=customer["name"], customer_uuid=customer_uuid, customer_name=customer["name"]))
        return dict(
            url=self.url(f"/api/users/{user['uuid']}/"), uuid=user["uuid"], username=user["username"],
            slug=slugify(user["username"]), full_name=user["full_name"], native_name="", job_title="",
            email=user["email"], phone_number="", organization="", civil_number=None, description="",
            is_staff=user["is_staff"], is_active=True, is_support=False,
            token=user["token"],  # Waldur returns the caller's own token here
            token_lifetime=None, token_expires_at=None, registration_method="default",
            date_joined=iso(user["date_joined"]), agreement_date=iso(user["date_joined"]),
            notifications_enabled=True, preferred_language="", permissions=permissions,
            requested_email=None, first_name=user["first_name"], last_name=user["last_name"],
            birth_date=None, identity_provider_name="", identity_provider_label="",
            identity_provider_management_url="", identity_provider_fields=[], image=None,
            identity_source="", has_active_session=False, ip_address=None)

    def dump(self) -> dict:
        return dict(
            orders=[self.order_repr(o) for o in sorted(self.orders.values(), key=lambda o: o["seq"])],
            resources=[self.resource_repr(r) for r in sorted(self.resources.values(), key=lambda r: r["seq"])],
            usages=[self.usage_repr(u) for u in sorted(self.usages, key=lambda u: u["seq"])],
            offerings=[dict(uuid=o["uuid"], name=o["name"],
                            components=[self.component_repr(c) for c in o["components"]])
                       for o in self.offerings.values()])
