"""Helpers shared by the test suites: run real playbooks against the simulators."""

from __future__ import annotations

import copy
import json
import os
import shutil
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


def import_collection_from_checkout() -> None:
    """Make ``ansible_collections.waldur.site_agent.*`` imports in this Python resolve to this
    checkout (the tests, the bench and the doc generators import the collection's module_utils)."""
    root = str(collection_path())
    if root not in sys.path:
        sys.path.insert(0, root)


def copy_working_tree(dest: Path) -> Path:
    """The files the next commit would hold (tracked, plus new files git does not ignore),
    leaving out any virtualenv lying around untracked."""
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    venvs = {str(Path(name).parent) for name in listing if Path(name).name == "pyvenv.cfg"}
    for name in listing:
        path = REPO / name
        if not name or not path.is_file() or any(name.startswith(venv + "/") for venv in venvs):
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / name)
    return dest


_LOCK_DIR: list = []


def lock_directory() -> str:
    """This test process's directory of pass lock files: passes of one test share it (so they
    really meet each other's locks), tests in other xdist workers never do."""
    if not _LOCK_DIR:
        _LOCK_DIR.append(tempfile.mkdtemp(prefix="waldur-site-agent-locks-"))
    return _LOCK_DIR[0]


def ansible_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.setdefault("WALDUR_SITE_AGENT_LOCK_DIR", lock_directory())
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


def assert_verbose_module_output(output: str) -> None:
    """The run printed -vvv module output, so a check that a secret is absent from it means
    something: ansible-core before 2.20 also prints each module's ``invocation`` (its
    arguments), with no_log options masked; 2.20 and later leave ``invocation`` out."""
    # at -vvv ansible-core says which module file it runs the usual way, and the collection's
    # action plugins which module they run in the worker (plugins/plugin_utils/controller_module.py)
    assert "Using module file" in output or "in the task's worker, no AnsiballZ payload" in output, "not a -vvv run"
    if '"invocation"' in output:
        assert "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in output, "module arguments printed unmasked"
    else:
        from ansible.release import __version__ as core_version
        assert tuple(int(part) for part in core_version.split(".")[:2]) >= (2, 20), \
            "ansible-core %s printed no module invocation at -vvv" % core_version


COMPONENTS = {
    "cpu": {"measured_unit": "Cores", "unit_factor": 1, "accounting_type": "limit", "label": "CPU"},
    "ram": {"measured_unit": "MiB", "unit_factor": 1, "accounting_type": "limit", "label": "RAM"},
    "disk": {"measured_unit": "MiB", "unit_factor": 1, "accounting_type": "limit", "label": "Disk"},
}


def simulator_site_config(waldur_url, do_url=None, azure_url=None):
    """A site agent configuration (upstream format) for the bundled simulators:
    one DigitalOcean and one Azure offering of the Waldur simulator's default preset."""
    from tests.simulators.azure import presets as azure_presets
    from tests.simulators.digitalocean import presets as do_presets
    from tests.simulators.waldur import presets as waldur_presets

    config = {
        "timezone": "UTC",
        "offerings": [
            {
                "name": "DigitalOcean VM",
                "waldur_api_url": waldur_url + "/api/",
                "waldur_api_token": waldur_presets.PROVIDER_TOKEN,
                "waldur_offering_uuid": waldur_presets.DO_OFFERING_UUID,
                "backend_type": "digitalocean",
                "order_processing_backend": "digitalocean",
                "reporting_backend": "digitalocean",
                "membership_sync_backend": "digitalocean",
                "backend_settings": {
                    "token": do_presets.DO_TOKEN,
                    "api_url": "%s/v2/" % do_url,
                    "default_region": "ams3",
                    "default_image": "ubuntu-22-04-x64",
                    "default_size": "s-1vcpu-1gb",
                    "default_tags": ["waldur"],
                    "size_mapping": {"s-1vcpu-1gb": {"cpu": 1, "ram": 1024, "disk": 25600},
                                     "s-2vcpu-4gb": {"cpu": 2, "ram": 4096, "disk": 81920}},
                },
                "backend_components": copy.deepcopy(COMPONENTS),
            },
            {
                "name": "Azure VM",
                "waldur_api_url": waldur_url + "/api/",
                "waldur_api_token": waldur_presets.PROVIDER_TOKEN,
                "waldur_offering_uuid": waldur_presets.AZURE_OFFERING_UUID,
                "backend_type": "azure",
                "order_processing_backend": "azure",
                "reporting_backend": "azure",
                "membership_sync_backend": "azure",
                "backend_settings": {
                    "subscription_id": azure_presets.SUBSCRIPTION_ID,
                    "tenant_id": azure_presets.TENANT_ID,
                    "client_id": azure_presets.CLIENT_ID,
                    "client_secret": azure_presets.CLIENT_SECRET,
                    "arm_endpoint": azure_url or "",
                    "authority_host": azure_url or "",
                    "polling_interval": 1,
                    "default_location": "westeurope",
                    "default_size": "Standard_B2s",
                    "default_image": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest",
                    "allowed_ssh_ranges": ["203.0.113.0/24"],
                },
                "backend_components": copy.deepcopy(COMPONENTS),
            },
        ],
    }
    config["offerings"] = [offering for offering in config["offerings"]
                           if (offering["backend_type"] == "digitalocean" and do_url)
                           or (offering["backend_type"] == "azure" and azure_url)]
    return config
