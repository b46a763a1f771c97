"""The commands of README.md and docs/*.md do what the docs say, run as a reader runs them.

Each block marked ``doc-test`` is run (tests/doc_blocks.py explains the markers) in a bash shell
that lives for its sequence, as a reader's terminal does, and each line of the block's
``doc-output`` must appear in what it printed. A sequence stops at the first block that fails.

* **Site** sequences are the quickstart's steps and the other guides' commands, run as on the
  agent host after the quickstart, against simulators this module starts: the shell starts
  with an empty environment (HOME in the work directory, the system's PATH) plus
  ``REQUESTS_CA_BUNDLE`` for the Azure simulator's CA (a real Azure has a public certificate),
  and runs the quickstart's environment block first. Paths and addresses of a real site map
  to the test's: ``/etc/waldur/`` and ``/opt/waldur-site-agent`` to the work directory (the
  latter links the venv running the tests and the collection), Waldur's and DigitalOcean's URLs
  to the simulators'. ``/etc/waldur/waldur-site-agent-config.yaml`` holds one DigitalOcean and
  one Azure offering of the simulators (tests/helpers.py).
* The **simulator walkthrough** (the quickstart's last section) is run in a work directory laid
  out as a checkout after ``make venv`` (``.venv``, ``tests``, ``.cache/collections`` link to
  this one); its own blocks start and stop the simulators. The ports it names are replaced by
  free ones, so parallel runs do not collide.

A block that cannot run here is listed in NOT_RUN with the reason; every command block of the
docs is either run or listed, and every name here has its block.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests import doc_blocks
from tests.helpers import collection_path, simulator_site_config
from tests.simulators import simulator_class
from tests.simulators.azure import presets as azure_presets
from tests.simulators.common import SimulatorServer
from tests.simulators.tls import make_tls
from tests.simulators.waldur import presets as waldur_presets

pytestmark = pytest.mark.integration

REPO = doc_blocks.REPO

NOT_RUN = {
    "readme-try": "make demo and make test are the repository's entry points: make test runs this test, "
                  "and the demo runs the same passes as the simulator walkthrough",
    "readme-use": "installs from Galaxy (no network here); the quickstart's steps run the same playbooks",
    "quickstart-install": "sudo and an install from Galaxy; the test maps /opt/waldur-site-agent to the venv "
                          "it runs in, with the collection linked from this checkout",
    "quickstart-protect": "sudo, and ansible-vault asks for a password on the terminal",
    "quickstart-schedule": "sudo, systemd as PID 1 and a real host (tests/integration/test_schedule.py "
                           "checks the units the role writes)",
    "simulators-venv": "creates .venv with pip (minutes, network); the test links the venv it runs in as "
                       ".venv and the collection as make collection-link does",
    "awx-execution-environment": "ansible-builder with podman or docker and a registry "
                                 "(tests/integration/test_awx_and_ee.py checks the build context)",
    "awx-configure": "awx.awx from Galaxy and an AWX controller (tests/integration/test_awx_and_ee.py "
                     "runs the playbook against a simulated controller)",
    "configuration-vault": "ansible-vault asks for a password on the terminal",
    "development-setup": "make venv, make test and make demo are the repository's entry points: "
                         "make test runs this test",
    "events-install": "installs from PyPI into the reader's Python",
    "events-rulebook": "needs RabbitMQ with web-STOMP and Java and runs forever; "
                       "tests/integration/test_event_process.py runs this rulebook the same way (the "
                       "configuration file in WALDUR_SITE_AGENT_CONFIG, the JSON callback) against a "
                       "private broker. The test runs the pass an order event makes it run "
                       "(test_site_commands[events])",
    "events-systemd": "sudo and systemd as PID 1; the unit's command is events-rulebook's",
    "events-decision-environment": "ansible-builder with a container engine and a registry",
    "events-test": "the event tests themselves, part of make test",
    "migration-stop-upstream": "systemctl on a host running the upstream agent",
    "releasing-cut": "changes galaxy.yml and the changelog of the checkout "
                     "(tests/integration/test_build_install.py runs the script on a copy)",
    "releasing-publish": "git push and a Galaxy API key",
    "releasing-execution-environment": "ansible-builder with podman or docker and a registry",
    "troubleshooting-timers": "systemctl and journalctl on a host with the timers installed",
    "troubleshooting-audit": "the audit exits non-zero on a world with findings; tests/integration/test_audit.py "
                             "runs this playbook (report directory and --check cleanup) against a seeded world "
                             "and asserts the table, the reports and the exit status",
    "troubleshooting-audit-status": "reads the reports of the audit above (test_audit.py asserts their status field)",
}


@dataclass
class Step:
    """A command the test runs that no doc block holds: what a documented tool runs for the reader
    (the rulebook's pass), checked with the lines it must print."""
    name: str
    script: str
    expected: tuple = ()


# The rulebook's order rule runs the order pass with the event's offering and order
# (extensions/eda/rulebooks/event_process.yml), reading the configuration file.
EVENT_PASS = Step(
    "events: the order pass as an order event makes the rulebook run it",
    "ansible-playbook waldur.site_agent.order_process -e waldur_site_agent_hosts=localhost "
    "-e waldur_offering_name=%s -e '{\"order_process_order_uuids\": [\"%s\"]}'"
    % (waldur_presets.DO_OFFERING_UUID, waldur_presets.DO_ORDER_UUID),
    ('"msg": "offering=DigitalOcean VM pass=order_process orders=1 done=1 erred=0 ... machines_changed=1 ...',),
)

# The quickstart's step 4: "A second run changes nothing."
LOAD_COMPONENTS_AGAIN = Step("quickstart: load_components run again", "ansible-playbook waldur.site_agent.load_components",
                             ("localhost ... changed=0 ...",))

# Run in this order, each sequence in one shell. Site sequences other than the quickstart start
# with the quickstart's environment block, as the reader's shell would.
SITE_SEQUENCES = {
    "quickstart": ["quickstart-environment", "quickstart-health", "quickstart-diagnostics",
                   "quickstart-load-components", LOAD_COMPONENTS_AGAIN, "quickstart-check", "quickstart-check-one", "quickstart-pass",
                   "quickstart-verify", "quickstart-again", "quickstart-other-passes"],
    "configuration": ["configuration-validate"],
    "migration": ["migration-check-connections", "migration-dry-run"],
    "modules": ["modules-ansible-doc"],
    "scaling": ["scaling-workers", "scaling-forks", "scaling-limit"],
    "troubleshooting": ["troubleshooting-start"],
    "events": [EVENT_PASS, "events-sweep"],
}
SIMULATOR_SEQUENCE = ["simulators-start", "simulators-config", "simulators-environment", "simulators-diagnostics",
                      "simulators-check", "simulators-pass", "simulators-verify", "simulators-report",
                      "simulators-stop"]
SIMULATOR_PORTS = ("18080", "18081", "18082")  # waldur, digitalocean, azure, as the walkthrough names them
# events.md's "Try it locally": a private broker, the simulators and ansible-rulebook; an order's
# event runs the pass (the script and the broker pick free ports).
EVENTS_DEMO_SEQUENCE = ["events-demo-start", "events-demo-rulebook", "events-demo-order", "events-demo-stop"]


def _docs():
    blocks, problems = doc_blocks.all_blocks()
    runnable = {block.name: block for block in blocks if block.kind in ("doc-test", "doc-file")}
    outputs = {block.name: block for block in blocks if block.kind == "doc-output"}
    return blocks, problems, runnable, outputs


def _sequence_names():
    names = [name for steps in SITE_SEQUENCES.values() for name in steps if isinstance(name, str)]
    return names + SIMULATOR_SEQUENCE + EVENTS_DEMO_SEQUENCE


def test_every_command_block_is_run_or_listed():
    blocks, problems, runnable, outputs = _docs()
    assert problems == []
    names = [block.name for block in blocks if block.kind and block.kind != "doc-output"]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    assert duplicates == [], "marker names must be unique"
    listed = _sequence_names()
    assert sorted(runnable) == sorted(set(listed)), (
        "doc-test/doc-file blocks without a place in the test's sequences, or sequence entries without a block")
    not_run = {block.name for block in blocks if block.kind == "doc-not-run"}
    assert not_run == set(NOT_RUN), "doc-not-run blocks and the reasons in NOT_RUN differ"
    assert set(outputs) <= {name for name, block in runnable.items() if block.kind == "doc-test"}, (
        "a doc-output block names no doc-test block")


def test_markers_are_checked(tmp_path, monkeypatch):
    """The marker rules catch an unmarked command block, a stray marker and a doc-file without path."""
    page = tmp_path / "page.md"
    page.write_text("```\nls\n```\n\n<!-- doc-test: x -->\n\n```\nls\n```\n\n"
                    "<!-- doc-file: y -->\n```yaml\na: 1\n```\n\n```yaml\nfine: true\n```\n")
    monkeypatch.setattr(doc_blocks, "REPO", tmp_path)
    blocks, problems = doc_blocks.parse(page)
    assert len(blocks) == 4
    expected = ["page.md:1: a block of commands needs a doc-test or doc-not-run marker",
                "page.md:5: a doc marker must be the line right before a fence",
                "page.md:7: a block of commands needs a doc-test or doc-not-run marker",
                "page.md:12: only doc-file takes a path, and it needs one"]
    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, expected):
        assert problem.startswith(start), problem


