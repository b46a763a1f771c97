# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Azure sign-in and endpoint options (``azure_clients.azure_argument_spec``, ``azure/auth.py``)."""

    DOCUMENTATION = r"""
options:
  auth_source:
    description:
      - Where the Azure sign-in comes from, as in azure.azcollection.
      - V(auto) takes the first of, in this order, (1) the O(profile) of C(~/.azure/credentials) when
        O(profile) is set; (2) a service principal's credential in the options or their variables (a client
        O(secret), else a client certificate (O(x509_certificate_path) or O(x509_certificate)), else a federated
        token file (O(federated_token_file), AKS workload identity)); a second one given is named in a warning;
        (3) the C([default]) profile of C(~/.azure/credentials); (4) a managed identity, when the host announces
        its endpoint (E(IDENTITY_ENDPOINT), E(MSI_ENDPOINT), E(IMDS_ENDPOINT) or E(AZURE_POD_IDENTITY_AUTHORITY_HOST));
        (5) the Azure CLI, when C(az) is on E(PATH).
      - A O(client_id) or O(tenant) given without any credential of (2) fails the task naming what is missing,
        rather than signing in as another identity.
      - V(env) reads the E(AZURE_*) variables only; V(credential_file) the O(profile) (default C(default)) of
        C(~/.azure/credentials), whose keys are C(subscription_id), C(tenant), C(client_id), C(secret),
        C(x509_certificate_path), C(x509_certificate_password); V(msi) a managed identity (the system-assigned
        one, or the user-assigned one whose client id is O(client_id)), through the host's endpoint or IMDS;
        V(cli) the account the Azure CLI (C(az login)) signed in.
      - A plain Azure VM's instance metadata service is never probed by V(auto) (off Azure that costs a
        timeout); such a VM sets V(msi).
      - Which identity signed in, and from where, is returned by M(waldur.site_agent.azure_vm_chain_info) as
        C(azure_sign_in) (shown at C(-v)).
      - If not set, the value of the E(ANSIBLE_AZURE_AUTH_SOURCE) or E(AZURE_AUTH_SOURCE) environment variable
        is used.
    type: str
    choices: [auto, cli, credential_file, env, msi]
    default: auto
  profile:
    description:
      - The profile (section) of C(~/.azure/credentials) to sign in with.
      - If not set, the value of the E(AZURE_PROFILE) environment variable is used.
    type: str
  subscription_id:
    description:
      - The Azure subscription the virtual machines live in.
      - If not set, the value of the E(AZURE_SUBSCRIPTION_ID) environment variable is used (or the profile's).
      - Required, from the option, the environment or the credential file's profile.
    type: str
  tenant:
    description:
      - The Microsoft Entra tenant (directory) id of the service principal (or of the Azure CLI's account).
      - If not set, the value of the E(AZURE_TENANT) or E(AZURE_TENANT_ID) environment variable is used.
      - Required for a service principal.
    type: str
    aliases: [tenant_id]
  client_id:
    description:
      - The application (client) id of the service principal, or the client id of a user-assigned managed
        identity (O(auth_source=msi)).
      - If not set, the value of the E(AZURE_CLIENT_ID) environment variable is used.
      - Required for a service principal.
    type: str
  secret:
    description:
      - The client secret of the service principal. It never appears in results or messages.
      - If not set, the value of the E(AZURE_SECRET) environment variable is used.
      - AWX's built-in Microsoft Azure Resource Manager credential sets E(AZURE_SUBSCRIPTION_ID),
        E(AZURE_TENANT), E(AZURE_CLIENT_ID) and E(AZURE_SECRET).
      - A secret (or tenant or client id) with leading or trailing whitespace or a control character inside
        is refused before any call, naming the option, never the value.
    type: str
    aliases: [client_secret]
  x509_certificate_path:
    description:
      - A PEM (private key and certificate) or PKCS12 file the service principal signs in with, instead of a
        secret. Its thumbprint is not needed.
      - If not set, the value of the E(AZURE_X509_CERTIFICATE_PATH) or E(AZURE_CLIENT_CERTIFICATE_PATH)
        environment variable is used.
    type: path
  x509_certificate:
    description:
      - The same as O(x509_certificate_path), given as PEM text (private key and certificate). It never appears
        in results or messages.
    type: str
  x509_certificate_password:
    description:
      - The password of the certificate's private key, if it has one.
      - If not set, the value of the E(AZURE_CLIENT_CERTIFICATE_PASSWORD) environment variable is used.
    type: str
  federated_token_file:
    description:
      - A file holding a federated token (workload identity, the service-account token AKS projects into the
        pod), exchanged for an Azure token as the service principal O(client_id) of O(tenant).
      - If not set, the value of the E(AZURE_FEDERATED_TOKEN_FILE) environment variable is used, which the AKS
        workload identity webhook sets together with E(AZURE_CLIENT_ID) and E(AZURE_TENANT_ID).
      - A file that does not exist fails the task naming the option and the variable.
    type: path
  cloud_environment:
    description:
      - The Azure cloud, which gives the default O(authority_host) and O(arm_endpoint) (V(AzureCloud)
        C(login.microsoftonline.com) and C(management.azure.com), V(AzureUSGovernment) C(login.microsoftonline.us)
        and C(management.usgovcloudapi.net), V(AzureChinaCloud) C(login.chinacloudapi.cn) and
        C(management.chinacloudapi.cn)); case does not matter.
      - If not set, the value of the E(AZURE_CLOUD_ENVIRONMENT) environment variable is used.
    type: str
    default: AzureCloud
  arm_endpoint:
    description:
      - Base URL of Azure Resource Manager, for Azure Stack or a local simulator; overrides O(cloud_environment).
      - If not set, the value of the E(AZURE_ARM_ENDPOINT) environment variable is used, else the cloud's.
      - Off the public cloud, tokens are requested for this endpoint's C(/.default) scope.
    type: str
  authority_host:
    description:
      - The Microsoft Entra authority that issues tokens; overrides O(cloud_environment).
      - If not set, the value of the E(AZURE_AUTHORITY_HOST) environment variable is used, else the cloud's.
      - For any authority other than the public cloud's, instance discovery is turned off.
    type: str
  polling_interval:
    description:
      - Seconds between two polls of a long-running Azure operation, unless Azure asks for another
        interval with C(Retry-After).
    type: float
    default: 5
  timeout:
    description:
      - Seconds to wait for each Azure Resource Manager request (to connect, then for the answer).
        A request not answered in time fails as a lost connection does, and is retried as one.
    type: float
    default: 60
requirements:
  - azure-identity >= 1.25.1
  - azure-mgmt-compute >= 37.0.0
  - azure-mgmt-network >= 30.0.0
  - azure-mgmt-resource >= 24.0.0
notes:
  - Every sign-in goes through azure-identity (C(ClientSecretCredential), C(CertificateCredential),
    C(WorkloadIdentityCredential), C(ManagedIdentityCredential), C(AzureCliCredential)).
  - A private certificate authority (for example the one of a local simulator) is trusted through the
    E(REQUESTS_CA_BUNDLE) environment variable.
  - Throttling (HTTP 429) and transient server errors are retried by the Azure SDK, after the delay
    Azure asks for in C(Retry-After).
"""
