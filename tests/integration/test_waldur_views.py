"""Issue 22, evidence before action: every pass trusts a Waldur view only when it is whole and
well-formed (rule 3), never loses usage quietly (rule 7), and refuses a secret with stray
whitespace by its key, without ever showing it (rule 8).

Real playbooks against the simulators; a spoilt answer is a simulator fault of a ``kind``
(tests/simulators/common.py). Tests that make Waldur answer what its schema forbids clear
``app.exchanges`` so that the contract check after the test judges only the rest."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from tests.helpers import REPO, run_playbook, simulator_site_config
from tests.integration.passes import MEMBERSHIP_PASS, ORDER_PASS, REPORT_PASS, waldur_writes
from tests.simulators.waldur import presets as W

pytestmark = pytest.mark.integration

AUDIT_PASS = REPO / "playbooks" / "audit.yml"
NAMES = {"digitalocean": "DigitalOcean VM", "azure": "Azure VM"}
PASS_NAMES = {"order": "order_process", "membership": "membership_sync"}


def write_config(tmp_path, waldur, do=None, azure=None, edit=None):
    config = simulator_site_config(waldur.url, do_url=do.url if do else None, azure_url=azure.url if azure else None)
    if edit:
        edit(config["offerings"][0])
    path = tmp_path / "waldur-site-agent-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_pass(playbook, config, tmp_path, json_log=False, verbosity=0):
    env = {"WALDUR_SITE_AGENT_CONFIG": str(config)}
    if json_log:
        env["ANSIBLE_STDOUT_CALLBACK"] = "waldur.site_agent.waldur_json"
    extra_vars = {"audit_report_dir": str(tmp_path / "reports"), "audit_cleanup": True,
                  "audit_cleanup_min_age_hours": 0} if playbook == AUDIT_PASS else None
    return run_playbook(playbook, env=env, extra_vars=extra_vars, verbosity=verbosity)


def seed_droplet_resource(waldur, do, name):
    resource_uuid = uuid.uuid4().hex
    droplet = do.app.seed_droplet(name, tags=["waldur", "waldur-resource:" + resource_uuid], status="active")
    waldur.app.seed_resource(W.DO_OFFERING_UUID, name, uuid=resource_uuid, backend_id=str(droplet["id"]),
                             limits=dict(W.DO_PLAN_QUOTAS))
    return resource_uuid


def seed_vm_resource(waldur, azure, name, backend_id=None):
    backend_id = backend_id or azure.app.seed_vm(name, size="Standard_B2s")
    return waldur.app.seed_resource(W.AZURE_OFFERING_UUID, name, backend_id=backend_id,
                                    limits=dict(W.AZURE_PLAN_QUOTAS))["uuid"]


def usages(waldur, resource_uuid):
    return {usage["type"]: usage["usage"] for usage in waldur.app.usages(resource_uuid)}


# ---- rule 3: a view is trusted only when it is complete and well-formed -----------------------------

PASSES = {
    # pass: (playbook, backend, listing operation, its path)
    "order": (ORDER_PASS, "digitalocean", "orders.list", "/api/marketplace-orders/"),
    "report": (REPORT_PASS, "azure", "resources.list", "/api/marketplace-provider-resources/"),
    "membership": (MEMBERSHIP_PASS, "digitalocean", "resources.list", "/api/marketplace-provider-resources/"),
    # with cleanup on: an empty view would make every machine an orphan
    "audit": (AUDIT_PASS, "azure", "resources.list", "/api/marketplace-provider-resources/"),
}
SHOWN = {"html": "text/html; charset=utf-8 '<!DOCTYPE html> <html><head><title>Down for maintenance",
         "truncated": "application/json '[{", "wrong_shape": "application/json '{",
         "short_count": "X-Result-Count says"}


@pytest.mark.parametrize("kind", ["html", "truncated"])
@pytest.mark.parametrize("name", sorted(PASSES))
def test_a_spoilt_listing_fails_the_offering_naming_the_call_and_nothing_is_written(
        tmp_path, waldur_sim, do_sim, azure_sim, name, kind):
    playbook, backend, operation, path = PASSES[name]
    waldur = waldur_sim
    if backend == "azure":
        seed_vm_resource(waldur, azure_sim, "measured")
        config = write_config(tmp_path, waldur, azure=azure_sim)
    else:
        seed_droplet_resource(waldur, do_sim, "listed")
        config = write_config(tmp_path, waldur, do=do_sim)
    waldur.app.add_fault(operation, kind=kind, times=-1)
    since = len(waldur.app.calls)

    run = run_pass(playbook, config, tmp_path)

    waldur.app.exchanges.clear()  # the spoilt answers break the schema on purpose
    assert run.rc != 0, run.output[-4000:]
    assert "Waldur GET %s (HTTP 200) is not proof: answered %s" % (path, SHOWN[kind]) in run.output, run.output[-4000:]
    assert "The %s pass failed for: %s" % (PASS_NAMES.get(name, name), NAMES[backend]) in run.output, run.output[-3000:]
    assert waldur_writes(waldur, since) == []  # no approve, no set_usage, no set_as_ok
    assert do_sim.app.write_calls() == [] and azure_sim.app.write_calls() == []  # nothing deleted either
    if name == "order":
        assert waldur.app.order(W.DO_ORDER_UUID)["state"] == "pending-provider"
    assert W.PROVIDER_TOKEN not in run.output


@pytest.mark.parametrize("kind", ["wrong_shape", "short_count"])
def test_a_listing_of_the_wrong_shape_or_that_does_not_add_up_is_no_view_either(
        tmp_path, waldur_sim, azure_sim, kind):
    waldur = waldur_sim
    seed_vm_resource(waldur, azure_sim, "measured")
    config = write_config(tmp_path, waldur, azure=azure_sim)
    waldur.app.add_fault("resources.list", kind=kind, times=-1)

    run = run_pass(REPORT_PASS, config, tmp_path)

    waldur.app.exchanges.clear()
    assert run.rc != 0
    assert "Waldur GET /api/marketplace-provider-resources/ (HTTP 200) is not proof: " in run.output
    assert SHOWN[kind] in run.output
    assert waldur_writes(waldur) == []


@pytest.mark.parametrize("playbook, operation, kind, named", [
    ("health.yml", "users.me", "html",
     "Not ready: DigitalOcean VM (Waldur GET /api/users/me/ answered HTTP 200 with text/html; charset=utf-8 "
     "'<!DOCTYPE html> <html><head><title>Down for maintenance"),
    ("diagnostics.yml", "orders.list", "truncated",
     "orders pending-provider unknown: Waldur GET /api/marketplace-orders/ answered HTTP 200 with application/json "
     "'[{"),
])
def test_health_and_diagnostics_do_not_take_a_spoilt_answer_for_a_good_one(
        tmp_path, waldur_sim, do_sim, playbook, operation, kind, named):
    config = write_config(tmp_path, waldur_sim, do=do_sim)
    waldur_sim.app.add_fault(operation, kind=kind, times=-1)

    run = run_pass(REPO / "playbooks" / playbook, config, tmp_path)

    waldur_sim.app.exchanges.clear()
    assert run.rc != 0
    assert named in run.output, run.output[-3000:]
    assert W.PROVIDER_TOKEN not in run.output


# ---- rule 7: usage is never lost quietly -----------------------------------------------------------

def test_a_foreign_or_unparsable_backend_id_and_a_shared_one_are_named_failed_while_the_rest_is_billed(
        tmp_path, waldur_sim, azure_sim):
    waldur, azure = waldur_sim, azure_sim
    waldur.app.reset("empty")
    billed = seed_vm_resource(waldur, azure, "billed")
    unparsable = seed_vm_resource(waldur, azure, "unparsable", backend_id="418000001")
    foreign_id = "/subscriptions/00000000-0000-0000-0000-0000000000ff/resourceGroups/elsewhere/providers/" \
                 "Microsoft.Compute/virtualMachines/elsewhere"
    foreign = seed_vm_resource(waldur, azure, "foreign", backend_id=foreign_id)
    shared_machine = azure.app.seed_vm("shared", size="Standard_B2s")
    twins = [seed_vm_resource(waldur, azure, twin, backend_id=shared_machine) for twin in ("twin-a", "twin-b")]
    config = write_config(tmp_path, waldur, azure=azure)

    run = run_pass(REPORT_PASS, config, tmp_path)

    assert run.rc != 0
    assert usages(waldur, billed) == {"cpu": "2.00", "ram": "4096.00", "disk": "38912.00"}
    for resource in [unparsable, foreign] + twins:
        assert usages(waldur, resource) == {}
    assert "usage not recorded for 4 resource(s)" in run.output
    assert "resource unparsable (%s): no usage measured: backend id 418000001: Not an Azure virtual machine id" \
        % unparsable in run.output
    assert "resource foreign (%s): no usage measured: backend id %s: belongs to subscription" % (
        foreign, foreign_id) in run.output
    for mine, other in ((twins[0], twins[1]), (twins[1], twins[0])):
        assert "(%s): no usage sent: its backend id %s is also the backend id of resource" % (
            mine, shared_machine) in run.output
        assert other in run.output
    assert "The report pass failed for: Azure VM" in run.output


# ---- rule 8: secrets with stray whitespace ------------------------------------------------------------

@pytest.mark.parametrize("ending, words", [("\n", "a trailing newline"),
                                           ("\r\n", "a trailing carriage return and newline")])
def test_a_token_with_a_trailing_newline_is_refused_by_its_key_and_never_shown(
        tmp_path, waldur_sim, do_sim, ending, words):
    waldur = waldur_sim
    config = write_config(tmp_path, waldur, do=do_sim,
                          edit=lambda offering: offering.update(waldur_api_token=W.PROVIDER_TOKEN + ending))
    runs = [run_pass(REPORT_PASS, config, tmp_path, verbosity=3),
            run_pass(ORDER_PASS, config, tmp_path, json_log=True)]

    for run in runs:
        assert run.rc != 0
        assert "offerings[0].waldur_api_token: has %s; remove the whitespace" % words in run.output
        for shown in (W.PROVIDER_TOKEN, json.dumps(W.PROVIDER_TOKEN)[1:-1]):
            assert shown not in run.output
    assert waldur.app.calls == []  # refused at configuration load: nothing sent, nothing retried


def test_a_module_given_a_token_with_whitespace_fails_fast_naming_the_option(tmp_path, waldur_sim):
    playbook = tmp_path / "module.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "module_defaults": {"group/waldur.site_agent.waldur": {
            "api_url": waldur_sim.url + "/api/", "api_token": W.PROVIDER_TOKEN + "\n"}},
        "tasks": [{"waldur.site_agent.waldur_offering_info": {"offering_uuid": W.DO_OFFERING_UUID}}],
    }]))

    run = run_playbook(playbook, verbosity=3)

    assert run.rc != 0
    assert "api_token (module_defaults, task or WALDUR_API_TOKEN): has a trailing newline" in run.output
    assert W.PROVIDER_TOKEN not in run.output and "Invalid leading whitespace" not in run.output
    assert waldur_sim.app.calls == []
