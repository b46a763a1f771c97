"""What playbooks/awx_configure.yml asks the controller for, read from the arguments a stand-in
awx.awx collection records (tests/integration/awx_standin.py; no controller runs here):

* AWX keeps apart only the jobs of one template and the runs of one workflow (dependency_graph
  job_blocked_by), so each lock group of two or more passes (roles/agent_pass
  agent_pass_lock_groups) is one workflow running its passes one after the other, and the
  schedules launch it, never the passes' own templates;
* the controller rulebook launches that workflow with exactly the variables it takes on launch;
* the job templates run the thin project, whose playbooks import the collection's own;
* the project's sync is waited for within a bound, and what the settings no longer use is removed
  (or named)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from tests.helpers import REPO, collection_path, run_playbook
from tests.integration.awx_standin import make_awx_standin

AWX_CONFIGURE = REPO / "playbooks" / "awx_configure.yml"
PREFIX = "Waldur site agent"
LOCK_GROUPS = yaml.safe_load((REPO / "roles" / "agent_pass" / "defaults" / "main.yml").read_text())[
    "agent_pass_lock_groups"]
# The upstream agent's periods at their defaults, whatever the environment of the test run says.
DEFAULT_PERIODS = {"WALDUR_SITE_AGENT_ORDER_PROCESS_PERIOD_MINUTES": "5", "WALDUR_SITE_AGENT_REPORT_PERIOD_MINUTES": "30",
                   "WALDUR_SITE_AGENT_MEMBERSHIP_SYNC_PERIOD_MINUTES": "5"}


def configure(tmp_path, extra_vars=None, env=None):
    """Run awx_configure against the stand-in: (run, [(module, args)...] in call order)."""
    root = make_awx_standin(tmp_path / "awx-standin")
    log = tmp_path / "awx-calls.jsonl"
    log.touch()
    config = tmp_path / "site-agent.yaml"
    config.write_text("offerings:\n  - name: DigitalOcean VM\n    waldur_api_token: config-token-5150\n")
    settings = {"awx_site_agent_config_file": str(config),
                "awx_execution_environment_image": "registry.example.com/waldur-site-agent-ee:1.0.0",
                "controller_host": "https://awx.example.com", "controller_oauthtoken": "controller-token-1984",
                **(extra_vars or {})}
    environment = {"ANSIBLE_COLLECTIONS_PATH": f"{root}{os.pathsep}{collection_path()}",
                   "AWX_STANDIN_LOG": str(log), **DEFAULT_PERIODS, **(env or {})}
    run = run_playbook(AWX_CONFIGURE, extra_vars=settings, env=environment, verbosity=1)
    return run, [(call["module"], call["args"]) for call in map(json.loads, log.read_text().splitlines())]


def present(calls, module):
    return {args["name"]: args for name, args in calls if name == module and args.get("state", "present") == "present"}


def absent(calls, module):
    return [(args["name"], args.get("unified_job_template")) for name, args in calls
            if name == module and args.get("state") == "absent"]


def index_of(calls, module, **match):
    return next(i for i, (name, args) in enumerate(calls)
                if name == module and all(args.get(key) == value for key, value in match.items()))


@pytest.fixture(scope="module")
def default(tmp_path_factory):
    run, calls = configure(tmp_path_factory.mktemp("awx"), {"awx_digitalocean_token": "do-token-2600"})
    assert run.rc == 0, run.output
    return run, calls


def grouped_passes(templates):
    groups = {}
    for pass_name, group in LOCK_GROUPS.items():
        if f"{PREFIX}: {pass_name}" in templates:
            groups.setdefault(group, []).append(pass_name)
    return groups


# ---------------------------------------------------------------------------------- lock groups
def test_each_lock_group_of_several_passes_is_one_workflow_that_never_overlaps_itself(default):
    dummy, calls = default
    templates, workflows = present(calls, "job_template"), present(calls, "workflow_job_template")
    groups = grouped_passes(templates)
    assert groups["machines"] == ["order_process", "membership_sync", "audit"]

    assert sorted(workflows) == sorted(f"{PREFIX}: {group}" for group, passes in groups.items() if len(passes) > 1)
    for group, passes in groups.items():
        if len(passes) < 2:
            continue
        flow = workflows[f"{PREFIX}: {group}"]
        assert flow["allow_simultaneous"] is False and flow["organization"] == "Default"
        nodes = flow["workflow_nodes"]
        # the group's passes in a chain: each node starts once its parent is done, whatever its outcome
        assert [node["identifier"] for node in nodes] == passes
        for node, following in zip(nodes, passes[1:] + [None]):
            assert node["unified_job_template"] == {"name": f"{PREFIX}: {node['identifier']}", "type": "job_template",
                                                    "organization": {"name": "Default"}}
            assert node["related"] == {"always_nodes": [{"identifier": following}] if following else []}
        # set_stats artifacts become the extra variables of the nodes after: the audit's come last
        assert passes[-1] == "audit"


def test_the_schedules_launch_the_workflows_and_never_a_grouped_pass_alone(default):
    dummy, calls = default
    templates, workflows = present(calls, "job_template"), present(calls, "workflow_job_template")
    schedules = present(calls, "schedule")
    assert {name: (args["unified_job_template"], args["rrule"].split(" ", 1)[1], args.get("extra_data"))
            for name, args in schedules.items()} == {
        f"{PREFIX}: order_process, membership_sync": (f"{PREFIX}: machines", "RRULE:FREQ=MINUTELY;INTERVAL=5",
                                                      {"waldur_site_agent_passes": ["order_process", "membership_sync"]}),
        f"{PREFIX}: audit": (f"{PREFIX}: machines", "RRULE:FREQ=MINUTELY;INTERVAL=1440",
                             {"waldur_site_agent_passes": ["audit"]}),
        # the report pass has a lock of its own: its template, never beside itself
        f"{PREFIX}: report": (f"{PREFIX}: report", "RRULE:FREQ=MINUTELY;INTERVAL=30", None),
    }
    grouped = {name for passes in grouped_passes(templates).values() if len(passes) > 1 for name in passes}
    for args in schedules.values():
        assert args["unified_job_template"] in workflows or \
            args["unified_job_template"].split(": ", 1)[1] not in grouped
    # the schedules older versions put on the grouped passes' own templates are removed, after
    # the workflow's are in place
    removed = absent(calls, "schedule")
    for name in sorted(grouped):
        assert (f"{PREFIX}: {name}", f"{PREFIX}: {name}") in removed
    assert (f"{PREFIX}: report", f"{PREFIX}: report") not in removed
    first_removal = index_of(calls, "schedule", state="absent")
    assert max(index_of(calls, "schedule", name=name) for name in schedules) < first_removal
    # every other set of the workflow's passes: a schedule left by other periods
    assert (f"{PREFIX}: order_process", f"{PREFIX}: machines") in removed
    assert (f"{PREFIX}: order_process, membership_sync, audit", f"{PREFIX}: machines") in removed
    assert not set(removed) & {(name, args["unified_job_template"]) for name, args in schedules.items()}


def test_passes_of_one_workflow_with_different_periods_get_a_schedule_each(tmp_path):
    run, calls = configure(tmp_path, env={"WALDUR_SITE_AGENT_ORDER_PROCESS_PERIOD_MINUTES": "2",
                                          "WALDUR_SITE_AGENT_MEMBERSHIP_SYNC_PERIOD_MINUTES": "15"})
    assert run.rc == 0, run.output
    assert {name: (args["rrule"].split("INTERVAL=")[1], args.get("extra_data"))
            for name, args in present(calls, "schedule").items()} == {
        f"{PREFIX}: order_process": ("2", {"waldur_site_agent_passes": ["order_process"]}),
        f"{PREFIX}: membership_sync": ("15", {"waldur_site_agent_passes": ["membership_sync"]}),
        f"{PREFIX}: audit": ("1440", {"waldur_site_agent_passes": ["audit"]}),
        f"{PREFIX}: report": ("30", None)}
    assert (f"{PREFIX}: order_process, membership_sync", f"{PREFIX}: machines") in absent(calls, "schedule")


def test_the_audit_template_is_read_only_unless_the_operator_asks(default, tmp_path):
    dummy, calls = default
    audit = present(calls, "job_template")[f"{PREFIX}: audit"]
    assert audit["extra_vars"] == {"agent_pass_config": "", "audit_cleanup": False, "audit_repair": False}

    run, calls = configure(tmp_path, {"awx_audit_cleanup": True, "awx_audit_repair": "yes"})
    assert run.rc == 0, run.output
    assert present(calls, "job_template")[f"{PREFIX}: audit"]["extra_vars"] == {
        "agent_pass_config": "", "audit_cleanup": True, "audit_repair": True}


# ---------------------------------------------------------------------------------- EDA controller
def test_the_controller_rulebook_sends_exactly_what_the_workflow_takes_on_launch(default):
    # make test has ansible-rulebook; the per-release venvs of make test-matrix do not
    substitute_variables = pytest.importorskip("ansible_rulebook.util").substitute_variables
    dummy, calls = default
    workflows, templates = present(calls, "workflow_job_template"), present(calls, "job_template")
    launch_variables = yaml.safe_load(AWX_CONFIGURE.read_text())[0]["vars"]["awx_launch_variables"]
    (ruleset,) = yaml.safe_load((REPO / "extensions" / "eda" / "rulebooks" / "event_process_controller.yml").read_text())

    sent = set()
    for rule in ruleset["rules"]:
        action = substitute_variables(rule["action"]["run_workflow_template"], {"event": {"waldur": {}}})
        flow = workflows[action["name"]]
        assert action["organization"] == flow["organization"]
        # AWX drops the variables of a launch (ignored_fields) unless the template asks for them
        assert flow["ask_variables_on_launch"] is True and flow["ask_limit_on_launch"] is True
        variables = rule["action"]["run_workflow_template"]["job_args"]["extra_vars"]
        assert set(variables) <= set(launch_variables), rule["name"]
        nodes = [node["identifier"] for node in flow["workflow_nodes"]]
        assert set(variables["waldur_site_agent_passes"]) <= set(nodes), rule["name"]
        for node in nodes:  # and by hand, each node's template on its own
            assert templates[f"{PREFIX}: {node}"]["ask_variables_on_launch"] is True
        sent |= set(variables)
    assert sent | {"waldur_site_agent_passes"} == set(launch_variables)
    for flow in workflows.values():
        assert "Takes on launch: " + ", ".join(launch_variables) + "." in flow["description"]


def test_every_launch_variable_is_one_the_passes_read():
    read = "\n".join(path.read_text() for folder in ("roles", "playbooks", "extensions/awx/project")
                     for path in (REPO / folder).rglob("*.yml") if path.name != "awx_configure.yml")
    for name in yaml.safe_load(AWX_CONFIGURE.read_text())[0]["vars"]["awx_launch_variables"]:
        assert name in read, name


# ---------------------------------------------------------------------------------- one version per job
def test_the_templates_run_the_thin_project_which_imports_the_collections_playbooks(default):
    dummy, calls = default
    for name, template in present(calls, "job_template").items():
        pass_name = name.split(": ", 1)[1]
        assert template["playbook"] == f"extensions/awx/project/{pass_name}.yml"
        [play] = yaml.safe_load((REPO / template["playbook"]).read_text())
        assert set(play) == {"name", "ansible.builtin.import_playbook"}
        assert f"'waldur.site_agent.{pass_name}'" in play["ansible.builtin.import_playbook"]
        assert (REPO / "playbooks" / f"{pass_name}.yml").is_file()


def test_a_node_whose_pass_the_launch_did_not_ask_for_only_says_so(tmp_path):
    project = REPO / "extensions" / "awx" / "project"
    asked = run_playbook(project / "order_process.yml", args=["--list-tasks"])
    assert asked.rc == 0, asked.output
    assert "Waldur site agent - order_process pass" in asked.stdout and "agent_pass" in asked.stdout

    other = run_playbook(project / "order_process.yml", extra_vars={"waldur_site_agent_passes": ["audit"]})
    assert other.rc == 0, other.output
    assert "This launch asked for audit; nothing to do in this node." in other.stdout
    assert "agent_pass" not in other.stdout


# ---------------------------------------------------------------------------------- bounded, nothing stale
def test_the_project_sync_is_waited_for_within_a_bound(default, tmp_path):
    dummy, calls = default
    [project] = present(calls, "project").values()
    [sync] = [args for name, args in calls if name == "project_update"]
    # awx.awx.project's own wait polls without a limit: this playbook waits with project_update
    assert project["wait"] is False and project["timeout"] == 600
    assert sync["name"] == project["name"] and sync["wait"] is True and sync["timeout"] == 600
    assert index_of(calls, "project_update") < index_of(calls, "job_template")

    run, calls = configure(tmp_path, {"awx_project_sync_timeout": 45}, env={"AWX_STANDIN_SYNC_TIMEOUT": "1"})
    assert run.rc != 0
    assert ("The project Waldur site agent (https://github.com/waldur/ansible-collection-site-agent.git, branch main) "
            "did not finish a successful sync within 45 seconds: Monitoring of Project Update - Waldur site agent "
            "aborted due to timeout.") in " ".join(run.output.split())
    assert [name for name, args in calls if name == "job_template"] == []


def test_credentials_the_settings_no_longer_use_are_detached_and_removed(tmp_path):
    azure = {"awx_azure_subscription_id": "sub-1", "awx_azure_tenant_id": "tenant-1", "awx_azure_client_id": "client-1",
             "awx_azure_client_secret": "azure-secret-8086"}
    run, calls = configure(tmp_path / "secret", dict(azure, awx_digitalocean_token="do-token-2600"))
    assert run.rc == 0, run.output
    assert {"Waldur site agent Azure", "Waldur site agent DigitalOcean"} <= set(present(calls, "credential"))
    assert sorted(name for name, dummy in absent(calls, "credential")) == [
        "Waldur site agent Azure sign-in", "Waldur site agent Waldur API"]

    # the offering moves to a managed identity and the DigitalOcean offering is gone
    run, calls = configure(tmp_path / "msi", dict(azure, awx_azure_auth_source="msi"))
    assert run.rc == 0, run.output
    assert "Waldur site agent Azure sign-in" in present(calls, "credential")
    removed = [name for name, dummy in absent(calls, "credential")]
    assert sorted(removed) == ["Waldur site agent Azure", "Waldur site agent DigitalOcean", "Waldur site agent Waldur API"]
    for template in present(calls, "job_template").values():  # each template carries exactly the wanted ones
        assert template["credentials"] == ["Waldur site agent configuration", "Waldur site agent Azure sign-in"]
    # removed once no template names them any more; the loop carries no secret
    assert index_of(calls, "credential", state="absent") > max(
        i for i, (name, dummy) in enumerate(calls) if name == "job_template")
    assert [args for name, args in calls if name == "credential" and args.get("state") == "absent"
            and "inputs" in args] == []
    assert "azure-secret-8086" not in run.output


def test_what_the_controller_refuses_to_remove_is_named(tmp_path):
    run, calls = configure(tmp_path, env={"AWX_STANDIN_FAIL": "credential:absent"})

    assert run.rc != 0
    text = " ".join(run.output.split())
    assert "Not removed, though the settings no longer use them (remove them by hand): " in text
    for name in ("Waldur API", "DigitalOcean", "Azure", "Azure sign-in"):
        assert f"credential Waldur site agent {name} (Unable to create credential: the controller said 400)" in text
    # everything else was configured first
    assert present(calls, "workflow_job_template") and present(calls, "schedule")
