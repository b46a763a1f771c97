"""Local, stateful simulators of the services the collection talks to.

``python -m tests.simulators <name> --port N`` starts one; tests use the
fixtures in ``tests/conftest.py``. Each simulator lives in its own package and
exposes a class built on :class:`tests.simulators.common.Simulator`.
"""

import importlib

SIMULATORS = {
    "waldur": ("tests.simulators.waldur", "WaldurSimulator"),
    "digitalocean": ("tests.simulators.digitalocean", "DigitalOceanSimulator"),
    "azure": ("tests.simulators.azure", "AzureSimulator"),
}

# Services whose real SDKs refuse plain HTTP (azure-identity/azure-core bearer auth).
TLS_REQUIRED = {"azure"}


def simulator_class(name):
    module_name, class_name = SIMULATORS[name]
    return getattr(importlib.import_module(module_name), class_name)
