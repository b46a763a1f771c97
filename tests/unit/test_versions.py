"""One statement of what is supported: README's "Requirements" section, and everything that
states or tests a version agrees with it.

* ansible-core: the floor of ``requires_ansible`` (meta/runtime.yml) is the README's, the
  quickstart's ``pip install 'ansible-core>=X'`` and the first release of the test matrix
  (scripts/test-matrix.sh); the releases the README lists as tested are the matrix's; the newest
  is the one ``make test`` pins (requirements-dev.txt) and the execution environment builds on.
* Python: the README's range is the matrix's oldest and newest Python, and the quickstart's.
* Python packages: requirements.txt is requirements-azure.txt and requirements-digitalocean.txt
  together, and the README names each file's packages.
"""

from __future__ import annotations

import re

import yaml

from tests.helpers import REPO

README = (REPO / "README.md").read_text()
REQUIREMENTS = README[README.index("\n## Requirements\n"):README.index("\n## Use it\n")]


def _matrix():
    text = (REPO / "scripts" / "test-matrix.sh").read_text()
    entries = re.search(r'MATRIX=\$\{MATRIX:-"([^"]+)"\}', text).group(1).split()
    return [tuple(entry.split(":")) for entry in entries]


def _minor(version: str) -> tuple:
    return tuple(int(part) for part in version.split(".")[:2])


def _packages(name: str) -> set:
    lines = [line.split("#")[0].strip() for line in (REPO / name).read_text().splitlines()]
    return {line for line in lines if line}


def test_the_ansible_core_floor_is_one():
    floor = re.fullmatch(r">=(\d+\.\d+)\.0", yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
                         ["requires_ansible"]).group(1)
    assert _matrix()[0][0] == floor
    assert "**ansible-core %s or later**" % floor in REQUIREMENTS
    assert "pip install 'ansible-core>=%s'" % floor in README
    assert "pip install 'ansible-core>=%s'" % floor in (REPO / "docs" / "quickstart.md").read_text()


def test_the_tested_releases_are_the_matrix():
    versions = [core for core, dummy in _matrix()]
    listed = re.search(r"\*\*: ([\d., and]+) are tested", REQUIREMENTS).group(1)
    assert re.findall(r"\d+\.\d+", listed) == versions


def test_the_newest_release_is_make_test_s_and_the_execution_environment_s():
    newest = _matrix()[-1][0]
    following = "%d.%d" % (_minor(newest)[0], _minor(newest)[1] + 1)
    dev = (REPO / "requirements-dev.txt").read_text()
    assert "ansible-core>=%s,<%s" % (newest, following) in dev
    ee = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    assert ee["dependencies"]["ansible_core"]["package_pip"] == "ansible-core>=%s,<%s" % (newest, following)
    assert "built on\n  ansible-core %s" % newest in REQUIREMENTS
    assert "`make test` runs on %s" % newest in REQUIREMENTS
    # The EE's Python runs that release ("ansible-core 2.20 and later need Python 3.12 or later").
    ee_python = re.search(r"python(\d+\.\d+)$", ee["dependencies"]["python_interpreter"]["python_path"]).group(1)
    needs = re.search(r"ansible-core (\d+\.\d+) and later need\s+Python (\d+\.\d+) or later", REQUIREMENTS)
    assert _minor(newest) < _minor(needs.group(1)) or _minor(ee_python) >= _minor(needs.group(2))


def test_the_python_range_is_the_matrix_s():
    pythons = sorted({python for dummy, python in _matrix()}, key=_minor)
    assert "**Python %s to %s**" % (pythons[0], pythons[-1]) in REQUIREMENTS
    quickstart = (REPO / "docs" / "quickstart.md").read_text()
    assert "Python %s to %s" % (pythons[0], pythons[-1]) in quickstart
    # "ansible-core 2.20 and later need Python 3.12 or later": the matrix's own pairs.
    needs = re.search(r"ansible-core (\d+\.\d+) and later need\s+Python (\d+\.\d+) or later", REQUIREMENTS)
    for core, python in _matrix():
        if _minor(core) >= _minor(needs.group(1)):
            assert _minor(python) >= _minor(needs.group(2)), (core, python)
        else:
            assert _minor(python) < _minor(needs.group(2)), (core, python)


def test_requirements_txt_is_both_backends():
    azure, digitalocean = _packages("requirements-azure.txt"), _packages("requirements-digitalocean.txt")
    assert _packages("requirements.txt") == azure | digitalocean
    assert not any(line.startswith("azure") for line in digitalocean)
    assert "python-digitalocean>=1.17.0" not in azure
    for name, packages in (("requirements-digitalocean.txt", digitalocean), ("requirements-azure.txt", azure)):
        line = re.search(r"`%s`: (.*?);?\n" % re.escape(name), REQUIREMENTS.replace("\n    ", " ")).group(1)
        named = re.findall(r"`([\w-]+)`", line)
        assert sorted(named) == sorted(re.split(r"[<>=]", package)[0] for package in packages), name
