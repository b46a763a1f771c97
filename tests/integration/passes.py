"""Helpers shared by the end-to-end pass tests: the site agent configuration, the passes
as an operator runs them, and Waldur as its consumers and staff drive it (over HTTP)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests
import yaml

from tests.helpers import REPO, ansible_env, run_playbook, simulator_site_config
from tests.simulators.waldur import presets as W

ORDER_PASS = REPO / "playbooks" / "order_process.yml"
MEMBERSHIP_PASS = REPO / "playbooks" / "membership_sync.yml"
REPORT_PASS = REPO / "playbooks" / "report.yml"


# ---- configuration and passes ---------------------------------------------------------------

def _apply(backend: dict, settings: dict) -> None:
    for key, value in settings.items():
        if value is None:
            backend.pop(key, None)
        else:
            backend[key] = value


def write_config(tmp_path: Path, waldur, do=None, azure=None, **settings) -> Path:
    """The simulators' offering for ``do`` or ``azure``, with backend settings changed
    (None removes one)."""
    config = simulator_site_config(waldur.url, do_url=do.url if do else None, azure_url=azure.url if azure else None)
    _apply(config["offerings"][0]["backend_settings"], settings)
    path = tmp_path / "waldur-site-agent-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def edit_config(path: Path, **settings) -> None:
    config = yaml.safe_load(path.read_text())
    _apply(config["offerings"][0]["backend_settings"], settings)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def run_pass(playbook: Path, config: Path, check=False, verbosity=0, json_log=False, rc=0):
    """A pass as an operator runs it; its exit status must be ``rc`` (4: work left for the next run)."""
    env = {"WALDUR_SITE_AGENT_CONFIG": str(config)}
    if json_log:
        env["ANSIBLE_STDOUT_CALLBACK"] = "waldur.site_agent.waldur_json"
    run = run_playbook(playbook, env=env, check=check, verbosity=verbosity)
    assert run.rc == rc, run.output[-6000:]
    return run


def start_pass(playbook: Path, config: Path, env: dict | None = None, capture: bool = True,
               **extra_vars) -> subprocess.Popen:
    """A pass started in the background; its output captured (``communicate``) or dropped."""
    command = [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook)]
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    output = subprocess.PIPE if capture else subprocess.DEVNULL
    return subprocess.Popen(command, env=ansible_env(dict(env or {}, WALDUR_SITE_AGENT_CONFIG=str(config))),
                            cwd=REPO, stdout=output, stderr=subprocess.STDOUT if capture else output, text=True)


def hold_calls(app, operation: str, nth: int = 1, answer_status: int | None = None):
    """Hold the ``nth`` call of ``operation`` in a simulator until released; then answer it as
    the service would, or with ``answer_status`` (as if the request never got through).
    Returns ``(arrived, release, restore)``: events set when the call arrives and to let it go,
    and the function that takes the hold away (call it in a ``finally``)."""
    arrived, release = threading.Event(), threading.Event()
    seen = {"count": 0}
    original = app._injected

    def gate(name):
        if name == operation:
            seen["count"] += 1
            if seen["count"] == nth:
                arrived.set()
                release.wait(300)
                if answer_status is not None:
                    return app.error_response(answer_status, "Service unavailable.")
        return original(name)

    app._injected = gate

    def restore():
        release.set()
        app.__dict__.pop("_injected", None)
    return arrived, release, restore


def log_lines(run) -> list[dict]:
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


def call_waldur(waldur, path: str, body: dict, token: str = W.CONSUMER_TOKEN) -> dict:
    response = requests.post(waldur.url + path, json=body, timeout=10,
                             headers={"Authorization": "Token " + token})
    assert response.status_code < 300, response.text
    return response.json() if response.content else {}


def order_machine(waldur, offering_uuid: str, plan_uuid: str, name: str, limits: dict,
                  **attributes) -> tuple[str, str]:
    """A consumer orders a machine; (order uuid, marketplace resource uuid)."""
    offering = "%s/api/marketplace-public-offerings/%s/" % (waldur.url, offering_uuid)
    order = call_waldur(waldur, "/api/marketplace-orders/", {
        "offering": offering,
        "project": "%s/api/projects/%s/" % (waldur.url, W.PROJECT_UUID),
        "plan": "%splans/%s/" % (offering, plan_uuid),
        "attributes": dict(attributes, name=name),
        "limits": dict(limits),
        "accepting_terms_of_service": True,
    })
    return order["uuid"], order["marketplace_resource_uuid"]


def update_limits(waldur, resource_uuid: str, limits: dict) -> str:
    return call_waldur(waldur, "/api/marketplace-resources/%s/update_limits/" % resource_uuid,
                       {"limits": limits})["order_uuid"]


def terminate(waldur, resource_uuid: str) -> str:
    return call_waldur(waldur, "/api/marketplace-resources/%s/terminate/" % resource_uuid, {})["order_uuid"]


def set_flag(waldur, resource_uuid: str, flag: str, value: bool) -> None:
    """Staff pauses or downscales a resource (or clears the flag)."""
    call_waldur(waldur, "/api/marketplace-provider-resources/%s/%s/" % (resource_uuid, "set_" + flag),
                {flag: value}, token=W.STAFF_TOKEN)


def assert_done(waldur, order_uuid: str) -> dict:
    order = waldur.app.order(order_uuid)
    assert order["state"] == "done", (order["state"], order["error_message"])
    return order


def assert_erred(waldur, order_uuid: str, reason: str) -> dict:
    order = waldur.app.order(order_uuid)
    assert order["state"] == "erred" and reason in order["error_message"], (order["state"], order["error_message"])
    return order


def waldur_writes(waldur, since=0) -> list[str]:
    return [call["operation"] for call in waldur.app.write_calls(since)]


def wait_until(condition, timeout: float, what: str, interval: float = 0.2):
    """The first true value of ``condition()``, asked every ``interval`` seconds; fails the test
    after ``timeout`` seconds naming ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (ansible's workers start sessions of their own, so a
    process group would miss them)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path("/proc/%d/task" % current).glob("*"):
            try:
                pending.extend(int(child) for child in (task / "children").read_text().split())
            except OSError:  # the task ended meanwhile
                continue
    return found