def test_expected_lines_allow_elisions():
    pattern = doc_blocks.expected_line_pattern('"msg": "offering=<name> pass=report sent=3 ..."')
    assert pattern.search('    "msg": "offering=Azure VM pass=report sent=3 api_calls=8 seconds=4.1"')
    assert not pattern.search('    "msg": "offering=Azure VM pass=report sent=2 api_calls=8 seconds=4.1"')
    assert not pattern.search('"msg": "offering=Azure VM\npass=report sent=3"')  # within one line


# ----------------------------------------------------------------- running

def _run(session, steps, runnable, outputs, substitutions, workdir, hooks=None):
    hooks = hooks or {}
    for step in steps:
        if isinstance(step, Step):
            name, where, script = step.name, "tests/integration/test_docs_commands.py", step.script
            expected = list(step.expected)
        else:
            block = runnable[step]
            if block.kind == "doc-file":
                target = workdir / doc_blocks.substitute(block.arg, substitutions)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(doc_blocks.substitute(block.text, substitutions))
                continue
            name, where, script = step, block.where, doc_blocks.substitute(block.text, substitutions)
            shown = outputs.get(step)
            expected = [doc_blocks.substitute(line, substitutions)
                        for line in (shown.text.splitlines() if shown else []) if line.strip()]
        before = hooks.get(name, (None, None))[0]
        state = before() if before else None
        run = session.run(script, expected=expected)
        missing = run.missing(expected)
        if run.failed_commands or missing:
            tail = "\n".join(run.output.splitlines()[-120:])
            pytest.fail("%s (%s): %s\n--- commands\n%s--- output (end)\n%s" % (
                where, name, "; ".join(filter(None, [
                    "%d command(s) failed" % run.failed_commands if run.failed_commands else "",
                    "lines the doc shows are missing: %s" % missing if missing else ""])), script, tail),
                pytrace=False)
        after = hooks.get(name, (None, None))[1]
        if after:
            after(state, run)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _clean_env(home: Path, **extra) -> dict:
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    if "TMPDIR" in os.environ:
        env["TMPDIR"] = os.environ["TMPDIR"]
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def site_servers(tmp_path_factory):
    ssl_context, ca_bundle = make_tls(str(tmp_path_factory.mktemp("docs-azure-ca")))
    servers = {
        "waldur": SimulatorServer(simulator_class("waldur")()).start(),
        "digitalocean": SimulatorServer(simulator_class("digitalocean")()).start(),
        "azure": SimulatorServer(simulator_class("azure")(), ssl_context=ssl_context).start(),
    }
    servers["azure"].ca_bundle = ca_bundle
    yield servers
    for server in servers.values():
        server.stop()


