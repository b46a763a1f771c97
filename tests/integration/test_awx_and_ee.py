"""AWX configuration as code (extensions/awx, playbooks/awx_configure.yml) and the
execution environment definition (execution-environment.yml, meta/execution-environment.yml).

awx.awx is not installed here and no controller runs, so playbooks/awx_configure.yml runs
against a stand-in awx.awx collection whose modules record the arguments they receive: the
test checks what the playbook would ask the controller to create.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, collection_path, copy_working_tree, run_playbook
from tests.integration.awx_standin import make_awx_standin

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
PERIOD_VARIABLES = ("WALDUR_SITE_AGENT_ORDER_PROCESS_PERIOD_MINUTES", "WALDUR_SITE_AGENT_REPORT_PERIOD_MINUTES",
                    "WALDUR_SITE_AGENT_MEMBERSHIP_SYNC_PERIOD_MINUTES")


def load_yaml(path: Path):
    return yaml.safe_load(path.read_text())


# ---------------------------------------------------------------------------------- credential types
def test_waldur_api_credential_type_injects_the_module_environment():
    base = REPO / "extensions" / "awx" / "credential_types" / "waldur_api"
    inputs, injectors = load_yaml(base / "inputs.yml"), load_yaml(base / "injectors.yml")

    fields = {field["id"]: field for field in inputs["fields"]}
    assert set(fields) == {"api_url", "api_token", "verify_ssl"}
    assert fields["api_token"]["secret"] is True
    assert fields["verify_ssl"]["type"] == "boolean" and fields["verify_ssl"]["default"] is True
    assert sorted(inputs["required"]) == ["api_token", "api_url"]
    assert injectors == {"env": {"WALDUR_API_URL": "{{ api_url }}", "WALDUR_API_TOKEN": "{{ api_token }}",
                                 "WALDUR_VERIFY_SSL": "{{ verify_ssl }}"}}


def test_digitalocean_credential_type_injects_the_access_token():
    base = REPO / "extensions" / "awx" / "credential_types" / "digitalocean"
    inputs, injectors = load_yaml(base / "inputs.yml"), load_yaml(base / "injectors.yml")

    assert [(f["id"], f["secret"]) for f in inputs["fields"]] == [("token", True)]
    assert inputs["required"] == ["token"]
    assert injectors == {"env": {"DIGITALOCEAN_ACCESS_TOKEN": "{{ token }}"}}


def test_configuration_credential_type_injects_a_file_the_passes_read():
    base = REPO / "extensions" / "awx" / "credential_types" / "site_agent_config"
    inputs, injectors = load_yaml(base / "inputs.yml"), load_yaml(base / "injectors.yml")

    field = inputs["fields"][0]
    assert (field["id"], field["secret"], field["multiline"]) == ("configuration", True, True)
    assert injectors == {"file": {"template": "{{ configuration }}"},
                         "env": {"WALDUR_SITE_AGENT_CONFIG": "{{ tower.filename }}"}}


def test_azure_sign_in_credential_type_injects_what_the_azure_modules_read():
    """Every injected variable is one the Azure modules fall back to (auth.OPTION_ENV), the
    certificate becomes the job's private file, and every secret field is secret."""
    from ansible_collections.waldur.site_agent.plugins.module_utils.azure.auth import OPTION_ENV

    base = REPO / "extensions" / "awx" / "credential_types" / "azure_sign_in"
    inputs, injectors = load_yaml(base / "inputs.yml"), load_yaml(base / "injectors.yml")
    fields = {field["id"]: field for field in inputs["fields"]}
    assert {name for name, field in fields.items() if field.get("secret")} == {
        "client_secret", "certificate", "certificate_password"}
    assert fields["auth_source"]["choices"] == ["auto", "env", "credential_file", "msi", "cli"]
    read = {name for _option, names in OPTION_ENV for name in names}
    assert set(injectors["env"]) <= read
    assert injectors["file"] == {"template": "{{ certificate }}"}
    assert injectors["env"]["AZURE_X509_CERTIFICATE_PATH"] == "{{ tower.filename if certificate else '' }}"


