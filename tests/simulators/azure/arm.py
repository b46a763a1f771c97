"""ARM wire conventions shared by the simulator's resource providers: the error
type, case-insensitive paths, ids, timestamps and paging."""

from __future__ import annotations

import datetime
import re
import uuid
from urllib.parse import urlencode

from werkzeug.wrappers import Request

# Path segments ARM treats as keywords, in their canonical casing. Matching is
# case-insensitive (the SDK itself sends "resourcegroups" for group calls and
# "resourceGroups" elsewhere); names in between keep the caller's casing.
_KEYWORDS = {word.lower(): word for word in [
    "subscriptions", "resourceGroups", "providers", "locations", "operations", "operationResults",
    "Microsoft.Network", "Microsoft.Compute", "Microsoft.Resources",
    "virtualNetworks", "subnets", "publicIPAddresses", "networkSecurityGroups", "securityRules",
    "networkInterfaces", "virtualMachines", "disks", "vmSizes", "skus", "instanceView", "resources",
    "deallocate", "start", "powerOff", "restart",
    "v2.0", ".well-known", "openid-configuration", "oauth2", "token",
]}
# Keywords followed by a caller-chosen name (which must keep its casing).
_NAMED = {"subscriptions", "resourceGroups", "locations", "operations", "operationResults",
          "virtualNetworks", "subnets", "publicIPAddresses", "networkSecurityGroups",
          "securityRules", "networkInterfaces", "virtualMachines", "disks"}


def canonical_path(path: str) -> str:
    """``/SUBSCRIPTIONS/s/resourcegroups/RG`` -> ``/subscriptions/s/resourceGroups/RG``."""
    out = []
    name_next = False
    for segment in path.split("/"):
        if not segment or name_next:
            out.append(segment)
            name_next = False
            continue
        keyword = _KEYWORDS.get(segment.lower())
        if keyword is None:
            out.append(segment)
        else:
            out.append(keyword)
            name_next = keyword in _NAMED
    return "/".join(out)


class CaseInsensitiveMap:
    """Wraps a werkzeug ``Map`` so rules written in canonical casing match
    requests in any casing, while the handlers still see names as sent."""

    def __init__(self, inner):
        self.inner = inner

    def bind_to_environ(self, environ, *args, **kwargs):
        canonical = dict(environ)
        canonical["PATH_INFO"] = canonical_path(environ.get("PATH_INFO", ""))
        return self.inner.bind_to_environ(canonical, *args, **kwargs)


class ArmError(Exception):
    """An ARM error response: ``{"error": {"code", "message", "target"?, "details"?}}``."""

    def __init__(self, status: int, code: str, message: str, target: str | None = None,
                 details: list | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.target = target
        self.details = details

    def body(self) -> dict:
        error = {"code": self.code, "message": self.message}
        if self.target:
            error["target"] = self.target
        if self.details:
            error["details"] = self.details
        return {"error": error}


# ARM error codes used when only the HTTP status is known (injected faults, routing).
STATUS_CODES = {
    400: "BadRequest", 401: "AuthenticationFailed", 403: "AuthorizationFailed", 404: "NotFound",
    405: "MethodNotAllowed", 408: "RequestTimeout", 409: "Conflict", 412: "PreconditionFailed",
    429: "TooManyRequests", 500: "InternalServerError", 502: "BadGateway",
    503: "ServiceUnavailable", 504: "GatewayTimeout",
}


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def new_guid() -> str:
    return str(uuid.uuid4())


def new_etag() -> str:
    return f'W/"{uuid.uuid4()}"'


def normalize_location(value) -> str:
    """ARM accepts display names ("West Europe") and stores the short form."""
    return str(value or "").replace(" ", "").lower()


def page(request: Request, items: list, page_size: int, render=None) -> dict:
    """One page of a list response, with an absolute ``nextLink`` when more remain
    (the SDK follows it verbatim, so it carries the api-version and filters). With
    ``render``, ``items`` are records and only the page's are rendered."""
    try:
        offset = max(0, int(request.args.get("$skiptoken", 0)))
    except ValueError:
        raise ArmError(400, "InvalidSkipToken", "The $skiptoken query parameter is invalid.") from None
    chosen = items[offset:offset + page_size]
    body = {"value": [render(item) for item in chosen] if render else chosen}
    if offset + page_size < len(items):
        args = [(k, v) for k, v in request.args.items(multi=True) if k != "$skiptoken"]
        args.append(("$skiptoken", str(offset + page_size)))
        body["nextLink"] = request.host_url.rstrip("/") + request.path + "?" + urlencode(args, safe="$")
    return body


_TAG_NAME = re.compile(r"^\s*tagname\s+eq\s+'(?P<name>[^']*)'\s*$", re.IGNORECASE)
_TAG_NAME_VALUE = re.compile(r"^\s*tagname\s+eq\s+'(?P<name>[^']*)'\s+and\s+tagvalue\s+eq\s+'(?P<value>[^']*)'\s*$",
                             re.IGNORECASE)
_RESOURCE_TYPE = re.compile(r"^\s*resourcetype\s+eq\s+'(?P<type>[^']*)'\s*$", re.IGNORECASE)


def parse_filter(text: str | None, allow_type: bool):
    """A predicate on records for the ``$filter`` ARM accepts on resource group and resource
    lists: ``tagName eq 'k' [and tagValue eq 'v']`` (tag names compare case-insensitively,
    values exactly), and on resource lists ``resourceType eq 't'``. Anything else: 400."""
    if not text:
        return lambda record: True
    match = _TAG_NAME_VALUE.match(text) or _TAG_NAME.match(text)
    if match:
        name, value = match.group("name").lower(), match.groupdict().get("value")

        def tagged(record: dict) -> bool:
            return any(key.lower() == name and (value is None or tag == value)
                       for key, tag in (record.get("tags") or {}).items())
        return tagged
    match = _RESOURCE_TYPE.match(text) if allow_type else None
    if match:
        wanted = match.group("type").lower()
        return lambda record: str(record.get("type", "")).lower() == wanted
    raise ArmError(400, "InvalidFilterInQueryString", f"Invalid $filter '{text}' specified in the query string.")
