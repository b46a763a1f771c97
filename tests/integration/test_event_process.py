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
import json
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import yaml

from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_lock import process_alive, process_start_time
from tests.helpers import ansible_env, run_playbook, simulator_site_config
from tests.integration import broker
from tests.integration.passes import MEMBERSHIP_PASS, ORDER_PASS, order_machine, process_tree, run_pass, set_flag, wait_until
from tests.simulators.common import SimulatorServer
from tests.simulators.waldur import presets as P
from tests.simulators.waldur import WaldurSimulator
from tests.unit.eda.source_plugin import load_source_plugin

pytestmark = pytest.mark.integration

# The session's private RabbitMQ broker (tests/integration/broker.py).
rabbitmq = broker.rabbitmq

OFFERING = P.DO_OFFERING_UUID
TOKEN = P.PROVIDER_TOKEN


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
    assert source.next()["waldur"] == {"type": "sweep", "pass_name": "order_process", "offering_uuid": OFFERING,
                                       "reason": "startup"}
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
def stomp_site_config(waldur, rabbitmq, transport="ws", do_sim=None, azure_sim=None) -> dict:
    """The simulators' site agent configuration, every offering ``stomp_enabled`` with the
    upstream STOMP keys pointing at the test broker."""
    config = simulator_site_config(waldur.url, do_url=do_sim.url if do_sim else None,
                                   azure_url=azure_sim.url if azure_sim else None)
    stomp = rabbitmq.source_args(transport)
    for offering in config["offerings"]:
        offering.update(stomp_enabled=True, stomp_ws_host=stomp["stomp_host"], stomp_ws_port=stomp["stomp_port"],
                        stomp_ws_path=stomp["stomp_ws_path"], websocket_use_tls=stomp["websocket_use_tls"])
    return config


def write_site_config(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "waldur-site-agent-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


class Rulebook:
    """``ansible-rulebook --rulebook waldur.site_agent.event_process`` in its own process group,
    as an operator runs it: the configuration file in WALDUR_SITE_AGENT_CONFIG, no variables,
    the passes logging JSON lines."""

    def __init__(self, workdir: Path, config: Path, env: dict | None = None):
        self.workdir = workdir
        (workdir / "inventory.yml").write_text(yaml.safe_dump(
            {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                             "ansible_python_interpreter": sys.executable}}}}))
        self.log_path = workdir / "rulebook.log"
        binary = Path(sys.executable).parent / "ansible-rulebook"
        environment = ansible_env(dict({"WALDUR_SITE_AGENT_CONFIG": str(config),
                                        "ANSIBLE_STDOUT_CALLBACK": "waldur.site_agent.waldur_json"}, **(env or {})))
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [str(binary), "--rulebook", "waldur.site_agent.event_process", "-i", str(workdir / "inventory.yml"),
                 "-v"],
                env=environment, cwd=str(workdir), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def json_lines(self) -> list[dict]:
        lines = []
        for line in self.log().splitlines():
            start = line.find('{"event": ')
            if start >= 0:
                try:
                    lines.append(json.loads(line[start:]))
                except ValueError:
                    pass
        return lines

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
        """Stop the rulebook, then kill what it started and left running: ansible-runner starts
        each pass on a pty in a session of its own (outside the rulebook's process group) and
        ignoring SIGHUP, so a pass running at the stop would outlive the test, holding its lock."""
        if self.proc.poll() is not None:
            return
        started = [(pid, process_start_time(pid)) for pid in process_tree(self.proc.pid)[1:]]
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        for pid, start_time in started:
            if start_time is not None and process_alive(pid, start_time):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


PLAYBOOK_FINISHED = '"event": "playbook finished"'


@pytest.fixture
def rulebook_factory(tmp_path):
    started = []

    def start(config: Path, env: dict | None = None):
        workdir = tmp_path / f"rulebook{len(started)}"
        workdir.mkdir()
        rulebook = Rulebook(workdir, config, env)
        started.append(rulebook)
        return rulebook

    yield start
    for rulebook in started:
        rulebook.stop()


