"""Every rulebook of extensions/eda/rulebooks against ansible-rulebook's own JSON schema, and the
controller rulebook beside the ansible-rulebook one: the same events, the same variables for the
passes, launched as the AWX workflow EDA controller can run."""

from __future__ import annotations

import json
from pathlib import Path

import ansible_rulebook
import jsonschema
import pytest
import yaml
from ansible_rulebook import rules_parser
from ansible_rulebook.util import substitute_variables
from ansible_rulebook.validators import Validate

from tests.helpers import REPO

RULEBOOKS = REPO / "extensions" / "eda" / "rulebooks"
SCHEMA = Path(ansible_rulebook.__file__).parent / "schema" / "ruleset_schema.json"
CONFIG = "/etc/waldur/waldur-site-agent-config.yaml"
OFFERING_UUID = "d0000000000000000000000000000001"
EVENTS = {
    "Order event": {"waldur": {"type": "order", "offering_uuid": OFFERING_UUID,
                               "order_uuids": ["0123456789abcdef0123456789abcdef", "5b1f0c2d6e7a4b8c9d0e1f2a3b4c5d6e"]}},
    "Resource event": {"waldur": {"type": "resource", "offering_uuid": OFFERING_UUID,
                                  "resource_uuids": ["fedcba9876543210fedcba9876543210"]}},
    "Order sweep": {"waldur": {"type": "sweep", "pass_name": "order_process", "offering_uuid": OFFERING_UUID}},
    "Membership sweep": {"waldur": {"type": "sweep", "pass_name": "membership_sync", "offering_uuid": OFFERING_UUID}},
}


def load(name):
    return yaml.safe_load((RULEBOOKS / name).read_text())


def rules_by_kind(rulebook):
    """{"Order event": rule, ...}: the rule names start with the event kind they serve."""
    (ruleset,) = rulebook
    return {kind: rule for kind in EVENTS for rule in ruleset["rules"] if rule["name"].startswith(kind)}


@pytest.mark.parametrize("path", sorted(RULEBOOKS.glob("*.yml")), ids=lambda path: path.name)
def test_the_rulebook_is_valid_against_ansible_rulebooks_schema(path):
    rulebook = yaml.safe_load(path.read_text())
    jsonschema.validate(rulebook, json.loads(SCHEMA.read_text()))
    Validate.rulebook(rulebook)  # what ansible-rulebook itself runs on loading it
    rules_parser.parse_rules(rulebook[0]["rules"], {"waldur_site_agent_config": CONFIG})  # conditions compile


def test_the_controller_rulebook_serves_the_same_events_with_actions_eda_controller_runs():
    local, controller = load("event_process.yml"), load("event_process_controller.yml")
    assert {key: value for key, value in local[0].items() if key not in ("rules", "name")} == \
        {key: value for key, value in controller[0].items() if key not in ("rules", "name")}
    local_rules, controller_rules = rules_by_kind(local), rules_by_kind(controller)
    assert len(controller[0]["rules"]) == len(local[0]["rules"]) == len(EVENTS) == len(controller_rules)
    for kind, rule in controller_rules.items():
        assert rule["condition"] == local_rules[kind]["condition"], kind
        # EDA controller runs run_job_template and run_workflow_template, never run_playbook
        assert list(rule["action"]) == ["run_workflow_template"], kind


@pytest.mark.parametrize("kind", EVENTS)
def test_the_workflow_gets_the_variables_the_playbook_got_but_the_config_path(kind):
    local = rules_by_kind(load("event_process.yml"))[kind]["action"]["run_playbook"]
    controller = rules_by_kind(load("event_process_controller.yml"))[kind]["action"]["run_workflow_template"]
    context = {"waldur_site_agent_config": CONFIG, "event": EVENTS[kind]}

    played = substitute_variables(local["extra_vars"], context)
    launched = substitute_variables(controller, context)

    assert launched["name"] == "Waldur site agent: machines" and launched["organization"] == "Default"
    assert substitute_variables(controller, dict(context, awx_name_prefix="Site", awx_organization="Ops"))["name"] \
        == "Site: machines"
    # only the variables, no event payload; no limit: the pass runs on the job's localhost
    assert launched["include_events"] is False and launched["job_args"]["limit"] == ""
    sent = launched["job_args"]["extra_vars"]
    # the pass it asks for, by name (local["name"] is waldur.site_agent.<pass>)
    assert sent.pop("waldur_site_agent_passes") == [local["name"].rsplit(".", 1)[1]]
    # the path is the activation's, not the job's: the job template's agent_pass_config ("") reads
    # the file its own credential injects
    assert played.pop("agent_pass_config") == CONFIG
    assert sent == played
    assert isinstance(sent.get("order_process_order_uuids", []), list)
