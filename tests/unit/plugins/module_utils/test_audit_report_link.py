"""write_report_files with ``link``: each run's report is a file of its own, and
``<link>.json`` / ``.md`` point at the latest, by links relative to their folder, replaced whole."""

from __future__ import annotations

import json
import os

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_report import write_report_files


def write(tmp_path, run, status):
    return write_report_files(str(tmp_path / "audit" / "DO-VM"), run, {"status": status}, "# %s\n" % status,
                              link=str(tmp_path / "audit" / "DO-VM"))


def test_the_latest_link_follows_each_run_and_no_run_overwrites_another(tmp_path):
    first = write(tmp_path, "20260301T000000Z-aaaaaaaa", "clean")
    second = write(tmp_path, "20260302T000000Z-job42", "findings")

    assert [os.path.basename(path) for path in first + second] == [
        "20260301T000000Z-aaaaaaaa.json", "20260301T000000Z-aaaaaaaa.md",
        "20260302T000000Z-job42.json", "20260302T000000Z-job42.md"]
    assert json.loads(open(first[0]).read()) == {"status": "clean"}
    for suffix, target in ((".json", second[0]), (".md", second[1])):
        latest = tmp_path / "audit" / ("DO-VM" + suffix)
        # relative, so the folder can move or be mounted elsewhere
        assert latest.is_symlink() and os.readlink(latest) == "DO-VM/" + os.path.basename(target)
    assert json.loads((tmp_path / "audit" / "DO-VM.json").read_text()) == {"status": "findings"}
    # no temporary left beside the links or the reports
    assert sorted(os.listdir(tmp_path / "audit")) == ["DO-VM", "DO-VM.json", "DO-VM.md"]
    assert len(os.listdir(tmp_path / "audit" / "DO-VM")) == 4


def test_a_report_of_an_older_version_becomes_the_link(tmp_path):
    (tmp_path / "audit").mkdir()
    (tmp_path / "audit" / "DO-VM.json").write_text('{"status": "clean"}\n')  # written in place, as before

    [report, dummy] = write(tmp_path, "20260301T000000Z-aaaaaaaa", "findings")

    assert os.readlink(tmp_path / "audit" / "DO-VM.json") == "DO-VM/" + os.path.basename(report)


def test_without_a_link_only_the_report_is_written(tmp_path):
    paths = write_report_files(str(tmp_path / "r"), "DO", {"status": "clean"}, "# clean\n")
    assert sorted(os.listdir(tmp_path / "r")) == ["DO.json", "DO.md"] and len(paths) == 2
    assert not list(tmp_path.glob("*.json"))
