"""Event-driven order processing against a real RabbitMQ broker.

First the ``waldur_stomp`` source alone (registration with the Waldur simulator, STOMP over
WebSocket, WebSocket+TLS and TCP, acknowledgements, reconnection after a broker restart,
re-registration of a deleted queue, malformed messages), then the whole loop: ansible-rulebook
running ``extensions/eda/rulebooks/event_process.yml``, a consumer ordering a droplet in the
Waldur simulator, and the order done with the droplet in the DigitalOcean simulator without
the test running any pass itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.helpers import ansible_env
from tests.integration import broker
from tests.simulators.common import SimulatorServer
from tests.simulators.digitalocean import presets as do_presets
from tests.simulators.waldur import presets as P
from tests.simulators.waldur import WaldurSimulator
from tests.unit.eda.source_plugin import load_source_plugin

pytestmark = pytest.mark.integration

# The session's private RabbitMQ broker (tests/integration/broker.py).
rabbitmq = broker.rabbitmq

OFFERING = P.DO_OFFERING_UUID
TOKEN = P.PROVIDER_TOKEN


def wait_until(condition, timeout, what, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def waldur(rabbitmq):
    """A Waldur simulator (empty preset) whose event queues live on the broker."""
    server = SimulatorServer(WaldurSimulator(preset="empty", broker=rabbitmq)).start()
    yield server
    server.stop()


def queue_of(waldur):
    (queue_record,) = waldur.app.events.queues.values()
    return queue_record


class RunningSource:
    """The source plugin on its own event loop thread; events arrive on ``events``."""

    def __init__(self, args):
        self.plugin = load_source_plugin()
        self.args = args
        self.events: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self._loop = None
        self._task = None
        self._thread = threading.Thread(target=self._run, name="waldur-stomp-source", daemon=True)
        self._thread.start()

    def _run(self):
        events = self.events

        class Collector:
            async def put(self, event):
                events.put(event)

        async def main():
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            await self.plugin.main(Collector(), dict(self.args))

        try:
            asyncio.run(main())
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # surfaced by next()
            self.error = exc

    def next(self, timeout=30, accept=lambda event: True):
        """The next event ``accept`` takes (others are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.error is not None:
                raise AssertionError(f"the source failed: {self.error!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching event within {timeout} s")
            try:
                event = self.events.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if accept(event):
                return event

    def stop(self):
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=15)
        assert not self._thread.is_alive(), "the source did not stop when cancelled"


@pytest.fixture
def source_factory():
    sources = []

    def start(waldur, rabbitmq, transport="ws", **extra):
        args = dict(waldur_api_url=waldur.url + "/api/", waldur_api_token=TOKEN, offering_uuid=OFFERING,
                    sweep_interval=3600, **rabbitmq.source_args(transport))
        args.update(extra)
        source = RunningSource(args)
        sources.append(source)
        return source

    yield start
    for source in sources:
        source.stop()


def is_order(order_uuid, state=None):
    def accept(event):
        data = event["waldur"]
        return data["type"] == "order" and data["order_uuid"] == order_uuid and state in (None, data["order_state"])
    return accept


def settled(rabbitmq, queue_record):
    """True once the broker holds no ready and no unacknowledged message for the queue."""
    return rabbitmq.queue_counts(queue_record["vhost"], queue_record["queue_name"]) == (0, 0)


# ------------------------------------------------------------------------------------------ the source
@pytest.mark.parametrize("transport", ["ws", "wss", "tcp"])
def test_source_turns_queue_messages_into_events(waldur, rabbitmq, source_factory, transport, caplog):
    caplog.set_level(logging.DEBUG)
    source = source_factory(waldur, rabbitmq, transport)
    assert source.next()["waldur"] == {"type": "sweep", "offering_uuid": OFFERING, "reason": "startup"}
    wait_until(lambda: waldur.app.events.queues, 30, "the queue registration")
    finished = waldur.app.seed_order(OFFERING, state="done")
    pending = waldur.app.seed_order(OFFERING, state="pending-provider")
    event = source.next(accept=lambda e: e["waldur"]["type"] == "order")["waldur"]
    # The done order's message came first and was dropped: the first event is the pending order.
    assert (event["order_uuid"], event["order_state"], event["order_type"]) == \
        (pending["uuid"], "pending-provider", "Create")
    assert event["resource_uuid"] == pending["marketplace_resource_uuid"]
    record = queue_of(waldur)
    wait_until(lambda: settled(rabbitmq, record), 20, "both messages acknowledged")
    assert [r["uuid"] for r in waldur.app.events.published if r["delivered"]] == [finished["uuid"], pending["uuid"]]
    assert f"Ignored a message: order {finished['uuid']} is done" in caplog.text
    assert f"Subscribed to /amq/queue/{record['queue_name']}" in caplog.text
    assert TOKEN not in caplog.text  # stomp.py logs whole frames at DEBUG, CONNECT included