@dataclass
class Site:
    workdir: Path
    session: doc_blocks.ShellSession
    substitutions: dict
    servers: dict
    config_path: Path


@pytest.fixture
def site(tmp_path, site_servers):
    """The agent host after the quickstart, against fresh simulators."""
    for server in site_servers.values():
        server.app.reset("default")
    waldur, digitalocean, azure = (site_servers[name] for name in ("waldur", "digitalocean", "azure"))
    workdir = tmp_path / "site"
    etc = workdir / "etc" / "waldur"
    etc.mkdir(parents=True)
    config_path = etc / "waldur-site-agent-config.yaml"
    config_path.write_text(yaml.safe_dump(simulator_site_config(waldur.url, digitalocean.url, azure.url),
                                          sort_keys=False))
    opt = workdir / "opt" / "waldur-site-agent"
    opt.mkdir(parents=True)
    (opt / "bin").symlink_to(Path(sys.executable).parent, target_is_directory=True)
    (opt / "collections").symlink_to(collection_path(), target_is_directory=True)
    (workdir / "home").mkdir()
    substitutions = {
        "/etc/waldur/": "%s/" % etc,
        "/opt/waldur-site-agent": str(opt),
        "https://waldur.example.com/api/": waldur.url + "/api/",
        "https://api.digitalocean.com/v2/": digitalocean.url + "/v2/",
    }
    session = doc_blocks.ShellSession(workdir, _clean_env(workdir / "home", REQUESTS_CA_BUNDLE=azure.ca_bundle))
    yield Site(workdir, session, substitutions, site_servers, config_path)
    session.close()


