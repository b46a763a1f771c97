"""The JSON callback's EXAMPLES show what it logs: each example line is a record of the kind an
order pass on DigitalOcean logs (same event, same keys, same task name), run as the example says
(ANSIBLE_STDOUT_CALLBACK and the configuration file in WALDUR_SITE_AGENT_CONFIG)."""

from __future__ import annotations

import ast
import json
import re

import pytest

from tests.helpers import REPO
from tests.integration.passes import ORDER_PASS, log_lines, run_pass, write_config

pytestmark = pytest.mark.integration


def _examples() -> str:
    for node in ast.parse((REPO / "plugins" / "callback" / "waldur_json.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "EXAMPLES":
            return node.value.value
    raise AssertionError("no EXAMPLES")


def _example_records(text: str) -> list[dict]:
    """The JSON records of EXAMPLES (comment lines; a record may continue on the next lines)."""
    lines = [line[2:] if line.startswith("# ") else line[1:] for line in text.splitlines() if line.startswith("#")]
    records, current = [], ""
    for line in lines:
        if line.startswith("{"):
            current = line
        elif current:
            current += " " + line.strip()
        if current and current.rstrip().endswith("}"):
            records.append(json.loads(current))
            current = ""
    return records


def _shape(event: str) -> re.Pattern:
    """An example's event with its numbers and UUIDs as wildcards."""
    return re.compile("^%s$" % re.sub(r"\d+", r"\\d+", re.escape(event)))


def test_the_examples_command_and_records_are_what_a_pass_logs(tmp_path, waldur_sim, do_sim):
    text = _examples()
    assert "ANSIBLE_STDOUT_CALLBACK=waldur.site_agent.waldur_json" in text
    assert "WALDUR_SITE_AGENT_CONFIG=" in text and "ansible-playbook waldur.site_agent.order_process" in text
    examples = _example_records(text)
    assert len(examples) >= 3, examples

    records = log_lines(run_pass(ORDER_PASS, write_config(tmp_path, waldur_sim, do=do_sim), json_log=True))

    for example in examples:
        same = [record for record in records if _shape(example["event"]).match(record["event"])
                and set(record) == set(example) and record.get("task") == example.get("task")
                and record.get("level") == example["level"] and record.get("logger") == example["logger"]]
        assert same, (example, records)
