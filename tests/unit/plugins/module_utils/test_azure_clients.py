"""The Azure client layer: lazy clients, credential options, errors, retries, module options.

The SDK pipeline runs for real here; only the HTTP transport is scripted.
"""

import json
import threading
from types import SimpleNamespace

import pytest
import requests
from azure.core.credentials import AccessToken
from azure.core.pipeline.transport import HttpTransport
from azure.core.rest._requests_basic import RestRequestsTransportResponse

from ansible_collections.waldur.site_agent.plugins.module_utils.azure import clients as azure_clients
from ansible_collections.waldur.site_agent.plugins.module_utils.azure import policies, sdk
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import (
    AzureClients,
    azure_argument_spec,
    clients_from_module,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.facts import (
    SizeCatalog,
    power_state,
    size_figures,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.sdk import translate_error

SECRET = "never-print-this-secret"
ARM = "https://arm.test"


class ScriptedTransport(HttpTransport):
    """Answers requests from a script of ``(method, status, headers, body)``; records them."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        self.lock = threading.Lock()

    def send(self, request, **kwargs):
        with self.lock:
            self.requests.append((request.method, request.url))
            method, status, headers, body = self.script.pop(0)
        assert method == request.method, "expected %s, got %s %s" % (method, request.method, request.url)
        response = requests.Response()
        response.status_code = status
        response.headers.update(headers or {})
        if body is not None:
            response.headers.setdefault("Content-Type", "application/json")
            response._content = json.dumps(body).encode()
        else:
            response._content = b""
        response.url = request.url
        response.request = requests.Request(request.method, request.url).prepare()
        response._content_consumed = True
        rest_response = RestRequestsTransportResponse(request=request, internal_response=response)
        rest_response.read()
        return rest_response

    def open(self):
        pass

    def close(self):
        pass

    def __exit__(self, *args):
        pass

    def sleep(self, duration):
        pass


class FakeCredential:
    def get_token(self, *scopes, **kwargs):
        return AccessToken("token", 4102444800)


class ScriptedClients(AzureClients):
    def __init__(self, script, **kwargs):
        super().__init__("sub-1", "tenant-1", "client-1", SECRET, arm_endpoint=ARM, polling_interval=0, **kwargs)
        self._credential = FakeCredential()
        self.transport = ScriptedTransport(script)

    def client_options(self):
        options = super().client_options()
        options["transport"] = self.transport
        return options


def arm_error(code, message):
    return {"error": {"code": code, "message": message}}


def new_clients(**kwargs):
    params = dict(subscription_id="sub-1", tenant="tenant-1", client_id="client-1", secret=SECRET)
    params.update(kwargs)
    return AzureClients(**params)


# ---- lazy construction ----------------------------------------------------------------------

def test_nothing_is_built_until_a_client_is_used():
    clients = new_clients()
    assert clients._credential is None and clients._clients == {}
    network = clients.network
    assert set(clients._clients) == {"network"}
    assert clients.network is network
    assert clients.compute._config.credential is network._config.credential is clients.credential


def test_each_client_is_built_once_under_concurrency(monkeypatch):
    built = []

    def factory(credential, subscription_id, **options):
        built.append(options)
        return object()

    monkeypatch.setattr(sdk, "ComputeManagementClient", factory)
    clients = new_clients()
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(clients.compute)) for dummy in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1 and len(set(map(id, seen))) == 1


def test_one_credential_with_public_cloud_options(monkeypatch):
    made = []

    def credential(tenant, client_id, secret, **options):
        made.append((tenant, client_id, secret, options))
        return FakeCredential()

    monkeypatch.setattr(sdk, "ClientSecretCredential", credential)
    clients = new_clients()
    clients.network
    clients.compute
    clients.resource
    assert len(made) == 1
    tenant, client_id, secret, options = made[0]
    assert (tenant, client_id, secret) == ("tenant-1", "client-1", SECRET)
    assert options == {"authority": "https://login.microsoftonline.com"}
    assert "credential_scopes" not in clients.client_options()


def test_instance_discovery_is_disabled_only_off_the_public_cloud(monkeypatch):
    made = []
    monkeypatch.setattr(sdk, "ClientSecretCredential",
                        lambda *args, **options: made.append(options) or FakeCredential())
    clients = new_clients(authority_host="https://localhost:8443/", arm_endpoint="https://localhost:8443")
    clients.credential
    assert made == [{"authority": "https://localhost:8443", "disable_instance_discovery": True}]
    assert clients.client_options()["credential_scopes"] == ["https://localhost:8443/.default"]
    assert clients.resource._config.credential_scopes == ["https://localhost:8443/.default"]


def test_client_options_carry_endpoint_polling_and_ca(monkeypatch):
    clients = new_clients(arm_endpoint="https://localhost:9/", polling_interval=0.5, ca_bundle="/tmp/ca.pem")
    options = clients.client_options()
    assert options["base_url"] == "https://localhost:9"
    assert options["polling_interval"] == 0.5
    assert options["connection_verify"] == "/tmp/ca.pem"
    assert clients.credential_options()["connection_verify"] == "/tmp/ca.pem"
    network = clients.network
    assert network._config.polling_interval == 0.5


def test_every_arm_client_waits_its_timeout_not_azure_cores_five_minutes():
    clients = new_clients(timeout=7.5)
    assert new_clients().timeout == 60.0
    for client in (clients.network, clients.compute, clients.resource, clients.json_pipeline):
        pipeline = client._client._pipeline if hasattr(client, "_client") else client._pipeline
        transport = pipeline._transport
        while not hasattr(transport, "connection_config"):  # the SDK wraps its transport
            transport = transport._transport
        assert (transport.connection_config.timeout, transport.connection_config.read_timeout) == (7.5, 7.5)


def test_the_real_credential_gets_the_custom_authority():
    clients = new_clients(authority_host="https://localhost:8443")
    assert clients.credential._instance_discovery is False


# ---- module options ---------------------------------------------------------------------------

class FakeModule:
    def __init__(self, params):
        self.params = params
        self.warnings = []

    def warn(self, warning):
        self.warnings.append(warning)

    def fail_json(self, **kwargs):
        raise SystemExit(kwargs)


def module_params(**overrides):
    params = dict(subscription_id="sub-1", tenant="tenant-1", client_id="client-1", secret=SECRET,
                  arm_endpoint="https://management.azure.com", authority_host="https://login.microsoftonline.com",
                  polling_interval=5, timeout=60)
    params.update(overrides)
    return params


def test_argument_spec_matches_the_contract():
    """azure.azcollection's option names and variables, then azure-identity's and AKS's."""
    spec = azure_argument_spec()
    assert spec["subscription_id"]["fallback"][1] == ["AZURE_SUBSCRIPTION_ID"]
    assert spec["tenant"]["aliases"] == ["tenant_id"]
    assert spec["tenant"]["fallback"][1] == ["AZURE_TENANT", "AZURE_TENANT_ID"]
    assert spec["client_id"]["fallback"][1] == ["AZURE_CLIENT_ID"]
    assert spec["secret"]["no_log"] is True and spec["secret"]["aliases"] == ["client_secret"]
    assert spec["secret"]["fallback"][1] == ["AZURE_SECRET"]
    assert spec["auth_source"]["choices"] == ["auto", "cli", "credential_file", "env", "msi"]
    assert spec["auth_source"]["default"] == "auto"
    assert spec["auth_source"]["fallback"][1] == ["ANSIBLE_AZURE_AUTH_SOURCE", "AZURE_AUTH_SOURCE"]
    assert spec["profile"]["fallback"][1] == ["AZURE_PROFILE"]
    assert spec["cloud_environment"]["default"] == "AzureCloud"
    assert spec["cloud_environment"]["fallback"][1] == ["AZURE_CLOUD_ENVIRONMENT"]
    assert spec["x509_certificate_path"]["fallback"][1] == ["AZURE_X509_CERTIFICATE_PATH",
                                                            "AZURE_CLIENT_CERTIFICATE_PATH"]
    assert spec["x509_certificate"]["no_log"] is True and spec["x509_certificate_password"]["no_log"] is True
    assert spec["federated_token_file"]["fallback"][1] == ["AZURE_FEDERATED_TOKEN_FILE"]
    # no default: cloud_environment supplies the endpoints unless these are given
    assert "default" not in spec["arm_endpoint"] and "default" not in spec["authority_host"]
    assert spec["arm_endpoint"]["fallback"][1] == ["AZURE_ARM_ENDPOINT"]
    assert spec["authority_host"]["fallback"][1] == ["AZURE_AUTHORITY_HOST"]
    assert spec["polling_interval"]["default"] == 5
    assert spec["timeout"] == {"type": "float", "default": 60.0}


def test_missing_credentials_are_all_named():
    with pytest.raises(SystemExit) as failure:
        clients_from_module(FakeModule(module_params(subscription_id=None, tenant="", secret=None)))
    msg = failure.value.args[0]["msg"]
    assert "subscription_id (env AZURE_SUBSCRIPTION_ID)" in msg
    assert "tenant (env AZURE_TENANT or AZURE_TENANT_ID)" in msg
    assert "secret (env AZURE_SECRET)" in msg
    assert "client_id" not in msg


def test_ca_bundle_comes_from_requests_ca_bundle(monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ca.pem")
    clients = clients_from_module(FakeModule(module_params()))
    assert clients.client_options()["connection_verify"] == "/etc/ca.pem"
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    assert "connection_verify" not in clients_from_module(FakeModule(module_params())).client_options()


# ---- errors -----------------------------------------------------------------------------------

def test_404_is_not_found_and_read_gives_none():
    body = arm_error("ResourceNotFound", "The Resource 'Microsoft.Network/networkInterfaces/nicweb' was not found.")
    clients = ScriptedClients([("GET", 404, {}, body), ("GET", 404, {}, body)])
    assert clients.read("reading nic", clients.network.network_interfaces.get, "g", "nicweb") is None
    with pytest.raises(AzureError) as raised:
        clients.call("reading nic", clients.network.network_interfaces.get, "g", "nicweb")
    error = raised.value
    assert error.not_found and error.status == 404 and error.code == "ResourceNotFound"
    assert str(error).startswith("reading nic: The Resource 'Microsoft.Network/networkInterfaces/nicweb'")
    assert "HTTP 404" in str(error)


def test_other_errors_keep_status_code_and_message():
    clients = ScriptedClients([("PUT", 400, {}, arm_error("InvalidParameter", "Bad vmSize."))])
    with pytest.raises(AzureError) as raised:
        clients.read("creating vm", clients.resource.resource_groups.create_or_update, "g", {"location": "x"})
    assert (raised.value.status, raised.value.code) == (400, "InvalidParameter")
    assert "Bad vmSize." in str(raised.value) and not raised.value.not_found


def test_errors_raised_while_waiting_on_a_poller_are_translated():
    operation = ARM + "/subscriptions/sub-1/providers/Microsoft.Network/locations/westeurope/operations/op1"
    clients = ScriptedClients([
        ("PUT", 201, {"Azure-AsyncOperation": operation},
         {"name": "netweb", "properties": {"provisioningState": "Updating"}}),
        ("GET", 200, {}, {"status": "Failed", "error": {"code": "InternalServerError", "message": "boom"}}),
    ])
    with pytest.raises(AzureError) as raised:
        clients.call("creating virtual network netweb", clients.network.virtual_networks.begin_create_or_update,
                     "g", "netweb", {"location": "westeurope"})
    assert str(raised.value) == "creating virtual network netweb: boom (InternalServerError)"
    assert raised.value.code == "InternalServerError" and not raised.value.not_found


def test_a_secret_in_an_error_message_is_blanked():
    error = translate_error(ValueError("secret is %s" % SECRET), "doing", secrets=(SECRET,))
    assert SECRET not in str(error) and "********" in str(error)


@pytest.mark.parametrize("code, key", [("AADSTS7000215", "client_secret"), ("AADSTS7000222", "client_secret"),
                                       ("AADSTS700016", "client_id"), ("AADSTS90002", "tenant_id")])
def test_a_refused_sign_in_names_the_backend_setting_to_fix(code, key):
    from azure.core.exceptions import ClientAuthenticationError

    refusal = ClientAuthenticationError(
        "Authentication failed: %s: Entra says why.\r\nTrace ID: 1\r\nCorrelation ID: 2" % code)
    error = translate_error(refusal, "authenticating as service principal c in tenant t")
    assert str(error) == ("authenticating as service principal c in tenant t: Authentication failed: %s: Entra says "
                          "why.; check the offering's backend_settings.%s" % (code, key))
    assert "backend_settings" not in str(translate_error(ValueError("AADSTS70002150 is no code of ours")))


# ---- retries (azure-core's policy, configured by client_options) --------------------------------

def test_throttled_post_with_retry_after_is_retried():
    clients = ScriptedClients([
        ("POST", 429, {"Retry-After": "0"}, arm_error("TooManyRequests", "slow down")),
        ("POST", 200, {}, None),
    ])
    clients.call("deallocating", clients.compute.virtual_machines.begin_deallocate, "g", "web")
    assert [method for method, url in clients.transport.requests] == ["POST", "POST"]


def test_throttled_and_failing_gets_are_retried():
    size = {"name": "Standard_B1s", "numberOfCores": 1, "memoryInMB": 1024, "osDiskSizeInMB": 1047552,
            "resourceDiskSizeInMB": 4096, "maxDataDiskCount": 2}
    clients = ScriptedClients([
        ("GET", 429, {}, arm_error("SubscriptionRequestsThrottled", "slow down")),
        ("GET", 503, {}, arm_error("ServiceUnavailable", "try later")),
        ("GET", 200, {}, {"value": [size]}),
    ])
    sizes = clients.listing("listing sizes", clients.compute.virtual_machine_sizes.list, "westeurope")
    assert [s.name for s in sizes] == ["Standard_B1s"]
    assert len(clients.transport.requests) == 3


def test_status_retries_are_bounded():
    throttled = ("GET", 500, {}, arm_error("InternalServerError", "down"))
    clients = ScriptedClients([throttled] * (policies.RETRY_STATUS + 1))
    with pytest.raises(AzureError) as raised:
        clients.call("reading group", clients.resource.resource_groups.get, "g")
    assert raised.value.status == 500
    assert len(clients.transport.requests) == policies.RETRY_STATUS + 1


# ---- plain JSON reads ---------------------------------------------------------------------------

def test_json_pages_follow_next_link_through_the_clients_pipeline():
    listing = ARM + "/subscriptions/sub-1/providers/Microsoft.Network/networkInterfaces"
    clients = ScriptedClients([
        ("GET", 429, {"Retry-After": "0"}, arm_error("SubscriptionRequestsThrottled", "slow down")),
        ("GET", 200, {}, {"value": [{"id": "a"}, {"id": "b"}], "nextLink": listing + "?$skiptoken=2&api-version=x"}),
        ("GET", 200, {}, {"value": [{"id": "c"}]}),
    ])
    pages = clients.call("listing", lambda: list(clients.json_pages(
        "network", "/subscriptions/sub-1/providers/Microsoft.Network/networkInterfaces", {"statusOnly": "true"})))
    assert pages == [[{"id": "a"}, {"id": "b"}], [{"id": "c"}]]  # plain JSON, no SDK model
    urls = [url for method, url in clients.transport.requests]
    assert urls[0] == urls[1] == (listing + "?statusOnly=true&api-version=%s" % azure_clients.JSON_API_VERSIONS["network"])
    assert urls[2] == listing + "?$skiptoken=2&api-version=x"  # nextLink as ARM gave it
    assert clients.api_calls == 3  # the retry counted, as every SDK call's is


def test_json_reads_fail_and_miss_as_sdk_calls_do():
    body = arm_error("ResourceNotFound", "The Resource 'Microsoft.Network/networkInterfaces/nicweb' was not found.")
    nic = "/subscriptions/sub-1/resourceGroups/g/providers/Microsoft.Network/networkInterfaces/nicweb"
    clients = ScriptedClients([("GET", 404, {}, body),
                               ("GET", 403, {}, arm_error("AuthorizationFailed", "no read permission")),
                               ("GET", 200, {}, {"statuses": [{"code": "PowerState/running"}]})])
    assert clients.read("reading nic", clients.json_get, "network", nic) is None
    with pytest.raises(AzureError) as raised:
        clients.call("listing", lambda: list(clients.json_pages("compute", "/subscriptions/sub-1/x")))
    assert (raised.value.status, raised.value.code) == (403, "AuthorizationFailed")
    assert str(raised.value).startswith("listing: no read permission")
    assert clients.json_get("compute", "/subscriptions/sub-1/vm", "/instanceView") == {
        "statuses": [{"code": "PowerState/running"}]}
    assert clients.transport.requests[2][1] == ARM + "/subscriptions/sub-1/vm/instanceView?api-version=%s" % (
        azure_clients.JSON_API_VERSIONS["compute"])


# ---- sizes ------------------------------------------------------------------------------------

def test_sizes_are_listed_once_per_location_and_failures_remembered():
    size = {"name": "Standard_B2s", "numberOfCores": 2, "memoryInMB": 4096, "osDiskSizeInMB": 30720,
            "resourceDiskSizeInMB": 8192, "maxDataDiskCount": 4}
    clients = ScriptedClients([
        ("GET", 200, {}, {"value": [size]}),
        ("GET", 404, {}, arm_error("NoRegisteredProviderFound", "No registered resource provider found")),
    ])
    catalog = SizeCatalog(clients)
    threads = [threading.Thread(target=catalog.size, args=("West Europe", "standard_b2s")) for dummy in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert size_figures(catalog.size("westeurope", "STANDARD_B2S")) == {"cores": 2, "ram_mb": 4096,
                                                                        "disk_mb": 38912}
    assert catalog.size("westeurope", "Standard_B1s") is None
    for dummy in range(3):
        with pytest.raises(AzureError):
            catalog.sizes("mars")
    assert len(clients.transport.requests) == 2


def test_power_state_from_instance_view():
    class Status:
        def __init__(self, code):
            self.code = code

    class View:
        statuses = [Status("ProvisioningState/succeeded"), Status("PowerState/deallocated")]

    assert power_state(View()) == "deallocated"
    assert power_state(None) is None


def test_size_figures_prefer_the_machines_own_os_disk():
    size = SimpleNamespace(number_of_cores=2, memory_in_mb=4096, os_disk_size_in_mb=1047552,
                           resource_disk_size_in_mb=8192)
    assert size_figures(size, os_disk_gb=30)["disk_mb"] == 38912
    assert size_figures(size)["disk_mb"] == 1047552 + 8192
