# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: offerings
short_description: The offerings of a Waldur site agent configuration as inventory hosts
version_added: 1.0.0
author:
  - Waldur site agent developers (@waldur)
description:
  - Reads the upstream Waldur site agent configuration file (the C(offerings) list of
    C(/etc/waldur/waldur-site-agent-config.yaml)) and makes one host per offering, so the
    passes run the offerings in parallel (forks), can be limited to one offering with
    C(--limit), and AWX job slicing splits the offerings between slices.
  - "The inventory source is either the configuration file itself (any file name; it is
    recognised by its top-level C(offerings) key) or an inventory configuration file whose
    name ends in C(waldur_offerings.yml) or C(waldur_offerings.yaml), with
    C(plugin: waldur.site_agent.offerings) and O(config_path)."
  - The configuration is read with Ansible's loader, so a file encrypted with ansible-vault,
    or C(!vault) values inside it, work with the usual vault options.
  - The configuration is validated first. Every problem is reported with its key path (never
    the value of a secret) and no host is made.
  - Host variables hold no secret. Tokens and client secrets stay in the file; the passes read
    them with the M(waldur.site_agent.site_config) action, using the host variable
    C(agent_pass_config).
  - "Each host has C(ansible_connection: local) and these variables:
    C(waldur_offering_name) (the offering's name, which the passes select the offering by),
    C(waldur_offering_uuid) (32 lower-case hex digits), C(waldur_backend_type)
    (C(azure) or C(digitalocean)), C(waldur_api_url), C(waldur_offering_roles)
    (the passes the offering takes part in) and C(agent_pass_config) (the absolute
    path of the configuration file)."
  - The host name is the offering's name with characters other than letters, digits, C(_),
    C(.) and C(-) replaced by C(_); when two offerings end up with the same name, or a name
    clashes with a group of this plugin or a host of another source, the first eight hex digits
    of the offering's UUID are appended.
  - Groups are C(waldur_offerings) (every offering), C(backend_azure) and
    C(backend_digitalocean), and C(order_process), C(report) and C(membership_sync) for the
    offerings whose C(order_processing_backend), C(reporting_backend) or
    C(membership_sync_backend) is set, and C(audit) for those that process orders too.
  - To use the configuration file itself as the source, enable this plugin (C(enable_plugins) in
    the C([inventory]) section of C(ansible.cfg), or E(ANSIBLE_INVENTORY_ENABLED)) ahead of the
    others, and leave the C(yaml) plugin out of the list for such runs, because Ansible hands a source
    that one plugin failed to parse to the next one, and the C(yaml) plugin turns an invalid site
    agent configuration into an empty inventory with no error. Set C(unparsed_is_failed)
    (E(ANSIBLE_INVENTORY_UNPARSED_FAILED)) too, so that an invalid configuration stops the run with
    the list of problems instead of carrying on with C(localhost) only.
  - An inventory configuration file (C(*.waldur_offerings.yml)) works with the default C(auto)
    plugin and is never taken by the C(yaml) plugin.
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description:
      - Must be V(waldur.site_agent.offerings) in an inventory configuration file.
      - A site agent configuration file used as the source needs no such key.
    type: str
    required: true
    choices: ['waldur.site_agent.offerings']
  config_path:
    description:
      - Path of the site agent configuration file, used by an inventory configuration file.
      - A relative path is taken relative to the directory of the inventory configuration file.
      - Ignored when the inventory source is the site agent configuration file itself.
    type: str
    env:
      - name: WALDUR_SITE_AGENT_CONFIG
"""

EXAMPLES = r"""
# The existing site agent configuration is the inventory (one host per offering):
#   export ANSIBLE_INVENTORY_ENABLED=waldur.site_agent.offerings ANSIBLE_INVENTORY_UNPARSED_FAILED=true
#   ansible-inventory -i /etc/waldur/waldur-site-agent-config.yaml --graph
#   ansible-playbook -i /etc/waldur/waldur-site-agent-config.yaml waldur.site_agent.order_process
#   ansible-playbook -i /etc/waldur/waldur-site-agent-config.yaml --limit backend_azure waldur.site_agent.report

# site.waldur_offerings.yml: an inventory configuration file (handy for AWX inventory sources)
plugin: waldur.site_agent.offerings
config_path: /etc/waldur/waldur-site-agent-config.yaml

# prod.waldur_offerings.yml: extra groups and variables with the constructed options
# plugin: waldur.site_agent.offerings
# config_path: config/waldur-site-agent-config.yaml
# strict: true
# keyed_groups:
#   # waldur_waldur_example_com, ...: one group per Waldur instance
#   - key: waldur_api_url | urlsplit('hostname')
#     prefix: waldur
# groups:
#   # offerings that only report usage
#   report_only: "'order_process' not in waldur_offering_roles"
# compose:
#   ansible_python_interpreter: ansible_playbook_python
"""

import os
import re

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid
from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import (
    PASS_ROLES,
    SUPPORTED_BACKENDS,
    config_file_problem,
    supported_offerings,
    validate,
    yaml_error_text,
)

try:
    # ansible-core 2.19+: strings set by an inventory plugin are never templated unless trusted.
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - ansible-core < 2.19 templates every string
    trust_as_template = None
    from ansible.utils.unsafe_proxy import wrap_var
else:
    wrap_var = None

ALL_GROUP = "waldur_offerings"
INVENTORY_CONFIG_SUFFIXES = ("waldur_offerings.yml", "waldur_offerings.yaml")
# A site agent configuration is a YAML (or JSON) mapping with a top-level "offerings" key.
_OFFERINGS_KEY = re.compile(r"""^(?:offerings|\s*["']offerings["'])\s*:|^\{.*["']offerings["']\s*:""", re.MULTILINE)
_VAULT_HEADER = b"$ANSIBLE_VAULT;"
_UNSAFE_HOST_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def _plain(value):
    """Loader data (tagged strings, vault values) as plain Python data."""
    if isinstance(value, dict):
        return dict((to_text(key), _plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, str):
        return str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    # ansible-vault values (EncryptedString / AnsibleVaultEncryptedUnicode) decrypt on str().
    return to_text(value)


def _safe_host_name(name):
    """Offering names are free text; host names must survive host patterns and --limit."""
    safe = _UNSAFE_HOST_CHARS.sub("_", name).strip("_.-")
    return safe or "offering"


def host_names(offerings, taken=()):
    """One unique, inventory-safe host name per offering, in order.

    Names that would clash with each other, with a group this plugin makes or with a
    host already in the inventory get the first eight hex digits of the offering's UUID
    (and, if that is still not unique, a counter) appended."""
    reserved = set(taken) | {"all", "ungrouped", ALL_GROUP} | set(PASS_ROLES) | set(
        "backend_%s" % backend for backend in SUPPORTED_BACKENDS)
    wanted = [_safe_host_name(offering["name"]) for offering in offerings]
    names = []
    used = set()
    for offering, name in zip(offerings, wanted):
        if wanted.count(name) > 1 or name in reserved:
            name = "%s_%s" % (name, normalize_uuid(offering["waldur_offering_uuid"])[:8])
        candidate, counter = name, 2
        while candidate in used or candidate in reserved:
            candidate = "%s_%d" % (name, counter)
            counter += 1
        used.add(candidate)
        names.append(candidate)
    return names


def host_variables(offering, config_path):
    """The variables of an offering's host: what the passes and operators need, no secret."""
    roles = [role for role, key in sorted(PASS_ROLES.items()) if offering.get(key)]
    return {
        "ansible_connection": "local",
        "waldur_offering_name": offering["name"],
        "waldur_offering_uuid": normalize_uuid(offering["waldur_offering_uuid"]),
        "waldur_backend_type": offering["backend_type"].lower(),
        "waldur_api_url": offering["waldur_api_url"],
        "waldur_offering_roles": roles,
        "agent_pass_config": config_path,
    }


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "waldur.site_agent.offerings"

    def verify_file(self, path):
        if not super(InventoryModule, self).verify_file(path) or not os.path.isfile(to_bytes(path)):
            return False
        if to_text(path).endswith(INVENTORY_CONFIG_SUFFIXES):
            return True
        return self._looks_like_site_config(path)

    @staticmethod
    def _looks_like_site_config(path):
        """Claim any file that is meant to be a site agent configuration, valid or not:
        declining an invalid one would leave the run with an empty inventory and no word
        about why. A whole-file vault cannot be peeked into here (there is no loader yet);
        it is claimed and parse() decides."""
        try:
            with open(to_bytes(path), "rb") as handle:
                head = handle.read(1024 * 1024)
        except (IOError, OSError):
            return False
        if head.lstrip().startswith(_VAULT_HEADER):
            return True
        return bool(_OFFERINGS_KEY.search(to_text(head, errors="surrogate_or_replace")))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache)
        if to_text(path).endswith(INVENTORY_CONFIG_SUFFIXES):
            self._read_config_data(path)
            config_path = self.get_option("config_path")
            if not config_path:
                raise AnsibleParserError(
                    "%s: config_path is required (or set WALDUR_SITE_AGENT_CONFIG): the site agent "
                    "configuration file to read the offerings from" % to_native(path))
            config_path = os.path.expanduser(to_native(config_path))
            if not os.path.isabs(config_path):
                config_path = os.path.join(os.path.dirname(os.path.abspath(to_native(path))), config_path)
        else:
            self.set_options(direct={"plugin": self.NAME}, var_options=self._vars)
            config_path = to_native(path)
        config_path = os.path.abspath(config_path)
        offerings = self._load_offerings(config_path)
        self._populate(offerings, config_path)

    def _load_offerings(self, config_path):
        if not os.path.isfile(config_path):
            raise AnsibleParserError("config_path: %s is not a readable file" % config_path)
        problem = config_file_problem(config_path, self.loader)
        if problem:
            raise AnsibleParserError("%s was not read: %s" % (config_path, problem))
        try:
            data = self.loader.load_from_file(config_path, cache="none")
        except AnsibleError as exc:
            # The position and the problem only: the error's source context would quote a line
            # of a file full of secrets.
            raise AnsibleParserError(yaml_error_text(config_path, exc)) from None
        if not isinstance(data, dict) or "offerings" not in data:
            raise AnsibleParserError("%s is not a Waldur site agent configuration: it has no top-level "
                                     "'offerings' list" % config_path)
        try:
            config = _plain(data)
        except Exception as exc:  # a !vault value that cannot be decrypted
            raise AnsibleParserError("%s: a vault-encrypted value could not be decrypted: %s"
                                     % (config_path, to_native(getattr(exc, "message", exc)))) from None
        errors, warnings = validate(config)
        for warning in warnings:
            self.display.warning("%s: %s" % (config_path, warning))
        if errors:
            raise AnsibleParserError("%d problem%s in the Waldur site agent configuration %s:\n%s" % (
                len(errors), "" if len(errors) == 1 else "s", config_path,
                "\n".join("  " + error for error in errors)))
        # Offerings of other backends are left to their own agents (validate() warned about them).
        return supported_offerings(config)

    def _populate(self, offerings, config_path):
        strict = self.get_option("strict")
        self.inventory.add_group(ALL_GROUP)
        for offering, host in zip(offerings, host_names(offerings, taken=self.inventory.hosts)):
            self.inventory.add_host(host, group=ALL_GROUP)
            backend_group = self.inventory.add_group("backend_%s" % offering["backend_type"].lower())
            self.inventory.add_child(backend_group, host)
            variables = host_variables(offering, config_path)
            for role in variables["waldur_offering_roles"]:
                self.inventory.add_child(self.inventory.add_group(role), host)
            for name, value in variables.items():
                self.inventory.set_variable(host, name, self._untemplated(value))
            self.inventory.set_variable(host, "ansible_python_interpreter", self._template("{{ ansible_playbook_python }}"))

            host_vars = self.inventory.get_host(host).get_vars()
            self._set_composite_vars(self.get_option("compose"), host_vars, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), host_vars, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), host_vars, host, strict=strict)

    @staticmethod
    def _template(value):
        return trust_as_template(value) if trust_as_template else value

    @staticmethod
    def _untemplated(value):
        """An offering named "{{ ... }}" must stay a name, never become a template."""
        return wrap_var(value) if wrap_var else value
