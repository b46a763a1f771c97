"""What the unit tests need from ansible-core, across the supported releases."""

from __future__ import annotations

import contextlib
import json

try:  # ansible-core 2.19 and later
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # 2.18: set the arguments AnsibleModule reads, as collections did before
    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes

    @contextlib.contextmanager
    def patch_module_args(args=None):
        args = dict(args or {})
        args.setdefault("_ansible_remote_tmp", "/tmp")
        args.setdefault("_ansible_keep_remote_files", False)
        saved = basic._ANSIBLE_ARGS
        basic._ANSIBLE_ARGS = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        try:
            yield
        finally:
            basic._ANSIBLE_ARGS = saved

__all__ = ["patch_module_args"]
