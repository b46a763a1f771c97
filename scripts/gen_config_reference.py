"""Generate the reference tables of docs/configuration.md from the code.

    .venv/bin/python scripts/gen_config_reference.py           # rewrite the tables in place
    .venv/bin/python scripts/gen_config_reference.py --check   # exit 1 when they are out of date

What comes from the code, so the tables cannot drift from it:

* the keys of every table: the schema in ``plugins/plugin_utils/site_config.py``
  (``ROOT_KEYS``, ``OFFERING_KEYS``, ``COMPONENT_KEYS``, ``COMMON_BACKEND_SETTINGS``)
  and each backend's ``credentials`` and ``settings`` in the backend registry
  (``plugins/plugin_utils/backends``);
* the type of every backend setting the schema types, and the allowed values
  (``LOG_LEVELS``, ``ACCOUNTING_TYPES``, ``LIMIT_PERIODS``, ``SUPPORTED_BACKENDS``);
* the defaults of the endpoint settings: the modules' argument specs;
* whether a backend setting is used: read by a role or playbook
  (``backend_settings.<key>``) or named in a backend's planning;
* the component keys ``load_components`` sends to Waldur (``waldur_components``);
* the order attributes: the ``attributes`` lookups of each backend's planning.

What the code cannot say (meaning, the remaining types and defaults, required
or not) is in the tables below, keyed by the schema's names. A schema key with
no entry, or an entry for a key the schema no longer has, is an error: the
script refuses to write and ``tests/unit/test_docs.py`` fails, so the reference
stays complete. Whether a key is required is checked against ``validate()`` by
that test.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "configuration.md"
# each backend's planning (the registry's modules), which reads the order attributes and settings
BACKENDS = REPO / "plugins" / "plugin_utils" / "backends"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.helpers import import_collection_from_checkout  # noqa: E402  (needs REPO on sys.path)

import_collection_from_checkout()

from ansible_collections.waldur.site_agent.plugins.module_utils.azure import clients as azure_clients  # noqa: E402
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean import client as digitalocean  # noqa: E402
from ansible_collections.waldur.site_agent.plugins.plugin_utils import backends, site_config  # noqa: E402
from ansible_collections.waldur.site_agent.plugins.modules import waldur_components  # noqa: E402

NOT_USED = "no"
USED = "yes"

# Names of the schema's value kinds (site_config._expect) as the tables show them.
KIND_TYPES = {
    "str": "string",
    "int": "integer",
    "number": "number",
    "bool": "boolean",
    "url": "URL",
    "uuid": "UUID",
    "cidr": "IPv4 CIDR",
    "str_or_list": "string or list of strings",
    "image": "`publisher:offer:sku:version`, or a mapping with those four keys",
    "size_mapping": "mapping: size slug to `{component: number}`",
}


def _choices(values):
    return "one of " + ", ".join("`%s`" % value for value in values)


# --------------------------------------------------------------------- descriptions
# Each entry: required (bool), type (when the schema does not type the key), default
# (None: no default), used (root, offering and component keys; backend settings are
# derived), meaning.

ROOT = {
    "offerings": dict(
        required=True, type="list of mappings", used=USED,
        meaning="The offerings this agent serves, one mapping each (next table). At least one; names and "
                "`waldur_offering_uuid`s must be unique. Offerings of other backends (SLURM, ...) may stay in "
                "the file: they are skipped, named in one warning."),
    "sentry_dsn": dict(
        type="URL", used=USED,
        meaning="Sentry DSN. The `waldur.site_agent.waldur_json` callback sends every failed task and failed "
                "batch item there when `sentry-sdk` is installed. `WALDUR_SITE_AGENT_SENTRY_DSN` or "
                "`SENTRY_DSN` win over it."),
    "elastic_apm_server_url": dict(
        type="URL", used=NOT_USED,
        meaning="Validated, not used: the passes send no APM data."),
    "timezone": dict(
        type="string (IANA name)", default="`UTC`", used=USED,
        meaning="Decides the report pass's current month and the usage `date` (midnight on the first day of "
                "the month in this zone); a later `report_billing_period` is refused."),
    "global_proxy": dict(
        type="`http`, `https`, `socks5` or `socks5h` URL", used=NOT_USED,
        meaning="Validated, not used. Set `HTTPS_PROXY` and `NO_PROXY` in the environment of the passes "
                "(`schedule_environment`); the Waldur, DigitalOcean and Azure clients honour them."),
    "log_level": dict(
        type=_choices(site_config.LOG_LEVELS), used=NOT_USED,
        meaning="Validated, not used: what is printed is decided by the stdout callback and `-v`."),
    "reporting_periods": dict(
        type="integer, 1 to 12", used=NOT_USED,
        meaning="Validated, not used: the report pass reports one month, the current one or "
                "`report_billing_period`."),
    "api_key_final_report_days": dict(
        type="integer, 0 to 28", used=NOT_USED,
        meaning="Validated, not used: Azure and DigitalOcean resources have no API keys."),
    "expose_backend_error_details": dict(
        type="boolean", used=NOT_USED,
        meaning="Validated, not used: the backend's message always becomes the order's `error_message` "
                "(it never contains a secret)."),
    "log_shipping": dict(
        type="mapping", used=NOT_USED,
        meaning="Validated as a mapping, not used: ship the JSON lines of the `waldur_json` callback with "
                "your log collector."),
}

OFFERING = {
    "name": dict(
        required=True, type="string", used=USED,
        meaning="Unique name of the offering. Logs and pass summaries carry it; the inventory host is made "
                "from it; `-e 'waldur_offering_name=\"<name or UUID>\"'` selects one offering (quoted so that "
                "Ansible keeps a name with spaces whole)."),
    "waldur_api_url": dict(
        required=True, type="URL", used=USED,
        meaning="The Waldur API, for example `https://waldur.example.com/api/` (the `/api/` suffix is "
                "optional)."),
    "waldur_api_token": dict(
        required=True, type="string, secret", used=USED,
        meaning="Token of a Waldur user with OFFERING.MANAGER on the offering (or an owner of the service "
                "provider's organisation), sent as `Authorization: Token ...`."),
    "waldur_offering_uuid": dict(
        required=True, type="UUID", used=USED,
        meaning="The offering in Waldur; dashes optional."),
    "oidc_token_url": dict(
        type="URL", used=NOT_USED,
        meaning="Validated (the three `oidc_*` keys go together), not supported: the passes authenticate with "
                "`waldur_api_token` only, and an offering with OIDC but no token is refused at validation."),
    "oidc_client_id": dict(type="string", used=NOT_USED, meaning="See `oidc_token_url`."),
    "oidc_client_secret": dict(type="string, secret", used=NOT_USED, meaning="See `oidc_token_url`."),
    "backend_type": dict(
        required=True, type=_choices(site_config.SUPPORTED_BACKENDS) + " (any case)", used=USED,
        meaning="Which `backend_settings` schema applies and which backend the passes drive. Another value "
                "(`slurm`, ...) marks another agent's offering: it is skipped with a warning."),
    "backend_settings": dict(
        required=True, type="mapping", used=USED,
        meaning="The backend's settings and credentials: [Azure](#azure-backend_settings), "
                "[DigitalOcean](#digitalocean-backend_settings)."),
    "backend_components": dict(
        type="mapping", default="`{}`", used=USED,
        meaning="The offering's components, component type to settings ([components](#backend_components))."),
    "verify_ssl": dict(
        type="boolean, or the path of a CA bundle file", default="`WALDUR_VERIFY_SSL`, else `true`", used=USED,
        meaning="Verify Waldur's TLS certificate: `false` never does (whatever `REQUESTS_CA_BUNDLE` or "
                "`CURL_CA_BUNDLE` say), a CA bundle path is used instead of them, `true` uses "
                "`REQUESTS_CA_BUNDLE` (else `CURL_CA_BUNDLE`) when set, else the bundled CAs."),
    "request_timeout": dict(
        type="number of seconds (> 0)", default="30 for Waldur and DigitalOcean, 60 for Azure", used=USED,
        meaning="How long one request to Waldur or to the offering's cloud may go unanswered (to connect, then "
                "for the answer). A request not answered in time fails as a lost connection does: a read or an "
                "idempotent call is retried within its retry bound, and what stays unanswered is left for the "
                "next pass, never taken as an answer."),
    "order_processing_backend": dict(
        type="backend name", default="empty", used=USED,
        meaning="Set (to the value of `backend_type`) to run the order_process pass (and the audit) for the "
                "offering; empty leaves the offering out of them."),
    "reporting_backend": dict(
        type="backend name", default="empty", used=USED,
        meaning="The same for the report pass."),
    "membership_sync_backend": dict(
        type="backend name", default="empty", used=USED,
        meaning="The same for the membership_sync pass, which applies `paused`/`downscaled` to the machines."),
    "username_management_backend": dict(
        type="string", used=NOT_USED,
        meaning="Not used: access to these machines is the order's SSH key, there are no backend usernames."),
    "stomp_enabled": dict(
        type="boolean", default="`false`", used=USED,
        meaning="Served by the event_process rulebook ([events](events.md)); the polling order pass (and "
                "membership pass, see below) skips the offering with a line saying so, as upstream."),
    "stomp_membership_sync_enabled": dict(
        type="boolean", default="`stomp_enabled`", used=USED,
        meaning="Resource events and the membership sweep come from the rulebook, and the polling membership "
                "pass skips the offering; `false` keeps the membership pass polling."),
    "stomp_ws_host": dict(type="string", default="Waldur host", used=USED, meaning="Broker host of the rulebook."),
    "stomp_ws_port": dict(type="integer", default="443 (80 without TLS)", used=USED,
                          meaning="Broker port of the rulebook."),
    "stomp_ws_path": dict(type="string", default="`/rmqws-stomp`", used=USED, meaning="web-STOMP path of the rulebook."),
    "websocket_use_tls": dict(type="boolean", default="`true`", used=USED, meaning="`wss://` to the broker."),
    "resource_import_enabled": dict(type="boolean", used=NOT_USED, meaning="Not used: no resource import."),
    "username_reconciliation_enabled": dict(type="boolean", used=NOT_USED, meaning="Not used: no usernames."),
    "preserve_unmanaged_backend_users": dict(type="boolean", used=NOT_USED, meaning="Not used: no backend users."),
    "omit_anomalous_usage_components": dict(
        type="boolean", used=NOT_USED,
        meaning="Validated, not used: the report pass always leaves out a component whose usage would "
                "decrease, and sends the resource's other components."),
}

COMPONENT = {
    "measured_unit": dict(required=True, type="string", meaning="Unit shown in Waldur, for example `Cores`, `MiB`."),
    "accounting_type": dict(
        required=True, type=_choices(site_config.ACCOUNTING_TYPES),
        meaning="Waldur's `billing_type`; `one` also sets `is_prepaid`. Usage is reported only for `usage` and "
                "`limit` components."),
    "label": dict(required=True, type="string", meaning="The component's name in Waldur."),
    "unit_factor": dict(
        type="number greater than 0", default="`1`",
        meaning="Azure report pass: the measured figure is divided by it (for RAM in GiB: `1024`). Not sent "
                "to Waldur."),
    "unit_factor_reporting": dict(type="number", meaning="Not used."),
    "limit": dict(type="number", meaning="Waldur's `limit_amount`."),
    "description": dict(type="string", meaning="Description shown in Waldur."),
    "min_value": dict(type="number", meaning="Smallest value a consumer may order."),
    "max_value": dict(type="number", meaning="Largest value a consumer may order."),
    "max_available_limit": dict(type="number", meaning="Largest limit available in total."),
    "default_limit": dict(type="number", meaning="Limit pre-filled in the order form."),
    "limit_period": dict(
        type=_choices(site_config.LIMIT_PERIODS),
        meaning="Period of the limit. Unset, the component keeps the period Waldur has."),
    "article_code": dict(type="string", meaning="Article code for invoicing."),
    "is_boolean": dict(type="boolean", meaning="The component is on or off rather than an amount."),
    "is_prepaid": dict(type="boolean", meaning="The component is paid in advance."),
    "min_prepaid_duration": dict(type="integer", meaning="Shortest prepaid duration."),
    "max_prepaid_duration": dict(type="integer", meaning="Longest prepaid duration."),
    "prepaid_duration_step": dict(type="integer", meaning="Accepted, not sent to Waldur."),
    "min_renewal_duration": dict(type="integer", meaning="Accepted, not sent to Waldur."),
    "max_renewal_duration": dict(type="integer", meaning="Accepted, not sent to Waldur."),
    "renewal_duration_step": dict(type="integer", meaning="Accepted, not sent to Waldur."),
    "price": dict(
        type="number, 0 or more", default="the plan's price, else `0`",
        meaning="`load_components` sets it as the component's price in every plan of the offering. Every "
                "component gets a price (Waldur cannot finish Update orders otherwise). Not in the upstream agent."),
    "backend_name": dict(
        type="`cores`, `ram_mb` or `disk_mb`",
        meaning="Azure report pass: the figure this component measures. Unset, it follows from the "
                "component's name: `cpu`, `cores`, `vcpu`, `vcores`; `ram`, `mem`, `memory`; `disk`, `storage`. "
                "Not sent to Waldur."),
}

# Component keys the Azure report pass reads (plugins/module_utils/agent/components.py).
COMPONENT_KEYS_METERED = ("unit_factor", "backend_name")

AZURE = {
    "subscription_id": dict(required=True, type="string (UUID)", meaning="The subscription the machines live in."),
    "tenant_id": dict(required="for a service principal", type="string (UUID)", meaning="Microsoft Entra tenant of the service principal. Required "
                      "with `client_secret`, a certificate or `federated_token_file`; the Azure CLI's tenant for "
                      "`auth_source: cli`."),
    "client_id": dict(required="for a service principal", type="string (UUID)", meaning="Application (client) id of the service principal (required "
                      "with it), or the client id of a user-assigned managed identity (`auth_source: msi`)."),
    "client_secret": dict(required="for a service principal", type="string, secret", meaning="Client secret of the service principal. One of "
                          "`client_secret`, `x509_certificate_path`, `x509_certificate` or `federated_token_file` "
                          "is required when `tenant_id` or `client_id` is given with `auth_source: auto`."),
    "auth_source": dict(
        default="`auto`",
        meaning="Where the sign-in comes from, as in azure.azcollection: `auto`, `env`, `credential_file`, `msi` "
                "or `cli` (see [Azure sign-in](#azure-sign-in)). Not in the upstream agent."),
    "profile": dict(meaning="The profile of `~/.azure/credentials` (`auth_source: credential_file`, or `auto` "
                            "taking that profile). Not in the upstream agent."),
    "x509_certificate_path": dict(
        meaning="A PEM (private key and certificate) or PKCS12 file the service principal signs in with instead "
                "of a secret; must exist. Not in the upstream agent."),
    "x509_certificate": dict(
        meaning="The same as PEM text; a secret (masked, never printed). Not in the upstream agent."),
    "x509_certificate_password": dict(
        meaning="Password of the certificate's private key; a secret. Not in the upstream agent."),
    "federated_token_file": dict(
        meaning="Workload identity: the file holding the federated token (AKS projects it; filled from "
                "`AZURE_FEDERATED_TOKEN_FILE` when the file does not say); must exist. Not in the upstream agent."),
    "cloud_environment": dict(
        default="`AzureCloud`",
        meaning="`AzureCloud`, `AzureUSGovernment` or `AzureChinaCloud`: the authority and ARM endpoint when "
                "`authority_host` and `arm_endpoint` are not given. Not in the upstream agent."),
    "default_location": dict(meaning="Location when the order gives none, for example `westeurope`."),
    "default_size": dict(
        meaning="VM size when the order gives none, for example `Standard_B1s`; must be offered in the location."),
    "default_image": dict(meaning="Marketplace image when the order gives none."),
    "default_resource_group": dict(
        default="none: a dedicated group per machine",
        meaning="A shared resource group for every machine. Each machine is deleted by the route its ARM id "
                "shows, so changing this later never deletes a shared group."),
    "network_cidr": dict(default="`10.0.0.0/16`", meaning="Address space of each machine's virtual network."),
    "subnet_cidr": dict(default="`10.0.0.0/24`", meaning="Address prefix of each machine's subnet, inside `network_cidr`."),
    "allowed_ssh_ranges": dict(
        default="none: no inbound traffic",
        meaning="Addresses, CIDRs or service tags admitted on TCP port 22, through a network security group "
                "created only when this is set. Without it a machine admits no connection at all."),
    "arm_endpoint": dict(
        default="the cloud's: `https://management.azure.com`",
        meaning="Azure Resource Manager, for Azure Stack or a simulator; overrides `cloud_environment`. Not in "
                "the upstream agent."),
    "authority_host": dict(
        default="the cloud's: `https://login.microsoftonline.com`",
        meaning="Microsoft Entra authority issuing the tokens; overrides `cloud_environment`. Not in the "
                "upstream agent."),
    "polling_interval": dict(
        default_from=("azure", "polling_interval"),
        meaning="Seconds between two polls of a long-running Azure operation. Not in the upstream agent."),
}

DIGITALOCEAN = {
    "token": dict(
        required=True, type="string, secret",
        meaning="API token with read and write scope (droplets, actions, SSH keys)."),
    "default_region": dict(meaning="Region slug when the order gives none, for example `ams3`."),
    "default_image": dict(meaning="Image slug or id when the order gives none, for example `ubuntu-22-04-x64`."),
    "default_size": dict(
        meaning="Size slug when the order gives none. Without either, the first `size_mapping` entry equal "
                "to the resource's limits is used."),
    "default_user_data": dict(meaning="Cloud-init user data when the order gives none."),
    "default_tags": dict(
        default="`[]`",
        meaning="Tags of every droplet whose order gives no `tags`. Tags starting with `waldur-resource:` are "
                "dropped."),
    "default_ssh_key_id": dict(meaning="SSH key (id in the account) when the order names no key."),
    "default_ssh_key_fingerprint": dict(
        meaning="SSH key (MD5 fingerprint of a key in the account) when the order names no key and "
                "`default_ssh_key_id` is not set."),
    "default_ssh_key_name": dict(
        meaning="Accepted, not used: a public key missing from the account is added as "
                "`waldur-<first 8 hex digits of the resource UUID>`."),
    "default_ssh_public_key": dict(
        meaning="OpenSSH public key when the order names no key and neither default above is set; added to "
                "the account when missing."),
    "size_mapping": dict(
        default="`{}`",
        meaning="Size slug to the limits it provides, for example `s-2vcpu-4gb: {cpu: 2, ram: 4096, disk: "
                "81920}`. An Update order whose limits equal an entry resizes the droplet to that slug."),
    "api_url": dict(
        default_from=("digitalocean", "api_url"),
        meaning="Root of the DigitalOcean API v2 (for a proxy or a simulator). Not in the upstream agent."),
}

COMMON = {
    "allocation_prefix": "Prefix of backend account names (SLURM and similar backends).",
    "project_prefix": "Prefix of project accounts (SLURM and similar backends).",
    "customer_prefix": "Prefix of customer accounts (SLURM and similar backends).",
    "default_account": "Parent account (SLURM and similar backends).",
    "soft_delete": "Keep backend accounts on termination (account backends).",
    "check_backend_id_uniqueness": "Check generated backend ids across offerings (account backends).",
    "check_all_offerings": "Scope of the uniqueness check (account backends).",
    "backend_id_max_retries": "Attempts to generate a unique backend id (account backends).",
    "periodic_limits": "SLURM periodic limits.",
}

# Order attributes: the filter functions that read them, and what each lookup means.
# A key is the attribute names of one lookup, in the order they are tried.
ATTRIBUTE_FUNCTIONS = {
    "digitalocean": ("_droplet_create_params", "_droplet_ssh_keys"),
    "azure": ("_vm_create_params",),
}

ATTRIBUTES = {
    "digitalocean": {
        "name": "Droplet name when the Waldur resource has none. Characters outside `[A-Za-z0-9.-]` become "
                "`-`, lower-cased; no name at all gives `waldur-<first 8 hex digits of the resource UUID>`.",
        "backend_region_id, region": "Region slug; else `default_region`.",
        "backend_image_id, image": "Image slug or id; else `default_image`.",
        "backend_size_id, size, size_slug": "Size slug; else `default_size`, else the first `size_mapping` "
                                            "entry equal to the resource's limits.",
        "user_data, cloud_init": "Cloud-init user data; else `default_user_data`.",
        "tags": "Tags (a string is one tag); replace `default_tags`. `waldur-resource:` tags are dropped and "
                "the result says so.",
        "ssh_key_id": "Id of a key in the DigitalOcean account. The droplet gets one key, the first set of: "
                      "`ssh_key_id`, `ssh_key_fingerprint`, `ssh_public_key` (or the key `ssh_key` names), "
                      "`default_ssh_key_id`, `default_ssh_key_fingerprint`, `default_ssh_public_key`.",
        "ssh_key_fingerprint": "MD5 fingerprint of a key in the account.",
        "ssh_public_key": "OpenSSH public key; found in the account by fingerprint, added as "
                          "`waldur-<first 8 hex digits of the resource UUID>` when missing.",
        "ssh_key, ssh_key_uuid": "UUID of a service-provider SSH key in Waldur (dashed or not, any case); its "
                                 "public key is used as `ssh_public_key`. An unknown UUID is named in the result "
                                 "and the defaults apply.",
    },
    "azure": {
        "name": "Machine name when the Waldur resource has none (transliterated to Latin letters, sanitized: "
                "lower-case `[a-z0-9-]`, at most 50 characters; `vm-<first 8 hex digits of the resource UUID>` "
                "when nothing is left, for example a name of CJK characters or symbols).",
        "location": "Azure location; else `default_location`.",
        "size": "VM size; else `default_size`. Checked against the sizes of the location before anything is "
                "created.",
        "image": "`publisher:offer:sku:version` or a mapping of those keys; else `default_image`.",
        "username": "Administrator account; default `waldur`. Must be a valid Linux user name that Azure does "
                    "not reserve.",
        "user_data, cloud_init": "Cloud-init user data, sent base64-encoded as the machine's custom data.",
        "ssh_public_key": "OpenSSH public key, installed in `/home/<username>/.ssh/authorized_keys`. Password "
                          "login is disabled.",
        "ssh_key, ssh_key_uuid": "UUID of a service-provider SSH key in Waldur (dashed or not, any case, all "
                                 "pages of keys), used when `ssh_public_key` is not set. An order with no key, "
                                 "or a UUID that is not a key of the service provider, is erred before anything "
                                 "is created.",
    },
}

# Roles whose argument specs make the variable tables. waldur_offering is handed from
# agent_pass to the pass roles, and agent_pass_name is fixed by each playbook: neither is
# for operators.
PASS_ROLES = ("agent_pass", "order_process", "report", "membership_sync", "audit")
INTERNAL_VARIABLES = ("waldur_offering", "agent_pass_name")

SECTIONS = ("root", "offering", "azure", "digitalocean", "common", "component",
            "attributes-digitalocean", "attributes-azure", "variables-passes", "variables-schedule")
BEGIN = "<!-- BEGIN GENERATED: %s (scripts/gen_config_reference.py; do not edit) -->"
END = "<!-- END GENERATED: %s -->"


# --------------------------------------------------------------------- from the code

def schema_keys():
    """Each table's keys, as the schema has them."""
    return {
        "root": set(site_config.ROOT_KEYS),
        "offering": set(site_config.OFFERING_KEYS),
        "component": set(site_config.COMPONENT_KEYS),
        "azure": set(backends.backend("azure").settings_read()),
        "digitalocean": set(backends.backend("digitalocean").settings_read()),
        "common": set(site_config.COMMON_BACKEND_SETTINGS),
    }


