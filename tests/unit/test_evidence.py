"""No decision on an unproven read, guarded like a rule with one home (test_one_home.py).

Every call that writes to Waldur, DigitalOcean or ARM (a create, delete, resize, power change, an
order set done or erred, usage sent) sits in a function this table names, with the proof it acts
on. A new write site fails ``test_every_write_sits_in_a_known_decision`` until it is added here
with its evidence; an entry whose evidence is ``require`` must take its inputs through
``core/evidence.require`` (or be a ``@decides`` function) in its own body or in the helpers named.
"""

import ast
import re
from pathlib import Path

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core import evidence
from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import (
    ProvenAbsence,
    ProvenList,
    ProvenObject,
    Shape,
    Unproven,
    decides,
    require,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean import droplets

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
DO_WRITES = {"create_droplet", "destroy_droplet", "droplet_action"}
WALDUR_WRITES = ("set_state_done", "set_state_erred", "approve_by_provider", "reject_by_provider", "set_usage",
                 "set_backend_id", "set_backend_metadata")

# (file under plugins/, function) -> (what it writes, the proof it acts on). "require": the function
# (or the helpers after it) takes its inputs through require() / @decides.
DECISIONS = {
    ("module_utils/digitalocean/droplets_present.py", "DropletPresentSteps._create"):
        ("create", "require: the proven listing of the droplets carrying the tag, read twice unless approved now"),
    ("module_utils/digitalocean/droplets_absent.py", "DropletAbsentSteps.absent"):
        ("delete", "require via DropletAbsentSteps._own and DropletAbsentSteps._absent_by_id"),
    ("module_utils/digitalocean/droplets_absent.py", "DropletAbsentSteps._absent_by_id"):
        ("delete", "require: a direct read answering DigitalOcean's own not_found, or the droplet"),
    ("module_utils/digitalocean/droplets_present.py", "DropletPresentSteps._remove_duplicates"):
        ("delete", "require via DropletPresentSteps.present: the proven tag listing"),
    ("module_utils/digitalocean/droplets_power.py", "DropletPowerSteps.resize"):
        ("resize", "require: the droplet as a checked read showed it"),
    ("module_utils/digitalocean/droplets_power.py", "DropletPowerSteps.power"):
        ("power", "require: the located droplet, this resource's (refuse_foreign)"),
    ("module_utils/digitalocean/droplets_power.py", "DropletPowerSteps._defer_power_off"):
        ("power", "require via DropletPowerSteps.power"),
    ("module_utils/digitalocean/droplets_power.py", "DropletPowerSteps._hard_power_off"):
        ("power", "require via DropletPowerSteps.power"),
    ("module_utils/digitalocean/droplets_power.py", "DropletPowerSteps._power_off"):
        ("power", "require via DropletPowerSteps.resize"),
    ("module_utils/digitalocean/droplets_power.py", "DropletPowerSteps._power_on_after_failure"):
        ("power", "require via DropletPowerSteps.resize"),
    ("module_utils/digitalocean/droplets_power.py", "DropletPowerSteps._power_on_after_resize"):
        ("power", "require via DropletPresentSteps.present"),
    ("modules/do_audit.py", "DropletCleanup.delete"):
        ("delete", "a fresh direct read of the droplet, its tags and name; Waldur's direct read over passes"),
    ("module_utils/waldur/claim.py", "Claim.approve"):
        ("settle", "the listed order, judged against the proven catalogue"),
    ("module_utils/waldur/claim.py", "Claim.turn_down"):
        ("settle", "the catalogue's verdict, and for an executing order the droplets read twice"),
    ("module_utils/waldur/settle.py", "Settle._post_to_resource"):
        ("settle", "require via Settle.settle_one: the order and the resource as Waldur's read layer gave them, "
                   "where Settle._record finds the resource's backend id or metadata differs"),
    ("module_utils/waldur/settle.py", "Settle._transition"):
        ("settle", "require via Settle.settle_one"),
    ("module_utils/waldur/usage.py", "usage_worker.submit"):
        ("usage", "the stored usage of the month, read twice where Waldur showed none"),
    ("modules/waldur_resource_metadata.py", "main.update"):
        ("settle", "a direct read of the resource's backend metadata"),
    ("module_utils/azure/build.py", "ChainBuild._build"):
        ("create", "ARM's direct reads by name: None only on ARM's own *NotFound (AzureClients.read)"),
    ("module_utils/azure/build.py", "ChainBuild._build.network_branch"): ("create", "as ChainBuild._build"),
    ("module_utils/azure/build.py", "ChainBuild._build.nsg_branch"): ("create", "as ChainBuild._build"),
    ("module_utils/azure/build.py", "ChainBuild._build.public_ip_branch"): ("create", "as ChainBuild._build"),
    ("module_utils/azure/objects.py", "object_operations"):
        ("delete", "a fresh read of each object and its owner tag (delete_objects)"),
    ("modules/azure_audit.py", "AuditListing._delete_group"):
        ("delete", "a fresh read of the group and of its contents, every object carrying the mark"),
    ("modules/azure_audit.py", "AuditListing._tags_at"):
        ("mark", "the audit's mark of a holding first seen gone (a tag, on an object carrying the mark)"),
}


def write_sites():
    """``{(file, function): set of writes}`` of every write call in plugins/."""
    found = {}
    for path in sorted(PLUGINS.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        stack = []

        class Visitor(ast.NodeVisitor):
            def visit_FunctionDef(self, node):
                stack.append(node.name)
                self.generic_visit(node)
                stack.pop()

            visit_ClassDef = visit_FunctionDef

            def visit_Call(self, node):
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                text = ast.unparse(node)
                kind = None
                if name in DO_WRITES or (name or "").startswith("begin_"):
                    kind = name
                elif name == "post" and any(write in text for write in WALDUR_WRITES):
                    kind = next(write for write in WALDUR_WRITES if write in text)
                elif name == "post" and "order_path(item.uuid, action)" in text:
                    kind = "transition"
                elif name == "post" and "provider_resource_path(item.resource_uuid, action)" in text:
                    kind = "resource_write"
                elif name == "call" and re.search(r"\bbegin_\w+", text):
                    kind = re.search(r"\bbegin_\w+", text).group(0)
                if kind and stack:
                    found.setdefault((path.relative_to(PLUGINS).as_posix(), ".".join(stack)), set()).add(kind)
                self.generic_visit(node)

        Visitor().visit(tree)
    # the clients' own definitions of the write primitives are the writes themselves
    return dict((key, value) for key, value in found.items()
                if not key[0].endswith(("digitalocean/client.py", "digitalocean/binding.py")))


def function_source(file, qualname):
    """The source of ``qualname`` in ``file``, else in the file of its layer that defines it."""
    for path in [PLUGINS / file] + sorted((PLUGINS / file).parent.glob("*.py")):
        node = ast.parse(path.read_text(encoding="utf-8"))
        for part in qualname.split("."):
            node = next((child for child in ast.walk(node)
                         if isinstance(child, (ast.FunctionDef, ast.ClassDef)) and child.name == part), None)
            if node is None:
                break
        if node is not None:
            return ast.unparse(node)
    raise AssertionError("no %s in %s or beside it" % (qualname, file))


def test_every_write_sits_in_a_known_decision():
    sites = write_sites()
    unknown = sorted(set(sites) - set(DECISIONS))
    assert not unknown, ("writes outside the known decisions (add each to DECISIONS with the proof it acts on): %s"
                         % unknown)
    gone = sorted(set(DECISIONS) - set(sites))
    assert not gone, "DECISIONS names functions that no longer write: %s" % gone


@pytest.mark.parametrize("site", sorted(key for key, value in DECISIONS.items() if value[1].startswith("require")))
def test_a_decision_takes_its_inputs_as_proof(site):
    file, qualname = site
    proof = DECISIONS[site][1]
    homes = [qualname] + re.findall(r"(?:via|and) ([A-Z]\w*\.\w+)", proof)
    sources = [function_source(file, home) for home in homes]
    assert any("require(" in source or "@decides(" in source for source in sources), \
        "%s: none of %s takes its inputs through require() or @decides" % (file, ", ".join(homes))


def test_require_takes_proof_only():
    for proof in (ProvenObject({"id": 1}, "GET /x"), ProvenList([], "GET /x"), ProvenAbsence("GET /x/1")):
        assert require(proof, "x") is proof
    for plain in ({"id": 1}, [], None, "droplet"):
        with pytest.raises(Unproven, match="was not proven by a checked read"):
            require(plain, "droplet 7")
    assert not ProvenAbsence("GET /v2/droplets/7") and evidence.is_absent(ProvenAbsence("GET /v2/droplets/7"))
    assert not evidence.is_absent(None) and not evidence.is_absent([])


def test_a_decision_refuses_a_plain_listing():
    calls = []

    @decides("create", "tagged")
    def create(item, tagged):
        calls.append(item)

    with pytest.raises(Unproven):
        create({"resource_uuid": "a" * 32}, [])  # a listing that did not come from the read layer
    create({"resource_uuid": "a" * 32}, ProvenList([], "GET /v2/droplets?tag_name=x"))
    assert len(calls) == 1
    assert evidence.DECISIONS["droplets_present.DropletPresentSteps._create"] == "create"
    assert droplets.DropletWorker._create.decides == "create"


def test_a_shape_names_the_field_and_the_types():
    shape = Shape("droplet", required={"id": "integer", "tags": "list"}, optional={"image": ("object", "null")})
    assert shape.problem({"id": 7, "tags": []}) is None
    assert shape.problem({"id": "7", "tags": []}) == "droplet's id is string, not integer"
    assert shape.problem({"tags": []}) == "droplet has no id"
    assert shape.problem({"id": True, "tags": []}) == "droplet's id is boolean, not integer"
    assert shape.problem({"id": 7, "tags": [], "image": 5}) == "droplet's image is integer, not object or null"
    assert shape.problem([]) == "droplet is list, not an object"
    assert shape.problem({"tags": []}, asked={"tags"}) is None  # Waldur's field=: only what was asked
