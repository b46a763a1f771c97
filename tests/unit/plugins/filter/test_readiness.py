"""The judgements of the health and diagnostics playbooks (plugins/filter/readiness.py): each verdict
and report line from the registered reads, word for word as operators and the integration tests read
them."""

import pytest

from ansible_collections.waldur.site_agent.plugins.filter.readiness import (
    FilterModule, diagnostics_reports, health_verdicts, http_failure, malformed)

UUID = "0f8b3c1a1d2e4f609a7b8c9d0e1f2a3b"
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
USER = {"status": 200, "json": {"username": "agent"}}
OFFERING = {"status": 200, "json": {"name": "Cloud", "state": "Active", "type": "Marketplace.Basic",
                                    "components": [{"type": "cpu", "billing_type": "limit"}]}}
HTML = {"status": 200, "content_type": "text/html; charset=utf-8",
        "content": "<html>\n  <body>Down for   maintenance</body></html>"}
REFUSED = {"status": -1, "msg": "Status code was -1 and not [200]: Request failed: "
                                "<urlopen error [Errno 111] Connection refused>"}
ENTRA = ("AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the "
         "client secret value.\r\nTrace ID: 1\r\nCorrelation ID: 2")


def reg(*results):
    return {"results": list(results), "changed": False}


def do_offering(**extra):
    offering = {"name": "DO", "backend_type": "digitalocean", "waldur_api_url": "https://waldur.example.org/api/",
                "waldur_offering_uuid": UUID, "backend_settings": {"token": "t", "api_url": "http://do.test/v2/"}}
    offering.update(extra)
    return offering


def azure_offering(**settings):
    offering = {"name": "AZ", "backend_type": "azure", "waldur_api_url": "https://waldur.example.org",
                "waldur_offering_uuid": UUID,
                "backend_settings": dict({"subscription_id": "sub-1", "tenant_id": "ten", "client_id": "app-1",
                                          "client_secret": "s", "arm_endpoint": "http://arm.test"}, **settings)}
    return offering


# the tests' names of the reads -> (backend, read name) in the ``clouds`` the playbooks gather
READS = {"digitalocean": ("digitalocean", "account"), "droplet_count": ("digitalocean", "droplet_count"),
         "azure_token": ("azure", "token"), "azure_subscription": ("azure", "subscription"),
         "azure_probe": ("azure", "probe"), "azure_quota": ("azure", "quota")}


def clouds(**reads):
    """Each read registered as a loop of one item, under its backend; ``env`` as the controller's
    AZURE_SUBSCRIPTION_ID (a value, not a loop)."""
    gathered = {"azure": {"subscription_env": reads.pop("env", "")}}
    for key, value in reads.items():
        backend, name = READS[key]
        gathered.setdefault(backend, {})[name] = value if "results" in value else reg(value)
    return gathered


def health(offering, identity=None, read=None, **reads):
    identity, read = identity or USER, read or OFFERING
    verdicts = health_verdicts([offering], reg(identity), reg(read), clouds(**reads))
    assert len(verdicts) == 1 and verdicts[0]["offering"] == offering["name"]
    return verdicts[0]


ACCOUNT = {"status": 200, "json": {"account": {"status": "active", "droplet_limit": 25}}}
COUNT = {"status": 200, "json": {"meta": {"total": 3}}}


def test_both_filters_are_exported():
    assert sorted(FilterModule().filters()) == ["diagnostics_reports", "health_verdicts"]


# --- the shared wording ---------------------------------------------------------------------------