def test_source_reconnects_after_a_broker_restart(waldur, rabbitmq, source_factory, caplog):
    caplog.set_level(logging.INFO)
    source = source_factory(waldur, rabbitmq, "ws")
    wait_until(lambda: waldur.app.events.queues, 30, "the queue registration")
    first = waldur.app.seed_order(OFFERING)
    source.next(accept=is_order(first["uuid"]))
    rabbitmq.restart()
    second = waldur.app.seed_order(OFFERING)  # the durable queue keeps it until the source is back
    assert source.next(timeout=90, accept=is_order(second["uuid"]))["waldur"]["order_state"] == "pending-provider"
    assert "Lost the connection to the STOMP broker" in caplog.text
    # The queue survived the restart: no second registration was needed.
    assert len(waldur.app.calls_of("agent_identities.register_queue")) == 1
    wait_until(lambda: settled(rabbitmq, queue_of(waldur)), 20, "the message acknowledged")


@pytest.mark.parametrize("transport", ["ws", "tcp"])
def test_source_registers_a_deleted_queue_again(waldur, rabbitmq, source_factory, transport, caplog):
    caplog.set_level(logging.INFO)
    source = source_factory(waldur, rabbitmq, transport)
    wait_until(lambda: waldur.app.events.queues, 30, "the queue registration")
    record = queue_of(waldur)
    wait_until(lambda: f"Subscribed to /amq/queue/{record['queue_name']}" in caplog.text, 30, "the subscription")
    rabbitmq.delete_queue(record["vhost"], record["queue_name"])
    # The broker cancels the subscription; the source registers the queue again, which
    # makes Waldur (the simulator) declare it again.
    wait_until(lambda: len(waldur.app.calls_of("agent_identities.register_queue")) == 2, 60, "a re-registration")
    order = waldur.app.seed_order(OFFERING)
    source.next(timeout=60, accept=is_order(order["uuid"]))
    assert "registering the queue again" in caplog.text or "registering it again" in caplog.text


def test_malformed_messages_are_logged_acknowledged_and_skipped(waldur, rabbitmq, source_factory, caplog):
    caplog.set_level(logging.INFO)
    source = source_factory(waldur, rabbitmq, "ws")
    wait_until(lambda: waldur.app.events.queues, 30, "the queue registration")
    for body in ("this is not json", {"object_type": "bogus"}, {"object_type": "order"}, [1, 2, 3]):
        waldur.app.events.publish_raw(OFFERING, body)
    order = waldur.app.seed_order(OFFERING)
    event = source.next(accept=lambda e: e["waldur"]["type"] != "sweep")
    assert event["waldur"]["order_uuid"] == order["uuid"]  # nothing came before it
    wait_until(lambda: settled(rabbitmq, queue_of(waldur)), 20, "every message acknowledged")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "Malformed" in r.getMessage()]
    assert len(warnings) == 4
    assert any("not JSON" in w for w in warnings) and any("unknown object_type 'bogus'" in w for w in warnings)


# ------------------------------------------------------------------------------------------ the loop
COMPONENTS = {
    "cpu": {"measured_unit": "Cores", "unit_factor": 1, "accounting_type": "limit", "label": "CPU"},
    "ram": {"measured_unit": "MiB", "unit_factor": 1, "accounting_type": "limit", "label": "RAM"},
    "disk": {"measured_unit": "MiB", "unit_factor": 1, "accounting_type": "limit", "label": "Disk"},
}


def site_config(waldur_url, do_url):
    return {"offerings": [{
        "name": "DigitalOcean droplets",
        "waldur_api_url": waldur_url + "/api/",
        "waldur_api_token": TOKEN,
        "waldur_offering_uuid": OFFERING,
        "backend_type": "digitalocean",
        "order_processing_backend": "digitalocean",
        "membership_sync_backend": "digitalocean",
        "reporting_backend": "digitalocean",
        "backend_settings": {"token": do_presets.DO_TOKEN, "api_url": do_url + "/v2/", "default_region": "ams3",
                             "default_image": "ubuntu-22-04-x64", "default_size": "s-1vcpu-1gb"},
        "backend_components": COMPONENTS,
    }]}