def order_done(waldur, order_uuid, timeout=120):
    def finished():
        order = waldur.app.order(order_uuid)
        return order if order["state"] in ("done", "erred") else None
    order = wait_until(finished, timeout, f"order {order_uuid} to finish", interval=0.5)
    assert order["state"] == "done", order["error_message"]
    return order


def order_droplet(waldur, name):
    return order_machine(waldur, P.DO_OFFERING_UUID, P.DO_PLAN_UUID, name, P.DO_PLAN_QUOTAS)


def order_vm(waldur, name):
    return order_machine(waldur, P.AZURE_OFFERING_UUID, P.AZURE_PLAN_UUID, name, P.AZURE_PLAN_QUOTAS,
                         ssh_key=P.SSH_KEYS[0]["uuid"])


def droplet_names(do_sim):
    return [droplet["name"] for droplet in do_sim.app.droplets()]


def operations(waldur, since):
    return [call["operation"] for call in waldur.app.calls[since:]]


def order_listings(waldur, since):
    """The order listings since ``since``, as (offering, states) from their queries. An event's
    run reads its orders by UUID and lists only its offering's pending and executing orders
    (order_process_with_pending: the rest of a burst), never every order."""
    found = []
    for call in waldur.app.calls[since:]:
        if call["operation"] == "orders.list":
            query = parse_qs(call["query"])
            found.append(((query.get("offering_uuid") or [None])[0], tuple(sorted(query.get("state") or []))))
    return found


def test_two_stomp_offerings_are_served_from_the_config_file_alone(tmp_path, waldur, do_sim, azure_sim, rabbitmq,
                                                                   rulebook_factory):
    config = write_site_config(tmp_path, stomp_site_config(waldur, rabbitmq, "ws", do_sim, azure_sim))
    rulebook = rulebook_factory(config)
    rulebook.wait_for("Subscribed to /amq/queue/consumer_", count=2)
    rulebook.wait_for(PLAYBOOK_FINISHED, count=2)  # the startup sweeps: nothing pending then
    assert {q["offering_uuid"] for q in waldur.app.events.queues.values()} == {P.DO_OFFERING_UUID,
                                                                               P.AZURE_OFFERING_UUID}

    # The polling order pass leaves both offerings to events, saying so.
    since = len(waldur.app.calls)
    polling = run_pass(ORDER_PASS, config)
    for name in ("DigitalOcean VM", "Azure VM"):
        assert f"Offering {name} has stomp_enabled: true: the event_process rulebook serves its orders" \
            in polling.stdout
    assert "orders.list" not in operations(waldur, since)

    # A consumer's Create on each ends done with no polling pass: the events' passes read
    # each order by UUID and list only their own offering's pending and executing orders.
    since = len(waldur.app.calls)
    droplet_order, droplet_resource = order_droplet(waldur, "event-droplet")
    vm_order, vm_resource = order_vm(waldur, "event-vm")
    order_done(waldur, droplet_order)
    order_done(waldur, vm_order, timeout=180)
    assert droplet_names(do_sim) == ["event-droplet"]
    vm_id = waldur.app.resource(vm_resource)["backend_id"]
    assert azure_sim.app.vm_power_state(vm_id) == "running"
    listings = order_listings(waldur, since)
    assert listings and {offering for offering, _states in listings} <= {P.DO_OFFERING_UUID, P.AZURE_OFFERING_UUID}
    assert all(states == ("executing", "pending-provider") for _offering, states in listings), listings

    # A pause on each stops the machine (the resource events' membership passes).
    droplet_id = int(waldur.app.resource(droplet_resource)["backend_id"])
    set_flag(waldur, droplet_resource, "paused", True)
    set_flag(waldur, vm_resource, "paused", True)
    wait_until(lambda: do_sim.app.droplet(droplet_id)["status"] == "off", 120, "the paused droplet off", 0.5)
    wait_until(lambda: azure_sim.app.vm_power_state(vm_id) == "deallocated", 120, "the paused VM deallocated", 0.5)

    # The event-triggered passes logged JSON lines with their pass summaries, without colour codes.
    wanted = {(offering, name) for offering in ("DigitalOcean VM", "Azure VM")
              for name in ("order_process", "membership_sync")}

    def summaries():
        return {(line.get("offering"), line.get("pass")) for line in rulebook.json_lines()
                if line["event"] == "pass summary"}
    wait_until(lambda: wanted <= summaries(), 60, "the pass summaries of both offerings' passes", 0.5)
    assert "\x1b[" not in rulebook.log()
    assert P.PROVIDER_TOKEN not in rulebook.log()


