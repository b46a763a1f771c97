"""Fixed data of the Azure simulator: the service principal, the subscription,
regions, VM sizes, platform images, and the seed presets.

Presets (``reset(preset)``):

* ``default``: the subscription exists and holds nothing.
* ``mastermind``: two machines as Waldur Mastermind created them before the
  site-agent migration, each in its own ``group-<4 hex>-<vm>`` group with
  ``net<vm>``/``subnet<vm>``/``pubip<vm>``/``nic<vm>``, OS disk and NIC with
  Azure's default delete option (``Detach``): ``web`` (running, NSG ``NSGweb``)
  and ``db`` (deallocated, no NSG). Their ARM ids are ``MASTERMIND_VM_IDS``.
"""

from __future__ import annotations

from dataclasses import dataclass

SUBSCRIPTION_ID = "5ab5c71d-0000-4000-a000-000000000001"
TENANT_ID = "7e4a47d0-0000-4000-a000-000000000002"
CLIENT_ID = "c11e47d0-0000-4000-a000-000000000003"
CLIENT_SECRET = "sim-azure-client-secret"
SERVICE_PRINCIPAL_OBJECT_ID = "0b1ec7d0-0000-4000-a000-000000000004"
# Other identities that may sign in (tests/simulators/azure/aad.py): the host's managed identities
# (the system-assigned one and a user-assigned one), the workload identity's federated credential
# (an AKS cluster's OIDC issuer and the service account of the AWX execution pods) and the Azure
# CLI's signed-in user. The App Service identity endpoint wants IDENTITY_HEADER.
SYSTEM_IDENTITY_OBJECT_ID = "5a5e47d0-0000-4000-a000-000000000005"
USER_IDENTITY_CLIENT_ID = "05e47d00-0000-4000-a000-000000000006"
USER_IDENTITY_OBJECT_ID = "05e47d00-0000-4000-a000-000000000007"
IDENTITY_HEADER = "sim-app-service-identity-header"
FEDERATED_ISSUER = "https://oidc.simulator.invalid/7e4a47d0/"
FEDERATED_SUBJECT = "system:serviceaccount:awx:awx-ee"
CLI_USER = "operator@simulator.invalid"
CLI_USER_OBJECT_ID = "c1105e40-0000-4000-a000-000000000008"
SUBSCRIPTION_NAME = "Waldur simulator subscription"

DEFAULT_LOCATION = "westeurope"
DEFAULT_IMAGE = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
DEFAULT_SIZE = "Standard_B1s"

# A real-looking (but throw-away) RSA public key for seeded machines.
SEED_SSH_PUBLIC_KEY = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCeClRAk2ipUs/l5voIsDC5q9RI+YSRd1Bvd/O+axgY4WiBzG+4FwJWZm/"
    "mLLe5DoOdHQwmU2FrKXZSW4w2sYE70KeWnrFViCOX5MTVvJgPE8ClugNl8RWth/tU849DvM9sT7vFgfVSHcAS2yDRyDlueii"
    "+8nF2ym8XWAPltFVCyLHRsyBp5YPqK8JFYIa1eybKsY3hEAxRCA+/7bq8et+Gj3coOsuRmrehav7rE6N12Pb80I6ofa6SM5XN"
    "Yq4Xk0iYNx7R3kdz0Jj9XgZYWjAHjJmT0gTRoOnt6upOuxK7xI/ykWrllgpXrCPu3Ymz+c+ujaqcxDopnAl2lmf69/J1 "
    "seed@simulator"
)

LOCATIONS = {
    "westeurope": "West Europe",
    "northeurope": "North Europe",
    "eastus": "East US",
    "uksouth": "UK South",
    "swedencentral": "Sweden Central",
}