def _quickstart_hooks(servers):
    """What the quickstart's prose claims around its blocks, checked in the simulators."""
    apps = {name: server.app for name, server in servers.items()}

    def calls():
        return {name: len(app.calls) for name, app in apps.items()}

    def writes(since):
        return {name: [(call["method"], call["path"]) for call in app.write_calls(since[name])
                       if call["operation"] != "token"]  # getting an Azure token writes nothing
                for name, app in apps.items()}

    def nothing_written(since, _run):
        assert writes(since) == {"waldur": [], "digitalocean": [], "azure": []}, "check mode wrote"

    def first_pass_did_what_step_6_says(since, _run):
        assert apps["waldur"].order(waldur_presets.DO_ORDER_UUID)["state"] == "done"
        resource = apps["waldur"].resource(waldur_presets.DO_RESOURCE_UUID)
        assert resource["backend_id"] and resource["backend_metadata"]
        tagged = [droplet for droplet in apps["digitalocean"].droplets()
                  if "waldur-resource:%s" % waldur_presets.DO_RESOURCE_UUID in droplet["tags"]]
        assert [str(droplet["id"]) for droplet in tagged] == [resource["backend_id"]]
        azure_ids = apps["azure"].resources()
        group = "/resourcegroups/group-%s-azure-vm-1/" % waldur_presets.AZURE_RESOURCE_UUID
        owner_tags = {"waldur-resource-uuid": waldur_presets.AZURE_RESOURCE_UUID,
                      "waldur-offering-uuid": waldur_presets.AZURE_OFFERING_UUID}
        for kind in ("virtualnetworks/netazure-vm-1", "publicipaddresses/pubipazure-vm-1",
                     "networksecuritygroups/nsgazure-vm-1", "virtualmachines/azure-vm-1"):
            found = [arm_id for arm_id in azure_ids if arm_id.lower().endswith(kind) and group in arm_id.lower()]
            assert len(found) == 1, (kind, azure_ids)
            tags = apps["azure"].get(found[0]).get("tags") or {}
            assert {key: tags.get(key) for key in owner_tags} == owner_tags, (found[0], tags)

    def second_pass_writes_nothing(since, _run):
        assert writes(since) == {"waldur": [], "digitalocean": [], "azure": []}, "the second pass wrote"

    return {"quickstart-check": (calls, nothing_written),
            "quickstart-check-one": (calls, nothing_written),
            "quickstart-pass": (calls, first_pass_did_what_step_6_says),
            "quickstart-again": (calls, second_pass_writes_nothing)}