def test_no_injected_variable_is_one_awx_refuses():
    """AWX rejects injected environment variables starting with ANSIBLE_."""
    for injectors in (REPO / "extensions" / "awx" / "credential_types").glob("*/injectors.yml"):
        assert not [name for name in load_yaml(injectors)["env"] if name.startswith("ANSIBLE_")], injectors


# ---------------------------------------------------------------------------------- awx_configure.yml
@pytest.fixture
def awx_standin(tmp_path):
    """A stand-in awx.awx collection whose modules append their arguments to a JSON-lines log."""
    root = make_awx_standin(tmp_path / "awx-standin")
    log = tmp_path / "awx-calls.jsonl"
    log.touch()
    return root, log


def configure_awx(tmp_path, awx_standin, extra_vars=None, env=None):
    root, log = awx_standin
    config = tmp_path / "site-agent.yaml"
    config.write_text("offerings:\n  - name: DigitalOcean VM\n    waldur_api_token: config-token-5150\n")
    settings = {"awx_site_agent_config_file": str(config),
                "awx_execution_environment_image": "registry.example.com/waldur-site-agent-ee:1.0.0",
                "controller_host": "https://awx.example.com", "controller_oauthtoken": "controller-token-1984"}
    settings.update(extra_vars or {})
    environment = {"ANSIBLE_COLLECTIONS_PATH": f"{root}{os.pathsep}{collection_path()}",
                   "AWX_STANDIN_LOG": str(log), **(env or {})}
    run = run_playbook(REPO / "playbooks" / "awx_configure.yml", extra_vars=settings, env=environment, verbosity=1)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return run, calls, config


def calls_to(calls, module):
    return [call["args"] for call in calls if call["module"] == module]


def test_awx_configure_creates_types_credentials_templates_and_schedules(tmp_path, awx_standin, monkeypatch):
    for name in PERIOD_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    run, calls, config = configure_awx(tmp_path, awx_standin, extra_vars={"awx_digitalocean_token": "do-token-2600"})

    assert run.rc == 0, run.output
    assert {call["args"]["controller_host"] for call in calls} == {"https://awx.example.com"}
    assert {call["args"]["controller_oauthtoken"] for call in calls} == {"controller-token-1984"}

    types = {args["name"]: args for args in calls_to(calls, "credential_type")}
    assert set(types) == {"Waldur API", "DigitalOcean", "Waldur site agent configuration", "Azure sign-in"}
    # The injector templates reach the controller untouched, for the controller to fill in.
    for name, directory in (("Waldur API", "waldur_api"), ("DigitalOcean", "digitalocean"),
                            ("Waldur site agent configuration", "site_agent_config"),
                            ("Azure sign-in", "azure_sign_in")):
        base = REPO / "extensions" / "awx" / "credential_types" / directory
        assert types[name]["kind"] == "cloud"
        assert types[name]["inputs"] == load_yaml(base / "inputs.yml")
        assert types[name]["injectors"] == load_yaml(base / "injectors.yml")

    credentials = {args["name"]: args for args in calls_to(calls, "credential") if args.get("state") != "absent"}
    assert credentials["Waldur site agent configuration"]["credential_type"] == "Waldur site agent configuration"
    assert credentials["Waldur site agent configuration"]["inputs"] == {"configuration": config.read_text().rstrip("\n")}
    assert credentials["Waldur site agent DigitalOcean"]["inputs"] == {"token": "do-token-2600"}
    assert "Waldur site agent Waldur API" not in credentials and "Waldur site agent Azure" not in credentials
    assert "Waldur site agent Azure sign-in" not in credentials

    [environment] = calls_to(calls, "execution_environment")
    assert environment["image"] == "registry.example.com/waldur-site-agent-ee:1.0.0"
    [project] = calls_to(calls, "project")
    assert project["scm_url"] == "https://github.com/waldur/ansible-collection-site-agent.git"
    assert project["default_environment"] == environment["name"]
    [source] = calls_to(calls, "inventory_source")
    assert source["source"] == "scm" and source["credential"] == "Waldur site agent configuration"
    assert (REPO / source["source_path"]).is_file()
    assert load_yaml(REPO / source["source_path"])["plugin"] == "waldur.site_agent.offerings"

    templates = {args["name"]: args for args in calls_to(calls, "job_template")}
    assert sorted(templates) == sorted(f"Waldur site agent: {name}" for name in (
        "order_process", "report", "membership_sync", "audit", "load_components", "health", "diagnostics"))
    for name, template in templates.items():
        # the thin project's playbook, which imports the execution environment's collection
        assert template["playbook"] == "extensions/awx/project/%s.yml" % name.split(": ", 1)[1]
        assert (REPO / template["playbook"]).is_file()
        assert template["credentials"] == ["Waldur site agent configuration", "Waldur site agent DigitalOcean"]
        assert template["allow_simultaneous"] is False and template["ask_variables_on_launch"] is True
        assert template["extra_vars"]["agent_pass_config"] == ""
        assert template["execution_environment"] == environment["name"]
    assert templates["Waldur site agent: audit"]["extra_vars"] == {
        "agent_pass_config": "", "audit_cleanup": False, "audit_repair": False}

    [workflow] = calls_to(calls, "workflow_job_template")
    assert workflow["name"] == "Waldur site agent: machines" and workflow["allow_simultaneous"] is False
    assert [node["identifier"] for node in workflow["workflow_nodes"]] == ["order_process", "membership_sync", "audit"]

    schedules = {args["name"]: args for args in calls_to(calls, "schedule") if args.get("state") != "absent"}
    assert {name: (args["unified_job_template"], args["rrule"]) for name, args in schedules.items()} == {
        "Waldur site agent: order_process, membership_sync": (
            "Waldur site agent: machines", "DTSTART:20240101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=5"),
        "Waldur site agent: audit": ("Waldur site agent: machines", "DTSTART:20240101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=1440"),
        "Waldur site agent: report": ("Waldur site agent: report", "DTSTART:20240101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=30"),
    }

    for secret in ("config-token-5150", "do-token-2600", "controller-token-1984"):
        assert secret not in run.output


