"""A private RabbitMQ broker (STOMP, web-STOMP, web-STOMP over TLS) for the event tests.

``scripts/rabbitmq.sh`` runs it with all its state in a test directory and every listener
on 127.0.0.1. :class:`RabbitBroker` drives the script from Python and is the broker the
Waldur simulator's :class:`tests.simulators.waldur.events.SiteAgentEvents` provisions
queues on and publishes to. The ``rabbitmq`` fixture starts one per test session (per
xdist worker) on free ports; tests that restart it leave it running.

Use it from a test module with ``from tests.integration.broker import rabbitmq  # noqa: F401``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.simulators.waldur.events import StompPublisher

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "rabbitmq.sh"
HOST = "127.0.0.1"


class BrokerError(RuntimeError):
    pass


class RabbitBroker:
    """One private broker in ``directory``. With ``tls_dir`` it also serves web-STOMP over
    TLS with a certificate for localhost/127.0.0.1 from a throw-away CA (``ca_bundle``)."""

    def __init__(self, directory: Path, tls_dir: Path | None = None):
        self.directory = Path(directory)
        self.ca_bundle: str | None = None
        self._tls_env: dict = {}
        if tls_dir is not None:
            self._tls_env = self._make_certificates(Path(tls_dir))
        self.env: dict = {}
        self._publisher: StompPublisher | None = None

    def _make_certificates(self, tls_dir: Path) -> dict:
        import trustme

        tls_dir.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        cert = ca.issue_cert("localhost", "127.0.0.1")
        paths = {name: tls_dir / name for name in ("ca.pem", "cert.pem", "key.pem")}
        ca.cert_pem.write_to_path(str(paths["ca.pem"]))
        cert.cert_chain_pems[0].write_to_path(str(paths["cert.pem"]))
        cert.private_key_pem.write_to_path(str(paths["key.pem"]))
        self.ca_bundle = str(paths["ca.pem"])
        return {"RABBITMQ_TLS_CA": str(paths["ca.pem"]), "RABBITMQ_TLS_CERT": str(paths["cert.pem"]),
                "RABBITMQ_TLS_KEY": str(paths["key.pem"])}

    # ------------------------------------------------------------------ the script
    def _run(self, *args: str, timeout: float = 180) -> str:

        env = dict(os.environ, **self._tls_env)
        proc = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env,
                              check=False)
        if proc.returncode != 0:
            raise BrokerError(f"scripts/rabbitmq.sh {' '.join(args[:1])} failed ({proc.returncode}): "
                              f"{proc.stderr.strip()[-2000:]}")
        return proc.stdout

    def start(self) -> "RabbitBroker":
        # The first start on a fresh machine also installs rabbitmq-server (apt-get).
        self._run("start", str(self.directory), timeout=900)
        self.env = dict(line.split("=", 1) for line in
                        (self.directory / "broker.env").read_text().splitlines() if "=" in line)
        return self

    def stop(self) -> None:
        if self._publisher is not None:
            self._publisher.close()
        self._run("stop", str(self.directory))

    def restart(self) -> None:
        """Stop and start on the same ports and state (durable queues and persistent
        messages survive, connections do not)."""
        self.stop()
        self.start()

    def running(self) -> bool:
        try:
            self._run("status", str(self.directory), timeout=60)
        except BrokerError:
            return False
        return True

    def ctl(self, *args: str) -> str:
        return self._run("ctl", str(self.directory), *args)

    # ------------------------------------------------------------------ addresses
    @property
    def host(self) -> str:
        return HOST

    @property
    def stomp_port(self) -> int:
        return int(self.env["RABBITMQ_STOMP_PORT"])

    @property
    def web_stomp_port(self) -> int:
        return int(self.env["RABBITMQ_WEB_STOMP_PORT"])

    @property
    def web_stomp_tls_port(self) -> int:
        return int(self.env["RABBITMQ_WEB_STOMP_TLS_PORT"])

    @property
    def ws_path(self) -> str:
        return self.env["RABBITMQ_WEB_STOMP_PATH"]

    @property
    def admin(self) -> tuple[str, str]:
        return self.env["RABBITMQ_ADMIN_USER"], self.env["RABBITMQ_ADMIN_PASSWORD"]

    def source_args(self, transport: str = "ws") -> dict:
        """The STOMP arguments of the ``waldur_stomp`` source for ``ws`` (web-STOMP),
        ``wss`` (web-STOMP over TLS, this broker's CA) or ``tcp`` (plain STOMP)."""
        if transport == "ws":
            return dict(stomp_host=HOST, stomp_port=self.web_stomp_port, stomp_ws_path=self.ws_path,
                        use_websocket=True, websocket_use_tls=False)
        if transport == "wss":
            if not self.ca_bundle:
                raise BrokerError("this broker serves no TLS")
            # The certificate names localhost: connect by that name so the hostname checks.
            return dict(stomp_host="localhost", stomp_port=self.web_stomp_tls_port, stomp_ws_path=self.ws_path,
                        use_websocket=True, websocket_use_tls=True, ca_path=self.ca_bundle)
        if transport == "tcp":
            return dict(stomp_host=HOST, stomp_port=self.stomp_port, use_websocket=False, websocket_use_tls=False)
        raise ValueError(f"unknown transport {transport!r}")

    # ------------------------------------------------------------------ what Waldur does
    def provision(self, vhost: str, username: str, password: str, queue: str) -> None:
        """The vhost, the consumer user (read on its queue only) and the durable queue."""
        self._run("provision", str(self.directory), vhost, username, password, queue)

    def declare_queue(self, vhost: str, queue: str) -> None:
        self._run("declare-queue", str(self.directory), vhost, queue)

    def delete_queue(self, vhost: str, queue: str) -> None:
        self._run("delete-queue", str(self.directory), vhost, queue)

    def queue_counts(self, vhost: str, queue: str) -> tuple[int, int] | None:
        """(ready, unacknowledged) messages of the queue; None when it does not exist."""
        out = self.ctl("list_queues", "-p", vhost, "--no-table-headers", "name", "messages_ready",
                       "messages_unacknowledged")
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == queue:
                return int(parts[1]), int(parts[2])
        return None

    def publish(self, vhost: str, queue: str, body) -> None:
        if self._publisher is None:
            user, password = self.admin
            self._publisher = StompPublisher(HOST, self.stomp_port, user, password)
        self._publisher.publish(vhost, queue, body)


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory):
    """A running private broker for the session (web-STOMP with and without TLS, STOMP)."""
    root = tmp_path_factory.mktemp("rabbitmq")
    broker = RabbitBroker(root / "broker", tls_dir=root / "tls").start()
    try:
        yield broker
    finally:
        broker.stop()


__all__ = ["BrokerError", "RabbitBroker", "rabbitmq"]
