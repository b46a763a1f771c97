"""Failures to Sentry (plugins/plugin_utils/sentry_report.py): started only with a DSN (the option's,
else the site configuration's), without locals, personal data or integrations; every event scrubbed
of the secrets known by then; grouped by task and message without UUIDs; a missing sentry-sdk or a
bad DSN said once, and the run goes on."""

from __future__ import annotations

import json
import sys
import types

import pytest

from ansible_collections.waldur.site_agent.plugins.plugin_utils import sentry_report
from ansible_collections.waldur.site_agent.plugins.plugin_utils.sentry_report import (
    SentryReport,
    normalise_message,
    sentry_event,
)

TOKEN = "waldur-token-5f2d9c81e4"
OPTIONS = {"sentry_dsn": None, "sentry_environment": "staging", "sentry_flush_timeout": 5.0,
           "logger_name": "waldur_site_agent.ansible"}


class FakeSentry(types.ModuleType):
    def __init__(self):
        super().__init__("sentry_sdk")
        self.init_kwargs = None
        self.events = []
        self.flushed = []

    def init(self, **kwargs):
        self.init_kwargs = kwargs

    def capture_event(self, event):
        self.events.append(self.init_kwargs["before_send"](event, {}))

    def flush(self, timeout=None):
        self.flushed.append(timeout)


@pytest.fixture
def report(monkeypatch):
    """A report with a fake sentry_sdk, its warnings and what it registered at exit."""
    fake = FakeSentry()
    monkeypatch.setitem(sys.modules, "sentry_sdk", fake)
    at_exit = []
    monkeypatch.setattr(sentry_report.atexit, "register", at_exit.append)
    warnings = []
    options = dict(OPTIONS)
    sentry = SentryReport(options.get, {TOKEN}, warnings.append)
    return types.SimpleNamespace(sentry=sentry, fake=fake, warnings=warnings, options=options, at_exit=at_exit)


def test_fingerprints_ignore_uuids_and_long_hex_numbers():
    first = normalise_message("order 0b5e0000-0000-0000-0000-000000000002 failed on droplet 5 (req abcdef0123456789)")
    second = normalise_message("order 0b5e0000000000000000000000000009 failed on droplet 5 (req 0123456789abcdef)")
    assert first == second == "order <uuid> failed on droplet 5 (req <hex>)"


def test_an_event_has_the_records_context_as_tags_and_the_rest_as_extra():
    event = sentry_event("droplet 5 refused", {"task": "Create", "offering": "DO", "order": "0b5e" * 8,
                                               "resource": None, "host": "", "status": "failed"}, "agent")
    assert event["tags"] == {"task": "Create", "offering": "DO", "order": "0b5e" * 8}
    assert event["extra"] == {"host": "", "status": "failed"}
    assert event["fingerprint"] == ["agent", "Create", "droplet 5 refused"]
    assert (event["level"], event["logger"]) == ("error", "agent")


def test_nothing_is_sent_without_a_dsn(report):
    report.sentry.capture("boom", {"task": "t"})
    assert report.fake.init_kwargs is None and report.fake.events == [] and report.warnings == []
    report.sentry.flush()
    assert report.fake.flushed == []


def test_the_site_config_dsn_starts_it_without_locals_or_personal_data(report):
    report.sentry.config_dsn = "https://public@sentry.example.com/3"
    report.sentry.capture("droplet create refused for %s" % TOKEN,
                          {"task": "Create the droplets", "offering": "DigitalOcean", "client_secret": "s3cr3t-v4lue"})
    kwargs = report.fake.init_kwargs
    assert kwargs["dsn"] == "https://public@sentry.example.com/3" and kwargs["environment"] == "staging"
    assert kwargs["include_local_variables"] is False and kwargs["send_default_pii"] is False
    assert kwargs["default_integrations"] is False and kwargs["auto_enabling_integrations"] is False
    [event] = report.fake.events
    assert event["message"] == "droplet create refused for ********"
    assert event["extra"] == {"client_secret": "********"}
    assert "s3cr3t-v4lue" not in json.dumps(event) and TOKEN not in json.dumps(event)
    # the DSN is a secret from now on, and the events are flushed at the end (at exit too)
    assert "https://public@sentry.example.com/3" in report.sentry.secrets
    assert report.at_exit == [report.sentry.flush]
    report.sentry.flush()
    assert report.fake.flushed == [5.0]


def test_the_option_wins_over_the_site_config(report):
    report.options["sentry_dsn"] = "https://option@sentry.example.com/9"
    report.sentry.config_dsn = "https://config@sentry.example.com/3"
    assert report.sentry.start() is report.fake
    assert report.fake.init_kwargs["dsn"] == "https://option@sentry.example.com/9"


def test_before_send_scrubs_whatever_the_event_carries(report):
    event = {"message": "x", "extra": {"headers": {"Authorization": "Token " + TOKEN}},
             "breadcrumbs": {"values": [{"data": {"url": "https://h/api/?token=abc&page=2"},
                                         "message": "saw " + TOKEN}]}}
    cleaned = report.sentry.before_send(event, {})
    assert cleaned["extra"]["headers"]["Authorization"] == "********"
    crumb = cleaned["breadcrumbs"]["values"][0]
    assert crumb["data"]["url"] == "https://h/api/?token=********&page=2"
    assert crumb["message"] == "saw ********"
    assert report.sentry.before_breadcrumb({"message": "saw " + TOKEN}, {}) == {"message": "saw ********"}


def test_a_secret_learnt_later_is_scrubbed_too(report):
    report.sentry.config_dsn = "https://public@sentry.example.com/3"
    report.sentry.start()
    report.sentry.secrets.add("learnt-later-7781")
    report.sentry.capture("refused learnt-later-7781", {"task": "t"})
    assert report.fake.events[0]["message"] == "refused ********"


def test_a_bad_dsn_turns_it_off_once(report):
    attempts = []

    def refuse(**kwargs):
        attempts.append(kwargs["dsn"])
        raise ValueError("Unsupported scheme 'ftp'")

    report.fake.init = refuse
    report.options["sentry_dsn"] = "ftp://public@sentry.example.com/1"
    report.sentry.capture("first failure", {"task": "a"})
    report.sentry.capture("second failure", {"task": "b"})
    assert len(attempts) == 1 and report.fake.events == []
    assert report.warnings == ["Sentry reporting is off: Unsupported scheme 'ftp'"]
    assert report.sentry.start() is None


def test_a_missing_sentry_sdk_is_said_once(report, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentry_sdk", None)  # import sentry_sdk raises ImportError
    report.options["sentry_dsn"] = "https://public@sentry.example.com/1"
    report.sentry.capture("first failure", {"task": "a"})
    report.sentry.capture("second failure", {"task": "b"})
    assert report.warnings == ["sentry-sdk is not installed: failures are not reported to Sentry "
                               "(pip install sentry-sdk)"]
