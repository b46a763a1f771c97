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
      - A token with leading or trailing whitespace (the trailing newline C(echo token > file) leaves) or a
        control character inside is refused before any call, naming the option, never the value.
    type: str
    required: true
  verify_ssl:
    description:
      - How to check the TLS certificate of O(api_url). V(true) verifies it, V(false) does not, and the
        path of a CA bundle file verifies it against that bundle.
      - Precedence, highest first. The value given to the task, which the passes take from the
        offering's C(verify_ssl) in the site agent configuration. Else the E(WALDUR_VERIFY_SSL)
        environment variable (the AWX credential type of this collection injects it). Else V(true).
      - V(false) means no verification whatever E(REQUESTS_CA_BUNDLE) or E(CURL_CA_BUNDLE) say, and a
        CA bundle path wins over them. With V(true), E(REQUESTS_CA_BUNDLE) (else E(CURL_CA_BUNDLE))
        names the CA bundle when set, else the CAs bundled with C(requests) are used.
    type: raw
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
  unreachable_timeout:
    description:
      - Upper bound, in seconds, on trying to reach a Waldur that cannot be reached at all
        (connection refused, unknown host, no answer to the connection attempt). The task then fails
        with one line naming O(api_url) and the cause, so a pass gives up on such an offering within
        about this long.
      - A TLS certificate that does not verify fails at once.
      - If not set, the value of the E(WALDUR_UNREACHABLE_TIMEOUT) environment variable is used.
    type: float
    default: 10
notes:
  - All Waldur modules belong to the action group C(waldur.site_agent.waldur), so the connection
    options can be set once with C(module_defaults) (C(group/waldur.site_agent.waldur)).
  - UUIDs are accepted with or without dashes and returned as 32 lower-case hex digits.
requirements:
  - requests >= 2.31
"""