def descriptions():
    return {"root": ROOT, "offering": OFFERING, "component": COMPONENT, "azure": AZURE,
            "digitalocean": DIGITALOCEAN, "common": COMMON}


def settings_read():
    """Backend settings a role or playbook reads (``backend_settings.<key>``) or the filters name."""
    names = set()
    for path in sorted((REPO / "roles").rglob("*.yml")) + sorted((REPO / "playbooks").glob("*.yml")):
        names.update(re.findall(r"backend_settings\.([A-Za-z0-9_]+)", path.read_text()))
    for path in sorted(BACKENDS.glob("*.py")):
        # the strings of its functions: the registry entry itself (``BACKEND``) names every key
        functions = [node for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)]
        names.update(node.value for function in functions for node in ast.walk(function)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str))
    return names


def argument_spec_default(backend, option):
    spec = azure_clients.azure_argument_spec() if backend == "azure" else digitalocean.digitalocean_argument_spec()
    return spec[option].get("default")


def attribute_lookups(backend):
    """The attribute names each lookup of the backend's order filter tries, in order."""
    planning = BACKENDS / ("%s.py" % backend)
    tree = ast.parse(planning.read_text())
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    lookups = []
    for name in ATTRIBUTE_FUNCTIONS[backend]:
        if name not in functions:
            raise SystemExit("%s: function %s not found; update ATTRIBUTE_FUNCTIONS in %s"
                             % (planning.relative_to(REPO), name, Path(__file__).name))
        for node in ast.walk(functions[name]):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "first" and node.args and \
                    isinstance(node.args[0], ast.Name) and node.args[0].id == "attributes":
                keys = tuple(arg.value for arg in node.args[1:] if isinstance(arg, ast.Constant))
            elif isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Name) \
                    and func.value.id == "attributes" and node.args and isinstance(node.args[0], ast.Constant):
                keys = (node.args[0].value,)
            else:
                continue
            # ast.walk is breadth-first; sort by position so the table follows the code
            lookups.append((node.lineno, node.col_offset, ", ".join(keys)))
    ordered = []
    for _line, _col, keys in sorted(lookups):
        if keys not in ordered:
            ordered.append(keys)
    return ordered


