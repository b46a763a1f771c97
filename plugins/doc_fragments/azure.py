# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Azure service principal and endpoint options (``azure_clients.azure_argument_spec``)."""

    DOCUMENTATION = r"""
options:
  subscription_id:
    description:
      - The Azure subscription the virtual machines live in.
      - If not set, the value of the E(AZURE_SUBSCRIPTION_ID) environment variable is used.
      - Required, from the option or the environment.
    type: str
  tenant:
    description:
      - The Microsoft Entra tenant (directory) id of the service principal.
      - If not set, the value of the E(AZURE_TENANT) environment variable is used.
      - Required, from the option or the environment.
    type: str
    aliases: [tenant_id]
  client_id:
    description:
      - The application (client) id of the service principal.
      - If not set, the value of the E(AZURE_CLIENT_ID) environment variable is used.
      - Required, from the option or the environment.
    type: str
  secret:
    description:
      - The client secret of the service principal. It never appears in results or messages.
      - If not set, the value of the E(AZURE_SECRET) environment variable is used.
      - Required, from the option or the environment.
      - AWX's built-in Microsoft Azure Resource Manager credential sets E(AZURE_SUBSCRIPTION_ID),
        E(AZURE_TENANT), E(AZURE_CLIENT_ID) and E(AZURE_SECRET).
      - A secret (or tenant or client id) with leading or trailing whitespace or a control character inside
        is refused before any call, naming the option, never the value.
    type: str
    aliases: [client_secret]
  arm_endpoint:
    description:
      - Base URL of Azure Resource Manager, for sovereign clouds, Azure Stack or a local simulator.
      - If not set, the value of the E(AZURE_ARM_ENDPOINT) environment variable is used.
      - Off the public cloud, tokens are requested for this endpoint's C(/.default) scope.
    type: str
    default: https://management.azure.com
  authority_host:
    description:
      - The Microsoft Entra authority that issues tokens.
      - If not set, the value of the E(AZURE_AUTHORITY_HOST) environment variable is used.
      - For any authority other than the public cloud's, instance discovery is turned off.
    type: str
    default: https://login.microsoftonline.com
  polling_interval:
    description:
      - Seconds between two polls of a long-running Azure operation, unless Azure asks for another
        interval with C(Retry-After).
    type: float
    default: 5
requirements:
  - azure-identity >= 1.25.1
  - azure-mgmt-compute >= 37.0.0
  - azure-mgmt-network >= 30.0.0
  - azure-mgmt-resource >= 24.0.0
notes:
  - A private certificate authority (for example the one of a local simulator) is trusted through the
    E(REQUESTS_CA_BUNDLE) environment variable.
  - Throttling (HTTP 429) and transient server errors are retried by the Azure SDK, after the delay
    Azure asks for in C(Retry-After).
"""