@dataclass(frozen=True)
class VmSize:
    name: str
    cores: int
    memory_mb: int
    resource_disk_mb: int
    max_data_disks: int
    family: str
    premium_io: bool = True
    os_disk_mb: int = 1047552  # the maximum OS disk size, the same for every size

    def as_vm_size(self) -> dict:
        """The ``vmSizes`` list entry."""
        return {
            "name": self.name,
            "numberOfCores": self.cores,
            "osDiskSizeInMB": self.os_disk_mb,
            "resourceDiskSizeInMB": self.resource_disk_mb,
            "memoryInMB": self.memory_mb,
            "maxDataDiskCount": self.max_data_disks,
        }

    def capabilities(self) -> list[dict]:
        """``resourceSkus`` capabilities: every value is a string, as ARM sends them."""
        memory_gb = self.memory_mb / 1024
        pairs = [
            ("MaxResourceVolumeMB", self.resource_disk_mb),
            ("OSVhdSizeMB", self.os_disk_mb),
            ("vCPUs", self.cores),
            ("MemoryPreservingMaintenanceSupported", "True"),
            ("HyperVGenerations", "V1,V2"),
            ("MemoryGB", int(memory_gb) if memory_gb.is_integer() else memory_gb),
            ("MaxDataDiskCount", self.max_data_disks),
            ("CpuArchitectureType", "x64"),
            ("LowPriorityCapable", "True"),
            ("PremiumIO", "True" if self.premium_io else "False"),
            ("VMDeploymentTypes", "IaaS"),
            ("vCPUsAvailable", self.cores),
            ("vCPUsPerCore", 1 if self.cores == 1 else 2),
            ("EphemeralOSDiskSupported", "False" if self.resource_disk_mb == 0 else "True"),
            ("EncryptionAtHostSupported", "True"),
            ("AcceleratedNetworkingEnabled", "False" if self.family == "standardBSFamily" else "True"),
            ("RdmaEnabled", "False"),
            ("MaxNetworkInterfaces", 2),
        ]
        return [{"name": name, "value": str(value)} for name, value in pairs]


VM_SIZES = {size.name.lower(): size for size in [
    VmSize("Standard_B1s", 1, 1024, 4096, 2, "standardBSFamily"),
    VmSize("Standard_B1ms", 1, 2048, 4096, 2, "standardBSFamily"),
    VmSize("Standard_B2s", 2, 4096, 8192, 4, "standardBSFamily"),
    VmSize("Standard_B2ms", 2, 8192, 16384, 4, "standardBSFamily"),
    VmSize("Standard_D2s_v3", 2, 8192, 16384, 4, "standardDSv3Family"),
    VmSize("Standard_D4s_v3", 4, 16384, 32768, 8, "standardDSv3Family"),
    VmSize("Standard_D2s_v5", 2, 8192, 0, 4, "standardDSv5Family"),  # no temporary disk
    VmSize("Standard_E2s_v3", 2, 16384, 32768, 4, "standardESv3Family"),
    VmSize("Standard_F2s_v2", 2, 4096, 16384, 4, "standardFSv2Family"),
    VmSize("Standard_A1_v2", 1, 2048, 10240, 2, "standardAv2Family", premium_io=False),
]}

# Sizes a region does not offer (everything else is offered everywhere).
UNAVAILABLE_SIZES = {
    "northeurope": {"standard_d2s_v5", "standard_e2s_v3"},
    "swedencentral": {"standard_a1_v2"},
}


def sizes_in(location: str) -> list[VmSize]:
    missing = UNAVAILABLE_SIZES.get(location, set())
    return [size for key, size in VM_SIZES.items() if key not in missing]


