"""The operator documentation stays true to the code.

* docs/configuration.md's reference tables are what scripts/gen_config_reference.py makes
  from the schema, and every schema key is described;
* "required" in those tables is what ``site_config.validate`` requires;
* every relative link (and heading anchor) in docs/*.md and README.md resolves.
"""

import copy
import re
from pathlib import Path

import pytest

from ansible_collections.waldur.site_agent.plugins.plugin_utils import backends, site_config
from scripts import gen_config_reference as generator

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]


# ----------------------------------------------------------------- generated reference

def test_every_schema_key_is_described():
    assert generator.problems() == []


def test_configuration_reference_is_up_to_date():
    current = generator.DOC.read_text()
    assert generator.render(current) == current, (
        "docs/configuration.md is out of date: run .venv/bin/python scripts/gen_config_reference.py")


def test_check_mode_reports_a_stale_document(tmp_path, monkeypatch, capsys):
    current = generator.DOC.read_text()
    stale = tmp_path / "configuration.md"
    stale.write_text(current.replace("| `waldur_offering_uuid` |", "| `offering_uuid` |"))
    assert stale.read_text() != current
    monkeypatch.setattr(generator, "DOC", stale)
    assert generator.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert generator.main([]) == 0
    assert stale.read_text() == current
    assert generator.main(["--check"]) == 0


def test_a_new_schema_key_without_description_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(site_config, "OFFERING_KEYS", site_config.OFFERING_KEYS | {"brand_new_key"})
    droplets = backends.backend("digitalocean")
    monkeypatch.setattr(droplets, "settings", dict(droplets.settings, default_vpc_uuid="str"))
    problems = generator.problems()
    assert "offering: schema key 'brand_new_key' has no description in gen_config_reference.py" in problems
    assert "digitalocean: schema key 'default_vpc_uuid' has no description in gen_config_reference.py" in problems
    assert generator.main(["--check"]) == 2
    assert "brand_new_key" in capsys.readouterr().err


def test_a_description_of_a_removed_key_is_refused(monkeypatch):
    monkeypatch.setattr(site_config, "COMPONENT_KEYS", site_config.COMPONENT_KEYS - {"article_code"})
    assert generator.problems() == ["component: 'article_code' is described but is not a key of the schema"]


def test_every_section_has_its_markers():
    text = generator.DOC.read_text()
    for section in generator.SECTIONS:
        assert text.count(generator.BEGIN % section) == 1, section
        assert text.count(generator.END % section) == 1, section


def test_order_attributes_follow_the_filters():
    # the lookups of the filters, in precedence order, as the tables show them
    assert "backend_region_id, region" in generator.attribute_lookups("digitalocean")
    assert "backend_size_id, size, size_slug" in generator.attribute_lookups("digitalocean")
    assert "ssh_key, ssh_key_uuid" in generator.attribute_lookups("azure")
    text = generator.DOC.read_text()
    assert "| `backend_size_id`, `size`, `size_slug` |" in text
    assert "| `user_data`, `cloud_init` | Cloud-init user data, sent base64-encoded" in text


def test_backend_settings_marked_unused_are_unused_in_the_code():
    read = generator.settings_read()
    for table in (generator.AZURE, generator.DIGITALOCEAN):
        for key, entry in table.items():
            says_unused = "not used" in entry["meaning"]
            assert says_unused == (key not in read), key
    assert "default_ssh_key_name" not in read
    assert {"default_region", "size_mapping", "allowed_ssh_ranges", "client_secret", "token"} <= read


def test_component_keys_the_azure_report_reads():
    components = (REPO / "plugins" / "module_utils" / "agent" / "components.py").read_text()
    for key in generator.COMPONENT_KEYS_METERED:
        assert '"%s"' % key in components


def test_defaults_of_endpoint_settings_come_from_the_argument_specs():
    text = generator.DOC.read_text()
    assert "| `arm_endpoint` |  | URL | the cloud's: `https://management.azure.com` |" in text
    assert "| `api_url` |  | URL | `https://api.digitalocean.com/v2/` |" in text


# ----------------------------------------------------------------- required, as validated

def _sample_config():
    components = {
        "cpu": {"measured_unit": "Cores", "accounting_type": "limit", "label": "CPU", "unit_factor": 1,
                "limit": 8, "description": "vCPU", "min_value": 1, "max_value": 8, "max_available_limit": 64,
                "default_limit": 1, "limit_period": "month", "article_code": "CPU-1", "is_boolean": False,
                "is_prepaid": False, "backend_name": "cores"},
    }
    return {
        "timezone": "UTC", "log_level": "INFO", "reporting_periods": 2, "api_key_final_report_days": 3,
        "expose_backend_error_details": True, "sentry_dsn": "https://key@sentry.example.com/1",
        "offerings": [
            {"name": "DO", "waldur_api_url": "https://waldur.example.com/api/", "waldur_api_token": "t",
             "waldur_offering_uuid": "d0000000000000000000000000000001", "backend_type": "digitalocean",
             "order_processing_backend": "digitalocean", "reporting_backend": "digitalocean",
             "membership_sync_backend": "digitalocean", "verify_ssl": True,
             "backend_settings": {
                 "token": "t", "default_region": "ams3", "default_image": "ubuntu-22-04-x64",
                 "default_size": "s-1vcpu-1gb", "default_user_data": "#cloud-config", "default_tags": ["waldur"],
                 "default_ssh_key_id": 512189, "default_ssh_key_fingerprint": "aa:bb",
                 "default_ssh_key_name": "ops", "default_ssh_public_key": "ssh-ed25519 AAAA",
                 "size_mapping": {"s-1vcpu-1gb": {"cpu": 1}}, "api_url": "https://api.digitalocean.com/v2/"},
             "backend_components": copy.deepcopy(components)},
            {"name": "Azure", "waldur_api_url": "https://waldur.example.com/api/", "waldur_api_token": "t",
             "waldur_offering_uuid": "a0000000-0000-0000-0000-000000000001", "backend_type": "azure",
             "order_processing_backend": "azure",
             "backend_settings": {
                 "subscription_id": "s", "tenant_id": "t", "client_id": "c", "client_secret": "x",
                 "default_location": "westeurope", "default_size": "Standard_B1s",
                 "default_image": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest",
                 "default_resource_group": "shared", "network_cidr": "10.1.0.0/16", "subnet_cidr": "10.1.0.0/24",
                 "allowed_ssh_ranges": ["203.0.113.0/24"], "arm_endpoint": "https://management.azure.com",
                 "authority_host": "https://login.microsoftonline.com", "polling_interval": 5},
             "backend_components": copy.deepcopy(components)},
        ],
    }


