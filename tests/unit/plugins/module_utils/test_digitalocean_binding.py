"""The python-digitalocean binding pinned to the library it was written for.

``binding`` overrides a private, name-mangled method of the library
(``BaseAPI._BaseAPI__perform_request``). An upgrade that renames it, changes its
signature or stops calling it would silently send requests around the client
(no pacing, no retries, the library's own session): these tests fail first.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import os
import re

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from ansible_collections.waldur.site_agent.plugins.doc_fragments.digitalocean import ModuleDocFragment
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean import binding

digitalocean = pytest.importorskip("digitalocean")
baseapi = pytest.importorskip("digitalocean.baseapi")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
DISTRIBUTION = "python-digitalocean"
# Where the execution environment definitions name their Python requirements.
EE_FILES = ("execution-environment.yml", "meta/execution-environment.yml")
PRIVATE_NAME = "_BaseAPI__perform_request"
EXPECTED_PARAMETERS = ["self", "url", "type", "params"]


def requirement_sources():
    """``[(where, lines)]``: requirements.txt first, then what the EE definitions name
    (another file, or a list of requirements inline)."""
    files, inline = ["requirements.txt"], []
    for relative in EE_FILES:
        with open(os.path.join(ROOT, relative)) as handle:
            python = (yaml.safe_load(handle).get("dependencies") or {}).get("python")
        if isinstance(python, list):
            inline.append((relative, python))
        elif python and python not in files:
            files.append(python)
    sources = []
    for relative in files:
        with open(os.path.join(ROOT, relative)) as handle:
            sources.append((relative, handle.read().splitlines()))
    return sources + inline


def declared_requirements():
    """``[(where, Requirement)]`` for every python-digitalocean requirement declared."""
    found = []
    for relative, lines in requirement_sources():
        for line in lines:
            text = line.split("#", 1)[0].strip()
            if text and not text.startswith("-") and Requirement(text).name == DISTRIBUTION:
                found.append((relative, Requirement(text)))
    return found


def installed_version():
    # the distribution's metadata, not digitalocean.__version__ (1.17.0 still says "1.16.0")
    return Version(importlib.metadata.version(DISTRIBUTION))


def test_requirements_txt_declares_a_floor():
    requirements = declared_requirements()
    assert [relative for relative, _req in requirements][:1] == ["requirements.txt"]
    for relative, requirement in requirements:
        assert any(spec.operator in (">=", "==", "~=") for spec in requirement.specifier), relative


def test_the_installed_library_lies_in_every_declared_range():
    version = installed_version()
    for relative, requirement in declared_requirements():
        assert requirement.specifier.contains(version, prereleases=True), (
            "%s %s is installed but %s asks for %s" % (DISTRIBUTION, version, relative, requirement))


def test_the_doc_fragment_names_the_same_floor():
    floors = [spec.version for _rel, req in declared_requirements() for spec in req.specifier if spec.operator == ">="]
    documented = re.findall(r"python-digitalocean\s*>=\s*([0-9][0-9.]*)", ModuleDocFragment.DOCUMENTATION)
    assert documented and set(documented) == set(floors)


def test_the_private_method_the_binding_overrides_exists_with_its_signature():
    original = getattr(baseapi.BaseAPI, PRIVATE_NAME, None)
    assert callable(original), "python-digitalocean no longer has BaseAPI.%s" % PRIVATE_NAME
    assert list(inspect.signature(original).parameters) == EXPECTED_PARAMETERS
    assert inspect.signature(original).parameters["type"].default == baseapi.GET
    override = binding.BoundListing.__dict__.get(PRIVATE_NAME) or getattr(binding._ClientBound, PRIVATE_NAME)
    assert list(inspect.signature(override).parameters) == EXPECTED_PARAMETERS


def test_the_library_still_sends_every_request_through_that_method():
    """get_data and its pagination call ``self.__perform_request``: the override sees them all."""
    for name in ("get_data", "_BaseAPI__deal_with_pagination"):
        method = getattr(baseapi.BaseAPI, name)
        assert PRIVATE_NAME in method.__code__.co_names, name
    # the library builds objects with these keyword attributes; build() relies on them
    obj = baseapi.BaseAPI(token="", end_point="http://127.0.0.1:9/v2/", _session="session")
    assert (obj.end_point, obj._session) == ("http://127.0.0.1:9/v2/", "session")


def test_every_bound_class_routes_through_the_client():
    class Client:
        endpoint = "http://127.0.0.1:9/v2/"
        session = object()

        def __init__(self):
            self.sent = []

        def send(self, method, url, params=None, retry_writes=False):
            self.sent.append((method, url, params, retry_writes))
            raise RuntimeError("stop")

    client = Client()
    for cls in (binding.BoundDroplet, binding.BoundAction, binding.BoundSSHKey, binding.BoundListing):
        obj = binding.build(client, cls, id=7)
        assert obj._do_client is client and obj._session is client.session and obj.token == ""
        with pytest.raises(RuntimeError):
            obj.get_data("droplets/7")
    assert client.sent == [("GET", "droplets/7", {"per_page": 200}, False)] * 4  # the library adds per_page


def test_python_digitalocean_is_imported_only_by_the_binding():
    package = os.path.join(ROOT, "plugins", "module_utils", "digitalocean")
    importing = []
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            with open(os.path.join(package, name)) as handle:
                if re.search(r"^\s*(import digitalocean|from digitalocean\b)", handle.read(), re.M):
                    importing.append(name)
    assert importing == ["binding.py"]
