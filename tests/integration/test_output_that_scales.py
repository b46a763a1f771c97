"""Output that scales (issue 39, item 2): at -v a pass prints a few kilobytes whatever its batch
size (plugins/plugin_utils/batch_action.py summarises every result holding a list; the plan of the
orders is an include's loop variable, never a printed fact), and a long step says what it does from
its first read on, its seconds counted from the task's start (core/progress.py, written from the
module's first batch runner on)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.helpers import run_playbook
from tests.integration.passes import ORDER_PASS, order_machine, run_pass, write_config
from tests.simulators.digitalocean import presets as P
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

QUICK = {"WALDUR_SITE_AGENT_PROGRESS_AFTER": "1", "WALDUR_SITE_AGENT_PROGRESS_EVERY": "1"}
ORDERS = 100
# What -v printed for 100 orders before: 322 KB, the orders' listing, the claim and the plan one
# line of 38-130 KB each. Now about 20 KB: the pass's fixed output and, for each of the four tasks
# holding the orders (listing, claim, act, settle), 20 of them one line each and "... and 80 more".
MOST_BYTES_AT_V = 40000
LONGEST_LINE_AT_V = 4096


def trim_exchanges(waldur):
    """The orders repeat the same few Waldur exchanges: the fixture's contract check reads the
    first few of each kind (operation and status) rather than all of them."""
    with waldur.app.lock:
        kinds = Counter()
        sample = []
        for exchange in waldur.app.exchanges:
            kinds[(exchange["operation"], exchange["status"])] += 1
            if kinds[(exchange["operation"], exchange["status"])] <= 5:
                sample.append(exchange)
        waldur.app.exchanges[:] = sample


def test_the_order_pass_of_100_orders_at_v_prints_no_line_over_4_kb(tmp_path, waldur_sim, do_sim):
    waldur_sim.app.reset("empty")
    do_sim.app.configure(droplet_limit=1000)
    config = write_config(tmp_path, waldur_sim, do_sim)
    orders = [order_machine(waldur_sim, W.DO_OFFERING_UUID, W.DO_PLAN_UUID, "bulk-%03d" % index, W.DO_PLAN_QUOTAS)[0]
              for index in range(ORDERS)]

    run = run_pass(ORDER_PASS, config, verbosity=1)
    trim_exchanges(waldur_sim)

    assert [order for order in orders if waldur_sim.app.order(order)["state"] != "done"] == []
    lines = run.stdout.splitlines()
    longest = max(lines, key=len)
    assert len(longest) <= LONGEST_LINE_AT_V, longest[:300]
    assert len(run.stdout) < MOST_BYTES_AT_V, len(run.stdout)
    # no packed list is printed, nor the plan's items: the orders are named one line each, the
    # first 20 of each list, then how many more
    assert '\\"uuid\\"' not in run.stdout and "backend_items" not in run.stdout
    assert run.stdout.count("... and %d more (-vv prints every one" % (ORDERS - 20)) == 4
    assert len([line for line in lines if re.match(r"bulk-\d{3} \([0-9a-f]{32}\): Create pending-provider$", line)]) == 20
    assert len([line for line in lines if ": created: created droplet " in line]) == 20
    # the plan is said in the include's line, by counts
    assert "(item=%d order(s) planned: 0 set aside, 0 note(s))" % ORDERS in run.stdout


def test_a_slow_read_before_the_batch_says_so_and_the_seconds_count_from_the_task_start(do_sim):
    """The droplets' listing before the creates (do_droplet's prefetch) answers after 3 s (as does
    each create's own listing of its tag): the task says what it reads before its batch's first
    line, and the batch's lines count their seconds from the task's start, the read included."""
    do_sim.app.latency_by_operation["droplets.list"] = 3.0
    creates = [{"resource_uuid": "%032x" % (0xfeed00 + number), "name": "read-%02d" % number, "region": "ams3",
                "image": "ubuntu-22-04-x64", "size": "s-1vcpu-1gb"} for number in range(8)]
    play = [{"name": "DigitalOcean", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "tasks": [{"name": "Create slowly", "waldur.site_agent.do_droplet": {
                 "token": P.DO_TOKEN, "api_url": do_sim.url, "droplets": creates, "max_workers": 4,
                 "wait": False, "packed": True}}]}]
    run = run_playbook(play, env=QUICK)
    assert run.rc == 0, run.output
    lines = run.stdout.splitlines()
    reading = [number for number, line in enumerate(lines)
               if re.match(r"Create slowly: reading 8 resources' droplets(: \d+ reads? so far)?, \d+ s$", line)]
    first = [number for number, line in enumerate(lines) if line.startswith("Create slowly: 8 items, deadline 900 s")]
    progress = [(number, line) for number, line in enumerate(lines) if re.match(r"Create slowly: \d/8 done, ", line)]
    assert reading and first and progress, run.stdout
    assert reading[0] < first[0] <= progress[0][0], run.stdout
    # a line a second: the read is seen while it runs, more than once
    assert len([number for number in reading if number < first[0]]) >= 2, run.stdout
    # the batch's first line counts the seconds since the task started: the 3 s read included
    seconds = int(re.search(r"done, \d+ failed, (\d+) s", progress[0][1]).group(1))
    assert seconds >= 3, progress[0][1]
