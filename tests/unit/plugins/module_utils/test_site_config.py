"""Config validation: every problem at once, with key paths, never a secret's value."""

from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import offerings_for, validate

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
    assert any(error.startswith("offerings[1].backend_settings.client_secret: required (or x509_certificate_path") for error in errors)
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


def test_another_backends_offering_is_skipped_with_one_warning_and_the_rest_is_validated():
    """The migration guide promises the upstream file as it is: a SLURM offering beside ours
    is left to its own agent (named in one warning), ours are still checked."""
    config = good_config()
    config["offerings"].insert(0, {"name": "HPC", "backend_type": "slurm", "waldur_offering_uuid": "nope",
                                   "backend_settings": {"default_account": "root"}})
    config["offerings"][2]["backend_settings"] = {}
    errors, warnings = validate(config)
    assert warnings == ["offerings: skipped, not Azure or DigitalOcean (left to the agent of their backend): "
                        "offerings[0] 'HPC' (backend_type slurm)"]
    assert not any(e.startswith("offerings[0]") for e in errors)
    # an empty Azure backend_settings lacks its subscription; auth_source auto may still find a
    # credential file, a managed identity or the Azure CLI at run time
    assert [e for e in errors if e.startswith("offerings[2].backend_settings.")] == [
        "offerings[2].backend_settings.subscription_id: required"]
    assert [o["name"] for o in offerings_for(config, "order_process")] == ["DO", "Azure"]


def test_a_file_of_other_backends_only_is_refused():
    config = good_config()
    for offering in config["offerings"]:
        offering["backend_type"] = "SLURM"
    errors, _warnings = validate(config)
    assert errors == ["offerings: none is an Azure or DigitalOcean offering: this collection has nothing to do "
                      "(backend_type must be azure or digitalocean)"]


def test_offerings_for_a_pass_and_an_offering():
    config = good_config()
    assert [o["name"] for o in offerings_for(config, "report")] == ["DO"]
    assert [o["name"] for o in offerings_for(config, "order_process", "a0000000000000000000000000000001")] == ["Azure"]
    assert [o["name"] for o in offerings_for(config, None, "DO")] == ["DO"]


def test_secrets_missing_from_the_file_come_from_the_environment():
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import apply_environment

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


def test_an_oidc_only_offering_is_refused_naming_the_token():
    config = good_config()
    offering = config["offerings"][0]
    del offering["waldur_api_token"]
    offering.update(oidc_token_url="https://sso.example.com/token", oidc_client_id="agent", oidc_client_secret=SECRET)
    errors, _warnings = validate(config)
    assert len(errors) == 1
    assert errors[0].startswith("offerings[0].waldur_api_token: required: this collection authenticates to Waldur "
                                "with a static token only; OIDC")
    assert SECRET not in errors[0]


def test_two_offerings_with_one_uuid_are_refused():
    config = good_config()
    config["offerings"][1]["waldur_offering_uuid"] = "D0000000-0000-0000-0000-000000000001"
    errors, _warnings = validate(config)
    assert len(errors) == 1 and errors[0].startswith(
        "offerings[1].waldur_offering_uuid: the same offering as offerings[0]")


def test_a_token_over_plain_http_to_another_host_is_a_warning_but_loopback_is_not():
    config = good_config()
    config["offerings"][0]["waldur_api_url"] = "http://waldur.example.com/api/"
    config["offerings"][1]["waldur_api_url"] = "http://127.0.0.1:8000/api/"
    errors, warnings = validate(config)
    assert errors == []
    assert warnings == ["offerings[0].waldur_api_url: plain http:// to waldur.example.com: the Waldur token crosses "
                        "the network unencrypted; use https://"]


def test_a_misspelt_role_key_is_named_with_the_key_it_resembles():
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import role_key_typos

    config = good_config()
    for offering in config["offerings"]:
        offering["order_procesing_backend"] = offering.pop("order_processing_backend")
    errors, warnings = validate(config)
    assert errors == []
    assert "offerings[0].order_procesing_backend: unknown key, ignored (did you mean order_processing_backend?)" \
        in warnings
    assert offerings_for(config, "order_process") == []
    assert role_key_typos(config, "order_process") == [
        "offerings[0].order_procesing_backend", "offerings[1].order_procesing_backend"]


def test_a_pass_names_the_offerings_it_leaves_out():
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import select_offerings

    config = good_config()
    assert select_offerings(config, "membership_sync") == ([], ["DO", "Azure"])
    selected, left_out = select_offerings(config, "report")
    assert [o["name"] for o in selected] == ["DO"] and left_out == ["Azure"]
    assert select_offerings(config, "report", "Azure") == ([], ["Azure"])


