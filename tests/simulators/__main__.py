"""Start a simulator: ``python -m tests.simulators waldur --port 8080``.

Prints one JSON line with the URL (and the CA bundle for TLS simulators) so a
wrapper script can read it, then serves until interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading

from tests.simulators import SIMULATORS, TLS_REQUIRED, simulator_class
from tests.simulators.common import SimulatorServer


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulators")
    parser.add_argument("name", choices=sorted(SIMULATORS))
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0 = any free port)")
    parser.add_argument("--preset", default="default", help="seed preset to load")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every call")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a generated CA")
    parser.add_argument("--tls-dir", default=None, help="where to write the CA bundle")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="simulator-specific option (e.g. lro=realistic)")
    parser.add_argument("--rabbitmq", default=None, metavar="DIR",
                        help="waldur: publish order and resource events to the broker of scripts/rabbitmq.sh "
                             "in DIR (started when it is not running), as Waldur does")
    args = parser.parse_args(argv)

    options = dict(item.split("=", 1) for item in args.option)
    if args.rabbitmq:
        if args.name != "waldur":
            parser.error("--rabbitmq is for the waldur simulator")
        from tests.integration.broker import RabbitBroker
        options["broker"] = RabbitBroker(args.rabbitmq).start()
    app = simulator_class(args.name)(preset=args.preset, latency=args.latency, **options)
    ssl_context, ca_path = None, None
    if args.tls or args.name in TLS_REQUIRED:
        from tests.simulators.tls import make_tls
        ssl_context, ca_path = make_tls(args.tls_dir or tempfile.mkdtemp(prefix=f"{args.name}-ca-"))
    server = SimulatorServer(app, port=args.port, ssl_context=ssl_context).start()
    info = {"simulator": args.name, "url": server.url, "port": server.port}
    if ca_path:
        info["ca_bundle"] = ca_path
    print(json.dumps(info), flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
