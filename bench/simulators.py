"""The bundled simulators as the benchmark runs them: one process each, bulk seeding.

``python -m bench.simulators <waldur|digitalocean|azure> --latency 0.02 [--option k=v]``
starts one simulator on 127.0.0.1 (Azure over TLS, as its SDK requires), prints one JSON
line with its URL (and CA bundle), and serves until SIGTERM. Each runs in its own process
so that the simulators' own CPU time never competes with the pass under test for one GIL.

Bench-only additions, all under the simulators' ``/_sim/`` control API (never logged,
never delayed):

* ``POST /_sim/bench/orders`` (Waldur): ``{offering_uuid, n, name_prefix, attributes,
  limits}`` seeds ``n`` Create orders in ``pending-provider``, each with its new
  ``Creating`` resource.
* ``POST /_sim/bench/resources`` (Waldur): ``{offering_uuid, items: [{name, backend_id, uuid?}],
  limits}`` seeds ``OK`` resources.
* ``POST /_sim/bench/droplets`` (DigitalOcean): ``{n, name_prefix, resource_uuids?}`` seeds active
  droplets (the i-th tagged ``waldur-resource:<resource_uuids[i]>`` when given) and returns their ids;
  one request and one lock for all of them, so 10,000 take seconds.
* ``POST /_sim/bench/vms`` (Azure): ``{names: [...], size, location, resource_uuids?, offering_uuid?}``
  seeds running VMs, each in its own ``group-xxxx-<vm>`` group, or with ``resource_uuids`` in the
  ``group-<uuid>-<vm>`` group the agent builds, every object carrying the owner tags; returns their
  ARM ids.
* ``POST /_sim/bench/pause`` (Waldur): ``{offering_uuid, count}`` pauses the offering's first ``count``
  resources (the membership pass's cycle with some changes).
* ``GET /_sim/bench/droplet_states`` (DigitalOcean), ``GET /_sim/bench/vm_power_states`` (Azure): machines
  by status / power state, the membership pass's outcome.
* ``GET /_sim/bench/counts?since=N`` (all): calls since ``N`` by operation, by method, and
  how many were writes, so the harness never transfers the whole call log.

The Waldur simulator also answers five listings the upstream agent reads and the
collection does not (``marketplace-component-user-usages``, ``marketplace-offering-users``,
``component-user-usage-limits`` and the offering's ``list_project_service_accounts`` /
``list_course_accounts``) with empty pages, as a Waldur whose offering has no per-user usage,
limits, offering users or service accounts does, and upstream membership sync's
``refresh_last_sync``. Without them the upstream agent sees 404s: the report pass retries
each resource ten times five seconds apart, and membership sync skips its last steps, which
would measure the simulator, not the agent.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
from collections import Counter

from werkzeug.wrappers import Request, Response

from tests.simulators.azure import AzureSimulator
from tests.simulators.common import SimulatorServer, json_response
from tests.simulators.digitalocean import DigitalOceanSimulator, catalogue
from tests.simulators.waldur import WaldurSimulator
from tests.simulators.waldur.model import now


EXTRA_LISTINGS = ("user_usages", "offering_users", "service_accounts", "course_accounts", "user_limits",
                  "refresh_last_sync")


def _counts(calls: list[dict]) -> dict:
    return {
        "total": len(calls),
        "writes": sum(1 for call in calls if call["write"]),
        "by_operation": dict(Counter(call["operation"] for call in calls)),
        "by_status": {str(k): v for k, v in Counter(call["status"] for call in calls).items()},
        # time the server spent on the calls, injected latency included
        "server_s": round(sum(call["seconds"] for call in calls), 3),
        "first": calls[0]["time"] - calls[0]["seconds"] if calls else None,
        "last": calls[-1]["time"] if calls else None,
    }


class _BenchControl:
    """``/_sim/bench/...`` handling shared by the three bench simulators."""

    def bench_control(self, request: Request, action: str, payload: dict) -> Response | None:
        return None

    def _control(self, request: Request) -> Response:
        if request.path.startswith("/_sim/bench/"):
            action = request.path[len("/_sim/bench/"):].strip("/")
            if action == "counts":
                since = int(request.args.get("since", 0))
                with self.lock:
                    calls = list(self.calls[since:])
                return json_response(dict(_counts(calls), next=since + len(calls)))
            try:
                response = self.bench_control(request, action, request.get_json(silent=True) or {})
            except (KeyError, TypeError, ValueError) as exc:
                return json_response({"detail": "bad bench request: %r" % exc}, 400)
            if response is not None:
                return response
            return json_response({"detail": "unknown bench action %s" % action}, 404)
        return super()._control(request)


class BenchWaldur(_BenchControl, WaldurSimulator):
    """The Waldur simulator plus bulk seeding and the listings only upstream reads."""

    def __init__(self, *args, listings: str = ",".join(EXTRA_LISTINGS), **kwargs):
        self.extra_listings = [name for name in str(listings).split(",") if name]
        unknown = set(self.extra_listings) - set(EXTRA_LISTINGS)
        if unknown:
            raise ValueError("unknown listings %s; known: %s" % (sorted(unknown), ", ".join(EXTRA_LISTINGS)))
        kwargs.setdefault("max_exchanges", 200)  # the contract tests' record; keep it small
        super().__init__(*args, **kwargs)

    def routes(self):
        e = self._endpoint
        offering = "/api/marketplace-provider-offerings/<uuid>/"
        extra = {
            "user_usages": ("GET", "/api/marketplace-component-user-usages/", "user_usages.list",
                            e(self._empty_list)),
            "offering_users": ("GET", "/api/marketplace-offering-users/", "offering_users.list",
                               e(self._empty_list)),
            "service_accounts": ("GET", offering + "list_project_service_accounts/",
                                 "offering.list_project_service_accounts", e(self._empty_offering_list)),
            "course_accounts": ("GET", offering + "list_course_accounts/", "offering.list_course_accounts",
                                e(self._empty_offering_list)),
            # membership sync: per-user limits (none here), and the mark of a fully synced resource
            "user_limits": ("GET", "/api/component-user-usage-limits/", "user_limits.list", e(self._empty_list)),
            "refresh_last_sync": ("POST", "/api/marketplace-provider-resources/<uuid>/refresh_last_sync/",
                                  "resources.refresh_last_sync", e(self._refresh_last_sync)),
        }
        return super().routes() + [extra[name] for name in self.extra_listings]

    def _empty_list(self, request: Request, user: dict) -> Response:
        return self._page(request, [], dict)

    def _empty_offering_list(self, request: Request, user: dict, uuid: str) -> Response:
        self._provider_offering(user, uuid)
        return self._page(request, [], dict)

    def _refresh_last_sync(self, request: Request, user: dict, uuid: str) -> Response:
        """200 with a status, as Waldur answers; the resource's ``last_sync`` becomes now."""
        resource = self._provider_resource(user, uuid)
        resource["last_sync"] = now()
        return json_response({"status": "OK"}, 200)

    def bench_control(self, request: Request, action: str, payload: dict) -> Response | None:
        if action == "orders" and request.method == "POST":
            offering_uuid = payload["offering_uuid"]
            prefix = payload.get("name_prefix", "bench")
            limits = payload.get("limits") or {}
            uuids = []
            with self.lock:
                for index in range(int(payload["n"])):
                    attributes = dict(payload.get("attributes") or {}, name="%s-%d" % (prefix, index))
                    order = self.market.seed_order(offering_uuid, type="Create", state="pending-provider",
                                                   attributes=attributes, limits=dict(limits))
                    uuids.append(order["uuid"])
            return json_response({"orders": uuids}, 201)
        if action == "resources" and request.method == "POST":
            offering_uuid = payload["offering_uuid"]
            limits = payload.get("limits") or {}
            uuids = []
            with self.lock:
                for item in payload["items"]:
                    resource = self.market.seed_resource(offering_uuid, item["name"], backend_id=item["backend_id"],
                                                         limits=dict(limits), attributes=item.get("attributes"),
                                                         uuid=item.get("uuid"))
                    uuids.append(resource["uuid"])
            return json_response({"resources": uuids}, 201)
        if action == "pause" and request.method == "POST":
            # The membership pass's "some changes" cycle: Waldur pauses the first ``count``
            # resources of the offering (by creation), so their machines must be shut down.
            offering_uuid = payload["offering_uuid"]
            with self.lock:
                chosen = sorted((resource for resource in self.market.resources.values()
                                 if resource["offering_uuid"] == offering_uuid), key=lambda item: item["seq"])
                chosen = chosen[:int(payload["count"])]
                for resource in chosen:
                    resource["paused"] = True
            return json_response({"paused": [resource["uuid"] for resource in chosen]})
        if action == "orders_by_state":
            with self.lock:
                return json_response(dict(Counter(order["state"] for order in self.market.orders.values())))
        if action == "usage_count":
            with self.lock:
                return json_response({"usages": len(self.market.usages)})
        return None


