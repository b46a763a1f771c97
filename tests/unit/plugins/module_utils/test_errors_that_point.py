"""Errors that point (issue 39, item 3): a YAML error names the file, line and column and never
quotes the line; a wrong type is named in the words of the file, also for the tagged values
ansible-core 2.19+ hands over; the JSON log's summary of an offering says how its pass ended."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader

from ansible_collections.waldur.site_agent.plugins.plugin_utils.result_records import offering_end as _offering_end
from ansible_collections.waldur.site_agent.plugins.plugin_utils.result_records import summary_level as _summary_level
from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import (
    _type_name,
    describe_value,
    validate,
    yaml_error_text,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.events import settings

TOKEN = "tok-3b9d0c55e1a24f7788"
# Line 3 has one space too many: the ': ' after its key is at column 22.
BROKEN = "offerings:\n  - name: DO\n     waldur_api_token: %s\n" % TOKEN


def _broken(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("offerings:\n  - name: DO\n    waldur_api_url: https://waldur.example.com/api/\n"
                    "     waldur_api_token: %s\n" % TOKEN)
    return path


# ---- YAML errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("loader", ["SafeLoader", "CSafeLoader"])
def test_pyyaml_errors_give_the_position_and_problem_never_the_snippet(loader):
    if not hasattr(yaml, loader):
        pytest.skip("PyYAML without libyaml")
    with pytest.raises(yaml.YAMLError) as caught:
        yaml.load(BROKEN, Loader=getattr(yaml, loader))
    if loader == "SafeLoader":
        assert TOKEN in str(caught.value)  # PyYAML's own text quotes the line

    text = yaml_error_text("/etc/waldur/config.yaml", caught.value)

    assert text.startswith("/etc/waldur/config.yaml could not be read (line 3, column 22): it is not valid YAML: "
                           "mapping values are not allowed"), text
    assert TOKEN not in text and "\n" not in text


def test_an_unclosed_quote_names_where_the_quote_started():
    with pytest.raises(yaml.YAMLError) as caught:
        yaml.load('offerings:\n  - name: "DO\n', Loader=yaml.SafeLoader)
    assert yaml_error_text("c.yaml", caught.value) == (
        "c.yaml could not be read (line 3, column 1): it is not valid YAML: found unexpected end of stream "
        "(while scanning a quoted scalar that starts at line 2, column 11)")


def test_ansible_loader_errors_give_the_position_and_problem_never_the_line(tmp_path):
    path = _broken(tmp_path)
    with pytest.raises(AnsibleError) as caught:
        DataLoader().load_from_file(str(path), cache="none")

    text = yaml_error_text(str(path), caught.value)

    assert text.startswith("%s could not be read (line 4, column 22): it is not valid YAML: mapping values are not "
                           "allowed" % path), text
    assert TOKEN not in text


def test_an_error_that_is_not_yaml_keeps_its_own_words(tmp_path):
    vaulted = tmp_path / "vaulted.yaml"
    vaulted.write_text("$ANSIBLE_VAULT;1.1;AES256\n3031\n")
    with pytest.raises(AnsibleError) as caught:
        DataLoader().load_from_file(str(vaulted), cache="none")

    text = yaml_error_text(str(vaulted), caught.value)

    assert text.startswith("%s could not be read" % vaulted) and "not valid YAML" not in text
    assert "vault" in text.lower()


def test_the_event_source_names_the_line_and_column(tmp_path):
    path = _broken(tmp_path)
    with pytest.raises(ValueError) as caught:
        settings.read_site_config(str(path), environ={})
    message = str(caught.value)
    assert message.startswith("config: %s could not be read (line 4, column 22): it is not valid YAML: mapping "
                              "values are not allowed" % path), message
    assert TOKEN not in message


# ---- kinds in the words of the file ----------------------------------------------------------------

def _tagged(tmp_path, text):
    """Values as ansible-core's loader gives them (tagged subclasses on 2.19+)."""
    path = tmp_path / "values.yaml"
    path.write_text(text)
    return DataLoader().load_from_file(str(path), cache="none")


