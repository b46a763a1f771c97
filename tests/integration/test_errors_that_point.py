"""Errors that point, and a JSON log without gaps (issue 39, item 3): real ansible-playbook and
ansible-inventory runs on the ansible-core of the virtualenv (2.19+ tags the values it reads, so a
wrong type is a tagged class unless the words are the user's).

* A YAML error in the configuration file names the file, the line and the column, and never
  quotes the line (it may hold a token).
* A value of the wrong kind is named in the words of the file (integer, string, number, boolean,
  list, mapping, null), never by a Python class.
* Every record of an offering's pass carries ``offering``, and every offering that failed has its
  one ``pass summary`` record with ``status: failed`` and the ``reason``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ansible_env, run_playbook, simulator_site_config
from tests.integration.passes import REPORT_PASS, log_lines
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

ORDER_PASS = REPO / "playbooks" / "order_process.yml"
JSON_LOG = {"ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"}
# On the broken line: the error must point at it, never quote it.
TOKEN_ON_THE_LINE = "waldur-token-on-the-broken-line-7f3e91"


def _ansible_inventory(*args, env=None):
    return subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), *map(str, args)],
                          env=ansible_env(env), capture_output=True, text=True, cwd=REPO, timeout=120, check=False)


def _one_line(text: str) -> str:
    """Ansible's default callback and its error display wrap long lines."""
    return " ".join(text.split())


# ---- YAML errors: file, line, column; never the line ---------------------------------------------

BROKEN = """\
offerings:
  - name: DigitalOcean VM
    waldur_api_url: {url}/api/
     waldur_api_token: {token}
    waldur_offering_uuid: d0000000000000000000000000000001
"""


def _broken_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(BROKEN.format(url=url, token=TOKEN_ON_THE_LINE))
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("callback", ["default", "waldur.site_agent.waldur_json"])
def test_a_yaml_indentation_error_names_the_file_line_and_column_of_the_pass(tmp_path, waldur_sim, callback):
    path = _broken_config(tmp_path, waldur_sim.url)

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(path), "ANSIBLE_STDOUT_CALLBACK": callback})

    assert run.rc != 0
    # The key on line 4 is one space deeper than its neighbours: PyYAML finds the ": " at column 22.
    assert ("%s could not be read (line 4, column 22): it is not valid YAML: mapping values are not allowed"
            % path) in _one_line(run.output), run.output
    assert TOKEN_ON_THE_LINE not in run.output
    assert waldur_sim.app.calls == []


def test_the_inventory_names_the_line_and_column_the_same_way(tmp_path):
    path = _broken_config(tmp_path, "https://waldur.example.com")

    run = _ansible_inventory("-i", path, "--list", env={"ANSIBLE_INVENTORY_ENABLED": "waldur.site_agent.offerings",
                                                        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1"})

    assert run.returncode != 0
    assert ("%s could not be read (line 4, column 22): it is not valid YAML: mapping values are not allowed"
            % path) in _one_line(run.stderr), run.stderr
    assert TOKEN_ON_THE_LINE not in run.stdout + run.stderr


# ---- a wrong type in the user's words ------------------------------------------------------------

NUMERIC_PASSWORD = 918273645


def _mistyped_config(waldur_url: str) -> dict:
    config = simulator_site_config(waldur_url, "http://127.0.0.1:9", "https://127.0.0.1:9")
    do, azure = config["offerings"]
    config["reporting_periods"] = "twelve"
    do["stomp_enabled"] = "yes please"
    do["backend_settings"]["default_region"] = 3
    do["backend_settings"]["default_ssh_key_id"] = 4.5
    do["backend_components"]["cpu"]["limit"] = [8]
    azure["backend_settings"]["polling_interval"] = "five"
    azure["backend_settings"]["x509_certificate_password"] = NUMERIC_PASSWORD
    azure["backend_components"]["ram"] = None
    return config


WORDS = [
    'reporting_periods: expected an integer, got a string ("twelve")',
    'offerings[0].stomp_enabled: expected true or false, got a string ("yes please")',
    "offerings[0].backend_settings.default_region: expected a string, got an integer (3)",
    "offerings[0].backend_settings.default_ssh_key_id: expected an integer, got a number (4.5)",
    "offerings[0].backend_components.cpu.limit: expected a number, got a list",
    'offerings[1].backend_settings.polling_interval: expected a number, got a string ("five")',
    # a secret's value is never quoted, whatever its kind
    "offerings[1].backend_settings.x509_certificate_password: expected a string, got an integer;",
    "offerings[1].backend_components.ram: expected a mapping, got null",
]


def test_a_wrong_type_is_named_in_the_words_of_the_file(tmp_path, waldur_sim):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_mistyped_config(waldur_sim.url), sort_keys=False))
    path.chmod(0o600)

    run = run_playbook(ORDER_PASS, env={"WALDUR_SITE_AGENT_CONFIG": str(path)})

    assert run.rc != 0
    # the problems one per line; a trailing ';' marks where the problem ends
    text = ";\n".join(line.strip() for line in run.output.replace("\\n", "\n").splitlines()) + ";"
    for words in WORDS:
        assert words in text, (words, run.output)
    for internal in ("_AnsibleTagged", "AnsibleUnicode", "NoneType", "got int", "got str", "got float"):
        assert internal not in run.output
    assert str(NUMERIC_PASSWORD) not in run.output
    assert waldur_sim.app.calls == []


