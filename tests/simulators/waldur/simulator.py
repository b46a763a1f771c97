"""The HTTP side of the Waldur simulator: routes, auth, permissions, filters, paging."""

from __future__ import annotations

import json
import math
import re
import threading
from datetime import date, datetime, timezone
from typing import Any, Callable
from urllib.parse import parse_qs, urlencode, urlsplit

from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request, Response

from tests.simulators.common import Simulator, json_response
from tests.simulators.waldur.events import EventingMarketplace, SiteAgentEvents
from tests.simulators.waldur.model import (
    BILLING_TYPES, LIMIT_PERIODS, ORDER_STATES, ORDER_TYPES, RESOURCE_STATES, ApiError, HtmlError,
    month_start, normalize_uuid, not_found, now)

DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 300
QUIRKS = ("empty_bodies", "usage_ignores_date", "no_set_as_ok", "no_set_paused", "processing_delay",
          "processor_errs_updates", "future_prices", "waldur_slugs", "no_restore")
# Quirks that take a number (seconds); the others are booleans.
NUMBER_QUIRKS = ("processing_delay",)
# A profile is a set of quirks: "default" is current Waldur (8.x), "waldur_7" the 7.0.7 server of
# real-waldur-samples.md (empty transition bodies, set_usage ignoring date, no set_paused /
# set_downscaled / set_as_ok, the Update processor erring unless the allocation was set ok, future
# prices on a plan in use, slugs like "-3", no Restore orders). processing_delay is in no profile:
# how late a worker runs depends on its load, so a test or a demo chooses it.
PROFILES = {
    "default": {},
    "waldur_7": {"empty_bodies": True, "usage_ignores_date": True, "no_set_as_ok": True, "no_set_paused": True,
                 "processor_errs_updates": True, "future_prices": True, "waldur_slugs": True, "no_restore": True},
}
_COMPONENT_TYPE = re.compile(r"^[a-zA-Z0-9_\-/:]+$")
_COMPONENT_FIELDS = {
    # request field: accepted Python types (None allowed where the schema says nullable)
    "billing_type": (str,), "type": (str,), "name": (str,), "description": (str,), "measured_unit": (str,),
    "unit_factor": (int,), "limit_period": (str, type(None)), "limit_amount": (int, type(None)),
    "article_code": (str,), "max_value": (int, type(None)), "min_value": (int, type(None)),
    "max_available_limit": (int, type(None)), "is_boolean": (bool,), "default_limit": (int, type(None)),
    "is_prepaid": (bool,), "overage_component": (str, type(None)),
    "min_prepaid_duration": (int, type(None)), "max_prepaid_duration": (int, type(None)),
}


def _as_bool(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _quirk_value(name: str, value):
    """A quirk's value as given (constructor, ``--option``, JSON): seconds for the number quirks,
    else a boolean."""
    if name in NUMBER_QUIRKS:
        if isinstance(value, bool):
            raise ValueError(f"quirk {name} takes a number of seconds, not {value!r}")
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"quirk {name} takes a number of seconds, not {value!r}") from None
        if not 0 <= seconds <= 3600:
            raise ValueError(f"quirk {name} must be between 0 and 3600 seconds, not {seconds}")
        return seconds
    return _as_bool(value)