def test_a_failure_names_a_refusal_a_status_or_the_cause_of_no_answer():
    assert http_failure({"status": 403}, "Waldur") == "Waldur rejected the credentials (HTTP 403)"
    assert http_failure({"status": "401"}, "X", "here") == "X rejected the credentials (HTTP 401)"
    assert http_failure({"status": 503, "json": {"detail": "busy"}}, "Waldur") == "Waldur answered HTTP 503: busy"
    # the health verdict names the status alone, and where it could not reach with the cause alone
    assert http_failure({"status": 503, "json": {"detail": "busy"}}, "Waldur", "w") == "Waldur answered HTTP 503"
    assert http_failure(REFUSED, "Waldur", "https://w/api/") == \
        "Waldur is unreachable at https://w/api/: Connection refused"
    assert http_failure({"status": -1, "msg": "Status code was -1 and not [200]: Request failed: timed out"},
                        "Waldur", "w") == "Waldur is unreachable at w: timed out"
    assert http_failure(REFUSED, "Waldur") == \
        "Waldur is unreachable: Request failed: <urlopen error [Errno 111] Connection refused>"
    assert http_failure(SKIPPED, "Waldur") == "Waldur is unreachable: no answer"
    assert http_failure({}, "Waldur", "w") == "Waldur is unreachable at w: no answer"


def test_a_malformed_answer_is_named_by_its_type_and_first_characters():
    assert malformed(HTML, "GET /api/users/me/") == (
        "Waldur GET /api/users/me/ answered HTTP 200 with text/html; charset=utf-8 "
        "'<html> <body>Down for maintenance</body></html>' instead of a JSON object")
    assert malformed({"status": 200, "content": "x" * 100}, "GET /", "a list") == (
        "Waldur GET / answered HTTP 200 with no content type '%s' instead of a list" % ("x" * 80))


# --- health: Waldur -------------------------------------------------------------------------------

def test_a_ready_digitalocean_offering_lists_what_it_has_and_its_headroom():
    verdict = health(do_offering(), digitalocean=ACCOUNT, droplet_count=COUNT)
    assert verdict == {"offering": "DO", "ready": True, "reason": (
        "Waldur answers as agent, offering Cloud (Active), DigitalOcean account active, droplets 3 of 25 used")}


def test_a_token_waldur_rejects():
    verdict = health(do_offering(), identity={"status": 401}, read=SKIPPED)
    assert verdict == {"offering": "DO", "ready": False, "reason": "Waldur rejected the token (HTTP 401)"}


@pytest.mark.parametrize("identity, answered", [
    ({"status": 404}, "HTTP 404"),
    ({"status": 200, "json": {"detail": "hello"}}, "JSON that is not a Waldur user"),
])
def test_another_service_at_the_api_root(identity, answered):
    verdict = health(do_offering(waldur_api_url="https://waldur.example.org/prefix/"), identity=identity,
                     read=SKIPPED)
    assert verdict["reason"] == (
        "waldur_api_url https://waldur.example.org/prefix/ does not answer as the Waldur API: GET /prefix/api/users/me/ "
        "answered %s; set it to the API root of Waldur" % answered)


def test_a_waldur_without_an_answer_and_one_with_another_status():
    assert health(do_offering(), identity=REFUSED, read=SKIPPED)["reason"] == (
        "Waldur is unreachable at https://waldur.example.org/api/ (waldur_api_url): Connection refused")
    assert health(do_offering(), identity={"status": 503}, read=SKIPPED)["reason"] == "Waldur answered HTTP 503"


def test_a_web_page_instead_of_the_user():
    assert health(do_offering(), identity=HTML, read=SKIPPED)["reason"] == (
        "Waldur GET /api/users/me/ answered HTTP 200 with text/html; charset=utf-8 "
        "'<html> <body>Down for maintenance</body></html>' instead of a JSON object; "
        "is waldur_api_url https://waldur.example.org/api/ the Waldur API?")


def test_an_offering_unknown_to_the_token_unreadable_or_not_json():
    assert health(do_offering(), read={"status": 404})["reason"] == (
        "offering %s (waldur_offering_uuid) is not an offering of this token's provider in Waldur (HTTP 404): check "
        "the UUID and that the token's user manages the offering" % UUID)
    assert health(do_offering(), read={"status": 500})["reason"] == (
        "reading offering %s: Waldur answered HTTP 500" % UUID)
    assert health(do_offering(), read=HTML)["reason"].startswith(
        "Waldur GET /api/marketplace-provider-offerings/%s/ answered HTTP 200 with text/html" % UUID)


