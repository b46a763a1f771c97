"""The backend registry (plugins/plugin_utils/backends): each cloud declared once, the controller
deciding by backend only through it, every registered backend bringing the files the roles name, and a
backend registered here read by site_config, create_gaps, the planning filters and the readiness
judgements without a line of theirs changing."""

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.waldur.site_agent.plugins.filter import backend_items, readiness
from ansible_collections.waldur.site_agent.plugins.filter.agent_pass import create_gaps
from ansible_collections.waldur.site_agent.plugins.plugin_utils import backends, site_config
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends import Backend
from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends.planning import first, order_items, unpacked

REPO = Path(__file__).resolve().parents[4]
UUID = "0f8b3c1a1d2e4f609a7b8c9d0e1f2a3b"


def test_the_registry_holds_the_two_clouds_by_name():
    assert backends.names() == ("azure", "digitalocean")
    assert backends.backend(" Azure ").name == "azure" and backends.backend("slurm") is None
    for entry in backends.every():
        assert entry.title and entry.machine and entry.credentials and entry.create_inputs and entry.catalogue_keys
        assert callable(entry.plan) and len(entry.power_states) == 2
    assert set(backends.secret_environment()) >= {"DIGITALOCEAN_ACCESS_TOKEN", "AZURE_SECRET"}


def test_the_controller_decides_by_backend_only_through_the_registry():
    """A comparison with a backend's name outside the registry's modules (and outside the task
    files named for one backend) is a second home for what the registry says."""
    by_name = re.compile(r"""[!=]= *["'](azure|digitalocean)["']|["'](azure|digitalocean)["'] *[!=]=""")
    found = []
    for path in sorted((REPO / "plugins").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if "__pycache__" in path.parts or relative.startswith("plugins/plugin_utils/backends/"):
            continue
        found.extend("%s: %s" % (relative, line.strip()) for line in path.read_text().splitlines()
                     if by_name.search(line))
    for path in sorted(list((REPO / "roles").rglob("*.yml")) + list((REPO / "playbooks").rglob("*.yml"))):
        if any(name in path.stem for name in backends.names()):
            continue  # a backend's own task file
        found.extend("%s: %s" % (path.relative_to(REPO), line.strip()) for line in path.read_text().splitlines()
                     if by_name.search(line))
    assert found == []


@pytest.mark.parametrize("name", backends.names())
def test_every_backend_brings_the_files_the_roles_name(name):
    tasks = ["roles/order_process/tasks/%s.yml" % name, "roles/order_process/tasks/probe_%s.yml" % name,
             "roles/order_process/tasks/catalogue_%s.yml" % name, "roles/membership_sync/tasks/%s.yml" % name,
             "roles/report/tasks/%s.yml" % name, "roles/audit/tasks/%s.yml" % name,
             "playbooks/tasks/health_%s.yml" % name, "playbooks/tasks/diagnostics_%s.yml" % name]
    assert [path for path in tasks if not (REPO / path).is_file()] == []
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    assert runtime["action_groups"].get(name), "meta/runtime.yml has no action group %s" % name
    defaults = yaml.safe_load((REPO / "roles" / "agent_pass" / "defaults" / "main.yml").read_text())
    assert "agent_pass_%s_defaults" % name in defaults


# ---- a backend registered here, read by code that names no backend ------------------------------------

def toy_plan(orders, backend_settings=None, ssh_keys=None, offering_uuid=None):
    def create(order, resource, settings):
        return {"state": "present", "flavour": first(resource.get("attributes") or {}, "flavour")
                or settings.get("default_flavour")}
    return order_items(unpacked(orders, "orders"), backend_settings, create,
                       lambda *order_resource_settings_backend_id: {"error": "not resized"})


def toy_health(offering, reads, notes):
    if reads.get("ping", {}).get("status") != 200:
        return "the toy cloud does not answer"
    notes.append("toy cloud %s" % reads["ping"]["json"]["name"])
    return ""


def toy_check(path, settings, problems):
    if not settings.get("root"):
        problems.error(path + ".root", "required")


TOY = Backend(name="toy", title="Toy cloud", machine="toy machine", credentials=("root",),
              settings={"default_flavour": "str"}, secret_settings=("root",), environment={"root": ("TOY_ROOT",)},
              create_inputs=(("flavour", ("default_flavour",), ("flavour",)),), catalogue_keys=("flavour",),
              plan=toy_plan, power_states=("stopped", "running"), check_settings=toy_check, health=toy_health)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(backends.BACKEND_MODULES, "toy", "toy")
    monkeypatch.setitem(backends._LOADED, "toy", TOY)
    return TOY


def toy_offering(**settings):
    return {"name": "Toys", "waldur_api_url": "https://waldur.example.org/api/", "waldur_api_token": "t0ken-value",
            "waldur_offering_uuid": UUID, "backend_type": "toy", "order_processing_backend": "toy",
            "backend_settings": settings}


def test_site_config_reads_a_registered_backend(toy):
    errors, warnings = site_config.validate({"offerings": [toy_offering(default_flavour=3, flavor="x")]})
    assert "offerings[0].backend_settings.root: required" in errors
    assert any(line.startswith("offerings[0].backend_settings.default_flavour: expected a string") for line in errors)
    assert any("flavor" in line for line in warnings + errors)
    config = {"offerings": [toy_offering(default_flavour="small")]}
    assert site_config.apply_environment(config, {"TOY_ROOT": "/srv/toys"}) == [
        "offerings[0].backend_settings.root <- TOY_ROOT"]
    assert site_config.validate(config) == ([], [])
    assert "root" in site_config.backend_settings_read("toy")


def test_the_filters_and_judgements_read_a_registered_backend(toy):
    order = {"uuid": UUID, "type": "Create", "resource": {"uuid": "a" * 32, "name": "box", "attributes": {}}}
    plan = backend_items.backend_plan([order], "toy", {"default_flavour": "small"})
    assert [item["flavour"] for item in plan["backend_items"]] == ["small"] and plan["set_aside"] == []
    assert backend_items.membership_items([{"uuid": "a" * 32, "backend_id": "t-1", "paused": True}], "toy") == [
        {"resource_uuid": "a" * 32, "backend_id": "t-1", "state": "stopped"}]
    assert backend_items.catalogue_items([order], {"default_flavour": "small"}, "toy")[0]["flavour"] == "small"
    gaps = create_gaps(dict(toy_offering()), {"order": [], "options": {}})
    assert gaps == ["backend_settings.default_flavour is not set and the offering's order form in Waldur has no "
                    "flavour field (flavour): no Create order could name the flavour of its toy machine; set "
                    "backend_settings.default_flavour"]
    registered = {"results": [{"status": 200, "json": {"username": "agent"}}]}
    offering_read = {"results": [{"status": 200, "json": {"name": "Toys", "state": "Active", "options": None}}]}
    ping = {"results": [{"status": 200, "json": {"name": "toybox"}}]}
    [verdict] = readiness.health_verdicts([toy_offering(default_flavour="small")], registered, offering_read,
                                          {"toy": {"ping": ping}})
    assert verdict == {"offering": "Toys", "ready": True,
                       "reason": "Waldur answers as agent, offering Toys (Active), toy cloud toybox"}
    [verdict] = readiness.health_verdicts([toy_offering(default_flavour="small")], registered, offering_read, {})
    assert verdict["reason"] == "the toy cloud does not answer"


def test_an_unregistered_backend_is_named_with_the_registered_ones():
    with pytest.raises(Exception) as refused:
        backend_items.backend_plan([], "openstack")
    assert "backend_plan: backend must be one of azure, digitalocean, got 'openstack'" in str(refused.value)