def _sparse(data: dict, fields: list[str]) -> dict:
    """``field=a&field=b``: only those keys; unknown names are ignored, as Waldur does."""
    if not fields:
        return data
    return {key: value for key, value in data.items() if key in fields}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class WaldurSimulator(Simulator):
    """A stateful Waldur marketplace (see the package docstring for the endpoints)."""

    name = "waldur"

    def __init__(self, preset: str | None = "default", latency: float = 0.0, empty_bodies: Any = None,
                 max_exchanges: Any = 20000, broker: Any = None, profile: str = "default", **options: Any):
        self.exchanges: list[dict] = []
        self.max_exchanges = int(max_exchanges)
        if profile not in PROFILES:
            raise ValueError(f"unknown Waldur profile {profile!r}; known: {', '.join(PROFILES)}")
        self.profile = profile
        self.default_quirks = {quirk: _quirk_value(quirk, PROFILES[profile].get(quirk, 0 if quirk in NUMBER_QUIRKS
                                                                                else False)) for quirk in QUIRKS}
        if empty_bodies is not None:
            self.default_quirks["empty_bodies"] = _as_bool(empty_bodies)
        for quirk in QUIRKS:  # every quirk is a constructor option too (--option processing_delay=2)
            if quirk in options:
                self.default_quirks[quirk] = _quirk_value(quirk, options.pop(quirk))
        self.quirks = dict(self.default_quirks)
        # Order processors waiting for their worker (processing_delay) and the ones a test runs
        # right after a given operation (process_after); cleared on reset.
        self._timers: list[threading.Timer] = []
        self._process_after: dict[str, list[str]] = {}
        # Site agent identities and event queues; with a broker, order and resource events
        # are published to it as Waldur does (see tests/simulators/waldur/events.py).
        self.events = SiteAgentEvents(self, broker)
        self.market = EventingMarketplace(self.url, self.events)
        self.market.quirks = lambda: self.quirks
        self.market.schedule = self._schedule_processor
        super().__init__(preset, latency, **options)

    # ------------------------------------------------------------------ Simulator hooks
    def routes(self) -> list[tuple[str, str, str, Callable]]:
        e = self._endpoint
        orders = "/api/marketplace-orders/"
        order = orders + "<uuid>/"
        presources = "/api/marketplace-provider-resources/"
        presource = presources + "<uuid>/"
        cresources = "/api/marketplace-resources/"
        cresource = cresources + "<uuid>/"
        offering = "/api/marketplace-provider-offerings/<uuid>/"
        usages = "/api/marketplace-component-usages/"
        providers = "/api/marketplace-service-providers/"
        return [
            ("GET", orders, "orders.list", e(self.orders_list)),
            ("POST", orders, "orders.create", e(self.orders_create)),
            ("GET", order, "orders.get", e(self.orders_get)),
            ("POST", order + "approve_by_consumer/", "orders.approve_by_consumer", e(self.orders_approve_by_consumer)),
            ("POST", order + "approve_by_provider/", "orders.approve_by_provider", e(self.orders_approve_by_provider)),
            ("POST", order + "reject_by_provider/", "orders.reject_by_provider", e(self.orders_reject_by_provider)),
            ("POST", order + "set_state_executing/", "orders.set_state_executing", e(self.orders_set_state_executing)),
            ("POST", order + "set_state_done/", "orders.set_state_done", e(self.orders_set_state_done)),
            ("POST", order + "set_state_erred/", "orders.set_state_erred", e(self.orders_set_state_erred)),
            ("GET", presources, "resources.list", e(self.resources_list)),
            ("GET", presource, "resources.get", e(self.resources_get)),
            ("GET", presource + "team/", "resources.team", e(self.resources_team)),
            ("POST", presource + "set_backend_id/", "resources.set_backend_id", e(self.resources_set_backend_id)),
            ("POST", presource + "set_backend_metadata/", "resources.set_backend_metadata",
             e(self.resources_set_backend_metadata)),
            ("POST", presource + "set_limits/", "resources.set_limits", e(self.resources_set_limits)),
            ("POST", presource + "set_paused/", "resources.set_paused", e(self.resources_set_paused)),
            ("POST", presource + "set_downscaled/", "resources.set_downscaled", e(self.resources_set_downscaled)),
            ("POST", presource + "set_as_ok/", "resources.set_as_ok", e(self.resources_set_as_ok)),
            ("GET", cresources, "consumer_resources.list", e(self.consumer_resources_list)),
            ("GET", cresource, "consumer_resources.get", e(self.consumer_resources_get)),
            ("POST", cresource + "update_limits/", "consumer_resources.update_limits",
             e(self.consumer_resources_update_limits)),
            ("POST", cresource + "terminate/", "consumer_resources.terminate", e(self.consumer_resources_terminate)),
            ("GET", offering, "offering.get", e(self.offering_get)),
            ("POST", offering + "create_offering_component/", "offering.create_offering_component",
             e(self.offering_create_component)),
            ("POST", offering + "update_offering_component/", "offering.update_offering_component",
             e(self.offering_update_component)),
            ("GET", "/api/marketplace-plans/<uuid>/", "plans.get", e(self.plans_get)),
            ("POST", "/api/marketplace-plans/<uuid>/update_prices/", "plans.update_prices",
             e(self.plans_update_prices)),
            ("GET", providers, "service_provider.list", e(self.service_providers_list)),
            ("GET", providers + "<uuid>/", "service_provider.get", e(self.service_providers_get)),
            ("GET", providers + "<uuid>/keys/", "service_provider.keys", e(self.service_provider_keys)),
            ("GET", "/api/users/me/", "users.me", e(self.users_me)),
            ("GET", usages, "usages.list", e(self.usages_list)),
            ("POST", usages + "set_usage/", "usages.set_usage", e(self.usages_set_usage)),
            ("GET", usages + "<uuid>/", "usages.get", e(self.usages_get)),
        ] + self.events.routes(e)

    def reset(self, preset: str | None = "default") -> None:
        with self.lock:
            self.exchanges.clear()
            self.quirks = dict(self.default_quirks)
            for timer in self._timers:
                timer.cancel()
            self._timers = []
            self._process_after = {}
            super().reset(preset)

    # ------------------------------------------------------------------ Waldur's background worker
    def _schedule_processor(self, delay: float, order: dict) -> None:
        """Run the order's processor ``delay`` seconds from now in a timer thread, under the
        simulator's lock, as Waldur's Celery worker does after ``approve_by_provider``."""
        orders = self.market.orders

        def run() -> None:
            with self.lock:
                if self.market.orders is orders and orders.get(order["uuid"]) is order:  # not reset since
                    self.market.process_order(order)

        timer = threading.Timer(delay, run)
        timer.daemon = True
        self._timers = [t for t in self._timers if t.is_alive()] + [timer]
        timer.start()

    def process_after(self, operation: str | None, order_uuid) -> None:
        """Run the processor of an order (it becomes pending if it was not) right after the next
        successful call of ``operation`` (for example ``orders.set_state_done``: the worker ran
        just after the agent set the order done), or at once when ``operation`` is None."""
        with self.lock:
            order = self.market.get(self.market.orders, order_uuid, "Order")
            order["processor_pending"] = True
            if operation is None:
                self.market.process_order(order)
            else:
                self._process_after.setdefault(operation, []).append(order["uuid"])

    def set_backing_state(self, resource_uuid, state: str = "ok") -> None:
        """Set the state of the plugin record behind a resource (7.0.7's ``POST
        /api/marketplace-slurm-remote/<uuid>/set_state/ {"state": "ok"}``, which the 8.0.5 schema
        does not have, so it is offered here and as ``POST /_sim/backing_state``)."""
        with self.lock:
            self.market.set_backing_state(self.market.get(self.market.resources, resource_uuid, "Resource"), state)

    def reset_state(self, preset: str | None) -> None:
        self.events.reset()
        self.market.load(preset)

    def throttle_response(self, retry_after: int) -> Response:
        # DRF's throttling message and header
        return json_response({"detail": f"Request was throttled. Expected available in {retry_after} seconds."},
                             429, {"Retry-After": str(retry_after)})

    def dump_state(self) -> Any:
        return dict(self.market.dump(), quirks=dict(self.quirks))

    def _dispatch(self, request: Request) -> Response:
        request_body = request.get_data(cache=True)
        response = super()._dispatch(request)
        try:
            (operation, _handler), _args = self._map.bind_to_environ(request.environ).match()
        except HTTPException:
            operation = "unknown"
        with self.lock:
            if len(self.exchanges) >= self.max_exchanges:  # a long-running demo server stays bounded
                del self.exchanges[:len(self.exchanges) - self.max_exchanges + 1]
            self.exchanges.append({
                "seq": self.exchanges[-1]["seq"] + 1 if self.exchanges else 0,
                "operation": operation,
                "method": request.method,
                "url": request.url,
                "request_headers": dict(request.headers),
                "request_body": request_body,
                "status": response.status_code,
                "response_headers": dict(response.headers),
                # (a streamed answer, such as a reset fault's, is not read here: it breaks mid-way)
                "response_body": b"" if response.direct_passthrough else response.get_data(),
                "quirks": sorted(k for k, v in self.quirks.items() if v),
            })
            if response.status_code < 400 and self._process_after.get(operation):
                for uuid in self._process_after.pop(operation):
                    order = self.market.orders.get(uuid)
                    if order is not None:
                        self.market.process_order(order)
        return response

    def _control(self, request: Request) -> Response:
        events_response = self.events.control(request)
        if events_response is not None:
            return events_response
        path = request.path
        payload = request.get_json(silent=True) or {}
        try:
            if path == "/_sim/quirks":
                if request.method == "POST":
                    self.set_quirks(**payload)
                return json_response(dict(self.quirks))
            if path == "/_sim/seed/resource" and request.method == "POST":
                return json_response(self.seed_resource(**payload), 201)
            if path == "/_sim/seed/order" and request.method == "POST":
                return json_response(self.seed_order(**payload), 201)
            if path == "/_sim/backing_state" and request.method == "POST":
                self.set_backing_state(payload.get("resource_uuid"), payload.get("state", "ok"))
                return json_response({"resource_uuid": payload.get("resource_uuid"),
                                      "state": payload.get("state", "ok")})
            if path == "/_sim/order_form" and request.method == "POST":
                self.set_order_form(payload.get("offering_uuid"), payload.get("options"))
                return json_response({"offering_uuid": payload.get("offering_uuid")})
            if path == "/_sim/process" and request.method == "POST":
                self.process_after(payload.get("after"), payload.get("order_uuid"))
                return json_response({"order_uuid": payload.get("order_uuid"), "after": payload.get("after")})
        except ApiError as exc:
            return json_response(exc.body, exc.status)
        except (TypeError, ValueError) as exc:
            return json_response({"detail": str(exc)}, 400)
        return super()._control(request)

    # ------------------------------------------------------------------ Python handle for tests
    def set_quirks(self, **quirks: Any) -> None:
        unknown = set(quirks) - set(QUIRKS)
        if unknown:
            raise ValueError(f"unknown quirks: {', '.join(sorted(unknown))}; known: {', '.join(QUIRKS)}")
        values = {k: _quirk_value(k, v) for k, v in quirks.items()}
        with self.lock:
            self.quirks.update(values)

    def set_order_form(self, offering_uuid, options) -> None:
        """The offering's order form (its ``options``: ``{"order": [names], "options": {name: field}}``),
        as a provider edits it in Waldur."""
        if not isinstance(options, dict):
            raise ValueError("options: expected {'order': [...], 'options': {...}}")
        with self.lock:
            offering = self.market.offerings.get(str(offering_uuid).replace("-", ""))
            if offering is None:
                raise ValueError(f"no offering {offering_uuid}")
            offering["order_form"] = {"order": list(options.get("order") or []),
                                      "options": dict(options.get("options") or {})}

    def seed_resource(self, offering_uuid, name, **kwargs) -> dict:
        """Add a provider resource (default state OK) and return its API representation."""
        with self.lock:
            return self.market.resource_repr(self.market.seed_resource(offering_uuid, name, **kwargs))

    def seed_order(self, offering_uuid, **kwargs) -> dict:
        """Add an order (default: Create in pending-provider, with a new Creating resource)
        and return its API representation."""
        with self.lock:
            return self.market.order_repr(self.market.seed_order(offering_uuid, **kwargs))

    def order(self, uuid) -> dict | None:
        with self.lock:
            record = self.market.orders.get(normalize_uuid(uuid) or "")
            return self.market.order_repr(record) if record else None

    def resource(self, uuid) -> dict | None:
        with self.lock:
            record = self.market.resources.get(normalize_uuid(uuid) or "")
            return self.market.resource_repr(record) if record else None

    def usages(self, resource_uuid=None, billing_period=None) -> list[dict]:
        """Stored component usages (API shape), optionally of one resource / billing month
        (``"YYYY-MM-01"`` or a date)."""
        period = str(billing_period) if billing_period else None
        with self.lock:
            return [self.market.usage_repr(u) for u in sorted(self.market.usages, key=lambda u: u["seq"])
                    if (resource_uuid is None or u["resource_uuid"] == normalize_uuid(resource_uuid))
                    and (period is None or u["billing_period"].isoformat() == period)]

    # ------------------------------------------------------------------ plumbing
    def _endpoint(self, handler: Callable) -> Callable:
        def run(request: Request, **args) -> Response:
            try:
                user = self._authenticate(request)
                with self.lock:
                    return handler(request, user, **args)
            except ApiError as error:
                headers = {"WWW-Authenticate": "Token"} if error.status == 401 else None
                return json_response(error.body, error.status, headers)
            except HtmlError as error:
                return Response(error.page(), status=error.status, content_type="text/html; charset=utf-8")
        return run

    def _missing_in_this_version(self, request: Request, quirk: str) -> None:
        """An endpoint the server's version lacks: Django's HTML 404."""
        if self.quirks[quirk]:
            raise HtmlError(404, f"Page not found at {request.path}")

    def _authenticate(self, request: Request) -> dict:
        """DRF TokenAuthentication: ``Authorization: Token <key>``."""
        parts = request.headers.get("Authorization", "").split()
        if not parts or parts[0].lower() != "token":
            raise ApiError(401, "Authentication credentials were not provided.")
        if len(parts) == 1:
            raise ApiError(401, "Invalid token header. No credentials provided.")
        if len(parts) > 2:
            raise ApiError(401, "Invalid token header. Token string should not contain spaces.")
        for user in self.market.users.values():
            if user["token"] and user["token"] == parts[1]:
                return user
        raise ApiError(401, "Invalid token.")

    @staticmethod
    def _forbidden() -> ApiError:
        return ApiError(403, "You do not have permission to perform this action.")

    @staticmethod
    def _json(request: Request) -> dict:
        raw = request.get_data(cache=True)
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, {"detail": f"JSON parse error - {exc}"}) from None
        if not isinstance(body, dict):
            raise ApiError(400, {"non_field_errors": [
                f"Invalid data. Expected a dictionary, but got {type(body).__name__}."]})
        return body

    def _transition(self, message: str) -> Response:
        """Order transitions answer ``{"detail": ...}``; Waldur 7.0.7 sent an empty 200."""
        return json_response(None if self.quirks["empty_bodies"] else {"detail": message})

    @staticmethod
    def _uuid_arg(request: Request, name: str) -> str | None:
        value = request.args.get(name)
        if value in (None, ""):
            return None
        key = normalize_uuid(value)
        if key is None:
            raise ApiError(400, {name: ["Enter a valid UUID."]})
        return key

    @staticmethod
    def _time_arg(request: Request, name: str) -> datetime | None:
        value = request.args.get(name)
        if value in (None, ""):
            return None
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ApiError(400, {name: ["Enter a valid date/time."]}) from None
        return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)

    @staticmethod
    def _uuid_args(request: Request, name: str) -> list[str]:
        """A filter that may repeat (``offering_uuid=a&offering_uuid=b`` in Waldur 8.1)."""
        keys = []
        for value in request.args.getlist(name):
            if value == "":
                continue
            key = normalize_uuid(value)
            if key is None:
                raise ApiError(400, {name: ["Enter a valid UUID."]})
            keys.append(key)
        return keys

    @staticmethod
    def _choice_args(request: Request, name: str, choices) -> list[str]:
        values = request.args.getlist(name)
        for value in values:
            if value not in choices:
                raise ApiError(400, {name: [f"Select a valid choice. {value} is not one of the available choices."]})
        return values

    def _page(self, request: Request, items: list, serialize: Callable) -> Response:
        """Waldur's LinkHeaderPagination: ``page``/``page_size`` (default 10, max 300),
        ``Link`` first/prev/next/last keeping every other query parameter, ``X-Result-Count``."""
        try:
            page_size = int(request.args.get("page_size", DEFAULT_PAGE_SIZE))
        except ValueError:
            page_size = DEFAULT_PAGE_SIZE
        page_size = DEFAULT_PAGE_SIZE if page_size < 1 else min(page_size, MAX_PAGE_SIZE)
        pages = max(1, math.ceil(len(items) / page_size))
        raw_page = request.args.get("page", "1")
        try:
            page = pages if raw_page == "last" else int(raw_page)
        except ValueError:
            page = 0
        if not 1 <= page <= pages:
            raise ApiError(404, {"detail": "Invalid page."})
        fields = request.args.getlist("field")
        body = [_sparse(serialize(item), fields) for item in items[(page - 1) * page_size:page * page_size]]
        params = {k: v for k, v in parse_qs(request.query_string.decode(), keep_blank_values=True).items()
                  if k != "page"}

        def link(number: int) -> str:
            query = dict(params, page=[str(number)]) if number > 1 else params
            encoded = urlencode(sorted(query.items()), doseq=True)
            return request.base_url + ("?" + encoded if encoded else "")

        links = [("first", link(1))]
        if page > 1:
            links.append(("prev", link(page - 1)))
        if page < pages:
            links.append(("next", link(page + 1)))
        links.append(("last", link(pages)))
        headers = {"Link": ", ".join(f'<{url}>; rel="{rel}"' for rel, url in links),
                   "X-Result-Count": str(len(items))}
        return json_response(body, 200, headers)

    @staticmethod
    def _newest_first(records) -> list[dict]:
        return sorted(records, key=lambda r: r["seq"], reverse=True)

    # ------------------------------------------------------------------ permissions
    @staticmethod
    def _owns(user: dict, customer_uuid: str) -> bool:
        return user["is_staff"] or customer_uuid in user["owner_of"]

    def _is_provider(self, user: dict, offering_uuid: str) -> bool:
        return self._owns(user, self.market.offerings[offering_uuid]["customer_uuid"])

    def _is_consumer(self, user: dict, project_uuid: str) -> bool:
        return self._owns(user, self.market.projects[project_uuid]["customer_uuid"])

    def _order_visible(self, user: dict, order: dict) -> bool:
        return self._is_provider(user, order["offering_uuid"]) or self._is_consumer(user, order["project_uuid"])

    def _visible_order(self, user: dict, uuid: str) -> dict:
        order = self.market.get(self.market.orders, uuid, "Order")
        if not self._order_visible(user, order):
            raise not_found("Order")
        return order

    def _provider_order(self, user: dict, uuid: str) -> dict:
        order = self._visible_order(user, uuid)
        if not self._is_provider(user, order["offering_uuid"]):
            raise self._forbidden()
        return order

    def _provider_resource(self, user: dict, uuid: str) -> dict:
        """Provider view: only resources of the caller's offerings exist."""
        resource = self.market.get(self.market.resources, uuid, "Resource")
        if not self._is_provider(user, resource["offering_uuid"]):
            raise not_found("Resource")
        return resource

    def _consumer_resource(self, user: dict, uuid: str) -> dict:
        """Consumer view: only resources of the caller's projects exist."""
        resource = self.market.get(self.market.resources, uuid, "Resource")
        if not self._is_consumer(user, resource["project_uuid"]):
            raise not_found("Resource")
        return resource

    def _provider_offering(self, user: dict, uuid: str) -> dict:
        offering = self.market.get(self.market.offerings, uuid, "Offering")
        if not self._is_provider(user, offering["uuid"]):
            raise not_found("Offering")
        return offering

    # ------------------------------------------------------------------ orders
    def orders_list(self, request: Request, user: dict) -> Response:
        # Unknown filters (modified_before, ...) are ignored, as django-filter does.
        offering_uuid = self._uuid_arg(request, "offering_uuid")
        project_uuid = self._uuid_arg(request, "project_uuid")
        customer_uuid = self._uuid_arg(request, "customer_uuid")
        resource_uuid = self._uuid_arg(request, "resource_uuid")
        states = self._choice_args(request, "state", ORDER_STATES)
        types = self._choice_args(request, "type", ORDER_TYPES)
        modified_after = self._time_arg(request, "modified")  # "Modified after"
        orders = [o for o in self.market.orders.values() if self._order_visible(user, o)
                  and (modified_after is None or o["modified"] >= modified_after)
                  and (offering_uuid is None or o["offering_uuid"] == offering_uuid)
                  and (project_uuid is None or o["project_uuid"] == project_uuid)
                  and (customer_uuid is None
                       or self.market.projects[o["project_uuid"]]["customer_uuid"] == customer_uuid)
                  and (resource_uuid is None or o["resource_uuid"] == resource_uuid)
                  and (not states or o["state"] in states)
                  and (not types or o["type"] in types)]
        return self._page(request, self._newest_first(orders), self.market.order_repr)

    def orders_get(self, request: Request, user: dict, uuid: str) -> Response:
        order = self._visible_order(user, uuid)
        return json_response(_sparse(self.market.order_repr(order), request.args.getlist("field")))

    def _hyperlink(self, value, pattern: str, table: dict, field: str, errors: dict, group: int = 1) -> str | None:
        """A DRF hyperlinked field that also takes a bare UUID: the object's key, or None
        with the error recorded under ``field``."""
        if value in (None, ""):
            errors[field] = ["This field is required."]
            return None
        if not isinstance(value, str):
            errors[field] = [f"Incorrect type. Expected URL string, received {type(value).__name__}."]
            return None
        key = normalize_uuid(value)
        if key is None:
            match = re.search(pattern, urlsplit(value).path)
            key = normalize_uuid(match.group(group)) if match else None
            if not match:
                errors[field] = ["Invalid hyperlink - Incorrect URL match."]
                return None
        if key is None or key not in table:
            errors[field] = ["Invalid hyperlink - Object does not exist."]
            return None
        return key

    def orders_create(self, request: Request, user: dict) -> Response:
        body = self._json(request)
        errors: dict = {}
        offering_uuid = self._hyperlink(body.get("offering"), r"^/api/marketplace-public-offerings/([^/]+)/?$",
                                        self.market.offerings, "offering", errors)
        visible_projects = {k: v for k, v in self.market.projects.items() if self._is_consumer(user, k)}
        project_uuid = self._hyperlink(body.get("project"), r"^/api/projects/([^/]+)/?$",
                                       visible_projects, "project", errors)
        plan_uuid = None
        if body.get("plan") not in (None, ""):
            plan_uuid = self._hyperlink(body["plan"], r"^/api/marketplace-public-offerings/([^/]+)/plans/([^/]+)/?$",
                                        self.market.plans, "plan", errors, group=2)
            if plan_uuid and offering_uuid and self.market.plans[plan_uuid]["offering_uuid"] != offering_uuid:
                errors["plan"] = ["This plan is not available for selected offering."]
        if body.get("type") == "Restore" and self.quirks["no_restore"]:
            errors["type"] = ['"Restore" is not a valid choice.']  # 7.0.7 has no Restore orders
        elif body.get("type", "Create") != "Create":
            errors["type"] = ["Only Create orders are submitted here; Update and Terminate orders come "
                              "from the resource's update_limits and terminate actions."]
        attributes = body.get("attributes", {})
        if not isinstance(attributes, dict):
            errors["attributes"] = ["Expected a dictionary of items."]
        elif "name" in attributes and not isinstance(attributes["name"], str):
            errors["attributes"] = {"name": ["Not a valid string."]}
        # An order without a name is taken; Waldur's Slurm processor errs it at approval.
        limits, limit_error = self._clean_limits(body.get("limits", {}), offering_uuid)
        if limit_error:
            errors["limits"] = [limit_error]
        if errors:
            raise ApiError(400, errors)
        order = self.market.create_order(user, offering_uuid, project_uuid, plan_uuid, attributes, limits)
        return json_response(self.market.order_repr(order), 201)

    def _clean_limits(self, limits, offering_uuid: str | None) -> tuple[dict, str | None]:
        """Limits as Waldur's integer fields read them (``2.0`` is 2, ``2.5`` an error):
        the cleaned dict and an error message, or None."""
        if not isinstance(limits, dict):
            return {}, "Expected a dictionary of items."
        cleaned = {}
        for key, value in limits.items():
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not _is_int(value) or value < 0:
                return {}, f"Limit of {key} must be a non-negative integer."
            cleaned[key] = value
        if offering_uuid:
            known = self.market.offering_component_types(offering_uuid)
            invalid = [key for key in limits if key not in known]
            if invalid:
                return {}, "Invalid components: %s." % ", ".join(invalid)
        return cleaned, None

    def orders_approve_by_consumer(self, request: Request, user: dict, uuid: str) -> Response:
        order = self._visible_order(user, uuid)
        if not self._is_consumer(user, order["project_uuid"]):
            raise self._forbidden()
        self.market.approve_by_consumer(order, user)
        return self._transition("Order has been approved.")

    def orders_approve_by_provider(self, request: Request, user: dict, uuid: str) -> Response:
        order = self._provider_order(user, uuid)
        self._json(request)
        self.market.approve_by_provider(order, user)
        return self._transition("Order has been approved.")

    def orders_reject_by_provider(self, request: Request, user: dict, uuid: str) -> Response:
        order = self._provider_order(user, uuid)
        body = self._json(request)
        comment = body.get("provider_rejection_comment") if isinstance(body, dict) else None
        self.market.reject_by_provider(order, user, comment)
        return self._transition("Order has been rejected.")

    def orders_set_state_executing(self, request: Request, user: dict, uuid: str) -> Response:
        order = self._provider_order(user, uuid)
        self.market.set_state_executing(order)
        return self._transition("Order state has been changed to executing.")

    def orders_set_state_done(self, request: Request, user: dict, uuid: str) -> Response:
        order = self._provider_order(user, uuid)
        self.market.set_state_done(order)
        return self._transition("Order state has been changed to done.")

    def orders_set_state_erred(self, request: Request, user: dict, uuid: str) -> Response:
        order = self._provider_order(user, uuid)
        body = self._json(request)
        errors = {k: ["Not a valid string."] for k in ("error_message", "error_traceback")
                  if k in body and not isinstance(body[k], str)}
        if errors:
            raise ApiError(400, errors)
        self.market.set_state_erred(order, body.get("error_message", ""), body.get("error_traceback", ""))
        return self._transition("Order state has been changed to erred.")

    # ------------------------------------------------------------------ provider resources
    def _resource_filters(self, request: Request, resources) -> list[dict]:
        offering_uuids = self._uuid_args(request, "offering_uuid")
        project_uuid = self._uuid_arg(request, "project_uuid")
        customer_uuid = self._uuid_arg(request, "customer_uuid")
        states = self._choice_args(request, "state", RESOURCE_STATES)
        backend_id = request.args.get("backend_id")
        name = request.args.get("name")
        return self._newest_first(
            r for r in resources
            if (not offering_uuids or r["offering_uuid"] in offering_uuids)
            and (project_uuid is None or r["project_uuid"] == project_uuid)
            and (customer_uuid is None or self.market.projects[r["project_uuid"]]["customer_uuid"] == customer_uuid)
            and (not states or r["state"] in states)
            and (backend_id is None or r["backend_id"] == backend_id)
            and (name is None or name.lower() in r["name"].lower()))

    def resources_list(self, request: Request, user: dict) -> Response:
        visible = [r for r in self.market.resources.values() if self._is_provider(user, r["offering_uuid"])]
        return self._page(request, self._resource_filters(request, visible), self.market.resource_repr)

    def resources_get(self, request: Request, user: dict, uuid: str) -> Response:
        resource = self._provider_resource(user, uuid)
        return json_response(_sparse(self.market.resource_repr(resource), request.args.getlist("field")))

    def resources_team(self, request: Request, user: dict, uuid: str) -> Response:
        return json_response(self.market.team_repr(self._provider_resource(user, uuid)))

    def resources_set_backend_id(self, request: Request, user: dict, uuid: str) -> Response:
        resource = self._provider_resource(user, uuid)
        body = self._json(request)
        backend_id = body.get("backend_id", "")
        if not isinstance(backend_id, str):
            raise ApiError(400, {"backend_id": ["Not a valid string."]})
        if len(backend_id) > 255:
            raise ApiError(400, {"backend_id": ["Ensure this field has no more than 255 characters."]})
        resource["backend_id"] = backend_id
        self.market.touch(resource)
        return json_response({"status": "Resource backend_id has been changed."})

    def resources_set_backend_metadata(self, request: Request, user: dict, uuid: str) -> Response:
        resource = self._provider_resource(user, uuid)
        body = self._json(request)
        if "backend_metadata" not in body:
            raise ApiError(400, {"backend_metadata": ["This field is required."]})
        if not isinstance(body["backend_metadata"], dict):
            raise ApiError(400, {"backend_metadata": ["Expected a dictionary of items."]})
        resource["backend_metadata"] = body["backend_metadata"]
        self.market.touch(resource)
        return json_response({"status": "The backend metadata is updated"})

    def resources_set_limits(self, request: Request, user: dict, uuid: str) -> Response:
        resource = self._provider_resource(user, uuid)
        body = self._json(request)
        if "limits" not in body:
            raise ApiError(400, {"limits": ["This field is required."]})
        limits, error = self._clean_limits(body["limits"], resource["offering_uuid"])
        if error:
            raise ApiError(400, {"limits": [error]})
        resource["limits"] = limits
        self.market.touch(resource)
        return json_response({"status": "Resource limits have been updated."})

    def _set_flag(self, request: Request, user: dict, uuid: str, flag: str) -> Response:
        resource = self._provider_resource(user, uuid)
        if not user["is_staff"]:  # these flags are staff-only in Waldur
            raise self._forbidden()
        body = self._json(request)
        value = body.get(flag, False)
        if not isinstance(value, bool):
            raise ApiError(400, {flag: ["Must be a valid boolean."]})
        changed = resource[flag] != value
        resource[flag] = value
        self.market.touch(resource)
        if changed:
            self.events.publish_resource_event(resource)
        return json_response({"status": f"Resource {flag} flag has been set to {str(value).lower()}."})

    def resources_set_paused(self, request: Request, user: dict, uuid: str) -> Response:
        self._missing_in_this_version(request, "no_set_paused")
        return self._set_flag(request, user, uuid, "paused")

    def resources_set_downscaled(self, request: Request, user: dict, uuid: str) -> Response:
        self._missing_in_this_version(request, "no_set_paused")
        return self._set_flag(request, user, uuid, "downscaled")

    def resources_set_as_ok(self, request: Request, user: dict, uuid: str) -> Response:
        """200, no body (RESOURCE.SET_STATE on the offering's customer)."""
        self._missing_in_this_version(request, "no_set_as_ok")
        self.market.set_as_ok(self._provider_resource(user, uuid))
        return json_response(None, 200)

    # ------------------------------------------------------------------ consumer resources
    def consumer_resources_list(self, request: Request, user: dict) -> Response:
        visible = [r for r in self.market.resources.values() if self._is_consumer(user, r["project_uuid"])]
        return self._page(request, self._resource_filters(request, visible), self.market.resource_repr)

    def consumer_resources_get(self, request: Request, user: dict, uuid: str) -> Response:
        resource = self._consumer_resource(user, uuid)
        return json_response(_sparse(self.market.resource_repr(resource), request.args.getlist("field")))

    def consumer_resources_update_limits(self, request: Request, user: dict, uuid: str) -> Response:
        resource = self._consumer_resource(user, uuid)
        body = self._json(request)
        if "limits" not in body:
            raise ApiError(400, {"limits": ["This field is required."]})
        limits, error = self._clean_limits(body["limits"], resource["offering_uuid"])
        if error is None:
            limit_types = self.market.offering_component_types(resource["offering_uuid"], ("limit",))
            invalid = [key for key in limits if key not in limit_types]
            error = "Invalid components: %s." % ", ".join(invalid) if invalid else None
        if error:
            raise ApiError(400, {"limits": [error]})
        order = self.market.update_limits(user, resource, limits)
        return json_response({"order_uuid": order["uuid"]})

    def consumer_resources_terminate(self, request: Request, user: dict, uuid: str) -> Response:
        resource = self._consumer_resource(user, uuid)
        attributes = self._json(request).get("attributes", {})
        if not isinstance(attributes, dict):
            raise ApiError(400, {"attributes": ["Expected a dictionary of items."]})
        order = self.market.terminate(user, resource, attributes)
        return json_response({"order_uuid": order["uuid"]})

    # ------------------------------------------------------------------ offering, plans
    def offering_get(self, request: Request, user: dict, uuid: str) -> Response:
        offering = self._provider_offering(user, uuid)
        return json_response(_sparse(self.market.offering_repr(offering), request.args.getlist("field")))

    def _component_data(self, request: Request, required: tuple[str, ...]) -> dict:
        body = self._json(request)
        errors = {name: ["This field is required."] for name in required if name not in body}
        data = {}
        for name, types in _COMPONENT_FIELDS.items():
            if name not in body:
                continue
            value = body[name]
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                errors[name] = ["Incorrect type."]
                continue
            data[name] = value
        if data.get("billing_type") is not None and data["billing_type"] not in BILLING_TYPES:
            errors["billing_type"] = [f'"{data["billing_type"]}" is not a valid choice.']
        if "limit_period" in data and data["limit_period"] not in LIMIT_PERIODS:
            errors["limit_period"] = [f'"{data["limit_period"]}" is not a valid choice.']
        if isinstance(data.get("type"), str) and not _COMPONENT_TYPE.match(data["type"]):
            errors["type"] = ["Enter a valid value."]
        if "uuid" in required:
            data["uuid"] = normalize_uuid(body.get("uuid"))
            if "uuid" in body and data["uuid"] is None:
                errors["uuid"] = ["Must be a valid UUID."]
        if errors:
            raise ApiError(400, errors)
        return data

    def offering_create_component(self, request: Request, user: dict, uuid: str) -> Response:
        offering = self._provider_offering(user, uuid)
        self.market.create_component(offering, self._component_data(request, ("billing_type", "name", "type")))
        return json_response(None, 201)

    def offering_update_component(self, request: Request, user: dict, uuid: str) -> Response:
        offering = self._provider_offering(user, uuid)
        data = self._component_data(request, ("uuid", "billing_type", "name", "type"))
        self.market.update_component(offering, data)
        return json_response(None, 200)

    def plans_get(self, request: Request, user: dict, uuid: str) -> Response:
        plan = self.market.get(self.market.plans, uuid, "Plan")
        if not self._is_provider(user, plan["offering_uuid"]):
            raise not_found("Plan")
        return json_response(self.market.plan_repr(plan))

    def plans_update_prices(self, request: Request, user: dict, uuid: str) -> Response:
        """``{"prices": {component type: price}}``: 200, no body, as Waldur's provider plan
        action. Prices are decimals of 0 or more."""
        plan = self.market.get(self.market.plans, uuid, "Plan")
        if not self._is_provider(user, plan["offering_uuid"]):
            raise not_found("Plan")
        body = self._json(request)
        prices = body.get("prices")
        if not isinstance(prices, dict):
            message = "This field is required." if prices is None else "Expected a dictionary of items."
            raise ApiError(400, {"prices": [message]})
        cleaned, errors = {}, {}
        for key, value in prices.items():
            try:
                amount = self.market.parse_price(value)
            except ValueError as exc:
                errors[key] = [str(exc)]
            else:
                cleaned[key] = amount
        if errors:
            raise ApiError(400, {"prices": errors})
        self.market.update_prices(plan, cleaned)
        return json_response(None, 200)

    # ------------------------------------------------------------------ service providers, users
    def service_providers_list(self, request: Request, user: dict) -> Response:
        customer_uuid = self._uuid_arg(request, "customer_uuid")
        providers = [p for p in self.market.service_providers.values()
                     if customer_uuid is None or p["customer_uuid"] == customer_uuid]
        return self._page(request, providers, self.market.service_provider_repr)

    def service_providers_get(self, request: Request, user: dict, uuid: str) -> Response:
        provider = self.market.get(self.market.service_providers, uuid, "ServiceProvider")
        return json_response(_sparse(self.market.service_provider_repr(provider), request.args.getlist("field")))

    def service_provider_keys(self, request: Request, user: dict, uuid: str) -> Response:
        provider = self.market.get(self.market.service_providers, uuid, "ServiceProvider")
        if not self._owns(user, provider["customer_uuid"]):
            raise self._forbidden()
        return self._page(request, list(self.market.ssh_keys), self.market.ssh_key_repr)

    def users_me(self, request: Request, user: dict) -> Response:
        return json_response(_sparse(self.market.user_repr(user), request.args.getlist("field")))

    # ------------------------------------------------------------------ component usages
    def _usage_visible(self, user: dict, usage: dict) -> bool:
        resource = self.market.resources.get(usage["resource_uuid"])
        if resource is None:
            return user["is_staff"]
        return self._is_provider(user, resource["offering_uuid"]) or self._is_consumer(user, resource["project_uuid"])

    def usages_list(self, request: Request, user: dict) -> Response:
        resource_uuid = self._uuid_arg(request, "resource_uuid")
        offering_uuid = self._uuid_arg(request, "offering_uuid")
        period = request.args.get("billing_period")
        if period:
            try:
                period = date.fromisoformat(period)
            except ValueError:
                raise ApiError(400, {"billing_period": ["Enter a valid date."]}) from None
        types = request.args.getlist("type")
        usages = []
        for usage in sorted(self.market.usages, key=lambda u: u["seq"]):
            resource = self.market.resources.get(usage["resource_uuid"])
            if not self._usage_visible(user, usage):
                continue
            if resource_uuid and usage["resource_uuid"] != resource_uuid:
                continue
            if offering_uuid and (resource is None or resource["offering_uuid"] != offering_uuid):
                continue
            if period and usage["billing_period"] != period:
                continue
            if types and usage["type"] not in types:
                continue
            usages.append(usage)
        return self._page(request, usages, self.market.usage_repr)

    def usages_get(self, request: Request, user: dict, uuid: str) -> Response:
        key = normalize_uuid(uuid)
        usage = next((u for u in self.market.usages if u["uuid"] == key), None)
        if usage is None or not self._usage_visible(user, usage):
            raise not_found("ComponentUsage")
        return json_response(_sparse(self.market.usage_repr(usage), request.args.getlist("field")))

    def usages_set_usage(self, request: Request, user: dict) -> Response:
        """201 with an empty body. The billing period is the month of ``date`` when given
        (Waldur 7.0.7 ignored ``date`` and always used the current month)."""
        body = self._json(request)
        if "usages" not in body:
            raise ApiError(400, {"usages": ["This field is required."]})
        if not isinstance(body["usages"], list):
            raise ApiError(400, {"usages": ['Expected a list of items but got type "%s".'
                                            % type(body["usages"]).__name__]})
        items, item_errors = [], []
        for raw in body["usages"]:
            errors, item = {}, {}
            if not isinstance(raw, dict):
                item_errors.append({"non_field_errors": ["Invalid data. Expected a dictionary."]})
                continue
            if not isinstance(raw.get("type"), str) or not raw["type"]:
                errors["type"] = ["This field is required."]
            if "amount" not in raw:
                errors["amount"] = ["This field is required."]
            else:
                try:
                    item["amount"] = self.market.parse_amount(raw["amount"])
                except ValueError as exc:
                    errors["amount"] = [str(exc)]
            item.update(type=raw.get("type"), description=str(raw.get("description", "")),
                        recurring=bool(raw.get("recurring", False)))
            item_errors.append(errors)
            items.append(item)
        if any(item_errors):
            raise ApiError(400, {"usages": item_errors})
        moment = now()
        # Waldur 7.0.7's serializer had no date: usage always went to the current month.
        if body.get("date") not in (None, "") and not self.quirks["usage_ignores_date"]:
            try:
                moment = datetime.fromisoformat(str(body["date"]).replace("Z", "+00:00"))
            except ValueError:
                raise ApiError(400, {"date": ["Datetime has wrong format. Use one of these formats instead: "
                                              "YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z]."]}) from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
        if body.get("resource") in (None, ""):
            if body.get("plan_period") not in (None, ""):
                raise ApiError(400, {"plan_period": [f"Object with uuid={body['plan_period']} does not exist."]})
            raise ApiError(400, {"non_field_errors": ["Either plan_period or resource should be provided."]})
        resource = self.market.resources.get(normalize_uuid(str(body["resource"])) or "")
        if resource is None or not (self._is_provider(user, resource["offering_uuid"])
                                    or self._is_consumer(user, resource["project_uuid"])):
            raise ApiError(400, {"resource": [f"Object with uuid={body['resource']} does not exist."]})
        if not self._is_provider(user, resource["offering_uuid"]):
            raise self._forbidden()
        self.market.set_usage(resource, items, month_start(moment.date()), moment)
        return json_response(None, 201)


__all__ = ["WaldurSimulator"]
