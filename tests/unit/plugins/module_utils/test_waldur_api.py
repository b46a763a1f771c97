"""waldur_api: pagination, retries, error messages, empty bodies, against a scripted local HTTP server."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.retry import RetryPolicy
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import (
    WaldurApiError,
    WaldurClient,
    normalize_api_root,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import normalize_resource

TOKEN = "tok-3f9a1c77-never-shown"


class Scripted:
    """Answers requests from a queue of (status, headers, body) per path; records every request."""

    def __init__(self):
        self.replies = {}
        self.requests = []
        self.default = (404, {}, {"detail": "Not found."})

    def on(self, path, *replies):
        self.replies.setdefault(path, []).extend(replies)

    def answer(self, method, raw_path, headers, body):
        parts = urlsplit(raw_path)
        self.requests.append({"method": method, "path": parts.path, "query": parse_qs(parts.query),
                              "headers": dict(headers), "body": body})
        queue = self.replies.get(parts.path)
        if not queue:
            return self.default
        return queue.pop(0) if len(queue) > 1 else queue[0]


@pytest.fixture
def server():
    script = Scripted()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, headers, payload = script.answer(self.command, self.path, self.headers, body)
            data = payload if isinstance(payload, bytes) else (b"" if payload is None else json.dumps(payload).encode())
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value.replace("{base}", script.base) if isinstance(value, str) else value)
            if payload is not None and not isinstance(payload, bytes):
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _handle

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    script.base = "http://127.0.0.1:%d" % httpd.server_port
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield script
    httpd.shutdown()
    httpd.server_close()


class FakeTime:
    """A clock that only moves when the client sleeps, so retry tests take no real time."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def make_client(server, max_retry_seconds=60, fake_time=None, **kwargs):
    fake_time = fake_time or FakeTime()
    policy = RetryPolicy(max_retry_seconds=max_retry_seconds, sleep=fake_time.sleep, clock=fake_time.clock)
    return WaldurClient(server.base + "/api/", TOKEN, retry_policy=policy, **kwargs)


@pytest.mark.parametrize("given, root", [
    ("https://waldur.example.com", "https://waldur.example.com/"),
    ("https://waldur.example.com/", "https://waldur.example.com/"),
    ("https://waldur.example.com/api", "https://waldur.example.com/"),
    ("https://waldur.example.com/api/", "https://waldur.example.com/"),
    ("http://127.0.0.1:8000/waldur/api/", "http://127.0.0.1:8000/waldur/"),
])
def test_api_url_is_normalised_with_or_without_api(given, root):
    assert normalize_api_root(given) == root


@pytest.mark.parametrize("bad", ["", "waldur.example.com", "ftp://waldur.example.com/api/"])
def test_api_url_must_be_http(bad):
    with pytest.raises(ValueError, match="api_url"):
        normalize_api_root(bad)


def test_both_url_forms_reach_the_same_endpoint(server):
    server.on("/api/users/me/", (200, {}, {"uuid": "u1", "username": "agent"}))
    for api_url in (server.base, server.base + "/api"):
        client = WaldurClient(api_url, TOKEN)
        assert client.get("users/me/") == {"uuid": "u1", "username": "agent"}
        assert client.get("/api/users/me/") == {"uuid": "u1", "username": "agent"}
    assert [r["path"] for r in server.requests] == ["/api/users/me/"] * 4


def test_token_header_and_user_agent_are_sent(server):
    server.on("/api/users/me/", (200, {}, {"uuid": "u1", "username": "agent"}))
    client = make_client(server)
    client.get("users/me/")
    headers = server.requests[0]["headers"]
    assert headers["Authorization"] == "Token " + TOKEN
    assert headers["User-Agent"].startswith("waldur-site-agent-ansible/")


def test_list_follows_link_next_and_keeps_repeated_params(server):
    path = "/api/marketplace-categories/"
    link = '<{base}%s?page=%d&page_size=100&state=pending-provider&state=executing>; rel="next"'
    server.on(path,
              (200, {"Link": link % (path, 2), "X-Result-Count": "4"}, [{"uuid": "1"}, {"uuid": "2"}]),
              (200, {"Link": link % (path, 3), "X-Result-Count": "4"}, [{"uuid": "3"}]),
              (200, {"X-Result-Count": "4"}, [{"uuid": "4"}]))
    client = make_client(server)
    items = client.list("marketplace-categories/", params={"state": ["pending-provider", "executing"]})
    assert [item["uuid"] for item in items] == ["1", "2", "3", "4"]
    assert [r["query"].get("page") for r in server.requests] == [None, ["2"], ["3"]]
    for request in server.requests:
        assert request["query"]["page_size"] == ["100"]
        assert request["query"]["state"] == ["pending-provider", "executing"]
    assert client.calls["reads"] == 3


