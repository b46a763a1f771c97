"""Config validation: every problem at once, with key paths, never a secret's value."""

from ansible_collections.waldur.site_agent.plugins.module_utils.site_config import offerings_for, validate

SECRET = "s3cr3t-value-never-printed"


def good_config():
    return {
        "timezone": "UTC",
        "offerings": [
            {"name": "DO", "waldur_api_url": "https://waldur.example.com/api/", "waldur_api_token": SECRET,
             "waldur_offering_uuid": "d0000000000000000000000000000001", "backend_type": "digitalocean",
             "order_processing_backend": "digitalocean", "reporting_backend": "digitalocean",
             "backend_settings": {"token": SECRET, "default_region": "ams3"},
             "backend_components": {"cpu": {"measured_unit": "Cores", "accounting_type": "limit",
                                            "label": "CPU", "unit_factor": 1}}},
            {"name": "Azure", "waldur_api_url": "https://waldur.example.com/api/", "waldur_api_token": SECRET,
             "waldur_offering_uuid": "a0000000-0000-0000-0000-000000000001", "backend_type": "azure",
             "order_processing_backend": "azure",
             "backend_settings": {"subscription_id": "s", "tenant_id": "t", "client_id": "c",
                                  "client_secret": SECRET}},
        ],
    }


def test_a_good_config_has_no_errors():
    errors, warnings = validate(good_config())
    assert errors == [] and warnings == []


def test_every_problem_at_once_with_key_paths():
    config = good_config()
    config["log_level"] = "LOUD"
    config["surprise"] = 1
    config["offerings"][0]["waldur_api_url"] = "waldur.example.com"
    config["offerings"][0]["backend_components"]["cpu"]["accounting_type"] = "sometimes"
    config["offerings"][0]["backend_components"]["cpu"]["unit_factor"] = 0
    del config["offerings"][1]["backend_settings"]["client_secret"]
    config["offerings"][1]["reporting_backend"] = "digitalocean"
    config["offerings"][1]["waldur_offering_uuid"] = "not-a-uuid"
    errors, warnings = validate(config)
    assert "offerings[1].backend_settings.client_secret: required" in errors
    assert any(e.startswith("log_level:") for e in errors)
    assert any(e.startswith("offerings[0].waldur_api_url:") for e in errors)
    assert any(e.startswith("offerings[0].backend_components.cpu.accounting_type:") for e in errors)
    assert any(e.startswith("offerings[0].backend_components.cpu.unit_factor:") for e in errors)
    assert any(e.startswith("offerings[1].reporting_backend:") for e in errors)
    assert any(e.startswith("offerings[1].waldur_offering_uuid:") for e in errors)
    assert len(errors) == 7
    assert warnings == ["surprise: unknown key, ignored"]


def test_secrets_never_appear_in_messages():
    config = good_config()
    config["offerings"][0]["backend_settings"]["token"] = 12345  # wrong type: message names the type only
    config["offerings"][0]["waldur_api_token"] = ["not", "a", SECRET]
    errors, warnings = validate(config)
    assert errors
    assert all(SECRET not in line and "12345" not in line for line in errors + warnings)


def test_unknown_backend_type_and_missing_token():
    config = good_config()
    config["offerings"][0]["backend_type"] = "slurm"
    config["offerings"][1]["backend_settings"] = {}
    errors, warnings = validate(config)
    assert warnings == []
    assert any("offerings[0].backend_type: unknown backend 'slurm'" in e for e in errors)
    assert sum(1 for e in errors if e.startswith("offerings[1].backend_settings.")) == 4


def test_offerings_for_a_pass_and_an_offering():
    config = good_config()
    assert [o["name"] for o in offerings_for(config, "report")] == ["DO"]
    assert [o["name"] for o in offerings_for(config, "order_process", "a0000000000000000000000000000001")] == ["Azure"]
    assert [o["name"] for o in offerings_for(config, None, "DO")] == ["DO"]


def test_secrets_missing_from_the_file_come_from_the_environment():
    from ansible_collections.waldur.site_agent.plugins.module_utils.site_config import apply_environment

    config = good_config()
    del config["offerings"][0]["waldur_api_token"]
    del config["offerings"][0]["backend_settings"]["token"]
    config["offerings"][1]["backend_settings"] = {"client_secret": "from-file"}
    environ = {"WALDUR_API_TOKEN": "w", "DIGITALOCEAN_ACCESS_TOKEN": "d", "AZURE_SUBSCRIPTION_ID": "s",
               "AZURE_TENANT": "t", "AZURE_CLIENT_ID": "c", "AZURE_SECRET": "from-env"}
    filled = apply_environment(config, environ)
    assert validate(config) == ([], [])
    assert config["offerings"][0]["waldur_api_token"] == "w"
    assert config["offerings"][0]["backend_settings"]["token"] == "d"
    assert config["offerings"][1]["backend_settings"]["client_secret"] == "from-file"  # the file wins
    assert "offerings[1].backend_settings.tenant_id <- AZURE_TENANT" in filled
    assert not any("client_secret" in line for line in filled)
    assert all("w" != line and "from-env" not in line for line in filled)
