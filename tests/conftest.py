"""Fixtures: the simulators, started once per test session and reset per test."""

from __future__ import annotations

import pytest

from tests.helpers import import_collection_from_checkout
from tests.simulators import simulator_class
from tests.simulators.common import SimulatorServer

# `ansible_collections.waldur.site_agent.*` imports resolve to this checkout.
import_collection_from_checkout()


def _start(name, tmp_path_factory, tls=False, **options):
    ssl_context = ca_path = None
    if tls:
        from tests.simulators.tls import make_tls
        ssl_context, ca_path = make_tls(str(tmp_path_factory.mktemp(f"{name}-ca")))
    server = SimulatorServer(simulator_class(name)(**options), ssl_context=ssl_context).start()
    server.ca_bundle = ca_path
    return server


@pytest.fixture(scope="session")
def waldur_server(tmp_path_factory):
    server = _start("waldur", tmp_path_factory)
    yield server
    server.stop()


@pytest.fixture
def waldur_sim(waldur_server):
    """The Waldur simulator, reset to the default preset.

    After the test, every exchange it recorded is checked against Waldur's OpenAPI schema
    (``tests/contract/waldur_openapi.py``) and any violation fails the test, so each test
    using Waldur is also a contract test. A test that sends non-conforming requests on
    purpose clears ``app.exchanges`` after doing so.
    """
    waldur_server.app.reset("default")
    yield waldur_server
    # Imported here: openapi-core costs ~0.4 s to import, which tests without Waldur skip.
    from tests.contract.waldur_openapi import validate_exchanges

    with waldur_server.app.lock:
        exchanges = list(waldur_server.app.exchanges)
    problems = validate_exchanges(exchanges)
    if problems:
        shown = "\n".join(problems[:40])
        more = f"\n... and {len(problems) - 40} more" if len(problems) > 40 else ""
        pytest.fail(f"{len(problems)} Waldur exchange(s) break the OpenAPI contract:\n{shown}{more}",
                    pytrace=False)


@pytest.fixture(scope="session")
def do_server(tmp_path_factory):
    server = _start("digitalocean", tmp_path_factory)
    yield server
    server.stop()


@pytest.fixture
def do_sim(do_server):
    """The DigitalOcean simulator, reset to the default preset."""
    do_server.app.reset("default")
    yield do_server


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory):
    server = _start("azure", tmp_path_factory, tls=True)
    yield server
    server.stop()


@pytest.fixture
def azure_sim(azure_server, monkeypatch):
    """The Azure simulator (HTTPS), reset; REQUESTS_CA_BUNDLE trusts its CA."""
    azure_server.app.reset("default")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", azure_server.ca_bundle)
    yield azure_server


@pytest.fixture(scope="session")
def tls_waldur_server(tmp_path_factory):
    """A Waldur simulator over HTTPS (its own session-long server, not reset, not contract-checked):
    ``.ca_bundle`` is the CA that signed it, ``.other_ca`` one that did not, for the verify_ssl tests."""
    from tests.simulators.tls import make_tls

    server = _start("waldur", tmp_path_factory, tls=True)
    _other_context, server.other_ca = make_tls(str(tmp_path_factory.mktemp("other-ca")))
    yield server
    server.stop()


def pytest_report_header(config):
    """The fault matrix's sample and its seed, so that a failing sample can be run again."""
    if not any("fault_matrix" in str(arg) or str(arg).rstrip("/").endswith("integration") or str(arg) == "tests"
               for arg in config.args):
        return None
    from tests.faults.matrix import selection

    chosen, every, seed = selection()
    return "fault matrix: %d of %d cases, seed %d (FAULT_MATRIX_SEED=%d to run them again)" % (
        len(chosen), len(every), seed, seed)
