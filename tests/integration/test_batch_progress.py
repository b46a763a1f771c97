"""A long batch says how it is getting on while it runs (plugins/plugin_utils/batch_action.py reading
the progress the batch engine writes): with the default callback and with the JSON callback.
The thresholds are lowered through the test-only environment variables (10 s / 30 s by default)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from tests.helpers import run_playbook
from tests.simulators.digitalocean import presets as P

pytestmark = pytest.mark.integration

QUICK = {"WALDUR_SITE_AGENT_PROGRESS_AFTER": "1", "WALDUR_SITE_AGENT_PROGRESS_EVERY": "1"}
ITEMS = 12


def creates(count):
    return [{"resource_uuid": "%032x" % (0xabc000 + number), "name": "slow-%02d" % number, "region": "ams3",
             "image": "ubuntu-22-04-x64", "size": "s-1vcpu-1gb"} for number in range(count)]


def slow_batch(do_sim, env, verbosity=0):
    """ITEMS creates, 4 at a time, each create answered after a second: a batch of about 4 s."""
    do_sim.app.latency_by_operation["droplets.create"] = 1.0
    play = [{"name": "DigitalOcean", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "tasks": [{"name": "Create slowly", "waldur.site_agent.do_droplet": {
                 "token": P.DO_TOKEN, "api_url": do_sim.url, "droplets": creates(ITEMS), "max_workers": 4,
                 "packed": True}}]}]
    return run_playbook(play, env=dict(QUICK, **env), verbosity=verbosity)


def test_default_callback_prints_progress_lines_before_the_result_and_items_one_line_each_at_v(do_sim):
    run = slow_batch(do_sim, {}, verbosity=1)
    assert run.rc == 0, run.output
    lines = run.stdout.splitlines()
    first = [number for number, line in enumerate(lines) if "Create slowly: %d items, deadline 900 s" % ITEMS in line]
    progress = [number for number, line in enumerate(lines) if line.startswith("Create slowly: ")
                and "/%d done, " % ITEMS in line]
    result = [number for number, line in enumerate(lines) if line.startswith("changed: [localhost]")]
    # -v: one line per item (resource, action, message), never the packed results as escaped JSON
    created = [line for line in lines if line.startswith("slow-") and ": created: created droplet " in line]
    assert len(created) == ITEMS, run.stdout
    assert "results_packed" not in run.stdout and '\\"resource_uuid\\"' not in run.stdout
    assert first and progress and result, run.stdout
    # printed while the batch ran: before the task's result, the first line first
    assert first[0] < progress[0] < result[0]
    # what it waits for: the items in flight, by name
    assert any("waiting for" in lines[number] and "slow-" in lines[number] for number in progress), run.stdout


def test_json_callback_prints_progress_records(do_sim):
    run = slow_batch(do_sim, {"ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"})
    assert run.rc == 0, run.output
    records = [json.loads(line) for line in run.stdout.splitlines()]  # stdout stays JSON lines only
    running = [record for record in records if record.get("status") == "running"]
    assert running, run.stdout
    assert running[0]["event"].startswith("%d items, deadline 900 s" % ITEMS)
    assert running[0]["task"] == "Create slowly" and running[0]["items"] == ITEMS
    counted = [record for record in running if "/%d done" % ITEMS in record["event"]]
    assert counted and all(record["level"] == "info" and record["logger"] for record in counted)
    task = [record for record in records if record.get("task") == "Create slowly" and record.get("status") == "changed"
            and "items" in record]
    assert task, run.stdout
    started = datetime.fromisoformat(counted[0]["timestamp"])
    assert started < datetime.fromisoformat(task[0]["timestamp"])
