"""The waldur.site_agent.schedule role: systemd units and cron entries for the passes."""

from __future__ import annotations

import fcntl
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import collection_path, run_playbook

pytestmark = pytest.mark.integration

PASSES = ("order_process", "report", "membership_sync")
PERIOD_VARIABLES = ("WALDUR_SITE_AGENT_ORDER_PROCESS_PERIOD_MINUTES", "WALDUR_SITE_AGENT_REPORT_PERIOD_MINUTES",
                    "WALDUR_SITE_AGENT_MEMBERSHIP_SYNC_PERIOD_MINUTES")
VENV = Path(sys.executable).parent.parent
ANSIBLE_PLAYBOOK = VENV / "bin" / "ansible-playbook"
FLOCK = shutil.which("flock") or "/usr/bin/flock"


@pytest.fixture(autouse=True)
def default_periods(monkeypatch):
    """The periods come from the upstream agent's variables; start each test without them."""
    for name in PERIOD_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def apply_role(tmp_path: Path, check: bool = False, env: dict | None = None, **role_vars):
    """Run the role on localhost with everything pointed into tmp_path, no systemctl."""
    settings = {
        "schedule_systemd_dir": str(tmp_path / "units"),
        "schedule_systemd_manage": False,
        "schedule_cron_file": str(tmp_path / "cron.d" / "waldur-site-agent"),
        "schedule_cron_log_dir": str(tmp_path / "log"),
        "schedule_venv": str(VENV),
        "schedule_flock": FLOCK,
        "schedule_lock_dir": str(tmp_path / "lock"),
    }
    settings.update(role_vars)
    for directory in ("units", "cron.d", "lock"):
        (tmp_path / directory).mkdir(exist_ok=True)
    play = [{"name": "Schedule the passes", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "roles": [{"role": "waldur.site_agent.schedule"}]}]
    return run_playbook(play, extra_vars=settings, check=check, env=env)


def changed_count(output: str) -> int:
    return int(re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)", output).group(1))


def unit_settings(path: Path) -> dict[str, list[str]]:
    """Key -> values of a unit file (a key may repeat, e.g. Environment=)."""
    settings: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


def unit_environment(settings: dict[str, list[str]]) -> dict[str, str]:
    return dict(shlex.split(value)[0].split("=", 1) for value in settings.get("Environment", []))


