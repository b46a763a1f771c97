"""The DigitalOcean client over python-digitalocean: endpoint, session, pacing,
retries, error messages, 404 handling, SSH keys and paged reads.

HTTP goes to an in-test scripted keep-alive server (``ScriptedApi``) or the
DigitalOcean simulator, both on 127.0.0.1; the real python-digitalocean does the
talking.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import is_absent
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean import client as do
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.binding import BoundSSHKey
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError, DigitalOceanNotFound
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import backend_metadata, droplet_facts, resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.keys import classify_ssh_key, ssh_fingerprint
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.options import normalize_endpoint
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.pacing import RequestPacer
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.waiter import DropletWaiter
from ansible_collections.waldur.site_agent.plugins.module_utils.core.retry import RetryPolicy
from tests.simulators.digitalocean import presets

TOKEN = "dop_v1_unit-test-token-0123456789abcdef"
TAG = "waldur-resource:" + "a" * 32


class FakeTime:
    """A clock that only moves when someone sleeps: retries and pacing run instantly."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps = []
        self._lock = threading.Lock()

    def clock(self):
        return self.now

    def sleep(self, seconds):
        with self._lock:
            self.sleeps.append(round(seconds, 3))
            self.now += seconds


def droplet_json(droplet_id, status="active", tags=(TAG,), size="s-1vcpu-1gb"):
    return {
        "id": droplet_id, "name": "web-%d" % droplet_id, "status": status, "memory": 1024, "vcpus": 1,
        "disk": 25, "created_at": "2026-01-02T03:04:05Z", "size_slug": size, "size": {"slug": size},
        "region": {"slug": "ams3", "name": "Amsterdam 3"}, "image": {"id": 7, "slug": "ubuntu-22-04-x64"},
        "networks": {"v4": [{"ip_address": "10.0.0.5", "type": "private"},
                            {"ip_address": "203.0.113.5", "type": "public"}],
                     "v6": [{"ip_address": "2001:db8::5", "type": "public"}]},
        "tags": list(tags), "features": [],
    }


class ScriptedApi:
    """Answers each (method, path) from a script; the last answer repeats. Records
    every request with the client's port (one port = one connection)."""

    def __init__(self):
        self.script = {}
        self.requests = []
        self.lock = threading.Lock()

    def on(self, method, path, *answers):
        """``answers``: (status, body) or (status, body, headers)."""
        self.script[(method, path)] = list(answers)

    def answer(self, method, path, query, headers, body, port):
        with self.lock:
            self.requests.append({"method": method, "path": path, "args": dict(parse_qsl(query)), "port": port,
                                  "body": body.decode(), "authorization": headers.get("Authorization")})
            answers = self.script.get((method, path.rstrip("/")))
            if not answers:
                return 404, {"id": "not_found", "message": "The resource you were accessing could not be found."}, {}
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
        return answer[0], answer[1], (answer[2] if len(answer) > 2 else {})


class _KeepAliveHandler(BaseHTTPRequestHandler):
    # HTTP/1.1 with Content-Length on every answer: connections stay open, as
    # DigitalOcean's do (werkzeug's development server closes each one).
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def _serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        status, payload, headers = self.server.api.answer(
            self.command, parts.path, parts.query, self.headers, body, self.client_address[1])
        # bytes are sent as they are: a proxy's HTML page, truncated JSON
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if "Content-Type" not in headers:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, *args):
        pass


class ScriptedServer:
    def __init__(self):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveHandler)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.app = None
        self.reset()

    def reset(self):
        self.app = self.httpd.api = ScriptedApi()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def scripted_server():
    server = ScriptedServer()
    yield server
    server.stop()


@pytest.fixture
def api(scripted_server):
    scripted_server.reset()
    return scripted_server


def make_client(url, fake=None, max_retry_seconds=60, token=TOKEN, **kwargs):
    if fake is not None:
        kwargs.update(sleep=fake.sleep, clock=fake.clock)
    return do.DigitalOceanClient(token, api_url=url, timeout=5, max_retry_seconds=max_retry_seconds, **kwargs)


def sim_client(do_sim):
    return make_client(do_sim.url, token=presets.DO_TOKEN)


# ---- endpoint -------------------------------------------------------------------------

@pytest.mark.parametrize("given, expected", [
    ("https://api.digitalocean.com/v2/", "https://api.digitalocean.com/v2/"),
    ("https://api.digitalocean.com/v2", "https://api.digitalocean.com/v2/"),
    ("https://api.digitalocean.com", "https://api.digitalocean.com/v2/"),
    ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v2/"),
    ("http://proxy.example/do/v2", "http://proxy.example/do/v2/"),
    ("  http://proxy.example/do  ", "http://proxy.example/do/v2/"),
])
def test_endpoint_always_ends_in_v2_slash(given, expected):
    assert normalize_endpoint(given) == expected


