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
REQUIRED_VARS = {"waldur_api_url": "https://waldur.example.com/api/", "waldur_api_token": "secret-token",
                 "waldur_offering_uuid": "d0000000000000000000000000000001"}


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
    rules = rules_parser.parse_rules(ruleset["rules"], dict(REQUIRED_VARS))  # conditions compile
    assert [a.action for r in rules for a in r.actions] == ["run_playbook"] * 3


def test_source_args_from_the_minimal_vars(plugin, rulebook):
    args = substitute_variables(source_args(rulebook), dict(REQUIRED_VARS))
    parsed = plugin.parse_args(args)
    assert parsed.api_root == "https://waldur.example.com/"
    assert (parsed.stomp_host, parsed.stomp_port, parsed.use_websocket, parsed.use_tls) == \
        ("waldur.example.com", 443, True, True)
    assert parsed.sweep_interval == 3600 and parsed.verify_ssl is True and parsed.ca_path is None


def test_source_args_from_every_var(plugin, rulebook):
    variables = dict(REQUIRED_VARS, waldur_verify_ssl=False, waldur_ca_path="/etc/ca.pem",
                     waldur_stomp_host="mq.example.com", waldur_stomp_port=61613, waldur_stomp_ws_path="/ws",
                     waldur_stomp_use_websocket=False, waldur_websocket_use_tls=False, waldur_sweep_interval=60)
    parsed = plugin.parse_args(substitute_variables(source_args(rulebook), variables))
    assert (parsed.stomp_host, parsed.stomp_port, parsed.stomp_ws_path) == ("mq.example.com", 61613, "/ws")
    assert (parsed.use_websocket, parsed.use_tls, parsed.verify_ssl, parsed.ca_path) == \
        (False, False, False, "/etc/ca.pem")
    assert parsed.sweep_interval == 60


def event(plugin, body):
    return plugin.message_to_event(json.dumps(body), REQUIRED_VARS["waldur_offering_uuid"], ("order", "resource")).event


def extra_vars(rule, variables, event_data):
    context = dict(variables, event=event_data)
    return substitute_variables(rule["action"]["run_playbook"]["extra_vars"], context)


def test_order_event_runs_the_order_pass_for_that_order_only(plugin, rulebook):
    rule = rule_named(rulebook, "Order event")
    assert rule["condition"] == 'event.waldur.type == "order"'
    assert rule["action"]["run_playbook"]["name"] == "waldur.site_agent.order_process"
    order = event(plugin, {"object_type": "order", "order_uuid": ORDER_UUID.upper(), "order_state": "executing"})
    rendered = extra_vars(rule, dict(REQUIRED_VARS, agent_pass_config="/etc/waldur/agent.yaml"), order)
    assert rendered == {"waldur_site_agent_hosts": "localhost", "agent_pass_config": "/etc/waldur/agent.yaml",
                        "waldur_offering_name": REQUIRED_VARS["waldur_offering_uuid"],
                        "order_process_order_uuids": [ORDER_UUID]}


def test_resource_event_runs_the_membership_pass_for_that_resource(plugin, rulebook):
    rule = rule_named(rulebook, "Resource event")
    assert rule["action"]["run_playbook"]["name"] == "waldur.site_agent.membership_sync"
    resource = event(plugin, {"object_type": "resource", "resource_uuid": RESOURCE_UUID})
    rendered = extra_vars(rule, dict(REQUIRED_VARS, waldur_offering_name="DigitalOcean droplets"), resource)
    assert rendered["membership_sync_resource_uuids"] == [RESOURCE_UUID]
    assert rendered["waldur_offering_name"] == "DigitalOcean droplets"
    assert rendered["agent_pass_config"] == ""  # the playbook then reads WALDUR_SITE_AGENT_CONFIG


def test_sweep_runs_the_full_order_pass_of_the_offering(plugin, rulebook):
    rule = rule_named(rulebook, "Sweep")
    assert rule["condition"] == 'event.waldur.type == "sweep"'
    sweep = plugin.sweep_event(REQUIRED_VARS["waldur_offering_uuid"], "interval")
    rendered = extra_vars(rule, dict(REQUIRED_VARS), sweep)
    assert rule["action"]["run_playbook"]["name"] == "waldur.site_agent.order_process"
    assert "order_process_order_uuids" not in rendered
    assert rendered["waldur_offering_name"] == REQUIRED_VARS["waldur_offering_uuid"]


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
                                    offering_uuid=REQUIRED_VARS["waldur_offering_uuid"]))
    options = documented_options(plugin)
    assert list(parsed.object_types) == options["object_types"]["default"]
    assert parsed.stomp_ws_path == options["stomp_ws_path"]["default"]
    assert (parsed.use_websocket, parsed.use_tls, parsed.verify_ssl) == (
        options["use_websocket"]["default"], options["websocket_use_tls"]["default"], options["verify_ssl"]["default"])
    for name in ("sweep_interval", "heartbeat", "connect_timeout", "request_timeout"):
        assert getattr(parsed, name) == options[name]["default"], name


def test_examples_are_rulebooks_the_source_accepts(plugin):
    examples = yaml.safe_load(plugin.EXAMPLES)
    Validate.rulebook(examples)
    for ruleset in examples:
        (source,) = ruleset["sources"]
        plugin.parse_args(source[SOURCE])


def test_credential_type_injects_what_the_rulebook_needs(rulebook):
    inputs = yaml.safe_load((CREDENTIAL / "input.yml").read_text())
    injectors = yaml.safe_load((CREDENTIAL / "injectors.yml").read_text())
    fields = {field["id"]: field for field in inputs["fields"]}
    assert fields["waldur_api_token"]["secret"] and fields["site_agent_config"]["secret"]
    assert set(inputs["required"]) <= set(fields)
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    values = dict(waldur_api_url=REQUIRED_VARS["waldur_api_url"], waldur_api_token="secret-token",
                  waldur_offering_uuid=REQUIRED_VARS["waldur_offering_uuid"], waldur_offering_name="",
                  waldur_verify_ssl=False, site_agent_config="offerings: []",
                  eda={"filename": {"site_agent_config": "/tmp/eda/site_agent_config"}})
    rendered = {key: environment.from_string(template).render(values)
                for key, template in injectors["extra_vars"].items()}
    assert rendered == {"waldur_api_url": REQUIRED_VARS["waldur_api_url"], "waldur_api_token": "secret-token",
                        "waldur_offering_uuid": REQUIRED_VARS["waldur_offering_uuid"],
                        "waldur_offering_name": REQUIRED_VARS["waldur_offering_uuid"],
                        "waldur_verify_ssl": "False", "agent_pass_config": "/tmp/eda/site_agent_config"}
    assert set(injectors["file"]) == {"template.site_agent_config"}
    # Every variable the rulebook requires (no default there) comes from the credential.
    assert set(REQUIRED_VARS) <= set(rendered)
    substitute_variables(source_args(rulebook), dict(rendered))


def test_meta_extensions_declares_the_event_sources():
    meta = yaml.safe_load((REPO / "meta" / "extensions.yml").read_text())
    directories = [entry["args"]["ext_dir"] for entry in meta["extensions"]]
    assert directories == ["eda/plugins/event_source"]
    assert (REPO / "extensions" / directories[0] / "waldur_stomp.py").is_file()
