# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The collection's only HTTP client for Waldur, and the shared module plumbing.

``WaldurClient`` keeps one ``requests.Session`` (keep-alive) with
``Authorization: Token <token>``, follows Waldur's ``Link`` pagination,
retries transient failures (connection errors, 5xx, 429 + ``Retry-After``)
through :class:`retry.RetryPolicy` within ``max_retry_seconds``, and turns
every other failure into a :class:`WaldurApiError` whose text carries the
method, path, status and Waldur's own message, never the token.

``WaldurModule`` builds an ``AnsibleModule`` with the common options
(``waldur_argument_spec()``, documented by the ``waldur.site_agent.waldur``
doc fragment) and renders client errors consistently.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import threading
import traceback
from urllib.parse import parse_qsl, urlsplit

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.waldur.site_agent.plugins.module_utils.batch import ItemError
from ansible_collections.waldur.site_agent.plugins.module_utils.naming import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.retry import (
    RETRYABLE_STATUSES,
    RetryPolicy,
    parse_retry_after,
)

try:
    import requests
    import urllib3
    from requests.adapters import HTTPAdapter
except ImportError:
    HAS_REQUESTS = False
    REQUESTS_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_REQUESTS = True
    REQUESTS_IMPORT_ERROR = None

COLLECTION_VERSION = "0.1.0"
DEFAULT_USER_AGENT = "waldur-site-agent-ansible/%s" % COLLECTION_VERSION
DEFAULT_PAGE_SIZE = 100
# A safety net against a server whose Link header loops; 10000 pages of 100 is far beyond any offering.
MAX_PAGES = 10000
# Statuses a non-idempotent POST may be retried on: the request was refused before any work was done.
UNPROCESSED_STATUSES = frozenset((429, 503))
TERMINAL_ORDER_STATES = frozenset(("done", "erred", "canceled", "rejected"))
ACTIONABLE_ORDER_STATES = ("pending-provider", "executing")


def waldur_argument_spec():
    """Options shared by every Waldur module (doc fragment ``waldur.site_agent.waldur``)."""
    return dict(
        api_url=dict(type="str", required=True, fallback=(env_fallback, ["WALDUR_API_URL"])),
        api_token=dict(type="str", required=True, no_log=True, fallback=(env_fallback, ["WALDUR_API_TOKEN"])),
        verify_ssl=dict(type="bool", default=True, fallback=(env_fallback, ["WALDUR_VERIFY_SSL"])),
        timeout=dict(type="float", default=30.0),
        max_retry_seconds=dict(type="float", default=120.0),
    )


def normalize_api_root(api_url):
    """``https://host/`` for ``https://host``, ``https://host/api``, ``https://host/api/`` (and sub-paths)."""
    if not api_url or not isinstance(api_url, str):
        raise ValueError("api_url must be an http(s) URL such as https://waldur.example.com/api/")
    text = api_url.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("api_url must be an http(s) URL such as https://waldur.example.com/api/, got %r" % text)
    path = parts.path.rstrip("/")
    if path.endswith("/api"):
        path = path[:-len("/api")]
    return "%s://%s%s/" % (parts.scheme, parts.netloc, path)


def _error_text(body):
    """Waldur's message from an error body: ``detail``, ``non_field_errors`` or per-field errors."""
    if body is None:
        return ""
    if isinstance(body, str):
        return body
    if isinstance(body, list):
        return "; ".join(_error_text(item) for item in body if item not in (None, ""))
    if isinstance(body, dict):
        parts = []
        if body.get("detail") not in (None, ""):
            parts.append(_error_text(body["detail"]))
        if body.get("non_field_errors"):
            parts.append(_error_text(body["non_field_errors"]))
        for key in sorted(body):
            if key in ("detail", "non_field_errors"):
                continue
            parts.append("%s: %s" % (key, _error_text(body[key])))
        return "; ".join(part for part in parts if part)
    return str(body)


class WaldurApiError(Exception):
    """A Waldur call that failed for good. ``status`` is None for connection failures."""

    def __init__(self, status, method, path, message):
        self.status = status
        self.method = method
        self.path = path
        self.message = message
        super(WaldurApiError, self).__init__(str(self))

    def __str__(self):
        status = "HTTP %s" % self.status if self.status is not None else "no response"
        text = "Waldur %s %s failed (%s)" % (self.method, self.path, status)
        return "%s: %s" % (text, self.message) if self.message else text

    @property
    def transient(self):
        """True when the failure says nothing about the request itself (retry in the next pass)."""
        return self.status is None or self.status in RETRYABLE_STATUSES

    @property
    def not_found(self):
        return self.status == 404

    @property
    def conflict(self):
        return self.status == 409


