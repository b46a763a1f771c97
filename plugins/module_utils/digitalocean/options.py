# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The options every DigitalOcean module takes and the API root they name."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
from urllib.parse import urlsplit, urlunsplit

from ansible.module_utils.basic import env_fallback

DEFAULT_API_URL = "https://api.digitalocean.com/v2/"
# The library reads these for objects it builds on its own; set for the module process.
ENDPOINT_ENV_VAR = "DIGITALOCEAN_END_POINT"
TIMEOUT_ENV_VAR = "PYTHON_DIGITALOCEAN_REQUEST_TIMEOUT_SEC"
# The token's environment variables, the first set wins: doctl's and python-digitalocean's
# name, then community.digitalocean's four in its own order (its module_utils' oauth_token).
TOKEN_ENV_VARS = ("DIGITALOCEAN_ACCESS_TOKEN", "DO_API_TOKEN", "DO_API_KEY", "DO_OAUTH_TOKEN", "OAUTH_TOKEN")


def digitalocean_argument_spec():
    """Options shared by the DigitalOcean modules (doc fragment ``waldur.site_agent.digitalocean``)."""
    return dict(
        token=dict(type="str", required=True, no_log=True,
                   fallback=(env_fallback, list(TOKEN_ENV_VARS))),
        api_url=dict(type="str", default=DEFAULT_API_URL, fallback=(env_fallback, [ENDPOINT_ENV_VAR])),
        timeout=dict(type="float", default=30),
        max_retry_seconds=dict(type="float", default=120),
    )


def normalize_endpoint(url):
    """The API root ending in ``/v2/``: the library joins relative paths onto it,
    so ``http://host/v2`` would otherwise lose its last segment."""
    text = (url or "").strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("%r is not an http(s) URL" % (url,))
    path = parts.path.rstrip("/")
    if not path.endswith("/v2"):
        path += "/v2"
    return urlunsplit((parts.scheme, parts.netloc, path + "/", "", ""))


def plain_http_warning(url):
    """Why an endpoint over plain ``http://`` is a risk (the token would cross the network
    unencrypted), worded as the Waldur URL's warning; None for https and for this host
    (localhost, 127.0.0.0/8, ::1: tests and tunnels). Names the host only, never the token."""
    parts = urlsplit((url or "").strip())
    if parts.scheme.lower() != "http" or not parts.hostname:
        return None
    host = parts.hostname
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host.lower() == "localhost"
    if loopback:
        return None
    return "plain http:// to %s: the DigitalOcean token crosses the network unencrypted; use https://" % host
