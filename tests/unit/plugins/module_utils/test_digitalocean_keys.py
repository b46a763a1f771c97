"""keys.AccountKeys over a fake client: one listing per client (i.e. per pass), created
keys join the cache, and a key taken meanwhile (422) is re-read instead of failing."""

from __future__ import annotations

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.keys import AccountKeys, ssh_fingerprint
from tests.simulators.digitalocean import presets

OPS = {"id": presets.OPS_KEY_ID, "name": "ops", "fingerprint": presets.OPS_KEY_FINGERPRINT,
       "public_key": presets.OPS_PUBLIC_KEY}


class FakeKey:
    def __init__(self, client, **attributes):
        self.client = client
        self.attributes = attributes
        self.last_data = None
        self.id = None

    def create(self):
        self.client.writes.append(("create", self.attributes["name"]))
        if self.client.create_error is not None:
            raise self.client.create_error
        self.id = 900 + len(self.client.writes)
        self.last_data = {"ssh_key": dict(self.attributes, id=self.id,
                                          fingerprint=ssh_fingerprint(self.attributes["public_key"]))}


class FakeClient:
    def __init__(self, keys=(OPS,)):
        self.account = [dict(key) for key in keys]
        self.listings = 0
        self.writes = []
        self.create_error = None

    def listing(self, path, key):
        assert (path, key) == ("account/keys/", "ssh_keys")
        self.listings += 1
        return [dict(k) for k in self.account]

    def build(self, cls, **attributes):
        return FakeKey(self, **attributes)


def test_many_resolves_list_the_account_once():
    client = FakeClient()
    keys = AccountKeys(client)
    for _droplet in range(5):
        assert keys.resolve([str(presets.OPS_KEY_ID), presets.OPS_KEY_FINGERPRINT.upper()], "waldur-x") == (
            [presets.OPS_KEY_ID, presets.OPS_KEY_ID], [])
    assert client.listings == 1 and client.writes == []
    assert AccountKeys(client).listed() == [OPS] and client.listings == 2  # a new client lists again


def test_a_created_key_joins_the_cache():
    client = FakeClient()
    keys = AccountKeys(client)
    first = keys.resolve([presets.NEW_PUBLIC_KEY], "waldur-aaaaaaaa")
    second = keys.resolve([presets.NEW_PUBLIC_KEY], "waldur-bbbbbbbb")
    assert first == ([901], ["added SSH key %s as waldur-aaaaaaaa" % presets.NEW_KEY_FINGERPRINT])
    assert second == ([901], [])
    assert client.writes == [("create", "waldur-aaaaaaaa")] and client.listings == 1


def test_a_key_taken_meanwhile_is_re_read_after_a_422():
    client = FakeClient()
    keys = AccountKeys(client)
    keys.listed()
    client.account.append({"id": 77, "name": "someone", "fingerprint": presets.NEW_KEY_FINGERPRINT})
    client.create_error = DigitalOceanError("in use", status=422)
    assert keys.resolve([presets.NEW_PUBLIC_KEY], "waldur-aaaaaaaa") == ([77], [])
    assert client.listings == 2


def test_other_create_failures_propagate_and_check_mode_writes_nothing():
    client = FakeClient()
    assert AccountKeys(client).resolve([presets.NEW_PUBLIC_KEY], "waldur-a", check_mode=True) == (
        [], ["would add SSH key %s as waldur-a" % presets.NEW_KEY_FINGERPRINT])
    assert client.writes == []
    client.create_error = DigitalOceanError("forbidden", status=403)
    with pytest.raises(DigitalOceanError, match="forbidden"):
        AccountKeys(client).resolve([presets.NEW_PUBLIC_KEY], "waldur-a")
