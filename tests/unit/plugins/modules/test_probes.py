"""The first reads of a pass: waldur_offering_info (the offering is this provider's) and
do_account_info (the DigitalOcean token works), run in-process against the simulators."""

from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.waldur.site_agent.plugins.modules import do_account_info, waldur_offering_info
from tests.simulators.digitalocean import presets as DO
from tests.simulators.waldur import presets as W


def run(module, args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def offering(waldur_sim, capsys, offering_uuid, token=W.PROVIDER_TOKEN):
    return run(waldur_offering_info, {"api_url": waldur_sim.url, "api_token": token, "offering_uuid": offering_uuid,
                                      "max_retry_seconds": 0.5}, capsys)


def test_the_providers_offering_is_read_once(waldur_sim, capsys):
    dashed = "-".join((W.DO_OFFERING_UUID[:8], W.DO_OFFERING_UUID[8:12], W.DO_OFFERING_UUID[12:16],
                       W.DO_OFFERING_UUID[16:20], W.DO_OFFERING_UUID[20:]))
    out = offering(waldur_sim, capsys, dashed)
    assert out["offering"] == {"uuid": W.DO_OFFERING_UUID, "name": "DigitalOcean droplets", "type": "Marketplace.Slurm",
                               "state": "Active", "customer_uuid": W.PROVIDER_CUSTOMER_UUID,
                               "customer_name": "Provider Org", "order_form": []}
    assert out["changed"] is False and out["api_calls"]["reads"] == 1
    assert [call["operation"] for call in waldur_sim.app.calls] == ["offering.get"]


@pytest.mark.parametrize("case", ["unknown", "another provider's"])
def test_an_offering_this_token_does_not_provide_fails_naming_the_uuid(waldur_sim, capsys, case):
    wanted = "9" * 32 if case == "unknown" else W.DO_OFFERING_UUID
    token = W.PROVIDER_TOKEN if case == "unknown" else W.CONSUMER_TOKEN
    out = offering(waldur_sim, capsys, wanted, token=token)
    assert out["failed"] is True
    assert out["msg"] == ("offering %s: Waldur shows no such offering to this token (HTTP 404); check "
                          "waldur_offering_uuid, and that waldur_api_token belongs to a manager of the organisation "
                          "providing it" % wanted)


def test_a_rejected_token_is_named(waldur_sim, capsys):
    out = offering(waldur_sim, capsys, W.DO_OFFERING_UUID, token="not-a-token")
    assert out["failed"] is True
    assert out["msg"] == "offering %s: Waldur rejected waldur_api_token (HTTP 401: Invalid token.)" % W.DO_OFFERING_UUID
    assert "not-a-token" not in json.dumps(out)


def account(do_sim, capsys, token=DO.DO_TOKEN):
    return run(do_account_info, {"token": token, "api_url": do_sim.url + "/v2/", "max_retry_seconds": 0.5}, capsys)


def test_a_working_token_reads_the_account_once(do_sim, capsys):
    out = account(do_sim, capsys)
    assert out["account"]["status"] == "active" and out["account"]["droplet_limit"] == 100
    assert "email" not in out["account"]
    assert out["api_calls"] == 1 and [call["operation"] for call in do_sim.app.calls] == ["account.get"]


def test_a_rejected_token_or_a_failing_api_fails_the_probe(do_sim, capsys):
    out = account(do_sim, capsys, token="dop_v1_" + "f" * 64)
    assert out["failed"] is True and "f" * 64 not in json.dumps(out)
    assert out["msg"] == ("DigitalOcean cannot be worked with: DigitalOcean rejected the token (401 Unable to "
                          "authenticate you): GET /v2/account/; check the offering's backend_settings.token")
    do_sim.app.add_fault("account.get", status=503, times=-1)
    out = account(do_sim, capsys)
    assert out["failed"] is True
    assert out["msg"].startswith("DigitalOcean cannot be worked with: DigitalOcean server error after")


# ---- a waldur_api_url that is not the Waldur API is named as such (issue 24) -----------------------

def test_a_url_of_another_service_names_waldur_api_url_not_the_offering(waldur_sim, do_sim, capsys):
    """Another service (here DigitalOcean's API) answers the offering's read with a 404 of its own."""
    out = run(waldur_offering_info, {"api_url": do_sim.url + "/api/", "api_token": W.PROVIDER_TOKEN,
                                     "offering_uuid": W.DO_OFFERING_UUID, "max_retry_seconds": 0.5}, capsys)
    assert out["failed"] is True
    assert out["msg"].startswith("offering %s could not be read, and waldur_api_url %s/api/ does not answer as the "
                                 "Waldur API: Waldur GET /api/users/me/ failed (HTTP 404)" % (W.DO_OFFERING_UUID, do_sim.url))
    assert out["msg"].endswith("set waldur_api_url to the API root of Waldur (for example https://waldur.example.com/api/)")
    assert "waldur_offering_uuid" not in out["msg"] and W.PROVIDER_TOKEN not in json.dumps(out)


@pytest.mark.parametrize("answer", ["html", "json"])
def test_a_web_page_or_foreign_json_at_the_url_names_waldur_api_url(waldur_sim, capsys, answer):
    for operation in ("offering.get", "users.me"):
        if answer == "html":  # a web site's page, as a proxy or a CMS answers any path
            waldur_sim.app.add_fault(operation, kind="html")
        else:
            waldur_sim.app.add_fault(operation, status=200, body={"status": "ok", "version": "2.4.1"})
    out = offering(waldur_sim, capsys, W.DO_OFFERING_UUID)
    waldur_sim.app.exchanges.clear()  # not Waldur's answers, on purpose
    assert out["failed"] is True
    assert "does not answer as the Waldur API" in out["msg"] and "waldur_api_url %s" % waldur_sim.url in out["msg"]
    assert ("text/html" if answer == "html" else "JSON of another shape (Waldur user has no uuid)") in out["msg"]


def test_a_waldur_that_does_not_show_the_offering_still_blames_the_uuid_after_one_read_of_the_user(waldur_sim, capsys):
    out = offering(waldur_sim, capsys, "9" * 32)
    assert "Waldur shows no such offering to this token (HTTP 404)" in out["msg"]
    assert [call["operation"] for call in waldur_sim.app.calls] == ["offering.get", "users.me"]


def test_a_rejected_token_from_the_environment_names_its_variable(do_sim, capsys, monkeypatch):
    token = "dop_v1_" + "e" * 64
    monkeypatch.setenv("DO_API_TOKEN", token)
    out = account(do_sim, capsys, token=token)
    assert out["msg"].endswith("; check the offering's backend_settings.token (taken from the environment variable "
                               "DO_API_TOKEN)")
    assert token not in json.dumps(out)
