"""Audit results outlive the run: every run writes its own report under
``<audit_report_dir>/<offering>/<UTC time>-<run id>.json`` and ``.md`` (one run never overwrites
another's), ``<audit_report_dir>/<offering>.json`` and ``.md`` follow the latest, and the findings
are set_stats data (AWX keeps them as the job's artifacts, with the job)."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import run_playbook
from tests.integration.passes import log_lines
from tests.integration.test_audit import AUDIT_PASS, report, seed_droplet_resource, write_site_config
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

RUN_NAME = re.compile(r"^\d{8}T\d{6}Z-([0-9a-f]{8}|job\d+)$")


def run_audit(tmp_path, config, env=None, **extra_vars):
    environment = {"WALDUR_SITE_AGENT_CONFIG": str(config), **(env or {})}
    return run_playbook(AUDIT_PASS, extra_vars={"audit_report_dir": str(tmp_path / "reports"), **extra_vars},
                        env=environment)


def run_reports(tmp_path, folder="DigitalOcean-VM"):
    """The runs' reports of one offering, oldest first: {run name: (json, markdown)}."""
    directory = tmp_path / "reports" / folder
    names = sorted(path.stem for path in directory.glob("*.json"))
    return {name: (json.loads((directory / (name + ".json")).read_text()), (directory / (name + ".md")).read_text())
            for name in names}


def custom_stats(run) -> dict:
    """The run's set_stats data, as the default callback prints it (ANSIBLE_SHOW_CUSTOM_STATS)."""
    [line] = [line for line in run.stdout.splitlines() if line.strip().startswith("RUN: {")]
    return json.loads(line.split("RUN: ", 1)[1])


def test_each_run_keeps_its_own_report_and_the_latest_follows(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    seed_droplet_resource(waldur, do, "kept-1")
    config = write_site_config(tmp_path, waldur, do)

    first = run_audit(tmp_path, config)
    assert first.rc == 0, first.output[-4000:]
    do.app.add_fault("droplets.list", status=401, times=-1)
    second = run_audit(tmp_path, config, awx_job_id=4242)
    assert second.rc == 2, second.output[-4000:]

    runs = run_reports(tmp_path)
    assert len(runs) == 2 and all(RUN_NAME.match(name) for name in runs), sorted(runs)
    (clean_name, (clean, clean_md)), (failed_name, (failed, failed_md)) = runs.items()
    # the first run's report is untouched by the second; an AWX job names its report by its id
    assert clean["status"] == "clean" and "DigitalOcean VM" in clean_md
    assert failed_name.endswith("-job4242") and failed["status"] == "failed" and "401" in failed["msg"]
    assert failed_md.startswith("# Audit of DigitalOcean VM: failed")
    assert clean["report_files"] == [str(tmp_path / "reports" / "DigitalOcean-VM" / (clean_name + suffix))
                                     for suffix in (".json", ".md")]
    # <dir>/<offering>.json and .md are the latest run's, by a link relative to the folder
    for suffix in (".json", ".md"):
        latest = tmp_path / "reports" / ("DigitalOcean-VM" + suffix)
        assert latest.is_symlink() and str(latest.readlink()) == "DigitalOcean-VM/" + failed_name + suffix
    assert report(tmp_path, "DigitalOcean VM") == failed


def test_the_findings_are_set_stats_data_and_in_the_json_log(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    seed_droplet_resource(waldur, do, "kept-1")
    # a resource whose droplet is gone: one finding
    waldur.app.seed_resource(W.DO_OFFERING_UUID, "gone-1", state="OK", backend_id="987654321",
                             limits=dict(W.DO_PLAN_QUOTAS))
    config = write_site_config(tmp_path, waldur, do)

    run = run_audit(tmp_path, config, env={"ANSIBLE_SHOW_CUSTOM_STATS": "true"})

    assert run.rc == 2, run.output[-4000:]
    [(name, (data, _markdown))] = run_reports(tmp_path).items()
    stats = custom_stats(run)["waldur_site_agent_audit"]["DigitalOcean VM"]
    assert stats == {"status": "findings", "counts": data["counts"], "findings": data["findings"],
                     "report": str(tmp_path / "reports" / "DigitalOcean-VM" / (name + ".json"))}
    assert [item["kind"] for item in stats["findings"]] == ["vanished"]

    # the JSON log: the counts and this run's report in the pass summary, each finding in the table
    logged = run_audit(tmp_path, config, env={"ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"})
    lines = log_lines(logged)
    [summary] = [line for line in lines if line["event"] == "pass summary"]
    assert summary["status"] == "findings" and summary["vanished"] == 1
    latest = sorted(run_reports(tmp_path))[-1]
    assert summary["report"] == str(tmp_path / "reports" / "DigitalOcean-VM" / (latest + ".json"))
    assert any("gone-1" in json.dumps(line.get("msg", "")) for line in lines if line.get("task") == "Show the findings")


def test_a_failed_audit_is_set_stats_data_too(tmp_path, waldur_sim, do_sim):
    waldur, do = waldur_sim, do_sim
    config = write_site_config(tmp_path, waldur, do)
    do.app.add_fault("droplets.list", status=401, times=-1)

    run = run_audit(tmp_path, config, env={"ANSIBLE_SHOW_CUSTOM_STATS": "true"})

    assert run.rc == 2
    stats = custom_stats(run)["waldur_site_agent_audit"]["DigitalOcean VM"]
    assert stats["status"] == "failed" and "401" in stats["msg"]
    assert stats["report"].startswith(str(tmp_path / "reports" / "DigitalOcean-VM") + "/")