def test_an_offering_that_cannot_build_a_machine():
    offering = do_offering(order_processing_backend="digitalocean")
    read = {"status": 200, "json": {"name": "Cloud", "state": "Active", "options": {"order": [], "options": {}}}}
    verdict = health(offering, read=read, digitalocean=ACCOUNT, droplet_count=COUNT)
    assert not verdict["ready"]
    assert verdict["reason"].startswith("the offering cannot build a machine: ")
    assert "backend_settings.default_region is not set" in verdict["reason"]
    assert "; " in verdict["reason"]  # every gap, joined


# --- health: DigitalOcean ---------------------------------------------------------------------------

def test_a_digitalocean_token_refused_names_the_setting():
    verdict = health(do_offering(), digitalocean={"status": 401}, droplet_count=SKIPPED)
    assert verdict["reason"] == "DigitalOcean rejected the token (HTTP 401); check backend_settings.token"
    assert health(do_offering(), digitalocean=REFUSED, droplet_count=SKIPPED)["reason"] == (
        "DigitalOcean is unreachable at http://do.test/v2/: Connection refused")


def test_droplet_headroom_not_read_is_a_note_never_a_fault():
    no_limit = {"status": 200, "json": {"account": {"status": "active"}}}
    verdict = health(do_offering(), digitalocean=no_limit, droplet_count=COUNT)
    assert verdict["ready"] and verdict["reason"].endswith(
        "DigitalOcean account active, droplet headroom not read (no droplet_limit in the account)")
    verdict = health(do_offering(), digitalocean=ACCOUNT, droplet_count={"status": 500})
    assert verdict["ready"] and verdict["reason"].endswith("droplet headroom not read (GET droplets answered HTTP 500)")
    verdict = health(do_offering(), digitalocean=ACCOUNT, droplet_count=SKIPPED)
    assert verdict["reason"].endswith("droplet headroom not read (GET droplets answered HTTP nothing)")


# --- health: Azure ------------------------------------------------------------------------------------

def azure(offering=None, token=None, subscription=None, probe=None, quota=None, env=""):
    return health(offering or azure_offering(), azure_token=token or {"status": 200, "json": {"access_token": "x"}},
                  azure_subscription=subscription or SKIPPED, azure_probe=probe or SKIPPED,
                  azure_quota=quota or SKIPPED, env=env)


SUBSCRIPTION = {"status": 200, "json": {"displayName": "Prod", "state": "Enabled", "subscriptionId": "sub-1"}}


def test_a_ready_azure_offering_and_its_vcpu_headroom():
    verdict = azure(subscription=SUBSCRIPTION, quota={"headroom": "vCPUs 4 of 10 used in westeurope"})
    assert verdict == {"offering": "AZ", "ready": True, "reason": (
        "Waldur answers as agent, offering Cloud (Active), Azure subscription Prod Enabled, "
        "vCPUs 4 of 10 used in westeurope")}
    verdict = azure(subscription=SUBSCRIPTION, quota={"failed": True, "msg": "quota\n  read   failed " + "word " * 100})
    assert verdict["ready"]
    note = verdict["reason"].split(", ")[-1]
    assert note.startswith("vCPU headroom not read: quota read failed word word") and len(note) == len(
        "vCPU headroom not read: ") + 200


@pytest.mark.parametrize("code, key", [("AADSTS7000215", "client_secret"), ("AADSTS7000222", "client_secret"),
                                       ("AADSTS700016", "client_id"), ("AADSTS90002", "tenant_id"),
                                       ("AADSTS900023", "tenant_id")])
def test_an_entra_refusal_names_the_backend_settings_key(code, key):
    token = {"status": 401, "json": {"error_description": code + ": refused.\nTrace ID: 1"}}
    assert azure(token=token)["reason"] == (
        "Azure AD refused the service principal: %s: refused.; check backend_settings.%s" % (code, key))


def test_an_entra_refusal_cut_at_its_first_line_and_one_without_a_code():
    assert azure(token={"status": 401, "json": {"error_description": ENTRA}})["reason"] == (
        "Azure AD refused the service principal: AADSTS7000215: Invalid client secret provided. Ensure the secret "
        "being sent in the request is the client secret value.; check backend_settings.client_secret")
    assert azure(token={"status": 400, "json": {"error_description": "AADSTS50000: other"}})["reason"] == (
        "Azure AD refused the service principal: AADSTS50000: other")
    assert azure(token=REFUSED)["reason"] == (
        "Azure AD refused the service principal: Azure AD is unreachable at https://login.microsoftonline.com: "
        "Connection refused")


