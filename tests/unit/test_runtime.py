"""meta/runtime.yml: the action groups name modules of the collection, and ``all`` names every
module (group/waldur.site_agent.all for module_defaults, as azure.azcollection and
community.digitalocean offer)."""

from __future__ import annotations

import yaml

from tests.helpers import REPO

RUNTIME = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
MODULES = sorted(path.stem for path in (REPO / "plugins" / "modules").glob("*.py") if path.stem != "__init__")


def test_the_all_group_holds_every_module_once():
    group = RUNTIME["action_groups"]["all"]
    assert sorted(group) == MODULES
    assert len(group) == len(set(group))


def test_every_group_names_modules_of_the_collection():
    for name, group in RUNTIME["action_groups"].items():
        assert set(group) <= set(MODULES), name
    backends = {"waldur": "waldur_", "digitalocean": "do_", "azure": "azure_"}
    for name, prefix in backends.items():
        assert sorted(RUNTIME["action_groups"][name]) == [module for module in MODULES if module.startswith(prefix)]
