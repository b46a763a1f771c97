# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Find and mask secrets before anything is printed or sent anywhere.

Two layers, because neither alone is enough:

* by key name: the value of any key that names a secret (``waldur_api_token``,
  ``client_secret``, ``token``, ``password``, ``sentry_dsn``, ...) is replaced
  by :data:`MASK`, wherever it sits in nested data;
* by value: the secret values known from the site agent configuration (and
  from well-known environment variables) are replaced inside every string, so
  a token that ended up in a message or a URL is masked too.

Secret query parameters of URLs (``?token=...``, ``api_key=...``), the
password of ``scheme://user:password@host`` and ``Authorization`` header values
are masked in every string as well.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


MASK = "********"
# Shorter values are not replaced inside text: masking every "abc" would garble
# the output while hiding nothing a key-name match does not already hide.
MIN_SECRET_LENGTH = 4
# Environment variables the collection reads secrets from (env fallbacks); each cloud's own are
# named by the backend registry (plugin_utils/backends), which callers pass as ``more``.
SECRET_ENVIRONMENT_VARIABLES = ("WALDUR_API_TOKEN", "SENTRY_DSN", "WALDUR_SITE_AGENT_SENTRY_DSN")

_SECRET_KEY = re.compile(
    r"token|secret|passw|passphrase|api[_-]?key|private[_-]?key|credential|authorization|(^|[_-])dsn$"
    r"|^x509_certificate$",
    re.IGNORECASE)
# The upstream agent's list of secret query parameters, plus password-like ones.
_SECRET_QUERY = re.compile(
    r"([?&;](?:secretKey|secret_key|secret-key|api_key|apiKey|api-key|token|access_token|password|"
    r"client_secret|sig|signature)=)[^&#\s\"']+",
    re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)[^@/\s]+(@)")
# "key": "value" pairs of secret-named keys inside text (a dict or JSON rendered into a message).
_QUOTED_PAIR = re.compile(
    r"""(["'][\w.-]*(?:token|secret|passw|api[_-]?key|private[_-]?key|dsn)[\w.-]*["']\s*:\s*)(["'])(?:(?!\2).)+\2""",
    re.IGNORECASE)
_AUTHORIZATION = re.compile(r"(authorization[\"']?\s*[:=]\s*[\"']?(?:token|bearer|basic)?\s*)[^\s\"',}]+",
                            re.IGNORECASE)


def is_secret_key(name):
    """True when a mapping key names a secret (``client_secret``, ``X-Api-Key``, ...)."""
    return isinstance(name, str) and bool(_SECRET_KEY.search(name))


def _text(value):
    """Plain text of a scalar; vault-encrypted values decrypt on ``str()``."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (int, float)):
        return None
    try:
        return str(value)
    except Exception:  # an undecryptable vault value cannot leak either
        return None


def collect_secret_values(data, extra_keys=(), values=None):
    """The set of secret strings in ``data``: every string under a secret-named key
    (or a key in ``extra_keys``), at any depth. Strings shorter than
    :data:`MIN_SECRET_LENGTH` are left out (see there)."""
    found = set() if values is None else values
    extra_keys = frozenset(extra_keys)

    def add_all(value):
        if isinstance(value, dict):
            for item in value.values():
                add_all(item)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                add_all(item)
        else:
            text = _text(value)
            if text is not None and len(text.strip()) >= MIN_SECRET_LENGTH:
                found.add(text.strip())

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if is_secret_key(key) or key in extra_keys:
                    add_all(item)
                else:
                    walk(item)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                walk(item)

    walk(data)
    return found


def secret_values_from_environment(environ, more=()):
    """Secret values from the environment variables the modules fall back on (and ``more``)."""
    values = set()
    for name in SECRET_ENVIRONMENT_VARIABLES + tuple(more):
        value = (environ.get(name) or "").strip()
        if len(value) >= MIN_SECRET_LENGTH:
            values.add(value)
    return values


def redact_text(text, secret_values=()):
    """``text`` with known secret values, secret URL query parameters, URL passwords,
    Authorization header values and quoted ``"password": "..."`` pairs replaced by
    :data:`MASK`."""
    if not isinstance(text, str) or not text:
        return text
    text = str(text)
    # Longest first, so a secret that contains another one is masked whole.
    for secret in sorted(secret_values, key=len, reverse=True):
        if secret and secret in text:
            text = text.replace(secret, MASK)
    text = _SECRET_QUERY.sub(lambda match: match.group(1) + MASK, text)
    text = _URL_PASSWORD.sub(lambda match: match.group(1) + MASK + match.group(2), text)
    text = _AUTHORIZATION.sub(lambda match: match.group(1) + MASK, text)
    text = _QUOTED_PAIR.sub(lambda match: match.group(1) + match.group(2) + MASK + match.group(2), text)
    return text


def redact(data, secret_values=()):
    """A copy of ``data`` (mappings, lists, scalars) that is safe to print: values of
    secret-named keys become :data:`MASK` (empty ones stay empty, so "not set" is
    still visible) and every string goes through :func:`redact_text`."""
    if isinstance(data, dict):
        cleaned = {}
        for key, value in data.items():
            if is_secret_key(key) and value not in (None, "", [], {}, False):
                cleaned[key] = MASK
            else:
                cleaned[key] = redact(value, secret_values)
        return cleaned
    if isinstance(data, (list, tuple, set, frozenset)):
        return [redact(item, secret_values) for item in data]
    if isinstance(data, str):
        return redact_text(data, secret_values)
    return data


def secret_text_problem(value):
    """Why a secret cannot be used as written, or None: leading or trailing whitespace (the
    trailing newline ``echo token > file`` or a YAML ``|`` block leaves) or a control character
    inside. The words never quote the value. Such a secret is refused, not stripped: HTTP
    libraries put it into a header and quote it whole in their error."""
    if not isinstance(value, str) or not value:
        return None
    kept = value.rstrip()
    if kept != value:
        tail = value[len(kept):]
        what = {"\n": "a trailing newline", "\r\n": "a trailing carriage return and newline",
                "\r": "a trailing carriage return"}.get(tail, "trailing whitespace")
        return "has %s; remove the whitespace" % what
    if value.lstrip() != value:
        return "has leading whitespace; remove the whitespace"
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        return "has a control character inside (a line break or tab?); remove it"
    return None


def error_message_without_source(exc):
    """An AnsibleError's own message, without the file excerpt. Before ansible-core 2.19
    ``message`` appends the offending line of the file read (a line that may hold a token);
    ``_message`` is the message alone."""
    own = getattr(exc, "_message", None)
    return own if isinstance(own, str) and own else getattr(exc, "message", str(exc))
