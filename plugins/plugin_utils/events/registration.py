# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The event source's Waldur calls: the offering's site agent identity, its service and its
event queue, over the collection's Waldur client (``waldur/client.py``: its retries, error
wording and secret scrubbing). A failure is a ``WaldurApiError`` whose ``transient`` says
whether a later attempt may succeed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
from collections import namedtuple
from datetime import datetime, timezone

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import NULL, STRING, Shape
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import uuid_or_none
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.client import (
    COLLECTION_VERSION,
    WaldurApiError,
    WaldurClient,
)
from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.messages import LOGGER_NAME

try:
    import stomp
except ImportError:  # the source says so before it registers anything
    stomp = None

try:
    import requests
except ImportError:
    requests = None

logger = logging.getLogger(LOGGER_NAME)
# What the source reads of an agent identity (Waldur's site agent identities).
IDENTITY_SHAPE = Shape("site agent identity", required={"uuid": STRING, "name": STRING},
                       optional={"offering": (STRING, NULL)})

QueueRegistration = namedtuple("QueueRegistration", ["identity_uuid", "queue_name", "rmq_username", "vhost",
                                                     "object_types"])
IDENTITIES = "marketplace-site-agent-identities/"
# Seconds one registration call keeps retrying a transient failure before the source's own
# reconnection backoff (1 s doubling to 120 s) takes over.
REGISTRATION_RETRY_SECONDS = 10.0
USER_AGENT = "waldur-site-agent-ansible/%s event_process" % COLLECTION_VERSION


class WaldurEventsApi:
    """The Waldur calls of event mode. ``settings`` may be replaced (a token rotated in the
    configuration file): the next call uses a client for the new ones."""

    def __init__(self, settings, retry_seconds=REGISTRATION_RETRY_SECONDS):
        self.settings = settings
        self.retry_seconds = retry_seconds
        self._client = None
        self._client_key = None

    @property
    def client(self):
        settings = self.settings
        verify = (settings.ca_path or True) if settings.verify_ssl else False
        key = (settings.api_root, settings.token, verify, settings.request_timeout)
        if self._client is None or self._client_key != key:
            if self._client is not None:
                self._client.close()
            self._client = WaldurClient(settings.api_root, settings.token, verify_ssl=verify,
                                        timeout=settings.request_timeout, max_retry_seconds=self.retry_seconds,
                                        user_agent=USER_AGENT, pool_size=2,
                                        unreachable_timeout=self.retry_seconds)
            self._client_key = key
        return self._client

    def identity_body(self):
        return {
            "offering": self.settings.offering_uuid_hex,
            "name": "agent-%s" % self.settings.offering_uuid,
            "version": COLLECTION_VERSION,
            "last_restarted": datetime.now(timezone.utc).isoformat(),
            "dependencies": [{"package": "stomp-py", "version": getattr(stomp, "__version__", "")},
                             {"package": "requests", "version": getattr(requests, "__version__", "")}],
            "config_file_path": "",
            "config_file_content": "",
        }

    def ensure_identity(self):
        """The offering's agent identity: found by name (and offering) and refreshed with
        PUT, or created."""
        body = self.identity_body()
        # an empty listing is read twice by the client before it is taken for none: one answer that
        # lost its items never leaves the offering with two agents
        found = self.client.list(IDENTITIES, params={"name": body["name"]}, shape=IDENTITY_SHAPE)
        for identity in found:
            if (isinstance(identity, dict) and identity.get("name") == body["name"]
                    and uuid_or_none(identity.get("offering")) in (None, self.settings.offering_uuid_hex)
                    and uuid_or_none(identity.get("uuid"))):
                identity_uuid = uuid_or_none(identity["uuid"])
                return self.client.request("PUT", "%s%s/" % (IDENTITIES, identity_uuid), json=body, expect=dict)
        return self.client.post(IDENTITIES, json=body, idempotent=False)

    def register_service(self, identity_uuid):
        """Telemetry only (as upstream): a failure is logged, never fatal."""
        try:
            self.client.post("%s%s/register_service/" % (IDENTITIES, identity_uuid),
                             json={"name": "event_process", "mode": "event_process"}, expect=None)
        except WaldurApiError as exc:
            logger.warning("Could not register the event_process service (continuing): %s", exc)

    def register_queue(self, identity_uuid):
        path = "%s%s/register_queue/" % (IDENTITIES, identity_uuid)
        data = self.client.post(path, json={"object_types": list(self.settings.object_types)})
        missing = [key for key in ("queue_name", "rmq_username", "vhost")
                   if not isinstance(data.get(key), str) or not data.get(key)]
        if missing:
            raise WaldurApiError(200, "POST", self.client.api_path(path), "answered without %s" % ", ".join(missing))
        return QueueRegistration(identity_uuid, data["queue_name"], data["rmq_username"], data["vhost"],
                                 tuple(data.get("observable_object_types") or ()))

    def register(self):
        identity = self.ensure_identity()
        identity_uuid = uuid_or_none(identity.get("uuid"))
        if identity_uuid is None:
            raise WaldurApiError(200, "POST", self.client.api_path(IDENTITIES),
                                 "the site agent identity has no uuid in Waldur's answer")
        self.register_service(identity_uuid)
        return self.register_queue(identity_uuid)
