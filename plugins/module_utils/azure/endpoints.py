# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The Azure endpoints an offering may override (sovereign clouds, Azure Stack, tests), and the
warning for one given over plain HTTP. Apart from the clients, so that the configuration check
reads it without importing the Azure SDKs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
from urllib.parse import urlsplit

# The public cloud's endpoints, the defaults of ``arm_endpoint`` and ``authority_host``.
PUBLIC_ARM_ENDPOINT = "https://management.azure.com"
PUBLIC_AUTHORITY_HOST = "https://login.microsoftonline.com"

ENDPOINT_OPTIONS = (("arm_endpoint", "Azure Resource Manager base URL"),
                    ("authority_host", "Entra ID authority host"))


def plain_http_endpoints(params):
    """Warnings for the Azure endpoints given over plain ``http://`` (the client secret and the
    bearer tokens would cross the network unencrypted), each naming its option; this host
    (localhost, 127.0.0.0/8, ::1: tests and tunnels) is quiet, as for Waldur's URL."""
    warnings = []
    for key, what in ENDPOINT_OPTIONS:
        value = str(params.get(key) or "").strip()
        parts = urlsplit(value)
        if parts.scheme.lower() != "http" or not parts.hostname or _loopback(parts.hostname):
            continue
        warnings.append("%s: plain http:// for the %s (%s): the Azure credentials and tokens cross the network "
                        "unencrypted; use https://" % (key, what, value))
    return warnings


def _loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"
