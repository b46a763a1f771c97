# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The Waldur modules' wrapper: ``WaldurModule`` builds an ``AnsibleModule`` with the
common options (``waldur_argument_spec()``, documented by the ``waldur.site_agent.waldur``
doc fragment), a lazily built client, and renders client errors consistently."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import secret_text_problem
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import (
    DEFAULT_UNREACHABLE_TIMEOUT,
    HAS_REQUESTS,
    REQUESTS_IMPORT_ERROR,
    WaldurApiError,
    WaldurClient,
)


def waldur_argument_spec():
    """Options shared by every Waldur module (doc fragment ``waldur.site_agent.waldur``)."""
    return dict(
        api_url=dict(type="str", required=True, fallback=(env_fallback, ["WALDUR_API_URL"])),
        api_token=dict(type="str", required=True, no_log=True, fallback=(env_fallback, ["WALDUR_API_TOKEN"])),
        verify_ssl=dict(type="raw", default=True, fallback=(env_fallback, ["WALDUR_VERIFY_SSL"])),
        timeout=dict(type="float", default=30.0),
        max_retry_seconds=dict(type="float", default=120.0),
        unreachable_timeout=dict(type="float", default=DEFAULT_UNREACHABLE_TIMEOUT,
                                 fallback=(env_fallback, ["WALDUR_UNREACHABLE_TIMEOUT"])),
    )


class WaldurModule:
    """``AnsibleModule`` with the common Waldur options, a lazily built client and error rendering."""

    def __init__(self, argument_spec=None, supports_check_mode=True, build=AnsibleModule, **kwargs):
        # build: AnsibleModule, or what the module's action plugin runs it with in the task's worker
        spec = waldur_argument_spec()
        spec.update(argument_spec or {})
        self.module = build(argument_spec=spec, supports_check_mode=supports_check_mode, **kwargs)
        if not HAS_REQUESTS:
            self.module.fail_json(msg=missing_required_lib("requests"), exception=REQUESTS_IMPORT_ERROR)
        # Before any call: requests refuses such a header quoting the token whole, and retrying
        # cannot help.
        problem = secret_text_problem(self.module.params.get("api_token"))
        if problem:
            self.module.fail_json(msg="api_token (module_defaults, task or WALDUR_API_TOKEN): %s" % problem)
        self._client = None

    def __getattr__(self, name):
        # params, check_mode, warn, exit_json ... come from the wrapped AnsibleModule
        return getattr(self.module, name)

    def client(self, pool_size=16):
        if self._client is None:
            params = self.module.params
            try:
                self._client = WaldurClient(
                    params["api_url"], params["api_token"], verify_ssl=params["verify_ssl"],
                    timeout=params["timeout"], max_retry_seconds=params["max_retry_seconds"],
                    pool_size=pool_size, unreachable_timeout=params["unreachable_timeout"])
            except ValueError as exc:
                self.module.fail_json(msg=str(exc))
        return self._client

    def uuid_param(self, value, name):
        """``value`` as 32 hex digits, or fail naming the option/key (``outcomes[3].order_uuid``)."""
        try:
            text = normalize_uuid(value)
        except ValueError:
            text = None
        if text is None:
            self.fail_json(msg="%s must be a UUID (32 hex digits, dashes optional), got %r" % (name, value))
        return text

    def api_calls(self):
        return dict(self._client.calls) if self._client is not None else {"reads": 0, "writes": 0, "retries": 0}

    def exit_json(self, **result):
        result.setdefault("api_calls", self.api_calls())
        self.module.exit_json(**result)

    def fail_json(self, msg, **result):
        result.setdefault("api_calls", self.api_calls())
        self.module.fail_json(msg=msg, **result)

    def fail_from_error(self, exc, msg=None, **result):
        """Fail the task from a WaldurApiError (or any exception), naming what was being done."""
        text = str(exc)
        if isinstance(exc, WaldurApiError):
            result.setdefault("status", exc.status)
            if exc.status == 401:
                text += " (check api_token)"
            elif exc.status == 403:
                text += " (the api_token's user lacks permission for this call)"
        self.fail_json(msg="%s: %s" % (msg, text) if msg else text, **result)