def test_list_stays_on_api_url_when_link_names_another_host(server):
    # a TLS-terminating proxy may emit links with the wrong scheme or host; the token must not follow them
    path = "/api/marketplace-categories/"
    server.on(path,
              (200, {"Link": '<http://elsewhere.invalid:9%s?page=2&page_size=100>; rel="next"' % path,
                     "X-Result-Count": "2"}, [{"uuid": "a"}]),
              (200, {"X-Result-Count": "2"}, [{"uuid": "b"}]))
    client = make_client(server)
    assert [item["uuid"] for item in client.list("marketplace-categories/")] == ["a", "b"]
    assert len(server.requests) == 2


def test_list_respects_an_explicit_page_size(server):
    server.on("/api/marketplace-categories/", (200, {"X-Result-Count": "0"}, []))
    client = make_client(server)
    client.list("marketplace-categories/", params={"page_size": 7})
    assert server.requests[0]["query"]["page_size"] == ["7"]


def _four_pages(server, path):
    """Four pages of two uuids each (``a``..``h`` as 32 hex digits), each page linking the next."""
    link = '<{base}%s?page=%d&page_size=100>; rel="next"'
    pages = [[{"uuid": letter * 32} for letter in pair] for pair in ("ab", "cd", "ef", "01")]
    server.on(path, *[(200, dict({"Link": link % (path, number + 2)} if number < 3 else {}, **{"X-Result-Count": "8"}),
                       page) for number, page in enumerate(pages)])


def test_find_stops_the_listing_once_every_uuid_is_seen(server):
    _four_pages(server, "/api/marketplace-categories/")
    client = make_client(server)

    found = client.find("marketplace-categories/", ["b" * 32, "c" * 32, "d" * 32], params={"state": ["executing"]})

    assert sorted(found) == ["b" * 32, "c" * 32, "d" * 32]
    assert found["c" * 32] == {"uuid": "c" * 32}
    assert [r["query"].get("page") for r in server.requests] == [None, ["2"]]
    assert server.requests[0]["query"]["state"] == ["executing"]


def test_find_spends_no_more_pages_than_reading_each_would(server):
    # two uuids the listing does not hold: two pages at most, then the caller reads them alone
    _four_pages(server, "/api/marketplace-categories/")
    client = make_client(server)

    assert client.find("marketplace-categories/", ["9" * 32, "8" * 32, "a" * 32]) == {"a" * 32: {"uuid": "a" * 32}}
    assert len(server.requests) == 3
    server.replies.clear()
    _four_pages(server, "/api/marketplace-categories/")
    assert client.find("marketplace-categories/", ["9" * 32, "8" * 32]) == {}
    assert len(server.requests) == 5


def test_find_makes_no_call_for_one_uuid_or_none(server):
    client = make_client(server)
    assert client.find("marketplace-categories/", ["a" * 32]) == {}
    assert client.find("marketplace-categories/", []) == {}
    assert server.requests == []


def test_503_then_success_is_retried(server):
    server.on("/api/marketplace-orders/x/", (503, {}, {"detail": "down"}), (503, {}, {"detail": "down"}),
              (200, {}, {"uuid": "x"}))
    fake_time = FakeTime()
    client = make_client(server, fake_time=fake_time)
    assert client.get("marketplace-orders/x/") == {"uuid": "x"}
    assert len(server.requests) == 3
    assert len(fake_time.sleeps) == 2
    assert client.calls == {"reads": 3, "writes": 0, "retries": 2}


def test_429_waits_for_retry_after(server):
    server.on("/api/marketplace-orders/x/", (429, {"Retry-After": "7"}, {"detail": "slow down"}),
              (200, {}, {"uuid": "x"}))
    fake_time = FakeTime()
    client = make_client(server, fake_time=fake_time)
    assert client.get("marketplace-orders/x/") == {"uuid": "x"}
    assert fake_time.sleeps == [7.0]


def test_retry_after_beyond_the_bound_fails_at_once(server):
    server.on("/api/marketplace-orders/x/", (429, {"Retry-After": "500"}, {"detail": "Request was throttled."}))
    fake_time = FakeTime()
    client = make_client(server, max_retry_seconds=20, fake_time=fake_time)
    with pytest.raises(WaldurApiError) as caught:
        client.get("marketplace-orders/x/")
    assert caught.value.status == 429
    assert fake_time.sleeps == []
    assert "Retry-After 500" in str(caught.value) and "max_retry_seconds=20" in str(caught.value)