class Rulebook:
    """``ansible-rulebook --rulebook waldur.site_agent.event_process`` in its own process group."""

    def __init__(self, workdir: Path, variables: dict):
        self.workdir = workdir
        (workdir / "vars.yml").write_text(yaml.safe_dump(variables))
        (workdir / "inventory.yml").write_text(yaml.safe_dump(
            {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                             "ansible_python_interpreter": sys.executable}}}}))
        self.log_path = workdir / "rulebook.log"
        binary = Path(sys.executable).parent / "ansible-rulebook"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [str(binary), "--rulebook", "waldur.site_agent.event_process", "-i", str(workdir / "inventory.yml"),
                 "--vars", str(workdir / "vars.yml"), "-v"],
                env=ansible_env(), cwd=str(workdir), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, count: int = 1, timeout: float = 120) -> None:
        def seen():
            if self.proc.poll() is not None:
                raise AssertionError(f"ansible-rulebook exited ({self.proc.returncode}):\n{self.log()[-4000:]}")
            return self.log().count(text) >= count
        try:
            wait_until(seen, timeout, f"{count} x {text!r} in the rulebook output", interval=0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- rulebook output ---\n{self.log()[-4000:]}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture
def rulebook_factory(tmp_path):
    started = []

    def start(variables):
        workdir = tmp_path / f"rulebook{len(started)}"
        workdir.mkdir()
        rulebook = Rulebook(workdir, variables)
        started.append(rulebook)
        return rulebook

    yield start
    for rulebook in started:
        rulebook.stop()


def rulebook_vars(tmp_path, waldur, do_sim, rabbitmq, transport, sweep_interval):
    config = tmp_path / "waldur-site-agent-config.yaml"
    config.write_text(yaml.safe_dump(site_config(waldur.url, do_sim.url)))
    stomp = rabbitmq.source_args(transport)
    return {
        "waldur_api_url": waldur.url + "/api/", "waldur_api_token": TOKEN, "waldur_offering_uuid": OFFERING,
        "agent_pass_config": str(config), "waldur_sweep_interval": sweep_interval,
        "waldur_stomp_host": stomp["stomp_host"], "waldur_stomp_port": stomp["stomp_port"],
        "waldur_websocket_use_tls": stomp["websocket_use_tls"], "waldur_ca_path": stomp.get("ca_path"),
    }


def consumer_orders_droplet(waldur, name) -> str:
    """What a consumer does in the Waldur portal: order a droplet."""
    response = requests.post(waldur.url + "/api/marketplace-orders/", timeout=10,
                             headers={"Authorization": "Token " + P.CONSUMER_TOKEN},
                             json={"offering": OFFERING, "project": P.PROJECT_UUID, "plan": P.DO_PLAN_UUID,
                                   "attributes": {"name": name}, "limits": dict(P.DO_PLAN_QUOTAS)})
    assert response.status_code == 201, response.text
    return response.json()["uuid"]


def order_done(waldur, order_uuid, timeout=120):
    def finished():
        order = waldur.app.order(order_uuid)
        return order if order["state"] in ("done", "erred") else None
    order = wait_until(finished, timeout, f"order {order_uuid} to finish", interval=0.5)
    assert order["state"] == "done", order["error_message"]
    return order


def droplet_names(do_sim):
    return [droplet["name"] for droplet in do_sim.app.droplets()]


def test_orders_are_processed_as_their_events_arrive(tmp_path, waldur, do_sim, rabbitmq, rulebook_factory):
    rulebook = rulebook_factory(rulebook_vars(tmp_path, waldur, do_sim, rabbitmq, "wss", sweep_interval=3600))
    rulebook.wait_for("Subscribed to /amq/queue/consumer_")
    rulebook.wait_for("PLAY RECAP")  # the startup sweep's order pass: nothing pending then

    since = len(waldur.app.calls)
    first = consumer_orders_droplet(waldur, "event-vm-1")
    order = order_done(waldur, first)
    resource = waldur.app.resource(order["marketplace_resource_uuid"])
    assert droplet_names(do_sim) == ["event-vm-1"] and resource["backend_id"]
    # The pass was the event's: it read that order by UUID and never listed the offering's orders.
    calls = waldur.app.calls[since:]
    assert [c["path"] for c in calls if c["operation"] == "orders.get"][0].endswith(f"/{first}/")
    assert "orders.list" not in [c["operation"] for c in calls]

    rabbitmq.restart()
    rulebook.wait_for("Subscribed to /amq/queue/consumer_", count=2, timeout=150)
    since = len(waldur.app.calls)
    second = consumer_orders_droplet(waldur, "event-vm-2")
    order_done(waldur, second)
    assert sorted(droplet_names(do_sim)) == ["event-vm-1", "event-vm-2"]
    assert "orders.list" not in [c["operation"] for c in waldur.app.calls[since:]]

    for body in ("this is not json", {"object_type": "order"}):
        waldur.app.events.publish_raw(OFFERING, body)
    rulebook.wait_for("Malformed message on queue", count=2, timeout=60)
    wait_until(lambda: settled(rabbitmq, queue_of(waldur)), 30, "every message acknowledged")
    assert TOKEN not in rulebook.log()


def test_an_order_whose_message_was_lost_is_processed_by_the_sweep(tmp_path, waldur, do_sim, rabbitmq,
                                                                   rulebook_factory):
    rulebook = rulebook_factory(rulebook_vars(tmp_path, waldur, do_sim, rabbitmq, "ws", sweep_interval=10))
    rulebook.wait_for("Subscribed to /amq/queue/consumer_")
    rulebook.wait_for("PLAY RECAP")
    waldur.app.events.drop_events(count=100, object_type="order")  # every order message is lost

    since = len(waldur.app.calls)
    order_uuid = consumer_orders_droplet(waldur, "swept-vm")
    order_done(waldur, order_uuid, timeout=150)
    assert droplet_names(do_sim) == ["swept-vm"]
    messages = [r for r in waldur.app.events.published if r["uuid"] == order_uuid]
    assert messages and all(r["dropped"] and not r["delivered"] for r in messages)
    # A full pass found it: the offering's orders were listed after the order was placed.
    assert "orders.list" in [c["operation"] for c in waldur.app.calls[since:]]
    assert "Sweep (interval)" in rulebook.log()
