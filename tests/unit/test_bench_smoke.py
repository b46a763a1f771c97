"""A smoke run of the benchmark harness (``bench/``): tiny, no latency, a few seconds.

The benchmark itself (``make bench``) is not part of the tests; this checks that its
harness still measures what docs/performance.md reports: wall time, API calls per
simulator, memory of the process tree, ansible's tasks and module runs.
"""

from __future__ import annotations

import sys

import pytest

from bench import render
from bench.__main__ import build_plan
from bench.harness import SimulatorSet, run_ours
from bench.measure import _module_of, run_measured

NO_LATENCY = {"waldur": 0.0, "digitalocean": 0.0, "azure": 0.0}


def test_run_measured_records_wall_time_and_peak_memory_of_the_process_tree(tmp_path):
    # A child that holds ~80 MiB for a moment, started through a grandchild shell.
    code = "import time; block = bytearray(80 * 1024 * 1024); block[::4096] = b'x' * len(block[::4096]); time.sleep(0.5)"
    measured = run_measured(["/bin/sh", "-c", '"%s" -c "%s"' % (sys.executable, code)],
                            stdout_path=tmp_path / "out.log", interval=0.02)
    assert measured.rc == 0
    assert measured.wall_s >= 0.5
    assert measured.max_process_rss_mib >= 80
    assert measured.peak_tree_pss_mib >= 70
    assert measured.max_processes >= 2


def test_module_runs_are_the_python_processes_not_their_shell_wrappers():
    assert _module_of(["/work/.venv/bin/python3.11", "/root/.ansible/tmp/a/AnsiballZ_do_droplet.py"]).group(1) \
        == "do_droplet"
    assert _module_of(["/bin/sh", "-c", "/usr/bin/python /tmp/AnsiballZ_do_droplet.py && sleep 0"]) is None


def test_plan_compares_both_agents_on_digitalocean_and_ours_alone_on_azure():
    plan = build_plan(quick=True)
    upstream = {(s.pass_name, s.backend) for s in plan if s.agent == "upstream"}
    assert upstream == {("order", "digitalocean"), ("report", "digitalocean")}
    assert {s.n for s in plan} == {0, 10, 100}
    assert all(s.agent != "upstream" for s in build_plan(quick=True, only="ours"))


def test_order_pass_smoke_records_time_calls_memory_and_ansible_work(tmp_path):
    with SimulatorSet(latency=NO_LATENCY, lro_seconds=0, workdir=tmp_path) as sims:
        sims.reset()
        assert sims.seed("order", "digitalocean", 3) == {"orders": 3}
        result = run_ours(sims, "order", "digitalocean", 3, logs=tmp_path)

    assert result.rc == 0, result.note
    assert result.outcome["orders"] == {"done": 3}
    assert result.wall_s > 0
    # One list of the offering's orders and an approval per order, in the Waldur call log;
    # the tag lookup and create per droplet in DigitalOcean's.
    assert result.calls["waldur"]["by_operation"]["orders.list"] >= 1
    assert result.calls["waldur"]["by_operation"]["orders.approve_by_provider"] == 3
    assert result.calls["digitalocean"]["by_operation"]["droplets.create"] == 3
    assert result.calls["azure"]["total"] == 0
    assert result.peak_tree_pss_mib > 20
    assert result.max_process_rss_mib > 20
    # check the offering, probe the cloud, claim, act, settle: five module runs, and the tasks around them
    assert [m["module"] for m in result.modules] == [
        "waldur_offering_info", "do_account_info", "waldur_orders", "do_droplet", "waldur_orders"]
    assert result.tasks >= 5
    assert result.ansible_overhead_s == pytest.approx(result.wall_s - result.module_s, abs=0.01)

    page = render.render_markdown({"runs": [result.as_dict()], "latency_s": NO_LATENCY})
    assert "| 3 | order DO | %s |" % render.seconds(result.wall_s) in page


def test_audit_scenario_seeds_a_healthy_marked_world_the_audit_finds_clean(tmp_path):
    assert {s.pass_name for s in build_plan(quick=True, only="ours")} >= {"audit"}
    with SimulatorSet(latency=NO_LATENCY, lro_seconds=0, workdir=tmp_path) as sims:
        sims.reset()
        assert sims.seed("audit", "azure", 3) == {"resources": 3}
        result = run_ours(sims, "audit", "azure", 3, logs=tmp_path)

    assert result.rc == 0, result.note
    # the offering check every pass makes first (agent_pass), then the audit's two listings
    assert [m["module"] for m in result.modules] == ["waldur_offering_info", "waldur_audit_info", "azure_audit"]
    # listings only: the tagged groups and the machines (twice: sizes, then power states)
    assert set(result.calls["azure"]["by_operation"]) <= {"token", "openid", "resource_groups.list", "vms.list_all"}
    azure = result.calls["azure"]
    assert azure["writes"] == azure["by_operation"].get("token", 0) and result.calls["waldur"]["writes"] == 0
    assert (tmp_path / "audit" / "Azure-bench.json").exists()