class WaldurClient:
    """A thread-safe Waldur REST client shared by the workers of one module run."""

    def __init__(self, api_url, token, verify_ssl=True, timeout=30, max_retry_seconds=120,
                 user_agent=DEFAULT_USER_AGENT, retry_policy=None, pool_size=16):
        if not HAS_REQUESTS:
            raise RuntimeError(missing_required_lib("requests"))
        if not token:
            raise ValueError("api_token is empty: give the Waldur API token (or set WALDUR_API_TOKEN)")
        self.root = normalize_api_root(api_url)
        self._token = token
        self.timeout = timeout
        self.retry_policy = retry_policy or RetryPolicy(max_retry_seconds=max_retry_seconds)
        self.session = requests.Session()
        self.session.verify = verify_ssl
        if not verify_ssl:
            # the operator chose this for the offering; one warning per request would drown the output
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self.session.headers.update({
            "Authorization": "Token %s" % token,
            "Accept": "application/json",
            "User-Agent": user_agent,
        })
        # one pool large enough for every worker thread, so keep-alive connections are reused
        adapter = HTTPAdapter(pool_connections=2, pool_maxsize=max(pool_size, 10), max_retries=0)
        self.session.mount("https://", adapter)
        self.session.mount("http://", adapter)
        self._lock = threading.Lock()
        self.calls = {"reads": 0, "writes": 0, "retries": 0}

    # ---- URLs -------------------------------------------------------------------------
    def url(self, path):
        """Absolute URL for ``marketplace-orders/``, ``/api/marketplace-orders/`` or an absolute URL."""
        if path.startswith("http://") or path.startswith("https://"):
            return path
        relative = path.lstrip("/")
        if relative.startswith("api/"):
            relative = relative[len("api/"):]
        return "%sapi/%s" % (self.root, relative)

    def api_path(self, path):
        """The URL path (``/api/...``) of ``path``, as errors show it."""
        return urlsplit(self.url(path)).path

    # ---- calls ------------------------------------------------------------------------
    def get(self, path, params=None):
        return self.request("GET", path, params=params)

    def post(self, path, json=None, params=None, idempotent=True):
        """POST; an empty 200/201 body (older Waldur transitions) comes back as ``{}``."""
        body = self.request("POST", path, params=params, json=json, idempotent=idempotent)
        return {} if body is None else body

    def list(self, path, params=None):
        """Every item of a paged listing, following ``Link: <...>; rel="next"``."""
        query = dict(params or {})
        query.setdefault("page_size", DEFAULT_PAGE_SIZE)
        items = []
        seen_pages = set()
        for _page in range(MAX_PAGES):
            response = self._send("GET", path, params=query)
            body = self._decode(response)
            if isinstance(body, dict) and isinstance(body.get("results"), list):
                items.extend(body["results"])  # DRF page-number style, tolerated
            elif isinstance(body, list):
                items.extend(body)
            elif body is not None:
                raise WaldurApiError(response.status_code, "GET", self.api_path(path),
                                     "expected a JSON list, got %s" % type(body).__name__)
            next_url = (response.links.get("next") or {}).get("url")
            if not next_url:
                break
            # Re-issue our own path with the next page's query: a proxy may put the wrong scheme
            # or host in Link, and the token must only ever go to api_url.
            query = self._query_of(next_url)
            marker = tuple(sorted((key, str(value)) for key, value in query.items()))
            if "page" not in query or marker in seen_pages:
                break
            seen_pages.add(marker)
        return items

    @staticmethod
    def _query_of(url):
        """The query of ``url`` as a dict; repeated keys (state=a&state=b) become lists."""
        query = {}
        for key, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
            if key in query:
                if not isinstance(query[key], list):
                    query[key] = [query[key]]
                query[key].append(value)
            else:
                query[key] = value
        return query

    def request(self, method, path, params=None, json=None, idempotent=True):
        return self._decode(self._send(method, path, params=params, json=json, idempotent=idempotent))

    # ---- internals --------------------------------------------------------------------
    @staticmethod
    def _encode_params(params):
        if not params:
            return None
        encoded = {}
        for key, value in params.items():
            if value is None:
                continue
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, (list, tuple, set)):
                value = [("true" if v else "false") if isinstance(v, bool) else v for v in value]
            encoded[key] = value
        return encoded

    def _count(self, method, retry=False):
        with self._lock:
            self.calls["writes" if method in ("POST", "PUT", "PATCH", "DELETE") else "reads"] += 1
            if retry:
                self.calls["retries"] += 1

    def _send(self, method, path, params=None, json=None, idempotent=True):
        url = self.url(path)
        api_path = urlsplit(url).path
        deadline = self.retry_policy.start()
        attempt = 0
        while True:
            attempt += 1
            self._count(method, retry=attempt > 1)
            retry_after = None
            try:
                response = self.session.request(
                    method, url, params=self._encode_params(params), json=json,
                    timeout=self.timeout, allow_redirects=False)
            except requests.exceptions.RequestException as exc:
                # A request that never reached the server is safe to resend; after a lost reply a
                # non-idempotent POST may have been applied, so it is not resent.
                error = WaldurApiError(None, method, api_path, self._scrub(self._describe_exception(exc)))
                if not (idempotent or self._never_sent(exc)):
                    raise error
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return response
                error = self._error_from_response(method, api_path, response)
                retryable = status in RETRYABLE_STATUSES if idempotent else status in UNPROCESSED_STATUSES
                if not retryable:
                    raise error
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
            wait = self.retry_policy.delay(attempt, deadline, retry_after)
            if wait is None:
                if retry_after is not None and attempt < self.retry_policy.max_attempts:
                    error.message = "%s (Retry-After %ss is beyond max_retry_seconds=%s)" % (
                        error.message, retry_after, self.retry_policy.max_retry_seconds)
                else:
                    error.message = "%s (gave up after %d attempts)" % (error.message, attempt)
                raise error
            self.retry_policy.sleep(wait)

    @staticmethod
    def _never_sent(exc):
        """True when the connection could not even be opened (nothing reached Waldur)."""
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            return True
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        return isinstance(reason, urllib3.exceptions.NewConnectionError)

    @staticmethod
    def _describe_exception(exc):
        kind = type(exc).__name__
        reason = str(exc)
        # urllib3 reasons repeat the whole URL and pool object; the class name plus the last clause is enough
        if "Caused by" in reason:
            reason = reason.split("Caused by", 1)[1].strip(" ()")
        return "%s: %s" % (kind, reason[:300])

    def _scrub(self, text):
        """Belt and braces: a token can only leak through an echoing proxy, but never let it through."""
        if self._token and text:
            return text.replace(self._token, "********")
        return text

    def _error_from_response(self, method, api_path, response):
        status = response.status_code
        if 300 <= status < 400:
            message = "unexpected redirect to %s (check api_url)" % response.headers.get("Location", "?")
        else:
            try:
                message = _error_text(response.json())
            except ValueError:
                text = (response.text or "").strip()
                if text.lower().startswith("<!doctype") or text.lower().startswith("<html"):
                    message = "%s (HTML page instead of JSON; is api_url the Waldur API?)" % (response.reason or "")
                else:
                    message = text[:500]
            if not message:
                message = response.reason or ""
        return WaldurApiError(status, method, api_path, self._scrub(message.strip()))

    @staticmethod
    def _decode(response):
        if not response.content or not response.content.strip():
            return None
        try:
            return response.json()
        except ValueError:
            return None

    def close(self):
        self.session.close()