def kill_tree(process: subprocess.Popen) -> None:
    """Kill the pass and everything it started at once, as a lost container or host would."""
    for pid in process_tree(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait(timeout=30)


def kill_pass_during(simulator, config: Path, operation: str) -> None:
    """Start the order pass, hold its first ``operation`` request in the simulator (a cloud),
    kill the pass (and everything it started) while it waits, then let the cloud carry out what
    it accepted, as a host lost mid-request would leave it."""
    arrived, release = threading.Event(), threading.Event()
    original = simulator.app._injected

    def gate(name):
        if name == operation and not release.is_set():
            arrived.set()
            release.wait(120)
        return original(name)

    simulator.app._injected = gate
    try:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "ansible-playbook"), str(ORDER_PASS)],
            env=ansible_env({"WALDUR_SITE_AGENT_CONFIG": str(config)}), cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert arrived.wait(180), "the pass never reached %s" % operation
        finally:
            kill_tree(process)
        release.set()
        # The cloud finishes what it accepted; wait until that request is on record (a loaded
        # machine may take a while) so a rerun's calls are counted from after it.
        deadline = time.monotonic() + 120
        while not simulator.app.calls_of(operation) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert simulator.app.calls_of(operation), "the cloud never finished the held %s" % operation
    finally:
        release.set()
        del simulator.app.__dict__["_injected"]


def order_form_with(waldur, offering_uuid: str, *fields: str) -> None:
    """Give the offering an order form in Waldur with these text fields: orders may then carry
    them, so create_gaps finds a source for each (a provider's form, as Waldur returns it)."""
    waldur.app.set_order_form(offering_uuid, {
        "order": list(fields),
        "options": {field: {"type": "string", "label": field.replace("_", " ").capitalize(), "required": False}
                    for field in fields}})
