"""Microsoft.Network as the simulator serves it: virtual networks and subnets,
public IP addresses, network security groups and their rules, network
interfaces. Mixed into :class:`AzureSimulator`, whose store it uses.

Back-references (a subnet's ``ipConfigurations``, a public IP's
``ipConfiguration``, an NSG's ``networkInterfaces``/``subnets``, a NIC's
``virtualMachine``) are computed from the referring objects, so they are never
stale after a delete or cascade.
"""

from __future__ import annotations

import copy
import ipaddress
from functools import partial

from werkzeug.wrappers import Request, Response

from tests.simulators.azure.arm import ArmError, new_etag, new_guid, now_iso, page
from tests.simulators.common import json_response

NETWORK = "Microsoft.Network"
RG = "/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network"
S = "/subscriptions/<sub>/providers/Microsoft.Network"

# kind -> (operation prefix, path segment, ARM type)
TOP_LEVEL = {
    "virtual_network": ("virtual_networks", "virtualNetworks", "Microsoft.Network/virtualNetworks"),
    "public_ip": ("public_ips", "publicIPAddresses", "Microsoft.Network/publicIPAddresses"),
    "nsg": ("nsgs", "networkSecurityGroups", "Microsoft.Network/networkSecurityGroups"),
    "nic": ("nics", "networkInterfaces", "Microsoft.Network/networkInterfaces"),
}
# kind -> (operation prefix, parent kind, path segment, ARM type)
CHILDREN = {
    "subnet": ("subnets", "virtual_network", "subnets", "Microsoft.Network/virtualNetworks/subnets"),
    "security_rule": ("security_rules", "nsg", "securityRules",
                      "Microsoft.Network/networkSecurityGroups/securityRules"),
}
OPERATION_OF = {kind: spec[0] for kind, spec in {**TOP_LEVEL, **CHILDREN}.items()}

# Server-maintained properties: never taken from a request body.
READ_ONLY = {"provisioningState", "resourceGuid", "etag", "ipConfigurations", "ipConfiguration",
             "networkInterfaces", "subnets", "defaultSecurityRules", "virtualMachine", "macAddress",
             "ipAddress", "primary", "privateEndpoint", "dnsSettings"}

PROTOCOLS = {p.lower(): p for p in ("Tcp", "Udp", "Icmp", "Esp", "Ah", "*")}
ACCESS = {"allow": "Allow", "deny": "Deny"}
DIRECTIONS = {"inbound": "Inbound", "outbound": "Outbound"}

DEFAULT_RULES = [
    ("AllowVnetInBound", "Allow inbound traffic from all VMs in VNET", 65000, "Inbound", "Allow",
     "VirtualNetwork", "VirtualNetwork"),
    ("AllowAzureLoadBalancerInBound", "Allow inbound traffic from azure load balancer", 65001,
     "Inbound", "Allow", "AzureLoadBalancer", "*"),
    ("DenyAllInBound", "Deny all inbound traffic", 65500, "Inbound", "Deny", "*", "*"),
    ("AllowVnetOutBound", "Allow outbound traffic from all VMs to all VMs in VNET", 65000,
     "Outbound", "Allow", "VirtualNetwork", "VirtualNetwork"),
    ("AllowInternetOutBound", "Allow outbound traffic from all VMs to Internet", 65001,
     "Outbound", "Allow", "*", "Internet"),
    ("DenyAllOutBound", "Deny all outbound traffic", 65500, "Outbound", "Deny", "*", "*"),
]


def _echo(props: dict, managed: set) -> dict:
    """Properties the simulator does not interpret, kept to be echoed back."""
    return {k: copy.deepcopy(v) for k, v in props.items() if k not in managed and k not in READ_ONLY}


def _ref_id(value) -> str | None:
    return value.get("id") if isinstance(value, dict) else None


def _cidr(text, owner_id: str):
    try:
        return ipaddress.ip_network(str(text), strict=True)
    except ValueError:
        try:
            loose = ipaddress.ip_network(str(text), strict=False)
        except ValueError:
            raise ArmError(400, "InvalidAddressPrefixFormat",
                           f"Address prefix {text} of resource {owner_id} is not formatted correctly. "
                           "It should follow CIDR notation, for example 10.0.0.0/24.") from None
        raise ArmError(400, "InvalidCIDRNotation",
                       f"The address prefix {text} in resource {owner_id} has an invalid CIDR "
                       f"notation. For the given prefix length, the address prefix should be "
                       f"{loose}.") from None


