"""Shared machinery of the local simulators (Waldur, DigitalOcean, Azure).

Every simulator is a werkzeug WSGI application built on :class:`Simulator`:

* routes are ``(method, werkzeug rule, operation name, handler)``; the operation
  name (``orders.approve_by_provider``, ``droplets.create``, ``vm.put``) is what
  the call log records and what fault injection targets;
* a call log that tests read ("the second run made no write calls");
* fault injection: fail the Nth call of an operation with a status, or answer it 200 with a
  body the client cannot trust (``kind``: an HTML page, truncated JSON, the wrong shape, or a
  listing whose ``X-Result-Count`` the pages do not add up to), add latency,
  throttle with 429 + ``Retry-After`` (a burst, or a requests-per-window limit), and a
  barrier that holds the answers to the first N calls of an operation until all N have been
  answered, so that N clients started together really race (all see the same state);
* a control API under ``/_sim/`` (reset, calls, faults, latency, barrier, state) that is
  never logged, so tests can drive a simulator running in another process.

:class:`SimulatorServer` runs one app on 127.0.0.1 in a background thread
(cheroot: HTTP/1.1 keep-alive, optionally TLS), with ``TCP_NODELAY`` on every
accepted socket so loopback calls cost microseconds rather than the 40 ms of
Nagle + delayed ACK.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from cheroot.ssl.builtin import BuiltinSSLAdapter
from cheroot.wsgi import Server as CherootServer
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def json_response(body: Any, status: int = 200, headers: dict | None = None) -> Response:
    """A JSON response; ``body=None`` gives an empty body (as old Waldur does)."""
    data = b"" if body is None else json.dumps(body).encode()
    response = Response(data, status=status, headers=headers or {})
    if body is not None:
        response.content_type = "application/json"
    return response


FAULT_KINDS = ("html", "truncated", "wrong_shape", "short_count", "empty_body", "empty_items", "field_missing",
               "field_type", "html_404", "reset", "timeout")
# How long a ``timeout`` fault holds its answer back: longer than the request timeout the fault
# matrix's offerings set (tests/faults/worlds.py), so the client gives up first.
STALL_SECONDS = 6.0
# What ``field_missing`` takes out of every object of an answer and ``field_type`` turns into a number:
# the identity and state fields every reader of the three services relies on.
SHAPE_FIELDS = ("uuid", "id", "state", "status")
# The keys under which a listing's items live (Waldur: a bare list; DRF pages: results; ARM: value;
# DigitalOcean: the plural of the object).
LIST_KEYS = ("results", "value", "droplets", "sizes", "regions", "images", "ssh_keys", "actions", "tags")
NOT_FOUND_PAGE = ("<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n"
                  "<body><h1>Not Found</h1><p>The requested URL was not found on this server.</p></body></html>\n")
MAINTENANCE_PAGE = ("<!DOCTYPE html>\n<html><head><title>Down for maintenance</title></head>\n"
                    "<body><h1>We'll be back soon</h1></body></html>\n")


def spoiled(response: Response, kind: str) -> Response:
    """The answer ``response`` spoilt as a fault of ``kind`` says (see :class:`Fault`)."""
    headers = {key: value for key, value in response.headers.items()
               if key.lower() not in ("content-length", "content-type")}
    data = response.get_data()
    if kind == "html":
        spoilt = Response(MAINTENANCE_PAGE, status=200, headers=headers, content_type="text/html; charset=utf-8")
        spoilt.headers.pop("X-Result-Count", None)
        return spoilt
    if kind == "truncated":
        return Response(data[:len(data) // 2], status=response.status_code, headers=headers,
                        content_type="application/json")
    if kind == "wrong_shape":
        body = json.loads(data or b"null")
        body = (body[0] if body else {}) if isinstance(body, list) else [body]
        return json_response(body, response.status_code, headers)
    if kind == "short_count":
        body = json.loads(data or b"[]")
        headers["X-Result-Count"] = str(int(response.headers.get("X-Result-Count", len(body))) + 1)
        return json_response(body, response.status_code, headers)
    if kind == "reset":  # the connection breaks in the middle of the answer (a proxy or a peer reset)
        def broken():
            yield data[:len(data) // 2]
            raise ConnectionResetError("simulated connection reset")
        return Response(broken(), status=response.status_code, direct_passthrough=True,
                        headers=dict(headers, **{"Content-Length": str(max(len(data), 2))}),
                        content_type=response.content_type)
    if kind == "timeout":  # nothing at all (not even the status line) until the client gave up
        def stalled():
            time.sleep(STALL_SECONDS)
            yield data
        return Response(stalled(), status=response.status_code, direct_passthrough=True,
                        headers=dict(headers, **{"Content-Length": str(len(data))}),
                        content_type=response.content_type)
    if kind == "empty_body":
        return Response(b"", status=response.status_code, headers=headers, content_type="application/json")
    if kind == "html_404":  # a proxy's or a web server's not-found page: not the service's own answer
        spoilt = Response(NOT_FOUND_PAGE, status=404, headers=headers, content_type="text/html; charset=utf-8")
        spoilt.headers.pop("X-Result-Count", None)
        return spoilt
    body = json.loads(data or b"null")
    if kind == "empty_items":
        # nothing where items were, every count consistent with it: a listing that lies well
        if isinstance(body, list):
            body = []
        elif isinstance(body, dict):
            emptied = [key for key in LIST_KEYS if isinstance(body.get(key), list)]
            body = dict(body, **{key: [] for key in emptied}) if emptied else {}
            if isinstance(body.get("meta"), dict) and "total" in body["meta"]:
                body["meta"] = dict(body["meta"], total=0)
            if isinstance(body.get("links"), dict):
                body["links"] = {}
            body.pop("nextLink", None)
        if "X-Result-Count" in headers:
            headers["X-Result-Count"] = "0"
        headers.pop("Link", None)
        return json_response(body, response.status_code, headers)
    if kind in ("field_missing", "field_type"):
        for obj in answer_objects(body):
            for key in SHAPE_FIELDS:
                if key in obj:
                    if kind == "field_missing":
                        del obj[key]
                    else:
                        obj[key] = 7
        return json_response(body, response.status_code, headers)
    raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")


def answer_objects(body: Any) -> list[dict]:
    """The objects an answer carries: a listing's items, else the object itself, or the one object it
    wraps (DigitalOcean's ``{"droplet": {...}}``)."""
    if isinstance(body, list):
        return [item for item in body if isinstance(item, dict)]
    if not isinstance(body, dict):
        return []
    for key in LIST_KEYS:
        if isinstance(body.get(key), list):
            return [item for item in body[key] if isinstance(item, dict)]
    if not any(key in body for key in SHAPE_FIELDS):
        inner = [value for value in body.values() if isinstance(value, dict)]
        if len(inner) == 1:
            return inner
    return [body]


@dataclass
class Fault:
    """One injected fault. ``nth`` counts calls of ``operation`` from when the
    fault was added (1 = the next call); ``times`` is how many consecutive calls
    fail from there (-1 = every call until cleared). ``apply``: the service carries the
    call out first and then answers with the fault (a write done, its answer lost or
    refused), so only calls it answered with success count.

    ``kind`` (one of :data:`FAULT_KINDS`) spoils the answer the service really gave instead:
    ``html`` a 200 HTML page (a proxy's or maintenance page), ``truncated`` the body cut in
    half, ``wrong_shape`` an object where a list was and a list where an object was,
    ``short_count`` an ``X-Result-Count`` one more than the listing holds, ``reset`` the
    connection broken halfway through the answer, ``timeout`` no answer for
    :data:`STALL_SECONDS` (``status`` and ``body`` are then not used)."""

    operation: str
    status: int = 500
    nth: int = 1
    times: int = 1
    body: Any = None
    retry_after: int | None = None
    apply: bool = False
    seen: int = 0
    fired: int = 0
    kind: str | None = None

    def should_fire(self) -> bool:
        self.seen += 1
        if self.seen < self.nth:
            return False
        if self.times != -1 and self.fired >= self.times:
            return False
        self.fired += 1
        return True


@dataclass
class RateLimit:
    """At most ``limit`` requests per ``window`` seconds; past it, 429 with
    ``Retry-After`` (whole seconds until the window frees a slot)."""

    limit: int
    window: float = 60.0
    stamps: list = field(default_factory=list)

    def check(self, now: float) -> int | None:
        horizon = now - self.window
        while self.stamps and self.stamps[0] <= horizon:
            self.stamps.pop(0)
        if len(self.stamps) >= self.limit:
            return max(1, int(self.stamps[0] + self.window - now + 0.999))
        self.stamps.append(now)
        return None


@dataclass
class Barrier:
    """Holds the answers to the first ``clients`` calls of ``operation`` until all of them have
    been answered, then lets them go together; later calls pass at once. So N clients started
    together see the same state (say, no droplet yet) and none acts before the others have
    looked: a race that really happens. When ``timeout`` seconds pass before all have arrived,
    the ones waiting are let go (``timed_out`` says so), so a client that never comes cannot
    hang the others. With ``query``, only the calls whose query string holds it count (say, the
    listing by one tag, not the count of all droplets before it)."""

    operation: str
    clients: int = 2
    timeout: float = 30.0
    query: str | None = None
    arrived: int = 0
    timed_out: bool = False
    condition: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def wait(self) -> None:
        with self.condition:
            self.arrived += 1
            if self.arrived > self.clients:
                return
            if self.arrived == self.clients:
                self.condition.notify_all()
                return
            released = self.condition.wait_for(lambda: self.arrived >= self.clients, timeout=self.timeout)
            if not released:
                self.timed_out = True

    def describe(self) -> dict:
        with self.condition:
            return {"operation": self.operation, "clients": self.clients, "timeout": self.timeout,
                    "query": self.query, "arrived": self.arrived, "timed_out": self.timed_out}


class Simulator:
    """Base WSGI app. Subclasses set ``name`` and implement ``routes()``,
    ``reset_state(preset)``, ``error_response(status, message)`` (the service's
    own error shape) and optionally ``dump_state()``."""

    name = "simulator"

    def __init__(self, preset: str | None = "default", latency: float = 0.0, **options: Any):
        self.options = options
        self.lock = threading.RLock()
        self.calls: list[dict] = []
        self.faults: list[Fault] = []
        self.barriers: dict[str, Barrier] = {}
        self.latency = latency
        self.latency_by_operation: dict[str, float] = {}
        self.rate_limit: RateLimit | None = None
        self._map = Map([Rule(rule, endpoint=(op, handler), methods=[method])
                         for method, rule, op, handler in self.routes()],
                        strict_slashes=False, merge_slashes=False)
        self.base_url = ""
        self.reset(preset)

    # ---- to be provided by subclasses -------------------------------------------------
    def routes(self) -> list[tuple[str, str, str, Callable]]:
        raise NotImplementedError  # pragma: no cover - abstract

    def reset_state(self, preset: str | None) -> None:
        raise NotImplementedError  # pragma: no cover - abstract

    def error_response(self, status: int, message: str, code: str | None = None,
                       headers: dict | None = None) -> Response:
        return json_response({"detail": message}, status, headers)

    def dump_state(self) -> Any:
        return {}

    def throttle_response(self, retry_after: int) -> Response:
        return self.error_response(429, "Too many requests.", "too_many_requests",
                                   {"Retry-After": str(retry_after)})

    def decorate(self, request: Request, response: Response) -> Response:
        """Hook for headers every response carries (DigitalOcean's rate-limit headers)."""
        return response

    # ---- control ----------------------------------------------------------------------
    def reset(self, preset: str | None = "default") -> None:
        with self.lock:
            self.calls.clear()
            self.faults.clear()
            self.barriers.clear()
            self.latency_by_operation.clear()
            self.rate_limit = None
            self.reset_state(preset)

    def add_fault(self, operation: str, status: int = 500, nth: int = 1, times: int = 1,
                  body: Any = None, retry_after: int | None = None, apply: bool = False,
                  kind: str | None = None) -> Fault:
        if kind is not None and kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
        fault = Fault(operation, status, nth, times, body, retry_after, apply, kind=kind)
        with self.lock:
            self.faults.append(fault)
        return fault

    def add_barrier(self, operation: str, clients: int = 2, timeout: float = 30.0,
                    query: str | None = None) -> Barrier:
        """Hold the next ``clients`` calls of ``operation`` (whose query string holds ``query``, if
        given) until all of them have arrived (or ``timeout`` seconds have passed), replacing any
        barrier on that operation."""
        if clients < 1 or timeout <= 0:
            raise ValueError("a barrier needs clients >= 1 and a positive timeout")
        barrier = Barrier(operation, int(clients), float(timeout), query)
        with self.lock:
            self.barriers[operation] = barrier
        return barrier

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    def set_rate_limit(self, limit: int | None, window: float = 60.0) -> None:
        with self.lock:
            self.rate_limit = RateLimit(limit, window) if limit else None

    def write_calls(self, since: int = 0) -> list[dict]:
        return [c for c in self.calls[since:] if c["write"]]

    def calls_of(self, operation: str, since: int = 0) -> list[dict]:
        return [c for c in self.calls[since:] if c["operation"] == operation]

    # ---- WSGI -------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        request = Request(environ)
        if not self.base_url:
            self.base_url = request.host_url.rstrip("/")
        if request.path.startswith("/_sim/"):
            response = self._control(request)
        else:
            response = self.decorate(request, self._dispatch(request))
        return response(environ, start_response)

    def url(self, path: str) -> str:
        """An absolute URL on this server (links and LRO headers must be absolute)."""
        return self.base_url + path

    def _dispatch(self, request: Request) -> Response:
        adapter = self._map.bind_to_environ(request.environ)
        started = time.monotonic()
        operation = "unknown"
        try:
            (operation, handler), args = adapter.match()
        except NotFound:
            response = self.error_response(404, "Not found.", "not_found")
        except MethodNotAllowed:
            response = self.error_response(405, f'Method "{request.method}" not allowed.')
        except HTTPException as exc:  # e.g. a redirect for a missing trailing slash
            response = self.error_response(exc.code or 400, exc.description or "Bad request.")
        else:
            # Read the whole body before anything else, as a real service does before it acts:
            # a client may send its headers and its body in two writes (urllib3 2 does), and a
            # held call must not count as arrived before the request is complete.
            request.get_data(cache=True)
            delay = self.latency_by_operation.get(operation, self.latency)
            if delay:
                time.sleep(delay)
            response = self._injected(operation)
            if response is None:
                try:
                    response = handler(request, **args)
                except Exception as exc:  # a simulator bug must surface as a 500, not hang
                    response = self.error_response(500, f"simulator error: {exc!r}", "server_error")
                if response.status_code < 400:
                    response = self._fault_after(operation) or response
                response = self._spoiled(operation, response)
            barrier = self.barriers.get(operation)
            if barrier is not None and (barrier.query is None or barrier.query in request.query_string.decode()):
                # The answer is held (outside the simulator's lock) until every client's call
                # has been answered: all of them saw the same state, none has acted on it yet.
                barrier.wait()
        with self.lock:
            self.calls.append({
                "seq": len(self.calls),
                "operation": operation,
                "method": request.method,
                "path": request.path,
                "query": request.query_string.decode(),
                "status": response.status_code,
                "write": request.method in WRITE_METHODS and response.status_code < 400,
                "time": time.time(),
                "seconds": round(time.monotonic() - started, 4),
                "user_agent": request.headers.get("User-Agent", ""),
            })
        return response

    def _fault_after(self, operation: str) -> Response | None:
        """The answer of an ``apply`` fault to a call the service has just carried out, or None."""
        # The base class's own check: subclasses' _injected add limits that apply before a call only.
        return Simulator._injected(self, operation, applied=True)

    def _injected(self, operation: str, applied: bool = False) -> Response | None:
        """The fault answering this call instead of the service (``applied``: after the
        service carried it out), or None."""
        with self.lock:
            if self.rate_limit is not None and not applied:
                wait = self.rate_limit.check(time.monotonic())
                if wait is not None:
                    return self.throttle_response(wait)
            for fault in self.faults:
                if fault.kind is None and fault.operation in (operation, "*") and fault.apply == applied \
                        and fault.should_fire():
                    if fault.status == 429:
                        return self.throttle_response(fault.retry_after or 1)
                    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else None
                    if fault.body is not None:
                        return json_response(fault.body, fault.status, headers)
                    return self.error_response(fault.status, f"Injected fault on {operation}.",
                                               "injected", headers)
        return None

    def _spoiled(self, operation: str, response: Response) -> Response:
        """The handler's answer, spoilt by the first ``kind`` fault that fires on it."""
        with self.lock:
            for fault in self.faults:
                if fault.kind is not None and fault.operation in (operation, "*") and fault.should_fire():
                    return spoiled(response, fault.kind)
        return response

    def _control(self, request: Request) -> Response:
        payload = request.get_json(silent=True) or {}
        path = request.path
        if path == "/_sim/reset" and request.method == "POST":
            self.reset(payload.get("preset", "default"))
            return json_response({"reset": True})
        if path == "/_sim/calls":
            if request.method == "DELETE":
                with self.lock:
                    self.calls.clear()
                return json_response({"cleared": True})
            since = int(request.args.get("since", 0))
            return json_response(self.calls[since:])
        if path == "/_sim/faults":
            if request.method == "DELETE":
                self.clear_faults()
                return json_response({"cleared": True})
            if request.method == "POST":
                try:
                    self.add_fault(**payload)
                except (TypeError, ValueError) as exc:
                    return json_response({"detail": str(exc)}, 400)
                return json_response({"added": payload}, 201)
            return json_response([f.__dict__ for f in self.faults])
        if path == "/_sim/barrier":
            if request.method == "POST":
                try:
                    barrier = self.add_barrier(**payload)
                except (TypeError, ValueError) as exc:
                    return json_response({"detail": str(exc)}, 400)
                return json_response(barrier.describe(), 201)
            with self.lock:
                return json_response([barrier.describe() for barrier in self.barriers.values()])
        if path == "/_sim/latency" and request.method == "POST":
            with self.lock:
                self.latency = float(payload.get("seconds", 0))
                self.latency_by_operation.update(payload.get("operations", {}))
            return json_response({"latency": self.latency})
        if path == "/_sim/rate_limit" and request.method == "POST":
            self.set_rate_limit(payload.get("limit"), payload.get("window", 60.0))
            return json_response({"limit": payload.get("limit")})
        if path == "/_sim/state":
            with self.lock:
                return json_response(self.dump_state())
        return json_response({"detail": f"unknown control path {path}"}, 404)


class _ContextSSLAdapter(BuiltinSSLAdapter):
    """cheroot's builtin TLS adapter around an SSLContext made in memory (trustme)."""

    def __init__(self, context):  # pylint: disable=super-init-not-called
        # The parent loads certificate files; this context is ready, so only set what wrap() reads.
        self.certificate = self.private_key = self.certificate_chain = self.ciphers = None
        self.private_key_password = None
        self.context = context
        self._server_env = {}


class SimulatorServer:
    """Run a simulator on 127.0.0.1 in a daemon thread. Usable as a context manager.

    cheroot serves it: HTTP/1.1 keep-alive (clients that reuse connections can be
    told from clients that do not), TCP_NODELAY on accepted sockets, a thread pool,
    and TLS from an in-memory context for the services whose SDKs demand HTTPS."""

    def __init__(self, app: Simulator, port: int = 0, ssl_context=None, threads: int = 32):
        self.app = app
        self.ssl_context = ssl_context
        self._server = CherootServer(("127.0.0.1", port), app, numthreads=threads,
                                     server_name="%s-simulator" % app.name, timeout=30)
        self._server.nodelay = True
        # a reset fault breaks its answer on purpose: not an error of the simulator worth a traceback
        server_log = self._server.error_log
        self._server.error_log = lambda msg="", *args, **kwargs: (
            None if "simulated connection reset" in str(msg) else server_log(msg, *args, **kwargs))
        # A listen backlog like a real front end's: cheroot's default of 5 resets connections
        # when fifty clients connect at once, which no cloud API does.
        self._server.request_queue_size = socket.SOMAXCONN
        if ssl_context is not None:
            self._server.ssl_adapter = _ContextSSLAdapter(ssl_context)
        self._server.prepare()  # binds now, so the port is known before start()
        self.port = self._server.bind_addr[1]
        scheme = "https" if ssl_context else "http"
        host = "localhost" if ssl_context else "127.0.0.1"  # certificates name localhost
        self.url = f"{scheme}://{host}:{self.port}"
        app.base_url = self.url
        self._thread = threading.Thread(target=self._server.serve,
                                        name=f"{app.name}-sim", daemon=True)

    def start(self) -> "SimulatorServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.stop()
        self._thread.join(timeout=5)

    def __enter__(self) -> "SimulatorServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
