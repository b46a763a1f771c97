"""Helpers shared by the test suites: run real playbooks against the simulators."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
COLLECTIONS_ROOT = REPO / ".cache" / "collections"


def collection_path() -> Path:
    """An ``ansible_collections/waldur/site_agent`` tree pointing at this checkout,
    so ansible-playbook resolves ``waldur.site_agent.*`` to the working tree."""
    link = COLLECTIONS_ROOT / "ansible_collections" / "waldur" / "site_agent"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(REPO, target_is_directory=True)
        except FileExistsError:  # another xdist worker made it first
            pass
    return COLLECTIONS_ROOT


def ansible_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": str(collection_path()),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
    })
    env.update(extra or {})
    return env


@dataclass
class PlaybookRun:
    rc: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_playbook(playbook: str | Path | list, extra_vars: dict | None = None, env: dict | None = None,
                 check: bool = False, verbosity: int = 0, args: list | None = None,
                 timeout: float = 600) -> PlaybookRun:
    """Run ``ansible-playbook`` on a playbook file or an inline list of plays."""
    tmp = None
    if isinstance(playbook, list):
        tmp = tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False, dir=REPO / ".cache")
        yaml.safe_dump(playbook, tmp, sort_keys=False)
        tmp.close()
        playbook = tmp.name
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook)]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if check:
        cmd.append("--check")
    if verbosity:
        cmd.append("-" + "v" * verbosity)
    cmd += args or []
    try:
        proc = subprocess.run(cmd, env=ansible_env(env), capture_output=True, text=True, check=False,
                              timeout=timeout, cwd=REPO)
    finally:
        if tmp:
            os.unlink(tmp.name)
    return PlaybookRun(proc.returncode, proc.stdout, proc.stderr)
