# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Read and validate the site agent configuration on the controller.

Runs as an action plugin so ansible-vault encrypted files (whole-file or
``!vault`` values) are decrypted by Ansible's own loader. On success the result
carries the offerings, secrets included, and is marked no_log so no callback
prints it; on failure it carries only the list of problems (never a value of a
secret) and is printed in full.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleError
from ansible.module_utils.common.collections import is_sequence
from ansible.plugins.action import ActionBase

from ansible_collections.waldur.site_agent.plugins.module_utils.secrets import error_message_without_source
from ansible_collections.waldur.site_agent.plugins.module_utils.site_config import (
    PASS_ROLES,
    apply_environment,
    offerings_for,
    validate,
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
        try:
            config = _plain(self._loader.load_from_file(path))
        except AnsibleError as exc:
            result.update(failed=True, msg="%s could not be read as YAML: %s" % (path, error_message_without_source(exc)))
            return result

        filled = apply_environment(config, os.environ)
        errors, warnings = validate(config)
        if warnings:
            result["warnings"] = ["%s: %s" % (path, warning) for warning in warnings]
        if errors:
            result.update(failed=True, errors=errors,
                          msg="%d problem%s in %s; nothing was done:\n%s" % (
                              len(errors), "" if len(errors) == 1 else "s", path,
                              "\n".join("  " + error for error in errors)))
            return result

        selected = offerings_for(config, pass_role, offering)
        if offering is not None and not selected:
            result.update(failed=True, msg="offering: no offering named or with UUID %r%s in %s" % (
                offering, " and a %s set" % PASS_ROLES[pass_role] if pass_role else "", path))
            return result
        result.update(path=path, offerings=selected, secrets_from_environment=filled,
                      root={k: v for k, v in config.items() if k != "offerings" and k != "sentry_dsn"},
                      sentry_dsn=config.get("sentry_dsn") or "")
        # The offerings hold tokens and client secrets: keep the result out of every callback.
        result["_ansible_no_log"] = True
        return result
