"""Issue 22 rules 3 and 8 in WaldurClient: a 2xx answer that is not the JSON the call expects
is an error naming the call and what came back (never "nothing"), listings must add up to
X-Result-Count, a 5xx HTML page names its status, and a token with stray whitespace is
refused before any call without showing it."""

from __future__ import annotations

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import secret_text_problem
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import (
    WaldurApiError,
    WaldurClient,
    WaldurUnproven,
)
from tests.unit.plugins.module_utils.test_waldur_api import TOKEN, make_client, server  # noqa: F401  # pylint: disable=unused-import  # (fixture)

HTML = b"<!DOCTYPE html>\n<html><head><title>Down for maintenance</title></head><body>" + TOKEN.encode() + b"</body></html>"
HTML_HEADERS = {"Content-Type": "text/html; charset=utf-8"}
LISTING = "/api/marketplace-provider-resources/"
# The paging itself: a listing the agent does not read (no shape in marketplace.READ_SHAPES).
PAGED = "/api/marketplace-categories/"
ONE = "/api/marketplace-orders/x/"


@pytest.mark.parametrize("reply, wanted, shown", [
    ((200, HTML_HEADERS, HTML), "a JSON object", "text/html; charset=utf-8 '<!DOCTYPE html> <html><head><title>Down"),
    ((200, {"Content-Type": "application/json"}, b'{"uuid": "ab'), "a JSON object", "application/json '{\"uuid\": \"ab'"),
    ((200, {}, ["an", "object", "belongs", "here"]), "a JSON object", "application/json '[\"an\""),
    ((200, {}, None), "a JSON object", "an empty body"),
])
def test_a_read_that_is_not_the_object_it_asked_for_is_an_error(server, reply, wanted, shown):
    server.on(ONE, reply)
    client = make_client(server)
    with pytest.raises(WaldurApiError) as raised:
        client.get("marketplace-orders/x/")
    text = str(raised.value)
    assert text.startswith("Waldur GET %s (HTTP 200) is not proof: answered " % ONE)
    assert text.endswith("instead of %s" % wanted) and shown in text, text
    assert "\n" not in text and TOKEN not in text and "Authorization" not in text
    assert not raised.value.transient  # the same answer would come again: not retried
    assert client.calls == {"reads": 1, "writes": 0, "retries": 0}


@pytest.mark.parametrize("reply", [
    (200, HTML_HEADERS, HTML),
    (200, {"Content-Type": "application/json", "X-Result-Count": "2"}, b'[{"uuid": "a"}, {"uu'),
    (200, {"X-Result-Count": "1"}, {"uuid": "a list belongs here"}),
    (200, {"X-Result-Count": "2"}, ["not", "objects"]),
    (200, {}, None),
])
def test_a_listing_page_that_is_not_a_list_of_objects_is_an_error_not_nothing(server, reply):
    server.on(LISTING, reply)
    client = make_client(server)
    with pytest.raises(WaldurApiError, match=r"^Waldur GET %s \(HTTP 200\) is not proof: answered .* instead of "
                                             r"a JSON list of objects$" % LISTING) as raised:
        client.list("marketplace-provider-resources/")
    assert TOKEN not in str(raised.value)


def _page(base, number, last, items, count):
    links = ['<{base}%s?page=%d>; rel="next"' % (PAGED, number + 1)] if number < last else []
    return (200, {"X-Result-Count": str(count), "Link": ", ".join(links)}, items)


def test_pages_that_do_not_add_up_to_x_result_count_are_an_incomplete_view(server):
    base = server.base
    server.on(PAGED, _page(base, 1, 2, [{"uuid": "a"}, {"uuid": "b"}], 5), _page(base, 2, 2, [{"uuid": "c"}], 5))
    client = make_client(server)
    with pytest.raises(WaldurApiError, match=r"GET %s \(HTTP 200\) is not proof: the listing's pages hold 3 item\(s\) "
                                             r"but its X-Result-Count says 5" % PAGED):
        client.list("marketplace-categories/")


