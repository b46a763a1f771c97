"""A stand-in awx.awx collection (awx.awx is not installed here and no controller runs): its
modules append the arguments they receive to ``AWX_STANDIN_LOG`` when that is set, and the one
named by ``AWX_STANDIN_FAIL`` fails as a controller refusing the object would (``module:state``
fails only calls with that state, ``credential:absent`` a refused removal). ``project_update``
fails as awx.awx's wait does when ``AWX_STANDIN_SYNC_TIMEOUT`` is set."""

from __future__ import annotations

from pathlib import Path

import yaml

AWX_MODULES = ("credential_type", "credential", "execution_environment", "project", "project_update", "inventory",
               "inventory_source", "job_template", "workflow_job_template", "schedule")
STANDIN_MODULE = '''#!/usr/bin/python
# WANT_JSON
import json, os, sys
with open(sys.argv[1]) as handle:
    args = json.load(handle)
if os.environ.get("AWX_STANDIN_LOG"):
    with open(os.environ["AWX_STANDIN_LOG"], "a") as log:
        log.write(json.dumps({"module": "%(name)s", "args": {k: v for k, v in args.items()
                                                              if not k.startswith("_ansible")}}) + "\\n")
failing = os.environ.get("AWX_STANDIN_FAIL", "")
if failing in ("%(name)s", "%(name)s:" + str(args.get("state", "present"))):
    print(json.dumps({"failed": True, "msg": "Unable to create %(name)s: the controller said 400"}))
elif "%(name)s" == "project_update" and os.environ.get("AWX_STANDIN_SYNC_TIMEOUT"):
    print(json.dumps({"failed": True, "msg": "Monitoring of Project Update - %%s aborted due to timeout" %% args["name"]}))
else:
    print(json.dumps({"changed": True}))
'''


def make_awx_standin(root: Path) -> Path:
    """The stand-in collection under ``root`` (a directory for ANSIBLE_COLLECTIONS_PATH)."""
    collection = root / "ansible_collections" / "awx" / "awx"
    (collection / "plugins" / "modules").mkdir(parents=True)
    (collection / "meta").mkdir()
    (collection / "meta" / "runtime.yml").write_text(yaml.safe_dump(
        {"requires_ansible": ">=2.16", "action_groups": {"controller": list(AWX_MODULES)}}))
    for name in AWX_MODULES:
        (collection / "plugins" / "modules" / f"{name}.py").write_text(STANDIN_MODULE % {"name": name})
    return root