def test_azure_subscription_id_of_the_environment_must_be_the_offerings():
    verdict = azure(subscription=SUBSCRIPTION, env=" other-sub ")
    assert verdict["reason"] == (
        "subscription_id is sub-1 but AZURE_SUBSCRIPTION_ID in the environment names other-sub: an offering works "
        "only in its own subscription, so nothing is done; make AZURE_SUBSCRIPTION_ID the same or remove it")
    assert azure(subscription=SUBSCRIPTION, env="SUB-1")["ready"]


def test_a_disabled_subscription_is_not_ready():
    disabled = {"status": 200, "json": {"displayName": "Prod", "state": "Disabled"}}
    assert azure(subscription=disabled)["reason"] == (
        "subscription_id sub-1 (Prod) is Disabled: ARM creates nothing in it; enable it, or check "
        "backend_settings.subscription_id")


@pytest.mark.parametrize("answer, said", [
    ({"status": 404, "json": {"error": {"code": "SubscriptionNotFound"}}},
     "ARM answered SubscriptionNotFound (HTTP 404) to service principal app-1 (auth_source auto): no such "
     "subscription, or no role on it; check backend_settings.subscription_id"),
    ({"status": 403, "json": {}},
     "ARM answered (HTTP 403) to service principal app-1 (auth_source auto): no role that may read it; give the "
     "identity Contributor on the subscription"),
    ({"status": 401, "json": {"error": {"code": "InvalidAuthenticationTokenTenant"}}},
     "ARM answered InvalidAuthenticationTokenTenant (HTTP 401) to service principal app-1 (auth_source auto): a "
     "subscription of another tenant; check backend_settings.subscription_id and tenant_id"),
    # ARM's own code comes before the status: a 403 of another tenant is not a missing role
    ({"status": 403, "json": {"error": {"code": "InvalidAuthenticationTokenTenant"}}},
     "ARM answered InvalidAuthenticationTokenTenant (HTTP 403) to service principal app-1 (auth_source auto): a "
     "subscription of another tenant; check backend_settings.subscription_id and tenant_id"),
    ({"status": 404, "content": "<html>proxy</html>"},
     "could not be read as service principal app-1 (auth_source auto): Azure Resource Manager answered HTTP 404"),
])
def test_arm_refusing_the_subscription_says_what_to_fix(answer, said):
    verdict = azure(subscription=answer)
    assert not verdict["ready"] and verdict["reason"] == "subscription_id sub-1" + (" " if said[0] == "c" else ": ") \
        + said


def test_another_sign_in_is_judged_by_the_probe_of_the_passes():
    probe = {"subscription": {"display_name": "Prod", "state": ""}, "azure_sign_in": "managed identity"}
    verdict = azure(offering=azure_offering(client_secret="", auth_source="msi"), token=SKIPPED, probe=probe)
    assert verdict["reason"] == ("Waldur answers as agent, offering Cloud (Active), Azure subscription Prod ? "
                                 "(signed in as managed identity)")
    failed = {"failed": True, "msg": "signing in with the managed identity: no endpoint"}
    verdict = azure(offering=azure_offering(client_secret=""), token=SKIPPED, probe=failed)
    assert verdict == {"offering": "AZ", "ready": False, "reason": "signing in with the managed identity: no endpoint"}
    assert azure(token=SKIPPED, probe={"failed": True})["reason"] == "the Azure sign-in failed"


def test_the_first_problem_wins_and_later_reads_are_not_judged():
    verdict = health(azure_offering(), identity={"status": 401}, read=SKIPPED, azure_token=SKIPPED,
                     azure_subscription=SKIPPED, azure_probe=SKIPPED, azure_quota={"headroom": "vCPUs"})
    assert verdict["reason"] == "Waldur rejected the token (HTTP 401)"


