# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""SSH keys for droplets: what an ``ssh_keys`` entry is, and the account's keys
(listed once per client, i.e. once per pass; public keys added when missing)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import threading

from ansible_collections.waldur.site_agent.plugins.module_utils.core.ssh_keys import ssh_key_fingerprint
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.binding import BoundSSHKey
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError, DigitalOceanNotFound

_FINGERPRINT = re.compile(r"^([0-9a-f]{2}:){15}[0-9a-f]{2}$")


def ssh_fingerprint(public_key):
    """DigitalOcean's fingerprint of an OpenSSH public key (MD5 of the key blob, colon hex),
    or None if ``public_key`` is not one (the rule of ``core/ssh_keys``)."""
    return ssh_key_fingerprint(public_key)


def classify_ssh_key(entry):
    """``("id", int)``, ``("fingerprint", str)``, ``("public_key", (fingerprint, key))`` or
    ``(None, None)`` for one entry of an item's ``ssh_keys``."""
    if isinstance(entry, bool):
        return None, None
    if isinstance(entry, int):
        return "id", entry
    text = str(entry).strip()
    if text.isdigit():
        return "id", int(text)
    if _FINGERPRINT.match(text.lower()):
        return "fingerprint", text.lower()
    fingerprint = ssh_fingerprint(text)
    if fingerprint:
        return "public_key", (fingerprint, text)
    return None, None


class AccountKeys:
    """The SSH keys of the client's account, cached for the client's life. Thread-safe:
    one creation per public key even when several droplets of a pass share it."""

    def __init__(self, client):
        self.client = client
        self._keys = None
        self._lock = threading.RLock()

    def listed(self):
        """The account's SSH keys, listed once and cached."""
        with self._lock:
            if self._keys is None:
                self._keys = self.client.listing("account/keys/", "ssh_keys")
            return list(self._keys)

    def _cached(self, field, value):
        for key in self.listed():
            if str(key.get(field) or "").lower() == str(value).lower():
                return key
        return None

    def _load(self, kind, value):
        """One key by id or fingerprint (a key added since the listing), or None."""
        key = self.client.build(BoundSSHKey, **{kind: value})
        try:
            key.load()
        except DigitalOceanNotFound:
            return None
        data = (key.last_data or {}).get("ssh_key")
        with self._lock:
            self._keys = (self._keys or []) + [data]
        return data

    def resolve(self, entries, key_name, check_mode=False):
        """Key ids for a droplet from ids, fingerprints or public keys.

        Ids and fingerprints must exist in the account; a public key is found by
        its fingerprint (never by name) or created as ``key_name``. Returns
        ``(ids, notes)``; raises ValueError for an entry that is none of these or
        a key that does not exist. In check mode a missing public key is not
        created and has no id.
        """
        ids, notes = [], []
        for entry in entries or []:
            kind, value = classify_ssh_key(entry)
            if kind is None:
                raise ValueError("ssh_keys entry %r is neither a key id, an MD5 fingerprint nor an "
                                 "OpenSSH public key" % (_shorten(entry),))
            if kind in ("id", "fingerprint"):
                key = self._cached(kind, value) or self._load(kind, value)
                if key is None:
                    raise ValueError("SSH key %s is not in the DigitalOcean account" % value)
                ids.append(key["id"])
                continue
            fingerprint, public_key = value
            with self._lock:  # one creation per key even when several droplets share it
                key = self._cached("fingerprint", fingerprint)
                if key is None and check_mode:
                    notes.append("would add SSH key %s as %s" % (fingerprint, key_name))
                    continue
                if key is None:
                    key, created = self._create(key_name, public_key, fingerprint)
                    if created:
                        notes.append("added SSH key %s as %s" % (fingerprint, key_name))
            ids.append(key["id"])
        return ids, notes

    def _create(self, name, public_key, fingerprint):
        """``(key, created)``: the new key, or the one with this fingerprint that appeared meanwhile."""
        creator = self.client.build(BoundSSHKey, name=name, public_key=public_key)
        try:
            creator.create()
        except DigitalOceanError as exc:
            # 422 "already in use": created since the listing (or by a lost earlier answer)
            if exc.status != 422 and not exc.ambiguous:
                raise
            with self._lock:
                self._keys = None
            key = self._cached("fingerprint", fingerprint)
            if key is None:
                raise
            return key, False
        key = (creator.last_data or {}).get("ssh_key") or {
            "id": creator.id, "name": name, "fingerprint": fingerprint, "public_key": public_key}
        self._keys.append(key)
        return key, True


def _shorten(value, limit=40):
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."
