"""``python -m tests.faults inventory``: run every world clean against fresh simulators and write
the reads each pass makes to tests/faults/reads.json (the fault matrix's rows)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from tests.helpers import import_collection_from_checkout


def inventory() -> dict:
    from tests.faults import matrix
    from tests.faults.worlds import WORLDS, Sims
    from tests.simulators import simulator_class
    from tests.simulators.common import SimulatorServer
    from tests.simulators.tls import make_tls

    with tempfile.TemporaryDirectory() as scratch:
        context, ca_path = make_tls(os.path.join(scratch, "ca"))
        servers = [SimulatorServer(simulator_class("waldur")()).start(),
                   SimulatorServer(simulator_class("digitalocean")()).start(),
                   SimulatorServer(simulator_class("azure")(), ssl_context=context).start()]
        servers[2].ca_bundle = ca_path
        sims = Sims(*servers)
        found = {}
        try:
            for name in sorted(WORLDS):
                for server in servers:
                    server.app.reset("default")
                world, run, _before = matrix.run_world(Path(tempfile.mkdtemp(dir=scratch)), sims, name)
                print("%s: exit %d" % (name, run.rc))
                found[name] = dict(sorted(matrix.reads_of(sims).items()))
        finally:
            for server in servers:
                server.stop()
    return found


if __name__ == "__main__":
    import_collection_from_checkout()
    if sys.argv[1:] != ["inventory"]:
        sys.exit("usage: python -m tests.faults inventory")
    from tests.faults.matrix import INVENTORY
    data = inventory()
    INVENTORY.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print("%d reads of %d worlds written to %s" % (sum(len(v) for v in data.values()), len(data), INVENTORY))
