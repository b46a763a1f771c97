"""Fixtures: the simulators, started once per test session and reset per test."""

from __future__ import annotations


import pytest

from tests.simulators import simulator_class
from tests.simulators.common import SimulatorServer


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
    """The Waldur simulator, reset to the default preset."""
    waldur_server.app.reset("default")
    yield waldur_server


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
