# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The event source's STOMP connection (stomp-py, web-STOMP or plain TCP, TLS), the listener
that hands stomp-py's callbacks to the event loop, and the log filter that masks the Waldur
token (the STOMP passcode) in every record."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
import ssl

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import redact_text
from ansible_collections.waldur.site_agent.plugins.plugin_utils.events.messages import LOGGER_NAME

try:
    import stomp
except ImportError:  # the source says so before it connects
    stomp = None

logger = logging.getLogger(LOGGER_NAME)


class RedactingFilter(logging.Filter):
    """Masks the token in every record of a logger (stomp.py logs whole frames at DEBUG)."""

    def __init__(self, *secrets):
        super().__init__()
        self.secrets = set(secret for secret in secrets if secret)

    def add(self, secret):
        if secret:
            self.secrets.add(secret)

    def filter(self, record):
        try:
            message = record.getMessage()
        except Exception:  # a record with bad args: leave it to the handler
            return True
        if any(secret in message for secret in self.secrets):
            record.msg = redact_text(message, self.secrets)
            record.args = ()
        return True


class StompConnectError(Exception):
    """The broker did not accept the connection (refused, no CONNECTED frame, an ERROR frame)."""


def tls_context(settings):
    context = ssl.create_default_context(cafile=settings.ca_path)
    if not settings.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def stomp_connection(settings, registration):
    """A stomp-py 1.2 connection for the settings (not yet connected). Reconnecting is ours,
    so the transport tries exactly once."""
    host_port = (settings.stomp_host, settings.stomp_port)
    beat = int(settings.heartbeat * 1000)
    common = dict(prefer_localhost=False, try_loopback_connect=False, reconnect_attempts_max=1,
                  timeout=settings.connect_timeout, heartbeats=(beat, beat), vhost=registration.vhost)
    if settings.use_websocket:
        connection = stomp.WSConnection([host_port], ws_path=settings.stomp_ws_path, **common)
        if settings.use_tls:
            connection.set_ssl(for_hosts=[host_port])
            # websocket-client takes a ready SSLContext from the transport's per-host options.
            connection.transport.get_ssl(host_port)["context"] = tls_context(settings)
    else:
        connection = stomp.Connection12([host_port], **common)
        if settings.use_tls:
            connection.set_ssl(for_hosts=[host_port], ca_certs=settings.ca_path, verify=settings.verify_ssl)
    return connection


def close_connection(connection):
    """Say DISCONNECT if still connected, then drop the socket without waiting on threads."""
    if connection is None:
        return
    try:
        if connection.is_connected():
            connection.disconnect()
    except Exception:  # the socket is going away anyway
        pass
    try:
        connection.transport.disconnect_socket()
    except Exception:
        pass


class _Listener(object):
    """Forwards stomp-py callbacks (its receiver thread) to the event loop, tagged with
    the connection's generation so frames of a dropped connection are never acked.
    stomp-py skips the ``on_*`` hooks a listener does not define."""

    def __init__(self, loop, inbox, generation):
        self.loop = loop
        self.inbox = inbox
        self.generation = generation

    def _post(self, kind, frame=None):
        # Never raises: stomp-py's receiver thread logs an exception out of a callback and closes
        # the socket, so one frame would end the delivery of all the others (and come back).
        try:
            self.loop.call_soon_threadsafe(self.inbox.put_nowait, (self.generation, kind, frame))
        except RuntimeError:  # the loop is closed: the source is shutting down
            pass
        except Exception as exc:
            logger.warning("Could not pass a %s frame to the event source (%s): it stays unacknowledged until "
                           "the next connection", kind, type(exc).__name__)

    def on_connecting(self, host_and_port):
        pass

    def on_connected(self, frame):
        self._post("connected", frame)

    def on_message(self, frame):
        self._post("message", frame)

    def on_receipt(self, frame):
        self._post("receipt", frame)

    def on_error(self, frame):
        self._post("error", frame)

    def on_disconnected(self):
        self._post("disconnected")

    def on_heartbeat_timeout(self):
        logger.warning("No heart-beat from the STOMP broker: reconnecting")