def test_rotating_the_token_in_the_config_file_alone_is_enough(tmp_path, waldur, do_sim, azure_sim, rabbitmq,
                                                               rulebook_factory):
    site = stomp_site_config(waldur, rabbitmq, "ws", do_sim, azure_sim)
    config = write_site_config(tmp_path, site)
    rulebook = rulebook_factory(config)
    rulebook.wait_for("Subscribed to /amq/queue/consumer_", count=2)
    rulebook.wait_for(PLAYBOOK_FINISHED, count=2)

    # The operator rotates the provider's token in Waldur and in the configuration file only.
    new_token = "rotated-provider-token"
    with waldur.app.lock:
        waldur.app.market.users[P.PROVIDER_USER_UUID]["token"] = new_token
    for offering in site["offerings"]:
        offering["waldur_api_token"] = new_token
    write_site_config(tmp_path, site)

    # The passes the events run read the file: the new token works at once.
    order_done(waldur, order_droplet(waldur, "after-rotation")[0])
    # The source reads it when it reconnects: the queues are registered again with the new
    # token (the broker's password for the agent) and the next events still arrive.
    registrations = len(waldur.app.calls_of("agent_identities.register_queue"))
    rabbitmq.restart()
    rulebook.wait_for("Subscribed to /amq/queue/consumer_", count=4, timeout=180)
    assert len(waldur.app.calls_of("agent_identities.register_queue")) >= registrations + 2
    assert "token of offering DigitalOcean VM changed in the configuration file" in rulebook.log()
    order_done(waldur, order_vm(waldur, "after-reconnect")[0], timeout=180)
    assert droplet_names(do_sim) == ["after-rotation"]
    assert new_token not in rulebook.log() and P.PROVIDER_TOKEN not in rulebook.log()


def test_the_message_about_the_runs_own_claim_starts_no_second_run(tmp_path, waldur, do_sim, rabbitmq,
                                                                   rulebook_factory):
    """The order run claims the order, and Waldur publishes that (order executing): the
    source drops that echo, so it queues no second run of the order pass."""
    config = write_site_config(tmp_path, stomp_site_config(waldur, rabbitmq, "ws", do_sim=do_sim))
    rulebook = rulebook_factory(config)
    rulebook.wait_for("Subscribed to /amq/queue/consumer_")
    rulebook.wait_for(PLAYBOOK_FINISHED)  # the startup sweep
    first, _resource = order_droplet(waldur, "claimed-once-1")
    order_done(waldur, first)
    rulebook.wait_for(f"order {first} is executing")
    # Runs are sequential: a run for the first order's executing message would come before
    # the second order's run.
    second, _resource = order_droplet(waldur, "claimed-once-2")
    order_done(waldur, second)
    rulebook.wait_for(PLAYBOOK_FINISHED, count=3)
    assert rulebook.log().count('"event": "playbook started"') == 3  # the sweep and one run per order
    assert sorted(droplet_names(do_sim)) == ["claimed-once-1", "claimed-once-2"]


