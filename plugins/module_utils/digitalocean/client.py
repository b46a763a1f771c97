# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""DigitalOcean API access for the collection: the client the DigitalOcean modules use.

``DigitalOceanClient`` is its transport (``transport``: session, pacing, retries, errors), its
read layer (``reads``) and the writes here: create, delete and the actions of a droplet, and
waiting for an action. Facts, SSH keys and waiting for many droplets live in ``facts``, ``keys``
and ``waiter``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import secret_text_problem
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.binding import (
    DIGITALOCEAN_IMPORT_ERROR,
    HAS_DIGITALOCEAN,
    BoundAction,
    BoundDroplet,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError, DigitalOceanNotFound, DigitalOceanUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import droplet_facts, resource_tags
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.keys import AccountKeys
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.options import (  # pylint: disable=unused-import  # re-exported
    DEFAULT_API_URL,
    ENDPOINT_ENV_VAR,
    TIMEOUT_ENV_VAR,
    digitalocean_argument_spec,
    normalize_endpoint,
    plain_http_warning,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.reads import DropletReads
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.transport import Transport


class DigitalOceanClient(DropletReads, Transport):
    """Everything the DigitalOcean modules ask of the API. Thread-safe."""

    # How often action waits poll: starts fast (simulators, quick actions), settles at 10 s.
    POLL_FIRST = 0.25
    POLL_MAX = 10.0

    def __init__(self, *args, **kwargs):
        """The arguments of ``transport.Transport``."""
        super(DigitalOceanClient, self).__init__(*args, **kwargs)
        self.keys = AccountKeys(self)  # looked up once per client, i.e. once per pass

    # ---- droplets: the writes, and waiting for an action ------------------------------
    def create_droplet(self, name, region, size, image, ssh_keys=None, tags=None, user_data=None,
                       resource_tag=None):
        """Create a droplet; facts from the API's answer (status ``new``).

        When the POST fails in a way that may have created the droplet (5xx, lost
        connection), the droplets carrying ``resource_tag`` are re-read first: one
        found is the droplet this call created; none → post again (bounded).
        """
        deadline = self.call_deadline()
        attempt = 0
        while True:
            attempt += 1
            droplet = self.build(BoundDroplet, name=name, region=region, size_slug=size, image=image,
                                 ssh_keys=list(ssh_keys or []), tags=list(tags or []),
                                 user_data=user_data or None)
            try:
                droplet.create()
            except DigitalOceanError as exc:
                if not (exc.ambiguous and resource_tag):
                    raise
                landed = [d for d in self.list_droplets(tag_name=resource_tag)
                          if resource_tags(d["tags"]) == set([resource_tag.lower()])]
                if len(landed) == 1:
                    return landed[0]
                wait = self.retry_policy.delay(attempt, deadline) if not landed else None
                if wait is None:
                    raise
                self.stats.add("retries")
                self._sleep(wait)
                continue
            answer = (droplet.last_data or {}).get("droplet") or {"id": droplet.id, "name": name}
            return droplet_facts(answer)

    def destroy_droplet(self, droplet_id):
        """Delete a droplet; False when DigitalOcean says it was already gone (its own not_found)."""
        try:
            self.build(BoundDroplet, id=droplet_id).destroy()
        except DigitalOceanNotFound:
            return False
        return True

    def droplet_action(self, droplet_id, action_type, size=None):
        """Start ``shutdown``, ``power_off``, ``power_on`` or ``resize`` (CPU/RAM only,
        never the disk); returns the action's JSON."""
        droplet = self.build(BoundDroplet, id=droplet_id)
        droplet._retry_writes = True  # repeating a power action is harmless; a 422 says so
        if action_type == "resize":
            data = droplet.resize(size, disk=False)
        elif action_type in ("shutdown", "power_off", "power_on"):
            data = getattr(droplet, action_type)()
        else:
            raise ValueError("unsupported droplet action %r" % action_type)
        return data.get("action") or {}

    def _poll_delays(self, deadline):
        delay = self.POLL_FIRST
        while True:
            left = deadline - self._clock()
            if left <= 0:
                return
            yield min(delay, left)
            delay = min(self.POLL_MAX, delay * 2)

    def wait_for_action(self, droplet_id, action, deadline):
        """The action's final status (``completed``/``errored``), or ``in-progress`` at the deadline."""
        status = action.get("status") or "in-progress"
        loader = self.build(BoundAction, id=action.get("id"), droplet_id=droplet_id)
        for delay in self._poll_delays(deadline):
            if status != "in-progress":
                break
            self._sleep(delay)
            status = self._action_now(loader, droplet_id)
        return status

    def action_status(self, droplet_id, action):
        """The action's status now (one read): why a droplet did not reach the state it asked for."""
        return self._action_now(self.build(BoundAction, id=action.get("id"), droplet_id=droplet_id), droplet_id)

    @staticmethod
    def _action_now(loader, droplet_id):
        """One read of an action this run started: its not-found says nothing of the droplet, nor
        of the action, which DigitalOcean answered when it was asked for (unproven, not failed)."""
        try:
            loader.load()
        except DigitalOceanNotFound as exc:
            raise DigitalOceanUnproven("action %s of droplet %s, started by this run, answered not found (%s); "
                                       "whether it ran is not known" % (loader.id, droplet_id, exc),
                                       status=404, method="GET", path=exc.path)
        return loader.status

    # ---- SSH keys (``keys.AccountKeys``) ------------------------------------------------
    def account_keys(self):
        """The account's SSH keys, listed once per client and cached."""
        return self.keys.listed()

    def resolve_ssh_keys(self, entries, key_name, check_mode=False):
        """Key ids for a droplet from ids, fingerprints or public keys: ``(ids, notes)``
        (see ``AccountKeys.resolve``)."""
        return self.keys.resolve(entries, key_name, check_mode=check_mode)


def client_from_module(module, max_connections=10):
    """A client from the module's options, or ``fail_json`` naming what is wrong."""
    if not HAS_DIGITALOCEAN:
        module.fail_json(msg=missing_required_lib("python-digitalocean"), exception=DIGITALOCEAN_IMPORT_ERROR)
    try:
        endpoint = normalize_endpoint(module.params["api_url"])
    except ValueError as exc:
        module.fail_json(msg="api_url: %s; expected e.g. %s" % (exc, DEFAULT_API_URL))
    warning = plain_http_warning(module.params["api_url"])
    if warning:
        module.warn("api_url: %s" % warning)
    if module.params["timeout"] <= 0 or module.params["max_retry_seconds"] < 0:
        module.fail_json(msg="timeout must be positive and max_retry_seconds not negative")
    problem = secret_text_problem(module.params["token"])
    if problem:
        module.fail_json(msg="token (module_defaults, task or DIGITALOCEAN_ACCESS_TOKEN): %s" % problem)
    # python-digitalocean reads these for any object it builds itself: keep those on
    # the same endpoint and timeout as ours.
    os.environ[ENDPOINT_ENV_VAR] = endpoint
    os.environ[TIMEOUT_ENV_VAR] = str(module.params["timeout"])
    return DigitalOceanClient(
        module.params["token"], api_url=endpoint, timeout=module.params["timeout"],
        max_retry_seconds=module.params["max_retry_seconds"], max_connections=max_connections)
