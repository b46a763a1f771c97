# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The Azure clients of a run: one credential, service clients built on first use, and the read layer.

The credential is the azure-identity class of the run's sign-in (``auth.py`` decides which:
client secret, certificate, workload identity, managed identity or the Azure CLI; ``sdk.py``
builds it). Every SDK call goes through :meth:`AzureClients.call`, which waits on long-running
operations (bounded by a deadline) and turns any SDK error, including one raised while waiting
on a poller, into :class:`AzureError` (``status``, ``code``, ``message``; ``not_found`` for 404).
Every request passes the policies of ``policies.py`` (call counter, JSON answers, retries bounded
by the run's deadline).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import threading
import time
from urllib.parse import quote, urlencode, urlsplit

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.auth import (
    AUTH_SOURCES,
    ENV_OF,
    SignIn,
    SignInProblem,
    cloud_endpoints,
    resolve_sign_in,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.endpoints import (
    PUBLIC_ARM_ENDPOINT,
    PUBLIC_AUTHORITY_HOST,
    plain_http_endpoints,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, AzureUnproven, OperationStillRunning
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.policies import (
    RETRY_BACKOFF_MAX,
    RETRY_STATUS,
    CallCounter,
    DeadlineRetryPolicy,
    JsonAnswers,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.sdk import (
    AZURE_IMPORT_ERROR,
    AZURE_LIBRARIES,
    HAS_AZURE,
    HttpRequest,
    json_pipeline_client,
    management_client,
    new_credential,
    translate_error,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import INTEGER, OBJECT, STRING, ProvenList, Shape
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_guard import PassEnded
from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import secret_text_problem

USER_AGENT = "waldur-site-agent-ansible"
# Seconds one ARM request may take (connect, then the answer): longer than Waldur's and
# DigitalOcean's 30 because ARM's listings of a busy subscription are slower.
DEFAULT_TIMEOUT = 60.0

# The API versions of the plain JSON reads (``AzureClients.json_pages`` and ``json_get``): GA
# versions that ARM serves in every public region; the fields a pass reads have the same shape
# in every version since.
JSON_API_VERSIONS = {"compute": "2024-07-01", "network": "2024-05-01"}
# Subscriptions - List Locations and Subscriptions - Get (Microsoft.Resources).
LOCATIONS_API_VERSION = SUBSCRIPTION_API_VERSION = "2022-12-01"
# Resource Skus - List (Microsoft.Compute/skus) has API versions of its own.
RESOURCE_SKUS_API_VERSION = "2021-07-01"
# Usage - List (Microsoft.Compute/locations/{location}/usages): a quota, its use and its limit. The
# quota check approves on these numbers, so an item without them is not proof.
USAGE_SHAPE = Shape("usage", required={"name": OBJECT, "currentValue": INTEGER, "limit": INTEGER})
USAGE_NAME_SHAPE = Shape("usage name", required={"value": STRING})
# Resource Skus - List: what the quota check reads of a SKU (a VM size's family names its vCPU quota).
RESOURCE_SKU_SHAPE = Shape("resource SKU", required={"resourceType": STRING, "name": STRING},
                           optional={"family": STRING})


def _env(option):
    return (env_fallback, list(ENV_OF[option]))


def azure_argument_spec():
    """Options every Azure module takes (doc fragment ``waldur.site_agent.azure``); the names and
    variables are azure.azcollection's where it has them (``auth.OPTION_ENV``)."""
    return dict(
        auth_source=dict(type="str", choices=list(AUTH_SOURCES), default="auto", fallback=_env("auth_source")),
        profile=dict(type="str", fallback=_env("profile")),
        subscription_id=dict(type="str", fallback=_env("subscription_id")),
        tenant=dict(type="str", aliases=["tenant_id"], fallback=_env("tenant")),
        client_id=dict(type="str", fallback=_env("client_id")),
        secret=dict(type="str", aliases=["client_secret"], no_log=True, fallback=_env("secret")),
        x509_certificate_path=dict(type="path", fallback=_env("x509_certificate_path")),
        x509_certificate=dict(type="str", no_log=True),
        x509_certificate_password=dict(type="str", no_log=True, fallback=_env("x509_certificate_password")),
        federated_token_file=dict(type="path", fallback=_env("federated_token_file")),
        cloud_environment=dict(type="str", default="AzureCloud", fallback=_env("cloud_environment")),
        arm_endpoint=dict(type="str", fallback=_env("arm_endpoint")),
        authority_host=dict(type="str", fallback=_env("authority_host")),
        polling_interval=dict(type="float", default=5),
        timeout=dict(type="float", default=DEFAULT_TIMEOUT),
    )


def _is_poller(value):
    return hasattr(value, "polling_method") and hasattr(value, "result") and hasattr(value, "done")


class AzureClients:
    """Lazily built Azure clients sharing one credential.

    A client a run never touches is never built; each is built once even when
    many worker threads ask for it at the same time.
    """

    def __init__(self, subscription_id, tenant=None, client_id=None, secret=None, arm_endpoint=PUBLIC_ARM_ENDPOINT,
                 authority_host=PUBLIC_AUTHORITY_HOST, polling_interval=5, ca_bundle=None, sign_in=None,
                 timeout=None):
        # ``sign_in`` (auth.SignIn) says how to sign in; without it, the service principal's secret.
        self.sign_in = sign_in or SignIn("secret", "the module options", subscription_id=subscription_id,
                                         tenant=tenant, client_id=client_id, secret=secret)
        self.subscription_id = subscription_id
        self.tenant = self.sign_in.tenant
        self.client_id = self.sign_in.client_id
        self._secrets = self.sign_in.secrets
        self.arm_endpoint = (arm_endpoint or PUBLIC_ARM_ENDPOINT).rstrip("/")
        self.authority_host = (authority_host or PUBLIC_AUTHORITY_HOST).rstrip("/")
        self.polling_interval = polling_interval
        # Seconds for one request's connection and for its answer (azure-core's own default read
        # timeout, 300 s, lets one unanswered call hold a whole batch for five minutes).
        self.timeout = timeout or DEFAULT_TIMEOUT
        self.ca_bundle = ca_bundle
        self._lock = threading.Lock()
        self._credential = None
        self._clients = {}
        self.counter = CallCounter()
        self.json_answers = JsonAnswers()
        # The run's deadline (a time.monotonic() value): no SDK retry waits past it. None: unbounded.
        self.deadline = None

    @property
    def api_calls(self):
        """ARM requests sent so far by every client of this run."""
        return self.counter.calls

    @property
    def public_authority(self):
        return self.authority_host.lower() == PUBLIC_AUTHORITY_HOST

    @property
    def public_arm(self):
        return self.arm_endpoint.lower() == PUBLIC_ARM_ENDPOINT

    def _transport_options(self):
        return {"connection_verify": self.ca_bundle} if self.ca_bundle else {}

    def credential_options(self):
        options = self._transport_options()
        options["authority"] = self.authority_host
        if not self.public_authority:
            # MSAL would otherwise ask login.microsoftonline.com to vouch for the authority.
            options["disable_instance_discovery"] = True
        return options

    def client_options(self):
        options = self._transport_options()
        options.update(base_url=self.arm_endpoint, polling_interval=self.polling_interval,
                       connection_timeout=self.timeout, read_timeout=self.timeout,
                       retry_policy=DeadlineRetryPolicy(lambda: self.deadline, retry_status=RETRY_STATUS,
                                                        retry_backoff_max=RETRY_BACKOFF_MAX),
                       user_agent=USER_AGENT, per_retry_policies=[self.counter, self.json_answers])
        if not self.public_arm:
            # tokens must be issued for the ARM endpoint actually called (sovereign clouds, Azure Stack)
            options["credential_scopes"] = [self.arm_endpoint + "/.default"]
        return options

    @property
    def credential(self):
        with self._lock:
            if self._credential is None:
                self._credential = new_credential(self.sign_in, self._transport_options(), self.credential_options())
            return self._credential

    def authenticate(self):
        """Get a token now, so rejected credentials fail the whole task once instead of
        every machine (which would err every order for what is a configuration problem)."""
        scope = (self.arm_endpoint if not self.public_arm else PUBLIC_ARM_ENDPOINT) + "/.default"
        try:
            self.credential.get_token(scope)
        except Exception as exc:  # ClientAuthenticationError, CredentialUnavailableError, ValueError, ...
            raise translate_error(exc, "signing in as %s" % self.sign_in.describe(), secrets=self._secrets)

    def _client(self, kind, factory):
        credential = self.credential
        with self._lock:
            if kind not in self._clients:
                self._clients[kind] = factory(credential, self.subscription_id, **self.client_options())
            return self._clients[kind]

    @property
    def resource(self):
        return self._client("resource", management_client("resource"))

    @property
    def network(self):
        return self._client("network", management_client("network"))

    @property
    def compute(self):
        return self._client("compute", management_client("compute"))

    @property
    def json_pipeline(self):
        """The pipeline of the plain JSON reads (no management SDK imported)."""
        return self._client("json", json_pipeline_client)

    def call(self, what, function, *args, **kwargs):
        """Run one SDK call; wait for it when it is a long-running operation.

        ``deadline`` (a ``time.monotonic()`` value) bounds the wait; an operation
        still running then raises :class:`OperationStillRunning`. ``accepted`` is
        called once ARM has accepted a long-running operation (before waiting on it).
        Every error comes out as :class:`AzureError` whose message starts with ``what``.
        """
        deadline = kwargs.pop("deadline", None)
        accepted = kwargs.pop("accepted", None)
        try:
            result = function(*args, **kwargs)
            if _is_poller(result):
                if accepted is not None:
                    accepted()
                timeout = None if deadline is None else max(1.0, deadline - time.monotonic())
                value = result.result(timeout)
                if not result.done():
                    raise OperationStillRunning("still running at the deadline%s; Azure carries it on" % (
                        "" if timeout is None else " (after %d seconds)" % int(timeout)))
                return value
            return result
        except PassEnded:
            raise  # not Azure's failure: nothing may be written, nor rolled back
        except Exception as exc:  # every SDK error (and poller error) becomes an AzureError
            raise translate_error(exc, what, secrets=self._secrets)

    def read(self, what, function, *args, **kwargs):
        """Like :meth:`call` for a GET, but ARM's own not-found of the object (a 404 with an error code
        ending in ``NotFound``) gives None: None is proven absence. Any other 404 (a proxy's page, a
        subscription ARM does not know) raises, and so does a 2xx that holds no object."""
        try:
            found = self.call(what, function, *args, **kwargs)
        except AzureError as error:
            if error.not_found:
                return None
            raise
        if found is None:  # a 2xx the SDK found no object in (an empty body): not absence
            raise AzureUnproven("%s: ARM answered without the object; nothing in the answer is trusted" % what)
        return found

    def listing(self, what, function, *args, **kwargs):
        """All items of a paged listing (pages are fetched, and errors translated, here). A listing
        answered a bare ``NotFound`` (no object named: not ``ResourceGroupNotFound``, which proves the
        group it lists is gone) says nothing of what it lists: unproven, never a reason to err an order."""
        try:
            return self.call(what, lambda: list(function(*args, **kwargs)))
        except AzureError as error:
            if error.not_found and str(error.code or "").lower() == "notfound" and not isinstance(error, AzureUnproven):
                raise AzureUnproven("%s (a listing answered not found proves nothing of what it lists)" % error.message,
                                    status=error.status)  # no code: never read as an object's not-found
            raise

    # ---- plain JSON reads ------------------------------------------------------------------
    # For reads of many objects of which a pass keeps a few fields: the SDK builds a model of
    # every object, about a millisecond of CPU each (5 s for the four listings of 1,000 machines),
    # while the JSON is parsed in a fraction of that. The requests go through the service
    # client's own pipeline (``send_request``): the same credential, retries and call counter.
    # Errors are the SDK's, translated by the caller's ``call`` or ``read``.
    def _json(self, url):
        """ARM's JSON object at ``url``. A 2xx answer that is not a JSON object (an HTML page from a
        proxy, truncated JSON, a bare list, an empty body) is an error, never an empty object."""
        response = self.json_pipeline.send_request(HttpRequest("GET", url))
        response.raise_for_status()
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            content_type = (response.headers.get("Content-Type") or "no content type").split(";")[0].strip()
            text = " ".join((response.text() or "").split())
            raise AzureUnproven("ARM answered GET %s with %s %r instead of a JSON object; nothing in it is trusted"
                                % (urlsplit(url).path, content_type, text[:80] + ("..." if len(text) > 80 else "")))
        return body

    def json_pages(self, kind, path, params=None):
        """The pages of an ARM listing of the ``kind`` (compute or network) service, each the list
        of its objects as ARM's JSON (``value``), following ``nextLink``, fetched as asked for."""
        query = dict(params or {})
        query["api-version"] = JSON_API_VERSIONS[kind]
        url = "%s%s?%s" % (self.arm_endpoint, path, urlencode(query))
        while url:
            body = self._json(url)
            if not isinstance(body.get("value"), list) or not all(isinstance(item, dict) for item in body["value"]):
                raise AzureUnproven("ARM answered GET %s without the list 'value' of a listing; the listing is not "
                                    "trusted" % urlsplit(url).path)
            yield body["value"]
            url = body.get("nextLink")

    def _checked_listing(self, path, params, api_version, shape, what, title):
        """Every item of an ARM listing (all pages, ``nextLink``) at ``path``, each of ``shape``, as a
        ``ProvenList``; raises :class:`AzureError` (translated, titled ``title``) or
        :class:`AzureUnproven` for an answer that proves nothing, an empty one included."""
        call = "GET %s" % path
        query = dict(params or {})
        query["api-version"] = api_version

        def fetch():
            items = []
            url = "%s%s?%s" % (self.arm_endpoint, path, urlencode(query))
            while url:
                body = self._json(url)
                if not isinstance(body.get("value"), list):
                    raise AzureUnproven("ARM answered %s without the list 'value' of a listing; the listing is not "
                                        "trusted" % call)
                items.extend(body["value"])
                url = body.get("nextLink")
            return items

        items = self.call(title, fetch)
        problem = shape.first_problem(items)
        if problem:
            raise AzureUnproven("%s: ARM answered JSON of another shape (%s); nothing is decided on it" % (call, problem))
        if not items:
            raise AzureUnproven("%s: ARM listed no %s at all; that proves nothing" % (call, what))
        return ProvenList(items, call)

    def vcpu_usages(self, location):
        """The subscription's Compute quotas in ``location`` (Usage - List,
        ``GET /subscriptions/{id}/providers/Microsoft.Compute/locations/{location}/usages``), as ARM's JSON
        items (``name.value`` such as ``cores`` or ``standardBSFamily``, ``currentValue``, ``limit``), in a
        ``ProvenList``; every item checked, its ``name`` too."""
        path = "/subscriptions/%s/providers/Microsoft.Compute/locations/%s/usages" % (
            quote(str(self.subscription_id), safe=""), quote(str(location), safe=""))
        usages = self._checked_listing(path, None, JSON_API_VERSIONS["compute"], USAGE_SHAPE, "usage",
                                       "listing the vCPU quotas of location %s" % location)
        problem = USAGE_NAME_SHAPE.first_problem([usage["name"] for usage in usages])
        if problem:
            raise AzureUnproven("%s: ARM answered JSON of another shape (%s); nothing is decided on it"
                                % (usages.source, problem))
        return usages

    def resource_skus(self, location):
        """The Compute SKUs offered in ``location`` (Resource Skus - List,
        ``GET /subscriptions/{id}/providers/Microsoft.Compute/skus?$filter=location eq '{location}'``), as
        ARM's JSON items (``resourceType``, ``name``, ``family``) in a ``ProvenList``."""
        path = "/subscriptions/%s/providers/Microsoft.Compute/skus" % quote(str(self.subscription_id), safe="")
        return self._checked_listing(path, {"$filter": "location eq '%s'" % location}, RESOURCE_SKUS_API_VERSION,
                                     RESOURCE_SKU_SHAPE, "SKU", "listing the VM SKUs of location %s" % location)

    def json_at(self, url):
        """ARM's JSON object at an absolute ``url`` ARM handed out (an operation's status)."""
        return self._json(url)

    def locations(self):
        """The subscription's locations as ARM's JSON (``GET /subscriptions/{id}/locations``), through the
        resource client's pipeline (credential, retries, call counter)."""
        query = urlencode({"api-version": LOCATIONS_API_VERSION})
        url = "%s/subscriptions/%s/locations?%s" % (self.arm_endpoint, self.subscription_id, query)
        body = self._json(url)
        if not isinstance(body.get("value"), list) or not body["value"]:
            # every subscription has locations: an empty answer is not the subscription's list
            raise AzureUnproven("ARM answered GET /subscriptions/%s/locations without a list 'value' of locations; "
                                "the listing is not trusted" % self.subscription_id)
        return body["value"]

    def subscription(self):
        """The subscription as ARM's JSON (``GET /subscriptions/{id}``): the direct proof that ARM knows
        it and that this identity may read it, which a read of a missing object inside it is not (ARM
        answers a subscription it does not know, or the identity has no role on, SubscriptionNotFound,
        a malformed id InvalidSubscriptionId). Raises :class:`AzureError`, translated; an answer about
        another subscription is not trusted."""
        path = "/subscriptions/%s" % quote(str(self.subscription_id), safe="")
        url = "%s%s?%s" % (self.arm_endpoint, path, urlencode({"api-version": SUBSCRIPTION_API_VERSION}))
        body = self.call("GET %s" % path, self._json, url)
        answered = body.get("subscriptionId")
        if not isinstance(answered, str) or answered.strip().lower() != str(self.subscription_id).strip().lower():
            raise AzureError("ARM answered GET %s with subscription %r, not this one; the answer is not trusted"
                             % (path, answered))
        return body

    def json_get(self, kind, resource_id, suffix=""):
        """One ARM object (``resource_id`` + ``suffix``, e.g. ``/instanceView``) as ARM's JSON."""
        return self._json("%s%s%s?%s" % (self.arm_endpoint, resource_id, suffix,
                                         urlencode({"api-version": JSON_API_VERSIONS[kind]})))


def sign_in_from_params(params):
    """``(SignIn, authority_host, arm_endpoint)`` for a module's options; raises SignInProblem."""
    problems = ["%s %s" % (key, secret_text_problem(params.get(key))) for key in ("secret", "tenant", "client_id")
                if params.get(key) and secret_text_problem(params.get(key))]
    if problems:
        raise SignInProblem("Azure credentials (module_defaults, task or AZURE_*): %s" % "; ".join(problems))
    authority_host, arm_endpoint = cloud_endpoints(params)
    return resolve_sign_in(params), authority_host, arm_endpoint


def clients_from_module(module):
    """:class:`AzureClients` for a module's options; fails the module when the SDKs are missing
    or no sign-in can be made, naming the options (every missing credential)."""
    if not HAS_AZURE:
        module.fail_json(msg=missing_required_lib(AZURE_LIBRARIES), exception=AZURE_IMPORT_ERROR)
    params = module.params
    if params["timeout"] <= 0:
        module.fail_json(msg="timeout must be a number of seconds greater than 0, got %s" % params["timeout"])
    try:
        sign_in, authority_host, arm_endpoint = sign_in_from_params(params)
    except SignInProblem as problem:
        module.fail_json(msg=problem.message)
        raise  # fail_json exits; this only tells linters so
    for warning in plain_http_endpoints(dict(params, arm_endpoint=arm_endpoint, authority_host=authority_host)):
        module.warn(warning)
    for warning in sign_in.warnings:
        module.warn(warning)
    return AzureClients(
        subscription_id=sign_in.subscription_id,
        arm_endpoint=arm_endpoint,
        authority_host=authority_host,
        polling_interval=params["polling_interval"],
        timeout=params["timeout"],
        ca_bundle=os.environ.get("REQUESTS_CA_BUNDLE") or None,
        sign_in=sign_in,
    )
