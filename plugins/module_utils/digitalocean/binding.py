# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The python-digitalocean binding: the only file that imports ``digitalocean``.

It keeps the library's object model (``Droplet.create``, ``Droplet.shutdown``,
``Action.load``, ``SSHKey.create`` ...) but sends every HTTP request of the objects
:func:`build` makes through the owning client's ``send`` (session, endpoint,
pacing, retries). It relies on one private name of the library,
``BaseAPI._BaseAPI__perform_request(url, type, params)``;
tests/unit/plugins/module_utils/test_digitalocean_binding.py pins it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import traceback

try:
    import digitalocean
    from digitalocean import baseapi as _do_baseapi
except ImportError:
    HAS_DIGITALOCEAN = False
    DIGITALOCEAN_IMPORT_ERROR = traceback.format_exc()
    LIBRARY_VERSION = None
else:
    HAS_DIGITALOCEAN = True
    DIGITALOCEAN_IMPORT_ERROR = None
    LIBRARY_VERSION = getattr(digitalocean, "__version__", "?")

if HAS_DIGITALOCEAN:
    class _ClientBound(object):
        """Mixin for python-digitalocean classes: send through the owning client.

        ``BaseAPI.get_data`` calls ``self.__perform_request`` (name-mangled to
        ``_BaseAPI__perform_request``); defining it here puts every request of the
        object, pagination included, on the client's session, pacing and retries.
        """

        _do_client = None
        _retry_writes = False
        last_data = None

        def _BaseAPI__perform_request(self, url, type=_do_baseapi.GET, params=None):
            return self._do_client.send(type, url, params, retry_writes=self._retry_writes)

        def get_data(self, *args, **kwargs):
            self.last_data = super(_ClientBound, self).get_data(*args, **kwargs)
            return self.last_data

    class BoundDroplet(_ClientBound, digitalocean.Droplet):
        pass

    class BoundAction(_ClientBound, digitalocean.Action):
        pass

    class BoundSSHKey(_ClientBound, digitalocean.SSHKey):
        pass

    class BoundListing(_ClientBound, _do_baseapi.BaseAPI):
        """Plain GETs (listings with the library's pagination)."""
else:
    # importable without the library: the client refuses to start (missing_required_lib)
    BoundDroplet = BoundAction = BoundSSHKey = BoundListing = None


def build(client, cls, **attributes):
    """A python-digitalocean object of ``cls`` bound to ``client`` (its endpoint and
    session; no token: the session's header carries it)."""
    obj = cls(token="", end_point=client.endpoint, _session=client.session, **attributes)
    obj._do_client = client
    return obj