# vCPU quotas (Usage - List, Microsoft.Compute/locations/{location}/usages). The family of each size
# above is the one ARM's Resource Skus give it (``family`` of the virtualMachines SKU, e.g. Standard_B2s
# -> standardBSFamily, Standard_D2s_v3 -> standardDSv3Family, Standard_A1_v2 -> standardAv2Family, as
# ``az vm list-skus --location westeurope --size <size>`` shows them); the usages name each family's quota
# by it, and ``cores`` is the total regional vCPUs. A new pay-as-you-go subscription starts far lower
# (10 to 350 vCPUs a region); the simulator's default lets the bench build thousands of machines, and
# the option ``vcpu_quotas`` sets real-sized ones.
REGIONAL_QUOTA = "cores"
DEFAULT_VCPU_QUOTA = 100_000
# The other quotas ARM lists beside the vCPUs (name, localized name, limit), counted as the simulator can.
OTHER_QUOTAS = (("availabilitySets", "Availability Sets", 2500),
                ("virtualMachines", "Virtual Machines", 25000),
                ("virtualMachineScaleSets", "Virtual Machine Scale Sets", 2500))


def families() -> list[str]:
    """Every VM family of the sizes, in the order of the sizes."""
    return list(dict.fromkeys(size.family for size in VM_SIZES.values()))


def family_display(family: str) -> str:
    """ARM's localized name of a family's quota: ``standardBSFamily`` -> ``Standard BS Family vCPUs``."""
    core = family[len("standard"):] if family.startswith("standard") else family
    core = core[:-len("Family")] if core.endswith("Family") else core
    return f"Standard {core} Family vCPUs"


@dataclass(frozen=True)
class PlatformImage:
    publisher: str
    offer: str
    sku: str
    versions: tuple
    os_type: str = "Linux"
    disk_gb: int = 30
    os_name: str = "ubuntu"
    os_version: str = "22.04"
    generation: str = "V2"

    @property
    def latest(self) -> str:
        return self.versions[-1]


IMAGES = {(image.publisher.lower(), image.offer.lower(), image.sku.lower()): image for image in [
    PlatformImage("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts",
                  ("22.04.202409110", "22.04.202410020"), generation="V1"),
    PlatformImage("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2",
                  ("22.04.202409110", "22.04.202410020")),
    PlatformImage("Canonical", "0001-com-ubuntu-server-focal", "20_04-lts-gen2",
                  ("20.04.202405130",), os_version="20.04"),
    PlatformImage("Canonical", "ubuntu-24_04-lts", "server",
                  ("24.04.202409120", "24.04.202410010"), os_version="24.04"),
    PlatformImage("Canonical", "ubuntu-24_04-lts", "server-gen1",
                  ("24.04.202410010",), os_version="24.04", generation="V1"),
    PlatformImage("Debian", "debian-12", "12", ("0.20240901.1857",),
                  os_name="debian", os_version="12", generation="V1"),
    PlatformImage("Debian", "debian-12", "12-gen2", ("0.20240901.1857",),
                  os_name="debian", os_version="12"),
    PlatformImage("RedHat", "RHEL", "9-lvm-gen2", ("9.4.2024060415",), disk_gb=64,
                  os_name="redhat", os_version="9.4"),
    PlatformImage("MicrosoftWindowsServer", "WindowsServer", "2022-datacenter-azure-edition",
                  ("20348.2700.240906",), os_type="Windows", disk_gb=127,
                  os_name="Windows Server 2022 Datacenter Azure Edition",
                  os_version="Microsoft Windows NT 10.0.20348.0"),
]}

# Linux admin user names Azure refuses.
DISALLOWED_ADMIN_USERNAMES = frozenset({
    "administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1",
    "123", "a", "actuser", "adm", "admin2", "aspnet", "backup", "console", "david", "guest", "john",
    "owner", "root", "server", "sql", "support", "support_388945a0", "sys", "test2", "test3",
    "user4", "user5",
})

# (name, resource group, power state, NSG name) of the ``mastermind`` preset.
MASTERMIND_VMS = [
    ("web", "group-1a2b-web", "running", "NSGweb"),
    ("db", "group-3c4d-db", "deallocated", None),
]
MASTERMIND_VM_IDS = [
    f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{name}"
    for name, group, _power, _nsg in MASTERMIND_VMS
]

PRESETS = ("default", "mastermind")