def test_a_burst_of_orders_is_one_run_not_one_run_per_order(tmp_path, waldur, do_sim, rabbitmq, rulebook_factory):
    config = write_site_config(tmp_path, stomp_site_config(waldur, rabbitmq, "ws", do_sim=do_sim))
    rulebook = rulebook_factory(config)
    rulebook.wait_for("Subscribed to /amq/queue/consumer_")
    rulebook.wait_for(PLAYBOOK_FINISHED)  # the startup sweep
    names = ["burst-%d" % index for index in range(6)]
    orders = [order_droplet(waldur, name)[0] for name in names]
    for order_uuid in orders:
        order_done(waldur, order_uuid, timeout=180)

    def order_runs():
        return [line for line in rulebook.json_lines()
                if line.get("event") == "pass summary" and line.get("pass") == "order_process"]

    # The first order is an event at once; the others arrived before its run claimed it and
    # are one more event (two if that claim came in the middle of the burst), whose run comes
    # after the first one's.
    assert "One order event for" in rulebook.log()
    wait_until(lambda: len(order_runs()) >= 3 and rulebook.log().count('"event": "playbook started"')
               == rulebook.log().count(PLAYBOOK_FINISHED), 60, "the held event's run finished")
    runs = order_runs()
    assert len(runs) - 1 <= 3, runs  # less the startup sweep
    # The first event's run named one order and took the whole burst (placed while it started,
    # order_process_with_pending); the later events' runs found their orders done.
    assert [run["done"] for run in runs[1:]] == [6] + [0] * (len(runs) - 2), runs
    assert sorted(droplet_names(do_sim)) == sorted(names)
    wait_until(lambda: settled(rabbitmq, queue_of(waldur)), 30, "every message acknowledged")


def test_orders_are_processed_as_their_events_arrive_over_tls(tmp_path, waldur, do_sim, rabbitmq, rulebook_factory):
    config = write_site_config(tmp_path, stomp_site_config(waldur, rabbitmq, "wss", do_sim=do_sim))
    # The broker's private CA, as an operator trusts one for the broker (ssl's SSL_CERT_FILE).
    rulebook = rulebook_factory(config, {"SSL_CERT_FILE": rabbitmq.ca_bundle})
    rulebook.wait_for("Subscribed to /amq/queue/consumer_")
    rulebook.wait_for(PLAYBOOK_FINISHED)

    since = len(waldur.app.calls)
    first, _resource = order_droplet(waldur, "event-vm-1")
    order = order_done(waldur, first)
    resource = waldur.app.resource(order["marketplace_resource_uuid"])
    assert droplet_names(do_sim) == ["event-vm-1"] and resource["backend_id"]
    calls = waldur.app.calls[since:]
    assert [c["path"] for c in calls if c["operation"] == "orders.get"][0].endswith(f"/{first}/")
    assert set(order_listings(waldur, since)) == {(P.DO_OFFERING_UUID, ("executing", "pending-provider"))}

    rabbitmq.restart()
    rulebook.wait_for("Subscribed to /amq/queue/consumer_", count=2, timeout=150)
    since = len(waldur.app.calls)
    second, _resource = order_droplet(waldur, "event-vm-2")
    order_done(waldur, second)
    assert sorted(droplet_names(do_sim)) == ["event-vm-1", "event-vm-2"]
    assert set(order_listings(waldur, since)) == {(P.DO_OFFERING_UUID, ("executing", "pending-provider"))}

    for body in ("this is not json", {"object_type": "order"}):
        waldur.app.events.publish_raw(OFFERING, body)
    rulebook.wait_for("Malformed message on queue", count=2, timeout=60)
    wait_until(lambda: settled(rabbitmq, queue_of(waldur)), 30, "every message acknowledged")
    assert TOKEN not in rulebook.log()


def test_an_order_whose_message_was_lost_is_processed_by_the_sweep(tmp_path, waldur, do_sim, rabbitmq,
                                                                   rulebook_factory):
    config = write_site_config(tmp_path, stomp_site_config(waldur, rabbitmq, "ws", do_sim=do_sim))
    # The upstream agent's reconciliation period (minutes): a sweep every 10 s here.
    rulebook = rulebook_factory(config, {"WALDUR_SITE_AGENT_RECONCILIATION_PERIOD_MINUTES": str(10 / 60)})
    rulebook.wait_for("Subscribed to /amq/queue/consumer_")
    rulebook.wait_for(PLAYBOOK_FINISHED)
    waldur.app.events.drop_events(count=100, object_type="order")  # every order message is lost

    since = len(waldur.app.calls)
    order_uuid, _resource = order_droplet(waldur, "swept-vm")
    order_done(waldur, order_uuid, timeout=150)
    assert droplet_names(do_sim) == ["swept-vm"]
    messages = [r for r in waldur.app.events.published if r["uuid"] == order_uuid]
    assert messages and all(r["dropped"] and not r["delivered"] for r in messages)
    # A full pass found it: the offering's orders were listed after the order was placed.
    assert "orders.list" in operations(waldur, since)
    assert "Sweep (interval)" in rulebook.log()


