"""One world per pass and backend for the fault matrix: what each seeds in the simulators, how
the pass is run on it, and what a clean run of it ends with (``World.expected``)."""

from __future__ import annotations

import datetime
from decimal import Decimal
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.helpers import REPO, simulator_site_config
from tests.integration.azure_state import OFFERING_TAG, RESOURCE_TAG, dedicated_group
from tests.simulators.waldur import presets as W

PLAYBOOKS = {name: REPO / "playbooks" / ("%s.yml" % name)
             for name in ("order_process", "report", "membership_sync", "audit", "load_components")}
DO_NAME, AZURE_NAME = "DigitalOcean VM", "Azure VM"
SMALL, BIG = "s-1vcpu-1gb", "s-2vcpu-4gb"
# The offerings' request_timeout: short, so a ``timeout`` fault (the simulators hold the answer
# back for STALL_SECONDS) costs seconds, yet well above what a loaded simulator takes to answer.
REQUEST_TIMEOUT = 3


def new_uuid() -> str:
    return uuid.uuid4().hex


def ago(hours: float) -> str:
    moment = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=hours)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def this_month() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m") + "-01"


def do_tag(resource_uuid: str) -> str:
    return "waldur-resource:" + resource_uuid


def azure_tags(resource_uuid: str) -> dict:
    return {RESOURCE_TAG: resource_uuid, OFFERING_TAG: W.AZURE_OFFERING_UUID}


@dataclass
class Sims:
    waldur: object
    do: object
    azure: object


@dataclass
class World:
    """What a world holds: the pass's run, and what a clean run of it leaves."""

    name: str
    backend: str
    playbook: Path
    config: Path
    extra_vars: dict = field(default_factory=dict)
    # order uuid -> (type, resource uuid, state a clean run leaves)
    orders: dict = field(default_factory=dict)
    # machines nothing may touch (DigitalOcean droplet ids, ARM ids): another resource's, untagged
    foreign: list = field(default_factory=list)
    # resource uuid -> machine the resource owns
    machines: dict = field(default_factory=dict)
    # (resource uuid, component) -> amount stored before the run
    usage_before: dict = field(default_factory=dict)
    # the pass may write to the cloud (the audit without cleanup or repair may not)
    cloud_writes: bool = True
    # the exit status of a clean run
    clean_rc: int = 0
    # resource uuid -> a name that is the same in every run of the world (uuids are new each run)
    labels: dict = field(default_factory=dict)


def write_config(tmp_path: Path, sims: Sims, backend: str) -> Path:
    config = simulator_site_config(sims.waldur.url, do_url=sims.do.url, azure_url=sims.azure.url)
    config["offerings"] = [dict(offering, request_timeout=REQUEST_TIMEOUT) for offering in config["offerings"]
                           if offering["backend_type"] == backend]
    path = tmp_path / "waldur-site-agent-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)  # it holds tokens: the pass warns otherwise
    return path


# ---- machines -----------------------------------------------------------------------------------

def droplet_resource(sims: Sims, name: str, size: str = SMALL, status: str = "active", register=True, **resource):
    resource_uuid = new_uuid()
    LABELS[resource_uuid] = name
    droplet = sims.do.app.seed_droplet(name, size=size, status=status, tags=["waldur", do_tag(resource_uuid)],
                                       created_at=ago(2))
    if register:
        sims.waldur.app.seed_resource(W.DO_OFFERING_UUID, name, uuid=resource_uuid, backend_id=str(droplet["id"]),
                                      limits=dict(W.DO_PLAN_QUOTAS), **resource)
    return resource_uuid, droplet["id"]


def chain_resource(sims: Sims, name: str, power_state: str = "running", register=True, **resource):
    resource_uuid = new_uuid()
    LABELS[resource_uuid] = name
    group = dedicated_group(resource_uuid, name)
    machine = sims.azure.app.seed_vm(name, group, size="Standard_B2s", power_state=power_state,
                                     chain_tags=azure_tags(resource_uuid), group_tags=azure_tags(resource_uuid),
                                     os_disk_delete_option="Delete", nic_delete_option="Delete", created=ago(2))
    if register:
        sims.waldur.app.seed_resource(W.AZURE_OFFERING_UUID, name, uuid=resource_uuid, backend_id=machine,
                                      limits=dict(W.AZURE_PLAN_QUOTAS),
                                      attributes={"name": name, "size": "Standard_B2s"}, **resource)
    return resource_uuid, machine


# resource uuid -> its name in the world (a run's uuids are new; the comparison with a clean run
# goes by these names)
LABELS = {W.DO_RESOURCE_UUID: "do-vm-1", W.AZURE_RESOURCE_UUID: "azure-vm-1"}