def test_awx_configure_attaches_an_azure_sign_in_credential_for_a_certificate(tmp_path, awx_standin):
    """A certificate (or another auth_source, or a sovereign cloud) takes the collection's Azure
    sign-in credential in place of AWX's built-in client-secret one; the PEM is never shown."""
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvAIBADANBgkqhkiG9w0BAQEFAASC-key-1701\n-----END PRIVATE KEY-----\n"
    run, calls, dummy = configure_awx(tmp_path, awx_standin, extra_vars={
        "awx_azure_subscription_id": "sub-1", "awx_azure_tenant_id": "tenant-1", "awx_azure_client_id": "client-1",
        "awx_azure_certificate": pem, "awx_azure_cloud_environment": "AzureUSGovernment",
        "awx_use_offerings_inventory": False})

    assert run.rc == 0, run.output
    credentials = {args["name"]: args for args in calls_to(calls, "credential") if args.get("state") != "absent"}
    assert "Waldur site agent Azure" not in credentials
    sign_in = credentials["Waldur site agent Azure sign-in"]
    assert sign_in["credential_type"] == "Azure sign-in"
    assert sign_in["inputs"]["certificate"] == pem and sign_in["inputs"]["auth_source"] == "auto"
    assert sign_in["inputs"]["cloud_environment"] == "AzureUSGovernment"
    for template in calls_to(calls, "job_template"):
        assert "Waldur site agent Azure sign-in" in template["credentials"]
    assert "key-1701" not in run.output


