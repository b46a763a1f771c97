# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The Azure SDKs, the only file importing ``azure.*``: credentials, management clients, SDK errors.

The credential is the azure-identity class of a sign-in (``auth.SignIn``); the management SDKs
(``azure.mgmt.*``) are imported on first use (a read-only run sends plain JSON requests through
:func:`json_pipeline_client` and imports none); :func:`translate_error` turns any SDK error into
an :class:`AzureError`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import traceback

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.endpoints import PUBLIC_ARM_ENDPOINT
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError, AzureUnproven, credential_hint
from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import redact_text

# The management SDKs (azure.mgmt.*) are only looked for here, not imported: importing them
# took about a second of every Azure module run before its first call, and the read paths
# (listings, sizes, instance views) send plain JSON requests that need none of them. A module
# that writes imports the one it needs on first use (management_client).
MANAGEMENT_PACKAGES = ("azure.mgmt.core", "azure.mgmt.compute", "azure.mgmt.network", "azure.mgmt.resource")

AZURE_IMPORT_ERROR = None
try:
    from azure.core.exceptions import AzureError as SdkAzureError
    from azure.core.exceptions import DecodeError
    # bound here for policies.py (the policies' bases) and clients.py (the JSON reads' request)
    from azure.core.pipeline.policies import RetryPolicy, SansIOHTTPPolicy  # pylint: disable=unused-import
    from azure.core.rest import HttpRequest  # pylint: disable=unused-import
    from azure.identity import (AzureCliCredential, CertificateCredential, ClientSecretCredential,
                                ManagedIdentityCredential, WorkloadIdentityCredential)
    for _package in MANAGEMENT_PACKAGES:
        if importlib.util.find_spec(_package) is None:
            raise ImportError("No module named %r" % _package)
except ImportError:
    AZURE_IMPORT_ERROR = traceback.format_exc()
    SdkAzureError = DecodeError = Exception
    SansIOHTTPPolicy = RetryPolicy = object
    HttpRequest = None
    ClientSecretCredential = None
    AzureCliCredential = CertificateCredential = ManagedIdentityCredential = WorkloadIdentityCredential = None

HAS_AZURE = AZURE_IMPORT_ERROR is None

# The management SDKs' clients, imported on first use (see management_client): set here only by tests.
ComputeManagementClient = NetworkManagementClient = ResourceManagementClient = None
AZURE_LIBRARIES = "azure-identity, azure-mgmt-compute, azure-mgmt-network and azure-mgmt-resource"


def _first_line(text):
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[0] if lines else ""


def translate_error(exc, what=None, secrets=()):
    """An :class:`AzureError` for any exception an SDK call raised.

    The message is the service's own (ARM ``error.message``), never a header or
    a request body; any secret that slipped into it is blanked.
    """
    if isinstance(exc, AzureError):
        error = exc
    else:
        status = getattr(exc, "status_code", None)
        if status is not None and status < 400:
            # a long-running operation that failed: the 200 is the status poll's, not the failure's
            status = None
        code = message = None
        model = getattr(exc, "error", None)
        if model is not None:
            code = getattr(model, "code", None)
            message = getattr(model, "message", None)
        if not message:
            message = _first_line(getattr(exc, "message", None) or exc) or type(exc).__name__
        if not isinstance(exc, SdkAzureError):
            message = "%s: %s" % (type(exc).__name__, message)
        if (isinstance(exc, DecodeError) and DecodeError is not Exception) or isinstance(exc, json.JSONDecodeError):
            # a 2xx answer that is not the JSON object the call expects (JsonAnswers), or not JSON
            # at all (an empty body the SDK's deserializer choked on): proves nothing
            error = AzureUnproven(message, status=status, code=code)
        elif status == 404 and not code:
            # a 404 without ARM's error body: a proxy's page, not ARM saying the object is gone
            error = AzureUnproven("%s (a 404 without ARM's error code: whether the object exists is not proven)"
                                  % message, status=status)
        else:
            error = AzureError(message, status=status, code=code)
    if what:
        error = error.retitled("%s: %s" % (what, error.message))
    error.message = credential_hint(redact_text(error.message, secrets))
    return error


