"""The EDA content around the source: the rulebook (checked and rendered with
ansible-rulebook's own code), the plugin's JSON schema against its DOCUMENTATION, the
credential type against the rulebook's variables, and meta/extensions.yml."""

from __future__ import annotations

import json

import jinja2
import pytest
import yaml
from ansible_rulebook import rules_parser
from ansible_rulebook.util import substitute_variables
from ansible_rulebook.validators import Validate

from tests.helpers import REPO

EDA = REPO / "extensions" / "eda"
RULEBOOK = EDA / "rulebooks" / "event_process.yml"
SCHEMA = EDA / "plugins" / "event_source" / "schemas" / "waldur_stomp.json"
CREDENTIAL = EDA / "plugins" / "event_source" / "credential_types" / "waldur-site-agent"
SOURCE = "waldur.site_agent.waldur_stomp"
ORDER_UUID = "0123456789abcdef0123456789abcdef"
RESOURCE_UUID = "fedcba9876543210fedcba9876543210"
OFFERING_UUID = "d0000000000000000000000000000001"
CONFIG_VARS = {"waldur_site_agent_config": "/etc/waldur/waldur-site-agent-config.yaml"}


@pytest.fixture(scope="module")
def rulebook():
    return yaml.safe_load(RULEBOOK.read_text())


def source_args(rulebook):
    (ruleset,) = rulebook
    (source,) = ruleset["sources"]
    return source[SOURCE]


def rule_named(rulebook, prefix):
    (rule,) = [r for r in rulebook[0]["rules"] if r["name"].startswith(prefix)]
    return rule


def test_rulebook_is_valid_for_ansible_rulebook(rulebook):
    Validate.rulebook(rulebook)
    (ruleset,) = rulebook
    assert ruleset["execution_strategy"] == "sequential"  # one pass at a time
    assert [next(iter(source.keys() - {"name"})) for source in ruleset["sources"]] == [SOURCE]
    rules = rules_parser.parse_rules(ruleset["rules"], dict(CONFIG_VARS))  # conditions compile
    assert [a.action for r in rules for a in r.actions] == ["run_playbook"] * 4


def test_source_takes_only_the_config_file_and_an_offering_filter(rulebook):
    assert set(source_args(rulebook)) == {"config", "offering"}
    assert substitute_variables(source_args(rulebook), {}) == {"config": "", "offering": ""}
    assert substitute_variables(source_args(rulebook), dict(CONFIG_VARS, waldur_offering_filter="Azure VM")) == \
        {"config": CONFIG_VARS["waldur_site_agent_config"], "offering": "Azure VM"}


def event(plugin, body):
    return plugin.message_to_event(json.dumps(body), OFFERING_UUID, ("order", "resource")).event


def extra_vars(rule, variables, event_data):
    context = dict(variables, event=event_data)
    return substitute_variables(rule["action"]["run_playbook"]["extra_vars"], context)


def test_order_event_runs_the_order_pass_for_that_order_and_the_offerings_pending_ones(plugin, rulebook):
    rule = rule_named(rulebook, "Order event")
    assert rule["condition"] == 'event.waldur.type == "order"'
    assert rule["action"]["run_playbook"]["name"] == "waldur.site_agent.order_process"
    order = event(plugin, {"object_type": "order", "order_uuid": ORDER_UUID.upper(), "order_state": "executing"})
    rendered = extra_vars(rule, dict(CONFIG_VARS), order)
    assert rendered == {"waldur_site_agent_hosts": "localhost",
                        "agent_pass_config": CONFIG_VARS["waldur_site_agent_config"],
                        "waldur_offering_name": OFFERING_UUID, "order_process_order_uuids": [ORDER_UUID],
                        # the rest of a burst placed while the run started is taken by that run
                        "order_process_with_pending": True}


def test_a_batch_event_runs_one_order_pass_for_all_its_orders(plugin, rulebook):
    rule = rule_named(rulebook, "Order event")
    others = ["%032x" % number for number in (7, 8)]
    batch = plugin.merge_events([event(plugin, {"object_type": "order", "order_uuid": uuid, "order_state": state})
                                 for uuid, state in ((others[0], "pending-provider"), (others[1], "executing"),
                                                     (others[0], "executing"))])
    rendered = extra_vars(rule, dict(CONFIG_VARS), batch)
    assert rendered["order_process_order_uuids"] == others
    assert len(batch["waldur"]["messages"]) == 3 and batch["waldur"]["order_uuid"] == others[0]