def test_awx_schedules_follow_the_period_variables(tmp_path, awx_standin, monkeypatch):
    monkeypatch.setenv("WALDUR_SITE_AGENT_ORDER_PROCESS_PERIOD_MINUTES", "2")
    monkeypatch.setenv("WALDUR_SITE_AGENT_REPORT_PERIOD_MINUTES", "60")
    monkeypatch.setenv("WALDUR_SITE_AGENT_MEMBERSHIP_SYNC_PERIOD_MINUTES", "15")

    run, calls, dummy = configure_awx(tmp_path, awx_standin, extra_vars={"awx_use_offerings_inventory": False})

    assert run.rc == 0, run.output
    assert [(args["name"], args["rrule"].split(" ", 1)[1]) for args in calls_to(calls, "schedule")
            if args.get("state") != "absent"] == [
        ("Waldur site agent: order_process", "RRULE:FREQ=MINUTELY;INTERVAL=2"),
        ("Waldur site agent: membership_sync", "RRULE:FREQ=MINUTELY;INTERVAL=15"),
        ("Waldur site agent: audit", "RRULE:FREQ=MINUTELY;INTERVAL=1440"),
        ("Waldur site agent: report", "RRULE:FREQ=MINUTELY;INTERVAL=60")]
    assert calls_to(calls, "inventory_source") == []


def test_awx_configure_refuses_a_fractional_period(tmp_path, awx_standin, monkeypatch):
    monkeypatch.setenv("WALDUR_SITE_AGENT_ORDER_PROCESS_PERIOD_MINUTES", "2.5")

    run, calls, dummy = configure_awx(tmp_path, awx_standin)

    assert run.rc != 0
    assert "awx_period_minutes.order_process: the controller schedules whole minutes, got 2.5" in run.output
    assert calls == []


def test_awx_configure_needs_the_image_and_the_configuration(tmp_path, awx_standin):
    run, calls, dummy = configure_awx(tmp_path, awx_standin, extra_vars={"awx_execution_environment_image": ""})

    assert run.rc != 0
    assert "awx_execution_environment_image the execution environment image" in run.output
    assert calls == []


# ---------------------------------------------------------------------------------- execution environment
def test_collection_declares_its_requirements_for_execution_environments():
    meta = load_yaml(REPO / "meta" / "execution-environment.yml")

    assert meta == {"version": 1, "dependencies": {"python": "requirements.txt", "system": "bindep.txt"}}
    assert (REPO / "requirements.txt").is_file() and (REPO / "bindep.txt").is_file()


@pytest.fixture(scope="module")
def built_collection(tmp_path_factory):
    """The collection built from the files of the working tree that git would commit."""
    source = copy_working_tree(tmp_path_factory.mktemp("ee-src"))
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", "dist"],
                   cwd=source, capture_output=True, check=True)
    [tarball] = (source / "dist").glob("waldur-site_agent-*.tar.gz")
    return source, tarball


def test_ansible_builder_creates_a_build_context_with_the_collection(built_collection, tmp_path):
    source, tarball = built_collection
    context = tmp_path / "context"

    create = subprocess.run([str(BIN / "ansible-builder"), "create", "--file", "execution-environment.yml",
                             "--context", str(context)], cwd=source, capture_output=True, text=True, check=False)

    assert create.returncode == 0, create.stdout + create.stderr
    [build_file] = [p for p in (context / "Containerfile", context / "Dockerfile") if p.exists()]
    text = build_file.read_text()
    assert (context / "_build" / "collections" / tarball.name).read_bytes() == tarball.read_bytes()
    assert ("ansible-galaxy collection install --offline --no-deps --collections-path /usr/share/ansible/collections "
            "/tmp/waldur-collections/waldur-site_agent-*.tar.gz") in text
    assert "--user-pip=requirements.txt --user-bindep=bindep.txt" in text
    assert (context / "_build" / "requirements.txt").read_text() == (REPO / "requirements.txt").read_text()
    assert (context / "_build" / "bindep.txt").read_text() == (REPO / "bindep.txt").read_text()
    assert 'ARG PYCMD="/usr/bin/python3.12"' in text
    # The collection is installed in the base stage, before the builder stage introspects it.
    assert text.index("waldur-site_agent-*.tar.gz") < text.index("FROM base AS builder") < text.index("introspect")


