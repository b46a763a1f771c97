# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Read and validate the site agent configuration on the controller.

Runs as an action plugin so ansible-vault encrypted files (whole-file or
``!vault`` values) are decrypted by Ansible's own loader. On success the result
carries the offerings, secrets included, and is marked no_log so no callback
prints it; on failure it carries only the list of problems (never a value of a
secret) and is printed in full.

Warnings about the file as a whole (unknown keys, other backends' offerings,
plain-HTTP tokens, file mode) are given once per run: by the first host of the
play when the offerings inventory makes one host per offering.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

from ansible.errors import AnsibleError
from ansible.module_utils.common.collections import is_sequence
from ansible.plugins.action import ActionBase

from ansible_collections.waldur.site_agent.plugins.plugin_utils.site_config import (
    PASS_ROLES,
    apply_environment,
    config_file_problem,
    role_key_typos,
    select_offerings,
    validate,
    yaml_error_text,
)


def _plain(value):
    """Ansible's loader returns tagged/vaulted string types; the modules want plain data."""
    if isinstance(value, dict):
        return dict((str(key), _plain(item)) for key, item in value.items())
    if isinstance(value, str):
        return str(value)
    if is_sequence(value):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    # Inline `!vault` values load as an encrypted-string type that is not a str;
    # str() decrypts them.
    return str(value)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "pass_role", "offering"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        path = self._task.args.get("path") or os.environ.get("WALDUR_SITE_AGENT_CONFIG")
        pass_role = self._task.args.get("pass_role")
        offering = self._task.args.get("offering")
        result["changed"] = False
        if not path:
            result.update(failed=True, msg="path: required (or set WALDUR_SITE_AGENT_CONFIG): "
                                           "the site agent configuration file to read")
            return result
        if pass_role is not None and pass_role not in PASS_ROLES:
            result.update(failed=True, msg="pass_role: expected one of %s, got %r"
                                           % (", ".join(sorted(PASS_ROLES)), pass_role))
            return result
        path = os.path.abspath(os.path.expanduser(str(path)))
        if not os.path.isfile(path):
            result.update(failed=True, msg="path: %s is not a readable file" % path)
            return result
        first_host = self._first_host(task_vars or {})
        warnings = []
        problem = config_file_problem(path, self._loader)
        if problem:
            result.update(failed=True, msg="%s was not read: %s; nothing was done" % (path, problem))
            return result
        try:
            config = _plain(self._loader.load_from_file(path))
        except AnsibleError as exc:
            # The position and PyYAML's problem, never the excerpt: the line may hold a token.
            result.update(failed=True, msg="%s; nothing was done" % yaml_error_text(path, exc))
            return result

        filled = apply_environment(config, os.environ)
        errors, config_warnings = validate(config)
        if first_host:
            warnings.extend("%s: %s" % (path, warning) for warning in config_warnings)
            warnings.extend(self._mode_warnings(path))
        if errors:
            result.update(failed=True, errors=errors, warnings=warnings,
                          msg="%d problem%s in %s; nothing was done:\n%s" % (
                              len(errors), "" if len(errors) == 1 else "s", path,
                              "\n".join("  " + error for error in errors)))
            return result

        if offering is not None and not select_offerings(config, None, offering)[0]:
            result.update(failed=True, warnings=warnings, msg="offering: no Azure or DigitalOcean offering named "
                          "or with UUID %r in %s" % (offering, path))
            return result
        if pass_role and not select_offerings(config, pass_role)[0]:
            role_key = PASS_ROLES[pass_role]
            typos = role_key_typos(config, pass_role)
            result.update(failed=True, warnings=warnings, msg=(
                "no offering takes part in the %s pass: none of the offerings in %s sets %s%s; nothing was done "
                "(a pass that serves no offering is an agent turned off)" % (
                    pass_role, path, role_key,
                    " (%s looks like a misspelling of it)" % ", ".join(typos) if typos else "")))
            return result
        selected, left_out = select_offerings(config, pass_role, offering)
        for name in left_out:
            warnings.append("offering %r has no %s: left out of the %s pass" % (name, PASS_ROLES[pass_role], pass_role))
        if warnings:
            result["warnings"] = warnings
        result.update(path=path, offerings=selected, left_out=left_out, secrets_from_environment=filled,
                      root={k: v for k, v in config.items() if k != "offerings" and k != "sentry_dsn"},
                      sentry_dsn=config.get("sentry_dsn") or "")
        # The offerings hold tokens and client secrets: keep the result out of every callback.
        result["_ansible_no_log"] = True
        return result

    @staticmethod
    def _first_host(task_vars):
        """True on the play's first host: the one that speaks for the file as a whole."""
        hosts = task_vars.get("ansible_play_hosts_all") or []
        return not hosts or task_vars.get("inventory_hostname") == hosts[0]

    @staticmethod
    def _mode_warnings(path):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        readers = [who for who, bit in (("its group", 0o040), ("every local user", 0o004)) if mode & bit]
        if readers:
            return ["%s is readable by %s (mode %04o) and holds tokens and secrets: chmod 600 it"
                    % (path, " and ".join(readers), mode)]
        return []
