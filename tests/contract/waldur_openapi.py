"""Check recorded Waldur exchanges against Waldur's official OpenAPI schema (8.0.5).

``validate_exchange(exchange)`` takes one entry of ``WaldurSimulator.exchanges`` and returns
a list of human-readable violations (empty when the exchange conforms). The schema is
``tests/contract/specs/waldur-openapi.yaml`` (vendored with its licence and provenance; override with
``WALDUR_OPENAPI_SPEC``), loaded once with openapi-core as its README prescribes:

* ``Config(spec_validator_cls=None)``: 31 upstream schemas declare ``required: []``, which
  the OpenAPI 3.0 meta-schema rejects, so the spec itself is not validated;
* a ``uuid`` format check accepting Waldur's 32-hex form as well as the dashed one;
* in memory, ``nullable`` + ``allOf`` properties (``Resource.order_in_progress``,
  ``creation_order``, ``OrderDetails.issue``, ...) become ``anyOf [allOf, null]``: OpenAPI
  3.0.3 ignores ``nullable`` without ``type``, yet Waldur sends ``null`` there.

Requests are checked with the schema as it is (unknown keys allowed: Waldur ignores them).
Responses are checked with unknown keys forbidden, so the simulator cannot invent fields.

A request that the simulator refused may be invalid in exactly the way the refusal says:
missing credentials on a 401, bad parameters or body on a 400, an unknown path on a
404/405. Every other request (including those answered with an injected 5xx or a 429)
must be valid. Response bodies are checked for 2xx only: the schema declares no error
responses.

Deviations tolerated on purpose, each because the real server behaves that way:

1. ``ComponentUsage.usage`` is ``integer`` in the schema; real Waldur sends a decimal
   string (``"15.00"``), so does the simulator, and so does the site agent expect.
2. ``Resource.current_usages`` values are ``number`` in the schema; real Waldur sends
   decimal strings there too.
3. ``BackendMetadata`` declares four keys (state, runtime_state, action, instance_name) but
   Waldur stores and returns whatever ``set_backend_metadata`` sent, so it is loaded as a
   free-form object (``additionalProperties: true``) while unknown keys stay forbidden
   everywhere else.
4. With the simulator's ``empty_bodies`` quirk (Waldur 7.0.7), ``approve_by_provider`` and
   ``approve_by_consumer`` answer 200 with an empty body where 8.0.5 declares
   ``OrderInfoResponse``.
5. ``register_queue`` (``POST /api/marketplace-site-agent-identities/<uuid>/register_queue/``)
   is newer than the 8.0.5 schema; its request and response are checked against Waldur's
   generated client models (``AgentQueueRegistrationRequest``/``Response``) instead.
6. ``update_prices`` (``POST /api/marketplace-plans/<uuid>/update_prices/``), the provider
   plan action that prices components (real-waldur-samples.md section 6b), is not in the
   reduced copy of the schema; its request is checked by hand: a token, ``{"prices":
   {<component type>: <number or decimal string, 0 or more>}}``; a 2xx answer has no body.
7. ``AgentIdentity`` gained ``created_by`` (a user UUID or null) and ``compatibility``
   (``{status: compatible|incompatible|unknown, message, minimum_required?}``) after 8.0.5;
   waldur-api-client 8.1.3, the upstream agent's client, requires both. The schema is extended
   with them as that client models them, and ``tests/contract/test_waldur_client.py`` parses
   the simulator's identities with the client itself.

Beyond the schema, checked by hand: a 2xx paged listing (a GET of a collection answered with a
JSON list; not an action such as ``.../team/``, which real Waldur answers unpaged) carries
``X-Result-Count``, a whole number no smaller than the page, as real Waldur always does (the
schema declares the header without requiring it); the site agent checks that the pages of a
listing add up to it.

Anything else is reported.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import yaml
from openapi_core import Config, OpenAPI
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound, ServerNotFound
from openapi_core.testing import MockRequest, MockResponse
from openapi_core.validation.request.exceptions import (
    ParameterValidationError, RequestBodyValidationError, SecurityValidationError)
from openapi_core.validation.response.exceptions import MissingData

REPO = Path(__file__).resolve().parents[2]
SPEC_PATH = Path(os.environ.get("WALDUR_OPENAPI_SPEC")
                 or REPO / "tests" / "contract" / "specs" / "waldur-openapi.yaml")

_UUID = re.compile(r"[0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DECIMAL_STRING = re.compile(r"^-?\d+\.\d{2}$")
_EMPTY_BODY_QUIRK_PATHS = re.compile(r"^/api/marketplace-orders/[^/]+/approve_by_(provider|consumer)/$")

_lock = threading.Lock()
_apis: dict[str, OpenAPI] = {}
_verdicts: dict[tuple, list[str]] = {}


def waldur_uuid(value) -> bool:
    return not isinstance(value, str) or _UUID.fullmatch(value) is not None


def patch_nullable_allof(node):
    """``{nullable: true, allOf: [...]}`` without ``type`` -> ``anyOf [{allOf}, null]``."""
    if isinstance(node, dict):
        if node.get("nullable") is True and "allOf" in node and "type" not in node:
            node["anyOf"] = [{"allOf": node.pop("allOf")}, {"nullable": True, "enum": [None]}]
            del node["nullable"]
        for value in node.values():
            patch_nullable_allof(value)
    elif isinstance(node, list):
        for value in node:
            patch_nullable_allof(value)
    return node


def load_spec() -> dict:
    if not SPEC_PATH.is_file():
        raise FileNotFoundError(
            f"Waldur OpenAPI schema not found at {SPEC_PATH}; the contract checks need "
            "tests/contract/specs/waldur-openapi.yaml (or WALDUR_OPENAPI_SPEC).")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(SPEC_PATH, encoding="utf-8") as handle:
        spec = patch_nullable_allof(yaml.load(handle, Loader=loader))
    spec["components"]["schemas"]["BackendMetadata"]["additionalProperties"] = True  # deviation 3
    identity = spec["components"]["schemas"]["AgentIdentity"]  # deviation 7
    identity["properties"]["created_by"] = {"type": "string", "format": "uuid", "nullable": True, "readOnly": True}
    identity["properties"]["compatibility"] = {"type": "object", "readOnly": True, "properties": {
        "status": {"type": "string", "enum": ["compatible", "incompatible", "unknown"]},
        "message": {"type": "string"}, "minimum_required": {"type": "string"}},
        "required": ["status", "message"]}
    identity["required"] = sorted(set(identity["required"]) | {"created_by", "compatibility"})
    return spec


def apis() -> tuple[OpenAPI, OpenAPI]:
    """(request validator, response validator), built once per process."""
    with _lock:
        if not _apis:
            spec = load_spec()
            formats = {"uuid": waldur_uuid}
            _apis["request"] = OpenAPI.from_dict(spec, config=Config(
                spec_validator_cls=None, extra_format_validators=formats))
            _apis["response"] = OpenAPI.from_dict(spec, config=Config(
                spec_validator_cls=None, extra_format_validators=formats,
                additional_properties_default_policy="forbid"))
        return _apis["request"], _apis["response"]


def _content_type(headers: dict) -> str:
    for key, value in headers.items():
        if key.lower() == "content-type":
            return value.split(";")[0].strip()
    return "application/json"


def mock_request(exchange: dict) -> MockRequest:
    url = urlsplit(exchange["url"])
    return MockRequest(f"{url.scheme}://{url.netloc}", exchange["method"], url.path,
                       args=parse_qsl(url.query, keep_blank_values=True),
                       headers=exchange["request_headers"], data=exchange["request_body"] or b"",
                       content_type=_content_type(exchange["request_headers"]))


def mock_response(exchange: dict) -> MockResponse:
    return MockResponse(exchange["response_body"] or b"", status_code=exchange["status"],
                        headers=exchange["response_headers"],
                        content_type=_content_type(exchange["response_headers"]))


def _schema_errors(error) -> list | None:
    cause = error.__cause__
    return list(getattr(cause, "schema_errors", None) or []) or None


def _tolerated_schema_error(path: str, schema_error) -> bool:
    """Deviations 1 and 2 of the module docstring."""
    location = list(schema_error.absolute_path)
    value = schema_error.instance
    if schema_error.validator != "type" or not isinstance(value, str) or not _DECIMAL_STRING.match(value):
        return False
    if path.startswith("/api/marketplace-component-usages/") and location and location[-1] == "usage":
        return True
    return "current_usages" in location[:-1] and path.startswith(
        ("/api/marketplace-provider-resources/", "/api/marketplace-resources/"))


def _describe(error, path: str, tolerate=False) -> list[str]:
    kind = type(error).__name__
    if isinstance(error, ParameterValidationError):
        kind += f" ({error.location} parameter {error.name!r})"
    schema_errors = _schema_errors(error)
    if not schema_errors:
        return [f"{kind}: {error}"]
    problems = []
    for schema_error in schema_errors:
        if tolerate and _tolerated_schema_error(path, schema_error):
            continue
        where = "/".join(str(part) for part in schema_error.absolute_path) or "(top level)"
        problems.append(f"{kind} at {where}: {schema_error.message}")
    return problems


def _request_error_explained(error, status: int) -> bool:
    if status == 401 and isinstance(error, SecurityValidationError):
        return True
    if status == 400 and isinstance(error, (ParameterValidationError, RequestBodyValidationError)):
        return True
    return status in (404, 405) and isinstance(error, (PathNotFound, OperationNotFound))


def _cache_key(exchange: dict) -> tuple:
    headers = {k.lower(): v for k, v in exchange["request_headers"].items()}
    return (exchange["method"], exchange["url"], "authorization" in headers, headers.get("content-type"),
            exchange["request_body"], exchange["status"], exchange["response_body"],
            _content_type(exchange["response_headers"]), exchange["response_headers"].get("X-Result-Count"),
            tuple(exchange.get("quirks", ())))


def validate_exchange(exchange: dict) -> list[str]:
    """Violations of the schema in one recorded exchange (empty list: it conforms).
    Identical exchanges (a poll repeated with the same answer) are checked once."""
    key = _cache_key(exchange)
    with _lock:
        cached = _verdicts.get(key)
    if cached is None:
        cached = _validate(exchange)
        with _lock:
            if len(_verdicts) > 4096:
                _verdicts.clear()
            _verdicts[key] = cached
    return list(cached)


_REGISTER_QUEUE = re.compile(r"^/api/marketplace-site-agent-identities/[0-9a-fA-F-]{32,36}/register_queue/$")


def _validate_register_queue(exchange: dict, label: str) -> list[str]:
    """Deviation 5: the generated client's models stand in for the schema."""
    import json

    from waldur_api_client.models.agent_queue_registration_request import AgentQueueRegistrationRequest
    from waldur_api_client.models.agent_queue_registration_response import AgentQueueRegistrationResponse

    problems = []
    if not (exchange.get("request_headers") or {}).get("Authorization"):
        problems.append("request: no Authorization header")
    checks = [("request", exchange.get("request_body"), AgentQueueRegistrationRequest)]
    if 200 <= exchange["status"] < 300:
        checks.append(("response", exchange.get("response_body"), AgentQueueRegistrationResponse))
    for side, body, model in checks:
        try:
            data = json.loads(body or b"null")
            if not isinstance(data, dict):
                raise TypeError("expected an object, got %s" % type(data).__name__)
            model.from_dict(data)
        except (ValueError, TypeError, KeyError) as exc:
            problems.append("%s: does not parse as %s: %s" % (side, model.__name__, exc))
    return [f"{label}: {problem}" for problem in problems]