def test_units_for_the_default_periods_pass_systemd_analyze_verify(tmp_path):
    run = apply_role(tmp_path)

    assert run.rc == 0, run.output
    units = tmp_path / "units"
    assert sorted(p.name for p in units.iterdir()) == sorted(
        f"waldur-site-agent-{name}.{kind}" for name in PASSES for kind in ("service", "timer"))
    for name, seconds in (("order_process", 300), ("report", 1800), ("membership_sync", 300)):
        timer = unit_settings(units / f"waldur-site-agent-{name}.timer")
        assert timer["OnUnitActiveSec"] == [f"{seconds}s"]
        assert timer["OnBootSec"] == ["120s"]
        assert timer["RandomizedDelaySec"] == ["30s"]
        assert timer["Unit"] == [f"waldur-site-agent-{name}.service"]
        assert timer["WantedBy"] == ["timers.target"]
        service = unit_settings(units / f"waldur-site-agent-{name}.service")
        assert service["Type"] == ["oneshot"]
        assert service["User"] == ["root"]
        assert service["ExecStart"] == [
            f"{FLOCK} -n -E 75 {tmp_path}/lock/waldur-site-agent-{name}.lock {ANSIBLE_PLAYBOOK} waldur.site_agent.{name}"]
        assert service["SuccessExitStatus"] == ["75"]
        environment = unit_environment(service)
        assert environment["WALDUR_SITE_AGENT_CONFIG"] == "/etc/waldur/waldur-site-agent-config.yaml"
        assert environment["ANSIBLE_STDOUT_CALLBACK"] == "waldur.site_agent.waldur_json"
        assert environment["ANSIBLE_PYTHON_INTERPRETER"] == str(VENV / "bin" / "python")

    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: scripts/ensure-system-packages.sh installs it (package systemd)"
    verify = subprocess.run([analyze, "verify", "--man=no", *sorted(str(p) for p in units.iterdir())],
                            capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stderr
    # systemd-analyze only warns about unknown keys or bad values; any message is a defect.
    assert verify.stderr.strip() == "" and verify.stdout.strip() == ""


def test_periods_come_from_the_upstream_environment_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("WALDUR_SITE_AGENT_ORDER_PROCESS_PERIOD_MINUTES", "2.5")
    monkeypatch.setenv("WALDUR_SITE_AGENT_REPORT_PERIOD_MINUTES", "60")

    run = apply_role(tmp_path)

    assert run.rc == 0, run.output
    units = tmp_path / "units"
    assert unit_settings(units / "waldur-site-agent-order_process.timer")["OnUnitActiveSec"] == ["150s"]
    assert unit_settings(units / "waldur-site-agent-report.timer")["OnUnitActiveSec"] == ["3600s"]
    assert unit_settings(units / "waldur-site-agent-membership_sync.timer")["OnUnitActiveSec"] == ["300s"]
    assert "every 2.5 minutes" in (units / "waldur-site-agent-order_process.timer").read_text()


def test_a_period_that_is_not_a_number_is_refused(tmp_path):
    run = apply_role(tmp_path, schedule_report_period_minutes="half an hour")

    assert run.rc != 0
    assert "schedule_report_period_minutes: expected a positive number of minutes" in run.output
    assert not list((tmp_path / "units").iterdir())


def test_check_mode_writes_nothing_and_a_second_run_changes_nothing(tmp_path):
    check = apply_role(tmp_path, check=True)
    assert check.rc == 0, check.output
    assert changed_count(check.output) > 0
    assert not list((tmp_path / "units").iterdir())

    first = apply_role(tmp_path)
    assert first.rc == 0, first.output
    assert changed_count(first.output) > 0
    written = {p.name: p.read_text() for p in (tmp_path / "units").iterdir()}

    second = apply_role(tmp_path)
    assert second.rc == 0, second.output
    assert changed_count(second.output) == 0
    assert {p.name: p.read_text() for p in (tmp_path / "units").iterdir()} == written

    again = apply_role(tmp_path, check=True)
    assert changed_count(again.output) == 0


def test_units_of_passes_no_longer_scheduled_are_removed(tmp_path):
    assert apply_role(tmp_path).rc == 0

    run = apply_role(tmp_path, schedule_passes=["order_process"])

    assert run.rc == 0, run.output
    assert sorted(p.name for p in (tmp_path / "units").iterdir()) == [
        "waldur-site-agent-order_process.service", "waldur-site-agent-order_process.timer"]


def test_state_absent_removes_the_units(tmp_path):
    assert apply_role(tmp_path).rc == 0

    run = apply_role(tmp_path, schedule_state="absent")

    assert run.rc == 0, run.output
    assert not list((tmp_path / "units").iterdir())


def test_the_service_command_runs_the_pass_once_at_a_time(tmp_path):
    """Run the ExecStart of a rendered service with its Environment=: the playbook sees the
    configuration path; while another run holds the pass's lock, the command exits 75 at once."""
    marker = tmp_path / "ran.txt"
    probe = tmp_path / "probe.yml"
    probe.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.copy:\n"
        f"        dest: {marker}\n"
        "        content: \"{{ lookup('ansible.builtin.env', 'WALDUR_SITE_AGENT_CONFIG') }}\"\n")
    run = apply_role(tmp_path, schedule_playbooks={"order_process": str(probe)},
                     schedule_config_path=str(tmp_path / "site agent.yaml"),
                     schedule_collections_path=str(collection_path()))
    assert run.rc == 0, run.output
    service = unit_settings(tmp_path / "units" / "waldur-site-agent-order_process.service")
    command = shlex.split(service["ExecStart"][0])
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **unit_environment(service)}

    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert marker.read_text() == str(tmp_path / "site agent.yaml")
    marker.unlink()

    with open(tmp_path / "lock" / "waldur-site-agent-order_process.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = time.monotonic()
        skipped = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60, check=False)
    assert skipped.returncode == 75
    assert time.monotonic() - started < 5
    assert not marker.exists()


