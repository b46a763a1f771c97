# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""DigitalOcean API access for the collection, over python-digitalocean.

This is the only file that imports ``digitalocean``. It keeps the library's
object model (``Droplet.create``, ``Droplet.shutdown``, ``Action.load``,
``SSHKey.create`` ...) but routes every HTTP request of the objects it builds
through one :class:`DigitalOceanClient`, which adds what python-digitalocean 1.17
lacks:

* one ``requests.Session`` shared by all worker threads (keep-alive; the library
  opens a new connection per object and uses bare ``requests.post``);
* the endpoint of the ``api_url`` option on every request, pagination links
  included (the library passes ``end_point`` to none of the objects it builds);
* a request timeout;
* pacing under DigitalOcean's limits (250 requests per minute burst, 5,000 per
  hour), shared by all threads, that backs off as the API says (``Retry-After``,
  ``ratelimit-remaining``);
* retries of 429, 5xx and connection errors with jittered backoff, bounded by
  ``max_retry_seconds``;
* errors carrying method, path, status and DigitalOcean's message, never the token;
  404 reads as "absent".
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import json
import os
import re
import threading
import time
import traceback
from urllib.parse import urljoin, urlsplit, urlunsplit

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import RESOURCE_TAG_PREFIX
from ansible_collections.waldur.site_agent.plugins.module_utils.core.retry import RetryPolicy, parse_retry_after

try:
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.exceptions import NewConnectionError
    import digitalocean
    from digitalocean import baseapi as _do_baseapi
except ImportError:
    HAS_DIGITALOCEAN = False
    DIGITALOCEAN_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_DIGITALOCEAN = True
    DIGITALOCEAN_IMPORT_ERROR = None

DEFAULT_API_URL = "https://api.digitalocean.com/v2/"
# The library reads these for objects it builds on its own; set for the module process.
ENDPOINT_ENV_VAR = "DIGITALOCEAN_END_POINT"
TIMEOUT_ENV_VAR = "PYTHON_DIGITALOCEAN_REQUEST_TIMEOUT_SEC"
# DigitalOcean's documented limits: a burst of 250 requests per minute and 5,000 per hour.
DIGITALOCEAN_RATE_LIMITS = ((250, 60.0), (5000, 3600.0))
PER_PAGE = 200
_FINGERPRINT = re.compile(r"^([0-9a-f]{2}:){15}[0-9a-f]{2}$")
_PUBLIC_KEY = re.compile(r"^(ssh-[a-z0-9-]+|ecdsa-sha2-[a-z0-9-]+|sk-[a-z0-9@.-]+)\s+([A-Za-z0-9+/=]+)(\s.*)?$")


def digitalocean_argument_spec():
    """Options shared by the DigitalOcean modules (doc fragment ``waldur.site_agent.digitalocean``)."""
    return dict(
        token=dict(type="str", required=True, no_log=True,
                   fallback=(env_fallback, ["DIGITALOCEAN_ACCESS_TOKEN", "DO_API_TOKEN"])),
        api_url=dict(type="str", default=DEFAULT_API_URL, fallback=(env_fallback, [ENDPOINT_ENV_VAR])),
        timeout=dict(type="float", default=30),
        max_retry_seconds=dict(type="float", default=120),
    )


def normalize_endpoint(url):
    """The API root ending in ``/v2/``: the library joins relative paths onto it,
    so ``http://host/v2`` would otherwise lose its last segment."""
    text = (url or "").strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("%r is not an http(s) URL" % (url,))
    path = parts.path.rstrip("/")
    if not path.endswith("/v2"):
        path += "/v2"
    return urlunsplit((parts.scheme, parts.netloc, path + "/", "", ""))


# ---- pacing ---------------------------------------------------------------------------

class TokenBucket:
    """``capacity`` requests per ``period`` seconds: full at start, refilling steadily."""

    def __init__(self, capacity, period, now):
        self.capacity = float(capacity)
        self.period = float(period)
        self.rate = self.capacity / self.period
        self.tokens = self.capacity
        self.stamp = now

    def refill(self, now):
        if now > self.stamp:
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait_time(self, now):
        """Seconds until one token is available."""
        self.refill(now)
        # a hair of tolerance: float rounding must not leave a waiter sleeping 1e-14 s forever
        return 0.0 if self.tokens >= 1 - 1e-9 else (1 - self.tokens) / self.rate

    def take(self):
        self.tokens -= 1

    def limit_to(self, now, tokens):
        self.refill(now)
        self.tokens = min(self.tokens, float(tokens))


