# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""OpenSSH public keys: the one parser and the MD5 fingerprint Waldur and DigitalOcean show."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import re
import struct

_KEY_TYPE = re.compile(r"^(ssh-[a-z0-9-]+|ecdsa-sha2-[a-z0-9-]+|sk-[a-z0-9@.-]+)$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=]+$")


def public_key_blob(public_key):
    """``(key_type, blob bytes)`` of an OpenSSH public key line, or None if it is not one.

    Options before the key type (authorized_keys style) and a trailing comment are allowed.
    The blob must name the same key type as the line: a blob pasted under the wrong type,
    or base64 that is not a key, is refused as the SSH services themselves refuse it.
    """
    parts = str(public_key or "").split()
    for index, part in enumerate(parts):
        if not _KEY_TYPE.match(part):
            continue
        if index + 1 >= len(parts) or not _BASE64.match(parts[index + 1]):
            return None
        try:
            blob = base64.b64decode(parts[index + 1].encode("ascii"), validate=True)
        except (binascii.Error, ValueError):
            return None
        return (part, blob) if _blob_type(blob) == part else None
    return None


def _blob_type(blob):
    """The key type a key blob starts with (SSH wire format: uint32 length, then the name)."""
    if len(blob) < 4:
        return None
    (length,) = struct.unpack(">I", blob[:4])
    if length > len(blob) - 4:
        return None
    try:
        return blob[4:4 + length].decode("ascii")
    except UnicodeDecodeError:
        return None


def ssh_key_fingerprint(public_key):
    """OpenSSH MD5 fingerprint (``aa:bb:...``, as ``ssh-keygen -E md5`` and DigitalOcean show
    it) of a public key line; None if it is not one."""
    parsed = public_key_blob(public_key)
    if parsed is None:
        return None
    try:
        digest = hashlib.md5(parsed[1], usedforsecurity=False).hexdigest()  # a key label, not security
    except TypeError:  # Python < 3.9
        digest = hashlib.md5(parsed[1]).hexdigest()  # nosec - a key fingerprint, not security
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))
