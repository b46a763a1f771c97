"""Azure Resource Manager + Entra ID token simulator (serve it over TLS)."""

from tests.simulators.azure.simulator import AzureSimulator

__all__ = ["AzureSimulator"]