def role_options(role):
    """The options of a role's ``main`` entry point, in file order."""
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"]["main"].get("options") or {}


_DOC_MARKUP = re.compile(r"\b([CEOVMRP])\(([^()]*)\)")


def plain_doc(text):
    """Ansible documentation markup (C(), E(), O(), V(), M(), ...) as Markdown."""
    if isinstance(text, list):
        text = " ".join(text)
    return _DOC_MARKUP.sub(lambda match: "`%s`" % _option_of(match.group(2)), str(text)).replace("I(", "(")


def _option_of(value):
    """``O(waldur.site_agent.waldur_orders#module:x)`` reads as ``waldur_orders`` ``x``: the option
    and the plugin it belongs to, without the reference's syntax."""
    plugin, sep, option = value.partition("#")
    if not sep:
        return value
    return "%s %s" % (plugin.rsplit(".", 1)[-1], option.split(":", 1)[-1])


# --------------------------------------------------------------------- checks

def problems():
    """Why the tables cannot be generated: keys without a description, stale descriptions,
    backend settings whose documented use disagrees with the code."""
    found = []
    described = descriptions()
    for section, keys in schema_keys().items():
        table = described[section]
        for key in sorted(keys - set(table)):
            found.append("%s: schema key %r has no description in %s" % (section, key, Path(__file__).name))
        for key in sorted(set(table) - keys):
            found.append("%s: %r is described but is not a key of the schema" % (section, key))
    for backend, schema in ((name, backends.backend(name).settings) for name in ("azure", "digitalocean")):
        for key, entry in described[backend].items():
            if key in schema and "type" in entry:
                found.append("%s.%s: the schema types this key (%s); drop the type from the description"
                             % (backend, key, schema[key]))
    for backend in ATTRIBUTE_FUNCTIONS:
        lookups = attribute_lookups(backend)
        for keys in lookups:
            if keys not in ATTRIBUTES[backend]:
                found.append("attributes-%s: the filter reads %r, which has no description" % (backend, keys))
        for keys in ATTRIBUTES[backend]:
            if keys not in lookups:
                found.append("attributes-%s: %r is described but the filter no longer reads it" % (backend, keys))
    return found


