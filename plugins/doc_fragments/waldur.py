# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # Options shared by every module talking to Waldur (waldur_api.waldur_argument_spec()).
    DOCUMENTATION = r"""
options:
  api_url:
    description:
      - Base URL of the Waldur API, for example C(https://waldur.example.com/api/).
      - The trailing C(/api/) is optional; the client adds it.
      - If not set, the value of the E(WALDUR_API_URL) environment variable is used.
    type: str
    required: true
  api_token:
    description:
      - "Waldur API token, sent as C(Authorization: Token <token>)."
      - For the provider-side modules this is the token of the offering's service provider
        (an offering manager or the provider organisation owner).
      - If not set, the value of the E(WALDUR_API_TOKEN) environment variable is used.
      - Never shown in messages, results or logs.
    type: str
    required: true
  verify_ssl:
    description:
      - Whether to verify the TLS certificate of O(api_url).
      - If not set, the value of the E(WALDUR_VERIFY_SSL) environment variable is used (the AWX
        credential type of this collection injects it), else V(true).
      - A private CA can be trusted through the E(REQUESTS_CA_BUNDLE) environment variable.
    type: bool
    default: true
  timeout:
    description:
      - Seconds to wait for one HTTP request to Waldur.
    type: float
    default: 30
  max_retry_seconds:
    description:
      - Upper bound, in seconds, on retrying one call that fails transiently (connection errors,
        HTTP 5xx, HTTP 429 honouring C(Retry-After)).
      - When the bound is reached the call fails with the last error.
    type: float
    default: 120
notes:
  - All Waldur modules belong to the action group C(waldur.site_agent.waldur), so the connection
    options can be set once with C(module_defaults) (C(group/waldur.site_agent.waldur)).
  - UUIDs are accepted with or without dashes and returned as 32 lower-case hex digits.
requirements:
  - requests >= 2.31
"""