def test_resource_event_runs_the_membership_pass_for_that_resource(plugin, rulebook):
    rule = rule_named(rulebook, "Resource event")
    assert rule["action"]["run_playbook"]["name"] == "waldur.site_agent.membership_sync"
    resource = event(plugin, {"object_type": "resource", "resource_uuid": RESOURCE_UUID})
    rendered = extra_vars(rule, {}, resource)
    assert rendered["membership_sync_resource_uuids"] == [RESOURCE_UUID]
    assert rendered["waldur_offering_name"] == OFFERING_UUID
    assert rendered["agent_pass_config"] == ""  # the playbook then reads WALDUR_SITE_AGENT_CONFIG


@pytest.mark.parametrize("pass_name, prefix", [("order_process", "Order sweep"),
                                               ("membership_sync", "Membership sweep")])
def test_sweeps_run_the_full_pass_of_the_offering_with_event_offerings(plugin, rulebook, pass_name, prefix):
    rule = rule_named(rulebook, prefix)
    assert rule["condition"] == 'event.waldur.type == "sweep" and event.waldur.pass_name == "%s"' % pass_name
    sweep = plugin.sweep_event(OFFERING_UUID, "interval", pass_name)
    rendered = extra_vars(rule, dict(CONFIG_VARS), sweep)
    assert rule["action"]["run_playbook"]["name"] == "waldur.site_agent." + pass_name
    assert rendered == {"waldur_site_agent_hosts": "localhost",
                        "agent_pass_config": CONFIG_VARS["waldur_site_agent_config"],
                        "waldur_offering_name": OFFERING_UUID, "agent_pass_sweep_event_offerings": True}


def documented_options(plugin):
    return yaml.safe_load(plugin.DOCUMENTATION)["options"]


def test_schema_matches_the_documentation(plugin):
    schema = json.loads(SCHEMA.read_text())
    options = documented_options(plugin)
    assert set(schema["properties"]) == set(options)
    assert set(schema["required"]) == {name for name, spec in options.items() if spec.get("required")}
    kinds = {"str": "string", "bool": "boolean", "int": "integer", "float": "number", "list": "array"}
    for name, spec in options.items():
        declared = schema["properties"][name]["type"]
        declared = [declared] if isinstance(declared, str) else declared
        assert kinds[spec["type"]] in declared, name
        assert schema["properties"][name].get("default") == spec.get("default"), name


def test_documented_defaults_are_the_parsed_defaults(plugin):
    parsed = plugin.parse_args(dict(waldur_api_url="https://w.example.com", waldur_api_token="t",
                                    offering_uuid=OFFERING_UUID))
    options = documented_options(plugin)
    assert list(parsed.object_types) == options["object_types"]["default"]
    assert parsed.stomp_ws_path == options["stomp_ws_path"]["default"]
    assert (parsed.use_websocket, parsed.use_tls, parsed.verify_ssl) == (
        options["use_websocket"]["default"], options["websocket_use_tls"]["default"], options["verify_ssl"]["default"])
    for name in ("sweep_interval", "membership_sweep_interval", "heartbeat", "connect_timeout", "request_timeout"):
        assert getattr(parsed, name) == options[name]["default"], name


def test_examples_are_rulebooks_the_source_accepts(plugin):
    examples = yaml.safe_load(plugin.EXAMPLES)
    Validate.rulebook(examples)
    for ruleset in examples:
        (source,) = ruleset["sources"]
        if "config" not in source[SOURCE]:
            plugin.parse_args(source[SOURCE])


def test_credential_type_injects_what_the_rulebook_needs(rulebook):
    inputs = yaml.safe_load((CREDENTIAL / "input.yml").read_text())
    injectors = yaml.safe_load((CREDENTIAL / "injectors.yml").read_text())
    fields = {field["id"]: field for field in inputs["fields"]}
    assert fields["site_agent_config"]["secret"]
    assert inputs["required"] == ["site_agent_config"]
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    values = dict(site_agent_config="offerings: []",
                  eda={"filename": {"site_agent_config": "/tmp/eda/site_agent_config"}})
    rendered = {key: environment.from_string(template).render(values)
                for key, template in injectors["extra_vars"].items()}
    assert rendered == {"waldur_site_agent_config": "/tmp/eda/site_agent_config", "waldur_offering_filter": ""}
    assert set(injectors["file"]) == {"template.site_agent_config"}
    assert substitute_variables(source_args(rulebook), dict(rendered)) == \
        {"config": "/tmp/eda/site_agent_config", "offering": ""}


def test_meta_extensions_declares_the_event_sources():
    meta = yaml.safe_load((REPO / "meta" / "extensions.yml").read_text())
    directories = [entry["args"]["ext_dir"] for entry in meta["extensions"]]
    assert directories == ["eda/plugins/event_source"]
    assert (REPO / "extensions" / directories[0] / "waldur_stomp.py").is_file()
