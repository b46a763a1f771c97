"""Try event processing locally: a RabbitMQ broker with web-STOMP, the Waldur simulator
publishing its order and resource events to it (as Waldur does), the DigitalOcean simulator,
and a site agent configuration with one stomp_enabled offering; docs/events.md walks through it.

    .venv/bin/python -m scripts.events_demo start [--dir DIR]   # or: make events-demo
    .venv/bin/python -m scripts.events_demo order NAME [--dir DIR] [--timeout S]
    .venv/bin/python -m scripts.events_demo stop [--dir DIR]

``start`` starts the broker (scripts/rabbitmq.sh: Debian's rabbitmq-server, installed when
missing, every listener on 127.0.0.1) and the two simulators in the background, and writes in DIR
(default ``.cache/events-demo``): ``config.yaml`` (the configuration, mode 600), ``inventory.yml``
(localhost for the passes), ``env`` (the variables to ``source``) and ``rulebook.log`` is where the
walkthrough sends the rulebook's output. ``order NAME`` has a consumer order a droplet NAME in
Waldur once the rulebook listens on its queue, and waits for the order to be done (with no pass
run by hand: the order's event makes the rulebook run it). ``stop`` stops what ``start`` started.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import requests
import yaml

from tests.simulators.waldur import presets as W

REPO = Path(__file__).resolve().parent.parent
RABBITMQ = REPO / "scripts" / "rabbitmq.sh"
DEFAULT_DIR = Path(".cache") / "events-demo"  # in the checkout it runs from
OFFERING_NAME = "DigitalOcean VM"


def _say(text: str) -> None:
    print(text, flush=True)


def _broker_env(directory: Path) -> dict:
    return dict(line.split("=", 1) for line in (directory / "broker" / "broker.env").read_text().splitlines()
                if "=" in line)


def _start_simulator(directory: Path, name: str, *args: str) -> dict:
    log = directory / ("%s.log" % name)
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.simulators", name, "--port", "0", *args],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        lines = [line for line in log.read_text().splitlines() if line.startswith("{")]
        if lines:
            info = json.loads(lines[0])
            info["pid"] = proc.pid
            return info
        if proc.poll() is not None:
            raise SystemExit("the %s simulator exited:\n%s" % (name, log.read_text()[-3000:]))
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("the %s simulator did not start (%s)" % (name, log))


def start(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / "pids").exists():
        stop(directory)
    broker_dir = directory / "broker"
    subprocess.run([str(RABBITMQ), "start", str(broker_dir)], check=True)
    broker = _broker_env(directory)
    ws = "ws://127.0.0.1:%s%s" % (broker["RABBITMQ_WEB_STOMP_PORT"], broker["RABBITMQ_WEB_STOMP_PATH"])
    _say("RabbitMQ: web-STOMP at %s (state and logs in %s)" % (ws, broker_dir))
    waldur = _start_simulator(directory, "waldur", "--rabbitmq", str(broker_dir))
    digitalocean = _start_simulator(directory, "digitalocean")
    (directory / "pids").write_text("%d\n%d\n" % (waldur["pid"], digitalocean["pid"]))
    _say("Waldur simulator: %s (publishes order and resource events to the broker)" % waldur["url"])
    _say("DigitalOcean simulator: %s" % digitalocean["url"])

    config = directory / "config.yaml"
    config.write_text(yaml.safe_dump({"offerings": [{
        "name": OFFERING_NAME,
        "waldur_api_url": waldur["url"] + "/api/",
        "waldur_api_token": W.PROVIDER_TOKEN,
        "waldur_offering_uuid": W.DO_OFFERING_UUID,
        "backend_type": "digitalocean",
        "order_processing_backend": "digitalocean",
        "membership_sync_backend": "digitalocean",
        "reporting_backend": "digitalocean",
        "stomp_enabled": True,
        "stomp_ws_host": "127.0.0.1",
        "stomp_ws_port": int(broker["RABBITMQ_WEB_STOMP_PORT"]),
        "stomp_ws_path": broker["RABBITMQ_WEB_STOMP_PATH"],
        "websocket_use_tls": False,
        "backend_settings": {"token": "sim-do-token", "api_url": digitalocean["url"] + "/v2/",
                             "default_region": "ams3", "default_image": "ubuntu-22-04-x64",
                             "default_size": "s-1vcpu-1gb"},
        "backend_components": {
            "cpu": {"measured_unit": "Cores", "unit_factor": 1, "accounting_type": "limit", "label": "CPU"},
            "ram": {"measured_unit": "MiB", "unit_factor": 1, "accounting_type": "limit", "label": "RAM"},
            "disk": {"measured_unit": "MiB", "unit_factor": 1, "accounting_type": "limit", "label": "Disk"},
        },
    }]}, sort_keys=False))
    config.chmod(stat.S_IRUSR | stat.S_IWUSR)
    (directory / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))
    (directory / "env").write_text("".join("export %s=%s\n" % item for item in (
        ("PATH", "%s:$PATH" % Path(sys.executable).parent),
        ("ANSIBLE_COLLECTIONS_PATH", REPO / ".cache" / "collections"),
        ("WALDUR_SITE_AGENT_CONFIG", config),
        ("ANSIBLE_STDOUT_CALLBACK", "waldur.site_agent.waldur_json"),
        ("ANSIBLE_NOCOLOR", "1"),
        ("WALDUR_SITE_AGENT_LOCK_DIR", directory / "locks"),
    )))
    _say("configuration: %s (offering %s, stomp_enabled: true)" % (config, OFFERING_NAME))
    _say("ready: source %s, then start ansible-rulebook (docs/events.md)" % (directory / "env"))
    return 0


def _waldur_url(directory: Path) -> str:
    return yaml.safe_load((directory / "config.yaml").read_text())["offerings"][0]["waldur_api_url"].rstrip("/")


def _listening(directory: Path) -> bool:
    """The offering's queue exists on the broker and has a consumer: the rulebook subscribed."""
    env = dict(os.environ)
    vhosts = subprocess.run([str(RABBITMQ), "ctl", str(directory / "broker"), "list_vhosts", "--no-table-headers"],
                            capture_output=True, text=True, env=env, check=False).stdout.split()
    for vhost in vhosts:
        queues = subprocess.run([str(RABBITMQ), "ctl", str(directory / "broker"), "list_queues", "-p", vhost,
                                 "--no-table-headers", "name", "consumers"],
                                capture_output=True, text=True, env=env, check=False).stdout
        for line in queues.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].startswith("consumer_") and parts[1] != "0":
                return True
    return False


