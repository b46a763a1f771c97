# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Options of every DigitalOcean module (module_utils.digitalocean.options.digitalocean_argument_spec).
    DOCUMENTATION = r"""
options:
  token:
    description:
      - DigitalOcean API token (read and write scopes for droplets, actions and SSH keys).
      - Never appears in results or messages.
      - If not set, the first of these environment variables that is set is used, in this order
        - E(DIGITALOCEAN_ACCESS_TOKEN) (doctl's), then community.digitalocean's E(DO_API_TOKEN),
        E(DO_API_KEY), E(DO_OAUTH_TOKEN) and E(OAUTH_TOKEN), in community.digitalocean's order.
      - A token with leading or trailing whitespace or a control character inside is refused before any call.
    type: str
    required: true
  api_url:
    description:
      - Root of the DigitalOcean API v2. A URL without a trailing C(/v2/) gets one.
      - Every request, including the pages of a listing, goes to this host.
      - If not set, the environment variable E(DIGITALOCEAN_END_POINT) is used.
      - Plain C(http://) to another host than this one draws a warning naming this option (the token would
        cross the network unencrypted); the token never appears in it.
    type: str
    default: https://api.digitalocean.com/v2/
  timeout:
    description:
      - Seconds to wait for each HTTP request (connect and read).
    type: float
    default: 30
  max_retry_seconds:
    description:
      - Bound, in seconds, on retrying one API call.
      - Rate-limit answers (429, honouring C(Retry-After)), server errors and lost connections are
        retried with jittered backoff until this many seconds have passed.
    type: float
    default: 120
requirements:
  - python-digitalocean >= 1.17.0
  - requests
notes:
  - Requests are paced under DigitalOcean's limits (a burst of 250 requests per minute and 5,000
    per hour) across all worker threads of the task, over one pool of keep-alive connections.
"""
