"""Seed data of the Waldur simulator: the constants of docs/development.md and the presets.

``default``: one provider organisation (service provider, two ``Marketplace.Slurm``
offerings, one for DigitalOcean droplets and one for Azure VMs, each with components
cpu/ram/disk and one plan), one consumer organisation with a project and a team, 12
service-provider SSH keys, three users (provider owner, consumer owner, staff), and one
Create order per offering waiting in ``pending-provider`` (``DO_ORDER_UUID``,
``AZURE_ORDER_UUID``) so a fresh simulator has work for an order pass.

``empty``: the same organisations, offerings, plans, keys and users, but no orders,
resources or usages.
"""

from __future__ import annotations

import base64
import hashlib

PRESETS = ("default", "empty")

PROVIDER_TOKEN = "sim-provider-token"
CONSUMER_TOKEN = "sim-consumer-token"
STAFF_TOKEN = "sim-staff-token"

DO_OFFERING_UUID = "d0000000000000000000000000000001"
AZURE_OFFERING_UUID = "a0000000000000000000000000000001"
DO_PLAN_UUID = "d0000000000000000000000000000002"
AZURE_PLAN_UUID = "a0000000000000000000000000000002"
PROJECT_UUID = "c0000000000000000000000000000001"
CONSUMER_CUSTOMER_UUID = "c0000000000000000000000000000002"
PROVIDER_CUSTOMER_UUID = "b0000000000000000000000000000001"
SERVICE_PROVIDER_UUID = "b0000000000000000000000000000002"
CATEGORY_UUID = "b0000000000000000000000000000003"

PROVIDER_USER_UUID = "f0000000000000000000000000000001"
CONSUMER_USER_UUID = "f0000000000000000000000000000002"
STAFF_USER_UUID = "f0000000000000000000000000000003"
TEAM_ADMIN_USER_UUID = "f0000000000000000000000000000004"
TEAM_MEMBER_USER_UUID = "f0000000000000000000000000000005"

# The Create orders of the default preset (and the resources they create).
DO_ORDER_UUID = "d0000000000000000000000000000011"
DO_RESOURCE_UUID = "d0000000000000000000000000000021"
AZURE_ORDER_UUID = "a0000000000000000000000000000011"
AZURE_RESOURCE_UUID = "a0000000000000000000000000000021"

COMPONENTS = (
    # type, name, measured unit
    ("cpu", "CPU cores", "Cores"),
    ("ram", "Memory", "MiB"),
    ("disk", "Disk", "MiB"),
)

DO_PLAN_QUOTAS = {"cpu": 1, "ram": 1024, "disk": 25600}
AZURE_PLAN_QUOTAS = {"cpu": 2, "ram": 4096, "disk": 30720}

# Monthly price per unit of each component in the offering's plan (a decimal string).
DO_PLAN_PRICES = {"cpu": "4.00", "ram": "0.005", "disk": "0.0001"}
AZURE_PLAN_PRICES = {"cpu": "7.50", "ram": "0.004", "disk": "0.0002"}

OFFERINGS = (
    # uuid, name, plan uuid, plan name, plan quotas, plan prices, component uuid prefix
    (DO_OFFERING_UUID, "DigitalOcean droplets", DO_PLAN_UUID, "Droplet s-1vcpu-1gb",
     DO_PLAN_QUOTAS, DO_PLAN_PRICES, "d00000000000000000000000000001"),
    (AZURE_OFFERING_UUID, "Azure virtual machines", AZURE_PLAN_UUID, "VM Standard_B2s",
     AZURE_PLAN_QUOTAS, AZURE_PLAN_PRICES, "a00000000000000000000000000001"),
)

USERS = (
    # uuid, username, first name, last name, email, token, staff, owner of customer
    (PROVIDER_USER_UUID, "provider-agent", "Site", "Agent", "agent@provider.example.com",
     PROVIDER_TOKEN, False, PROVIDER_CUSTOMER_UUID),
    (CONSUMER_USER_UUID, "consumer-owner", "Carol", "Consumer", "carol@consumer.example.com",
     CONSUMER_TOKEN, False, CONSUMER_CUSTOMER_UUID),
    (STAFF_USER_UUID, "staff", "Sam", "Staff", "staff@waldur.example.com",
     STAFF_TOKEN, True, None),
    (TEAM_ADMIN_USER_UUID, "alice", "Alice", "Admin", "alice@consumer.example.com",
     None, False, None),
    (TEAM_MEMBER_USER_UUID, "bob", "Bob", "Member", "bob@consumer.example.com",
     None, False, None),
)

PROJECT_TEAM = (
    # user uuid, project role
    (TEAM_ADMIN_USER_UUID, "admin"),
    (TEAM_MEMBER_USER_UUID, "member"),
)