def test_kinds_are_the_files_words_for_tagged_and_plain_values(tmp_path):
    tagged = _tagged(tmp_path, "i: 5\nf: 1.5\ns: five\nb: true\nn: null\nd: 2024-01-01\nl: [1]\nm: {x: 1}\n")
    plain = yaml.safe_load("i: 5\nf: 1.5\ns: five\nb: true\nn: null\nd: 2024-01-01\nl: [1]\nm: {x: 1}\n")
    words = {"i": "an integer", "f": "a number", "s": "a string", "b": "a boolean", "n": "null", "d": "a date",
             "l": "a list", "m": "a mapping"}
    for values in (tagged, plain):
        assert {key: _type_name(value) for key, value in values.items()} == words
    assert describe_value(tagged["i"]) == "an integer (5)"
    assert describe_value(tagged["f"]) == "a number (1.5)"
    assert describe_value(tagged["s"]) == 'a string ("five")'
    assert describe_value(tagged["b"]) == "a boolean (true)"
    assert describe_value(tagged["m"]) == "a mapping"
    assert describe_value(tagged["s"], quote=False) == "a string"
    assert describe_value("x" * 21) == "a string"  # long: never quoted (it could be a token)


def test_validation_names_tagged_values_in_the_files_words(tmp_path):
    config = _tagged(tmp_path, """\
reporting_periods: twelve
offerings:
  - name: 42
    waldur_api_url: https://waldur.example.com/api/
    waldur_api_token: %s
    waldur_offering_uuid: d0000000000000000000000000000001
    backend_type: azure
    stomp_enabled: yes please
    backend_settings:
      subscription_id: s
      tenant_id: t
      client_id: c
      client_secret: %s
      polling_interval: five
      default_size: 3
      x509_certificate_password: 918273645
    backend_components:
      cpu: [1]
      ram: null
""" % (TOKEN, TOKEN))

    errors, _warnings = validate(config)

    for expected in (
            'reporting_periods: expected an integer, got a string ("twelve")',
            "offerings[0].name: expected a string, got an integer (42)",
            'offerings[0].stomp_enabled: expected true or false, got a string ("yes please")',
            'offerings[0].backend_settings.polling_interval: expected a number, got a string ("five")',
            "offerings[0].backend_settings.default_size: expected a string, got an integer (3)",
            "offerings[0].backend_settings.x509_certificate_password: expected a string, got an integer",
            "offerings[0].backend_components.cpu: expected a mapping, got a list",
            "offerings[0].backend_components.ram: expected a mapping, got null"):
        assert expected in errors, (expected, errors)
    text = "\n".join(errors)
    assert "Ansible" not in text and "Tagged" not in text and "918273645" not in text and TOKEN not in text


def test_only_numbers_flags_and_short_words_are_quoted():
    # a token pasted one line off, into a URL or a UUID, is never printed back; a word for a number is
    config = {"offerings": [{"name": "DO", "waldur_api_url": TOKEN, "waldur_api_token": "t" * 8,
                             "waldur_offering_uuid": TOKEN, "backend_type": "digitalocean",
                             "backend_settings": {"token": "t" * 8, "default_ssh_key_id": "seven"}}]}
    errors, _warnings = validate(config)
    assert "offerings[0].waldur_api_url: expected a URL starting with http:// or https://, got a string" in errors
    assert "offerings[0].waldur_offering_uuid: expected a UUID (32 hex digits, dashes optional), got a string" in errors
    assert 'offerings[0].backend_settings.default_ssh_key_id: expected an integer, got a string ("seven")' in errors
    assert TOKEN not in "\n".join(errors)


def test_the_event_source_arguments_in_the_same_words():
    with pytest.raises(ValueError, match=r'^stomp_port must be a number, got a string \("four"\)$'):
        settings.parse_args({"waldur_api_url": "https://waldur.example.com/", "waldur_api_token": "t",
                             "offering_uuid": "d0000000000000000000000000000001", "stomp_port": "four"})
    with pytest.raises(ValueError, match=r"^verify_ssl must be a boolean, got an integer \(7\)$"):
        settings.parse_args({"waldur_api_url": "https://waldur.example.com/", "waldur_api_token": "t",
                             "offering_uuid": "d0000000000000000000000000000001", "verify_ssl": 7})


# ---- the JSON log's summary of an offering ------------------------------------------------------------

def test_an_offerings_end_is_read_from_agent_pass_fact():
    end = {"pass": "report", "offering": "Azure VM", "status": "failed", "reason": "usage not recorded"}
    assert _offering_end({"ansible_facts": {"agent_pass_offering_end": end}}) == end
    assert _offering_end({"ansible_facts": {"other": end}}) is None
    assert _offering_end({"ansible_facts": {"agent_pass_offering_end": {"pass": "report"}}}) is None
    assert _offering_end({}) is None


def test_a_failed_offerings_summary_is_an_error_and_troubled_work_a_warning():
    assert _summary_level({"status": "failed"}) == "error"
    assert _summary_level({"status": "ok", "erred": 1}) == "warning"
    assert _summary_level({"status": "ok", "erred": 0, "failed": 0}) == "info"
    assert _summary_level({"status": "findings", "failed": True}) == "info"  # a flag is not a count
