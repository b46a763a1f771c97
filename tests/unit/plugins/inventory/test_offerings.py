"""The waldur.site_agent.offerings inventory plugin, run through ansible-inventory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.waldur.site_agent.plugins.inventory.offerings import InventoryModule, host_names
from tests.helpers import ansible_env

WALDUR_TOKEN = "waldur-token-8d1f0c2b7a"
DO_TOKEN = "dop_v1_4be0a19f6d2c"
CLIENT_SECRET = "azure-secret-Zx9~q1"
SECRETS = (WALDUR_TOKEN, DO_TOKEN, CLIENT_SECRET)
VAULT_PASSWORD = "inventory-vault-password"
BIN = Path(sys.executable).parent


def site_config():
    return {
        "offerings": [
            {"name": "DigitalOcean droplets", "waldur_api_url": "https://waldur.example.com/api/",
             "waldur_api_token": WALDUR_TOKEN, "waldur_offering_uuid": "D0000000-0000-0000-0000-000000000001",
             "backend_type": "digitalocean", "order_processing_backend": "digitalocean",
             "reporting_backend": "digitalocean", "membership_sync_backend": "digitalocean",
             "backend_settings": {"token": DO_TOKEN, "default_region": "ams3"}},
            {"name": "Azure VMs", "waldur_api_url": "https://waldur2.example.com/api/",
             "waldur_api_token": WALDUR_TOKEN, "waldur_offering_uuid": "a0000000000000000000000000000001",
             "backend_type": "Azure", "reporting_backend": "azure",
             "backend_settings": {"subscription_id": "sub", "tenant_id": "tenant", "client_id": "client",
                                  "client_secret": CLIENT_SECRET}},
        ],
    }


def write_yaml(path: Path, data) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def inventory(*args, enabled="waldur.site_agent.offerings", env=None):
    run_env = ansible_env({"ANSIBLE_INVENTORY_ENABLED": enabled, **(env or {})})
    return subprocess.run([str(BIN / "ansible-inventory"), *map(str, args)], env=run_env, capture_output=True,
                          text=True, timeout=120, check=False)


def unwrapped(text):
    """ansible-core 2.18 and older wrap warnings at the terminal width."""
    return " ".join(text.split())


def plain(value):
    """ansible-inventory marks strings from inventory plugins as unsafe: unwrap them."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def listing(*args, **kwargs):
    run = inventory("--list", *args, **kwargs)
    assert run.returncode == 0, run.stderr
    return plain(json.loads(run.stdout)), run


def hosts_and_groups(*args, **kwargs):
    return listing(*args, **kwargs)[0]


def members(data, group):
    return sorted(data.get(group, {}).get("hosts", []))


@pytest.fixture
def config_file(tmp_path):
    return write_yaml(tmp_path / "waldur-site-agent-config.yaml", site_config())


def test_one_host_per_offering_with_its_variables(config_file):
    data = hosts_and_groups("-i", config_file)
    hostvars = data["_meta"]["hostvars"]
    assert sorted(hostvars) == ["Azure_VMs", "DigitalOcean_droplets"]
    assert hostvars["DigitalOcean_droplets"] == {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "waldur_offering_name": "DigitalOcean droplets",
        "waldur_offering_uuid": "d0000000000000000000000000000001",
        "waldur_backend_type": "digitalocean",
        "waldur_api_url": "https://waldur.example.com/api/",
        "waldur_offering_roles": ["audit", "membership_sync", "order_process", "report"],
        "agent_pass_config": str(config_file.resolve()),
    }
    assert hostvars["Azure_VMs"]["waldur_backend_type"] == "azure"
    assert hostvars["Azure_VMs"]["waldur_offering_roles"] == ["report"]


def test_groups_by_backend_and_by_pass(config_file):
    data = hosts_and_groups("-i", config_file)
    assert members(data, "waldur_offerings") == ["Azure_VMs", "DigitalOcean_droplets"]
    assert members(data, "backend_digitalocean") == ["DigitalOcean_droplets"]
    assert members(data, "backend_azure") == ["Azure_VMs"]
    assert members(data, "order_process") == ["DigitalOcean_droplets"]
    assert members(data, "report") == ["Azure_VMs", "DigitalOcean_droplets"]
    assert members(data, "membership_sync") == ["DigitalOcean_droplets"]
    # the audit looks at the offerings that process orders
    assert members(data, "audit") == ["DigitalOcean_droplets"]


