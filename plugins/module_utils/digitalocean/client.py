# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""DigitalOcean API access for the collection: the client the DigitalOcean modules use.

Every request of the python-digitalocean objects the client builds (see
``binding``) goes through :meth:`DigitalOceanClient.send`, which adds what
python-digitalocean 1.17 lacks:

* one ``requests.Session`` shared by all worker threads (keep-alive; the library
  opens a new connection per object and uses bare ``requests.post``);
* the endpoint of the ``api_url`` option on every request, pagination links
  included (the library passes ``end_point`` to none of the objects it builds);
* a request timeout;
* pacing under DigitalOcean's limits (``pacing``), shared by all threads, that
  backs off as the API says (``Retry-After``, ``ratelimit-remaining``);
* retries of 429, 5xx and connection errors with jittered backoff, bounded by
  ``max_retry_seconds``;
* errors carrying method, path, status and DigitalOcean's message, never the token
  (``errors``); 404 reads as "absent".

Facts, SSH keys and waiting for many droplets live in ``facts``, ``keys`` and ``waiter``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.waldur.site_agent.plugins.module_utils.core.http import (
    DONE,
    NOT_RESENDABLE,
    Retry,
    describe_body,
    send_with_retries,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import (
    INTEGER,
    LIST,
    NULL,
    OBJECT,
    STRING,
    ProvenAbsence,
    ProvenList,
    ProvenObject,
    Shape,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_guard import check_write
from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import redact_text, secret_text_problem
from ansible_collections.waldur.site_agent.plugins.module_utils.core.retry import RetryPolicy, parse_retry_after
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.binding import (
    DIGITALOCEAN_IMPORT_ERROR,
    HAS_DIGITALOCEAN,
    LIBRARY_VERSION,
    BoundAction,
    BoundDroplet,
    BoundListing,
    build,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.counter import _Counter
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import (
    DigitalOceanError,
    DigitalOceanNotFound,
    DigitalOceanUnproven,
    describe_failure,
    token_source,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import droplet_facts, resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.keys import AccountKeys
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.options import (  # pylint: disable=unused-import  # re-exported
    DEFAULT_API_URL,
    ENDPOINT_ENV_VAR,
    TIMEOUT_ENV_VAR,
    TOKEN_ENV_VARS,
    digitalocean_argument_spec,
    normalize_endpoint,
    plain_http_warning,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.pacing import RequestPacer

try:
    import requests
    from requests.adapters import HTTPAdapter
except ImportError:
    pass  # python-digitalocean needs requests: HAS_DIGITALOCEAN is False then

PER_PAGE = 200
# What the agent reads of a droplet, and the JSON types the API documents (DigitalOcean's OpenAPI):
# a droplet of another shape in an answer is not proof.
DROPLET_SHAPE = Shape("droplet", required={
    "id": INTEGER, "name": STRING, "status": STRING, "tags": LIST, "region": OBJECT, "size_slug": STRING,
}, optional={
    "image": (OBJECT, NULL), "created_at": (STRING, NULL), "networks": (OBJECT, NULL), "size": (OBJECT, NULL),
})
ACCOUNT_SHAPE = Shape("account", required={"uuid": STRING, "status": STRING},
                      optional={"droplet_limit": INTEGER, "email": STRING})
# The account as the quota check reads it: the limit must be there to approve anything on it.
ACCOUNT_LIMITS_SHAPE = Shape("account", required={"uuid": STRING, "status": STRING, "droplet_limit": INTEGER})
# A listing's ``meta`` (every paged listing of DigitalOcean carries its total).
LISTING_META_SHAPE = Shape("listing meta", required={"total": INTEGER})
# DigitalOcean's body of a missing object (``"id": "not_found"``): the only 404 that proves absence.
NOT_FOUND_ID = "not_found"
# A broken connection in the middle of an answer (a reset after the headers): a connection failure.
try:
    BROKEN_ANSWER_ERRORS = (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError)
except NameError:  # pragma: no cover - without requests the client refuses to start
    BROKEN_ANSWER_ERRORS = ()


class DigitalOceanClient:
    """Everything the DigitalOcean modules ask of the API. Thread-safe."""

    USER_AGENT = "waldur.site_agent python-digitalocean"
    # How often action waits poll: starts fast (simulators, quick actions), settles at 10 s.
    POLL_FIRST = 0.25
    POLL_MAX = 10.0

    def __init__(self, token, api_url=DEFAULT_API_URL, timeout=30, max_retry_seconds=120,
                 max_connections=10, pacer=None, retry_policy=None, sleep=time.sleep,
                 clock=time.monotonic, deadline=None):
        if not HAS_DIGITALOCEAN:
            raise RuntimeError(missing_required_lib("python-digitalocean"))
        if not token:
            raise ValueError("a DigitalOcean token is required")
        self.endpoint = normalize_endpoint(api_url)
        parts = urlsplit(self.endpoint)
        self._origin = (parts.scheme, parts.netloc)
        self._token = token
        self.timeout = timeout
        self._sleep = sleep
        self._clock = clock
        self.pacer = pacer or RequestPacer(sleep=sleep, clock=clock)
        self.retry_policy = retry_policy or RetryPolicy(
            max_attempts=6, max_retry_seconds=max_retry_seconds, sleep=sleep, clock=clock)
        # 429s are the API pacing us, not failing: bounded by time, not by a count
        self.throttle_policy = RetryPolicy(
            max_attempts=10000, max_retry_seconds=self.retry_policy.max_retry_seconds,
            sleep=sleep, clock=clock)
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=max(1, max_connections))
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers.update({
            "Authorization": "Bearer " + token,
            "User-Agent": "%s/%s" % (self.USER_AGENT, LIBRARY_VERSION),
            "Accept": "application/json",
        })
        self.stats = _Counter()
        # clock time no call waits past (the module's deadline), whatever Retry-After says
        self.deadline = deadline
        self.auth_error = None
        # droplets in the account at the last listing (None until one): whether paging pays
        self.droplet_total = None
        # the same per tag listed, for choosing the cheapest read
        self.droplet_totals = {}
        self.keys = AccountKeys(self)  # looked up once per client, i.e. once per pass

    @property
    def api_calls(self):
        return self.stats.calls

    # ---- transport ----------------------------------------------------------------
    def build(self, cls, **attributes):
        """A python-digitalocean object bound to this client (endpoint, session, no token)."""
        return build(self, cls, **attributes)

    def resolve_url(self, url):
        """Absolute URL on the configured endpoint. Pagination links the API builds
        from its own host are moved onto the endpoint, so no request (and no token)
        ever leaves for another host."""
        full = urljoin(self.endpoint, url)
        parts = urlsplit(full)
        if (parts.scheme, parts.netloc) == self._origin:
            return full
        marker = parts.path.find("/v2/")
        if marker < 0:
            raise DigitalOceanError("refusing to follow %s: it is not under the DigitalOcean endpoint"
                                    % urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")))
        relative = parts.path[marker + len("/v2/"):]
        return urlunsplit(self._origin + (urlsplit(self.endpoint).path + relative, parts.query, ""))

    def _scrub(self, text):
        return redact_text(str(text or ""), [self._token] if self._token else ())

    def _service_message(self, response):
        try:
            body = response.json()
        except ValueError:
            body = None
        message = body.get("message") if isinstance(body, dict) else None
        if not message:
            message = response.reason or ""
        message = " ".join(self._scrub(message).split())[:300]
        return message.rstrip("."), (body.get("id") if isinstance(body, dict) else None)

    def send(self, method, url, params=None, retry_writes=False):
        """One API call, paced and retried; returns the 2xx ``requests.Response``.

        Retried: 429 (after ``Retry-After``), and for reads, deletes and
        ``retry_writes`` posts also 5xx and lost connections. Other POSTs are
        retried only when the request surely never reached the API; otherwise
        the error is ``ambiguous`` and the caller re-reads before trying again.
        """
        params = params or {}
        full_url = self.resolve_url(url)
        path = urlsplit(full_url).path
        kwargs = {"timeout": self.timeout}
        if method == "GET":
            kwargs["params"] = params
        elif params or method != "DELETE":
            kwargs["data"] = json.dumps(params)
            kwargs["headers"] = {"Content-Type": "application/json"}
        idempotent = method in ("GET", "PUT", "DELETE") or retry_writes
        throttles = [0]
        deadline = self.call_deadline()

        def past_deadline(wait):
            # status 429: a transient failure, so the item ends ``retry`` and the next pass sends it
            held = " (Retry-After: %.0f more seconds)" % wait if wait > 0 else ""
            return DigitalOceanError(
                "not sent: DigitalOcean's rate limit would hold it past the module's deadline%s: %s %s"
                % (held, method, path), status=429, method=method, path=path)

        def before_attempt(attempt):
            if self.pacer.acquire(deadline) is None:
                raise past_deadline(self.pacer.pause_left())
            if method != "GET":
                check_write()  # a module outliving its pass writes nothing (core/pass_guard.py)
            self.stats.add("calls")
            self.stats.add("reads" if method == "GET" else "writes")

        def classify(response, attempt):
            status = response.status_code
            if status < 400:
                remaining = response.headers.get("ratelimit-remaining")
                if remaining is not None and str(remaining).strip().isdigit():
                    self.pacer.observe_remaining(int(remaining))
                if status != 204:
                    self._expect_json_object(response, method, path)
                return DONE

            def give_up():
                message, error_id = self._service_message(response)
                if status == 404 and error_id != NOT_FOUND_ID:
                    # a proxy's or web server's page, not DigitalOcean saying the object is gone
                    return DigitalOceanUnproven(
                        "DigitalOcean answered %s %s with 404 %s, not its own not_found; whether the object "
                        "exists is not proven" % (method, path, describe_body(response, self._scrub)),
                        status=status, method=method, path=path)
                error_class = DigitalOceanNotFound if status == 404 else DigitalOceanError
                error = error_class(describe_failure(status, message, method, path, attempt,
                                                     token_key=token_source(self._token, os.environ, TOKEN_ENV_VARS)),
                                    status=status, method=method, path=path, error_id=error_id,
                                    service_message=message, ambiguous=status >= 500 and not idempotent)
                if status == 401:
                    self.auth_error = error
                return error

            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            if status == 429:
                throttles[0] += 1
                self.stats.add("throttled")
                pause = retry_after if retry_after is not None else min(30.0, 2.0 ** throttles[0])
                if self.deadline is not None and self._clock() + pause > self.deadline:
                    error = give_up()
                    error.args = ("%s; DigitalOcean asked to wait %.0f seconds (Retry-After), past the module's "
                                  "deadline" % (error, pause),)
                    raise error
                # the pacer waits the pause out, for every thread
                return Retry(give_up, retry_after=pause, policy=self.throttle_policy, count=throttles[0],
                             wait_with=self.pacer.throttled)
            if status >= 500 and idempotent:
                return Retry(give_up, retry_after=retry_after)
            raise give_up()

        def connection_error(failure):
            return DigitalOceanError(
                "cannot reach DigitalOcean at %s after %d attempts (%s): %s %s"
                % (urlunsplit(self._origin + ("", "", "")), failure.attempt, type(failure.exc).__name__,
                   method, path),
                method=method, path=path, ambiguous=failure.reason == NOT_RESENDABLE)

        return send_with_retries(
            lambda attempt: self.session.request(method, full_url, **kwargs), classify, connection_error,
            self.retry_policy, idempotent, connection_errors=(requests.ConnectionError, requests.Timeout)
            + BROKEN_ANSWER_ERRORS, deadline=deadline,
            before_attempt=before_attempt, on_retry=lambda attempt: self.stats.add("retries"), sleep=self._sleep)

    def _expect_json_object(self, response, method, path):
        """A 2xx answer must be the JSON object the API documents: an HTML page (a proxy's or a
        maintenance page), truncated JSON or a bare list is an error, never an empty listing.
        The parsed body is kept on the response, so the library does not parse it again."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise DigitalOceanUnproven(
                "DigitalOcean answered %s %s with %s instead of a JSON object; nothing in it is trusted: %s %s"
                % (response.status_code, response.reason or "", describe_body(response, self._scrub), method, path),
                status=response.status_code, method=method, path=path)
        response.json = lambda *args, **kwargs: body

    def call_deadline(self):
        """When retrying one call stops: ``max_retry_seconds`` from now, never past ``deadline``."""
        deadline = self.retry_policy.start()
        return deadline if self.deadline is None else min(deadline, self.deadline)

    # ---- account ------------------------------------------------------------------
    def account(self):
        """The account the token belongs to (``GET /v2/account``): the cheapest read that proves
        the token and the API."""
        return self._object(self.build(BoundListing).get_data("account/"), "account", "GET /v2/account",
                            ACCOUNT_SHAPE)

    def account_limits(self):
        """The account with its ``droplet_limit`` (``GET /v2/account``), for the quota check before
        approval: an answer without the limit proves nothing to approve on."""
        return self._object(self.build(BoundListing).get_data("account/"), "account", "GET /v2/account",
                            ACCOUNT_LIMITS_SHAPE)

    def droplet_count(self):
        """How many droplets the account has (``GET /v2/droplets?page=1&per_page=1``: the listing's
        ``meta.total``), as a ``ProvenObject`` ``{"total": n}``. A first page that holds no droplet
        while the total says there are some (or more than the one asked for) is not trusted."""
        call = "GET /v2/droplets/?per_page=1"
        data = self.build(BoundListing).get_data("droplets/", params={"page": 1, "per_page": 1})
        items, total = self._page(data, "droplets", call, DROPLET_SHAPE)
        if total < 0 or len(items) != min(total, 1):
            raise self._unproven(call, "a page of %d droplet(s) but a total of %d" % (len(items), total))
        return ProvenObject({"total": total}, call)

    # ---- catalogue ----------------------------------------------------------------
    def image(self, image):
        """The image ``image`` names (``GET /v2/images/{id or slug}``: public images by slug or id,
        the account's snapshots and custom images by id), or ``ProvenAbsence`` when DigitalOcean
        answers its own not_found."""
        path = "images/%s" % quote(str(image).strip(), safe="")
        try:
            data = self.build(BoundListing).get_data(path)
        except DigitalOceanNotFound:
            return ProvenAbsence("GET /v2/" + path)
        return self._object(data, "image", "GET /v2/" + path)

    # ---- the read layer: answers checked before anything is decided on them -----------
    @staticmethod
    def _unproven(call, problem):
        method, _space, path = call.partition(" ")
        return DigitalOceanUnproven("DigitalOcean %s answered %s; it is not trusted" % (call, problem),
                                    method=method, path=path)

    def _object(self, data, key, call, shape=None):
        """The object under ``key`` of an answer (``{"droplet": {...}}``), checked against ``shape``."""
        found = (data or {}).get(key) if isinstance(data, dict) else None
        if not isinstance(found, dict):
            raise self._unproven(call, "without the object %r" % key)
        problem = shape.problem(found) if shape is not None else None
        if problem:
            raise self._unproven(call, "JSON of another shape (%s)" % problem)
        return ProvenObject(found, call)

    def _page(self, data, key, call, shape=None):
        """``(items, total)`` of one page (or of the pages the library joined): the list under
        ``key``, every item an object of ``shape``, and the listing's ``meta.total``."""
        items = data.get(key) if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise self._unproven(call, "without the list %r" % key)
        meta = data.get("meta")
        problem = LISTING_META_SHAPE.problem(meta) if isinstance(meta, dict) else "no meta.total (a listing's count)"
        if problem is None:
            problem = shape.first_problem(items) if shape is not None else None
            if problem is None and not all(isinstance(item, dict) for item in items):
                problem = "items that are not objects"
        if problem:
            raise self._unproven(call, "JSON of another shape (%s)" % problem)
        return items, meta["total"]

    # ---- droplets -----------------------------------------------------------------
    def listing(self, path, key, params=None, shape=None):
        """All objects under ``key`` of a paged listing (the library follows ``links.pages.next``), as a
        ``ProvenList``: every item of ``shape`` and as many as the listing's ``meta.total``."""
        call = "GET /v2/" + path
        data = self.build(BoundListing).get_data(path, params=dict(params or {}, per_page=PER_PAGE))
        items, total = self._page(data, key, call, shape)
        if total != len(items):
            # the library joined every page: fewer (or more) items than the total means a page was lost
            raise self._unproven(call, "pages holding %d item(s) but a total of %d" % (len(items), total))
        return ProvenList(items, call)

    def list_droplets(self, tag_name=None):
        """Facts of every droplet (with ``tag_name``: carrying that tag), as a ``ProvenList``."""
        params = {"tag_name": tag_name} if tag_name else {}
        listed = self.listing("droplets/", "droplets", params, shape=DROPLET_SHAPE)
        if tag_name:
            self.droplet_totals[tag_name] = len(listed)
        return ProvenList([droplet_facts(item) for item in listed], "%s?tag_name=%s" % (listed.source, tag_name)
                          if tag_name else listed.source)

    def droplets_carrying(self, tag_name):
        """The droplets carrying ``tag_name``, for a decision taken on their absence (creating a droplet,
        erring an order): a listing that shows none is read once more, and the two must agree, so one
        answer that lost its items (an empty page of a cache or a proxy, consistent in itself) never
        makes a second machine or errs an order whose machine runs."""
        listed = self.list_droplets(tag_name=tag_name)
        if listed:
            return listed
        again = self.list_droplets(tag_name=tag_name)
        if again:
            raise DigitalOceanUnproven(
                "two listings of the droplets carrying tag %s disagree (none, then %s); nothing is decided on them"
                % (tag_name, ", ".join(str(droplet["id"]) for droplet in again)), method="GET", path="/v2/droplets")
        return again

    def get_droplet(self, droplet_id):
        """Facts of one droplet (``ProvenObject``), or ``ProvenAbsence`` when DigitalOcean answers its own
        not_found; any other answer raises ``DigitalOceanUnproven``."""
        call = "GET /v2/droplets/%s" % droplet_id
        try:
            data = self.build(BoundListing).get_data("droplets/%s" % droplet_id)
        except DigitalOceanNotFound:
            return ProvenAbsence(call)
        return ProvenObject(droplet_facts(self._object(data, "droplet", call, DROPLET_SHAPE)), call)

    def find_droplets(self, droplet_ids):
        """``{id: facts or ProvenAbsence}`` for many ids, from the paged listing rather than one GET
        each; ids the listing did not show are confirmed with a GET (a droplet created
        while paging can shift the pages), and a short list of ids against a huge
        account stops paging and GETs them instead."""
        wanted = set(int(i) for i in droplet_ids)
        found = {}
        page = 1
        listing = self.build(BoundListing)
        while wanted - set(found):
            data = listing.get_data("droplets/", params={"page": page, "per_page": PER_PAGE})
            items, total = self._page(data, "droplets", "GET /v2/droplets/", DROPLET_SHAPE)
            for item in items:
                if item["id"] in wanted:
                    found[item["id"]] = ProvenObject(droplet_facts(item), "GET /v2/droplets/")
            self.droplet_total = total
            has_next = bool(((data.get("links") or {}).get("pages") or {}).get("next"))
            if not has_next:
                break
            pages_left = -(-total // PER_PAGE) - page
            if pages_left > len(wanted - set(found)):
                break
            page += 1
        for droplet_id in sorted(wanted - set(found)):
            found[droplet_id] = self.get_droplet(droplet_id)
        return found

    def scan_droplets(self, max_pages):
        """Facts of every droplet of the account from one paged listing (a ``ProvenList``), or None when
        that would take more than ``max_pages`` requests or the account changed while paging (a
        droplet deleted meanwhile shifts the later pages, so one could be missed)."""
        listing = self.build(BoundListing)
        seen = {}
        totals = set()
        page = 1
        while True:
            data = listing.get_data("droplets/", params={"page": page, "per_page": PER_PAGE})
            items, total = self._page(data, "droplets", "GET /v2/droplets/", DROPLET_SHAPE)
            self.droplet_total = total
            if -(-total // PER_PAGE) > max_pages:
                return None
            totals.add(total)
            for item in items:
                seen[item["id"]] = droplet_facts(item)
            if not ((data.get("links") or {}).get("pages") or {}).get("next"):
                break
            page += 1
        if len(totals) != 1 or len(seen) != totals.pop():
            return None
        return ProvenList(seen.values(), "GET /v2/droplets/")

    def listing_pages(self, tag_name=None):
        """Pages the last listing of the droplets (carrying ``tag_name``) took, or None before one."""
        total = self.droplet_total if tag_name is None else self.droplet_totals.get(tag_name)
        return None if total is None else max(1, -(-total // PER_PAGE))

    def poll_droplets(self, tag_name=None, max_pages=None):
        """``(facts, complete)``: the droplets (carrying ``tag_name``) of one paged listing, for
        waiting on their status. It stops after the first page when the listing would take more
        than ``max_pages``. ``complete`` says whether a droplet the listing did not show is
        absent: every page was read and the total did not change while paging (a droplet
        created or deleted meanwhile shifts the later pages). What was seen is true either way."""
        params = {"tag_name": tag_name} if tag_name else {}
        listing = self.build(BoundListing)
        seen = {}
        totals = set()
        page = 1
        while True:
            data = listing.get_data("droplets/", params=dict(params, page=page, per_page=PER_PAGE))
            items, total = self._page(data, "droplets", "GET /v2/droplets/", DROPLET_SHAPE)
            for item in items:
                seen[item["id"]] = droplet_facts(item)
            totals.add(total)
            if tag_name is None:
                self.droplet_total = total
            else:
                self.droplet_totals[tag_name] = total
            if not ((data.get("links") or {}).get("pages") or {}).get("next"):
                complete = True
                break
            if max_pages is not None and -(-total // PER_PAGE) > max_pages:
                complete = False
                break
            page += 1
        complete = complete and len(totals) == 1 and len(seen) == next(iter(totals))
        return list(seen.values()), complete

    def create_droplet(self, name, region, size, image, ssh_keys=None, tags=None, user_data=None,
                       resource_tag=None):
        """Create a droplet; facts from the API's answer (status ``new``).

        When the POST fails in a way that may have created the droplet (5xx, lost
        connection), the droplets carrying ``resource_tag`` are re-read first: one
        found is the droplet this call created; none → post again (bounded).
        """
        deadline = self.call_deadline()
        attempt = 0
        while True:
            attempt += 1
            droplet = self.build(BoundDroplet, name=name, region=region, size_slug=size, image=image,
                                 ssh_keys=list(ssh_keys or []), tags=list(tags or []),
                                 user_data=user_data or None)
            try:
                droplet.create()
            except DigitalOceanError as exc:
                if not (exc.ambiguous and resource_tag):
                    raise
                landed = [d for d in self.list_droplets(tag_name=resource_tag)
                          if resource_tags(d["tags"]) == set([resource_tag.lower()])]
                if len(landed) == 1:
                    return landed[0]
                wait = self.retry_policy.delay(attempt, deadline) if not landed else None
                if wait is None:
                    raise
                self.stats.add("retries")
                self._sleep(wait)
                continue
            answer = (droplet.last_data or {}).get("droplet") or {"id": droplet.id, "name": name}
            return droplet_facts(answer)

    def destroy_droplet(self, droplet_id):
        """Delete a droplet; False when DigitalOcean says it was already gone (its own not_found)."""
        try:
            self.build(BoundDroplet, id=droplet_id).destroy()
        except DigitalOceanNotFound:
            return False
        return True

    def droplet_action(self, droplet_id, action_type, size=None):
        """Start ``shutdown``, ``power_off``, ``power_on`` or ``resize`` (CPU/RAM only,
        never the disk); returns the action's JSON."""
        droplet = self.build(BoundDroplet, id=droplet_id)
        droplet._retry_writes = True  # repeating a power action is harmless; a 422 says so
        if action_type == "resize":
            data = droplet.resize(size, disk=False)
        elif action_type in ("shutdown", "power_off", "power_on"):
            data = getattr(droplet, action_type)()
        else:
            raise ValueError("unsupported droplet action %r" % action_type)
        return data.get("action") or {}

    def _poll_delays(self, deadline):
        delay = self.POLL_FIRST
        while True:
            left = deadline - self._clock()
            if left <= 0:
                return
            yield min(delay, left)
            delay = min(self.POLL_MAX, delay * 2)

    def wait_for_action(self, droplet_id, action, deadline):
        """The action's final status (``completed``/``errored``), or ``in-progress`` at the deadline."""
        status = action.get("status") or "in-progress"
        loader = self.build(BoundAction, id=action.get("id"), droplet_id=droplet_id)
        for delay in self._poll_delays(deadline):
            if status != "in-progress":
                break
            self._sleep(delay)
            status = self._action_now(loader, droplet_id)
        return status

    def action_status(self, droplet_id, action):
        """The action's status now (one read): why a droplet did not reach the state it asked for."""
        return self._action_now(self.build(BoundAction, id=action.get("id"), droplet_id=droplet_id), droplet_id)

    @staticmethod
    def _action_now(loader, droplet_id):
        """One read of an action this run started: its not-found says nothing of the droplet, nor
        of the action, which DigitalOcean answered when it was asked for (unproven, not failed)."""
        try:
            loader.load()
        except DigitalOceanNotFound as exc:
            raise DigitalOceanUnproven("action %s of droplet %s, started by this run, answered not found (%s); "
                                       "whether it ran is not known" % (loader.id, droplet_id, exc),
                                       status=404, method="GET", path=exc.path)
        return loader.status

    # ---- SSH keys (``keys.AccountKeys``) ------------------------------------------------
    def account_keys(self):
        """The account's SSH keys, listed once per client and cached."""
        return self.keys.listed()

    def resolve_ssh_keys(self, entries, key_name, check_mode=False):
        """Key ids for a droplet from ids, fingerprints or public keys: ``(ids, notes)``
        (see ``AccountKeys.resolve``)."""
        return self.keys.resolve(entries, key_name, check_mode=check_mode)


def client_from_module(module, max_connections=10):
    """A client from the module's options, or ``fail_json`` naming what is wrong."""
    if not HAS_DIGITALOCEAN:
        module.fail_json(msg=missing_required_lib("python-digitalocean"), exception=DIGITALOCEAN_IMPORT_ERROR)
    try:
        endpoint = normalize_endpoint(module.params["api_url"])
    except ValueError as exc:
        module.fail_json(msg="api_url: %s; expected e.g. %s" % (exc, DEFAULT_API_URL))
    warning = plain_http_warning(module.params["api_url"])
    if warning:
        module.warn("api_url: %s" % warning)
    if module.params["timeout"] <= 0 or module.params["max_retry_seconds"] < 0:
        module.fail_json(msg="timeout must be positive and max_retry_seconds not negative")
    problem = secret_text_problem(module.params["token"])
    if problem:
        module.fail_json(msg="token (module_defaults, task or DIGITALOCEAN_ACCESS_TOKEN): %s" % problem)
    # python-digitalocean reads these for any object it builds itself: keep those on
    # the same endpoint and timeout as ours.
    os.environ[ENDPOINT_ENV_VAR] = endpoint
    os.environ[TIMEOUT_ENV_VAR] = str(module.params["timeout"])
    return DigitalOceanClient(
        module.params["token"], api_url=endpoint, timeout=module.params["timeout"],
        max_retry_seconds=module.params["max_retry_seconds"], max_connections=max_connections)