class RequestPacer:
    """Keeps all threads of a run under the API's limits.

    Every request takes a token from each bucket (by default 250/minute and
    5,000/hour). A 429 pauses everyone for its ``Retry-After`` and leaves the
    per-minute bucket empty at the end of the pause, so requests resume at the
    sustained rate instead of bursting into the limit again; ``ratelimit-remaining`` caps the hourly bucket
    when other clients share the token.
    """

    def __init__(self, limits=DIGITALOCEAN_RATE_LIMITS, clock=time.monotonic, sleep=time.sleep):
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        now = clock()
        self.buckets = [TokenBucket(capacity, period, now) for capacity, period in limits]
        self.paused_until = now
        self.waited = 0.0

    def acquire(self):
        """Block until a request may be sent; return the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                wait = max([self.paused_until - now] + [bucket.wait_time(now) for bucket in self.buckets])
                if wait <= 0:
                    for bucket in self.buckets:
                        bucket.take()
                    self.waited += waited
                    return waited
            self._sleep(wait)
            waited += wait

    def throttled(self, retry_after):
        """The API answered 429: nobody sends before ``retry_after`` seconds from now."""
        with self._lock:
            now = self._clock()
            self.paused_until = max(self.paused_until, now + retry_after)
            # empty when the pause ends: what it would refill meanwhile is not a burst to spend
            burst = self.buckets[0]
            burst.limit_to(now, -(self.paused_until - now) * burst.rate)

    def observe_remaining(self, remaining):
        """The API's count of requests left in its longest window."""
        with self._lock:
            self.buckets[-1].limit_to(self._clock(), remaining)


# ---- errors ---------------------------------------------------------------------------

class DigitalOceanError(Exception):
    """A failed call. ``str()`` is a message for the operator: method, path, status,
    DigitalOcean's message; never headers or the token."""

    def __init__(self, message, status=None, method=None, path=None, error_id=None,
                 service_message=None, ambiguous=False):
        super(DigitalOceanError, self).__init__(message)
        self.status = status
        self.method = method
        self.path = path
        self.error_id = error_id
        self.service_message = service_message
        # a write that may or may not have happened (5xx, lost connection after sending)
        self.ambiguous = ambiguous


class DigitalOceanNotFound(DigitalOceanError):
    """404: the object does not exist (reads turn this into None)."""


def describe_failure(status, service_message, method, path, attempts=1):
    reason = service_message or "no message"
    if status == 401:
        summary = "DigitalOcean rejected the token (401 %s)" % reason
    elif status == 403:
        summary = "the DigitalOcean token lacks the scope for this call (403 %s)" % reason
    elif status == 404:
        summary = "not found on DigitalOcean (404 %s)" % reason
    elif status == 422:
        summary = "DigitalOcean refused the request (422 %s)" % reason
    elif status == 429:
        summary = "DigitalOcean rate limit still exceeded after %d attempts (429 %s)" % (attempts, reason)
    elif status is not None and status >= 500:
        summary = "DigitalOcean server error after %d attempts (%d %s)" % (attempts, status, reason)
    else:
        summary = "DigitalOcean answered %s %s" % (status, reason)
    return "%s: %s %s" % (summary, method, path)


# ---- facts ----------------------------------------------------------------------------