def order(directory: Path, name: str, timeout: float) -> int:
    api = _waldur_url(directory)
    deadline = time.monotonic() + timeout
    while not _listening(directory):
        if time.monotonic() > deadline:
            raise SystemExit("no rulebook listens on the offering's queue after %s s (is ansible-rulebook running? "
                             "see its log)" % timeout)
        time.sleep(1)
    _say("the rulebook listens on the offering's queue")
    headers = {"Authorization": "Token " + W.CONSUMER_TOKEN}
    offering = "%s/marketplace-public-offerings/%s/" % (api, W.DO_OFFERING_UUID)
    response = requests.post(api + "/marketplace-orders/", headers=headers, timeout=10, json={
        "offering": offering, "project": "%s/projects/%s/" % (api, W.PROJECT_UUID),
        "plan": "%splans/%s/" % (offering, W.DO_PLAN_UUID), "attributes": {"name": name},
        "limits": {"cpu": 1, "ram": 1024, "disk": 25600}, "accepting_terms_of_service": True})
    response.raise_for_status()
    uuid = response.json()["uuid"]
    _say("a consumer ordered droplet %s: order %s is %s" % (name, uuid, response.json()["state"]))
    while time.monotonic() < deadline:
        current = requests.get("%s/marketplace-orders/%s/" % (api, uuid), headers=headers, timeout=10).json()
        if current["state"] in ("done", "erred", "canceled", "rejected"):
            resource = requests.get("%s/marketplace-resources/%s/" % (api, current["marketplace_resource_uuid"]),
                                    headers=headers, timeout=10).json()
            _say("order %s is %s, droplet %s has backend id %s" % (uuid, current["state"], name,
                                                                   resource.get("backend_id") or "(none)"))
            return 0 if current["state"] == "done" else 1
        time.sleep(1)
    raise SystemExit("order %s is still %s after %s s" % (uuid, current["state"], timeout))


def stop(directory: Path) -> int:
    pids = directory / "pids"
    if pids.exists():
        for pid in pids.read_text().split():
            try:
                os.killpg(int(pid), signal.SIGTERM)
            except ProcessLookupError:
                pass
        pids.unlink()
    if (directory / "broker" / "broker.env").exists():
        subprocess.run([str(RABBITMQ), "stop", str(directory / "broker")], check=False)
    _say("stopped the broker and the simulators of %s" % directory)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.events_demo", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["start", "order", "stop"])
    parser.add_argument("name", nargs="?", help="order: the droplet's name")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--timeout", type=float, default=240, help="order: seconds to wait for the rulebook and the order")
    args = parser.parse_args(argv)
    directory = args.dir.resolve()
    if args.command == "start":
        return start(directory)
    if args.command == "order":
        if not args.name:
            parser.error("order needs the droplet's NAME")
        return order(directory, args.name, args.timeout)
    return stop(directory)


if __name__ == "__main__":
    sys.exit(main())
