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
            self.retry_policy, idempotent, connection_errors=(requests.ConnectionError, requests.Timeout), deadline=deadline,
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
            raise DigitalOceanError(
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
        data = self.build(BoundListing).get_data("account/")
        return dict((data or {}).get("account") or {})

    # ---- catalogue ----------------------------------------------------------------
    def image(self, image):
        """The image ``image`` names (``GET /v2/images/{id or slug}``: public images by slug or id,
        the account's snapshots and custom images by id), or None when DigitalOcean has none."""
        try:
            data = self.build(BoundListing).get_data("images/%s" % quote(str(image).strip(), safe=""))
        except DigitalOceanNotFound:
            return None
        found = (data or {}).get("image")
        if not isinstance(found, dict):
            raise DigitalOceanError("DigitalOcean GET /v2/images/%s answered without the object 'image'; it is not "
                                    "trusted" % image, method="GET", path="/v2/images/%s" % image)
        return found

    # ---- droplets -----------------------------------------------------------------
    def listing(self, path, key, params=None):
        """All objects under ``key`` of a paged listing (the library follows ``links.pages.next``)."""
        data = self.build(BoundListing).get_data(path, params=dict(params or {}, per_page=PER_PAGE))
        items = data.get(key)
        if not isinstance(items, list):
            raise DigitalOceanError("DigitalOcean GET /v2/%s answered without the list %r; the listing is not trusted"
                                    % (path, key), method="GET", path="/v2/" + path)
        total = (data.get("meta") or {}).get("total")
        if isinstance(total, int) and total != len(items):
            # the library joined every page: fewer (or more) items than the total means a page was lost
            raise DigitalOceanError("DigitalOcean GET /v2/%s: the pages hold %d item(s) but the listing says %d; "
                                    "the listing is not trusted" % (path, len(items), total),
                                    method="GET", path="/v2/" + path)
        return list(items)

    def list_droplets(self, tag_name=None):
        """Facts of every droplet (with ``tag_name``: carrying that tag)."""
        params = {"tag_name": tag_name} if tag_name else {}
        return [droplet_facts(item) for item in self.listing("droplets/", "droplets", params)]

    def get_droplet(self, droplet_id):
        """Facts of one droplet, or None if it does not exist."""
        droplet = self.build(BoundDroplet, id=droplet_id)
        try:
            droplet.load()
        except DigitalOceanNotFound:
            return None
        return droplet_facts(droplet)

    def find_droplets(self, droplet_ids):
        """``{id: facts or None}`` for many ids, from the paged listing rather than one GET
        each; ids the listing did not show are confirmed with a GET (a droplet created
        while paging can shift the pages), and a short list of ids against a huge
        account stops paging and GETs them instead."""
        wanted = set(int(i) for i in droplet_ids)
        found = {}
        page = 1
        listing = self.build(BoundListing)
        while wanted - set(found):
            data = listing.get_data("droplets/", params={"page": page, "per_page": PER_PAGE})
            for item in data.get("droplets") or []:
                if item.get("id") in wanted:
                    found[item["id"]] = droplet_facts(item)
            total = (data.get("meta") or {}).get("total")
            if isinstance(total, int):
                self.droplet_total = total
            has_next = bool(((data.get("links") or {}).get("pages") or {}).get("next"))
            if not has_next:
                break
            pages_left = -(-total // PER_PAGE) - page if isinstance(total, int) else None
            if pages_left is not None and pages_left > len(wanted - set(found)):
                break
            page += 1
        for droplet_id in sorted(wanted - set(found)):
            found[droplet_id] = self.get_droplet(droplet_id)
        return found

    def scan_droplets(self, max_pages):
        """Facts of every droplet of the account from one paged listing, or None when that
        would take more than ``max_pages`` requests or the account changed while paging (a
        droplet deleted meanwhile shifts the later pages, so one could be missed)."""
        listing = self.build(BoundListing)
        seen = {}
        totals = set()
        page = 1
        while True:
            data = listing.get_data("droplets/", params={"page": page, "per_page": PER_PAGE})
            total = (data.get("meta") or {}).get("total")
            if not isinstance(total, int):
                return None
            self.droplet_total = total
            if -(-total // PER_PAGE) > max_pages:
                return None
            totals.add(total)
            for item in data.get("droplets") or []:
                seen[item.get("id")] = droplet_facts(item)
            if not ((data.get("links") or {}).get("pages") or {}).get("next"):
                break
            page += 1
        if len(totals) != 1 or len(seen) != totals.pop():
            return None
        return list(seen.values())

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
            for item in data.get("droplets") or []:
                seen[item.get("id")] = droplet_facts(item)
            total = (data.get("meta") or {}).get("total")
            if isinstance(total, int):
                totals.add(total)
                if tag_name is None:
                    self.droplet_total = total
                else:
                    self.droplet_totals[tag_name] = total
            if not ((data.get("links") or {}).get("pages") or {}).get("next"):
                complete = True
                break
            if max_pages is not None and isinstance(total, int) and -(-total // PER_PAGE) > max_pages:
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
        """Delete a droplet; False when it was already gone."""
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
            loader.load()
            status = loader.status
        return status

    def action_status(self, droplet_id, action):
        """The action's status now (one read): why a droplet did not reach the state it asked for."""
        loader = self.build(BoundAction, id=action.get("id"), droplet_id=droplet_id)
        loader.load()
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