def _cases():
    """(table, key, path to the key's container in the sample, key path as errors name it)."""
    for key in generator.ROOT:
        yield "root", key, (), key
    for key in generator.OFFERING:
        yield "offering", key, ("offerings", 0), "offerings[0].%s" % key
    for key in generator.DIGITALOCEAN:
        yield "digitalocean", key, ("offerings", 0, "backend_settings"), "offerings[0].backend_settings.%s" % key
    for key in generator.AZURE:
        yield "azure", key, ("offerings", 1, "backend_settings"), "offerings[1].backend_settings.%s" % key
    for key in generator.COMPONENT:
        yield ("component", key, ("offerings", 0, "backend_components", "cpu"),
               "offerings[0].backend_components.cpu.%s" % key)


def test_the_sample_configuration_is_valid():
    assert site_config.validate(_sample_config()) == ([], [])


@pytest.mark.parametrize("table,key,container,path", list(_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_required_in_the_reference_is_required_by_validation(table, key, container, path):
    config = _sample_config()
    parent = config
    for step in container:
        parent = parent[step]
    documented = generator.descriptions()[table][key].get("required", False)
    if key not in parent:
        assert not documented, "%s is documented as required but the sample lacks it" % path
        return
    del parent[key]
    errors, _warnings = site_config.validate(config)
    if documented:
        assert any(error.startswith(path) and "required" in error for error in errors), errors
    else:
        assert errors == [], "%s is documented as optional, yet without it: %s" % (path, errors)


# ----------------------------------------------------------------- links

_LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)


def _anchors(markdown):
    """GitHub's heading anchors of a Markdown text."""
    anchors = set()
    for line in _FENCE.sub("", markdown).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def _relative_links(document):
    text = _FENCE.sub("", document.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    for target in _LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
            continue
        yield target


def test_the_documents_exist():
    names = {path.name for path in DOCUMENTS}
    assert {"quickstart.md", "configuration.md", "migration.md", "awx.md", "scaling.md", "troubleshooting.md",
            "modules.md", "README.md"} <= names


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_relative_links_resolve(document):
    broken = []
    for target in _relative_links(document):
        path_part, _hash, anchor = target.partition("#")
        resolved = (document.parent / path_part).resolve() if path_part else document
        if not resolved.exists():
            broken.append("%s: no such file" % target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved.read_text()):
            broken.append("%s: no heading with anchor #%s in %s" % (target, anchor, resolved.name))
    assert broken == []


def test_the_link_checker_sees_broken_links(tmp_path):
    (tmp_path / "there.md").write_text("# A heading\n")
    document = tmp_path / "page.md"
    document.write_text("[ok](there.md) [anchor](there.md#a-heading) [bad](missing.md) [web](https://x.org)\n"
                        "```\n[in code](nowhere.md)\n```\n")
    assert list(_relative_links(document)) == ["there.md", "there.md#a-heading", "missing.md"]
    assert _anchors((tmp_path / "there.md").read_text()) == {"a-heading"}


# ----------------------------------------------------------------- the index

def _collection_contents():
    """Every module, filter, role, playbook, inventory/callback plugin, event source and rulebook."""
    import importlib

    names = set()
    names.update(path.stem for path in (REPO / "plugins" / "modules").glob("*.py") if path.stem != "__init__")
    for path in (REPO / "plugins" / "filter").glob("*.py"):
        if path.stem != "__init__":
            plugin = importlib.import_module("ansible_collections.waldur.site_agent.plugins.filter." + path.stem)
            names.update(plugin.FilterModule().filters())
    names.update(path.name for path in (REPO / "roles").iterdir() if (path / "tasks").is_dir())
    names.update(path.stem for path in (REPO / "playbooks").glob("*.yml"))
    for kind in ("inventory", "callback"):
        names.update(path.stem for path in (REPO / "plugins" / kind).glob("*.py") if path.stem != "__init__")
    names.update(path.stem for path in (REPO / "extensions" / "eda" / "plugins" / "event_source").glob("*.py"))
    names.update(path.stem for path in (REPO / "extensions" / "eda" / "rulebooks").glob("*.yml"))
    return names


def test_the_index_describes_every_part_of_the_collection():
    index = (REPO / "docs" / "modules.md").read_text()
    described = set(re.findall(r"\*\*`([a-z_]+)`\*\*", index))
    contents = _collection_contents()
    assert {"do_droplet", "vm_items", "schedule", "order_process", "offerings", "waldur_stomp"} <= contents
    assert sorted(contents - described) == []
    assert sorted(described - contents) == []