@pytest.mark.parametrize("bad", ["", "api.digitalocean.com/v2/", "ftp://host/v2/", "http:///v2/"])
def test_endpoint_must_be_an_http_url(bad):
    with pytest.raises(ValueError):
        normalize_endpoint(bad)


def test_requests_go_to_the_endpoint_even_when_given_without_v2(api):
    api.app.on("GET", "/v2/droplets", (200, {"droplets": [droplet_json(1)], "links": {}, "meta": {"total": 1}}))
    client = make_client(api.url)  # no /v2/: the library would have lost the last path segment
    assert [d["id"] for d in client.list_droplets()] == [1]
    assert api.app.requests[0]["path"] == "/v2/droplets/"
    assert api.app.requests[0]["args"]["per_page"] == "200"


def test_no_request_leaves_for_another_host(api, monkeypatch):
    """Pagination links name api.digitalocean.com; every object the client builds,
    and every page, still goes to the configured endpoint (checked at name resolution)."""
    resolved = []
    real_getaddrinfo = socket.getaddrinfo

    def recording_getaddrinfo(host, *args, **kwargs):
        resolved.append(host)
        if host not in ("127.0.0.1", "localhost"):
            raise socket.gaierror("blocked in the test: %s" % host)
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", recording_getaddrinfo)
    monkeypatch.delenv("DIGITALOCEAN_END_POINT", raising=False)
    foreign_next = "https://api.digitalocean.com/v2/droplets/?page=2&per_page=200&tag_name=" + TAG
    api.app.on("GET", "/v2/droplets",
               (200, {"droplets": [droplet_json(1)], "links": {"pages": {"next": foreign_next}}, "meta": {"total": 2}}),
               (200, {"droplets": [droplet_json(2)], "links": {}, "meta": {"total": 2}}))
    api.app.on("POST", "/v2/droplets", (202, {"droplet": droplet_json(3, status="new"),
                                              "links": {"actions": [{"id": 30, "rel": "create"}]}}))
    api.app.on("POST", "/v2/droplets/3/actions", (201, {"action": {"id": 31, "status": "in-progress"}}))
    api.app.on("GET", "/v2/droplets/3/actions/31", (200, {"action": {"id": 31, "status": "completed"}}))
    api.app.on("GET", "/v2/droplets/3", (200, {"droplet": droplet_json(3)}))
    api.app.on("DELETE", "/v2/droplets/3", (204, None))
    api.app.on("GET", "/v2/account/keys", (200, {"ssh_keys": [], "links": {}, "meta": {"total": 0}}))
    api.app.on("POST", "/v2/account/keys", (201, {"ssh_key": {"id": 9, "fingerprint": presets.NEW_KEY_FINGERPRINT}}))
    fake = FakeTime()
    client = make_client(api.url + "/v2/", fake)

    assert [d["id"] for d in client.list_droplets(tag_name=TAG)] == [1, 2]
    ids, _notes = client.resolve_ssh_keys([presets.NEW_PUBLIC_KEY], "waldur-aaaaaaaa")
    created = client.create_droplet("web-3", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64", ssh_keys=ids, tags=[TAG])
    action = client.droplet_action(created["id"], "shutdown")
    assert client.wait_for_action(created["id"], action, fake.now + 30) == "completed"
    assert client.get_droplet(3)["status"] == "active"
    assert client.destroy_droplet(3) is True

    assert set(resolved) == {"127.0.0.1"}
    assert api.app.requests[1]["args"]["page"] == "2"  # the foreign "next" link, followed here
    assert all(r["authorization"] == "Bearer " + TOKEN for r in api.app.requests)


def test_one_keep_alive_connection_for_many_objects(api):
    """python-digitalocean opens a session per object (and posts with bare requests.post);
    through the client every call shares one pooled connection."""
    api.app.on("GET", "/v2/droplets/5", (200, {"droplet": droplet_json(5)}))
    api.app.on("POST", "/v2/droplets/5/actions", (201, {"action": {"id": 50, "status": "in-progress"}}))
    client = make_client(api.url)
    for _attempt in range(5):
        client.get_droplet(5)
        client.droplet_action(5, "power_on")
    ports = set(r["port"] for r in api.app.requests)
    assert len(api.app.requests) == 10
    assert len(ports) == 1
    assert client.api_calls == 10


# ---- pacing ---------------------------------------------------------------------------

def test_burst_of_250_then_one_request_per_quarter_second():
    fake = FakeTime()
    pacer = RequestPacer(clock=fake.clock, sleep=fake.sleep)
    for _attempt in range(250):
        assert pacer.acquire() == 0.0
    assert pacer.acquire() == pytest.approx(60.0 / 250)
    assert pacer.acquire() == pytest.approx(60.0 / 250)
    assert fake.now - 1000.0 == pytest.approx(2 * 60.0 / 250)


def test_hourly_allowance_of_5000():
    fake = FakeTime()
    pacer = RequestPacer(clock=fake.clock, sleep=fake.sleep)
    for _attempt in range(5000):
        pacer.acquire()
    # 5,000 requests at the minute bucket's pace took about (5000-250)/250 minutes;
    # the hourly bucket has refilled that long at 5000/h, and then runs dry.
    elapsed = fake.now - 1000.0
    assert elapsed == pytest.approx((5000 - 250) * 60.0 / 250, rel=0.01)
    hourly = pacer.buckets[1]
    hourly.refill(fake.now)
    assert hourly.tokens == pytest.approx(elapsed * 5000 / 3600.0, abs=1.0)
    before = fake.now
    while pacer.buckets[1].wait_time(fake.now) == 0.0:
        pacer.acquire()
    pacer.acquire()
    drained = fake.now
    for _attempt in range(10):
        pacer.acquire()
    # past the hourly allowance: one request per 0.72 s, not per 0.24 s
    assert (fake.now - drained) / 10 == pytest.approx(3600.0 / 5000)
    assert drained > before


def test_a_429_pauses_everyone_then_resumes_at_the_sustained_rate():
    fake = FakeTime()
    pacer = RequestPacer(clock=fake.clock, sleep=fake.sleep)
    pacer.acquire()
    pacer.throttled(3.0)
    # the pause, then a fresh token: no burst allowance is left after a 429
    assert pacer.acquire() == pytest.approx(3.0 + 60.0 / 250)
    assert pacer.acquire() == pytest.approx(60.0 / 250)


def test_ratelimit_remaining_caps_the_hourly_bucket():
    fake = FakeTime()
    pacer = RequestPacer(clock=fake.clock, sleep=fake.sleep)
    pacer.observe_remaining(0)
    assert pacer.acquire() == pytest.approx(3600.0 / 5000)


def test_polls_are_paced_to_a_share_of_the_rate_left():
    fake = FakeTime()
    pacer = RequestPacer(clock=fake.clock, sleep=fake.sleep)
    # five pages at a quarter of 250 a minute: one listing every 4.8 s
    assert pacer.poll_interval(5, 0.25) == pytest.approx(5 / (0.25 * 250 / 60.0))
    # less than a minute's burst left of the hour: the hourly refill paces the polls
    pacer.observe_remaining(100)
    assert pacer.poll_interval(5, 0.25) == pytest.approx(5 / (0.25 * 5000 / 3600.0))


def test_pacer_is_shared_by_threads():
    pacer = RequestPacer(limits=((10, 1.0),))
    started = time.monotonic()
    threads = [threading.Thread(target=lambda: [pacer.acquire() for _request in range(5)]) for _thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 10 at once, the other 10 at 10 per second
    assert time.monotonic() - started >= 0.9


# ---- retries --------------------------------------------------------------------------

def test_429_is_retried_after_retry_after(api):
    api.app.on("GET", "/v2/droplets/7",
               (429, {"id": "too_many_requests", "message": "API Rate limit exceeded."}, {"Retry-After": "4"}),
               (200, {"droplet": droplet_json(7)}))
    fake = FakeTime()
    client = make_client(api.url, fake)
    assert client.get_droplet(7)["id"] == 7
    assert len(api.app.requests) == 2
    # Retry-After, then one fresh token of the sustained 250/minute rate
    assert fake.sleeps == [pytest.approx(4.0 + 60.0 / 250, abs=0.001)]
    assert client.stats.throttled == 1 and client.stats.retries == 1


def test_429_without_retry_after_backs_off(api):
    api.app.on("GET", "/v2/droplets/7",
               (429, {"id": "too_many_requests", "message": "API Rate limit exceeded."}),
               (429, {"id": "too_many_requests", "message": "API Rate limit exceeded."}),
               (200, {"droplet": droplet_json(7)}))
    fake = FakeTime()
    assert make_client(api.url, fake).get_droplet(7)["id"] == 7
    assert sum(fake.sleeps) >= 2.0 + 4.0 - 0.5  # 2 s, then 4 s (less the pacing already waited)


def test_429_gives_up_at_max_retry_seconds(api):
    api.app.on("GET", "/v2/droplets/7",
               (429, {"id": "too_many_requests", "message": "API Rate limit exceeded."}, {"Retry-After": "10"}))
    fake = FakeTime()
    client = make_client(api.url, fake, max_retry_seconds=35)
    with pytest.raises(DigitalOceanError) as caught:
        client.get_droplet(7)
    assert "rate limit still exceeded after 4 attempts (429 API Rate limit exceeded)" in str(caught.value)
    assert caught.value.status == 429
    assert fake.now - 1000.0 <= 35


def test_server_errors_on_reads_are_retried_with_jitter(api):
    api.app.on("GET", "/v2/droplets/7", (503, {"id": "service_unavailable", "message": "Try later."}),
               (502, {"id": "bad_gateway", "message": "Bad gateway."}), (200, {"droplet": droplet_json(7)}))
    fake = FakeTime()
    client = make_client(api.url, fake)
    assert client.get_droplet(7)["id"] == 7
    assert len(api.app.requests) == 3
    assert len(fake.sleeps) == 2 and all(0 <= s <= 1.0 for s in fake.sleeps)  # jittered 0.5 s, 1 s caps


def test_server_errors_give_up_within_the_bound(api):
    api.app.on("GET", "/v2/droplets/7", (500, {"id": "server_error", "message": "Oops."}))
    fake = FakeTime()
    client = make_client(api.url, fake, max_retry_seconds=120,
                         retry_policy=RetryPolicy(max_attempts=4, max_retry_seconds=120, clock=fake.clock))
    with pytest.raises(DigitalOceanError) as caught:
        client.get_droplet(7)
    assert str(caught.value) == "DigitalOcean server error after 4 attempts (500 Oops): GET /v2/droplets/7"
    assert len(api.app.requests) == 4


def test_a_failed_create_is_not_posted_again_when_the_droplet_landed(api):
    api.app.on("POST", "/v2/droplets", (500, {"id": "server_error", "message": "Oops."}))
    api.app.on("GET", "/v2/droplets", (200, {"droplets": [droplet_json(11, status="new")], "links": {},
                                             "meta": {"total": 1}}))
    client = make_client(api.url, FakeTime())
    created = client.create_droplet("web", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64", tags=[TAG], resource_tag=TAG)
    assert created["id"] == 11
    assert [r["method"] for r in api.app.requests] == ["POST", "GET"]
    assert api.app.requests[1]["args"]["tag_name"] == TAG


def test_a_failed_create_is_posted_again_when_nothing_landed(api):
    api.app.on("POST", "/v2/droplets", (500, {"id": "server_error", "message": "Oops."}),
               (202, {"droplet": droplet_json(12, status="new"), "links": {"actions": [{"id": 1}]}}))
    api.app.on("GET", "/v2/droplets", (200, {"droplets": [], "links": {}, "meta": {"total": 0}}))
    client = make_client(api.url, FakeTime())
    created = client.create_droplet("web", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64", tags=[TAG], resource_tag=TAG)
    assert created["id"] == 12 and created["status"] == "new"
    assert [r["method"] for r in api.app.requests] == ["POST", "GET", "POST"]


def test_a_post_to_a_dead_port_is_retried_because_it_never_left():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    fake = FakeTime()
    client = make_client("http://127.0.0.1:%d" % port, fake, max_retry_seconds=5)
    with pytest.raises(DigitalOceanError) as caught:
        client.droplet_action(1, "power_on")
    assert "cannot reach DigitalOcean at http://127.0.0.1:%d after" % port in str(caught.value)
    assert client.stats.retries >= 2
    assert caught.value.ambiguous is False


# ---- errors ---------------------------------------------------------------------------

def test_401_names_the_token_problem_without_the_token(api):
    api.app.on("GET", "/v2/droplets", (401, {"id": "unauthorized", "message": "Unable to authenticate you."}))
    client = make_client(api.url)
    with pytest.raises(DigitalOceanError) as caught:
        client.list_droplets()
    assert str(caught.value) == ("DigitalOcean rejected the token (401 Unable to authenticate you): "
                                 "GET /v2/droplets/; check the offering's backend_settings.token")
    assert client.auth_error is caught.value
    assert len(api.app.requests) == 1  # never retried


def test_403_says_the_token_lacks_scope(api):
    api.app.on("POST", "/v2/droplets/5/actions",
               (403, {"id": "forbidden", "message": "You do not have access for the attempted action."}))
    with pytest.raises(DigitalOceanError) as caught:
        make_client(api.url).droplet_action(5, "shutdown")
    assert str(caught.value) == ("the DigitalOcean token lacks the scope for this call (403 You do not have "
                                 "access for the attempted action): POST /v2/droplets/5/actions/")


def test_422_carries_digitaloceans_message_and_never_the_token(api):
    api.app.on("POST", "/v2/droplets/5/actions",
               (422, {"id": "unprocessable_entity", "message": "Bad token %s in request." % TOKEN}))
    with pytest.raises(DigitalOceanError) as caught:
        make_client(api.url).droplet_action(5, "resize", size="s-2vcpu-2gb")
    message = str(caught.value)
    assert message.startswith("DigitalOcean refused the request (422 Bad token ******** in request)")
    assert TOKEN not in message and TOKEN not in repr(caught.value.__dict__)
    assert api.app.requests[0]["body"] == '{"type": "resize", "size": "s-2vcpu-2gb"}'  # CPU/RAM only


def test_error_body_without_id_does_not_crash_the_library(api):
    # python-digitalocean indexes [id, message][1] and dies on bodies lacking one of them
    api.app.on("GET", "/v2/droplets/5", (400, {"message": "Bad request."}))
    with pytest.raises(DigitalOceanError, match=r"DigitalOcean answered 400 Bad request"):
        make_client(api.url).get_droplet(5)


def test_404_reads_as_absent(api):
    client = make_client(api.url)
    assert is_absent(client.get_droplet(404404))  # DigitalOcean's own not_found: proven absence
    assert client.destroy_droplet(404404) is False
    with pytest.raises(DigitalOceanNotFound):
        client.droplet_action(404404, "power_on")


# ---- facts ----------------------------------------------------------------------------

def test_facts_and_backend_metadata():
    facts = droplet_facts(droplet_json(3, status="off", size="s-2vcpu-2gb"))
    assert facts == {
        "id": 3, "name": "web-3", "status": "off", "region": "ams3", "size_slug": "s-2vcpu-2gb",
        "image": "ubuntu-22-04-x64", "vcpus": 1, "memory": 1024, "disk": 25,
        "networks": {"public_ipv4": "203.0.113.5", "private_ipv4": "10.0.0.5", "public_ipv6": "2001:db8::5"},
        "tags": [TAG], "created_at": "2026-01-02T03:04:05Z", "image_id": 7}
    assert backend_metadata(facts) == {"backend_type": "digitalocean", "droplet": {
        "id": 3, "name": "web-3", "status": "off", "region": "ams3", "size_slug": "s-2vcpu-2gb",
        "image": "ubuntu-22-04-x64", "created_at": "2026-01-02T03:04:05Z",
        "networks": {"public_ipv4": "203.0.113.5", "private_ipv4": "10.0.0.5", "public_ipv6": "2001:db8::5"}}}


def test_facts_of_a_new_droplet_have_empty_networks():
    facts = droplet_facts(dict(droplet_json(4, status="new"), networks={"v4": [], "v6": []}))
    assert facts["networks"] == {"public_ipv4": None, "private_ipv4": None, "public_ipv6": None}


def test_resource_tags_are_compared_lower_case():
    assert resource_tags(["web", "Waldur-Resource:ABC", TAG]) == {"waldur-resource:abc", TAG}


# ---- SSH keys -------------------------------------------------------------------------

def test_fingerprint_is_the_md5_of_the_key_blob():
    assert ssh_fingerprint(presets.OPS_PUBLIC_KEY) == presets.OPS_KEY_FINGERPRINT
    assert ssh_fingerprint(presets.ADMIN_PUBLIC_KEY) == presets.ADMIN_KEY_FINGERPRINT
    assert ssh_fingerprint("ssh-ed25519 not*base64") is None
    assert ssh_fingerprint("hello") is None


@pytest.mark.parametrize("entry, kind", [
    (512189, "id"), ("512189", "id"), (presets.OPS_KEY_FINGERPRINT.upper(), "fingerprint"),
    (presets.NEW_PUBLIC_KEY, "public_key"), ("waldur-ops", None), (True, None),
])
def test_ssh_key_entries_are_classified(entry, kind):
    assert classify_ssh_key(entry)[0] == kind


def test_keys_by_id_fingerprint_and_public_key(do_sim):
    client = sim_client(do_sim)
    ids, notes = client.resolve_ssh_keys(
        [str(presets.OPS_KEY_ID), presets.ADMIN_KEY_FINGERPRINT, presets.OPS_PUBLIC_KEY.replace("ops@", "other@")],
        "waldur-aaaaaaaa")
    assert ids == [presets.OPS_KEY_ID, presets.ADMIN_KEY_ID, presets.OPS_KEY_ID]  # same blob, other comment
    assert notes == []
    assert [c["operation"] for c in do_sim.app.calls] == ["keys.list"]  # listed once, nothing created


def test_a_missing_public_key_is_created_once_for_many_threads(do_sim):
    client = sim_client(do_sim)
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        client.resolve_ssh_keys([presets.NEW_PUBLIC_KEY], "waldur-aaaaaaaa"))) for _thread in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    created = [k for k in do_sim.app.keys() if k["fingerprint"] == presets.NEW_KEY_FINGERPRINT]
    assert len(created) == 1 and created[0]["name"] == "waldur-aaaaaaaa"
    assert set(ids[0] for ids, _notes in results) == {created[0]["id"]}
    assert len(do_sim.app.calls_of("keys.create")) == 1
    assert len(do_sim.app.calls_of("keys.list")) == 1


def test_a_key_added_since_the_listing_is_found_after_a_422(do_sim):
    client = sim_client(do_sim)
    client.account_keys()  # cached before the key exists
    key = client.build(BoundSSHKey, name="someone else", public_key=presets.NEW_PUBLIC_KEY)
    key.create()
    ids, notes = client.resolve_ssh_keys([presets.NEW_PUBLIC_KEY], "waldur-aaaaaaaa")
    assert ids == [key.id] and notes == []  # found, not added
    assert [c["status"] for c in do_sim.app.calls_of("keys.create")] == [201, 422]


def test_unknown_keys_fail_clearly(do_sim):
    client = sim_client(do_sim)
    with pytest.raises(ValueError, match="SSH key 999 is not in the DigitalOcean account"):
        client.resolve_ssh_keys(["999"], "waldur-aaaaaaaa")
    with pytest.raises(ValueError, match="neither a key id, an MD5 fingerprint nor an OpenSSH public key"):
        client.resolve_ssh_keys(["my laptop key"], "waldur-aaaaaaaa")


def test_check_mode_does_not_create_keys(do_sim):
    client = sim_client(do_sim)
    ids, notes = client.resolve_ssh_keys([presets.NEW_PUBLIC_KEY], "waldur-aaaaaaaa", check_mode=True)
    assert ids == [] and notes == ["would add SSH key %s as waldur-aaaaaaaa" % presets.NEW_KEY_FINGERPRINT]
    assert do_sim.app.write_calls() == []


# ---- many droplets --------------------------------------------------------------------

def test_find_droplets_pages_through_the_listing(do_sim):
    seeded = [do_sim.app.seed_droplet("d%d" % i)["id"] for i in range(450)]
    client = sim_client(do_sim)
    found = client.find_droplets(seeded + [1])
    assert sorted(k for k, v in found.items() if v) == sorted(seeded)
    assert is_absent(found[1])
    operations = [c["operation"] for c in do_sim.app.calls]
    assert operations == ["droplets.list"] * 3 + ["droplets.get"]  # 200 per page; the unseen id confirmed


def test_find_few_droplets_in_a_large_account_reads_them_directly(do_sim):
    seeded = [do_sim.app.seed_droplet("d%d" % i)["id"] for i in range(650)]
    client = sim_client(do_sim)
    wanted = [seeded[-1], seeded[-2]]  # on the last page
    found = client.find_droplets(wanted)
    assert set(found) == set(wanted) and all(found.values())
    assert [c["operation"] for c in do_sim.app.calls] == ["droplets.list", "droplets.get", "droplets.get"]


def test_waits_poll_until_done(do_sim):
    do_sim.app.configure(action_seconds=0.6)
    droplet = do_sim.app.seed_droplet("w1")
    fake_deadline = time.monotonic() + 10
    client = sim_client(do_sim)
    action = client.droplet_action(droplet["id"], "shutdown")
    assert action["status"] == "in-progress"
    assert client.wait_for_action(droplet["id"], action, fake_deadline) == "completed"
    assert client.get_droplet(droplet["id"])["status"] == "off"
    polls = do_sim.app.calls_of("droplet_actions.get")
    assert 2 <= len(polls) <= 5  # 0.25 s, 0.5 s, 1 s ...


def test_wait_stops_at_the_deadline(do_sim):
    do_sim.app.configure(action_seconds=30)
    droplet = do_sim.app.seed_droplet("w2")
    client = sim_client(do_sim)
    action = client.droplet_action(droplet["id"], "shutdown")
    started = time.monotonic()
    assert client.wait_for_action(droplet["id"], action, started + 0.5) == "in-progress"
    assert time.monotonic() - started < 1.5


def test_scan_droplets_lists_the_account_in_pages_within_the_bound(do_sim):
    seeded = [do_sim.app.seed_droplet("d%d" % i)["id"] for i in range(450)]
    client = sim_client(do_sim)
    scanned = client.scan_droplets(max_pages=3)
    assert sorted(d["id"] for d in scanned) == sorted(seeded)
    assert [c["operation"] for c in do_sim.app.calls] == ["droplets.list"] * 3
    do_sim.app.calls.clear()
    assert client.scan_droplets(max_pages=2) is None  # 3 pages would be needed: give up after one
    assert [c["operation"] for c in do_sim.app.calls] == ["droplets.list"]


def test_scan_droplets_gives_up_when_the_account_changes_while_paging(api):
    # page 1 says 3 droplets in all, page 2 says 2: one was deleted meanwhile and pages shifted
    first = {"droplets": [droplet_json(1), droplet_json(2)], "meta": {"total": 3},
             "links": {"pages": {"next": api.url + "/v2/droplets?page=2"}}}
    second = {"droplets": [droplet_json(3)], "meta": {"total": 2}, "links": {"pages": {}}}
    api.app.on("GET", "/v2/droplets", (200, first), (200, second))
    client = make_client(api.url)
    assert client.scan_droplets(max_pages=5) is None


# ---- waiting for many droplets together ---------------------------------------------------

def test_one_droplet_is_waited_for_with_gets_and_many_with_the_listing(do_sim):
    do_sim.app.configure(boot_seconds=0.3)
    client = sim_client(do_sim)
    waiter = DropletWaiter(client, min_interval=0.1)
    deadline = time.monotonic() + 10
    alone = client.create_droplet("alone", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64")
    assert waiter.wait(alone, ("active", "off"), deadline)["status"] == "active"
    assert set(c["operation"] for c in do_sim.app.calls_of("droplets.get")) == {"droplets.get"}
    assert do_sim.app.calls_of("droplets.list") == []

    created = [client.create_droplet("many-%d" % i, "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64") for i in range(5)]
    since = len(do_sim.app.calls)
    threads = [threading.Thread(target=lambda f=f: outcomes.append(waiter.wait(f, ("active",), deadline)))
               for f in created]
    outcomes = []
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(f["id"] for f in outcomes) == sorted(f["id"] for f in created)
    assert all(f["status"] == "active" and f["networks"]["public_ipv4"] for f in outcomes)
    reads = [c["operation"] for c in do_sim.app.calls[since:]]
    assert 1 <= reads.count("droplets.list") <= 5 and len(reads) < 2 * len(created)


def test_many_droplets_are_waited_for_with_listings_of_their_common_tag_never_one_get_each(do_sim):
    do_sim.app.configure(boot_seconds=0.6, droplet_limit=1000)
    for index in range(250):  # other droplets of the account: two pages of it, one of the tag
        do_sim.app.seed_droplet("other-%d" % index)
    client = sim_client(do_sim)
    created = [client.create_droplet("many-%d" % i, "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64",
                                     tags=["waldur", "waldur-resource:%032x" % i]) for i in range(30)]
    since = len(do_sim.app.calls)
    deadline = time.monotonic() + 20
    outcomes = DropletWaiter(client, min_interval=0.1).wait_all([(f, ("active",), deadline) for f in created])
    assert [f["id"] for f in outcomes] == [f["id"] for f in created]
    assert all(f["status"] == "active" and f["networks"]["public_ipv4"] for f in outcomes)
    reads = do_sim.app.calls[since:]
    assert do_sim.app.calls_of("droplets.get", since) == []
    assert set(call["operation"] for call in reads) == {"droplets.list"}
    assert all("tag_name=waldur&" in call["query"] for call in reads)
    assert 1 <= len(reads) <= 4  # booting takes 0.6 s: a few polls, each one page


def test_a_droplet_no_listing_shows_is_confirmed_gone_with_one_get(do_sim):
    do_sim.app.configure(boot_seconds=30)
    client = sim_client(do_sim)
    created = [client.create_droplet("d-%d" % i, "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64", tags=["waldur"])
               for i in range(3)]
    client.destroy_droplet(created[0]["id"])
    since = len(do_sim.app.calls)
    waiter = DropletWaiter(client, min_interval=0.02, max_interval=0.05, poll_share=100)
    outcomes = waiter.wait_all([(f, ("active",), time.monotonic() + 3) for f in created])
    assert outcomes[0] is None and [f["status"] for f in outcomes[1:]] == ["new", "new"]
    gets = do_sim.app.calls_of("droplets.get", since)
    assert [call["path"] for call in gets] == ["/v2/droplets/%d" % created[0]["id"]]
    listings = do_sim.app.calls_of("droplets.list", since)
    assert len(listings) >= DropletWaiter.CONFIRM_AFTER


def test_a_droplet_gone_while_waited_for_reads_as_none(do_sim):
    do_sim.app.configure(boot_seconds=30)
    client = sim_client(do_sim)
    facts = client.create_droplet("gone", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64")
    client.destroy_droplet(facts["id"])
    assert DropletWaiter(client).wait(facts, ("active",), time.monotonic() + 10) is None


def test_the_wait_ends_at_the_deadline_with_the_last_facts_and_backs_off(do_sim):
    do_sim.app.configure(boot_seconds=30)
    client = sim_client(do_sim)
    facts = client.create_droplet("stuck", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64")
    started = time.monotonic()
    # a large poll share: the back-off alone spaces the polls here (the pacing test below paces them)
    waiter = DropletWaiter(client, min_interval=0.05, max_interval=0.4, poll_share=100)
    latest = waiter.wait(facts, ("active",), started + 1.5)
    assert latest["status"] == "new" and 1.5 <= time.monotonic() - started < 2.5
    polls = len(do_sim.app.calls_of("droplets.get"))
    assert 4 <= polls <= 8  # 0.05, 0.1, 0.2, 0.4, 0.4 ... apart, not every 0.05 s


def test_the_polls_are_paced_by_the_waiters_own_reads_not_the_calls_other_threads_send(do_sim):
    """While a refresh reads, other workers keep creating: their calls are not the poll's
    cost (counting them spaced the next poll by seconds and let waits run into their deadline)."""
    do_sim.app.configure(boot_seconds=30)
    client = sim_client(do_sim)
    facts = client.create_droplet("polled", "ams3", "s-1vcpu-1gb", "ubuntu-22-04-x64")
    read_alone = client.get_droplet

    def read_while_others_create(droplet_id):
        others = threading.Thread(target=lambda: [client.account() for _call in range(20)])
        others.start()
        others.join()
        return read_alone(droplet_id)

    client.get_droplet = read_while_others_create
    waiter = DropletWaiter(client, min_interval=0.05, max_interval=0.05)
    latest = waiter.wait(facts, ("active",), time.monotonic() + 0.01)
    assert latest["status"] == "new" and waiter.refreshes == 1
    assert waiter._last_cost == 1  # one GET, not 21
    assert waiter.next_refresh() - waiter._last_refresh == pytest.approx(client.pacer.poll_interval(1, waiter.poll_share))


def test_a_failed_refresh_fails_the_waits_it_was_for(api):
    api.app.on("GET", "/v2/droplets/5",
               (403, {"id": "forbidden", "message": "You do not have access for the attempted action."}))
    client = make_client(api.url)
    with pytest.raises(DigitalOceanError) as caught:
        DropletWaiter(client).wait(droplet_json(5, status="new"), ("active",), time.monotonic() + 10)
    assert caught.value.status == 403 and TOKEN not in str(caught.value)


@pytest.mark.parametrize("body, headers, shown", [
    (b"<!doctype html><html><body>Down for maintenance</body></html>", {"Content-Type": "text/html"},
     "text/html '<!doctype html><html><body>Down for maintenance</body></html>'"),
    (b'{"droplets": [{"id": 1, "na', {}, "application/json '{\"droplets\": [{\"id\": 1, \"na'"),
    (b"[]", {}, "application/json '[]'"),
])
def test_a_2xx_answer_that_is_not_the_json_object_is_an_error_never_nothing(api, body, headers, shown):
    api.app.on("GET", "/v2/droplets", (200, body, headers))
    client = make_client(api.url)
    with pytest.raises(DigitalOceanError) as caught:
        client.list_droplets(tag_name=TAG)
    message = str(caught.value)
    assert "instead of a JSON object; nothing in it is trusted: GET /v2/droplets" in message
    assert shown in message and TOKEN not in message


def test_a_listing_whose_pages_do_not_add_up_to_its_total_is_an_error(api):
    api.app.on("GET", "/v2/droplets", (200, {"droplets": [droplet_json(1)], "links": {}, "meta": {"total": 2}}))
    with pytest.raises(DigitalOceanError, match="pages holding 1 item.s. but a total of 2"):
        make_client(api.url).list_droplets(tag_name=TAG)
    api.app.on("GET", "/v2/droplets", (200, {"links": {}, "meta": {"total": 0}}))
    with pytest.raises(DigitalOceanError, match="answered without the list 'droplets'"):
        make_client(api.url).list_droplets(tag_name=TAG)


def test_a_booting_droplet_is_read_every_two_and_a_half_seconds_within_the_rate_limit():
    # Issue 26: a 10 s boot was seen at ~16 s when the gap between polls doubled up to 10 s.
    from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.pacing import RequestPacer
    from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.waiter import DropletWaiter as Waiter

    assert Waiter.MAX_INTERVAL == 2.5
    # one listing page per poll stays within the share of DigitalOcean's rate polls may spend
    assert RequestPacer().poll_interval(1, Waiter.POLL_SHARE) <= Waiter.MAX_INTERVAL