def test_retries_stop_within_max_retry_seconds(server):
    server.on("/api/marketplace-orders/", (502, {}, {"detail": "Bad gateway"}))
    fake_time = FakeTime()
    client = make_client(server, max_retry_seconds=3, fake_time=fake_time)
    with pytest.raises(WaldurApiError) as caught:
        client.post("marketplace-orders/", json={})
    assert caught.value.status == 502 and caught.value.transient
    assert sum(fake_time.sleeps) <= 3
    assert len(server.requests) == len(fake_time.sleeps) + 1 >= 2


def test_non_idempotent_post_is_not_resent_after_a_500(server):
    server.on("/api/marketplace-orders/", (500, {}, {"detail": "boom"}), (201, {}, {"uuid": "o"}))
    client = make_client(server)
    with pytest.raises(WaldurApiError) as caught:
        client.post("marketplace-orders/", json={"offering": "x"}, idempotent=False)
    assert caught.value.status == 500
    assert len(server.requests) == 1


def test_non_idempotent_post_is_resent_after_a_503(server):
    server.on("/api/marketplace-orders/", (503, {}, {"detail": "maintenance"}), (201, {}, {"uuid": "o"}))
    client = make_client(server)
    assert client.post("marketplace-orders/", json={}, idempotent=False) == {"uuid": "o"}
    assert len(server.requests) == 2


def test_connection_errors_are_retried_then_reported_without_the_token():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fake_time = FakeTime()
    policy = RetryPolicy(max_retry_seconds=5, sleep=fake_time.sleep, clock=fake_time.clock)
    client = WaldurClient("http://127.0.0.1:%d/api/" % port, TOKEN, retry_policy=policy, timeout=2)
    with pytest.raises(WaldurApiError) as caught:
        client.get("users/me/")
    assert caught.value.status is None and caught.value.transient
    assert client.calls["retries"] >= 1
    assert "GET /api/users/me/" in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_error_carries_method_path_status_and_detail_but_not_the_token(server):
    server.on("/api/marketplace-orders/abc/approve_by_provider/",
              (409, {}, {"detail": "Valid states for operation: pending-provider."}))
    client = make_client(server)
    with pytest.raises(WaldurApiError) as caught:
        client.post("marketplace-orders/abc/approve_by_provider/", json={})
    text = str(caught.value)
    assert text == ("Waldur POST /api/marketplace-orders/abc/approve_by_provider/ failed (HTTP 409): "
                    "Valid states for operation: pending-provider.")
    assert caught.value.conflict and not caught.value.transient
    assert TOKEN not in text


def test_field_and_non_field_errors_are_rendered(server):
    server.on("/api/marketplace-component-usages/set_usage/",
              (400, {}, {"non_field_errors": ["These components are invalid: gpu."],
                         "usages": [{"amount": ["A valid number is required."]}]}))
    client = make_client(server)
    with pytest.raises(WaldurApiError) as caught:
        client.post("marketplace-component-usages/set_usage/", json={})
    assert "These components are invalid: gpu." in str(caught.value)
    assert "usages: amount: A valid number is required." in str(caught.value)


def test_a_server_echoing_the_token_is_scrubbed(server):
    server.on("/api/users/me/", (401, {}, {"detail": "Invalid token %s." % TOKEN}))
    client = make_client(server)
    with pytest.raises(WaldurApiError) as caught:
        client.get("users/me/")
    assert caught.value.status == 401
    assert TOKEN not in str(caught.value) and "********" in str(caught.value)


def test_html_error_pages_are_named_not_dumped(server):
    server.on("/api/nothing/", (404, {"Content-Type": "text/html"}, b"<!DOCTYPE html><html>" + b"x" * 5000))
    client = make_client(server)
    with pytest.raises(WaldurApiError) as caught:
        client.get("nothing/")
    assert "HTML page instead of JSON" in str(caught.value)
    assert len(str(caught.value)) < 300


def test_redirects_are_not_followed(server):
    server.on("/api/users/me/", (301, {"Location": "https://login.example.com/"}, None))
    client = make_client(server)
    with pytest.raises(WaldurApiError, match="unexpected redirect to https://login.example.com/"):
        client.get("users/me/")
    assert len(server.requests) == 1


