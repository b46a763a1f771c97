"""The DigitalOcean passes end to end: the real order_process, membership_sync and report
playbooks, driven by the site agent configuration file, against the Waldur simulator
(orders placed as a consumer would, over HTTP) and the DigitalOcean simulator (the real
python-digitalocean over HTTP)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.helpers import REPO, ansible_env, run_playbook, simulator_site_config
from tests.simulators.digitalocean import presets as DO
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

ORDER_PASS = REPO / "playbooks" / "order_process.yml"
MEMBERSHIP_PASS = REPO / "playbooks" / "membership_sync.yml"
REPORT_PASS = REPO / "playbooks" / "report.yml"


# ---- configuration and passes ---------------------------------------------------------------

def write_config(tmp_path: Path, waldur, do, **settings) -> Path:
    """The simulators' DigitalOcean offering, with backend settings changed (None removes one)."""
    config = simulator_site_config(waldur.url, do_url=do.url)
    backend = config["offerings"][0]["backend_settings"]
    for key, value in settings.items():
        if value is None:
            backend.pop(key, None)
        else:
            backend[key] = value
    path = tmp_path / "waldur-site-agent-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_pass(playbook: Path, config: Path, check=False, verbosity=0, json_log=False):
    env = {"WALDUR_SITE_AGENT_CONFIG": str(config)}
    if json_log:
        env["ANSIBLE_STDOUT_CALLBACK"] = "waldur.site_agent.waldur_json"
    run = run_playbook(playbook, env=env, check=check, verbosity=verbosity)
    assert run.rc == 0, run.output[-6000:]
    return run


# ---- Waldur as its users drive it -------------------------------------------------------------

def call_waldur(waldur, path: str, body: dict, token: str = W.CONSUMER_TOKEN) -> dict:
    response = requests.post(waldur.url + path, json=body, timeout=10,
                             headers={"Authorization": "Token " + token})
    assert response.status_code < 300, response.text
    return response.json() if response.content else {}


def order_droplet(waldur, name: str, limits: dict | None = None, **attributes) -> tuple[str, str]:
    """A consumer orders a droplet; (order uuid, marketplace resource uuid)."""
    offering = "%s/api/marketplace-public-offerings/%s/" % (waldur.url, W.DO_OFFERING_UUID)
    order = call_waldur(waldur, "/api/marketplace-orders/", {
        "offering": offering,
        "project": "%s/api/projects/%s/" % (waldur.url, W.PROJECT_UUID),
        "plan": "%splans/%s/" % (offering, W.DO_PLAN_UUID),
        "attributes": dict(attributes, name=name),
        "limits": dict(limits or W.DO_PLAN_QUOTAS),
        "accepting_terms_of_service": True,
    })
    return order["uuid"], order["marketplace_resource_uuid"]


def waldur_writes(waldur, since=0) -> list[str]:
    return [call["operation"] for call in waldur.app.write_calls(since)]


def do_writes(do, since=0) -> list[str]:
    return [call["operation"] for call in do.app.write_calls(since)]


