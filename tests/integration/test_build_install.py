"""The collection as users get it: built from the working tree, installed offline into a
clean path, documented and run from there; and scripts/release.sh on a copy of the repo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ansible_env, copy_working_tree
from tests.simulators.digitalocean import presets as do_presets
from tests.simulators.waldur import presets as waldur_presets

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
SECRET = "leftover-secret-%s" % uuid.uuid4().hex
QUICKSTART_LEFTOVERS = {
    "sim-config.yaml": "offerings:\n  - waldur_api_token: %s\n    backend_settings: {client_secret: %s}\n"
                       % (SECRET, SECRET),
    "sim-ca/simulator-ca.pem": "-----BEGIN CERTIFICATE-----\n%s\n" % SECRET,
    "sim-ca/simulator-ca-key.pem": "-----BEGIN PRIVATE KEY-----\n%s\n" % SECRET,
}
GIT_IDENTITY = ["-c", "user.name=Release Test", "-c", "user.email=release@example.com"]


def run(cmd, cwd, env=None, timeout=600):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


# ---------------------------------------------------------------------------------- build and install
@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build the collection from a copy of the working tree and install the tarball offline."""
    source = copy_working_tree(tmp_path_factory.mktemp("build-src"))
    # What the quickstart's simulator walkthrough leaves in a checkout: build_ignore keeps it out.
    for path, text in QUICKSTART_LEFTOVERS.items():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(text)
    build = run([BIN / "ansible-galaxy", "collection", "build", "--output-path", "dist"], cwd=source)
    assert build.returncode == 0, build.stdout + build.stderr
    [tarball] = (source / "dist").glob("waldur-site_agent-*.tar.gz")
    target = tmp_path_factory.mktemp("installed")
    # Only the target counts as installed: `make` exports ANSIBLE_COLLECTIONS_PATH with the
    # checkout's link, and ansible-galaxy would otherwise find the collection there and skip.
    install = run([BIN / "ansible-galaxy", "collection", "install", "--offline", "--no-deps", "-p", target, tarball],
                  cwd=target, env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(target)))
    assert install.returncode == 0, install.stdout + install.stderr
    return tarball, target


def installed_env(collections: Path, extra: dict | None = None) -> dict:
    """ansible_env() with the installed copy as the only collection path (no link to the checkout)."""
    return ansible_env({"ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_ROLES_PATH": str(collections / "roles"),
                        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "False", **(extra or {})})


def test_the_tarball_leaves_out_what_build_ignore_names(installed):
    tarball, dummy = installed
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
        files = [member.name for member in archive.getmembers() if member.isfile()]
        manifest = json.load(archive.extractfile("MANIFEST.json"))

    assert manifest["collection_info"]["namespace"] == "waldur"
    assert manifest["collection_info"]["name"] == "site_agent"
    assert manifest["collection_info"]["version"] == yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    for expected in ("plugins/modules/waldur_orders.py", "plugins/action/site_config.py",
                     "roles/agent_pass/tasks/main.yml", "playbooks/order_process.yml", "meta/runtime.yml"):
        assert expected in names
    for name in names:
        parts = Path(name).parts
        assert not {".venv", ".cache", ".git", "__pycache__", "context", ".ansible"} & set(parts), name
        assert not name.endswith((".pyc", ".tar.gz", ".whl", ".png")), name
    # Only what runs, and what docs/releasing.md says the artifact holds.
    top_level = sorted({Path(name).parts[0] for name in names})
    assert top_level == ["CHANGELOG.rst", "FILES.json", "LICENSE", "MANIFEST.json", "README.md", "bindep.txt", "changelogs",
                         "decision-environment.yml", "docs", "execution-environment.yml", "extensions", "meta",
                         "playbooks", "plugins",
                         "requirements-azure.txt", "requirements-digitalocean.txt", "requirements.txt", "roles",
                         "tests"], top_level
    # Of tests/, only the sanity ignore lists travel (ansible-test sanity on the installed collection).
    shipped_tests = sorted(name for name in files if name.startswith("tests/"))
    assert shipped_tests == sorted("tests/sanity/%s" % path.name
                                   for path in (REPO / "tests" / "sanity").glob("ignore-*.txt")), shipped_tests
    assert sorted({Path(name).parts[1] for name in names if name.startswith("extensions/")}) == ["awx", "eda"]
    listed = (REPO / "docs" / "releasing.md").read_text()
    assert all("`%s`" % entry in listed for entry in top_level if entry not in ("FILES.json", "MANIFEST.json"))
    assert tarball.stat().st_size < 1024 * 1024, tarball.stat().st_size