def test_cron_mode_writes_one_entry_per_pass_and_removes_the_units(tmp_path):
    assert apply_role(tmp_path).rc == 0

    run = apply_role(tmp_path, schedule_mode="cron")

    assert run.rc == 0, run.output
    assert not list((tmp_path / "units").iterdir())
    cron = (tmp_path / "cron.d" / "waldur-site-agent").read_text()
    assert "WALDUR_SITE_AGENT_CONFIG=/etc/waldur/waldur-site-agent-config.yaml\n" in cron
    assert "ANSIBLE_STDOUT_CALLBACK=waldur.site_agent.waldur_json\n" in cron
    entries = [line for line in cron.splitlines() if line and not line.startswith("#") and "=" not in line.split()[0]]
    command = "{flock} -n -E 75 {lock}/waldur-site-agent-{name}.lock /usr/bin/timeout 3600 {playbook} " \
              "waldur.site_agent.{name} >> {log}/{name}.log 2>&1"
    assert entries == [
        f"{when} root " + command.format(flock=FLOCK, lock=tmp_path / "lock", playbook=ANSIBLE_PLAYBOOK,
                                         name=name, log=tmp_path / "log")
        for when, name in (("*/5 * * * *", "order_process"), ("1-59/30 * * * *", "report"),
                           ("2-59/5 * * * *", "membership_sync"))]
    assert (tmp_path / "log").is_dir()

    again = apply_role(tmp_path, schedule_mode="cron")
    assert changed_count(again.output) == 0


def test_cron_mode_refuses_a_period_cron_cannot_keep_even(tmp_path, monkeypatch):
    monkeypatch.setenv("WALDUR_SITE_AGENT_REPORT_PERIOD_MINUTES", "7")

    run = apply_role(tmp_path, schedule_mode="cron")

    assert run.rc != 0
    assert "schedule_report_period_minutes: expected a positive number of minutes that cron can keep evenly" in run.output
    assert not (tmp_path / "cron.d" / "waldur-site-agent").exists()


def test_a_missing_ansible_playbook_is_named(tmp_path):
    run = apply_role(tmp_path, schedule_ansible_playbook=str(tmp_path / "nowhere" / "ansible-playbook"))

    assert run.rc != 0
    assert f"{tmp_path}/nowhere/ansible-playbook: not an executable file on localhost" in run.output
    assert not list((tmp_path / "units").iterdir())


def test_a_daily_audit_is_scheduled_when_listed(tmp_path):
    passes = list(PASSES) + ["audit"]
    run = apply_role(tmp_path, schedule_passes=passes,
                     schedule_environment={"WALDUR_SITE_AGENT_AUDIT_DIR": "/var/lib/waldur-site-agent/audit"})

    assert run.rc == 0, run.output
    units = tmp_path / "units"
    timer = unit_settings(units / "waldur-site-agent-audit.timer")
    assert timer["OnUnitActiveSec"] == ["86400s"]
    service = unit_settings(units / "waldur-site-agent-audit.service")
    assert service["ExecStart"] == [
        f"{FLOCK} -n -E 75 {tmp_path}/lock/waldur-site-agent-audit.lock {ANSIBLE_PLAYBOOK} waldur.site_agent.audit"]
    assert unit_environment(service)["WALDUR_SITE_AGENT_AUDIT_DIR"] == "/var/lib/waldur-site-agent/audit"
    verify = subprocess.run([shutil.which("systemd-analyze") or "systemd-analyze", "verify", "--man=no",
                             str(units / "waldur-site-agent-audit.service"), str(units / "waldur-site-agent-audit.timer")],
                            capture_output=True, text=True, check=False)
    assert verify.returncode == 0 and verify.stderr.strip() == "", verify.stderr

    cron = apply_role(tmp_path, schedule_passes=passes, schedule_mode="cron")
    assert cron.rc == 0, cron.output
    entries = (tmp_path / "cron.d" / "waldur-site-agent").read_text()
    assert re.search(r"^3 0 \* \* \* root .*waldur-site-agent-audit\.lock .* waldur\.site_agent\.audit ", entries, re.M)
    assert not list(units.iterdir())

    # dropped from the list, it is removed like any pass
    apply_role(tmp_path, schedule_passes=passes)
    apply_role(tmp_path)
    assert not (units / "waldur-site-agent-audit.timer").exists()