def test_every_offering_in_order():
    verdicts = health_verdicts([do_offering(name="A"), do_offering(name="B")], reg(USER, {"status": 401}),
                               reg(OFFERING, SKIPPED),
                               clouds(digitalocean=reg(ACCOUNT, SKIPPED), droplet_count=reg(COUNT, SKIPPED)))
    assert [(verdict["offering"], verdict["ready"]) for verdict in verdicts] == [("A", True), ("B", False)]
    assert health_verdicts([], reg(), reg()) == []


# --- diagnostics --------------------------------------------------------------------------------------

COUNTS = [{"label": "orders pending-provider", "path": "marketplace-orders/", "state": "pending-provider"},
          {"label": "resources Erred", "path": "marketplace-provider-resources/", "state": "Erred"}]


def report(offering, identity=None, read=None, counts=({"status": 200, "json": [], "x_result_count": "0"},) * 2,
           **reads):
    identity, read = identity or USER, read or OFFERING
    reports = diagnostics_reports([offering], COUNTS, reg(identity), reg(read), reg(*counts), clouds(**reads))
    assert len(reports) == 1 and reports[0]["offering"] == offering["name"]
    return reports[0]


def test_a_report_without_problems():
    offering = do_offering(backend_components={"cpu": {}})
    staff = {"status": 200, "json": {"username": "agent", "is_staff": True}}
    assert report(offering, identity=staff, digitalocean=ACCOUNT) == {"offering": "DO", "lines": [
        "offering UUID %s, backend digitalocean" % UUID,
        "Waldur https://waldur.example.org/api/: reachable, the agent is user agent (staff)",
        "offering in Waldur: Cloud, state Active, type Marketplace.Basic",
        "components in Waldur: cpu (limit)",
        "orders pending-provider: 0, resources Erred: 0",
        "DigitalOcean http://do.test/v2/: reachable, account active, droplet limit 25",
    ], "problems": [], "warnings": []}


def test_components_waldur_lacks_and_create_gaps_are_problems():
    offering = do_offering(backend_components={"cpu": {}, "ram": {}, "disk": {}},
                           order_processing_backend="digitalocean")
    read = {"status": 200, "json": {"name": "Cloud", "state": "Active", "type": "T", "components": [],
                                    "options": {"order": [], "options": {}}}}
    result = report(offering, read=read, digitalocean=ACCOUNT)
    assert "components in Waldur: none" in result["lines"]
    assert ("components of the configuration missing in Waldur: cpu, ram, disk (run waldur.site_agent.load_components)"
            in result["lines"])
    assert result["problems"][0] == "components missing in Waldur: cpu, ram, disk"
    gaps = result["problems"][1:]
    assert gaps and all(problem.startswith("the offering cannot build a machine: ") for problem in gaps)
    assert [line for line in result["lines"] if line.startswith("cannot build a machine: ")] == [
        "cannot build a machine: " + problem.split(": ", 1)[1] for problem in gaps]


def test_an_unreadable_or_malformed_offering():
    result = report(do_offering(), read={"status": 404, "json": {"detail": "Not found."}}, digitalocean=ACCOUNT)
    assert "offering in Waldur: Waldur answered HTTP 404: Not found." in result["lines"]
    assert result["problems"] == ["offering not readable: Waldur answered HTTP 404: Not found."]
    result = report(do_offering(), read=HTML, digitalocean=ACCOUNT)
    assert result["problems"] == ["offering not readable: Waldur GET /api/marketplace-provider-offerings/%s/ answered "
                                  "HTTP 200 with text/html; charset=utf-8 '<html> <body>Down for maintenance</body>"
                                  "</html>' instead of a JSON object" % UUID]