def test_the_tarball_holds_nothing_the_quickstart_wrote_into_the_checkout(installed):
    """sim-config.yaml (tokens, a client secret) and sim-ca/ (a CA key) of the simulator
    walkthrough were in the source tree when it was built; build_ignore left them out."""
    tarball, dummy = installed
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
        contents = b"".join(archive.extractfile(member).read() for member in archive.getmembers() if member.isfile())
    assert not [name for name in names if name.startswith(("sim-config", "sim-ca"))]
    assert SECRET.encode() not in contents


def test_ansible_test_sanity_passes_on_the_installed_collection(installed):
    """The artifact carries its sanity ignore lists (the MIT licence exception), so
    validate-modules passes where Galaxy and users run it: in the installed collection."""
    dummy, collections = installed
    shim = run([REPO / "scripts" / "ansible-test-pip-shim.sh"], cwd=REPO, env=dict(os.environ, VENV=str(BIN.parent)))
    assert shim.returncode == 0, shim.stderr
    version = "%d.%d" % sys.version_info[:2]

    sanity = run([BIN / "ansible-test", "sanity", "--test", "validate-modules", "--python", version, "--color", "no"],
                 cwd=collections / "ansible_collections" / "waldur" / "site_agent",
                 env=dict(os.environ, PATH="%s:%s" % (BIN, os.environ["PATH"])))

    assert sanity.returncode == 0, sanity.stdout + sanity.stderr


def test_ansible_doc_reads_a_module_of_the_installed_collection(installed):
    dummy, collections = installed

    doc = run([BIN / "ansible-doc", "-t", "module", "waldur.site_agent.waldur_orders"], cwd=collections,
              env=installed_env(collections))

    assert doc.returncode == 0, doc.stderr
    assert str(collections / "ansible_collections" / "waldur" / "site_agent") in doc.stdout
    assert "offering_uuid" in doc.stdout and "api_token" in doc.stdout


def test_the_order_pass_of_the_installed_collection_creates_a_droplet(installed, tmp_path, waldur_sim, do_sim):
    dummy, collections = installed
    config = tmp_path / "site-agent.yaml"
    config.write_text(yaml.safe_dump({"offerings": [{
        "name": "DigitalOcean VM",
        "waldur_api_url": waldur_sim.url + "/api/",
        "waldur_api_token": waldur_presets.PROVIDER_TOKEN,
        "waldur_offering_uuid": waldur_presets.DO_OFFERING_UUID,
        "backend_type": "digitalocean",
        "order_processing_backend": "digitalocean",
        "backend_settings": {"token": do_presets.DO_TOKEN, "api_url": do_sim.url + "/v2/",
                             "default_region": "ams3", "default_image": "ubuntu-22-04-x64",
                             "default_size": "s-1vcpu-1gb"},
    }]}))

    play = run([BIN / "ansible-playbook", "waldur.site_agent.order_process"], cwd=tmp_path,
               env=installed_env(collections, {"WALDUR_SITE_AGENT_CONFIG": str(config)}))

    assert play.returncode == 0, play.stdout + play.stderr
    order = waldur_sim.app.order(waldur_presets.DO_ORDER_UUID)
    assert order["state"] == "done"
    [droplet] = do_sim.app.droplets()
    assert f"waldur-resource:{waldur_presets.DO_RESOURCE_UUID}" in droplet["tags"]
    assert waldur_sim.app.resource(waldur_presets.DO_RESOURCE_UUID)["backend_id"] == str(droplet["id"])
    assert do_presets.DO_TOKEN not in play.stdout + play.stderr