def _value(obj, name, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _slug(value):
    if isinstance(value, dict):
        return value.get("slug") or value.get("name") or value.get("id")
    return value


def droplet_networks(networks):
    """``{public_ipv4, private_ipv4, public_ipv6}`` from DigitalOcean's ``networks``."""
    networks = networks if isinstance(networks, dict) else {}
    found = {"public_ipv4": None, "private_ipv4": None, "public_ipv6": None}
    for net in networks.get("v4") or []:
        key = {"public": "public_ipv4", "private": "private_ipv4"}.get(net.get("type"))
        if key and not found[key]:
            found[key] = net.get("ip_address")
    for net in networks.get("v6") or []:
        if net.get("type", "public") == "public" and not found["public_ipv6"]:
            found["public_ipv6"] = net.get("ip_address")
    return found


def droplet_facts(droplet):
    """Plain facts of a droplet (a library ``Droplet`` or the API's JSON)."""
    size_slug = _value(droplet, "size_slug") or _slug(_value(droplet, "size"))
    return {
        "id": _value(droplet, "id"),
        "name": _value(droplet, "name"),
        "status": _value(droplet, "status"),
        "region": _slug(_value(droplet, "region")),
        "size_slug": size_slug,
        "image": _slug(_value(droplet, "image")),
        "vcpus": _value(droplet, "vcpus"),
        "memory": _value(droplet, "memory"),
        "disk": _value(droplet, "disk"),
        "networks": droplet_networks(_value(droplet, "networks")),
        "tags": list(_value(droplet, "tags") or []),
        "created_at": _value(droplet, "created_at"),
    }


def backend_metadata(facts):
    """What Waldur stores as the resource's ``backend_metadata`` (the upstream agent's shape)."""
    keys = ("id", "name", "status", "region", "size_slug", "image", "created_at", "networks")
    return {"backend_type": "digitalocean", "droplet": dict((key, facts.get(key)) for key in keys)}


def resource_tags(tags):
    """The ``waldur-resource:`` tags among ``tags``, lower-cased."""
    return set(tag.lower() for tag in tags or [] if str(tag).lower().startswith(RESOURCE_TAG_PREFIX))


def ssh_fingerprint(public_key):
    """DigitalOcean's fingerprint of an OpenSSH public key (MD5 of the key blob, colon hex),
    or None if ``public_key`` is not one."""
    match = _PUBLIC_KEY.match((public_key or "").strip())
    if not match:
        return None
    try:
        blob = base64.b64decode(match.group(2).encode("ascii"), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        digest = hashlib.md5(blob, usedforsecurity=False).hexdigest()
    except TypeError:  # Python < 3.9
        digest = hashlib.md5(blob).hexdigest()  # nosec - a key fingerprint, not security
    return ":".join(digest[i:i + 2] for i in range(0, 32, 2))


def classify_ssh_key(entry):
    """``("id", int)``, ``("fingerprint", str)``, ``("public_key", (fingerprint, key))`` or
    ``(None, None)`` for one entry of an item's ``ssh_keys``."""
    if isinstance(entry, bool):
        return None, None
    if isinstance(entry, int):
        return "id", entry
    text = str(entry).strip()
    if text.isdigit():
        return "id", int(text)
    if _FINGERPRINT.match(text.lower()):
        return "fingerprint", text.lower()
    fingerprint = ssh_fingerprint(text)
    if fingerprint:
        return "public_key", (fingerprint, text)
    return None, None


# ---- the library bound to one client ------------------------------------------------

if HAS_DIGITALOCEAN:
    class _ClientBound(object):
        """Mixin for python-digitalocean classes: send through the owning client.

        ``BaseAPI.get_data`` calls ``self.__perform_request`` (name-mangled to
        ``_BaseAPI__perform_request``); defining it here puts every request of the
        object, pagination included, on the client's session, pacing and retries.
        """

        _do_client = None
        _retry_writes = False
        last_data = None

        def _BaseAPI__perform_request(self, url, type=_do_baseapi.GET, params=None):
            return self._do_client.send(type, url, params, retry_writes=self._retry_writes)

        def get_data(self, *args, **kwargs):
            self.last_data = super(_ClientBound, self).get_data(*args, **kwargs)
            return self.last_data

    class _Droplet(_ClientBound, digitalocean.Droplet):
        pass

    class _Action(_ClientBound, digitalocean.Action):
        pass

    class _SSHKey(_ClientBound, digitalocean.SSHKey):
        pass

    class _Listing(_ClientBound, _do_baseapi.BaseAPI):
        """Plain GETs (listings with the library's pagination)."""


class _Counter:
    def __init__(self):
        self._lock = threading.Lock()
        self.calls = 0
        self.reads = 0  # calls split by method, for the batch modules' api_calls
        self.writes = 0
        self.retries = 0
        self.throttled = 0

    def add(self, name):
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)


class DigitalOceanClient:
    """Everything the DigitalOcean modules ask of the API. Thread-safe."""

    USER_AGENT = "waldur.site_agent python-digitalocean"
    # How often action waits poll: starts fast (simulators, quick actions), settles at 10 s.
    POLL_FIRST = 0.25
    POLL_MAX = 10.0

    def __init__(self, token, api_url=DEFAULT_API_URL, timeout=30, max_retry_seconds=120,
                 max_connections=10, pacer=None, retry_policy=None, sleep=time.sleep,
                 clock=time.monotonic):
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
            "User-Agent": "%s/%s" % (self.USER_AGENT, getattr(digitalocean, "__version__", "?")),
            "Accept": "application/json",
        })
        self.stats = _Counter()
        self.auth_error = None
        # droplets in the account at the last listing (None until one): whether paging pays
        self.droplet_total = None
        self._keys = None
        self._keys_lock = threading.RLock()

    @property
    def api_calls(self):
        return self.stats.calls

    # ---- transport ----------------------------------------------------------------
    def build(self, cls, **attributes):
        """A python-digitalocean object bound to this client (endpoint, session, no token)."""
        obj = cls(token="", end_point=self.endpoint, _session=self.session, **attributes)
        obj._do_client = self
        return obj

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
        text = str(text or "")
        return text.replace(self._token, "********") if self._token else text

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
        deadline = self.retry_policy.start()
        attempt = throttles = 0
        while True:
            self.pacer.acquire()
            self.stats.add("calls")
            self.stats.add("reads" if method == "GET" else "writes")
            attempt += 1
            try:
                response = self.session.request(method, full_url, **kwargs)
            except (requests.ConnectionError, requests.Timeout) as exc:
                not_sent = _request_never_sent(exc)
                wait = self.retry_policy.delay(attempt, deadline) if (idempotent or not_sent) else None
                if wait is None:
                    raise DigitalOceanError(
                        "cannot reach DigitalOcean at %s after %d attempts (%s): %s %s"
                        % (urlunsplit(self._origin + ("", "", "")), attempt, type(exc).__name__, method, path),
                        method=method, path=path, ambiguous=not (idempotent or not_sent))
                self.stats.add("retries")
                self._sleep(wait)
                continue
            status = response.status_code
            if status < 400:
                remaining = response.headers.get("ratelimit-remaining")
                if remaining is not None and str(remaining).strip().isdigit():
                    self.pacer.observe_remaining(int(remaining))
                return response
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            if status == 429:
                throttles += 1
                self.stats.add("throttled")
                pause = retry_after if retry_after is not None else min(30.0, 2.0 ** throttles)
                if self.throttle_policy.delay(throttles, deadline, retry_after=pause) is not None:
                    self.pacer.throttled(pause)  # the next acquire() waits it out, for every thread
                    self.stats.add("retries")
                    continue
            elif status >= 500 and idempotent:
                wait = self.retry_policy.delay(attempt, deadline, retry_after=retry_after)
                if wait is not None:
                    self.stats.add("retries")
                    self._sleep(wait)
                    continue
            message, error_id = self._service_message(response)
            error_class = DigitalOceanNotFound if status == 404 else DigitalOceanError
            error = error_class(describe_failure(status, message, method, path, attempt),
                                status=status, method=method, path=path, error_id=error_id,
                                service_message=message, ambiguous=status >= 500 and not idempotent)
            if status == 401:
                self.auth_error = error
            raise error

    # ---- account ------------------------------------------------------------------
    def account(self):
        """The account the token belongs to (``GET /v2/account``): the cheapest read that proves
        the token and the API."""
        data = self.build(_Listing).get_data("account/")
        return dict((data or {}).get("account") or {})

    # ---- droplets -----------------------------------------------------------------
    def _listing(self, path, key, params=None):
        """All objects under ``key`` of a paged listing (the library follows ``links.pages.next``)."""
        data = self.build(_Listing).get_data(path, params=dict(params or {}, per_page=PER_PAGE))
        return list(data.get(key) or [])

    def list_droplets(self, tag_name=None):
        """Facts of every droplet (with ``tag_name``: carrying that tag)."""
        params = {"tag_name": tag_name} if tag_name else {}
        return [droplet_facts(item) for item in self._listing("droplets/", "droplets", params)]

    def get_droplet(self, droplet_id):
        """Facts of one droplet, or None if it does not exist."""
        droplet = self.build(_Droplet, id=droplet_id)
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
        listing = self.build(_Listing)
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
        listing = self.build(_Listing)
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

    def create_droplet(self, name, region, size, image, ssh_keys=None, tags=None, user_data=None,
                       resource_tag=None):
        """Create a droplet; facts from the API's answer (status ``new``).

        When the POST fails in a way that may have created the droplet (5xx, lost
        connection), the droplets carrying ``resource_tag`` are re-read first: one
        found is the droplet this call created; none → post again (bounded).
        """
        deadline = self.retry_policy.start()
        attempt = 0
        while True:
            attempt += 1
            droplet = self.build(_Droplet, name=name, region=region, size_slug=size, image=image,
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
            self.build(_Droplet, id=droplet_id).destroy()
        except DigitalOceanNotFound:
            return False
        return True

    def droplet_action(self, droplet_id, action_type, size=None):
        """Start ``shutdown``, ``power_off``, ``power_on`` or ``resize`` (CPU/RAM only,
        never the disk); returns the action's JSON."""
        droplet = self.build(_Droplet, id=droplet_id)
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
        loader = self.build(_Action, id=action.get("id"), droplet_id=droplet_id)
        for delay in self._poll_delays(deadline):
            if status != "in-progress":
                break
            self._sleep(delay)
            loader.load()
            status = loader.status
        return status

    # ---- SSH keys ----------------------------------------------------------------------
    def account_keys(self):
        """The account's SSH keys, listed once per client and cached."""
        with self._keys_lock:
            if self._keys is None:
                self._keys = self._listing("account/keys/", "ssh_keys")
            return list(self._keys)

    def _cached_key(self, field, value):
        for key in self.account_keys():
            if str(key.get(field) or "").lower() == str(value).lower():
                return key
        return None

    def _load_key(self, kind, value):
        """One key by id or fingerprint (a key added since the listing), or None."""
        key = self.build(_SSHKey, **{kind: value})
        try:
            key.load()
        except DigitalOceanNotFound:
            return None
        data = (key.last_data or {}).get("ssh_key")
        with self._keys_lock:
            self._keys = (self._keys or []) + [data]
        return data

    def resolve_ssh_keys(self, entries, key_name, check_mode=False):
        """Key ids for a droplet from ids, fingerprints or public keys.

        Ids and fingerprints must exist in the account; a public key is found by
        its fingerprint (never by name) or created as ``key_name``. Returns
        ``(ids, notes)``; raises ValueError for an entry that is none of these or
        a key that does not exist. In check mode a missing public key is not
        created and has no id.
        """
        ids, notes = [], []
        for entry in entries or []:
            kind, value = classify_ssh_key(entry)
            if kind is None:
                raise ValueError("ssh_keys entry %r is neither a key id, an MD5 fingerprint nor an "
                                 "OpenSSH public key" % (_shorten(entry),))
            if kind in ("id", "fingerprint"):
                key = self._cached_key(kind, value) or self._load_key(kind, value)
                if key is None:
                    raise ValueError("SSH key %s is not in the DigitalOcean account" % value)
                ids.append(key["id"])
                continue
            fingerprint, public_key = value
            with self._keys_lock:  # one creation per key even when several droplets share it
                key = self._cached_key("fingerprint", fingerprint)
                if key is None and check_mode:
                    notes.append("would add SSH key %s as %s" % (fingerprint, key_name))
                    continue
                if key is None:
                    key, created = self._create_key(key_name, public_key, fingerprint)
                    if created:
                        notes.append("added SSH key %s as %s" % (fingerprint, key_name))
            ids.append(key["id"])
        return ids, notes

    def _create_key(self, name, public_key, fingerprint):
        """``(key, created)``: the new key, or the one with this fingerprint that appeared meanwhile."""
        creator = self.build(_SSHKey, name=name, public_key=public_key)
        try:
            creator.create()
        except DigitalOceanError as exc:
            # 422 "already in use": created since the listing (or by a lost earlier answer)
            if exc.status != 422 and not exc.ambiguous:
                raise
            with self._keys_lock:
                self._keys = None
            key = self._cached_key("fingerprint", fingerprint)
            if key is None:
                raise
            return key, False
        key = (creator.last_data or {}).get("ssh_key") or {
            "id": creator.id, "name": name, "fingerprint": fingerprint, "public_key": public_key}
        self._keys.append(key)
        return key, True


class DropletWaiter:
    """Waits for many droplets together, for all worker threads of one run.

    A worker calls :meth:`wait` with the facts it has (a create's answer says
    ``new``) and blocks. One waiting thread at a time refreshes every registered
    droplet with the cheapest read: a GET when one droplet is waited for, else the
    account's paged listing when it takes fewer pages than there are droplets (and
    only a consistent one, see ``scan_droplets``); then it wakes the threads whose
    droplet reached a wanted status or is gone. A droplet not yet refreshed is
    refreshed at once (or ``min_interval`` after the previous refresh); while no
    droplet finishes the interval doubles up to ``max_interval``. So a pass of 200
    creates spends a few dozen reads on waiting instead of a poll per droplet.
    """

    MIN_INTERVAL = 0.25
    MAX_INTERVAL = 10.0

    def __init__(self, client, min_interval=MIN_INTERVAL, max_interval=MAX_INTERVAL, clock=time.monotonic):
        self.client = client
        self.min_interval = min_interval
        self.max_interval = max_interval
        self._clock = clock
        self._cond = threading.Condition()
        self._entries = []
        self._refreshing = False
        self._last_refresh = None  # clock time the last refresh ended
        self._interval = min_interval
        self.refreshes = 0

    def wait(self, facts, statuses, deadline):
        """Block until the droplet of ``facts`` has one of ``statuses`` or is gone, or until
        ``deadline`` (clock time). Returns its latest facts: None when it is gone, the last
        ones seen at the deadline. A failed read raises its DigitalOceanError."""
        if facts["status"] in statuses:
            return facts
        entry = {"id": int(facts["id"]), "statuses": tuple(statuses), "facts": facts,
                 "done": False, "seen": False, "error": None}
        with self._cond:
            self._entries.append(entry)
            try:
                while True:
                    if entry["error"] is not None:
                        raise entry["error"]  # pylint: disable=raising-bad-type  # set by a failed refresh
                    if entry["done"]:
                        return entry["facts"]
                    now = self._clock()
                    if now >= deadline:
                        return entry["facts"]
                    if self._refreshing:  # another thread reads for everyone; it wakes us
                        self._cond.wait(deadline - now)
                        continue
                    due = self._next_refresh()
                    if due > now:
                        self._cond.wait(min(due, deadline) - now)
                        continue
                    self._refresh()
            finally:
                self._entries.remove(entry)

    def _next_refresh(self):
        if self._last_refresh is None:
            return float("-inf")  # the first refresh is due at once
        unseen = any(not entry["seen"] for entry in self._entries)
        return self._last_refresh + (self.min_interval if unseen else self._interval)

    def _refresh(self):
        """Read every registered droplet once and wake the finished ones. Called holding
        the lock; releases it while reading."""
        self._refreshing = True
        batch = list(self._entries)
        found, error = {}, None
        self._cond.release()
        try:
            found = self._read(sorted(set(entry["id"] for entry in batch)))
        except DigitalOceanError as exc:
            error = exc
        finally:
            self._cond.acquire()
            self._refreshing = False
            self._last_refresh = self._clock()
            self.refreshes += 1
            finished = False
            for entry in batch:
                entry["seen"] = True
                if error is not None:
                    entry["error"] = error
                elif entry["id"] in found:
                    entry["facts"] = found[entry["id"]]
                    if entry["facts"] is None or entry["facts"]["status"] in entry["statuses"]:
                        entry["done"] = finished = True
            self._interval = self.min_interval if finished else min(self.max_interval, self._interval * 2)
            self._cond.notify_all()

    def _read(self, ids):
        """``{id: facts or None}``. Ids a listing did not show are confirmed with a GET: a
        droplet just created may not be listed yet."""
        droplets = None
        total = self.client.droplet_total
        if len(ids) > 1 and (total is None or -(-total // PER_PAGE) < len(ids)):
            droplets = self.client.scan_droplets(max_pages=len(ids) - 1)
        wanted = set(ids)
        found = dict((facts["id"], facts) for facts in droplets or [] if facts["id"] in wanted)
        for droplet_id in ids:
            if droplet_id not in found:
                found[droplet_id] = self.client.get_droplet(droplet_id)
        return found


def _shorten(value, limit=40):
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _request_never_sent(exc):
    """True when a connection error happened before the request left (safe to repeat a POST)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, NewConnectionError)


def client_from_module(module, max_connections=10):
    """A client from the module's options, or ``fail_json`` naming what is wrong."""
    if not HAS_DIGITALOCEAN:
        module.fail_json(msg=missing_required_lib("python-digitalocean"), exception=DIGITALOCEAN_IMPORT_ERROR)
    try:
        endpoint = normalize_endpoint(module.params["api_url"])
    except ValueError as exc:
        module.fail_json(msg="api_url: %s; expected e.g. %s" % (exc, DEFAULT_API_URL))
    if module.params["timeout"] <= 0 or module.params["max_retry_seconds"] < 0:
        module.fail_json(msg="timeout must be positive and max_retry_seconds not negative")
    # python-digitalocean reads these for any object it builds itself: keep those on
    # the same endpoint and timeout as ours.
    os.environ[ENDPOINT_ENV_VAR] = endpoint
    os.environ[TIMEOUT_ENV_VAR] = str(module.params["timeout"])
    return DigitalOceanClient(
        module.params["token"], api_url=endpoint, timeout=module.params["timeout"],
        max_retry_seconds=module.params["max_retry_seconds"], max_connections=max_connections)