def test_empty_bodies_are_tolerated(server):
    server.on("/api/marketplace-orders/x/set_state_done/", (200, {}, None))
    server.on("/api/marketplace-component-usages/set_usage/", (201, {}, None))
    server.on("/api/marketplace-orders/x/", (200, {}, None))
    client = make_client(server)
    assert client.post("marketplace-orders/x/set_state_done/") == {}
    assert client.post("marketplace-component-usages/set_usage/", json={"usages": []}) == {}
    # only writes: a read answered with nothing is no view at all (rule 3 of issue 22)
    with pytest.raises(WaldurApiError, match=r"GET /api/marketplace-orders/x/ \(HTTP 200\) is not proof: answered .*an empty "
                                             r"body instead of a JSON object"):
        client.get("marketplace-orders/x/")
    assert client.calls == {"reads": 1, "writes": 2, "retries": 0}


def test_boolean_params_are_sent_as_waldur_expects(server):
    server.on("/api/marketplace-orders/", (200, {}, []))
    client = make_client(server)
    client.get("marketplace-orders/", params={"can_approve_as_provider": True, "skip": None}, expect=list)
    assert server.requests[0]["query"] == {"can_approve_as_provider": ["true"]}


def test_empty_token_is_refused_before_any_call():
    with pytest.raises(ValueError, match="api_token is empty"):
        WaldurClient("https://waldur.example.com/api/", "")


def test_resources_are_normalised_to_the_contract_shape():
    resource = normalize_resource({"uuid": "7B1E0C9D-8A7F-4E3D-2C1B-0A9F8E7D6C5B", "backend_id": None,
                                   "limits": None, "paused": None, "project_uuid": "",
                                   "backend_metadata": {"ip": "203.0.113.1"}})
    assert resource["uuid"] == "7b1e0c9d8a7f4e3d2c1b0a9f8e7d6c5b"
    assert resource["backend_id"] == "" and resource["limits"] == {} and resource["paused"] is False
    assert resource["project_uuid"] is None
    assert resource["backend_metadata"] == {"ip": "203.0.113.1"}


def test_a_lost_reply_to_a_non_idempotent_post_is_not_resent():
    """The server reads the order and hangs up: it may have created it, so the client must not send it again."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    received = []

    def serve():
        while True:
            try:
                connection = listener.accept()[0]
            except OSError:
                return
            received.append(connection.recv(65536))
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    fake_time = FakeTime()
    policy = RetryPolicy(max_retry_seconds=30, sleep=fake_time.sleep, clock=fake_time.clock)
    client = WaldurClient("http://127.0.0.1:%d/api/" % listener.getsockname()[1], TOKEN, retry_policy=policy)
    try:
        with pytest.raises(WaldurApiError) as caught:
            client.post("marketplace-orders/", json={"offering": "x"}, idempotent=False)
        assert caught.value.status is None
        assert len(received) == 1 and fake_time.sleeps == []
        # the same failure on an idempotent call is retried
        with pytest.raises(WaldurApiError):
            client.post("marketplace-orders/x/set_state_done/")
        assert len(received) > 2
    finally:
        listener.close()


def test_a_non_idempotent_post_is_resent_when_nothing_was_sent():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fake_time = FakeTime()
    policy = RetryPolicy(max_retry_seconds=5, sleep=fake_time.sleep, clock=fake_time.clock)
    client = WaldurClient("http://127.0.0.1:%d/api/" % port, TOKEN, retry_policy=policy)
    with pytest.raises(WaldurApiError, match="cannot reach Waldur at .*: connection refused"):
        client.post("marketplace-orders/", json={}, idempotent=False)
    assert client.calls["retries"] >= 1


# ---- a Waldur that cannot be reached: bounded, one clear line ---------------------------------

def closed_port():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_waldur_fails_within_the_bound_in_one_line_naming_the_url():
    """Real time, real sockets: Waldur down (connection refused) is given up on after
    unreachable_timeout, not max_retry_seconds, with the URL and the cause in plain words."""
    url = "http://127.0.0.1:%d/api/" % closed_port()
    client = WaldurClient(url, TOKEN, max_retry_seconds=120, unreachable_timeout=2)
    started = time.monotonic()
    with pytest.raises(WaldurApiError) as caught:
        client.get("marketplace-orders/")
    elapsed = time.monotonic() - started
    text = str(caught.value)
    assert elapsed < 4, elapsed
    assert text.startswith("cannot reach Waldur at %s (waldur_api_url): connection refused; gave up after " % url)
    assert text.endswith("(GET /api/marketplace-orders/)")
    assert "\n" not in text and "NewConnectionError" not in text and "object at 0x" not in text
    assert caught.value.status is None and caught.value.transient


def test_a_host_that_never_answers_is_bounded_too():
    """A listening socket whose backlog is full never completes the handshake: each connect
    attempt is cut at the remaining bound, so the whole call stays within it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    try:
        for _filler in range(8):  # fill the accept queue so further connects hang
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(listener.getsockname())
            fillers.append(filler)
        client = WaldurClient("http://127.0.0.1:%d/api/" % listener.getsockname()[1], TOKEN, timeout=30,
                              unreachable_timeout=2)
        started = time.monotonic()
        with pytest.raises(WaldurApiError) as caught:
            client.get("users/me/")
        assert time.monotonic() - started < 6
        assert "Waldur" in str(caught.value) and TOKEN not in str(caught.value)
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


