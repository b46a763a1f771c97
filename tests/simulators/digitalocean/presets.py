"""Constants of the DigitalOcean simulator's presets, for tests and scripts.

Preset ``default``: an account with no droplets, no tags and the two SSH keys in
:data:`PRESET_SSH_KEYS`. Preset ``empty``: no SSH keys either.
"""

# The one API token the simulator accepts (``Authorization: Bearer sim-do-token``).
DO_TOKEN = "sim-do-token"

ACCOUNT_EMAIL = "sim@example.com"
ACCOUNT_UUID = "5c7a4d26-4f0b-4c2e-9d6a-1f3e2b8a9c01"
DROPLET_LIMIT = 100  # the account's droplet_limit unless the option overrides it

# SSH keys on the account in the default preset. Fingerprints are the MD5 of the
# base64-decoded key blob, as DigitalOcean computes them.
OPS_KEY_ID = 512189
OPS_KEY_NAME = "waldur-ops"
OPS_PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFpeY+jZedCmwZIGhqIcRlB1bRyMO/F91s5Iiy9wyv8M "
                  "ops@waldur.example.com")
OPS_KEY_FINGERPRINT = "66:5b:a9:37:5e:97:92:0c:78:f6:5f:9f:4b:66:28:aa"

ADMIN_KEY_ID = 512190
ADMIN_KEY_NAME = "backup admin"
ADMIN_PUBLIC_KEY = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDdMa+RhcKfcup8VcwENRUiTB3R1TQcCk5esax7jQNHs3t+LP1rfWIz"
    "rxmb0Njbn2pV/A8mSc8t+ECNVvGY/w8ZirMr7FlSwnEHT/VKFRMRJVLtaolNrzNbaX/oAJtLqeNvQusCxv56u/un57vv7l"
    "GU8d0Z/LUMsraNLJYjvqxtEgKCdnsA2y40a4NYO0wyOMzUPlPPq1sj5znZsY4hcPt0zDbRp8BELKO0JdhzxbUZd1qKaf0W"
    "YE6AL3+7mx7tGC0AUlrg+yNwS6wprWhW7Q7dDs8Jjr9DXy2ziQ66MmQ7vxGu55en8RcRaNchCfb0g2V5OI7e0+OWzmRTtk"
    "pVm5td admin@waldur.example.com")
ADMIN_KEY_FINGERPRINT = "9f:84:82:69:97:97:eb:74:ab:c1:89:d9:d2:11:b1:67"

PRESET_SSH_KEYS = (
    {"id": OPS_KEY_ID, "name": OPS_KEY_NAME, "public_key": OPS_PUBLIC_KEY,
     "fingerprint": OPS_KEY_FINGERPRINT},
    {"id": ADMIN_KEY_ID, "name": ADMIN_KEY_NAME, "public_key": ADMIN_PUBLIC_KEY,
     "fingerprint": ADMIN_KEY_FINGERPRINT},
)

# A valid key that is NOT on the account: tests upload it (or pass it to a
# droplet create) to exercise "create the key if missing".
NEW_PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMxKJ4LM+fD61AR78Loc7qQriKN2SwigDNO4w+UIZd8g "
                  "user@example.com")
NEW_KEY_FINGERPRINT = "96:d3:88:09:ed:5d:93:09:ab:52:4e:82:6f:cf:e1:63"

# DigitalOcean's documented limits: 5,000 requests per hour, 250 per minute (burst).
HOURLY_REQUEST_LIMIT = 5000
BURST_REQUEST_LIMIT = 250
BURST_WINDOW_SECONDS = 60.0

PRESETS = ("default", "empty")