@pytest.mark.parametrize("sequence", list(SITE_SEQUENCES))
def test_site_commands(sequence, site):
    _blocks, _problems, runnable, outputs = _docs()
    steps = SITE_SEQUENCES[sequence]
    if steps[0] != "quickstart-environment":
        steps = ["quickstart-environment"] + steps
    hooks = _quickstart_hooks(site.servers) if sequence == "quickstart" else {}
    _run(site.session, steps, runnable, outputs, site.substitutions, site.workdir, hooks)


def test_simulator_walkthrough(tmp_path):
    _blocks, _problems, runnable, outputs = _docs()
    checkout = tmp_path / "checkout"
    (checkout / "home").mkdir(parents=True)
    (checkout / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    (checkout / "tests").symlink_to(REPO / "tests", target_is_directory=True)
    (checkout / ".cache").mkdir()
    (checkout / ".cache" / "collections").symlink_to(collection_path(), target_is_directory=True)
    substitutions = {port: str(_free_port()) for port in SIMULATOR_PORTS}
    session = doc_blocks.ShellSession(checkout, _clean_env(checkout / "home"))
    try:
        _run(session, SIMULATOR_SEQUENCE, runnable, outputs, substitutions, checkout)
        # simulators-stop stopped what simulators-start started: once they exited, the ports are free
        assert session.run("wait", timeout=60).failed_commands == 0
        for port in substitutions.values():
            with socket.socket() as sock:
                assert sock.connect_ex(("127.0.0.1", int(port))) != 0, port
    finally:
        session.close()


def test_events_demo_walkthrough(tmp_path):
    """docs/events.md's "Try it locally", in a work directory laid out as a checkout after
    ``make venv`` (``.venv``, ``tests``, ``scripts`` and ``.cache/collections`` link to this one):
    the broker (scripts/rabbitmq.sh; ``make integration`` installs RabbitMQ and Java first) and
    the simulators start, ansible-rulebook subscribes, a consumer's order arrives as an event and
    is done with no pass run by hand, and the stop block stops everything it started."""
    _blocks, _problems, runnable, outputs = _docs()
    checkout = tmp_path / "checkout"
    (checkout / "home").mkdir(parents=True)
    (checkout / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    for name in ("tests", "scripts"):
        (checkout / name).symlink_to(REPO / name, target_is_directory=True)
    (checkout / ".cache").mkdir()
    (checkout / ".cache" / "collections").symlink_to(collection_path(), target_is_directory=True)
    session = doc_blocks.ShellSession(checkout, _clean_env(checkout / "home"))
    demo = checkout / ".cache" / "events-demo"
    try:
        _run(session, EVENTS_DEMO_SEQUENCE, runnable, outputs, {}, checkout)
        assert session.run("wait", timeout=60).failed_commands == 0
        assert not (demo / "pids").exists()
        status = subprocess.run([str(REPO / "scripts" / "rabbitmq.sh"), "status", str(demo / "broker")],
                                capture_output=True, text=True, check=False)
        assert status.returncode != 0, status.stdout  # the broker is stopped
    finally:
        session.close()
        if (demo / "pids").exists():
            subprocess.run([sys.executable, "-m", "scripts.events_demo", "stop", "--dir", str(demo)], cwd=REPO,
                           capture_output=True, check=False)


# ----------------------------------------------------------------- troubleshooting's claims

def _section(document: str, heading: str) -> str:
    text = (REPO / document).read_text()
    start = text.index("\n## %s\n" % heading)
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _bold_messages(section: str) -> list[str]:
    return re.findall(r"\*\*`([^`]+)`\*\*", section)


@pytest.mark.parametrize("backend", ["azure", "digitalocean"])
def test_wrong_cloud_credentials_approve_nothing(backend, site):
    """troubleshooting.md: with a wrong Azure secret or DigitalOcean token the order pass fails
    with the message it quotes before approving anything, so the order stays pending-provider
    (nothing is erred), diagnostics says what it quotes, the Azure report pass fails alike, and
    the order is carried out once the credential is fixed."""
    heading, offering, order_uuid, key, right = {
        "azure": ("Azure sign-in", "Azure VM", waldur_presets.AZURE_ORDER_UUID, "client_secret",
                  azure_presets.CLIENT_SECRET),
        "digitalocean": ("DigitalOcean token", "DigitalOcean VM", waldur_presets.DO_ORDER_UUID, "token", None),
    }[backend]
    section = _section("docs/troubleshooting.md", heading)
    assert "the orders stay `pending-provider`" in " ".join(section.split())
    pass_message = _bold_messages(section)[0]
    diagnostics_message = re.search(r"`diagnostics` says\s+`([^`]+)`", section).group(1)

    config = yaml.safe_load(site.config_path.read_text())
    settings = next(item for item in config["offerings"] if item["name"] == offering)["backend_settings"]
    right = right or settings[key]
    settings[key] = "wrong-" + right
    site.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    run_one = "-e 'waldur_offering_name=\"%s\"'" % offering
    environment = doc_blocks.substitute(_docs()[2]["quickstart-environment"].text, site.substitutions)
    assert site.session.run(environment).failed_commands == 0

    failed = site.session.run("ansible-playbook waldur.site_agent.order_process %s" % run_one,
                              expected=[pass_message])
    assert failed.failed_commands == 1 and not failed.missing([pass_message]), failed.output
    assert settings[key] not in failed.output  # the secret itself is never printed
    assert site.servers["waldur"].app.order(order_uuid)["state"] == "pending-provider"
    diagnosed = site.session.run("ansible-playbook waldur.site_agent.diagnostics %s" % run_one,
                                 expected=[diagnostics_message])
    assert diagnosed.failed_commands == 1 and not diagnosed.missing([diagnostics_message]), diagnosed.output

    settings[key] = right
    site.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    fixed = site.session.run("ansible-playbook waldur.site_agent.order_process %s" % run_one)
    assert fixed.failed_commands == 0, fixed.output
    assert site.servers["waldur"].app.order(order_uuid)["state"] == "done"

    if backend == "azure":  # "Every pass of the offering fails with this message. The report pass sends nothing."
        settings[key] = "wrong-" + right
        site.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        report = site.session.run("ansible-playbook waldur.site_agent.report %s" % run_one, expected=[pass_message])
        assert report.failed_commands == 1 and not report.missing([pass_message]), report.output
        assert site.servers["waldur"].app.dump_state()["usages"] == []


def test_unquoted_offering_name_with_a_space(site):
    """troubleshooting.md: quoted for the shell alone, ``-e waldur_offering_name="DigitalOcean VM"``
    passes only the first word; the forms quoted for Ansible too select the offering."""
    section = _section("docs/troubleshooting.md", "Before anything runs")
    entry = section[section.index("**`offering: no Azure or DigitalOcean offering named"):]
    entry = entry[:entry.index("\n\n")]
    quoted = re.findall(r"`(-e '[^`]+')`", entry)
    assert len(quoted) == 2, entry
    unquoted = re.search(r"`(-e waldur_offering_name=\"DigitalOcean VM\")`", entry).group(1)
    message = _bold_messages(entry)[0]
    environment = doc_blocks.substitute(_docs()[2]["quickstart-environment"].text, site.substitutions)
    assert site.session.run(environment).failed_commands == 0

    wrong = site.session.run("ansible-playbook waldur.site_agent.report %s" % unquoted)
    assert wrong.failed_commands == 1, wrong.output
    assert doc_blocks.expected_line_pattern(message.replace("<x>", "DigitalOcean")).search(wrong.output), \
        (message, wrong.output)
    for option in quoted:
        right = site.session.run("ansible-playbook waldur.site_agent.report %s" % option)
        assert right.failed_commands == 0, right.output
        assert "offering=DigitalOcean VM pass=report" in right.output
        assert "offering=Azure VM" not in right.output