class BenchDigitalOcean(_BenchControl, DigitalOceanSimulator):
    """The DigitalOcean simulator plus bulk droplet seeding."""

    def bench_control(self, request: Request, action: str, payload: dict) -> Response | None:
        if action == "droplets" and request.method == "POST":
            prefix = payload.get("name_prefix", "bench")
            owners = payload.get("resource_uuids") or []
            return json_response({"droplets": self.seed_droplets(prefix, int(payload["n"]), owners,
                                                                 list(payload.get("tags", ())))}, 201)
        if action == "droplet_count":
            with self.lock:
                return json_response({"droplets": len(self._droplets)})
        if action == "droplet_states":
            with self.lock:
                self._advance(read=True)
                return json_response(dict(Counter(droplet["status"] for droplet in self._droplets.values())))
        return None

    def seed_droplets(self, prefix: str, n: int, owners: list, tags: list) -> list:
        """``seed_droplet`` n times under one lock, without rendering each droplet's API view
        (a deep copy per droplet that took most of the time of seeding 10,000)."""
        size = catalogue.SIZES_BY_SLUG["s-1vcpu-1gb"]
        image = catalogue.find_image("ubuntu-22-04-x64")
        ids = []
        with self.lock:
            for index in range(n):
                droplet_tags = tags + (["waldur-resource:" + owners[index]] if owners else [])
                for tag in droplet_tags:
                    self._ensure_tag(tag)
                droplet = self._new_droplet("%s-%d" % (prefix, index), "ams3", size, image, droplet_tags,
                                            ipv6=False, backups=False, monitoring=False, vpc_uuid=None)
                self._droplet_private[droplet["id"]] = {"user_data": None, "ssh_key_ids": []}
                droplet["status"] = "active"
                self._assign_networks(droplet)
                ids.append(droplet["id"])
        return ids


