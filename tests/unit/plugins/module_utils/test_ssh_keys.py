"""The one OpenSSH key parser and MD5 fingerprint (core/ssh_keys.py) Waldur and DigitalOcean code share."""

import shutil
import subprocess

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.core.ssh_keys import (
    public_key_blob,
    ssh_key_fingerprint,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.keys import ssh_fingerprint
from tests.simulators.digitalocean import presets

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBEuTwxJTYm/Nsv8VbRz/qmlHdTN0o05Qz481oLSKeBv alice@example"
HAS_SSH_KEYGEN = shutil.which("ssh-keygen") is not None


def keygen_md5(path):
    output = subprocess.run(["ssh-keygen", "-l", "-E", "md5", "-f", str(path)],
                            capture_output=True, text=True, check=True).stdout
    return output.split()[1][len("MD5:"):]


def test_md5_fingerprint_matches_ssh_keygen(tmp_path):
    key_file = tmp_path / "key.pub"
    key_file.write_text(ED25519 + "\n")
    assert ssh_key_fingerprint(ED25519) == "ef:7b:d6:29:86:de:96:8e:a1:43:d2:80:9a:d7:e4:02"
    if HAS_SSH_KEYGEN:
        assert ssh_key_fingerprint(ED25519) == keygen_md5(key_file)


@pytest.mark.skipif(not HAS_SSH_KEYGEN, reason="ssh-keygen is not installed")
@pytest.mark.parametrize("key_type", ["ed25519", "rsa", "ecdsa"])
def test_fresh_keys_of_every_type_match_ssh_keygen_with_and_without_comment(tmp_path, key_type):
    private = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", "bob@host", "-f", str(private)],
                   check=True)
    line = (tmp_path / "id.pub").read_text().strip()
    expected = keygen_md5(tmp_path / "id.pub")
    without_comment = " ".join(line.split()[:2])
    assert ssh_key_fingerprint(line) == expected
    assert ssh_key_fingerprint(without_comment) == expected
    assert ssh_key_fingerprint('no-pty,command="x" ' + line) == expected  # authorized_keys options
    assert public_key_blob(line)[0] == line.split()[0]


def test_the_digitalocean_presets_keep_their_fingerprints():
    assert ssh_key_fingerprint(presets.OPS_PUBLIC_KEY) == presets.OPS_KEY_FINGERPRINT
    assert ssh_key_fingerprint(presets.ADMIN_PUBLIC_KEY) == presets.ADMIN_KEY_FINGERPRINT
    # the DigitalOcean client's name for it is the same function
    assert ssh_fingerprint(presets.OPS_PUBLIC_KEY) == presets.OPS_KEY_FINGERPRINT


@pytest.mark.parametrize("garbage", [
    None, "", "not a key", "hello", "ssh-ed25519", "ssh-ed25519 not*base64", "ssh-rsa AAAA",
    "ssh-rsa " + ED25519.split()[1],  # an ed25519 blob under the wrong type
    "foo " + ED25519.split()[1],  # no key type at all
    "ssh-ed25519 " + ED25519.split()[1][:-1],  # truncated base64
])
def test_anything_that_is_not_a_public_key_has_no_fingerprint(garbage):
    assert ssh_key_fingerprint(garbage) is None
    assert public_key_blob(garbage) is None