def test_pages_that_add_up_are_taken_and_a_listing_without_a_count_is_not_proof(server):
    base = server.base
    server.on(PAGED, _page(base, 1, 2, [{"uuid": "a"}, {"uuid": "b"}], 3), _page(base, 2, 2, [{"uuid": "c"}], 3))
    server.on("/api/marketplace-offering-files/", (200, {}, [{"uuid": "o"}]))
    client = make_client(server)
    assert [item["uuid"] for item in client.list("marketplace-categories/")] == ["a", "b", "c"]
    # every paged listing of Waldur carries X-Result-Count: without it, whether it is whole is unknown
    with pytest.raises(WaldurUnproven, match="carries no X-Result-Count"):
        client.list("marketplace-offering-files/")
    assert client.get("marketplace-offering-files/", expect=list) == [{"uuid": "o"}]


def test_an_empty_listing_is_taken_only_when_a_second_read_agrees(server):
    """One answer with no items (every count consistent with it: a listing that lies well) is never
    taken for nothing: the first page is read again, and two answers that disagree are not proof."""
    base = server.base
    server.on(PAGED, _page(base, 1, 1, [], 0), _page(base, 1, 1, [{"uuid": "a"}], 1))
    client = make_client(server)
    with pytest.raises(WaldurUnproven, match=r"two reads of the listing disagree \(no items, then 1 of 1\)"):
        client.list("marketplace-categories/")
    assert len(server.requests) == 2

    server.requests.clear()
    server.replies[PAGED] = [_page(base, 1, 1, [], 0)]
    assert client.list("marketplace-categories/") == []
    assert len(server.requests) == 2  # nothing, twice: taken for nothing
    server.requests.clear()
    server.replies[PAGED] = [_page(base, 1, 1, [{"uuid": "a"}], 1)]
    assert [item["uuid"] for item in client.list("marketplace-categories/")] == ["a"]
    assert len(server.requests) == 1  # a listing with items is read once
    server.requests.clear()
    # find: a uuid it misses is read on its own by the caller, so its empty listing is read once
    server.replies[PAGED] = [_page(base, 1, 1, [], 0)]
    assert client.find("marketplace-categories/", ["a", "b"]) == {}
    assert len(server.requests) == 1


def test_writes_may_still_answer_nothing_but_not_html(server):
    server.on("/api/marketplace-orders/x/set_state_done/", (200, {}, None))
    server.on("/api/marketplace-orders/x/approve_by_provider/", (200, HTML_HEADERS, HTML))
    client = make_client(server)
    assert client.post("marketplace-orders/x/set_state_done/") == {}
    with pytest.raises(WaldurApiError, match="POST /api/marketplace-orders/x/approve_by_provider/ "
                                             r"\(HTTP 200\) is not proof: answered text/html"):
        client.post("marketplace-orders/x/approve_by_provider/")


def test_a_5xx_html_page_names_its_status_and_does_not_blame_the_url(server):
    server.on(ONE, (500, HTML_HEADERS, HTML))
    server.on("/api/marketplace-orders/y/", (404, HTML_HEADERS, HTML))
    client = make_client(server, max_retry_seconds=0)
    with pytest.raises(WaldurApiError) as raised:
        client.get("marketplace-orders/x/")
    text = str(raised.value)
    assert text.startswith("Waldur GET %s failed (HTTP 500): Internal Server Error: text/html" % ONE), text
    assert "api_url" not in text and TOKEN not in text
    with pytest.raises(WaldurApiError, match="is api_url the Waldur API"):
        client.get("marketplace-orders/y/")