def test_no_secret_leaves_the_file(config_file):
    run = inventory("-i", config_file, "--list")
    host = inventory("-i", config_file, "--host", "Azure_VMs")
    assert run.returncode == 0 and host.returncode == 0
    for secret in SECRETS:
        assert secret not in run.stdout + run.stderr + host.stdout + host.stderr


def test_a_vault_encrypted_config_is_decrypted_with_the_vault_password(tmp_path, config_file):
    password_file = tmp_path / "vault-password"
    password_file.write_text(VAULT_PASSWORD + "\n")
    encrypt = subprocess.run([str(BIN / "ansible-vault"), "encrypt", "--vault-password-file", str(password_file),
                              str(config_file)], env=ansible_env(), capture_output=True, text=True, check=False)
    assert encrypt.returncode == 0, encrypt.stderr
    assert config_file.read_text().startswith("$ANSIBLE_VAULT;")

    data, run = listing("-i", config_file, "--vault-password-file", password_file)
    assert members(data, "waldur_offerings") == ["Azure_VMs", "DigitalOcean_droplets"]
    assert all(secret not in run.stdout for secret in SECRETS)

    without_password = inventory("-i", config_file, "--list", env={"ANSIBLE_INVENTORY_UNPARSED_FAILED": "1"})
    assert without_password.returncode != 0
    assert "no vault secrets" in unwrapped(without_password.stderr)


def test_vault_encrypted_values_inside_the_config(tmp_path):
    password_file = tmp_path / "vault-password"
    password_file.write_text(VAULT_PASSWORD + "\n")
    encrypted = subprocess.run(
        [str(BIN / "ansible-vault"), "encrypt_string", "--vault-password-file", str(password_file),
         "--stdin-name", "token"], input=DO_TOKEN, env=ansible_env(), capture_output=True, text=True, check=False)
    assert encrypted.returncode == 0, encrypted.stderr
    text = yaml.safe_dump({"offerings": [{**site_config()["offerings"][0], "backend_settings": {}}]})
    text = text.replace("backend_settings: {}", "backend_settings:\n    " + encrypted.stdout.strip().replace(
        "\n", "\n    "))
    config_file = tmp_path / "config.yml"
    config_file.write_text(text)

    data, run = listing("-i", config_file, "--vault-password-file", password_file)
    assert members(data, "waldur_offerings") == ["DigitalOcean_droplets"]
    assert DO_TOKEN not in run.stdout + run.stderr


def test_an_invalid_config_fails_with_every_problem_and_its_key_path(tmp_path):
    config = site_config()
    config["offerings"][0]["backend_settings"]["token"] = ""
    config["offerings"][1]["waldur_offering_uuid"] = "not-a-uuid"
    config["offerings"][1]["backend_settings"]["client_secret"] = None
    config["offerings"][1]["waldur_api_url"] = "waldur.example.com"
    path = write_yaml(tmp_path / "config.yaml", config)

    run = inventory("-i", path, "--list", env={"ANSIBLE_INVENTORY_UNPARSED_FAILED": "1"})
    assert run.returncode != 0
    assert "4 problems in the Waldur site agent configuration" in unwrapped(run.stderr)
    for key_path in ("offerings[0].backend_settings.token: required",
                     "offerings[1].waldur_offering_uuid:",
                     "offerings[1].backend_settings.client_secret: required",
                     "offerings[1].waldur_api_url:"):
        assert key_path in unwrapped(run.stderr)
    for secret in SECRETS:
        assert secret not in run.stdout + run.stderr


def test_an_invalid_config_is_claimed_not_declined(tmp_path):
    """Declining it would leave an empty inventory and no word about why."""
    plugin = InventoryModule()
    broken = tmp_path / "waldur-site-agent-config.yaml"
    broken.write_text("offerings:\n  - name: only a name\n")
    assert plugin.verify_file(str(broken))
    empty = tmp_path / "empty-offerings.conf"
    empty.write_text("log_level: INFO\nofferings:\n")
    assert plugin.verify_file(str(empty))
    vaulted = tmp_path / "vaulted.yaml"
    vaulted.write_text("$ANSIBLE_VAULT;1.1;AES256\n3031\n")
    assert plugin.verify_file(str(vaulted))
    inventory_config = tmp_path / "prod.waldur_offerings.yml"
    inventory_config.write_text("plugin: waldur.site_agent.offerings\n")
    assert plugin.verify_file(str(inventory_config))
    other = tmp_path / "hosts.yml"
    other.write_text("all:\n  hosts:\n    web1:\n")
    assert not plugin.verify_file(str(other))
    assert not plugin.verify_file(str(tmp_path / "missing.yaml"))