def test_a_paused_resource_whose_message_was_lost_is_stopped_by_the_membership_sweep(
        tmp_path, waldur, do_sim, rabbitmq, rulebook_factory):
    config = write_site_config(tmp_path, stomp_site_config(waldur, rabbitmq, "ws", do_sim=do_sim))
    rulebook = rulebook_factory(config, {"WALDUR_SITE_AGENT_RESOURCE_STATUS_RECONCILIATION_MINUTES": str(10 / 60)})
    rulebook.wait_for("Subscribed to /amq/queue/consumer_")
    order_uuid, resource_uuid = order_droplet(waldur, "reconciled")
    order_done(waldur, order_uuid)
    droplet_id = int(waldur.app.resource(resource_uuid)["backend_id"])
    waldur.app.events.drop_events(count=100, object_type="resource")  # the pause's message is lost
    set_flag(waldur, resource_uuid, "paused", True)
    wait_until(lambda: do_sim.app.droplet(droplet_id)["status"] == "off", 120, "the paused droplet off", 0.5)
    assert "a full membership_sync pass" in rulebook.log()


def test_an_event_run_and_a_sweep_at_the_same_instant_build_one_machine(tmp_path, waldur, do_sim, rabbitmq):
    """The two runs the rulebook makes of the order pass (an order event's and a sweep's),
    started together as two rulebook processes would: the pass lock makes them one."""
    config = write_site_config(tmp_path, stomp_site_config(waldur, rabbitmq, "ws", do_sim=do_sim))
    order_uuid, resource_uuid = order_droplet(waldur, "raced")
    runs = {"event": {"waldur_offering_name": P.DO_OFFERING_UUID, "order_process_order_uuids": [order_uuid]},
            "sweep": {"waldur_offering_name": P.DO_OFFERING_UUID, "agent_pass_sweep_event_offerings": True}}
    results = {}
    start = threading.Barrier(len(runs))

    def run(name):
        start.wait()
        results[name] = run_playbook(ORDER_PASS, extra_vars=dict(runs[name], agent_pass_config=str(config)))

    threads = [threading.Thread(target=run, args=(name,)) for name in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    for name, result in results.items():
        assert result.rc == 0, (name, result.output[-4000:])
    assert len(results) == 2
    order_done(waldur, order_uuid, timeout=5)
    assert droplet_names(do_sim) == ["raced"]
    assert len(do_sim.app.calls_of("droplets.create")) == 1
    assert waldur.app.resource(resource_uuid)["backend_id"] == str(do_sim.app.droplets()[0]["id"])


def test_resource_events_of_an_offering_without_membership_backend_are_a_line(tmp_path, waldur, azure_sim, rabbitmq):
    site = stomp_site_config(waldur, rabbitmq, "ws", azure_sim=azure_sim)
    site["offerings"][0]["membership_sync_backend"] = ""  # as in the upstream Azure example
    config = write_site_config(tmp_path, site)
    run = run_playbook(MEMBERSHIP_PASS, extra_vars={"agent_pass_config": str(config),
                                                    "waldur_offering_name": P.AZURE_OFFERING_UUID,
                                                    "membership_sync_resource_uuids": [P.AZURE_RESOURCE_UUID]})
    assert run.rc == 0, run.output[-4000:]
    assert "offering 'Azure VM' has no membership_sync_backend: left out of the membership_sync pass" in run.stdout
    assert "resources.list" not in operations(waldur, 0)