_KEYS = (
    ("ops-alice", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBEuTwxJTYm/Nsv8VbRz/qmlHdTN0o05Qz481oLSKeBv"),
    ("ops-bob", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDFrNNPr8XzyKsHAuror7psgwq7OScRJn/9TImEMt7EW"),
    ("ops-carol", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINnyaq5+nJE1D5loGveH7AlnvThqlMSNDP9bGi/raGaq"),
    ("ops-dave", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDzn895CN+8vAeK+qcliWh61QTCCHGX6kAt0KoNf/OHm"),
    ("ci-deploy", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINx6vH6lG7GsijDJ/HvJiK+aeGC66TFx8M98IqWlZwLy"),
    ("backup-robot", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKGu5iRDOfJIq5H3p8GCDtAcStN2Y6uEER3SBWCZiR6c"),
    ("monitoring", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDO7Vxhh0jPTitxJNy3Kcb83X9/rcWgHtD4MUTviI77u"),
    ("bastion", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJeZDN1QzaonIMtPEQ0smp3K3zydgN7g+Vno6kQDqaUz"),
    ("legacy-admin", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC9Zq95INsH5QU7h6gnw+aAhT3wvHZ8gV8uBPVP0GXiPv9D"
     "BpccOzyuU7jpDiuIwEFqEm3sUGvnXXnVAr1rGBpCjqPVASjnYuNY+SPvwI79GD/MeoQ97DTx+g5VIxKvL7vMZOi1oTF/a/CXGPn"
     "nnWEe74/42LqWODricvBM0ntSvAOA1za3PB5VTIr1iq9pCDer3Y7OxUzyrpEOnWtD9iQw+NWbUdDKkyQzfkfhO4h6YqjNOQeRya"
     "4TJRitTpHj2PxAwCe7TlzxnSytquEhORuu8YLqoeHQeSCgeZX/gnW+bWSMTO7VuRnt6JLh6GD5D4iXZpC9CY7U6ZGn+PLLIkOD"),
    ("legacy-deploy", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCy/OPWeN08W0mp288LEji4jcl8BoSINVot3bFknkC+9svr"
     "EQqZyy/Mn4NfNMj74I8FnaUCSc5/w98UrMMvAR7fxI4fUmuS4maoH0HExTdMOs5wFEfrUy8JVcONPzSGusbVZgQjjl7kVBSRQBU"
     "pfzokqhC1NrfL7UAKdghmuWXIwcj0So4ARX8Gew/eJOrJaUvobrq//KQAaYuJS4aZzOPuOcNi7TlOL/0VXh7tgKHHUQodPGJydb"
     "uxZuARNwUeXASD+qqZJkqhkBbTisVCKFaiAKJpYVeG/0j6p68wFCDh8t8p4Vs0oWuM3iu7YmAtagmivhsMwcenW9WYzbY1Zret"),
    ("jenkins", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCd1vL4XkMG2Xsdhh8xjv5Nq/K6n1436eZ4hbgEAGHWAlMv7q7czD"
     "WqYw2ut7joqfCjKs/NKx8OQEfC1mo7eyaHt4uIte716p7/chQkHC4Yq6GoxIgORcazZz9zWRv/R8zs5HPit6avFGU3Ci7VSwcqMn"
     "Em8oPA0EXgW36K3paDgLZD01oQjRQcENJseWIS5eXvV2Y51nCxLg2i+zucGMaGy/Pjap+2gIBzvkINiGiSRFFqVikrcbguoWTJ5s"
     "cu/aOL3txu7Ub8nFzNlwzLN6u7s8sgAjFQ3mdjM/BJBN9+LepnNX2i/WVneynVJZJEC7TZOWuBLu4NPCeYuwKf5PMZ"),
    ("ansible-controller", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCyODzyT9gLG5iq7QpMNhUvc1zyi8wCeeSvYMb+VU"
     "wGKr0ss5uC5d8E23W0OpZkYJUlExPKzcxcD+RP8rS3/946vrvyc8Hrd1wiEosJ6+UoMmSkhIl/a47CTKreZAA7eKzdu75EutmqU9S"
     "Lx00ULbb6FIkfe9Y4oYv0o0mTaXHNwef/AZfIJOcV7aRcvmmRYEJ8leJwoSj/yJNA8UNBUqRIMUGScRMTJl/l8yO/qhnG1diGulnl"
     "D9KQuf4Fr4uWl8qZVZLuvCf8ZWblBpcd9Um9L5GThUZnUm/HHxo4W6Odxu2g4ZjmB1NEz1ir7dtx3cf1hQZ4+j+wWw1wJy6Lnv/X"),
)


def key_fingerprints(public_key: str) -> dict:
    """The fingerprints Waldur stores for an OpenSSH public key (MD5 colon-hex,
    ``SHA256:``/``SHA512:`` base64 without padding, as ``ssh-keygen -l`` prints them)."""
    blob = base64.b64decode(public_key.split()[1])
    md5 = hashlib.md5(blob).hexdigest()  # noqa: S324 - a fingerprint, not security
    return {
        "fingerprint_md5": ":".join(md5[i:i + 2] for i in range(0, len(md5), 2)),
        "fingerprint_sha256": "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("="),
        "fingerprint_sha512": "SHA512:" + base64.b64encode(hashlib.sha512(blob).digest()).decode().rstrip("="),
    }


SSH_KEYS = tuple(
    dict(uuid=f"e{index:031x}", name=name, public_key=public_key, type=public_key.split()[0],
         **key_fingerprints(public_key))
    for index, (name, public_key) in enumerate(_KEYS, start=1)
)

# What the default preset's pending Create orders ask for.
DEFAULT_ORDERS = (
    # order uuid, resource uuid, offering, plan, attributes, limits
    (DO_ORDER_UUID, DO_RESOURCE_UUID, DO_OFFERING_UUID, DO_PLAN_UUID,
     {"name": "do-vm-1"}, dict(DO_PLAN_QUOTAS)),
    (AZURE_ORDER_UUID, AZURE_RESOURCE_UUID, AZURE_OFFERING_UUID, AZURE_PLAN_UUID,
     {"name": "azure-vm-1", "ssh_key": SSH_KEYS[0]["uuid"]}, dict(AZURE_PLAN_QUOTAS)),
)