_UPDATE_PRICES = re.compile(r"^/api/marketplace-plans/[0-9a-fA-F-]{32,36}/update_prices/$")


def _validate_update_prices(exchange: dict, label: str) -> list[str]:
    """Deviation 6: the plan action that prices components, checked by hand."""
    import json
    from decimal import Decimal, InvalidOperation

    problems = []
    if not (exchange.get("request_headers") or {}).get("Authorization"):
        problems.append("request: no Authorization header")
    try:
        body = json.loads(exchange.get("request_body") or b"null")
    except ValueError as exc:
        body, problems = None, problems + ["request: not JSON: %s" % exc]
    prices = body.get("prices") if isinstance(body, dict) else None
    if not isinstance(prices, dict):
        problems.append("request: expected {\"prices\": {type: price}}")
    else:
        for key, value in prices.items():
            try:
                ok = not isinstance(value, bool) and Decimal(str(value)) >= 0
            except InvalidOperation:
                ok = False
            if not (isinstance(key, str) and ok):
                problems.append("request: prices.%s: expected a number of 0 or more, got %r" % (key, value))
    if 200 <= exchange["status"] < 300 and exchange.get("response_body"):
        problems.append("response: expected no body")
    if exchange["status"] == 400:
        problems = [problem for problem in problems if not problem.startswith("request: prices.")]
    return [f"{label}: {problem}" for problem in problems]