def new_credential(sign_in, transport_options, credential_options):
    """The azure-identity credential of ``sign_in`` (``auth.SignIn``), never patched: tests run it
    against the simulator's token endpoints. ``transport_options`` (the CA bundle) go to every
    credential, ``credential_options`` (with the authority) to those that ask the authority."""
    if sign_in.kind == "msi":
        # The endpoint is the host's (IDENTITY_ENDPOINT, IMDS ...), not the authority.
        return ManagedIdentityCredential(client_id=sign_in.client_id, **transport_options)
    if sign_in.kind == "cli":
        return AzureCliCredential(tenant_id=sign_in.tenant)
    if sign_in.kind == "certificate":
        return CertificateCredential(sign_in.tenant, sign_in.client_id, certificate_path=sign_in.certificate_path,
                                     certificate_data=sign_in.certificate_data,
                                     password=sign_in.certificate_password, **credential_options)
    if sign_in.kind == "workload_identity":
        return WorkloadIdentityCredential(tenant_id=sign_in.tenant, client_id=sign_in.client_id,
                                          token_file_path=sign_in.token_file, **credential_options)
    return ClientSecretCredential(sign_in.tenant, sign_in.client_id, sign_in.secret, **credential_options)


# ---- the SDKs' clients, imported on first use -------------------------------------------------
def management_client(kind):
    """The management SDK's client class of ``kind`` (compute, network or resource), imported now."""
    name = {"compute": "ComputeManagementClient", "network": "NetworkManagementClient",
            "resource": "ResourceManagementClient"}[kind]
    factory = globals()[name]
    if factory is not None:
        return factory
    if kind == "compute":
        from azure.mgmt.compute import ComputeManagementClient as factory  # pylint: disable=import-outside-toplevel
    elif kind == "network":
        from azure.mgmt.network import NetworkManagementClient as factory  # pylint: disable=import-outside-toplevel
    else:
        try:
            from azure.mgmt.resource.resources import ResourceManagementClient as factory  # pylint: disable=import-outside-toplevel
        except ImportError:  # azure-mgmt-resource < 25
            from azure.mgmt.resource import ResourceManagementClient as factory  # pylint: disable=import-outside-toplevel
    return factory


def json_pipeline_client(credential, subscription_id, **options):  # pylint: disable=unused-argument
    """The pipeline of the plain JSON reads: the policies a management client is built with (the
    same credential, retry policy, call counter and JsonAnswers; ``client_options``), without
    importing a management SDK."""
    # pylint: disable=import-outside-toplevel
    from azure.core.pipeline import policies
    from azure.mgmt.core import ARMPipelineClient
    from azure.mgmt.core.policies import (ARMAutoResourceProviderRegistrationPolicy, ARMChallengeAuthenticationPolicy,
                                          ARMHttpLoggingPolicy)
    options = dict(options)
    base_url = options.pop("base_url")
    scopes = options.pop("credential_scopes", None) or [PUBLIC_ARM_ENDPOINT + "/.default"]
    options.pop("polling_interval", None)
    retry_policy = options.pop("retry_policy")
    pipeline = [
        policies.RequestIdPolicy(**options),
        policies.HeadersPolicy(**options),
        policies.UserAgentPolicy(**options),
        policies.ProxyPolicy(**options),
        policies.ContentDecodePolicy(**options),
        ARMAutoResourceProviderRegistrationPolicy(),
        policies.RedirectPolicy(**options),
        retry_policy,
        ARMChallengeAuthenticationPolicy(credential, *scopes, **options),
        policies.CustomHookPolicy(**options),
        policies.NetworkTraceLoggingPolicy(**options),
        policies.DistributedTracingPolicy(**options),
        policies.SensitiveHeaderCleanupPolicy(**options),
        ARMHttpLoggingPolicy(**options),
    ]
    return ARMPipelineClient(base_url=base_url, policies=pipeline, **options)
