# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The collection's only HTTP client for Waldur: transport and error model.

``WaldurClient`` keeps one ``requests.Session`` (keep-alive) with
``Authorization: Token <token>``, follows Waldur's ``Link`` pagination,
retries transient failures (connection errors, 5xx, 429 + ``Retry-After``)
through ``core/http.py``'s loop within ``max_retry_seconds`` (and a Waldur
that cannot be reached at all within ``unreachable_timeout``), and turns every
other failure into a :class:`WaldurApiError` whose text carries the method,
path, status and Waldur's own message, never the token.

A view is trusted only when it is whole and well-formed: ``get(path, expect=dict)``
(``expect=list`` for an unpaged list, None for any JSON) and ``post`` return JSON of the
expected type, ``list``/``pages``/``find`` pages that are JSON lists of objects adding up to
Waldur's ``X-Result-Count``. Any other 2xx answer (an HTML page, truncated JSON, the wrong
shape, an empty body for a read) raises a :class:`WaldurApiError` with that 2xx status naming
the call and what came back (content type and first characters, never headers or the token);
it is not transient, so it is not retried. Only writes may answer an empty body (older
Waldur's transitions). A token with stray whitespace or a control character is refused
(``ValueError``) before any call.

TLS verification is exactly ``verify_ssl``: ``false`` never verifies, a path
verifies against that CA bundle, ``true`` verifies against E(REQUESTS_CA_BUNDLE)
or E(CURL_CA_BUNDLE) when set, else the bundled CAs. (requests merges the
environment into a session's ``verify=False``; passing it on every request
keeps the operator's choice.)

Waldur's data shapes and paths are in ``marketplace.py``, the module wrapper
(``WaldurModule``) in ``module.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import threading
import traceback
from urllib.parse import parse_qsl, urlsplit

from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import ItemError
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import ProvenList, ProvenObject
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_guard import check_write
from ansible_collections.waldur.site_agent.plugins.module_utils.core.http import (
    DONE,
    EXHAUSTED,
    Retry,
    describe_body,
    send_with_retries,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.retry import (
    RETRYABLE_STATUSES,
    RetryPolicy,
    parse_retry_after,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import redact_text, secret_text_problem
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import hex_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import read_shape
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.errors import (  # noqa: F401 (re-exported)
    WaldurApiError,
    WaldurUnproven,
    _error_text,
    describe_connection_error,
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

COLLECTION_VERSION = "1.0.0"
DEFAULT_USER_AGENT = "waldur-site-agent-ansible/%s" % COLLECTION_VERSION
DEFAULT_PAGE_SIZE = 100
WRITE_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))
# A safety net against a server whose Link header loops; 10000 pages of 100 is far beyond any offering.
MAX_PAGES = 10000
# Statuses a non-idempotent POST may be retried on: the request was refused before any work was done.
UNPROCESSED_STATUSES = frozenset((429, 503))
# Seconds to keep trying a Waldur that cannot be reached at all (refused, unknown host, no answer
# to connect): a pass fails each such offering within about this long.
DEFAULT_UNREACHABLE_TIMEOUT = 10.0
# What a call expected, as an error about a 2xx answer of another kind words it.
_SHAPES = {dict: "a JSON object", list: "a JSON list", None: "JSON"}
_LISTING = "a JSON list of objects"
_NOT_JSON = object()


def parse_verify_ssl(value):
    """``verify_ssl`` as requests takes it: True, False or the path of a CA bundle file.
    Raises ValueError naming what was expected."""
    if isinstance(value, bool):
        return value
    if value is None:
        return True
    text = str(value).strip()
    if text.lower() in BOOLEANS_TRUE or text in BOOLEANS_TRUE:
        return True
    if text.lower() in BOOLEANS_FALSE or text in BOOLEANS_FALSE:
        return False
    path = os.path.expanduser(text)
    if os.path.isfile(path):
        return path
    raise ValueError("verify_ssl must be true, false or the path of a CA bundle file; %s is not a file" % text)


def normalize_api_root(api_url):
    """``https://host/`` for ``https://host``, ``https://host/api``, ``https://host/api/`` (and sub-paths)."""
    if not api_url or not isinstance(api_url, str):
        raise ValueError("api_url must be an http(s) URL such as https://waldur.example.com/api/")
    text = api_url.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("api_url must be an http(s) URL such as https://waldur.example.com/api/, got %r" % text)
    path = parts.path.rstrip("/")
    if path.endswith("/api"):
        path = path[:-len("/api")]
    return "%s://%s%s/" % (parts.scheme, parts.netloc, path)


class WaldurClient:
    """A thread-safe Waldur REST client shared by the workers of one module run."""

    def __init__(self, api_url, token, verify_ssl=True, timeout=30, max_retry_seconds=120,
                 user_agent=DEFAULT_USER_AGENT, retry_policy=None, pool_size=16,
                 unreachable_timeout=DEFAULT_UNREACHABLE_TIMEOUT):
        if not HAS_REQUESTS:
            raise RuntimeError(missing_required_lib("requests"))
        if not token:
            raise ValueError("api_token is empty: give the Waldur API token (or set WALDUR_API_TOKEN)")
        problem = secret_text_problem(token)
        if problem:
            raise ValueError("api_token %s" % problem)
        self.root = normalize_api_root(api_url)
        self._token = token
        self.timeout = timeout
        self.unreachable_timeout = unreachable_timeout
        self.retry_policy = retry_policy or RetryPolicy(max_retry_seconds=max_retry_seconds)
        self.verify = parse_verify_ssl(verify_ssl)
        self.session = requests.Session()
        self.session.verify = self.verify
        if self.verify is False:
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
    def get(self, path, params=None, expect=dict, shape=None):
        """One JSON value of the type ``expect`` (``dict``: one object, ``list``: a bare list,
        None: any JSON), of ``shape`` (an ``evidence.Shape``: the fields the caller reads, of their
        types; by default the endpoint's in ``marketplace.READ_SHAPES``). Any other 2xx answer
        (empty, HTML, truncated JSON, the wrong shape) raises :class:`WaldurUnproven` naming the
        call and what came back: never "nothing". An object comes back as ``ProvenObject`` (a list
        as ``ProvenList``)."""
        body = self.request("GET", path, params=params, expect=expect)
        source = "GET %s" % self.api_path(path)
        shape = shape if shape is not None else read_shape(path)
        if shape is not None:
            values = body if isinstance(body, list) else [body]
            problem = shape.first_problem(values, _asked(params))
            if problem:
                raise WaldurUnproven(200, "GET", self.api_path(path), "answered JSON of another shape (%s)" % problem)
        if isinstance(body, dict):
            return ProvenObject(body, source)
        if isinstance(body, list):
            return ProvenList(body, source)
        return body

    def post(self, path, json=None, params=None, idempotent=True, expect=dict):
        """POST; an empty 200/201 body (older Waldur transitions) comes back as ``{}``; any other
        body must be JSON of the type ``expect``."""
        body = self.request("POST", path, params=params, json=json, idempotent=idempotent, expect=expect)
        return {} if body is None else body

    def list(self, path, params=None, shape=None):
        """Every item of a paged listing, following ``Link: <...>; rel="next"``, as a
        ``ProvenList`` (see :meth:`pages`)."""
        items = ProvenList(source="GET %s" % self.api_path(path))
        for page in self.pages(path, params, shape=shape):
            items.extend(page)
        return items

    def pages(self, path, params=None, shape=None, confirm_empty=True):
        """The pages of a listing, one list of items (objects) each, fetched as the caller asks
        for them. A page that is not a JSON list of objects (of ``shape``, when given), a page
        without Waldur's ``X-Result-Count`` and a listing whose pages, read to the end, do not add
        up to it raise :class:`WaldurUnproven`: an incomplete view is never taken for the whole.
        An empty listing is read again (``confirm_empty``): nothing is taken for nothing on one
        answer, and two answers that disagree raise :class:`WaldurUnproven` too."""
        query = dict(params or {})
        query.setdefault("page_size", DEFAULT_PAGE_SIZE)
        asked = _asked(params)
        shape = shape if shape is not None else read_shape(path)
        seen_pages = set()
        listed = 0
        for number in range(MAX_PAGES):
            response, items, count = self._page(path, query, shape, asked)
            if number == 0 and confirm_empty and not items and count == 0:
                again = self._page(path, query, shape, asked)
                if again[1] or again[2]:
                    raise WaldurUnproven(response.status_code, "GET", self.api_path(path), (
                        "two reads of the listing disagree (no items, then %d of %d): neither is taken for "
                        "the whole" % (len(again[1]), again[2])))
            listed += len(items)
            source = "GET %s" % self.api_path(path)
            yield [ProvenObject(item, source) for item in items]
            next_url = (response.links.get("next") or {}).get("url")
            if next_url:
                # Re-issue our own path with the next page's query: a proxy may put the wrong scheme
                # or host in Link, and the token must only ever go to api_url.
                query = self._query_of(next_url)
                marker = tuple(sorted((key, str(value)) for key, value in query.items()))
                if "page" in query and marker not in seen_pages:
                    seen_pages.add(marker)
                    continue
            if count != listed:
                raise WaldurUnproven(response.status_code, "GET", self.api_path(path), (
                    "the listing's pages hold %d item(s) but its X-Result-Count says %d: an incomplete view, "
                    "not used (did the listing change while it was read?)" % (listed, count)))
            return

    def _page(self, path, query, shape, asked):
        """One page of a listing, checked: ``(response, items, X-Result-Count)``."""
        response = self._send("GET", path, params=query)
        body = self._decode(response, "GET", path, wanted=_LISTING)
        if isinstance(body, dict) and isinstance(body.get("results"), list):
            items = body["results"]  # DRF page-number style, tolerated
        else:
            items = body
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise self._malformed(response, "GET", path, _LISTING)
        problem = shape.first_problem(items, asked) if shape is not None else None
        if problem:
            raise WaldurUnproven(response.status_code, "GET", self.api_path(path),
                                 "a page of the listing holds JSON of another shape (%s)" % problem)
        return response, items, self._result_count(response, path)

    def _result_count(self, response, path):
        """Waldur's ``X-Result-Count`` of a listing as a number. Every paged listing of Waldur
        carries it; one without it (a proxy's answer, a cache) cannot be proven whole."""
        value = response.headers.get("X-Result-Count")
        if value is None:
            raise WaldurUnproven(response.status_code, "GET", self.api_path(path),
                                 "the listing carries no X-Result-Count, so whether it is whole cannot be proven")
        try:
            count = int(str(value).strip())
        except ValueError:
            count = -1
        if count < 0:
            raise WaldurUnproven(response.status_code, "GET", self.api_path(path),
                                 "X-Result-Count is %r, not a count" % self._scrub(str(value)[:40]))
        return count

    def find(self, path, uuids, params=None, shape=None):
        """``{uuid: item}`` for the items of a paged listing whose ``uuid`` is one of ``uuids``.

        Worth it for two or more (one item is one read). The listing stops once every one is seen,
        and never runs to more pages than there are uuids: a listing that cannot pay for itself
        (the items are few, or not in it) costs at most what reading them one by one does. The
        caller reads the ones missing on their own."""
        wanted = set(uuids)
        found = {}
        if len(wanted) < 2:
            return found
        # a uuid missing here is read on its own by the caller: an empty listing needs no second read
        for number, page in enumerate(self.pages(path, params, shape=shape, confirm_empty=False), 1):
            for item in page:
                uuid = hex_uuid(item.get("uuid")) if isinstance(item, dict) else None
                if uuid in wanted:
                    found[uuid] = item
            if len(found) == len(wanted) or number >= len(wanted):
                break
        return found

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

    def request(self, method, path, params=None, json=None, idempotent=True, expect=None):
        """The decoded JSON answer of one call. A GET must answer JSON; any other method may
        answer an empty body (None), as older Waldur's transitions do."""
        response = self._send(method, path, params=params, json=json, idempotent=idempotent)
        return self._decode(response, method, path, expect=expect)

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
            self.calls["writes" if method in WRITE_METHODS else "reads"] += 1
            if retry:
                self.calls["retries"] += 1

    def _send(self, method, path, params=None, json=None, idempotent=True):
        url = self.url(path)
        api_path = urlsplit(url).path
        started = self.retry_policy.clock()
        deadline = self.retry_policy.start()
        # A Waldur that cannot be reached at all is given up on sooner than one answering 5xx.
        reach_deadline = min(deadline, started + self.unreachable_timeout)

        writes = method in WRITE_METHODS

        def send_once(attempt):
            if writes:
                check_write()  # a module outliving its pass writes nothing (core/pass_guard.py)
            # No connect attempt may run past the bound (a host that drops packets never refuses).
            connect_timeout = max(0.5, min(self.timeout, reach_deadline - self.retry_policy.clock()))
            return self.session.request(
                method, url, params=self._encode_params(params), json=json,
                timeout=(connect_timeout, self.timeout), allow_redirects=False,
                # Given on every request: the session's value would lose to REQUESTS_CA_BUNDLE.
                verify=self.verify)

        def classify(response, attempt):
            status = response.status_code
            if 200 <= status < 300:
                return DONE
            error = self._error_from_response(method, api_path, response)
            # A non-idempotent POST is resent only when Waldur refused it before doing any work.
            retryable = status in RETRYABLE_STATUSES if idempotent else status in UNPROCESSED_STATUSES
            if not retryable:
                raise error
            retry_after = parse_retry_after(response.headers.get("Retry-After"))

            def give_up():
                if retry_after is not None and attempt < self.retry_policy.max_attempts:
                    error.message = "%s (Retry-After %ss is beyond max_retry_seconds=%s)" % (
                        error.message, retry_after, self.retry_policy.max_retry_seconds)
                else:
                    error.message = "%s (gave up after %d attempts)" % (error.message, attempt)
                return error
            return Retry(give_up, retry_after=retry_after)

        def connection_error(failure):
            message = self._scrub(describe_connection_error(failure.exc))
            if not failure.never_sent:
                error = WaldurApiError(None, method, api_path, message)
            else:
                error = WaldurApiError(None, method, api_path, message, api_url=self.root + "api/")
            if failure.reason == EXHAUSTED:
                error.message = "%s; gave up after %d attempt%s in %.0f s" % (
                    error.message, failure.attempt, "" if failure.attempt == 1 else "s", failure.elapsed)
            return error

        return send_with_retries(
            send_once, classify, connection_error, self.retry_policy, idempotent,
            deadline=deadline, connection_deadline=reach_deadline,
            # a certificate does not change between attempts
            fatal=lambda exc: isinstance(exc, requests.exceptions.SSLError),
            before_attempt=lambda attempt: self._count(method, retry=attempt > 1))

    def _scrub(self, text):
        """Belt and braces: a token can only leak through an echoing proxy, but never let it through."""
        return redact_text(text, [self._token] if self._token else ())

    def _error_from_response(self, method, api_path, response):
        status = response.status_code
        body = None
        if 300 <= status < 400:
            message = "unexpected redirect to %s (check api_url)" % response.headers.get("Location", "?")
        else:
            try:
                body = response.json()
                message = _error_text(body)
            except ValueError:
                text = (response.text or "").strip()
                if not (text.lower().startswith("<!doctype") or text.lower().startswith("<html")):
                    message = text[:500]
                elif status >= 500:
                    # The right URL whose server failed: name the status and the page, not the URL.
                    message = "%s: %s" % (response.reason or "server error", describe_body(response, self._scrub))
                else:
                    message = "%s (HTML page instead of JSON; is api_url the Waldur API?)" % (response.reason or "")
            if not message:
                message = response.reason or ""
        return WaldurApiError(status, method, api_path, self._scrub(message.strip()), body=body)

    def _decode(self, response, method, path, expect=None, wanted=None):
        """The JSON of a 2xx answer, of the type ``expect`` when given. An empty body is None for
        writes only (older Waldur's transitions); for a GET, and for any body that is not JSON
        of the expected shape, a :class:`WaldurApiError` (not transient: the same answer would
        come again) names the call and what came back."""
        if not response.content or not response.content.strip():
            if method != "GET":
                return None
            raise self._malformed(response, method, path, wanted or _SHAPES.get(expect, "JSON"))
        try:
            body = response.json()
        except ValueError:
            body = _NOT_JSON
        if body is _NOT_JSON or (expect is not None and not isinstance(body, expect)):
            raise self._malformed(response, method, path, wanted or _SHAPES.get(expect, "JSON"))
        return body

    def _malformed(self, response, method, path, wanted):
        """The error for a 2xx answer that is not ``wanted``: its content type and first characters,
        on one line, never its headers."""
        return WaldurUnproven(response.status_code, method, self.api_path(path), "answered %s instead of %s"
                              % (describe_body(response, self._scrub), wanted))

    def close(self):
        self.session.close()


def _asked(params):
    """The fields a call asked Waldur for (``field=``), or None when it asked for all."""
    fields = (params or {}).get("field")
    if fields is None:
        return None
    return set([fields] if isinstance(fields, str) else fields)


def error_message(exc):
    """An exception as an operator reads it: our own errors as they are, others with their type."""
    if isinstance(exc, (WaldurApiError, ItemError)):
        return str(exc)
    return "%s: %s" % (type(exc).__name__, exc)