def _validate(exchange: dict) -> list[str]:
    request_api, response_api = apis()
    request = mock_request(exchange)
    status = exchange["status"]
    path = request.path
    label = f"{exchange['method']} {exchange['url']} -> {status}"
    if _REGISTER_QUEUE.match(path):
        return _validate_register_queue(exchange, label)
    if _UPDATE_PRICES.match(path):
        return _validate_update_prices(exchange, label)
    problems: list[str] = []
    try:
        request_errors = list(request_api.iter_request_errors(request))
    except (PathNotFound, OperationNotFound, ServerNotFound) as exc:
        request_errors = [exc]
    found = True
    for error in request_errors:
        if isinstance(error, (PathNotFound, OperationNotFound, ServerNotFound)):
            found = False
        if not _request_error_explained(error, status):
            problems.extend("request: " + p for p in _describe(error, path))
    if found and 200 <= status < 300:
        body = exchange["response_body"] or b""
        quirk_empty = (not body and "empty_bodies" in exchange.get("quirks", ())
                       and _EMPTY_BODY_QUIRK_PATHS.match(path))
        for error in response_api.iter_response_errors(request, mock_response(exchange)):
            if quirk_empty and isinstance(error, MissingData):
                continue  # deviation 4
            problems.extend("response: " + p for p in _describe(error, path, tolerate=True))
        problems.extend(_result_count_problems(exchange))
    return [f"{label}: {problem}" for problem in problems]


_UNPAGED_ACTION = re.compile(r"^/api/marketplace-provider-resources/[0-9a-fA-F-]{32,36}/team/$")


def _result_count_problems(exchange: dict) -> list[str]:
    """A listing's page must carry X-Result-Count, at least as large as the page itself."""
    import json

    if exchange["method"] != "GET" or _UNPAGED_ACTION.match(urlsplit(exchange["url"]).path):
        return []
    try:
        body = json.loads(exchange["response_body"] or b"null")
    except ValueError:
        return []
    if not isinstance(body, list):
        return []
    value = {k.lower(): v for k, v in exchange["response_headers"].items()}.get("x-result-count")
    if value is None:
        return ["response: a listing without X-Result-Count"]
    if not str(value).isdigit() or int(value) < len(body):
        return [f"response: X-Result-Count {value!r} for a page of {len(body)} item(s)"]
    return []


def validate_exchanges(exchanges) -> list[str]:
    problems: list[str] = []
    for exchange in exchanges:
        problems.extend(validate_exchange(exchange))
    return problems


__all__ = ["SPEC_PATH", "apis", "validate_exchange", "validate_exchanges"]