# --------------------------------------------------------------------- rendering

def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(_cell(value) for value in row) + " |" for row in rows)
    return "\n".join(lines)


def _default(entry):
    if "default_from" in entry:
        value = argument_spec_default(*entry["default_from"])
        return "`%s`" % value
    return entry.get("default") or ""


def _key_rows(table, keys, kinds=None, used=None):
    rows = []
    for key in sorted(keys, key=_key_order(table)):
        entry = table[key]
        kind = (kinds or {}).get(key)
        key_type = KIND_TYPES[kind] if kind else entry.get("type", "")
        is_used = used(key) if used else entry.get("used", USED)
        required = entry.get("required")
        rows.append(("`%s`" % key, required if isinstance(required, str) else "yes" if required else "", key_type, _default(entry),
                     is_used, entry["meaning"]))
    return rows


def _key_order(table):
    """Required keys first, then the order of the description table."""
    order = list(table)
    return lambda key: (not table[key].get("required"), order.index(key))


HEADER = ("key", "required", "type", "default", "used", "meaning")


def _option_default(value):
    if value is None:
        return ""
    if value == "":
        return '`""`'
    return "`%s`" % yaml.safe_dump(value, default_flow_style=True).strip().replace("\n...", "")


def render_section(section):
    keys = schema_keys()
    if section == "root":
        return _table(HEADER, _key_rows(ROOT, keys["root"]))
    if section == "offering":
        return _table(HEADER, _key_rows(OFFERING, keys["offering"]))
    if section in ("azure", "digitalocean"):
        kinds = backends.backend(section).settings
        read = settings_read()
        table = AZURE if section == "azure" else DIGITALOCEAN
        return _table(HEADER, _key_rows(table, keys[section], kinds, used=lambda key: USED if key in read else NOT_USED))
    if section == "common":
        return _table(("key", "upstream meaning (not used by the Azure and DigitalOcean passes)"),
                      [("`%s`" % key, COMMON[key]) for key in sorted(keys["common"], key=list(COMMON).index)])
    if section == "component":
        sent = set(waldur_components.REQUIRED_KEYS) | set(key for key, _field in waldur_components.OPTIONAL_FIELDS)
        rows = []
        for key in sorted(keys["component"], key=_key_order(COMPONENT)):
            entry = COMPONENT[key]
            uses = []
            if key in sent:
                uses.append("sent to Waldur")
            if key in COMPONENT_KEYS_METERED:
                uses.append("Azure report")
            if key == waldur_components.PRICE_KEY:
                uses.append("plan prices")
            rows.append(("`%s`" % key, "yes" if entry.get("required") else "", entry["type"], _default(entry),
                         ", ".join(uses) or NOT_USED, entry["meaning"]))
        return _table(HEADER, rows)
    if section in ("variables-passes", "variables-schedule"):
        roles = PASS_ROLES if section == "variables-passes" else ("schedule",)
        rows = []
        for role in roles:
            for name, option in role_options(role).items():
                if name in INTERNAL_VARIABLES:
                    continue
                option_type = option.get("type", "str")
                if option.get("elements"):
                    option_type += " of " + option["elements"]
                if option.get("choices"):
                    option_type += ": " + ", ".join("`%s`" % choice for choice in option["choices"])
                rows.append(("`%s`" % name, role, option_type, _option_default(option.get("default")),
                             plain_doc(option.get("description", ""))))
        return _table(("variable", "role", "type", "default", "meaning"), rows)
    if section.startswith("attributes-"):
        backend = section[len("attributes-"):]
        rows = [(", ".join("`%s`" % name for name in keys.split(", ")), ATTRIBUTES[backend][keys])
                for keys in attribute_lookups(backend)]
        return _table(("attribute (first set wins)", "meaning"), rows)
    raise ValueError(section)


def render(text):
    """``text`` (the document) with every generated section rewritten."""
    for section in SECTIONS:
        begin, end = BEGIN % section, END % section
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.DOTALL)
        if not pattern.search(text):
            raise SystemExit("%s lacks the markers of section %r:\n%s\n...\n%s"
                             % (_shown(DOC), section, begin, end))
        text = pattern.sub(lambda _match: "%s\n%s\n%s" % (begin, render_section(section), end), text)
    return text


def _shown(path):
    """A path as the operator typed it from the repository root."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the document is out of date")
    args = parser.parse_args(argv)
    found = problems()
    if found:
        print("The configuration reference cannot be generated:\n" + "\n".join("  " + p for p in found),
              file=sys.stderr)
        return 2
    current = DOC.read_text()
    wanted = render(current)
    if args.check:
        if current != wanted:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), wanted.splitlines(True), _shown(DOC), "generated"))
            print("%s is out of date: run %s" % (_shown(DOC), _shown(Path(__file__))), file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        DOC.write_text(wanted)
        print("updated %s" % _shown(DOC))
    return 0


if __name__ == "__main__":
    sys.exit(main())
