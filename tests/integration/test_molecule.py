"""The roles' molecule scenarios (extensions/molecule/), run as an operator runs them:
``molecule test -s <scenario>`` from the repository root. Each scenario starts the
Waldur, DigitalOcean and Azure simulators, converges one pass over a DigitalOcean and
an Azure offering, converges it again (molecule's idempotence step: no task may report
a change), verifies the simulators' state and stops the simulators."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, ansible_env

pytestmark = pytest.mark.integration

SCENARIOS = ("order_process", "report", "membership_sync")
MOLECULE = Path(sys.executable).parent / "molecule"
# The scenarios' test_sequence: stop anything left over, then run one pass twice and check.
STEPS = ("cleanup", "destroy", "syntax", "create", "prepare", "converge", "idempotence", "verify", "cleanup",
         "destroy")
RECAP = r"localhost +: ok=\d+ +changed=%s +unreachable=0 +failed=0"


def simulator_processes(ephemeral_directory: Path) -> list[int]:
    """Simulator processes started by the scenario that ran in ``ephemeral_directory``
    (they inherit MOLECULE_EPHEMERAL_DIRECTORY from ansible-playbook)."""
    marker = b"MOLECULE_EPHEMERAL_DIRECTORY=" + str(ephemeral_directory).encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if marker in environ and b"tests.simulators" in cmdline:
            found.append(int(proc.name))
    return found


def section(output: str, scenario: str, step: str) -> str:
    """What molecule printed while it ran one step of the scenario."""
    match = re.search(r"\[%s > %s\] Executing\n(.*?)\n[A-Z]+ +\[%s > %s\] Executed" % (scenario, step, scenario, step),
                      output, re.S)
    assert match, "molecule did not run the %s step of %s:\n%s" % (step, scenario, output[-8000:])
    return match.group(1)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_converges_idempotently_and_stops_its_simulators(scenario, tmp_path):
    ephemeral = tmp_path / "molecule"
    env = ansible_env({
        "MOLECULE_EPHEMERAL_DIRECTORY": str(ephemeral),
        "NO_COLOR": "1",
        "PY_COLORS": "0",
    })
    for name in ("ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_CONFIG", "MOLECULE_GLOB"):
        env.pop(name, None)  # molecule's idempotence step reads the default callback's recap
    proc = subprocess.Popen([str(MOLECULE), "test", "-s", scenario], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output = proc.communicate(timeout=900)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # molecule and the ansible-playbook it runs
        output = proc.communicate()[0]
    finally:
        leftovers = simulator_processes(ephemeral)
        for pid in leftovers:
            os.kill(pid, signal.SIGTERM)

    assert proc.returncode == 0, output[-8000:]
    assert not leftovers, "simulators still running after molecule test: %s" % leftovers
    steps = re.findall(r"^%s > (\w+): Executed: (\w+)" % scenario, output.rsplit("DETAILS", maxsplit=1)[-1], re.M)
    assert steps == [(step, "Successful") for step in STEPS], output[-3000:]

    converge = section(output, scenario, "converge")
    # Both offerings of the configuration went through the pass role: each backend's task file ran.
    for backend in ("digitalocean", "azure"):
        assert "roles/%s/tasks/%s.yml" % (scenario, backend) in converge, converge
    assert re.search(RECAP % "[1-9][0-9]*", converge), "the first converge changed nothing:\n" + converge

    idempotence = section(output, scenario, "idempotence")
    assert "Idempotence test failed" not in output, output[-8000:]
    assert re.search(RECAP % "0", idempotence), idempotence
    if scenario != "order_process":  # with every order done, the order pass has nothing for the backends
        for backend in ("digitalocean", "azure"):
            assert "roles/%s/tasks/%s.yml" % (scenario, backend) in idempotence, idempotence

    assert re.search(RECAP % "0", section(output, scenario, "verify"))