def error_message(exc):
    """An exception as an operator reads it: our own errors as they are, others with their type."""
    if isinstance(exc, (WaldurApiError, ItemError)):
        return str(exc)
    return "%s: %s" % (type(exc).__name__, exc)


def hex_uuid(value):
    """32-hex form of a UUID Waldur returned; empty stays None, anything odd is kept as given."""
    if value in (None, ""):
        return None
    try:
        return normalize_uuid(value)
    except ValueError:
        return str(value)


def _mapping(value):
    return value if isinstance(value, dict) else {}


def normalize_resource(raw):
    """A provider resource in the shape of the data contract (``orders[].resource``)."""
    raw = raw or {}
    return {
        "uuid": hex_uuid(raw.get("uuid")),
        "name": raw.get("name") or "",
        "slug": raw.get("slug") or "",
        "state": raw.get("state"),
        "backend_id": raw.get("backend_id") or "",
        "limits": _mapping(raw.get("limits")),
        "attributes": _mapping(raw.get("attributes")),
        "options": _mapping(raw.get("options")),
        "paused": bool(raw.get("paused")),
        "downscaled": bool(raw.get("downscaled")),
        "backend_metadata": _mapping(raw.get("backend_metadata")),
        "project_uuid": hex_uuid(raw.get("project_uuid")),
        "project_slug": raw.get("project_slug") or "",
        "customer_uuid": hex_uuid(raw.get("customer_uuid")),
        "customer_slug": raw.get("customer_slug") or "",
        "offering_uuid": hex_uuid(raw.get("offering_uuid")),
        "plan_uuid": hex_uuid(raw.get("plan_uuid")),
        "offering_plugin_options": _mapping(raw.get("offering_plugin_options")),
    }