def test_counts_malformed_failed_and_erred_resources_to_look_at():
    counts = ({"status": 200, "content_type": "application/json", "content": "{}", "json": {}, "x_result_count": "1"},
              {"status": 200, "json": [], "x_result_count": "2"})
    result = report(do_offering(), counts=counts, digitalocean=ACCOUNT)
    wrong = ("Waldur GET /api/marketplace-orders/ answered HTTP 200 with application/json '{}' instead of a JSON list "
             "with X-Result-Count")
    assert "orders pending-provider: unknown (%s), resources Erred: 2" % wrong in result["lines"]
    assert result["problems"] == ["orders pending-provider unknown: " + wrong]
    assert result["warnings"] == ["2 resource(s) Erred in Waldur (Waldur gave up on them; a machine may still run "
                                  "behind one: waldur.site_agent.audit names them)"]
    no_header = ({"status": 200, "json": []}, {"status": 502})
    result = report(do_offering(), counts=no_header, digitalocean=ACCOUNT)
    assert result["problems"][0].startswith("orders pending-provider unknown: Waldur GET /api/marketplace-orders/")
    assert "resources Erred: unknown (Waldur answered HTTP 502)" in result["lines"][-2]
    assert result["warnings"] == []


@pytest.mark.parametrize("identity, problem", [
    ({"status": 401}, "Waldur rejected the credentials (HTTP 401)"),
    (REFUSED, "Waldur is unreachable: Request failed: <urlopen error [Errno 111] Connection refused>"),
    ({"status": 404}, "waldur_api_url https://waldur.example.org/api/ does not answer as the Waldur API: GET "
                      "/api/users/me/ answered HTTP 404; set it to the API root of Waldur"),
    (HTML, "Waldur GET /api/users/me/ answered HTTP 200 with text/html; charset=utf-8 '<html> <body>Down for "
           "maintenance</body></html>' instead of a JSON object; is waldur_api_url https://waldur.example.org/api/ "
           "the Waldur API?"),
])
def test_a_waldur_that_does_not_answer_as_waldur_reads_nothing_more(identity, problem):
    result = report(do_offering(), identity=identity, read=SKIPPED, counts=(SKIPPED, SKIPPED), digitalocean=ACCOUNT)
    assert result["lines"][1] == "Waldur https://waldur.example.org/api/: " + problem
    assert result["problems"] == [problem]
    assert len(result["lines"]) == 3  # the UUID, Waldur, the cloud: no offering, no counts


def test_digitalocean_refusing_the_token():
    result = report(do_offering(), digitalocean={"status": 401})
    assert result["lines"][-1] == ("DigitalOcean http://do.test/v2/: DigitalOcean rejected the credentials (HTTP 401); "
                                   "check backend_settings.token")
    assert result["problems"] == ["DigitalOcean rejected the credentials (HTTP 401); check backend_settings.token"]


def test_azure_reports():
    token = {"status": 200, "json": {"access_token": "x"}}
    result = report(azure_offering(), azure_token=token, azure_subscription=SUBSCRIPTION)
    assert result["lines"][-1] == "Azure http://arm.test: reachable, subscription Prod (sub-1) Enabled"
    assert result["problems"] == []
    result = report(azure_offering(), azure_token=token, azure_subscription={"status": 403})
    assert result["problems"] == ["Azure Resource Manager rejected the credentials (HTTP 403)"]
    assert result["lines"][-1] == "Azure http://arm.test: Azure Resource Manager rejected the credentials (HTTP 403)"
    result = report(azure_offering(client_secret="", auth_source="msi"))
    assert result["lines"][-1] == ("Azure: signs in without a client secret (auth_source msi); not checked here, the "
                                   "order pass probes it")
    assert result["problems"] == []


def test_azure_sign_in_refusals_in_the_report_name_the_key():
    result = report(azure_offering(), azure_token={"status": 401, "json": {"error_description": ENTRA}},
                    azure_subscription=SKIPPED)
    assert result["lines"][-1] == (
        "Azure AD: no token for the service principal: AADSTS7000215: Invalid client secret provided. Ensure the secret "
        "being sent in the request is the client secret value.; check backend_settings.client_secret")
    assert result["problems"] == ["Azure AD refused the service principal; check backend_settings.client_secret"]
    result = report(azure_offering(), azure_token={"status": 400, "json": {"error_description": "AADSTS90002: no "
                                                                                                "tenant"}})
    assert result["problems"] == ["Azure AD refused the service principal; check backend_settings.tenant_id"]
    result = report(azure_offering(), azure_token=REFUSED)
    assert result["lines"][-1].startswith("Azure AD: no token for the service principal: Azure AD is unreachable: ")
    assert result["problems"] == ["Azure AD refused the service principal"]