def foreign_droplets(sims: Sims) -> list:
    """A droplet carrying another resource's tag (of no resource of this offering) and an untagged
    one named like the agent's machines: neither may ever be touched."""
    other = sims.do.app.seed_droplet("waldur-" + new_uuid()[:8], tags=[do_tag(new_uuid())], created_at=ago(3))
    untagged = sims.do.app.seed_droplet("do-vm-1", created_at=ago(3))
    LABELS[str(other["id"])], LABELS[str(untagged["id"])] = "foreign-tagged", "foreign-untagged"
    return [other["id"], untagged["id"]]


def foreign_vm(sims: Sims) -> list:
    other = new_uuid()
    machine = sims.azure.app.seed_vm("foreign", dedicated_group(other, "foreign"), chain_tags=azure_tags(other),
                                     group_tags=azure_tags(other), created=ago(3))
    LABELS[machine.lower()] = "foreign"
    return [machine]


def order(sims: Sims, offering: str, order_type: str, resource_uuid: str, **fields) -> str:
    return sims.waldur.app.seed_order(offering, type=order_type, resource_uuid=resource_uuid, **fields)["uuid"]


# ---- the worlds ---------------------------------------------------------------------------------

def order_pass_do(tmp_path: Path, sims: Sims, event: bool = False) -> World:
    """A Create (the preset's), an Update that resizes, a Terminate and a Restore of an existing
    droplet, beside a foreign droplet; with ``event``, the run an event starts (its orders named)."""
    world = World("order_process-event" if event else "order_process-digitalocean", "digitalocean",
                  PLAYBOOKS["order_process"], write_config(tmp_path, sims, "digitalocean"))
    world.foreign = foreign_droplets(sims)
    updated, droplet = droplet_resource(sims, "upd-1")
    world.machines[updated] = droplet
    doomed, droplet = droplet_resource(sims, "term-1")
    world.machines[doomed] = droplet
    restored, droplet = droplet_resource(sims, "rest-1")
    world.machines[restored] = droplet
    world.orders = {
        W.DO_ORDER_UUID: ("Create", W.DO_RESOURCE_UUID, "done"),
        order(sims, W.DO_OFFERING_UUID, "Update", updated, limits={"cpu": 2, "ram": 4096, "disk": 81920}):
            ("Update", updated, "done"),
        order(sims, W.DO_OFFERING_UUID, "Terminate", doomed): ("Terminate", doomed, "done"),
        order(sims, W.DO_OFFERING_UUID, "Restore", restored): ("Restore", restored, "done"),
    }
    if event:
        world.extra_vars = {"order_process_order_uuids": list(world.orders), "order_process_with_pending": True}
    return world


def order_pass_azure(tmp_path: Path, sims: Sims) -> World:
    """A Create (the preset's), a Terminate and a Restore of an existing machine, an Update (which
    Azure cannot do: erred by design), beside a foreign machine."""
    world = World("order_process-azure", "azure", PLAYBOOKS["order_process"], write_config(tmp_path, sims, "azure"))
    world.foreign = foreign_vm(sims)
    doomed, machine = chain_resource(sims, "term-1")
    world.machines[doomed] = machine
    restored, machine = chain_resource(sims, "rest-1")
    world.machines[restored] = machine
    updated, machine = chain_resource(sims, "upd-1")
    world.machines[updated] = machine
    world.orders = {
        W.AZURE_ORDER_UUID: ("Create", W.AZURE_RESOURCE_UUID, "done"),
        order(sims, W.AZURE_OFFERING_UUID, "Terminate", doomed): ("Terminate", doomed, "done"),
        order(sims, W.AZURE_OFFERING_UUID, "Restore", restored): ("Restore", restored, "done"),
        order(sims, W.AZURE_OFFERING_UUID, "Update", updated, limits={"cpu": 4, "ram": 8192, "disk": 30720}):
            ("Update", updated, "erred"),
    }
    return world


def report_azure(tmp_path: Path, sims: Sims) -> World:
    """Two machines to bill: one with nothing stored this month, one whose stored cpu is higher than
    its machine measures (a decrease the pass must refuse); a foreign machine beside them."""
    sims.waldur.app.reset("empty")
    world = World("report-azure", "azure", PLAYBOOKS["report"], write_config(tmp_path, sims, "azure"))
    world.foreign = foreign_vm(sims)
    fresh, machine = chain_resource(sims, "bill-1")
    world.machines[fresh] = machine
    stored, machine = chain_resource(sims, "bill-2")
    world.machines[stored] = machine
    seed_usage(sims, stored, {"cpu": Decimal("8")})
    world.usage_before = usage_of(sims, [fresh, stored])
    return world


def report_do(tmp_path: Path, sims: Sims) -> World:
    world = World("report-digitalocean", "digitalocean", PLAYBOOKS["report"], write_config(tmp_path, sims, "digitalocean"))
    world.foreign = foreign_droplets(sims)
    resource, droplet = droplet_resource(sims, "bill-1")
    world.machines[resource] = droplet
    return world