def normalize_order(raw):
    """An order in the shape of the data contract (``orders[]`` without ``resource``)."""
    raw = raw or {}
    return {
        "uuid": hex_uuid(raw.get("uuid")),
        "type": raw.get("type"),
        "state": raw.get("state"),
        "offering_uuid": hex_uuid(raw.get("offering_uuid")),
        "marketplace_resource_uuid": hex_uuid(raw.get("marketplace_resource_uuid")),
        "resource_name": raw.get("resource_name") or "",
        "project_uuid": hex_uuid(raw.get("project_uuid")),
        "project_slug": raw.get("project_slug") or "",
        "plan_uuid": hex_uuid(raw.get("plan_uuid")),
        "attributes": _mapping(raw.get("attributes")),
        "limits": _mapping(raw.get("limits")),
        "created": raw.get("created"),
        "modified": raw.get("modified"),
    }


def ssh_key_fingerprint(public_key):
    """OpenSSH MD5 fingerprint (``aa:bb:...``) of a public key line; None if it is not one."""
    parts = (public_key or "").split()
    blob = None
    for index, part in enumerate(parts):
        # the blob follows the key type; options before the type (authorized_keys style) are skipped
        if part.startswith("ssh-") or part.startswith("ecdsa-") or part.startswith("sk-"):
            if index + 1 < len(parts):
                blob = parts[index + 1]
            break
    if blob is None and len(parts) >= 2:
        blob = parts[1]
    if not blob:
        return None
    try:
        raw = base64.b64decode(blob.encode("ascii"), validate=True)
    except (ValueError, binascii.Error):
        return None
    try:
        digest = hashlib.md5(raw, usedforsecurity=False).hexdigest()  # a key label, not security
    except TypeError:  # Python < 3.9
        digest = hashlib.md5(raw).hexdigest()  # nosec - fingerprint format, not security
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def order_path(order_uuid, action=None):
    return "marketplace-orders/%s/%s" % (normalize_uuid(order_uuid), "%s/" % action if action else "")


def provider_resource_path(resource_uuid, action=None):
    return "marketplace-provider-resources/%s/%s" % (
        normalize_uuid(resource_uuid), "%s/" % action if action else "")


def provider_offering_path(offering_uuid, action=None):
    return "marketplace-provider-offerings/%s/%s" % (
        normalize_uuid(offering_uuid), "%s/" % action if action else "")


def offering_components(client, offering_uuid):
    """The offering's components as Waldur lists them (``GET provider offering?field=components``)."""
    body = client.get(provider_offering_path(offering_uuid), params={"field": ["components"]}) or {}
    return [component for component in body.get("components") or [] if isinstance(component, dict)]


class WaldurModule:
    """``AnsibleModule`` with the common Waldur options, a lazily built client and error rendering."""

    def __init__(self, argument_spec=None, supports_check_mode=True, **kwargs):
        spec = waldur_argument_spec()
        spec.update(argument_spec or {})
        self.module = AnsibleModule(argument_spec=spec, supports_check_mode=supports_check_mode, **kwargs)
        if not HAS_REQUESTS:
            self.module.fail_json(msg=missing_required_lib("requests"), exception=REQUESTS_IMPORT_ERROR)
        self._client = None

    def __getattr__(self, name):
        # params, check_mode, warn, exit_json ... come from the wrapped AnsibleModule
        return getattr(self.module, name)

    def client(self, pool_size=16):
        if self._client is None:
            params = self.module.params
            try:
                self._client = WaldurClient(
                    params["api_url"], params["api_token"], verify_ssl=params["verify_ssl"],
                    timeout=params["timeout"], max_retry_seconds=params["max_retry_seconds"],
                    pool_size=pool_size)
            except ValueError as exc:
                self.module.fail_json(msg=str(exc))
        return self._client

    def uuid_param(self, value, name):
        """``value`` as 32 hex digits, or fail naming the option/key (``outcomes[3].order_uuid``)."""
        try:
            text = normalize_uuid(value)
        except ValueError:
            text = None
        if text is None:
            self.fail_json(msg="%s must be a UUID (32 hex digits, dashes optional), got %r" % (name, value))
        return text

    def api_calls(self):
        return dict(self._client.calls) if self._client is not None else {"reads": 0, "writes": 0, "retries": 0}

    def exit_json(self, **result):
        result.setdefault("api_calls", self.api_calls())
        self.module.exit_json(**result)

    def fail_json(self, msg, **result):
        result.setdefault("api_calls", self.api_calls())
        self.module.fail_json(msg=msg, **result)

    def fail_from_error(self, exc, msg=None, **result):
        """Fail the task from a WaldurApiError (or any exception), naming what was being done."""
        text = str(exc)
        if isinstance(exc, WaldurApiError):
            result.setdefault("status", exc.status)
            if exc.status == 401:
                text += " (check api_token)"
            elif exc.status == 403:
                text += " (the api_token's user lacks permission for this call)"
        self.fail_json(msg="%s: %s" % (msg, text) if msg else text, **result)