# ---------------------------------------------------------------------------------- scripts/release.sh
@pytest.fixture
def repo_copy(tmp_path):
    """A git repository holding a copy of the working tree, committed: a clean tree to release from."""
    repo = copy_working_tree(tmp_path / "repo")
    # a change set after the last release, as a contributor adds it
    (repo / "changelogs" / "fragments" / "operations.yml").write_text(
        "---\nminor_changes:\n  - schedule role - runs the passes from systemd timers.\n")
    env = dict(os.environ, VENV=str(BIN.parent))
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", *GIT_IDENTITY, "commit", "-q", "-m", "Import"]):
        assert run(cmd, cwd=repo, env=env).returncode == 0
    return repo, env


def release(repo_copy, *args):
    repo, env = repo_copy
    return run([repo / "scripts" / "release.sh", *args], cwd=repo, env=env)


def test_release_bumps_the_version_writes_the_changelog_and_builds(repo_copy):
    repo, env = repo_copy
    fragments = sorted(p.name for p in (repo / "changelogs" / "fragments").glob("*.yml"))
    assert "operations.yml" in fragments

    result = release(repo_copy, "--summary", "Operations tooling.", "9.1.0")

    assert result.returncode == 0, result.stdout + result.stderr
    assert yaml.safe_load((repo / "galaxy.yml").read_text())["version"] == "9.1.0"
    changelog = (repo / "CHANGELOG.rst").read_text()
    assert "v9.1.0" in changelog and "Operations tooling." in changelog
    assert "schedule role" in changelog
    releases = yaml.safe_load((repo / "changelogs" / "changelog.yaml").read_text())["releases"]
    assert sorted(releases["9.1.0"]["fragments"]) == sorted(fragments + ["release_summary_9.1.0.yml"])
    assert not list((repo / "changelogs" / "fragments").glob("*.yml"))
    with tarfile.open(repo / "dist" / "waldur-site_agent-9.1.0.tar.gz") as archive:
        assert json.load(archive.extractfile("MANIFEST.json"))["collection_info"]["version"] == "9.1.0"
    # Nothing committed or tagged; the commands to do so are printed.
    assert run(["git", "rev-list", "--count", "HEAD"], cwd=repo).stdout.strip() == "1"
    assert run(["git", "tag"], cwd=repo).stdout.strip() == ""
    assert 'git tag -a 9.1.0 -m "waldur.site_agent 9.1.0"' in result.stdout


def test_release_with_commit_commits_and_tags(repo_copy):
    repo, dummy = repo_copy

    result = release(repo_copy, "--commit", "9.2.0")

    assert result.returncode == 0, result.stdout + result.stderr
    assert run(["git", "status", "--porcelain"], cwd=repo).stdout == ""
    assert run(["git", "log", "-1", "--format=%s"], cwd=repo).stdout.strip() == "Release 9.2.0"
    assert run(["git", "tag"], cwd=repo).stdout.split() == ["9.2.0"]


def test_release_refuses_a_dirty_tree(repo_copy):
    repo, dummy = repo_copy
    (repo / "README.md").write_text((repo / "README.md").read_text() + "\nunreleased edit\n")

    result = release(repo_copy, "9.1.0")

    assert result.returncode == 1
    assert "refusing to release from a working tree with uncommitted changes" in result.stderr
    assert "M README.md" in result.stderr
    assert yaml.safe_load((repo / "galaxy.yml").read_text())["version"] != "9.1.0"
    assert not (repo / "dist").exists()


@pytest.mark.parametrize("version, message", [
    ("1.2", "'1.2' is not a semantic version"),
    ("v1.2.0", "'v1.2.0' is not a semantic version"),
    ("1.02.0", "'1.02.0' is not a semantic version"),
    ("0.0.1", "0.0.1 is not newer than the current version"),
])
def test_release_refuses_a_bad_version(repo_copy, version, message):
    repo, dummy = repo_copy

    result = release(repo_copy, version)

    assert result.returncode != 0
    assert message in result.stderr
    assert run(["git", "status", "--porcelain"], cwd=repo).stdout == ""
