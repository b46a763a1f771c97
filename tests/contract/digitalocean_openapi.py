"""Check recorded DigitalOcean simulator exchanges against DigitalOcean's OpenAPI spec.

The spec is DigitalOcean's official public v2 spec, reduced to the paths the
collection uses (``tests/contract/specs/digitalocean-openapi.yaml``; see its README
there for the source commit, licence and reduction). ``validate_exchange`` takes one entry of
``DigitalOceanSimulator.exchanges`` and returns the problems found (empty = valid).

Exchanges are presented as DigitalOcean would have seen them: on
``https://api.digitalocean.com`` (the spec's only server) and with trailing slashes
stripped from the path (the spec lists paths without them).

Tolerances, each narrow and each for a documented reason; anything else is reported:

1. ``/v2/account/keys/{ssh_key_identifier}``: the spec marks both schemas of this
   path parameter ``readOnly``, so openapi-core rejects every value in a request.
   The parameter error is ignored when the value is an integer id or an MD5
   fingerprint (16 colon-separated hex pairs), the two forms the spec documents.
2. Resize actions: python-digitalocean's ``Droplet.resize(disk=True)`` sends
   ``"disk": "true"`` (a string; the spec says boolean). The strings "true" and
   "false" are read as booleans before validating; other strings still fail.
3. Droplet create: python-digitalocean always sends ``"vpc_uuid": null`` when no VPC
   is chosen (the spec's ``vpc_uuid`` is a non-nullable string; DigitalOcean
   ignores the null). A null ``vpc_uuid`` is dropped before validating.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from openapi_core import OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from openapi_core.validation.request.exceptions import InvalidParameter
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request, Response

# Vendored beside this file with its licence and provenance (specs/digitalocean-openapi.README.md).
SPEC_PATH = Path(__file__).resolve().parent / "specs" / "digitalocean-openapi.yaml"
SERVER = "https://api.digitalocean.com"

KEY_IDENTIFIER = re.compile(r"^(\d+|([0-9a-f]{2}:){15}[0-9a-f]{2})$")
DROPLET_ACTIONS_PATH = re.compile(r"^/v2/droplets/\d+/actions$")


@lru_cache(maxsize=1)
def spec() -> OpenAPI:
    return OpenAPI.from_file_path(str(SPEC_PATH))


def spec_operations() -> set[tuple[str, str]]:
    """Every (METHOD, path template) the spec declares."""
    paths = spec().spec / "paths"
    operations = set()
    for template in paths.keys():
        for method in (paths / template).keys():
            if method in ("get", "post", "put", "delete", "patch"):
                operations.add((method.upper(), template))
    return operations


def spec_path(exchange: dict) -> str:
    """The exchange's path as the spec matches it (no trailing slash)."""
    path = urlsplit(exchange["url"]).path
    return path.rstrip("/") or "/"


def _tolerated_body(method: str, path: str, body: str) -> str:
    """The request body with python-digitalocean's known deviations normalised (2, 3)."""
    if method != "POST" or not body:
        return body
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if not isinstance(data, dict):
        return body
    if DROPLET_ACTIONS_PATH.match(path) and data.get("type") == "resize" \
            and data.get("disk") in ("true", "false"):
        data["disk"] = data["disk"] == "true"
    elif path == "/v2/droplets" and "vpc_uuid" in data and data["vpc_uuid"] is None:
        del data["vpc_uuid"]
    else:
        return body
    return json.dumps(data)


def _tolerated_error(error: Exception, path: str) -> bool:
    """True for the spec's ssh_key_identifier readOnly quirk on a well-formed value (1)."""
    if not isinstance(error, InvalidParameter) or error.name != "ssh_key_identifier":
        return False
    identifier = path.rsplit("/", 1)[-1]
    return path.startswith("/v2/account/keys/") and bool(KEY_IDENTIFIER.match(identifier))


def _describe(error: Exception) -> str:
    """One line per error: the schema errors by JSON path rather than the whole value."""
    cause = error.__cause__
    schema_errors = getattr(cause, "schema_errors", None) or getattr(error, "schema_errors", None)
    if schema_errors:
        details = "; ".join(
            f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in schema_errors)
        name = getattr(error, "name", None)  # the parameter, for parameter errors
        return f"{type(error).__name__}{f' {name}' if name else ''}: {details}"
    text = f"{type(error).__name__}: {error}"
    if cause is not None and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return text


def openapi_request(exchange: dict) -> Request:
    """The recorded request as a werkzeug request on DigitalOcean's server."""
    parts = urlsplit(exchange["url"])
    path = parts.path.rstrip("/") or "/"
    headers = {k: v for k, v in exchange["headers"].items()
               if k.lower() not in ("host", "content-length")}
    body = _tolerated_body(exchange["method"], path, exchange.get("body") or "")
    builder = EnvironBuilder(path=path, base_url=SERVER, query_string=parts.query,
                             method=exchange["method"], headers=headers,
                             data=body.encode() if body else None)
    try:
        return Request(builder.get_environ())
    finally:
        builder.close()


def openapi_response(exchange: dict) -> Response:
    return Response((exchange.get("response_body") or "").encode(), status=exchange["status"],
                    headers=list(exchange["response_headers"].items()))


def validate_exchange(exchange: dict, check_request: bool = True) -> list[str]:
    """Problems of one exchange against the spec, each prefixed "request"/"response".

    ``check_request=False`` checks only the response: for exchanges whose request is
    wrong on purpose (a test of the simulator's 400/422 answers)."""
    api = spec()
    path = spec_path(exchange)
    request = WerkzeugOpenAPIRequest(openapi_request(exchange))
    response = WerkzeugOpenAPIResponse(openapi_response(exchange))
    problems = []
    if check_request:
        problems += [f"request: {_describe(e)}" for e in api.iter_request_errors(request)
                     if not _tolerated_error(e, path)]
    problems += [f"response: {_describe(e)}" for e in api.iter_response_errors(request, response)]
    label = f"{exchange['method']} {path} -> {exchange['status']}"
    return [f"{label}: {p}" for p in problems]


def validate_exchanges(exchanges) -> list[str]:
    problems = []
    for exchange in exchanges:
        problems.extend(validate_exchange(exchange))
    return problems


def matched_operation(exchange: dict) -> tuple[str, str] | None:
    """The (METHOD, path template) the exchange hits in the spec, or None."""
    path = spec_path(exchange)
    for method, template in spec_operations():
        if method != exchange["method"]:
            continue
        pattern = "^" + re.sub(r"\{[^}]+\}", r"[^/]+", template) + "$"
        if re.match(pattern, path):
            return method, template
    return None
