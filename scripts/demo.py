"""`make demo`: the real passes against the bundled simulators.

Starts the Waldur, DigitalOcean and Azure simulators on 127.0.0.1, writes a site
agent configuration for them, has a consumer order machines, then runs the real
playbooks (load_components, order_process, membership_sync, report) and shows
what changed in Waldur and in the clouds after each step.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

from tests.helpers import REPO, run_playbook, simulator_site_config
from tests.simulators import simulator_class
from tests.simulators.common import SimulatorServer
from tests.simulators.tls import make_tls
from tests.simulators.waldur import presets as waldur_presets


def banner(text):
    print("\n" + "=" * 78 + "\n" + text + "\n" + "=" * 78, flush=True)


def play(name, config_path, **extra):
    banner("ansible-playbook playbooks/%s.yml" % name)
    started = time.monotonic()
    result = run_playbook(REPO / "playbooks" / ("%s.yml" % name), extra_vars=extra or None,
                          env={"WALDUR_SITE_AGENT_CONFIG": str(config_path)})
    print(result.stdout)
    if result.rc != 0:
        print(result.stderr, file=sys.stderr)
        raise SystemExit("playbooks/%s.yml failed (rc=%d)" % (name, result.rc))
    print("(%.1f s)" % (time.monotonic() - started))


def show_orders(waldur):
    row = "%-10s %-17s %-16s %-10s %s"
    print(row % ("type", "order state", "resource", "state", "backend id / error"))
    for order in waldur.dump_state()["orders"]:
        resource = waldur.resource(order["marketplace_resource_uuid"]) or {}
        detail = resource.get("backend_id") or order.get("error_message") or ""
        print(row % (order["type"], order["state"], order.get("resource_name", ""),
                     resource.get("state", "(gone)"), detail[:110]))


def show_clouds(do_app, azure_app):
    print("DigitalOcean droplets:")
    for droplet in do_app.droplets():
        print("  %-10s %-14s %-8s %-14s %s" % (
            droplet["id"], droplet["name"], droplet["status"], droplet["size_slug"], ",".join(droplet["tags"])))
    print("Azure virtual machines:")
    for arm_id in azure_app.resources():
        if "/providers/microsoft.compute/virtualmachines/" in arm_id.lower():
            print("  %-96s %s" % (arm_id, azure_app.vm_power_state(arm_id)))


def set_paused(waldur_url, resource_uuid):
    """What a Waldur staff user does in the portal: pause a resource."""
    response = requests.post("%s/api/marketplace-provider-resources/%s/set_paused/" % (waldur_url, resource_uuid),
                             json={"paused": True}, headers={"Authorization": "Token " + waldur_presets.STAFF_TOKEN},
                             timeout=10)
    response.raise_for_status()


def main():
    workdir = Path(tempfile.mkdtemp(prefix="waldur-site-agent-demo-", dir=REPO / ".cache"))
    ssl_context, ca_bundle = make_tls(str(workdir / "ca"))
    os.environ["REQUESTS_CA_BUNDLE"] = ca_bundle
    waldur = SimulatorServer(simulator_class("waldur")()).start()
    digitalocean = SimulatorServer(simulator_class("digitalocean")()).start()
    azure = SimulatorServer(simulator_class("azure")(), ssl_context=ssl_context).start()
    try:
        config_path = workdir / "waldur-site-agent-config.yaml"
        config_path.write_text(yaml.safe_dump(simulator_site_config(waldur.url, digitalocean.url, azure.url), sort_keys=False))
        banner("Simulators: Waldur %s, DigitalOcean %s, Azure %s\nConfiguration: %s"
               % (waldur.url, digitalocean.url, azure.url, config_path))

        play("load_components", config_path)

        banner("A consumer orders two droplets and two Azure machines (waldur_order)")
        key = waldur_presets.SSH_KEYS[0]
        orders = [
            {"offering": waldur_presets.DO_OFFERING_UUID, "plan": waldur_presets.DO_PLAN_UUID,
             "attributes": {"name": "web-1"}, "limits": {"cpu": 1, "ram": 1024, "disk": 25600}},
            {"offering": waldur_presets.DO_OFFERING_UUID, "plan": waldur_presets.DO_PLAN_UUID,
             "attributes": {"name": "db-1", "region": "fra1", "ssh_public_key": key["public_key"]},
             "limits": {"cpu": 1, "ram": 1024, "disk": 25600}},
            {"offering": waldur_presets.AZURE_OFFERING_UUID, "plan": waldur_presets.AZURE_PLAN_UUID,
             "attributes": {"name": "Analysis Node", "ssh_key": key["uuid"]},
             "limits": {"cpu": 2, "ram": 4096, "disk": 38912}},
            {"offering": waldur_presets.AZURE_OFFERING_UUID, "plan": waldur_presets.AZURE_PLAN_UUID,
             "attributes": {"name": "no-key-vm"}, "limits": {"cpu": 2, "ram": 4096, "disk": 38912}},
        ]
        result = run_playbook(REPO / "scripts" / "demo_playbooks" / "submit_orders.yml", extra_vars={
            "demo_waldur_url": waldur.url, "demo_consumer_token": waldur_presets.CONSUMER_TOKEN,
            "demo_project_uuid": waldur_presets.PROJECT_UUID, "demo_orders": orders})
        if result.rc:
            print(result.stdout, result.stderr)
            raise SystemExit("submitting the orders failed")
        show_orders(waldur.app)

        play("order_process", config_path)
        banner("After the order pass (the keyless Azure order is refused, nothing built for it)")
        show_orders(waldur.app)
        show_clouds(digitalocean.app, azure.app)

        since = len(waldur.app.calls), len(digitalocean.app.calls), len(azure.app.calls)
        play("order_process", config_path)
        writes = (len(waldur.app.write_calls(since[0])) + len(digitalocean.app.write_calls(since[1]))
                  + len(azure.app.write_calls(since[2])))
        print("A second order pass finds nothing to do: %d write calls to Waldur, DigitalOcean and Azure." % writes)

        banner("Staff pauses web-1 and Analysis Node in Waldur")
        for resource in waldur.app.dump_state()["resources"]:
            if resource["name"] in ("web-1", "Analysis Node") and resource.get("backend_id"):
                set_paused(waldur.url, resource["uuid"])
        play("membership_sync", config_path)
        show_clouds(digitalocean.app, azure.app)

        play("report", config_path)
        banner("Usage stored in Waldur")
        for usage in waldur.app.dump_state()["usages"]:
            print("  resource %s %-5s %s (%s)" % (usage["resource_uuid"], usage["type"], usage["usage"],
                                                  usage["billing_period"]))
        banner("Demo finished: orders done/erred in Waldur, machines built, paused, measured and reported.")
    finally:
        for server in (waldur, digitalocean, azure):
            server.stop()


if __name__ == "__main__":
    main()
