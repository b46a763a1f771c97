"""Every role has a README.md (Galaxy's importer refuses a collection whose roles have none)
whose variables table is what scripts/gen_role_readmes.py makes from meta/argument_specs.yml,
with every option of the spec, and an example that uses the role."""

from __future__ import annotations

import re

import pytest
import yaml

from scripts import gen_role_readmes as generator
from tests.helpers import REPO

ROLES = sorted(path.name for path in (REPO / "roles").iterdir() if path.is_dir())


def test_every_role_has_an_argument_spec_and_a_readme():
    assert [role.name for role in generator.roles()] == ROLES
    assert all((REPO / "roles" / role / "README.md").is_file() for role in ROLES)


def test_the_readmes_are_up_to_date():
    assert generator.main(["--check"]) == 0, "run .venv/bin/python scripts/gen_role_readmes.py"


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_in_the_readme_with_an_example(role):
    readme = (REPO / "roles" / role / "README.md").read_text()
    options = generator.spec(REPO / "roles" / role)["options"]
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", readme, re.MULTILINE))
    assert rows == set(options)
    example = re.search(r"## Example\n\n```yaml\n(.*?)```", readme, re.DOTALL)
    assert example, role
    play = yaml.safe_load(example.group(1))
    used = {entry["role"] for item in play for entry in item["roles"]}
    assert used & {"waldur.site_agent.%s" % role, "waldur.site_agent.agent_pass"}, used


def test_a_stale_table_is_reported(tmp_path, monkeypatch, capsys):
    role = tmp_path / "roles" / "demo"
    (role / "meta").mkdir(parents=True)
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": {"main": {
        "short_description": "Demo", "options": {"demo_x": {"description": "C(x) it", "type": "int", "default": 1}}}}}))
    (role / "README.md").write_text("# demo\n\n%s\n%s\n" % (generator.BEGIN, generator.END))
    monkeypatch.setattr(generator, "ROLES", tmp_path / "roles")
    assert generator.main(["--check"]) == 1
    assert "roles/demo/README.md is out of date" in capsys.readouterr().err
    assert generator.main([]) == 0
    assert "| `demo_x` | int | `1` | no | `x` it |" in (role / "README.md").read_text()
    (role / "README.md").unlink()
    assert generator.main(["--check"]) == 2
