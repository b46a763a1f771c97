"""The repository stands alone: nothing reads outside its tree, nothing binary is committed,
and the ansible-core range promised in meta/runtime.yml is the one make test-matrix tests."""

from __future__ import annotations

import re
import subprocess

import yaml

from tests.helpers import REPO

ARCHIVES = (".whl", ".tar.gz", ".tgz", ".zip", ".egg", ".jar", ".so", ".exe")


def tracked_files():
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True).stdout.decode().split("\0")
    return [REPO / name for name in listing if name and (REPO / name).is_file()]


def test_no_file_reads_outside_the_repository():
    # Spelled in two parts so that this file does not find itself.
    sibling = ".." + "/shared"
    offenders = [str(path.relative_to(REPO)) for path in tracked_files()
                 if sibling.encode() in path.read_bytes()]
    assert offenders == []


def test_no_binaries_archives_or_large_files_are_committed():
    offenders = []
    for path in tracked_files():
        name = str(path.relative_to(REPO))
        if name.endswith(ARCHIVES):
            offenders.append(name)
        elif path.stat().st_size > 300 * 1024 and not name.startswith("docs/") and not name.endswith(".png"):
            offenders.append("%s (%d KB)" % (name, path.stat().st_size // 1024))
    assert offenders == []


def test_the_vendored_openapi_documents_carry_licence_and_provenance():
    specs = REPO / "tests" / "contract" / "specs"
    for name in ("waldur-openapi", "digitalocean-openapi"):
        assert (specs / (name + ".yaml")).is_file()
        assert "license" in (specs / (name + ".LICENSE")).read_text().lower()
        provenance = (specs / (name + ".README.md")).read_text()
        assert re.search(r"\b[0-9a-f]{40}\b", provenance), name  # the source commit


def test_the_matrix_tests_the_promised_ansible_core_range():
    floor = re.match(r">=(\d+\.\d+)", yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"])
    matrix = re.search(r'MATRIX=\$\{MATRIX:-"([^"]+)"\}', (REPO / "scripts" / "test-matrix.sh").read_text()).group(1)
    versions = [entry.split(":")[0] for entry in matrix.split()]
    assert versions[0] == floor.group(1)
    minors = [int(version.split(".")[1]) for version in versions]
    assert minors == list(range(minors[0], minors[-1] + 1))  # every release in between
    ignores = {(REPO / "tests" / "sanity" / ("ignore-%s.txt" % version)).read_text() for version in versions}
    assert len(ignores) == 1  # one list for every release: a new module's entry goes into each


# What the quickstart's simulator walkthrough (and make demo, make sanity) write into a checkout.
CHECKOUT_LEFTOVERS = ["sim-config.yaml", "sim-ca/simulator-ca.pem", "sim-ca/simulator-ca-key.pem",
                      ".cache/collections", ".venv", "dist/waldur-site_agent-1.0.0.tar.gz"]


def test_what_the_quickstart_writes_is_ignored_by_git_and_the_build():
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *CHECKOUT_LEFTOVERS], cwd=REPO,
                             capture_output=True, text=True, check=False).stdout.split()
    assert ignored == CHECKOUT_LEFTOVERS
    build_ignore = yaml.safe_load((REPO / "galaxy.yml").read_text())["build_ignore"]
    for pattern in ("sim-config.yaml", "sim-ca", ".venv", ".cache", "dist", "*.tar.gz"):
        assert pattern in build_ignore, pattern


def test_quickstart_files_are_the_ones_the_walkthrough_writes():
    quickstart = (REPO / "docs" / "quickstart.md").read_text()
    assert "<!-- doc-file: simulators-config sim-config.yaml -->" in quickstart
    assert "--tls-dir sim-ca" in quickstart


def test_galaxy_tags_find_the_collection_and_follow_galaxy_s_rules():
    tags = yaml.safe_load((REPO / "galaxy.yml").read_text())["tags"]
    assert {"waldur", "azure", "digitalocean"} <= set(tags)
    assert len(tags) <= 20 and len(tags) == len(set(tags))
    assert all(re.fullmatch(r"[a-z0-9]{1,64}", tag) for tag in tags), tags


def test_every_module_has_an_action_plugin_that_runs_it_in_the_worker():
    """A module without an action plugin of its own would start a Python of its own (about 0.6 s
    more per run, plugins/plugin_utils/controller_module.py); pass_lock and site_config are action-only."""
    action_only = {"pass_lock", "site_config"}
    runners = ("plugin_utils.batch_action import ActionModule", "plugin_utils.module_action import ActionModule")
    for module in sorted((REPO / "plugins" / "modules").glob("*.py")):
        if module.stem == "__init__" or module.stem in action_only:
            continue
        action = REPO / "plugins" / "action" / module.name
        assert action.is_file(), "%s has no action plugin: add plugins/action/%s" % (module.stem, module.name)
        assert any(runner in action.read_text() for runner in runners), action
        # its imports, once in the controller: a worker would otherwise import requests or the SDKs again
        assert "\npreload(__name__)" in action.read_text(), "%s does not preload its module's imports" % action


def test_the_version_in_galaxy_yml_is_a_release_of_the_changelog():
    """What galaxy.yml says is released is in changelogs/changelog.yaml, with its summary, and in
    CHANGELOG.rst; the version the collection reports to Waldur is the same."""
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    releases = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"]
    assert version in releases, sorted(releases)
    assert releases[version]["changes"]["release_summary"].strip()
    assert "\nv%s\n" % version in (REPO / "CHANGELOG.rst").read_text()
    client = (REPO / "plugins" / "module_utils" / "waldur" / "client.py").read_text()
    assert 'COLLECTION_VERSION = "%s"' % version in client
