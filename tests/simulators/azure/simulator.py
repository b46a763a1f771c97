"""The Azure simulator: Entra ID (AAD) token endpoint and Azure Resource Manager
(resource groups, Microsoft.Network, Microsoft.Compute) on one HTTPS port.

The real ``azure-identity`` and ``azure-mgmt-*`` SDKs run unmodified against it:
point the credential's ``authority`` (with ``disable_instance_discovery=True``)
and the clients' ``base_url`` at the server URL and trust its CA.

Options (constructor keywords; strings are accepted, as from ``--option k=v``):

* ``lro``: ``instant`` (default) or ``realistic`` (see :mod:`.lro`);
* ``retry_after``: the integer ``Retry-After`` of LRO responses (default 1;
  0 makes the SDK fall back to its ``polling_interval``);
* ``lro_seconds``: how long a realistic operation stays ``InProgress`` (2);
* ``slow_operations``: ``{operation: seconds}``, operations (``vms.put``, ``virtual_networks.put``,
  ...) that stay ``InProgress`` that long whatever the ``lro`` mode: a pass's deadline can then
  fall in the middle of one; :meth:`AzureSimulator.finish_operations` ends them at once;
* ``page_size``: items per page of list responses (50);
* ``token_lifetime``: seconds an access token is valid (3599);
* ``compute_id_casing``: ``canonical`` (default) or ``upper_rg``, which makes the
  Compute provider upper-case the resource-group segment of VM and disk ids,
  as real Azure often does;
* ``vcpu_quotas``: the limits of the vCPU quotas, ``{name: limit}`` with ``name`` ``cores`` (the
  total regional vCPUs) or a VM family as ARM's Resource Skus name it (``standardBSFamily``; the
  table is ``presets.VM_SIZES``), for every location, or ``<location>/<name>`` for one; as text
  (``--option``) ``cores=10,standardBSFamily=4``. Unset quotas are ``presets.DEFAULT_VCPU_QUOTA``
  (100,000). Usage - List (``usages.list``) answers them with their use (every machine of the
  location counts, running or deallocated, as in ARM), and a VM PUT whose vCPUs would exceed the
  family's quota or the regional total is refused as ARM refuses it: 409 ``OperationNotAllowed``,
  "Operation could not be completed as it results in exceeding approved standardBSFamily Cores
  quota. Additional details - ... Current Limit: 4, Current Usage: 4, Additional Required: 2 ..."
  (``Total Regional Cores`` for the regional total). ``seed_vm`` bypasses the quotas.

All of them are attributes too (``app.lro_mode``, ``app.retry_after``, ...),
settable at run time or with ``POST /_sim/options``; ``reset()`` restores the
constructor values.

Operation names (call log and fault injection): ``openid``, ``token``, ``msi.app_service`` and
``msi.imds`` (the managed-identity endpoints: ``/msi/token`` as App Service's IDENTITY_ENDPOINT,
``/metadata/identity/oauth2/token`` as IMDS behind AZURE_POD_IDENTITY_AUTHORITY_HOST),
``subscriptions.get``, ``subscriptions.list_locations``, ``resource_groups.{list,get,head,put,delete}``,
``operations.get`` (Azure-AsyncOperation polls), ``operation_results.get`` (Location polls),
``{virtual_networks,subnets,public_ips,nsgs,security_rules,nics}.{list,get,put,delete}``,
``{virtual_networks,public_ips,nsgs,nics}.list_all`` (the subscription's, as ARM's List All),
``vms.{list,list_all,list_by_location,get,put,delete,instance_view,vm_sizes,deallocate,start,power_off,restart}``,
``vm_sizes.list``, ``skus.list``, ``usages.list`` (the vCPU quotas of a location),
``vm_images.{list,get}`` (a marketplace image's versions in a location),
``disks.{list,list_all,get,update,delete}``, ``resources.{list,list_by_group}``,
``tags.update_at_scope`` (ARM's Tags API on a group or a resource: :mod:`.tags`).

Subscriptions: only the preset's exists (``presets.SUBSCRIPTION_ID``); as ARM, any other answers
404 ``SubscriptionNotFound`` and a malformed id 400 ``InvalidSubscriptionId``, on every call under it.

Paging: every list answers ``page_size`` items a page with an absolute ``nextLink`` (carrying
``$skiptoken``) while more remain, as ARM does; 50 is what Compute's List All pages by (the
first page of a subscription's machines holds 50). The SDK's ``ItemPaged`` follows ``nextLink``.

Tags: every object but a subnet (ARM has no tags on subnets) stores the ``tags`` of its PUT
(a PUT replaces them, a disk PATCH too) and returns them. ARM does not copy a VM's tags to the
OS disk it makes; neither does the simulator. Resource groups and resources can be listed by
tag: ``$filter=tagName eq 'k' and tagValue eq 'v'`` (or ``tagName eq 'k'``; tag names compare
case-insensitively, values exactly); a tag-filtered resource list leaves the tags out of its
items, as ARM does. ``$expand=createdTime`` adds each item's ``createdTime``.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Callable

from werkzeug.wrappers import Request, Response

from tests.simulators.azure import presets
from tests.simulators.azure.aad import (AadError, TokenAuthority, aad_error_body, certificate_part,
                                        client_certificate, openid_configuration)
from tests.simulators.azure.arm import (STATUS_CODES, ArmError, CaseInsensitiveMap, new_guid,
                                        normalize_location, now_iso, page, parse_filter)
from tests.simulators.azure.compute import ComputeProvider
from tests.simulators.azure.lro import LRO_MODES, LroEngine, LroFailure, Operation
from tests.simulators.azure.network import NetworkProvider
from tests.simulators.azure.tags import TagsProvider
from tests.simulators.common import Simulator, json_response

AAD_OPERATIONS = frozenset({"openid", "token", "msi.app_service", "msi.imds"})
# record kind -> ARM type of the objects a resource list returns
GENERIC_TYPES = {
    "virtual_network": "Microsoft.Network/virtualNetworks",
    "public_ip": "Microsoft.Network/publicIPAddresses",
    "nsg": "Microsoft.Network/networkSecurityGroups",
    "nic": "Microsoft.Network/networkInterfaces",
    "vm": "Microsoft.Compute/virtualMachines",
    "disk": "Microsoft.Compute/disks",
}
COMPUTE_ID_CASINGS = ("canonical", "upper_rg")

S = "/subscriptions/<sub>"
SUBSCRIPTION_ID_FORM = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
RG = S + "/resourceGroups/<rg>"


def parse_vcpu_quotas(value) -> dict[str, int]:
    """The option ``vcpu_quotas``: a mapping, or ``name=limit`` pairs separated by commas, with
    lower-case keys (``cores``, ``standardbsfamily``, ``westeurope/cores``)."""
    if isinstance(value, str):
        pairs = [item.split("=", 1) for item in value.split(",") if item.strip()]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError("vcpu_quotas must be name=limit pairs separated by commas, e.g. cores=10,standardBSFamily=4")
        value = dict((name.strip(), limit.strip()) for name, limit in pairs)
    if not isinstance(value, dict):
        raise ValueError("vcpu_quotas must map quota names (cores, a VM family) to limits")
    quotas = {}
    for name, limit in value.items():
        location, _slash, quota = str(name).rpartition("/")
        key = (normalize_location(location) + "/" if location else "") + quota.strip().lower()
        quotas[key] = int(limit)
        if quotas[key] < 0:
            raise ValueError(f"vcpu_quotas: {name} must not be negative")
    return quotas


class AzureSimulator(NetworkProvider, ComputeProvider, TagsProvider, Simulator):
    name = "azure"

    def __init__(self, preset: str | None = "default", latency: float = 0.0, **options: Any):
        self.tokens = TokenAuthority()
        self.tokens.register(presets.TENANT_ID, presets.CLIENT_ID, presets.CLIENT_SECRET,
                             presets.SERVICE_PRINCIPAL_OBJECT_ID)
        # The service principal's certificate (key and certificate, PEM) and federated credential.
        self.client_certificate = client_certificate()
        self.tokens.register_certificate(presets.CLIENT_ID, certificate_part(self.client_certificate))
        self.tokens.register_federated(presets.CLIENT_ID, presets.FEDERATED_ISSUER, presets.FEDERATED_SUBJECT)
        self.tokens.register_managed_identity(presets.TENANT_ID, None, presets.SYSTEM_IDENTITY_OBJECT_ID)
        self.tokens.register_managed_identity(presets.TENANT_ID, presets.USER_IDENTITY_CLIENT_ID,
                                              presets.USER_IDENTITY_OBJECT_ID)
        self.lro = LroEngine()
        self._local = threading.local()
        self.records: dict[str, dict] = {}
        self.children: dict[str, dict[str, None]] = {}
        super().__init__(preset, latency, **options)
        self._map = CaseInsensitiveMap(self._map)

    # ---- options ------------------------------------------------------------------------
    def _apply_options(self, options: dict) -> None:
        if "lro" in options:
            mode = str(options["lro"])
            if mode not in LRO_MODES:
                raise ValueError(f"lro must be one of {LRO_MODES}, not {mode!r}")
            self.lro_mode = mode
        if "retry_after" in options:
            self.retry_after = int(options["retry_after"])  # the SDK crashes on fractions
        if "lro_seconds" in options:
            self.lro_seconds = float(options["lro_seconds"])
        if "slow_operations" in options:
            slow = options["slow_operations"] or {}
            if not isinstance(slow, dict):
                raise ValueError("slow_operations must map operation names to seconds")
            self.slow_operations = {str(name): float(seconds) for name, seconds in slow.items()}
        if "page_size" in options:
            self.page_size = max(1, int(options["page_size"]))
        if "token_lifetime" in options:
            self.tokens.lifetime = int(options["token_lifetime"])
        if "compute_id_casing" in options:
            casing = str(options["compute_id_casing"])
            if casing not in COMPUTE_ID_CASINGS:
                raise ValueError(f"compute_id_casing must be one of {COMPUTE_ID_CASINGS}")
            self.compute_id_casing = casing
        if "vcpu_quotas" in options:
            self.vcpu_quotas = parse_vcpu_quotas(options["vcpu_quotas"])

    def reset_state(self, preset: str | None) -> None:
        preset = preset or "default"
        if preset not in presets.PRESETS:
            raise ValueError(f"unknown Azure preset {preset!r}; known: {presets.PRESETS}")
        self.lro_mode, self.retry_after, self.lro_seconds = "instant", 1, 2.0
        self.slow_operations: dict[str, float] = {}
        self.page_size, self.compute_id_casing = 50, "canonical"
        self.vcpu_quotas: dict[str, int] = {}
        self.tokens.lifetime = 3599
        self._apply_options(self.options)
        self.records.clear()
        self.children.clear()
        self.callers: set[str] = set()
        self.lro.clear()
        self._refs: dict[str, list[tuple[str, str]]] = {}
        self._ip_counter = 0
        if preset == "mastermind":
            for name, group, power, nsg in presets.MASTERMIND_VMS:
                self.seed_vm(name, group, power_state=power, nsg_name=nsg,
                             allowed_ssh_ranges=["0.0.0.0/0"] if nsg else None)

    # ---- routing ------------------------------------------------------------------------
    def routes(self):
        arm = [
            ("GET", S, "subscriptions.get", self._get_subscription),
            ("GET", S + "/locations", "subscriptions.list_locations", self._list_locations),
            ("GET", S + "/resourceGroups", "resource_groups.list", self._list_groups),
            ("GET", S + "/resources", "resources.list", self._list_resources),
            ("GET", RG + "/resources", "resources.list_by_group", self._list_resources),
            # HEAD before GET: werkzeug adds HEAD to GET rules, the first match wins.
            ("HEAD", RG, "resource_groups.head", self._head_group),
            ("GET", RG, "resource_groups.get", self._get_group),
            ("PUT", RG, "resource_groups.put", self._put_group),
            ("DELETE", RG, "resource_groups.delete", self._delete_group),
            ("GET", S + "/operationResults/<op_id>", "operation_results.get", self._get_operation_result),
            ("GET", S + "/providers/<provider>/locations/<loc>/operations/<op_id>",
             "operations.get", self._get_operation),
            ("GET", S + "/providers/<provider>/locations/<loc>/operationResults/<op_id>",
             "operation_results.get", self._get_operation_result),
        ] + self.network_routes() + self.compute_routes() + self.tags_routes()
        return [
            ("GET", "/<tenant>/v2.0/.well-known/openid-configuration", "openid", self._openid),
            ("POST", "/<tenant>/oauth2/v2.0/token", "token", self._token),
            ("GET", "/msi/token", "msi.app_service", self._app_service_token),
            ("GET", "/metadata/identity/oauth2/token", "msi.imds", self._imds_token),
        ] + [(method, rule, op, self._arm(handler)) for method, rule, op, handler in arm]

    def _arm(self, handler: Callable) -> Callable:
        """Every ARM call: bearer token, subscription, api-version, then the handler."""
        def wrapped(request: Request, **args):
            with self.lock:
                try:
                    claims = self.tokens.verify(request.headers.get("Authorization"), presets.TENANT_ID)
                    # who called ARM (object ids), so a test tells which identity signed in
                    self.callers.add(claims.get("oid"))
                    # as ARM: a malformed id is a 400, any other subscription than the preset's
                    # (one it does not know, or one the caller has no role on) a 404
                    if not SUBSCRIPTION_ID_FORM.match(args.get("sub", "")):
                        raise ArmError(400, "InvalidSubscriptionId",
                                       f"The provided subscription identifier '{args.get('sub')}' is malformed "
                                       "or invalid.")
                    if args.get("sub", "").lower() != presets.SUBSCRIPTION_ID:
                        raise ArmError(404, "SubscriptionNotFound",
                                       f"The subscription '{args.get('sub')}' could not be found.")
                    if not request.args.get("api-version"):
                        raise ArmError(400, "MissingApiVersionParameter",
                                       "The api-version query parameter (?api-version=) is "
                                       "required for all requests.")
                    self.lro.advance()
                    return handler(request, **args)
                except ArmError as exc:
                    return self._arm_error(exc)
        return wrapped

    def _arm_error(self, exc: ArmError) -> Response:
        headers = {}
        if exc.status == 401:
            headers["WWW-Authenticate"] = (
                'Bearer authorization_uri="https://login.microsoftonline.com/'
                f'{presets.TENANT_ID}", error="invalid_token", '
                f'error_description="{exc.message.replace(chr(34), chr(39))}"')
        return json_response(exc.body(), exc.status, headers)

    # ---- base-class hooks: the service's own error shapes -------------------------------
    def __call__(self, environ, start_response):
        self._local.operation = None
        return super().__call__(environ, start_response)

    def _injected(self, operation: str):
        self._local.operation = operation
        return super()._injected(operation)

    def _is_aad(self) -> bool:
        return getattr(self._local, "operation", None) in AAD_OPERATIONS

    def error_response(self, status: int, message: str, code: str | None = None,
                       headers: dict | None = None) -> Response:
        if self._is_aad():
            error = {429: "temporarily_unavailable", 503: "temporarily_unavailable",
                     400: "invalid_request", 401: "invalid_client"}.get(status, "server_error")
            return json_response(aad_error_body(error, 90033 if status >= 500 else 90002, message),
                                 status, headers)
        if code in (None, "injected", "not_found", "server_error") or not code[:1].isupper():
            code = STATUS_CODES.get(status, "InternalServerError")
        return json_response(ArmError(status, code, message).body(), status, headers)

    def throttle_response(self, retry_after: int) -> Response:
        headers = {"Retry-After": str(int(retry_after))}
        if self._is_aad():
            return json_response(aad_error_body("temporarily_unavailable", 50196,
                                                "The server is temporarily unavailable."),
                                 429, headers)
        headers["x-ms-ratelimit-remaining-subscription-reads"] = "0"
        return json_response(ArmError(
            429, "SubscriptionRequestsThrottled",
            f"Number of requests for subscription '{presets.SUBSCRIPTION_ID}' exceeded the limit. "
            f"Please try again after '{int(retry_after)}' seconds.").body(), 429, headers)

    def decorate(self, request: Request, response: Response) -> Response:
        if not self._is_aad():
            request_id = new_guid()
            response.headers.setdefault("x-ms-request-id", request_id)
            response.headers.setdefault("x-ms-correlation-request-id", request_id)
        return response

    # ---- Entra ID -----------------------------------------------------------------------
    def _openid(self, request: Request, tenant: str) -> Response:
        try:
            self.tokens.check_tenant(tenant)
        except AadError as exc:
            return json_response(exc.body(), exc.status)
        return json_response(openid_configuration(request.host_url.rstrip("/"), tenant))

    def _token(self, request: Request, tenant: str) -> Response:
        form = request.form.to_dict()
        if request.authorization and request.authorization.type == "basic":  # client_secret_basic
            form.setdefault("client_id", request.authorization.username or "")
            form.setdefault("client_secret", request.authorization.password or "")
        try:
            return json_response(self.tokens.issue(tenant, form, request.base_url),
                                 headers={"Cache-Control": "no-store, no-cache"})
        except AadError as exc:
            return json_response(exc.body(), exc.status)

    def _app_service_token(self, request: Request) -> Response:
        """App Service's identity endpoint: ``X-IDENTITY-HEADER`` must be the host's IDENTITY_HEADER."""
        if request.headers.get("X-IDENTITY-HEADER") != presets.IDENTITY_HEADER:
            return json_response({"statusCode": 400, "message": "The X-IDENTITY-HEADER is missing or invalid."},
                                 400)
        if request.args.get("api-version") != "2019-08-01":
            return json_response({"statusCode": 400, "message": "Unsupported api-version."}, 400)
        try:
            body = self.tokens.managed_identity_token(request.args.get("client_id"),
                                                      request.args.get("resource", ""), request.host_url)
        except KeyError:
            return json_response({"statusCode": 400, "message": "No User Assigned or Delegated Managed Identity "
                                  "found for specified ClientId/ResourceId/PrincipalId."}, 400)
        except ValueError:
            return json_response({"statusCode": 500, "message": "An unexpected error occured while fetching the "
                                  "AAD Token."}, 500)
        body.pop("expires_in"), body.pop("ext_expires_in"), body.pop("not_before")  # App Service's shape
        return json_response(body)

    def _imds_token(self, request: Request) -> Response:
        """IMDS: ``Metadata: true`` required, as on every Azure VM."""
        if request.headers.get("Metadata", "").lower() != "true":
            return json_response({"error": "invalid_request",
                                  "error_description": "Required metadata header not specified"}, 400)
        try:
            body = self.tokens.managed_identity_token(request.args.get("client_id"),
                                                      request.args.get("resource", ""), request.host_url)
        except KeyError:
            return json_response({"error": "invalid_request", "error_description": "Identity not found"}, 400)
        except ValueError:
            return json_response({"error": "invalid_resource", "error_description": "AADSTS500011: The resource "
                                  "principal was not found in the tenant."}, 400)
        return json_response(body)

    # ---- store --------------------------------------------------------------------------
    def _add(self, record: dict) -> dict:
        """Insert or replace a record under its id (case-insensitive key)."""
        key = record["id"].lower()
        record["key"] = key
        previous = self.records.get(key)
        if previous is not None:
            self._unindex(previous)
        self.records[key] = record
        parent = record.get("parent")
        if parent:
            self.children.setdefault(parent, {})[key] = None
        for target, role, source in self._references_of(record):
            self._refs.setdefault(target.lower(), []).append((role, source))
        return record

    def _remove(self, key: str) -> None:
        """Drop a record and everything under it (no checks: cascades and helpers)."""
        for child in list(self.children.get(key, {})):
            self._remove(child)
        self.children.pop(key, None)
        record = self.records.pop(key, None)
        if record is not None:
            self._unindex(record)
            if record.get("parent") in self.children:
                self.children[record["parent"]].pop(key, None)

    def _unindex(self, record: dict) -> None:
        for target, role, source in self._references_of(record):
            users = self._refs.get(target.lower(), [])
            if (role, source) in users:
                users.remove((role, source))

    def _children(self, key: str, kind: str | None = None) -> list[dict]:
        found = [self.records[k] for k in self.children.get(key, {}) if k in self.records]
        return [r for r in found if kind is None or r["kind"] == kind]

    def _lookup(self, arm_id: str | None) -> dict | None:
        return self.records.get(str(arm_id).lower()) if arm_id else None

    def _group_key(self, name: str) -> str:
        return f"/subscriptions/{presets.SUBSCRIPTION_ID}/resourcegroups/{name}".lower()

    def _require_group(self, name: str, write: bool = False) -> dict:
        group = self.records.get(self._group_key(name))
        if group is None:
            raise ArmError(404, "ResourceGroupNotFound", f"Resource group '{name}' could not be found.")
        if write and group["provisioning"] == "Deleting":
            raise ArmError(409, "ResourceGroupBeingDeleted",
                           f"The resource group '{group['name']}' is in deprovisioning state and "
                           "cannot perform this operation.")
        return group

    def _resource_id(self, group: dict, provider: str, *type_and_names: str) -> str:
        return f"{group['id']}/providers/{provider}/" + "/".join(type_and_names)

    def _not_found(self, group: dict, provider: str, *type_and_names: str) -> ArmError:
        return ArmError(404, "ResourceNotFound",
                        f"The Resource '{provider}/{'/'.join(type_and_names)}' under resource "
                        f"group '{group['name']}' was not found. For more details please go to "
                        "https://aka.ms/ARMResourceNotFoundFix")

    def _location(self, body: dict, resource_type: str, required: bool = True) -> str:
        location = normalize_location(body.get("location"))
        if not location:
            if not required:
                return ""
            raise ArmError(400, "LocationRequired",
                           "The location property is required for this definition.")
        if location not in presets.LOCATIONS:
            raise ArmError(400, "LocationNotAvailableForResourceType",
                           f"The provided location '{body.get('location')}' is not available for "
                           f"resource type '{resource_type}'. List of available regions for the "
                           f"resource type is '{','.join(presets.LOCATIONS)}'.")
        return location

    @staticmethod
    def _json(request: Request) -> dict:
        try:
            body = json.loads(request.get_data(as_text=True) or "{}")
        except ValueError as exc:
            raise ArmError(400, "InvalidRequestContent",
                           f"The request content was invalid and could not be deserialized: {exc}.") from None
        if not isinstance(body, dict):
            raise ArmError(400, "InvalidRequestContent",
                           "The request content was invalid and could not be deserialized.")
        return body

    @staticmethod
    def _tags(body: dict) -> dict | None:
        tags = body.get("tags")
        if tags is not None and not isinstance(tags, dict):
            raise ArmError(400, "InvalidRequestContent", "The 'tags' property must be an object.")
        return tags

    @staticmethod
    def _references_of(record: dict):
        """What a record points at, as (target id, role, source id). Roles: ``ipconfig``
        (subnet/public IP used by a NIC IP configuration), ``nic`` (NSG of a NIC),
        ``subnet`` (NSG of a subnet), ``vm`` (NIC used by a VM). Records are replaced,
        never edited, where these fields change, so ``_add``/``_remove`` keep the
        reverse index (``self._refs``) exact."""
        kind = record["kind"]
        if kind == "nic":
            for config in record["ip_configurations"]:
                config_id = f"{record['id']}/ipConfigurations/{config['name']}"
                yield config["subnet"], "ipconfig", config_id
                if config.get("public_ip"):
                    yield config["public_ip"], "ipconfig", config_id
            if record.get("nsg"):
                yield record["nsg"], "nic", record["id"]
        elif kind == "subnet" and record.get("nsg"):
            yield record["nsg"], "subnet", record["id"]
        elif kind == "vm":
            for nic in record["nics"]:
                yield nic["id"], "vm", record["id"]

    def _users(self, key: str, role: str | None = None) -> list[str]:
        return [source for r, source in self._refs.get(key, []) if role is None or r == role]

    # ---- LRO plumbing -------------------------------------------------------------------
    def _begin(self, operation: str, provider: str | None, location: str,
               on_success: Callable[[], None], on_failure: Callable[[], None] | None = None,
               seeded: bool = False) -> Operation:
        slow = self.slow_operations.get(operation)
        if slow is not None:
            return self.lro.begin(operation, provider, location, "realistic", slow, on_success, on_failure, seeded)
        return self.lro.begin(operation, provider, location, self.lro_mode, self.lro_seconds,
                              on_success, on_failure, seeded)

    def finish_operations(self) -> int:
        """End every operation still in progress now (as if their time had come); how many."""
        with self.lock:
            pending = self.lro.pending()
            for operation in pending:
                operation.deadline = 0.0
            self.lro.advance()
            return len(pending)

    def _operation_url(self, request: Request, op: Operation, monitor: bool = False) -> str:
        base = request.host_url.rstrip("/") + f"/subscriptions/{presets.SUBSCRIPTION_ID}"
        version = request.args.get("api-version", "")
        if op.provider is None:
            return f"{base}/operationresults/{op.id}?api-version={version}"
        if op.provider == "Microsoft.Compute":
            url = (f"{base}/providers/Microsoft.Compute/locations/{op.location}/operations/{op.id}"
                   f"?p={op.id[:8]}&api-version={version}")
            return url + "&monitor=true" if monitor else url
        leaf = "operationResults" if monitor else "operations"
        return f"{base}/providers/{op.provider}/locations/{op.location}/{leaf}/{op.id}?api-version={version}"

    def _put_response(self, request: Request, op: Operation, body: dict, created: bool) -> Response:
        headers = {}
        if op.tracked:
            headers["Azure-AsyncOperation"] = self._operation_url(request, op)
            headers["Retry-After"] = str(self.retry_after)
        return json_response(body, 201 if created else 200, headers)

    def _accepted(self, request: Request, op: Operation, location_only: bool = False) -> Response:
        """POST action / DELETE: 200 when already over, else 202 with polling headers."""
        if not op.tracked:
            return json_response(None, 200)
        headers = {"Location": self._operation_url(request, op, monitor=True),
                   "Retry-After": str(self.retry_after)}
        if not location_only:
            headers["Azure-AsyncOperation"] = self._operation_url(request, op)
        return json_response(None, 202, headers)

    def _find_operation(self, op_id: str) -> Operation:
        op = self.lro.operations.get(op_id)
        if op is None:
            raise ArmError(404, "NotFound", f"The operation '{op_id}' could not be found.")
        return op

    def _get_operation(self, request: Request, sub: str, provider: str, loc: str, op_id: str) -> Response:
        op = self._find_operation(op_id)
        if request.args.get("monitor", "").lower() == "true":
            return self._operation_result(request, op)
        body = {"id": request.path, "name": op.id, "status": op.status, "startTime": op.start_time}
        if op.end_time:
            body["endTime"] = op.end_time
        if op.error:
            body["error"] = op.error
        headers = {"Retry-After": str(self.retry_after)} if op.status == "InProgress" else {}
        return json_response(body, 200, headers)

    def _get_operation_result(self, request: Request, sub: str, op_id: str, **_) -> Response:
        return self._operation_result(request, self._find_operation(op_id))

    def _operation_result(self, request: Request, op: Operation) -> Response:
        if op.status == "InProgress":
            return json_response(None, 202, {"Location": request.url,
                                             "Retry-After": str(self.retry_after)})
        if op.status == "Failed":
            return json_response({"error": op.error}, op.failure.status)
        return json_response(None, 200)

    def fail_lro(self, operation: str, code: str = "InternalExecutionError",
                 message: str = "An internal execution error occurred. Please retry later.",
                 times: int = 1, status: int = 409) -> None:
        """Make the next ``times`` long-running ``operation`` calls (e.g. ``vms.put``,
        ``vms.deallocate``, ``resource_groups.delete``) end ``Failed`` with this error;
        ``.result()`` in the SDK raises ``HttpResponseError`` carrying ``code``.
        ``status`` is what a ``Location`` poll returns for it (RG delete)."""
        with self.lock:
            self.lro.fail_next(LroFailure(operation, code, message, status, times))

    # ---- subscription and resource groups -----------------------------------------------
    def _get_subscription(self, request: Request, sub: str) -> Response:
        return json_response({
            "id": f"/subscriptions/{presets.SUBSCRIPTION_ID}",
            "subscriptionId": presets.SUBSCRIPTION_ID, "tenantId": presets.TENANT_ID,
            "displayName": presets.SUBSCRIPTION_NAME, "state": "Enabled",
            "subscriptionPolicies": {"locationPlacementId": "Public_2014-09-01",
                                     "quotaId": "PayAsYouGo_2014-09-01", "spendingLimit": "Off"},
            "authorizationSource": "RoleBased"})

    def _list_locations(self, request: Request, sub: str) -> Response:
        return json_response({"value": [{
            "id": f"/subscriptions/{presets.SUBSCRIPTION_ID}/locations/{name}", "name": name,
            "type": "Region", "displayName": display, "regionalDisplayName": display,
            "metadata": {"regionType": "Physical", "regionCategory": "Recommended"},
        } for name, display in presets.LOCATIONS.items()]})

    def _render_group(self, group: dict) -> dict:
        body = {"id": group["id"], "name": group["name"], "type": "Microsoft.Resources/resourceGroups",
                "location": group["location"], "properties": {"provisioningState": group["provisioning"]}}
        if group.get("tags") is not None:
            body["tags"] = group["tags"]
        return body

    def _list_groups(self, request: Request, sub: str) -> Response:
        wanted = parse_filter(request.args.get("$filter"), allow_type=False)
        groups = [r for r in self.records.values() if r["kind"] == "resource_group" and wanted(r)]
        return json_response(page(request, groups, self.page_size, self._render_group))

    def _list_resources(self, request: Request, sub: str, rg: str | None = None) -> Response:
        """Generic resources (``GenericResourceExpanded``): the top-level objects, subscription-wide
        or of one group; never subnets or rules, which are parts of their parents."""
        parent = self._require_group(rg)["key"] if rg is not None else None
        text = request.args.get("$filter")
        wanted = parse_filter(text, allow_type=True)
        by_tag = bool(text) and "tagname" in text.lower()
        expand = {part.strip().lower() for part in request.args.get("$expand", "").split(",") if part.strip()}
        records = []
        for record in self.records.values():
            if record["kind"] not in GENERIC_TYPES or (parent is not None and record.get("parent") != parent):
                continue
            if wanted(dict(record, type=GENERIC_TYPES[record["kind"]])):
                records.append(record)
        return json_response(page(request, records, self.page_size, lambda record: self._render_generic(
            record, with_tags=not by_tag, created_time="createdtime" in expand)))

    def _render_generic(self, record: dict, with_tags: bool = True, created_time: bool = False) -> dict:
        body = {"id": self._public_id(record), "name": record["name"], "type": GENERIC_TYPES[record["kind"]],
                "location": record["location"]}
        if created_time and record.get("created"):
            body["createdTime"] = record["created"]
        if with_tags and record.get("tags"):
            body["tags"] = dict(record["tags"])
        if record["kind"] == "disk" and record.get("managed_by") in self.records:
            body["managedBy"] = self._public_id(self.records[record["managed_by"]])
        return body

    def _head_group(self, request: Request, sub: str, rg: str) -> Response:
        return json_response(None, 204 if self._group_key(rg) in self.records else 404)

    def _get_group(self, request: Request, sub: str, rg: str) -> Response:
        return json_response(self._render_group(self._require_group(rg)))

    def _put_group(self, request: Request, sub: str, rg: str) -> Response:
        group, created = self.apply_group(rg, self._json(request))
        return json_response(self._render_group(group), 201 if created else 200)

    def apply_group(self, name: str, body: dict) -> tuple[dict, bool]:
        location = self._location(body, "Microsoft.Resources/resourceGroups")
        existing = self.records.get(self._group_key(name))
        if existing is not None:
            if existing["provisioning"] == "Deleting":
                self._require_group(name, write=True)
            if existing["location"] != location:
                raise ArmError(409, "InvalidResourceGroupLocation",
                               f"Invalid resource group location '{location}'. The Resource group "
                               f"already exists in location '{existing['location']}'.")
            existing["tags"] = self._tags(body)
            return existing, False
        group = self._add({"kind": "resource_group", "name": name, "location": location,
                           "id": f"/subscriptions/{presets.SUBSCRIPTION_ID}/resourceGroups/{name}",
                           "tags": self._tags(body), "provisioning": "Succeeded", "created": now_iso()})
        return group, True

    def _delete_group(self, request: Request, sub: str, rg: str) -> Response:
        group = self._require_group(rg)
        key = group["key"]
        group["provisioning"] = "Deleting"

        def restore():
            if key in self.records:
                self.records[key]["provisioning"] = "Succeeded"

        op = self._begin("resource_groups.delete", None, group["location"],
                         lambda: self._remove(key), restore)
        return self._accepted(request, op, location_only=True)

    # ---- control API --------------------------------------------------------------------
    def _control(self, request: Request) -> Response:
        payload = request.get_json(silent=True) or {}
        path = request.path
        try:
            if path == "/_sim/options" and request.method == "POST":
                with self.lock:
                    self._apply_options(payload)
                return json_response(self.current_options())
            if path == "/_sim/options":
                return json_response(self.current_options())
            if path == "/_sim/finish_operations" and request.method == "POST":
                return json_response({"finished": self.finish_operations()})
            if path == "/_sim/fail_lro" and request.method == "POST":
                self.fail_lro(**payload)
                return json_response({"added": payload}, 201)
            if path == "/_sim/seed_vm" and request.method == "POST":
                return json_response({"id": self.seed_vm(**payload)}, 201)
            if path == "/_sim/resources":
                return json_response(self.resources())
            if path == "/_sim/power_state" and request.method == "POST":
                self.set_vm_power_state(payload["id"], payload["state"])
                return json_response({"id": payload["id"], "state": payload["state"]})
            if path == "/_sim/remove" and request.method == "POST":
                self.remove(payload["id"])
                return json_response({"removed": payload["id"]})
            if path == "/_sim/revoke_tokens" and request.method == "POST":
                self.tokens.revoke_all()
                return json_response({"revoked": True})
        except (TypeError, ValueError, KeyError, ArmError) as exc:
            return json_response({"detail": str(exc)}, 400)
        return super()._control(request)

    def current_options(self) -> dict:
        return {"lro": self.lro_mode, "retry_after": self.retry_after,
                "lro_seconds": self.lro_seconds, "slow_operations": dict(self.slow_operations),
                "page_size": self.page_size,
                "token_lifetime": self.tokens.lifetime, "compute_id_casing": self.compute_id_casing,
                "vcpu_quotas": dict(self.vcpu_quotas)}

    # ---- read helpers for tests ---------------------------------------------------------
    def resources(self) -> list[str]:
        """Every ARM id present (groups, network and compute objects, subnets, rules, disks)."""
        with self.lock:
            self.lro.advance()
            return [self._public_id(r) for r in self.records.values()]

    def get(self, arm_id: str) -> dict | None:
        """The object as ARM would return it (VMs with their instance view), or None."""
        with self.lock:
            self.lro.advance()
            record = self._lookup(arm_id)
            return self._render(record) if record else None

    def remove(self, arm_id: str) -> None:
        """Delete an object out of band (as someone in the portal would), no checks."""
        with self.lock:
            record = self._lookup(arm_id)
            if record is None:
                raise KeyError(arm_id)
            if record["kind"] == "vm":
                self._destroy_vm(record["key"])
            else:
                self._remove(record["key"])

    def _render(self, record: dict, instance_view: bool = True) -> dict:
        kind = record["kind"]
        if kind == "resource_group":
            return self._render_group(record)
        if kind == "vm":
            return self._render_vm(record, instance_view=instance_view)
        if kind == "disk":
            return self._render_disk(record)
        return self._render_network(record)

    def _public_id(self, record: dict) -> str:
        if record["kind"] in ("vm", "disk"):
            return self._compute_id(record)
        return record["id"]

    def dump_state(self) -> Any:
        with self.lock:
            self.lro.advance()
            return {
                "subscription_id": presets.SUBSCRIPTION_ID,
                "options": self.current_options(),
                "resources": {self._public_id(r): self._render(r) for r in self.records.values()},
                "operations": [{"id": op.id, "operation": op.name, "status": op.status,
                                "error": op.error} for op in self.lro.operations.values()],
            }
