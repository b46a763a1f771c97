"""A throw-away certificate authority for simulators served over HTTPS."""

from __future__ import annotations

import os
import ssl

import trustme


def make_tls(directory: str) -> tuple[ssl.SSLContext, str]:
    """Create a CA and a server certificate for localhost/127.0.0.1.

    Returns the server-side SSL context and the path of the CA bundle clients
    should trust (``REQUESTS_CA_BUNDLE``)."""
    os.makedirs(directory, exist_ok=True)
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(context)
    ca_path = os.path.join(directory, "simulator-ca.pem")
    ca.cert_pem.write_to_path(ca_path)
    return context, ca_path