def test_ansible_builder_introspect_finds_the_installed_collections_requirements(built_collection, tmp_path):
    dummy, tarball = built_collection
    installed = tmp_path / "collections"
    # Only that path counts as installed (make exports ANSIBLE_COLLECTIONS_PATH with the checkout's link).
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "-p",
                    str(installed), str(tarball)], capture_output=True, check=True,
                   env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed)))

    introspect = subprocess.run([str(BIN / "ansible-builder"), "introspect", str(installed)],
                                capture_output=True, text=True, check=False)

    assert introspect.returncode == 0, introspect.stderr
    report = yaml.safe_load(introspect.stdout)
    requirements = [line.strip() for line in (REPO / "requirements.txt").read_text().splitlines()
                    if line.strip() and not line.startswith("#")]
    assert report["python"] == [f"{line}  # from collection waldur.site_agent" for line in requirements]
    assert report["system"] == ["ca-certificates [platform:rpm platform:dpkg]  # from collection waldur.site_agent"]


def test_the_built_collection_holds_the_operations_content(built_collection):
    dummy, tarball = built_collection
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    for expected in ("meta/execution-environment.yml", "bindep.txt", "requirements.txt",
                     "roles/schedule/meta/argument_specs.yml", "playbooks/health.yml", "playbooks/diagnostics.yml",
                     "playbooks/awx_configure.yml", "extensions/awx/credential_types/waldur_api/injectors.yml",
                     "extensions/awx/inventory/waldur_offerings.yml", "extensions/awx/project/order_process.yml",
                     "extensions/awx/project/pass_not_asked.yml", "extensions/eda/rulebooks/event_process_controller.yml",
                     "decision-environment.yml"):
        assert expected in names


def test_ansible_builder_creates_a_decision_environment_with_the_source_and_no_cloud_sdk(built_collection, tmp_path):
    """decision-environment.yml: the event source's needs (ansible-rulebook, Java, stomp-py,
    requests, ansible-core) and the collection from the same tarball as the execution environment,
    installed after the introspection, which would add the passes' cloud SDKs."""
    source, tarball = built_collection
    context = tmp_path / "context"

    create = subprocess.run([str(BIN / "ansible-builder"), "create", "--file", "decision-environment.yml",
                             "--context", str(context)], cwd=source, capture_output=True, text=True, check=False)

    assert create.returncode == 0, create.stdout + create.stderr
    [build_file] = [p for p in (context / "Containerfile", context / "Dockerfile") if p.exists()]
    text = build_file.read_text()
    assert (context / "_build" / "collections" / tarball.name).read_bytes() == tarball.read_bytes()
    python = (context / "_build" / "requirements.txt").read_text().split()
    assert python[0].startswith("ansible-rulebook") and set(python[1:]) == {"stomp-py>=8.2.0", "requests>=2.31"}
    floors = {line.split(">=")[0]: line for line in (REPO / "requirements.txt").read_text().splitlines()
              if line and not line.startswith("#")}
    assert all(floors[line.split(">=")[0]] == line for line in python[1:])
    assert "java-17-openjdk-headless [platform:rpm]" in (context / "_build" / "bindep.txt").read_text()
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core>=2.21,<2.22 ansible-runner>=2.4"' in text
    install = ("ansible-galaxy collection install --offline --no-deps --collections-path /usr/share/ansible/collections "
               "/tmp/waldur-collections/waldur-site_agent-*.tar.gz")
    assert text.index("introspect") < text.index("FROM base AS final") < text.index(install) < text.index("USER 1000")


def test_every_pass_names_the_collection_version_it_runs(built_collection, tmp_path):
    """Installed (MANIFEST.json, as in an execution environment) the first line of a pass names its
    version; the AWX project's playbook runs that collection, not the project's checkout."""
    dummy, tarball = built_collection
    installed = tmp_path / "collections"
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "-p",
                    str(installed), str(tarball)], capture_output=True, check=True,
                   env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed)))
    version = load_yaml(REPO / "galaxy.yml")["version"]

    run = run_playbook(REPO / "extensions" / "awx" / "project" / "order_process.yml",
                       env={"ANSIBLE_COLLECTIONS_PATH": str(installed), "WALDUR_SITE_AGENT_CONFIG": "/nonexistent"})

    assert run.rc != 0
    assert str(installed / "ansible_collections" / "waldur" / "site_agent" / "roles" / "agent_pass") in run.output
    assert '"msg": "waldur.site_agent %s"' % version in run.stdout
    assert run.stdout.index("waldur.site_agent %s" % version) < run.stdout.index("is not a readable file")