def test_timezone_verify_ssl_and_price_are_checked(tmp_path):
    config = good_config()
    config["timezone"] = "Mars/Olympus_Mons"
    config["offerings"][0]["verify_ssl"] = str(tmp_path / "missing-ca.pem")
    config["offerings"][0]["backend_components"]["cpu"]["price"] = -1
    errors, _warnings = validate(config)
    assert sorted(e.split(":")[0] for e in errors) == [
        "offerings[0].backend_components.cpu.price", "offerings[0].verify_ssl", "timezone"]
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    config["timezone"] = "Europe/Tallinn"
    config["offerings"][0]["verify_ssl"] = str(ca)
    config["offerings"][0]["backend_components"]["cpu"]["price"] = 0.5
    assert validate(config) == ([], [])


BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
offerings: []
"""


def test_yaml_aliases_that_expand_without_bound_are_refused_without_expanding_them():
    import resource

    from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import yaml_bound_problem

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    problem = yaml_bound_problem(BOMB)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert len(BOMB) < 600
    assert problem.startswith("its YAML aliases expand to more than 100000 values (an alias bomb?)")
    assert grown_kib < 20000
    assert yaml_bound_problem("a: &x [1, 2]\nb: *x\nofferings: []\n") is None
    assert yaml_bound_problem("a: &x [1, *x]\n").startswith("a YAML alias refers to a value that contains it")
    assert yaml_bound_problem("a: [unclosed\n") is None  # the loader reports syntax errors itself


def test_azure_endpoints_over_plain_http_are_warned_about_by_key():
    from ansible_collections.waldur.site_agent.plugins.module_utils.azure.endpoints import plain_http_endpoints

    warnings = plain_http_endpoints({"arm_endpoint": "http://arm.sovereign.example",
                                     "authority_host": "http://127.0.0.1:8443"})
    assert len(warnings) == 1 and warnings[0].startswith("arm_endpoint: plain http:// for the Azure Resource Manager")
    assert plain_http_endpoints({"arm_endpoint": "https://management.azure.com"}) == []
    config = good_config()
    config["offerings"][1]["backend_settings"]["arm_endpoint"] = "http://arm.sovereign.example"
    errors, warnings = validate(config)
    assert errors == [] and warnings == [
        "offerings[1].backend_settings.arm_endpoint: plain http:// for the Azure Resource Manager base URL "
        "(http://arm.sovereign.example): the Azure credentials and tokens cross the network unencrypted; use https://"]


# ---- misspelt keys: did you mean, and an error where the passes read the key ------------------

def test_a_misspelt_backend_setting_is_an_error_naming_the_key_it_resembles():
    config = good_config()
    settings = config["offerings"][0]["backend_settings"]
    settings["default_regoin"] = settings.pop("default_region")
    config["offerings"][1]["backend_settings"]["defualt_location"] = "westeurope"
    errors, warnings = validate(config)
    assert errors == [
        "offerings[0].backend_settings.default_regoin: unknown digitalocean setting; did you mean default_region? "
        "(as written it would be ignored)",
        "offerings[1].backend_settings.defualt_location: unknown azure setting; did you mean default_location? "
        "(as written it would be ignored)"]
    assert warnings == []


def test_an_unknown_backend_setting_like_nothing_the_passes_read_is_a_warning():
    """Forward compatibility: a key of a later release or another tool loads, with a warning; one
    close to an upstream key this collection ignores anyway is a warning with the hint."""
    config = good_config()
    config["offerings"][0]["backend_settings"].update(vpc_uuid="x", soft_delet=True)
    errors, warnings = validate(config)
    assert errors == []
    assert warnings == ["offerings[0].backend_settings.soft_delet: unknown digitalocean setting, ignored "
                        "(did you mean soft_delete?)",
                        "offerings[0].backend_settings.vpc_uuid: unknown digitalocean setting, ignored"]


def test_misspelt_component_keys_and_size_mapping_components_are_errors():
    config = good_config()
    offering = config["offerings"][0]
    offering["backend_components"]["cpu"]["unitfactor"] = 2
    offering["backend_settings"]["size_mapping"] = {"s-1vcpu-1gb": {"cpus": 1}, "s-2": {"gpu_hours": 1}}
    errors, warnings = validate(config)
    assert errors == [
        "offerings[0].backend_components.cpu.unitfactor: unknown component key; did you mean unit_factor? "
        "(as written it would be ignored)",
        "offerings[0].backend_settings.size_mapping.s-1vcpu-1gb.cpus: unknown component of backend_components; "
        "did you mean cpu? (as written it would be ignored)"]
    assert warnings == ["offerings[0].backend_settings.size_mapping.s-2.gpu_hours: unknown component of "
                        "backend_components, ignored"]


def test_a_misspelt_root_key_is_named_with_the_key_it_resembles():
    config = good_config()
    config["timezon"] = "UTC"
    assert validate(config)[1] == ["timezon: unknown key, ignored (did you mean timezone?)"]


def _settings_read_by_the_code():
    """``{backend: {key}}`` of every backend setting a role, a playbook or a backend of the registry reads."""
    import ast
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[4]
    read = {"azure": set(), "digitalocean": set(), "either": set()}
    for path in sorted((root / "roles").rglob("*.yml")) + sorted((root / "playbooks").rglob("*.yml")):
        backend = "azure" if "azure" in path.name else "digitalocean" if "digitalocean" in path.name else "either"
        read[backend].update(re.findall(r"backend_settings\.([A-Za-z_][A-Za-z0-9_]*)", path.read_text()))
        assert not re.search(r"backend_settings\[", path.read_text()), path  # read by name only, so found here
    functions = []
    # the registry's own functions read the keys its entries declare (create_inputs: checked below)
    for path in sorted(set((root / "plugins" / "plugin_utils" / "backends").glob("*.py"))
                       - {root / "plugins" / "plugin_utils" / "backends" / "__init__.py"}):
        backend = path.stem if path.stem in ("azure", "digitalocean") else "either"
        functions.extend((backend, node) for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef))
    for backend, function in functions:
        loops = {}
        for node in ast.walk(function):
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                loops[node.target.id] = [c.value for c in ast.walk(node.iter) if isinstance(c, ast.Constant)]
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                target, key = node.func.value, node.args[0] if node.args else None
            elif isinstance(node, ast.Subscript):
                target, key = node.value, node.slice
            else:
                continue
            if not (isinstance(target, ast.Name) and target.id == "settings"):
                continue
            if isinstance(key, ast.Constant):
                read[backend].add(key.value)
            else:
                assert isinstance(key, ast.Name) and key.id in loops, ast.dump(node)
                read[backend].update(loops[key.id])
    return read


def test_every_backend_setting_the_code_reads_is_in_the_one_list_validation_checks_against():
    from ansible_collections.waldur.site_agent.plugins.plugin_utils import backends
    from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import backend_settings_read

    read = _settings_read_by_the_code()
    assert {"default_region", "size_mapping", "default_ssh_public_key"} <= read["digitalocean"]  # the scan sees
    assert {"default_location", "allowed_ssh_ranges", "subscription_id"} <= read["azure"]
    for backend in ("azure", "digitalocean"):
        assert read[backend] - backend_settings_read(backend) == set(), backend
    assert read["either"] - (backend_settings_read("azure") | backend_settings_read("digitalocean")) == set()
    for entry in backends.every():
        declared = set(key for _input, keys, _attributes in entry.create_inputs for key in keys)
        assert declared - backend_settings_read(entry.name) == set(), entry.name


def test_azure_sign_in_keys_are_validated_by_key_path_and_pem_text_is_not_a_stray_newline(tmp_path):
    """The sign-in keys of azure.azcollection are known keys (no 'unknown setting' warning); a
    certificate's PEM text is lines by nature, not a secret with a stray newline."""
    pem = ("-----BEGIN PRIVATE KEY-----\nMIIE" + SECRET + "\n-----END PRIVATE KEY-----\n"
           "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n")
    config = good_config()
    settings = config["offerings"][1]["backend_settings"]
    del settings["client_secret"]
    settings.update(x509_certificate=pem, x509_certificate_password=SECRET, cloud_environment="AzureUSGovernment")
    assert validate(config) == ([], [])
    settings.update(auth_source="managed-identity")
    errors, _warnings = validate(config)
    assert errors == ["offerings[1].backend_settings.auth_source: expected one of auto, cli, credential_file, env, "
                      "msi, got 'managed-identity'"]
    settings.update(auth_source="msi", x509_certificate_path=str(tmp_path / "missing.pem"))
    errors, _warnings = validate(config)
    assert errors[0].startswith("offerings[1].backend_settings.x509_certificate_path: expected the path of a "
                                "readable file")
    assert not any(SECRET in error for error in errors)