def membership_do(tmp_path: Path, sims: Sims) -> World:
    """A paused resource whose droplet runs and a running one whose droplet is off."""
    sims.waldur.app.reset("empty")
    world = World("membership_sync-digitalocean", "digitalocean", PLAYBOOKS["membership_sync"],
                  write_config(tmp_path, sims, "digitalocean"))
    world.foreign = foreign_droplets(sims)
    paused, droplet = droplet_resource(sims, "paused-1", paused=True)
    world.machines[paused] = droplet
    running, droplet = droplet_resource(sims, "run-1", status="off")
    world.machines[running] = droplet
    return world


def membership_azure(tmp_path: Path, sims: Sims) -> World:
    sims.waldur.app.reset("empty")
    world = World("membership_sync-azure", "azure", PLAYBOOKS["membership_sync"], write_config(tmp_path, sims, "azure"))
    world.foreign = foreign_vm(sims)
    paused, machine = chain_resource(sims, "paused-1", paused=True)
    world.machines[paused] = machine
    running, machine = chain_resource(sims, "run-1", power_state="deallocated")
    world.machines[running] = machine
    return world


def audit_do(tmp_path: Path, sims: Sims) -> World:
    """Findings (a vanished machine, size drift, an orphan) for a read-only audit: nothing may be
    written to the cloud whatever a read answers."""
    sims.waldur.app.reset("empty")
    world = World("audit-digitalocean", "digitalocean", PLAYBOOKS["audit"], write_config(tmp_path, sims, "digitalocean"),
                  extra_vars={"audit_report_dir": str(tmp_path / "reports")}, cloud_writes=False, clean_rc=2)
    world.foreign = foreign_droplets(sims)
    drifted, droplet = droplet_resource(sims, "drift-1", size=BIG)
    world.machines[drifted] = droplet
    sims.waldur.app.seed_resource(W.DO_OFFERING_UUID, "gone-1", backend_id="987654321", limits=dict(W.DO_PLAN_QUOTAS))
    orphan, droplet = droplet_resource(sims, "orphan-1", register=False)
    world.machines[orphan] = droplet
    return world


def audit_azure(tmp_path: Path, sims: Sims) -> World:
    sims.waldur.app.reset("empty")
    world = World("audit-azure", "azure", PLAYBOOKS["audit"], write_config(tmp_path, sims, "azure"),
                  extra_vars={"audit_report_dir": str(tmp_path / "reports")}, cloud_writes=False, clean_rc=2)
    world.foreign = foreign_vm(sims)
    kept, machine = chain_resource(sims, "kept-1")
    world.machines[kept] = machine
    orphan, machine = chain_resource(sims, "orphan-1", register=False)
    world.machines[orphan] = machine
    return world


def audit_repair_do(tmp_path: Path, sims: Sims) -> World:
    """A droplet resized outside Waldur, which audit_repair resizes back (a write the clean run
    makes: the resource's own machine only)."""
    sims.waldur.app.reset("empty")
    world = World("audit_repair-digitalocean", "digitalocean", PLAYBOOKS["audit"],
                  write_config(tmp_path, sims, "digitalocean"),
                  extra_vars={"audit_report_dir": str(tmp_path / "reports"), "audit_repair": True}, clean_rc=2)
    world.foreign = foreign_droplets(sims)
    drifted, droplet = droplet_resource(sims, "drift-1", size=BIG)
    world.machines[drifted] = droplet
    return world


def load_components(tmp_path: Path, sims: Sims) -> World:
    return World("load_components-digitalocean", "digitalocean", PLAYBOOKS["load_components"],
                 write_config(tmp_path, sims, "digitalocean"), cloud_writes=False)


WORLDS = {
    "order_process-digitalocean": order_pass_do,
    "order_process-event": lambda tmp_path, sims: order_pass_do(tmp_path, sims, event=True),
    "order_process-azure": order_pass_azure,
    "report-digitalocean": report_do,
    "report-azure": report_azure,
    "membership_sync-digitalocean": membership_do,
    "membership_sync-azure": membership_azure,
    "audit-digitalocean": audit_do,
    "audit-azure": audit_azure,
    "audit_repair-digitalocean": audit_repair_do,
    "load_components-digitalocean": load_components,
}


# ---- usage --------------------------------------------------------------------------------------

def seed_usage(sims: Sims, resource_uuid: str, amounts: dict) -> None:
    """Usage stored this month, as an earlier report left it."""
    market = sims.waldur.app.market
    with sims.waldur.app.lock:
        moment = datetime.datetime.now(datetime.timezone.utc)
        market.set_usage(market.resources[resource_uuid], [{"type": key, "amount": value} for key, value in amounts.items()],
                         moment.date().replace(day=1), moment)


def usage_of(sims: Sims, resource_uuids) -> dict:
    """``{(resource uuid, component): Decimal}`` Waldur stores this month."""
    from decimal import Decimal
    stored = {}
    for resource_uuid in resource_uuids:
        for record in sims.waldur.app.usages(resource_uuid, this_month()):
            stored[(resource_uuid, record["type"])] = Decimal(str(record["usage"]))
    return stored