class BenchAzure(_BenchControl, AzureSimulator):
    """The Azure simulator plus bulk VM seeding."""

    def bench_control(self, request: Request, action: str, payload: dict) -> Response | None:
        if action == "vms" and request.method == "POST":
            owners = payload.get("resource_uuids") or [None] * len(payload["names"])
            ids = []
            for name, owner in zip(payload["names"], owners):
                tags = {"waldur-resource-uuid": owner, "waldur-offering-uuid": payload["offering_uuid"]} \
                    if owner else None
                ids.append(self.seed_vm(name, "group-%s-%s" % (owner, name) if owner else None,
                                        size=payload.get("size", "Standard_B2s"),
                                        location=payload.get("location", "westeurope"),
                                        os_disk_delete_option="Delete", nic_delete_option="Delete",
                                        chain_tags=tags, group_tags=tags))
            return json_response({"vms": ids}, 201)
        if action == "vm_count":
            with self.lock:
                count = sum(1 for record in self.records.values() if record.get("kind") == "vm")
            return json_response({"vms": count})
        if action == "vm_power_states":
            with self.lock:
                self.lro.advance()
                states = Counter(record.get("power") for record in self.records.values() if record.get("kind") == "vm")
            return json_response({str(state): count for state, count in states.items()})
        return None


BENCH_SIMULATORS = {"waldur": BenchWaldur, "digitalocean": BenchDigitalOcean, "azure": BenchAzure}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simulators")
    parser.add_argument("name", choices=sorted(BENCH_SIMULATORS))
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every API call")
    parser.add_argument("--preset", default=None,
                        help="seed preset (default: Waldur 'empty', the clouds 'default')")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--tls-dir", default=None, help="where the Azure CA bundle is written")
    args = parser.parse_args(argv)

    options = dict(item.split("=", 1) for item in args.option)
    preset = args.preset or ("empty" if args.name == "waldur" else "default")
    app = BENCH_SIMULATORS[args.name](preset=preset, latency=args.latency, **options)
    ssl_context, ca_path = None, None
    if args.name == "azure":
        from tests.simulators.tls import make_tls
        ssl_context, ca_path = make_tls(args.tls_dir or tempfile.mkdtemp(prefix="bench-azure-ca-"))
    server = SimulatorServer(app, ssl_context=ssl_context).start()
    print(json.dumps({"simulator": args.name, "url": server.url, "ca_bundle": ca_path}), flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