def test_yaml_errors_name_the_line_but_never_quote_it(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(f"offerings:\n  - name: x\n    waldur_api_token: {WALDUR_TOKEN}: oops\n")
    run = inventory("-i", path, "--list", env={"ANSIBLE_INVENTORY_UNPARSED_FAILED": "1"})
    assert run.returncode != 0
    assert "could not be read (line 3, column" in unwrapped(run.stderr)
    assert WALDUR_TOKEN not in run.stderr and WALDUR_TOKEN not in unwrapped(run.stderr)


def test_an_inventory_config_file_with_constructed_options(tmp_path, config_file):
    inventory_config = write_yaml(tmp_path / "site.waldur_offerings.yml", {
        "plugin": "waldur.site_agent.offerings",
        "config_path": config_file.name,  # relative to the inventory file
        "strict": True,
        "compose": {"offering_short_uuid": "waldur_offering_uuid[:8]"},
        "groups": {"report_only": "'order_process' not in waldur_offering_roles"},
        "keyed_groups": [{"key": "waldur_api_url | urlsplit('hostname')", "prefix": "waldur"}],
    })
    data = hosts_and_groups("-i", inventory_config, enabled="auto")
    hostvars = data["_meta"]["hostvars"]
    assert hostvars["Azure_VMs"]["offering_short_uuid"] == "a0000000"
    assert hostvars["Azure_VMs"]["agent_pass_config"] == str(config_file.resolve())
    assert members(data, "report_only") == ["Azure_VMs"]
    assert members(data, "waldur_waldur_example_com") == ["DigitalOcean_droplets"]
    assert members(data, "waldur_waldur2_example_com") == ["Azure_VMs"]


def test_compose_cannot_reach_the_secrets(tmp_path, config_file):
    inventory_config = write_yaml(tmp_path / "leak.waldur_offerings.yml", {
        "plugin": "waldur.site_agent.offerings", "config_path": str(config_file), "strict": True,
        "compose": {"stolen": "waldur_api_token"}})
    run = inventory("-i", inventory_config, "--list", enabled="auto", env={"ANSIBLE_INVENTORY_UNPARSED_FAILED": "1"})
    assert run.returncode != 0
    assert "waldur_api_token" in unwrapped(run.stderr) and WALDUR_TOKEN not in run.stdout + run.stderr


def test_config_path_comes_from_the_environment(tmp_path, config_file):
    inventory_config = write_yaml(tmp_path / "waldur_offerings.yaml", {"plugin": "waldur.site_agent.offerings"})
    data = hosts_and_groups("-i", inventory_config, enabled="auto", env={"WALDUR_SITE_AGENT_CONFIG": str(config_file)})
    assert members(data, "waldur_offerings") == ["Azure_VMs", "DigitalOcean_droplets"]

    run = inventory("-i", inventory_config, "--list", enabled="auto",
                    env={"WALDUR_SITE_AGENT_CONFIG": "", "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1"})
    assert run.returncode != 0 and "config_path is required" in unwrapped(run.stderr)


def offering(name, uuid):
    return {"name": name, "waldur_offering_uuid": uuid}


def test_host_names_are_safe_and_unique():
    offerings = [offering("My DO [prod]", "d0000000000000000000000000000001"),
                 offering("My DO (prod)", "d1000000-0000-0000-0000-000000000001"),
                 offering("report", "a0000000000000000000000000000001"),
                 offering("{{ lookup('pipe', 'id') }}", "b0000000000000000000000000000001"),
                 offering("azure.east-1", "c0000000000000000000000000000001")]
    assert host_names(offerings) == ["My_DO_prod_d0000000", "My_DO_prod_d1000000", "report_a0000000",
                                     "lookup_pipe_id", "azure.east-1"]
    assert host_names([offering("web", "c0000000000000000000000000000001")], taken={"web"}) == ["web_c0000000"]