def test_the_inventory_names_a_wrong_type_in_the_same_words(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_mistyped_config("https://waldur.example.com"), sort_keys=False))

    run = _ansible_inventory("-i", path, "--list", env={"ANSIBLE_INVENTORY_ENABLED": "waldur.site_agent.offerings",
                                                        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1"})

    assert run.returncode != 0
    stderr = _one_line(run.stderr)
    assert 'offerings[1].backend_settings.polling_interval: expected a number, got a string ("five")' in stderr
    assert "offerings[0].backend_settings.default_region: expected a string, got an integer (3)" in stderr
    assert "_AnsibleTagged" not in run.stderr and str(NUMERIC_PASSWORD) not in run.stderr


# ---- the JSON log: every record of an offering carries it; every failed offering its summary --------

def _records_about(records: list[dict], name: str) -> list[dict]:
    """The records of the offering's own tasks and loop items (the run's last failure, which names
    every failed offering at once, is the run's, not one offering's)."""
    return [record for record in records
            if name in str(record.get("task", "")) or record.get("item") == name or record.get("offering") == name
            or (name in record["event"] and record.get("task") != "Fail when an offering failed (the others were processed)")]


def test_each_failed_offering_has_its_summary_and_every_record_of_it_its_offering(tmp_path, waldur_sim, do_sim):
    config = simulator_site_config(waldur_sim.url, do_sim.url)
    good = config["offerings"][0]
    wrong = dict(json.loads(json.dumps(good)), name="Wrong UUID", waldur_offering_uuid="d00000000000000000000000000000dd")
    dead = dict(json.loads(json.dumps(good)), name="Dead Waldur", waldur_offering_uuid="d00000000000000000000000000000de",
                waldur_api_url="http://127.0.0.1:9/api/")  # the discard port: nothing listens
    config["offerings"] = [good, wrong, dead]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)

    # One host (localhost) for every offering: the offering of a record comes from the pass's loop.
    run = run_playbook(ORDER_PASS, env=dict(JSON_LOG, WALDUR_SITE_AGENT_CONFIG=str(path)),
                       extra_vars={"order_process_waldur_max_retry_seconds": 1})

    assert run.rc == 2, run.output[-4000:]
    records = log_lines(run)
    summaries = {}
    for record in records:
        if record["event"] == "pass summary":
            assert record["offering"] not in summaries, "two summaries of %s" % record["offering"]
            summaries[record["offering"]] = record
    assert sorted(summaries) == ["Dead Waldur", "DigitalOcean VM", "Wrong UUID"]

    assert (summaries["DigitalOcean VM"]["status"], summaries["DigitalOcean VM"]["done"]) == ("ok", 1)
    assert "reason" not in summaries["DigitalOcean VM"]
    for name, reason in (("Wrong UUID", "Waldur shows no such offering to this token (HTTP 404)"),
                         ("Dead Waldur", "cannot reach Waldur at http://127.0.0.1:9/api/")):
        summary = summaries[name]
        assert (summary["pass"], summary["status"], summary["level"]) == ("order_process", "failed", "error")
        assert reason in summary["reason"], summary
        about = _records_about(records, name)
        assert len(about) > 5
        missing = [record for record in about if record.get("offering") != name]
        assert not missing, missing
    assert W.PROVIDER_TOKEN not in run.output


def test_an_offering_failing_after_its_summary_has_one_summary_saying_failed(tmp_path, waldur_sim, do_sim):
    """Waldur refuses to set the order done: the order pass summarises, then records the offering
    failed. The one summary carries the counts, status failed and the reason."""
    config = simulator_site_config(waldur_sim.url, do_sim.url)
    config["offerings"] = config["offerings"][:1]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    waldur_sim.app.add_fault("orders.set_state_done", status=400, body={"detail": "Refused."}, times=-1)

    run = run_playbook(ORDER_PASS, env=dict(JSON_LOG, WALDUR_SITE_AGENT_CONFIG=str(path)))

    assert run.rc == 2, run.output[-4000:]
    [summary] = [record for record in log_lines(run) if record["event"] == "pass summary"]
    assert (summary["offering"], summary["pass"], summary["refused"]) == ("DigitalOcean VM", "order_process", 1)
    assert (summary["status"], summary["level"], summary["task"]) == ("failed", "error", "Summarise the pass")
    assert "1 order(s) failed, were refused" in summary["reason"]


def test_a_report_pass_rescued_in_its_role_names_the_failure_as_the_reason(tmp_path, waldur_sim, azure_sim):
    """The report role's rescue records only the offering's name: the reason is the failure it rescued."""
    waldur_sim.app.reset("empty")
    machine = azure_sim.app.seed_vm("billed", size="Standard_B2s")
    waldur_sim.app.seed_resource(W.AZURE_OFFERING_UUID, "billed", backend_id=machine, limits=dict(W.AZURE_PLAN_QUOTAS))
    waldur_sim.app.add_fault("usages.set_usage", status=400, body={"detail": "Usage refused."}, times=-1)
    config = simulator_site_config(waldur_sim.url, azure_url=azure_sim.url)
    config["offerings"] = [offering for offering in config["offerings"] if offering["name"] == "Azure VM"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))

    run = run_playbook(REPORT_PASS, env=dict(JSON_LOG, WALDUR_SITE_AGENT_CONFIG=str(path)))

    assert run.rc != 0
    [summary] = [record for record in log_lines(run) if record["event"] == "pass summary"]
    assert (summary["offering"], summary["pass"], summary["status"]) == ("Azure VM", "report", "failed")
    assert summary["reason"].startswith("usage not recorded for 1 resource(s): resource billed"), summary