@pytest.mark.parametrize("token, problem", [
    (TOKEN + "\n", "has a trailing newline; remove the whitespace"),
    (TOKEN + "\r\n", "has a trailing carriage return and newline; remove the whitespace"),
    (" " + TOKEN, "has leading whitespace; remove the whitespace"),
    (TOKEN + " \t", "has trailing whitespace; remove the whitespace"),
    (TOKEN[:5] + "\n" + TOKEN[5:], "has a control character inside (a line break or tab?); remove it"),
])
def test_a_token_with_stray_whitespace_is_refused_before_any_call_without_showing_it(server, token, problem):
    assert secret_text_problem(token) == problem
    with pytest.raises(ValueError) as raised:
        WaldurClient(server.base + "/api/", token)
    assert str(raised.value) == "api_token " + problem
    assert server.requests == []
    assert secret_text_problem(TOKEN) is None and secret_text_problem(None) is None


def test_the_configuration_refuses_every_secret_with_stray_whitespace_by_its_key_path():
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import apply_environment, validate
    from tests.helpers import simulator_site_config

    config = simulator_site_config("https://waldur.example.com", do_url="https://do.example.com",
                                   azure_url="https://azure.example.com")
    del config["offerings"][1]["waldur_api_token"]  # from the environment, as AWX injects it
    config["offerings"][0]["backend_settings"]["token"] = "do-token-secret\r\n"
    config["offerings"][1]["backend_settings"]["client_secret"] = "azure\tsecret"
    apply_environment(config, {"WALDUR_API_TOKEN": TOKEN + "\n"})
    errors, _warnings = validate(config)
    assert errors == [
        "offerings[0].backend_settings.token: has a trailing carriage return and newline; remove the whitespace",
        "offerings[1].waldur_api_token: has a trailing newline; remove the whitespace",
        "offerings[1].backend_settings.client_secret: has a control character inside (a line break or tab?); "
        "remove it",
    ]
    assert not any(secret in error for error in errors for secret in (TOKEN, "do-token-secret", "azure"))


def test_an_echoed_token_is_masked_before_the_body_is_cut(server):
    server.on(ONE, (200, HTML_HEADERS, ("<html>" + "x" * 60 + TOKEN + "</html>").encode()))
    client = make_client(server)
    with pytest.raises(WaldurApiError) as raised:
        client.get("marketplace-orders/x/")
    assert TOKEN[:10] not in str(raised.value) and "x" * 60 + "********" in str(raised.value)


# ---- one table of shapes: every read of Waldur is checked -----------------------------------------

def test_every_waldur_read_the_passes_make_has_a_shape():
    """Each Waldur read the fault matrix's inventory holds (what the passes really read), and the
    reads only a failure makes (the user behind a token, a plan's prices), resolves to a shape in
    marketplace.READ_SHAPES: the client checks it without the caller having to ask."""
    import json
    from pathlib import Path

    from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import read_shape
    from tests.simulators.waldur.simulator import WaldurSimulator

    inventory = json.loads((Path(__file__).parents[3] / "faults" / "reads.json").read_text())
    operations = {read.split(":", 1)[1] for reads in inventory.values() for read in reads if read.startswith("waldur:")}
    operations |= {"users.me", "plans.get"}
    rules = {operation: rule for method, rule, operation, _handler in WaldurSimulator().routes() if method == "GET"}
    unshaped = sorted(operation for operation in operations
                      if read_shape(rules[operation].replace("<uuid>", "d" * 32)) is None)
    assert unshaped == []
    assert read_shape("marketplace-categories/") is None  # an endpoint the agent never reads


def test_a_resource_listing_with_identities_of_another_type_is_not_proof(server):
    """Without a shape from the caller: the report pass once took such a listing for no resources."""
    server.on(LISTING, (200, {"X-Result-Count": "1"}, [{"uuid": 7, "state": 7, "backend_id": "vm-1", "name": "a"}]))
    client = make_client(server)
    with pytest.raises(WaldurUnproven, match=r"resource's uuid is integer, not string"):
        client.list("marketplace-provider-resources/", params={"field": ["uuid", "state", "backend_id", "name"]})
