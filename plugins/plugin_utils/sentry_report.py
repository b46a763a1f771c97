# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The ``waldur_json`` callback's failures sent to Sentry: one event per failed task, loop item or
batch item, with the offering, order and resource as tags, grouped by task and message (UUIDs and
long hex numbers do not split groups), scrubbed of every secret the callback knows before it
leaves; no local variables, no personal data, none of sentry-sdk's own integrations."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import atexit
import re

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import redact, redact_text
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import UUID_WORD_PATTERN

_LONG_HEX = re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}\b")
# The fields of a record that become an event's tags; the others are its extra data.
TAG_KEYS = ("offering", "order", "resource", "host", "task", "playbook")


def normalise_message(text):
    """A message with its UUIDs and long hex numbers replaced, for grouping in Sentry."""
    text = UUID_WORD_PATTERN.sub("<uuid>", to_text(text))
    return _LONG_HEX.sub("<hex>", text)


def sentry_event(message, fields, logger):
    """The Sentry event of a failure: ``message`` (already scrubbed) and its record's ``fields``."""
    tags = dict((key, to_text(fields[key])) for key in TAG_KEYS if fields.get(key) not in (None, ""))
    extra = dict((key, value) for key, value in fields.items() if key not in tags and value is not None)
    return {
        "message": message,
        "level": "error",
        "logger": logger,
        "tags": tags,
        "extra": extra,
        "fingerprint": [logger, to_text(fields.get("task") or ""), normalise_message(message)],
    }


class SentryReport:
    """Sentry for one run. ``option(name)``: the callback's options (``sentry_dsn``,
    ``sentry_environment``, ``sentry_flush_timeout``, ``logger_name``); ``secrets``: the set of
    secret values the callback learns as the run goes on (shared, so later ones are scrubbed too);
    ``warn(text)``: a warning line of the log. ``config_dsn``: the site agent configuration's
    ``sentry_dsn``, used when the option is not set."""

    def __init__(self, option, secrets, warn):
        self.option = option
        self.secrets = secrets
        self.warn = warn
        self.config_dsn = None
        self.sdk = None
        self.state = None  # None: not tried yet, "on", or "off"

    def start(self):
        """The initialised sentry_sdk module, or None when there is no DSN or no sentry-sdk."""
        if self.state == "on":
            return self.sdk
        if self.state == "off":
            return None
        dsn = self.option("sentry_dsn") or self.config_dsn
        if not dsn:
            return None  # a site agent configuration read later may still bring one
        try:
            import sentry_sdk
        except ImportError:
            self.state = "off"
            self.warn("sentry-sdk is not installed: failures are not reported to Sentry (pip install sentry-sdk)")
            return None
        self.secrets.add(to_text(dsn))
        try:
            self._init(sentry_sdk, dsn)
        except Exception as exc:  # pylint: disable=broad-except
            # A bad DSN must not cost the run or repeat on every failure.
            self.state = "off"
            self.warn("Sentry reporting is off: %s" % to_text(exc))
            return None
        atexit.register(self.flush)
        self.sdk = sentry_sdk
        self.state = "on"
        return sentry_sdk

    def _init(self, sentry_sdk, dsn):
        sentry_sdk.init(
            dsn=dsn,
            environment=self.option("sentry_environment") or None,
            include_local_variables=False,
            send_default_pii=False,
            # Only what this plugin captures: no logging, excepthook or threading hooks
            # inside Ansible's controller and its forks.
            default_integrations=False,
            auto_enabling_integrations=False,
            before_send=self.before_send,
            before_breadcrumb=self.before_breadcrumb,
        )

    def before_send(self, event, hint):
        return redact(event, self.secrets)

    def before_breadcrumb(self, crumb, hint):
        return redact(crumb, self.secrets)

    def capture(self, message, fields):
        """Send one failure (its event text and its record's fields), when Sentry is on."""
        sentry_sdk = self.start()
        if sentry_sdk is None:
            return
        message = redact_text(to_text(message), self.secrets)
        sentry_sdk.capture_event(sentry_event(message, fields, self.option("logger_name")))

    def flush(self):
        if self.state == "on":
            self.sdk.flush(timeout=self.option("sentry_flush_timeout"))