@pytest.mark.parametrize("exception, words", [
    (ConnectionRefusedError(111, "Connection refused"), "connection refused"),
    (OSError(-2, "Name or service not known"), "Name or service not known"),
])
def test_connection_causes_are_said_in_plain_words(exception, words):
    import requests
    import urllib3

    from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import describe_connection_error

    reason = urllib3.exceptions.NewConnectionError(object(), "Failed to establish a new connection: [Errno %s] %s"
                                                   % (exception.args[0], exception.args[1]))
    error = requests.exceptions.ConnectionError(urllib3.exceptions.MaxRetryError(None, "/api/", reason))
    assert describe_connection_error(error) == words


# ---- verify_ssl means what it says, whatever the environment ----------------------------------

@pytest.fixture
def tls_waldur(tls_waldur_server):
    return tls_waldur_server


def whoami(server, verify_ssl):
    from tests.simulators.waldur import presets

    client = WaldurClient(server.url + "/api/", presets.PROVIDER_TOKEN, verify_ssl=verify_ssl,
                          unreachable_timeout=1)
    return client.get("users/me/", params={"field": ["username"]})["username"]


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_verify_ssl_false_is_not_overridden_by_a_ca_bundle_variable(tls_waldur, monkeypatch, variable):
    """requests merges REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE into a session's verify=False;
    the client passes verify on every request so false stays false."""
    monkeypatch.setenv(variable, tls_waldur.other_ca)  # a CA that did not sign the server
    assert whoami(tls_waldur, False) == "provider-agent"
    assert whoami(tls_waldur, "false") == "provider-agent"


def test_verify_ssl_true_uses_the_ca_bundle_variable_and_fails_clearly_without_it(tls_waldur, monkeypatch):
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", tls_waldur.ca_bundle)
    assert whoami(tls_waldur, True) == "provider-agent"
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", tls_waldur.other_ca)
    with pytest.raises(WaldurApiError) as caught:
        whoami(tls_waldur, True)
    assert str(caught.value).startswith("cannot reach Waldur at %s/api/ (waldur_api_url): TLS: certificate verify "
                                        "failed" % tls_waldur.url)


def test_a_ca_path_in_verify_ssl_wins_over_the_environment(tls_waldur, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", tls_waldur.other_ca)
    monkeypatch.setenv("CURL_CA_BUNDLE", tls_waldur.other_ca)
    assert whoami(tls_waldur, tls_waldur.ca_bundle) == "provider-agent"


def test_verify_ssl_must_be_a_boolean_or_a_ca_file(tmp_path):
    from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import parse_verify_ssl

    assert parse_verify_ssl("yes") is True and parse_verify_ssl("False") is False and parse_verify_ssl(None) is True
    with pytest.raises(ValueError, match="verify_ssl must be true, false or the path of a CA bundle file"):
        parse_verify_ssl(str(tmp_path / "nowhere.pem"))


def test_modules_read_waldur_verify_ssl_when_verify_ssl_is_not_given(tls_waldur, monkeypatch, capsys):
    """Precedence for the modules: the task's verify_ssl, else WALDUR_VERIFY_SSL, else true."""
    from ansible.module_utils import _internal
    from tests.unit.compat import patch_module_args

    from ansible_collections.waldur.site_agent.plugins.modules import waldur_resources_info
    from tests.simulators.waldur import presets

    monkeypatch.setattr(_internal, "is_controller", False, raising=False)  # 2.19+
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", tls_waldur.other_ca)

    def run(**extra):
        args = dict(api_url=tls_waldur.url, api_token=presets.PROVIDER_TOKEN, offering_uuid=presets.DO_OFFERING_UUID,
                    unreachable_timeout=1, **extra)
        with patch_module_args(args):
            with pytest.raises(SystemExit):
                waldur_resources_info.main()
        return json.loads(capsys.readouterr().out)

    monkeypatch.setenv("WALDUR_VERIFY_SSL", "false")
    assert run().get("failed") is not True
    assert "certificate verify failed" in run(verify_ssl=True)["msg"]
    monkeypatch.delenv("WALDUR_VERIFY_SSL")
    assert "certificate verify failed" in run()["msg"]