class NetworkProvider:
    """Microsoft.Network routes, validation and rendering (a mixin of AzureSimulator)."""

    # ---- routes -------------------------------------------------------------------------
    def network_routes(self):
        routes = []
        for kind, (op, segment, _type) in TOP_LEVEL.items():
            base = f"{RG}/{segment}"
            routes += [
                # ARM's List All: every object of the type in the subscription, paged with nextLink
                # (network_interfaces.list_all(), public_ip_addresses.list_all(), ... in the SDK)
                ("GET", f"{S}/{segment}", f"{op}.list_all", partial(self._net_list_all, kind=kind)),
                ("GET", base, f"{op}.list", partial(self._net_list, kind=kind)),
                ("GET", base + "/<name>", f"{op}.get", partial(self._net_get, kind=kind)),
                ("PUT", base + "/<name>", f"{op}.put", partial(self._net_put, kind=kind)),
                ("DELETE", base + "/<name>", f"{op}.delete", partial(self._net_delete, kind=kind)),
            ]
        for kind, (op, parent_kind, segment, _type) in CHILDREN.items():
            base = f"{RG}/{TOP_LEVEL[parent_kind][1]}/<parent>/{segment}"
            routes += [
                ("GET", base, f"{op}.list", partial(self._net_list, kind=kind)),
                ("GET", base + "/<name>", f"{op}.get", partial(self._net_get, kind=kind)),
                ("PUT", base + "/<name>", f"{op}.put", partial(self._net_put, kind=kind)),
                ("DELETE", base + "/<name>", f"{op}.delete", partial(self._net_delete, kind=kind)),
            ]
        return routes

    # ---- generic handlers ---------------------------------------------------------------
    def _net_id(self, group: dict, kind: str, name: str, parent: str | None = None) -> str:
        if kind in TOP_LEVEL:
            return self._resource_id(group, NETWORK, TOP_LEVEL[kind][1], name)
        parent_record = self._net_parent(group, kind, parent)
        return f"{parent_record['id']}/{CHILDREN[kind][2]}/{name}"

    def _net_parent(self, group: dict, kind: str, parent: str) -> dict:
        parent_kind = CHILDREN[kind][1]
        segment = TOP_LEVEL[parent_kind][1]
        record = self._lookup(self._resource_id(group, NETWORK, segment, parent))
        if record is None:
            raise self._not_found(group, NETWORK, segment, parent)
        return record

    def _net_find(self, group: dict, kind: str, name: str, parent: str | None = None) -> dict:
        arm_id = self._net_id(group, kind, name, parent)
        record = self._lookup(arm_id)
        if record is None:
            if kind in CHILDREN:
                raise ArmError(404, "NotFound", f"Resource {arm_id} not found.")
            raise self._not_found(group, NETWORK, TOP_LEVEL[kind][1], name)
        return record

    def _net_list(self, request: Request, sub: str, rg: str, kind: str, parent: str | None = None) -> Response:
        group = self._require_group(rg)
        owner = self._net_parent(group, kind, parent) if kind in CHILDREN else group
        return json_response(self._page(request, self._children(owner["key"], kind)))

    def _net_list_all(self, request: Request, sub: str, kind: str) -> Response:
        records = [record for record in self.records.values() if record["kind"] == kind]
        return json_response(self._page(request, records))

    def _page(self, request: Request, records: list) -> dict:
        # only the page's records are rendered: a listing of N objects costs O(N), not O(N) per page
        return page(request, records, self.page_size, self._render_network)

    def _net_get(self, request: Request, sub: str, rg: str, name: str, kind: str,
                 parent: str | None = None) -> Response:
        group = self._require_group(rg)
        return json_response(self._render_network(self._net_find(group, kind, name, parent)))

    def _net_put(self, request: Request, sub: str, rg: str, name: str, kind: str,
                 parent: str | None = None) -> Response:
        body = self._json(request)
        apply = {"virtual_network": self.apply_vnet, "public_ip": self.apply_public_ip,
                 "nsg": self.apply_nsg, "nic": self.apply_nic}.get(kind)
        if kind == "subnet":
            record, created = self.apply_subnet(rg, parent, name, body)
        elif kind == "security_rule":
            record, created = self.apply_security_rule(rg, parent, name, body)
        else:
            record, created = apply(rg, name, body)
        return self._finish_put(request, f"{OPERATION_OF[kind]}.put", NETWORK, record, created)

    def _finish_put(self, request: Request, operation: str, provider: str, record: dict,
                    created: bool, on_success=None, on_failure=None) -> Response:
        """Run the PUT as an LRO: in progress now, Succeeded (or Failed) when it ends."""
        key = record["key"]
        if provider == NETWORK:
            record["provisioning"] = "Updating"
        else:
            record["provisioning"] = "Creating" if created else "Updating"

        def succeed():
            current = self.records.get(key)
            if current is not None:
                current["provisioning"] = "Succeeded"
                if on_success:
                    on_success(current)

        def fail():
            current = self.records.get(key)
            if current is not None:
                current["provisioning"] = "Failed"
                current["failure"] = op.error
                if on_failure:
                    on_failure(current)

        op = self._begin(operation, provider, record["location"], succeed, fail)
        body = self._render(self.records[key], instance_view=False) if key in self.records else {}
        return self._put_response(request, op, body, created)

    def _net_delete(self, request: Request, sub: str, rg: str, name: str, kind: str,
                    parent: str | None = None) -> Response:
        group = self._require_group(rg)
        try:
            record = self._net_find(group, kind, name, parent)
        except ArmError as exc:
            if exc.code == "ResourceGroupNotFound" or (kind in CHILDREN and exc.code == "ResourceNotFound"):
                raise
            return json_response(None, 204)  # deleting what is absent succeeds
        self._check_deletable(record)
        key, previous = record["key"], record["provisioning"]
        record["provisioning"] = "Deleting"

        def restore():
            if key in self.records:
                self.records[key]["provisioning"] = previous

        op = self._begin(f"{OPERATION_OF[kind]}.delete", NETWORK, record["location"],
                         lambda: self._remove(key), restore)
        return self._accepted(request, op)

    def _check_deletable(self, record: dict) -> None:
        kind, key, arm_id = record["kind"], record["key"], record["id"]
        if kind == "subnet":
            users = self._users(key, "ipconfig")
            if users:
                raise self._subnet_in_use(record, users)
        elif kind == "virtual_network":
            for subnet in self._children(key, "subnet"):
                users = self._users(subnet["key"], "ipconfig")
                if users:
                    raise self._subnet_in_use(subnet, users)
        elif kind == "public_ip":
            users = self._users(key, "ipconfig")
            if users:
                raise ArmError(400, "PublicIPAddressCannotBeDeleted",
                               f"Public IP address {arm_id} can not be deleted since it is still "
                               f"allocated to resource {users[0]}. In order to delete the public "
                               "IP, disassociate/detach the Public IP address from the resource.  "
                               "To learn how to do this, see aka.ms/deletepublicip.")
        elif kind == "nsg":
            users = self._users(key)
            if users:
                raise ArmError(400, "InUseNetworkSecurityGroupCannotBeDeleted",
                               f"Network security group {arm_id} cannot be deleted because it is in "
                               f"use by the following resources: {', '.join(users)}. In order to "
                               "delete the Network security group, remove the association with the "
                               "resource(s). To learn how to do this, see aka.ms/deletensg.")
        elif kind == "nic":
            users = self._users(key, "vm")
            if users:
                raise ArmError(400, "NicInUse",
                               f"Network Interface {arm_id} is used by existing resource "
                               f"{self._public_id(self._lookup(users[0]))}. In order to delete the "
                               "network interface, it must be dissociated from the resource. To "
                               "learn more, see aka.ms/deletenic.")

    @staticmethod
    def _subnet_in_use(subnet: dict, users: list) -> ArmError:
        return ArmError(400, "InUseSubnetCannotBeDeleted",
                        f"Subnet {subnet['name']} is in use by {users[0]} and cannot be deleted. "
                        "In order to delete the subnet, delete all the resources within the subnet. "
                        "See aka.ms/deletesubnet.")

    # ---- shared PUT checks --------------------------------------------------------------
    def _existing_for_put(self, arm_id: str, location: str | None) -> dict | None:
        existing = self._lookup(arm_id)
        if existing is None:
            return None
        if existing["provisioning"] == "Deleting":
            raise ArmError(409, "AnotherOperationInProgress",
                           f"Another operation on this or dependent resource is in progress. "
                           f"Resource {existing['id']} is being deleted.")
        if location and existing.get("location") and existing["location"] != location:
            raise ArmError(400, "InvalidResourceLocation",
                           f"The resource '{existing['name']}' already exists in location "
                           f"'{existing['location']}' in resource group. A resource with the same "
                           f"name cannot be created in location '{location}'. Please select a new "
                           "resource name.")
        return existing

    def _referenced(self, ref_id: str, kind: str, owner_id: str, location: str | None) -> dict:
        record = self._lookup(ref_id)
        record_location = record.get("location") if record is not None else None
        if record is None or record["kind"] != kind or (location and record_location != location):
            raise ArmError(400, "InvalidResourceReference",
                           f"Resource {ref_id} referenced by resource {owner_id} was not found. "
                           "Please make sure that the referenced resource exists, and that both "
                           "resources are in the same region.")
        return record

    def _base_record(self, kind: str, arm_id: str, name: str, parent: str, location: str,
                     tags, existing: dict | None) -> dict:
        return {"kind": kind, "id": existing["id"] if existing else arm_id,
                "name": existing["name"] if existing else name, "parent": parent,
                "location": location, "tags": tags, "provisioning": "Succeeded",
                "etag": new_etag(), "guid": existing["guid"] if existing else new_guid(),
                "created": existing["created"] if existing else now_iso()}

    # ---- virtual networks and subnets ---------------------------------------------------
    def apply_vnet(self, rg: str, name: str, body: dict) -> tuple[dict, bool]:
        group = self._require_group(rg, write=True)
        location = self._location(body, "Microsoft.Network/virtualNetworks")
        arm_id = self._resource_id(group, NETWORK, "virtualNetworks", name)
        existing = self._existing_for_put(arm_id, location)
        props = body.get("properties") or {}
        prefixes = (props.get("addressSpace") or {}).get("addressPrefixes") or []
        if not prefixes:
            raise ArmError(400, "InvalidRequestFormat",
                           f"Virtual network {arm_id} must have at least one address prefix in "
                           "addressSpace.addressPrefixes.")
        networks = [_cidr(p, arm_id) for p in prefixes]
        wanted = props.get("subnets") or []
        wanted_names = set()
        for subnet in wanted:
            if not isinstance(subnet, dict) or not subnet.get("name"):
                raise ArmError(400, "InvalidRequestFormat", "Every subnet needs a name.")
            wanted_names.add(subnet["name"].lower())
        current = self._children(existing["key"], "subnet") if existing else []
        # A VNet PUT replaces the subnet list: the ones left out are deleted, which ARM
        # refuses for a subnet still in use.
        for subnet in current:
            if subnet["name"].lower() not in wanted_names:
                users = self._users(subnet["key"], "ipconfig")
                if users:
                    raise self._subnet_in_use(subnet, users)
        vnet_id = existing["id"] if existing else arm_id
        checked, siblings = [], []
        for subnet in wanted:
            subnet_id = f"{vnet_id}/subnets/{subnet['name']}"
            prior = self._lookup(subnet_id)
            fields = self._subnet_fields(subnet_id, subnet["name"], subnet.get("properties") or {},
                                         networks, siblings, prior, location, vnet_id)
            siblings.append((subnet["name"], fields["address_network"]))
            checked.append((subnet_id, subnet["name"], fields, prior))
        record = self._base_record("virtual_network", arm_id, name, group["key"], location,
                                   self._tags(body), existing)
        record["address_prefixes"] = [str(n) for n in networks]
        record["extra"] = _echo(props, {"addressSpace", "subnets"})
        self._add(record)
        for subnet in current:
            if subnet["name"].lower() not in wanted_names:
                self._remove(subnet["key"])
        for subnet_id, subnet_name, fields, prior in checked:
            self._add_subnet(record, subnet_id, subnet_name, fields, prior)
        return record, existing is None

    def _subnet_fields(self, subnet_id: str, name: str, props: dict, networks: list,
                       siblings: list, prior: dict | None, location: str, vnet_id: str) -> dict:
        prefix = props.get("addressPrefix") or (props.get("addressPrefixes") or [None])[0]
        if not prefix:
            raise ArmError(400, "InvalidRequestFormat",
                           f"Subnet {subnet_id} must have an addressPrefix.")
        network = _cidr(prefix, subnet_id)
        vnet_name = vnet_id.rsplit("/", 1)[-1]
        if not any(network.subnet_of(n) for n in networks if n.version == network.version):
            raise ArmError(400, "NetcfgSubnetRangeOutsideVnet",
                           f"Subnet '{name}' is not valid because its IP address range is outside "
                           f"the IP address range of virtual network '{vnet_name}'.")
        for other_name, other in siblings:
            if other_name.lower() != name.lower() and other.version == network.version \
                    and network.overlaps(other):
                raise ArmError(400, "NetcfgSubnetRangesOverlap",
                               f"Subnet '{name}' is not valid because its IP address range "
                               f"overlaps with that of an existing subnet in virtual network "
                               f"'{vnet_name}'.")
        if prior is not None and prior["address_prefix"] != str(network):
            users = self._users(prior["key"], "ipconfig")
            if users:
                raise ArmError(400, "InUseSubnetCannotBeUpdated",
                               f"Subnet {name} is in use by {users[0]} and its address prefix "
                               "cannot be changed.")
        nsg_id = _ref_id(props.get("networkSecurityGroup"))
        if nsg_id:
            nsg_id = self._referenced(nsg_id, "nsg", subnet_id, location)["id"]
        return {"address_network": network, "nsg": nsg_id,
                "extra": _echo(props, {"addressPrefix", "addressPrefixes", "networkSecurityGroup"})}

    def _add_subnet(self, vnet: dict, subnet_id: str, name: str, fields: dict,
                    prior: dict | None) -> dict:
        record = self._base_record("subnet", subnet_id, name, vnet["key"], vnet["location"], None, prior)
        record["address_prefix"] = str(fields["address_network"])
        record["nsg"] = fields["nsg"]
        record["extra"] = fields["extra"]
        return self._add(record)

    def apply_subnet(self, rg: str, vnet_name: str, name: str, body: dict) -> tuple[dict, bool]:
        group = self._require_group(rg, write=True)
        vnet = self._net_parent(group, "subnet", vnet_name)
        subnet_id = f"{vnet['id']}/subnets/{name}"
        existing = self._existing_for_put(subnet_id, None)
        siblings = [(s["name"], ipaddress.ip_network(s["address_prefix"]))
                    for s in self._children(vnet["key"], "subnet")]
        networks = [ipaddress.ip_network(p) for p in vnet["address_prefixes"]]
        fields = self._subnet_fields(subnet_id, name, body.get("properties") or {}, networks,
                                     siblings, existing, vnet["location"], vnet["id"])
        return self._add_subnet(vnet, subnet_id, name, fields, existing), existing is None

    def _render_subnet(self, record: dict) -> dict:
        props = dict(copy.deepcopy(record["extra"]))
        props.update({"provisioningState": record["provisioning"],
                      "addressPrefix": record["address_prefix"]})
        if record.get("nsg"):
            props["networkSecurityGroup"] = {"id": record["nsg"]}
        users = self._users(record["key"], "ipconfig")
        if users:
            props["ipConfigurations"] = [{"id": u} for u in users]
        props.setdefault("delegations", [])
        props.setdefault("privateEndpointNetworkPolicies", "Disabled")
        props.setdefault("privateLinkServiceNetworkPolicies", "Enabled")
        return {"name": record["name"], "id": record["id"], "etag": record["etag"],
                "type": CHILDREN["subnet"][3], "properties": props}

    def _render_vnet(self, record: dict) -> dict:
        props = dict(copy.deepcopy(record["extra"]))
        props.update({
            "provisioningState": record["provisioning"], "resourceGuid": record["guid"],
            "addressSpace": {"addressPrefixes": list(record["address_prefixes"])},
            "subnets": [self._render_subnet(s) for s in self._children(record["key"], "subnet")],
        })
        props.setdefault("virtualNetworkPeerings", [])
        props.setdefault("enableDdosProtection", False)
        return self._envelope(record, props)

    # ---- public IP addresses ------------------------------------------------------------
    def apply_public_ip(self, rg: str, name: str, body: dict) -> tuple[dict, bool]:
        group = self._require_group(rg, write=True)
        location = self._location(body, "Microsoft.Network/publicIPAddresses")
        arm_id = self._resource_id(group, NETWORK, "publicIPAddresses", name)
        existing = self._existing_for_put(arm_id, location)
        props = body.get("properties") or {}
        sku = dict(body.get("sku") or {"name": "Standard"})
        sku_name = {"basic": "Basic", "standard": "Standard"}.get(str(sku.get("name", "")).lower())
        if sku_name is None:
            raise ArmError(400, "InvalidRequestFormat",
                           f"Public IP address SKU '{sku.get('name')}' is not supported.")
        sku["name"] = sku_name
        sku.setdefault("tier", "Regional")
        allocation = {"static": "Static", "dynamic": "Dynamic"}.get(
            str(props.get("publicIPAllocationMethod") or "Dynamic").lower())
        if allocation is None:
            raise ArmError(400, "InvalidRequestFormat",
                           f"publicIPAllocationMethod '{props.get('publicIPAllocationMethod')}' "
                           "is not valid: use Static or Dynamic.")
        if sku_name == "Standard" and allocation != "Static":
            raise ArmError(400, "StandardSkuPublicIPAddressesMustBeStatic",
                           f"Standard sku publicIp {existing['id'] if existing else arm_id} must "
                           "have AllocationMethod set to Static.")
        version = {"ipv4": "IPv4", "ipv6": "IPv6"}.get(
            str(props.get("publicIPAddressVersion") or "IPv4").lower(), "IPv4")
        record = self._base_record("public_ip", arm_id, name, group["key"], location,
                                   self._tags(body), existing)
        record.update({
            "sku": sku, "allocation": allocation, "version": version,
            "ip_address": existing["ip_address"] if existing and existing["version"] == version
            else self._next_public_ip(version),
            "idle_timeout": int(props.get("idleTimeoutInMinutes") or 4),
            "zones": body.get("zones"),
            "extra": _echo(props, {"publicIPAllocationMethod", "publicIPAddressVersion",
                                   "idleTimeoutInMinutes"}),
        })
        return self._add(record), existing is None

    def _next_public_ip(self, version: str) -> str:
        n = self._ip_counter
        self._ip_counter += 1
        if version == "IPv6":
            return f"2603:1020:206:3::{n + 4:x}"
        return f"20.{105 + n // 62500}.{(n // 250) % 250}.{n % 250 + 4}"

    def _render_public_ip(self, record: dict) -> dict:
        props = dict(copy.deepcopy(record["extra"]))
        users = self._users(record["key"], "ipconfig")
        props.update({"provisioningState": record["provisioning"], "resourceGuid": record["guid"],
                      "publicIPAddressVersion": record["version"],
                      "publicIPAllocationMethod": record["allocation"],
                      "idleTimeoutInMinutes": record["idle_timeout"]})
        props.setdefault("ipTags", [])
        # A dynamic address exists only while something uses it.
        if record["allocation"] == "Static" or users:
            props["ipAddress"] = record["ip_address"]
        if users:
            props["ipConfiguration"] = {"id": users[0]}
        body = self._envelope(record, props)
        body["sku"] = dict(record["sku"])
        if record.get("zones"):
            body["zones"] = list(record["zones"])
        return body

    # ---- network security groups --------------------------------------------------------
    def apply_nsg(self, rg: str, name: str, body: dict) -> tuple[dict, bool]:
        group = self._require_group(rg, write=True)
        location = self._location(body, "Microsoft.Network/networkSecurityGroups")
        arm_id = self._resource_id(group, NETWORK, "networkSecurityGroups", name)
        existing = self._existing_for_put(arm_id, location)
        props = body.get("properties") or {}
        nsg_id = existing["id"] if existing else arm_id
        rules, seen = [], []
        for rule in props.get("securityRules") or []:
            if not isinstance(rule, dict) or not rule.get("name"):
                raise ArmError(400, "InvalidRequestFormat", "Every security rule needs a name.")
            rule_props = self._rule_props(nsg_id, rule["name"], rule.get("properties") or {}, seen)
            seen.append((rule["name"], rule_props))
            rules.append((rule["name"], rule_props))
        record = self._base_record("nsg", arm_id, name, group["key"], location, self._tags(body), existing)
        record["extra"] = _echo(props, {"securityRules"})
        self._add(record)
        # The rule list replaces the NSG's rules, as a PUT does in ARM.
        current = {r["name"].lower(): r for r in self._children(record["key"], "security_rule")}
        wanted = {rule_name.lower() for rule_name, _props in rules}
        for lowered, rule in current.items():
            if lowered not in wanted:
                self._remove(rule["key"])
        for rule_name, rule_props in rules:
            self._add_rule(record, rule_name, rule_props, current.get(rule_name.lower()))
        return record, existing is None

    def _rule_props(self, nsg_id: str, name: str, props: dict, siblings: list) -> dict:
        def pick(key, table):
            value = table.get(str(props.get(key) or "").lower())
            if value is None:
                raise ArmError(400, "InvalidRequestFormat",
                               f"Security rule {name} of {nsg_id} has an invalid or missing {key} "
                               f"'{props.get(key)}'.")
            return value

        protocol = pick("protocol", PROTOCOLS)
        access = pick("access", ACCESS)
        direction = pick("direction", DIRECTIONS)
        try:
            priority = int(props.get("priority"))
        except (TypeError, ValueError):
            priority = None
        if priority is None or not 100 <= priority <= 4096:
            raise ArmError(400, "SecurityRuleInvalidPriority",
                           f"Security rule has invalid Priority. Value provided: "
                           f"{props.get('priority')} Allowed range 100-4096.")
        for singular, plural, what in (
                ("sourceAddressPrefix", "sourceAddressPrefixes", "source address prefix"),
                ("destinationAddressPrefix", "destinationAddressPrefixes", "destination address prefix"),
                ("destinationPortRange", "destinationPortRanges", "destination port range")):
            if not props.get(singular) and not props.get(plural):
                raise ArmError(400, "SecurityRuleParameterNotSet",
                               f"Security rule {name} of {nsg_id} must specify a {what}.")
        for other_name, other in siblings:
            if other_name.lower() != name.lower() and other["priority"] == priority \
                    and other["direction"] == direction:
                raise ArmError(400, "SecurityRuleConflict",
                               f"Security rule {name} conflicts with rule {other_name}. Rules "
                               "cannot have the same Priority and Direction. To learn more, see "
                               "aka.ms/nsgrules.")
        rule = _echo(props, set())
        rule.update({"protocol": protocol, "access": access, "direction": direction,
                     "priority": priority})
        if not props.get("sourcePortRange") and not props.get("sourcePortRanges"):
            rule["sourcePortRange"] = "*"
        for plural in ("sourcePortRanges", "destinationPortRanges", "sourceAddressPrefixes",
                       "destinationAddressPrefixes"):
            rule.setdefault(plural, [])
        return rule

    def _add_rule(self, nsg: dict, name: str, props: dict, prior: dict | None) -> dict:
        record = self._base_record("security_rule", f"{nsg['id']}/securityRules/{name}", name,
                                   nsg["key"], nsg["location"], None, prior)
        record["props"] = props
        return self._add(record)

    def apply_security_rule(self, rg: str, nsg_name: str, name: str, body: dict) -> tuple[dict, bool]:
        group = self._require_group(rg, write=True)
        nsg = self._net_parent(group, "security_rule", nsg_name)
        existing = self._existing_for_put(f"{nsg['id']}/securityRules/{name}", None)
        siblings = [(r["name"], r["props"]) for r in self._children(nsg["key"], "security_rule")]
        props = self._rule_props(nsg["id"], name, body.get("properties") or {}, siblings)
        return self._add_rule(nsg, name, props, existing), existing is None

    def _render_rule(self, record: dict) -> dict:
        props = copy.deepcopy(record["props"])
        props["provisioningState"] = record["provisioning"]
        return {"name": record["name"], "id": record["id"], "etag": record["etag"],
                "type": CHILDREN["security_rule"][3], "properties": props}

    def _render_nsg(self, record: dict) -> dict:
        props = dict(copy.deepcopy(record["extra"]))
        props.update({
            "provisioningState": record["provisioning"], "resourceGuid": record["guid"],
            "securityRules": [self._render_rule(r) for r in self._children(record["key"], "security_rule")],
            "defaultSecurityRules": [{
                "name": name, "id": f"{record['id']}/defaultSecurityRules/{name}",
                "etag": record["etag"], "type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules",
                "properties": {"provisioningState": "Succeeded", "description": description,
                               "protocol": "*", "sourcePortRange": "*", "destinationPortRange": "*",
                               "sourceAddressPrefix": source, "destinationAddressPrefix": destination,
                               "access": access, "priority": priority, "direction": direction,
                               "sourcePortRanges": [], "destinationPortRanges": [],
                               "sourceAddressPrefixes": [], "destinationAddressPrefixes": []},
            } for name, description, priority, direction, access, source, destination in DEFAULT_RULES],
        })
        nics = self._users(record["key"], "nic")
        subnets = self._users(record["key"], "subnet")
        if nics:
            props["networkInterfaces"] = [{"id": n} for n in nics]
        if subnets:
            props["subnets"] = [{"id": s} for s in subnets]
        return self._envelope(record, props)

    # ---- network interfaces -------------------------------------------------------------
    def apply_nic(self, rg: str, name: str, body: dict) -> tuple[dict, bool]:
        group = self._require_group(rg, write=True)
        location = self._location(body, "Microsoft.Network/networkInterfaces")
        arm_id = self._resource_id(group, NETWORK, "networkInterfaces", name)
        existing = self._existing_for_put(arm_id, location)
        nic_id = existing["id"] if existing else arm_id
        props = body.get("properties") or {}
        configs = props.get("ipConfigurations") or []
        if not configs:
            raise ArmError(400, "InvalidRequestFormat",
                           f"Network interface {nic_id} must have at least one IP configuration.")
        prior_configs = {c["name"].lower(): c for c in existing["ip_configurations"]} if existing else {}
        ip_configurations, claimed = [], set()
        for index, config in enumerate(configs):
            if not isinstance(config, dict) or not config.get("name"):
                raise ArmError(400, "InvalidRequestFormat", "Every IP configuration needs a name.")
            config_id = f"{nic_id}/ipConfigurations/{config['name']}"
            cprops = config.get("properties") or {}
            subnet_ref = _ref_id(cprops.get("subnet"))
            if not subnet_ref:
                raise ArmError(400, "InvalidRequestFormat",
                               f"IP configuration {config_id} must reference a subnet.")
            subnet = self._referenced(subnet_ref, "subnet", nic_id, location)
            public_ip = None
            pip_ref = _ref_id(cprops.get("publicIPAddress"))
            if pip_ref:
                pip = self._referenced(pip_ref, "public_ip", nic_id, location)
                others = [u for u in self._users(pip["key"], "ipconfig") if u.lower() != config_id.lower()]
                if others:
                    raise ArmError(400, "PublicIPAddressInUse",
                                   f"Resource {pip['id']} is already in use by {others[0]}. Cannot "
                                   f"use the same public IP address for {config_id}.")
                public_ip = pip["id"]
            allocation = {"static": "Static", "dynamic": "Dynamic"}.get(
                str(cprops.get("privateIPAllocationMethod") or "Dynamic").lower(), "Dynamic")
            prior = prior_configs.get(config["name"].lower())
            private_ip = self._private_ip(subnet, nic_id, allocation, cprops.get("privateIPAddress"),
                                          prior, claimed)
            claimed.add(private_ip)
            primary = cprops.get("primary")
            ip_configurations.append({
                "name": config["name"], "subnet": subnet["id"], "public_ip": public_ip,
                "private_ip": private_ip, "allocation": allocation,
                "primary": bool(primary) if primary is not None else index == 0,
                "etag": new_etag(),
                "extra": _echo(cprops, {"subnet", "publicIPAddress", "privateIPAllocationMethod",
                                        "privateIPAddress", "privateIPAddressVersion"}),
            })
        nsg_id = _ref_id(props.get("networkSecurityGroup"))
        if nsg_id:
            nsg_id = self._referenced(nsg_id, "nsg", nic_id, location)["id"]
        record = self._base_record("nic", arm_id, name, group["key"], location, self._tags(body), existing)
        record.update({"ip_configurations": ip_configurations, "nsg": nsg_id,
                       "mac": existing.get("mac") if existing else None,
                       "extra": _echo(props, {"ipConfigurations", "networkSecurityGroup"})})
        return self._add(record), existing is None

    def _private_ip(self, subnet: dict, nic_id: str, allocation: str, requested, prior: dict | None,
                    claimed: set) -> str:
        network = ipaddress.ip_network(subnet["address_prefix"])
        taken = set(claimed)
        for config_id in self._users(subnet["key"], "ipconfig"):
            nic_key = config_id.lower().rsplit("/ipconfigurations/", 1)[0]
            other = self.records.get(nic_key)
            if other is not None and nic_key != nic_id.lower():
                taken.update(c["private_ip"] for c in other["ip_configurations"]
                             if c["subnet"].lower() == subnet["key"])
        if allocation == "Static" and requested:
            try:
                address = ipaddress.ip_address(requested)
            except ValueError:
                address = None
            if address is None or address not in network:
                raise ArmError(400, "PrivateIPAddressNotInSubnet",
                               f"IP address {requested} does not belong to the subnet "
                               f"{subnet['id']} ({subnet['address_prefix']}).")
            if str(address) in taken:
                raise ArmError(400, "PrivateIPAddressInUse",
                               f"IP configuration of {nic_id} is using the private IP address "
                               f"{requested} which is already allocated to another resource.")
            return str(address)
        if prior is not None and prior["subnet"].lower() == subnet["key"] and prior["private_ip"] not in taken:
            return prior["private_ip"]
        # Azure keeps the first four addresses of a subnet and the last one.
        first, last = int(network.network_address) + 4, int(network.broadcast_address) - 1
        for value in range(first, last + 1):
            candidate = str(ipaddress.ip_address(value))
            if candidate not in taken:
                return candidate
        raise ArmError(400, "SubnetIsFull",
                       f"Subnet {subnet['name']} with address prefix {subnet['address_prefix']} "
                       "does not have enough capacity for 1 IP addresses.")

    def _render_nic(self, record: dict) -> dict:
        props = dict(copy.deepcopy(record["extra"]))
        configs = []
        for config in record["ip_configurations"]:
            cprops = dict(copy.deepcopy(config["extra"]))
            cprops.update({"provisioningState": record["provisioning"],
                           "privateIPAddress": config["private_ip"],
                           "privateIPAllocationMethod": config["allocation"],
                           "subnet": {"id": config["subnet"]}, "primary": config["primary"],
                           "privateIPAddressVersion": "IPv4"})
            if config.get("public_ip"):
                cprops["publicIPAddress"] = {"id": config["public_ip"]}
            configs.append({"name": config["name"],
                            "id": f"{record['id']}/ipConfigurations/{config['name']}",
                            "etag": config["etag"],
                            "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
                            "properties": cprops})
        props.update({
            "provisioningState": record["provisioning"], "resourceGuid": record["guid"],
            "ipConfigurations": configs,
            "dnsSettings": {"dnsServers": [], "appliedDnsServers": [],
                            "internalDomainNameSuffix": f"{record['guid'].replace('-', '')[:26]}"
                                                        ".ax.internal.cloudapp.net"},
        })
        for key, default in (("enableAcceleratedNetworking", False), ("enableIPForwarding", False),
                             ("vnetEncryptionSupported", False), ("hostedWorkloads", []),
                             ("tapConfigurations", []), ("nicType", "Standard"),
                             ("disableTcpStateTracking", False), ("auxiliaryMode", "None"),
                             ("auxiliarySku", "None")):
            props.setdefault(key, default)
        if record.get("nsg"):
            props["networkSecurityGroup"] = {"id": record["nsg"]}
        vms = self._users(record["key"], "vm")
        if vms:
            props["virtualMachine"] = {"id": self._public_id(self._lookup(vms[0]))}
            props["primary"] = True
        if record.get("mac"):
            props["macAddress"] = record["mac"]
        return self._envelope(record, props)

    # ---- rendering ----------------------------------------------------------------------
    def _envelope(self, record: dict, props: dict) -> dict:
        body = {"name": record["name"], "id": record["id"], "etag": record["etag"],
                "type": TOP_LEVEL[record["kind"]][2], "location": record["location"],
                "properties": props}
        if record.get("tags") is not None:
            body["tags"] = dict(record["tags"])
        return body

    def _render_network(self, record: dict) -> dict:
        return {"virtual_network": self._render_vnet, "subnet": self._render_subnet,
                "public_ip": self._render_public_ip, "nsg": self._render_nsg,
                "security_rule": self._render_rule, "nic": self._render_nic}[record["kind"]](record)
