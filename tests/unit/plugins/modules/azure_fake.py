"""An in-memory stand-in for ``AzureClients`` for unit tests of the chain logic.

Objects are stored as the REST bodies the modules send and handed back as the
SDK's own model classes, so attribute access behaves as with the real SDK. The
wire protocol itself is covered by the integration tests against the simulator.
"""

import copy
import itertools
import re
import weakref

from azure.mgmt.compute import models as compute_models
from azure.mgmt.network import models as network_models
from azure.mgmt.resource.resources import models as resource_models

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.clients import AzureClients
from ansible_collections.waldur.site_agent.plugins.module_utils.azure.errors import AzureError

SUBSCRIPTION = "5ab5c71d-0000-4000-a000-000000000001"
SIZES = [
    {"name": "Standard_B1s", "numberOfCores": 1, "memoryInMB": 1024, "osDiskSizeInMB": 1047552,
     "resourceDiskSizeInMB": 4096, "maxDataDiskCount": 2},
    {"name": "Standard_B2s", "numberOfCores": 2, "memoryInMB": 4096, "osDiskSizeInMB": 30720,
     "resourceDiskSizeInMB": 8192, "maxDataDiskCount": 4},
]
PROVIDERS = {
    "vnet": ("Microsoft.Network", "virtualNetworks", network_models.VirtualNetwork),
    "public_ip": ("Microsoft.Network", "publicIPAddresses", network_models.PublicIPAddress),
    "nsg": ("Microsoft.Network", "networkSecurityGroups", network_models.NetworkSecurityGroup),
    "nic": ("Microsoft.Network", "networkInterfaces", network_models.NetworkInterface),
    "vm": ("Microsoft.Compute", "virtualMachines", compute_models.VirtualMachine),
    "disk": ("Microsoft.Compute", "disks", compute_models.Disk),
}
_TAG_FILTER = re.compile(r"^tagName eq '(?P<name>[^']*)' and tagValue eq '(?P<value>[^']*)'$")


def tag_match(filter_text):
    """A predicate on tags for ARM's ``tagName eq .. and tagValue eq ..`` filter (None: all)."""
    if filter_text is None:
        return lambda tags: True
    match = _TAG_FILTER.match(filter_text)
    assert match, "the fake understands only tag filters, not %r" % filter_text
    name, value = match.group("name").lower(), match.group("value")
    return lambda tags: any(key.lower() == name and tag == value for key, tag in (tags or {}).items())


class UnfinishedPoller:
    """What ``begin_*`` returns for an operation ARM accepted and is still working on."""

    polling_method = None

    def result(self, timeout=None):
        return None

    def done(self):
        return False


class JsonPage(list):
    """A page of a JSON listing (a list that can be weakly referenced)."""


def not_found(what):
    return AzureError("%s was not found" % what, status=404, code="ResourceNotFound")


class Operations:
    """One SDK operation group over the fake's store (``kind`` objects in a group)."""

    def __init__(self, fake, kind):
        self.fake, self.kind = fake, kind

    def _key(self, group, name, parent=None):
        return (self.kind, group.lower(), (parent or "").lower(), name.lower())

    def _id(self, group, name, parent=None):
        if self.kind == "subnet":
            return "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s" % (
                SUBSCRIPTION, group, parent, name)
        namespace, type_name, dummy = PROVIDERS[self.kind]
        return "/subscriptions/%s/resourceGroups/%s/providers/%s/%s/%s" % (
            SUBSCRIPTION, group, namespace, type_name, name)

    def _model(self, body):
        if self.kind == "subnet":
            return network_models.Subnet(copy.deepcopy(body))
        return PROVIDERS[self.kind][2](copy.deepcopy(body))

    def _get(self, group, name, parent=None, **kwargs):
        self.fake.record("get", self.kind, name)
        self.fake.maybe_fail("get", self.kind)
        if group.lower() not in self.fake.groups:
            raise not_found("resource group %s" % group)
        body = self.fake.store.get(self._key(group, name, parent))
        if body is None:
            raise not_found(name)
        model = self._model(body)
        if self.kind == "vm" and kwargs.get("expand") == "instanceView":
            model = compute_models.VirtualMachine(dict(copy.deepcopy(body), properties=dict(
                body["properties"], instanceView=self.fake.instance_view_body(name))))
        return model

    def _put(self, group, name, body, parent=None):
        self.fake.record("put", self.kind, name)
        self.fake.maybe_fail("put", self.kind)
        if group.lower() not in self.fake.groups:
            raise AzureError("Resource group '%s' could not be found." % group, 404, "ResourceGroupNotFound")
        stored = copy.deepcopy(body)
        stored.update(id=self._id(group, name, parent), name=name)
        if self.kind == "public_ip":
            stored["properties"]["ipAddress"] = "20.0.0.%d" % next(self.fake.counter)
        if self.kind == "nic":
            stored["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"] = "10.0.0.4"
        if self.kind == "vm":
            self.fake.power[name.lower()] = "running"
            disk_name = "%s_OsDisk_1_%d" % (name, next(self.fake.counter))
            disk_id = Operations(self.fake, "disk")._id(group, disk_name)
            stored["properties"]["storageProfile"]["osDisk"]["managedDisk"] = {"id": disk_id}
            self.fake.store[("disk", group.lower(), "", disk_name.lower())] = {
                "id": disk_id, "name": disk_name, "location": body["location"], "managedBy": stored["id"],
                "properties": {"diskSizeGB": 30, "creationData": {"createOption": "FromImage"}}}
        self.fake.store[self._key(group, name, parent)] = stored
        if self.kind in self.fake.slow:
            stored.setdefault("properties", {})["provisioningState"] = "Creating"
            return UnfinishedPoller()
        return self._model(stored)

    def _delete(self, group, name, parent=None):
        self.fake.record("delete", self.kind, name)
        self.fake.maybe_fail("delete", self.kind)
        body = self.fake.store.pop(self._key(group, name, parent), None)
        if body is None:
            raise not_found(name)
        if self.kind == "vm":  # the OS disk goes with its machine (delete option Delete)
            for key in [key for key, disk in self.fake.store.items()
                        if key[0] == "disk" and disk.get("managedBy", "").lower() == body["id"].lower()]:
                del self.fake.store[key]

    def begin_update(self, group, name, patch):
        """PATCH (disks): the given top-level keys replace the stored ones (tags replace tags)."""
        self.fake.record("patch", self.kind, name)
        self.fake.maybe_fail("patch", self.kind)
        body = self.fake.store.get(self._key(group, name))
        if body is None:
            raise not_found(name)
        body.update(copy.deepcopy(patch))
        return self._model(body)

    # the SDK's method names
    def get(self, group, *args, **kwargs):
        if self.kind == "subnet":
            return self._get(group, args[1], parent=args[0])
        return self._get(group, args[0], **kwargs)

    def begin_create_or_update(self, group, *args):
        if self.kind == "subnet":
            return self._put(group, args[1], args[2], parent=args[0])
        return self._put(group, args[0], args[1])

    def begin_delete(self, group, *args):
        if self.kind == "subnet":
            return self._delete(group, args[1], parent=args[0])
        return self._delete(group, args[0])

    def list(self, group):
        self.fake.record("list", self.kind, group)
        for key, body in sorted(self.fake.store.items()):
            if key[0] == self.kind and key[1] == group.lower():
                yield self._model(body)

    def list_all(self, status_only=None):
        self.fake.record("list_all" if not status_only else "list_all_status", self.kind, "*")
        self.fake.maybe_fail("list_all", self.kind)
        for key, body in sorted(self.fake.store.items()):
            if key[0] != self.kind:
                continue
            if self.kind == "vm" and status_only:
                yield compute_models.VirtualMachine({"id": body["id"], "name": body["name"], "properties": {
                    "instanceView": self.fake.instance_view_body(body["name"])}})
            else:
                yield self._model(body)

    # virtual machines only
    def instance_view(self, group, name):
        self.fake.record("instance_view", "vm", name)
        return compute_models.VirtualMachineInstanceView(self.fake.instance_view_body(name))

    def begin_deallocate(self, group, name, **kwargs):  # polling=False, cls: the caller waits on its own
        self.fake.record("deallocate", "vm", name)
        self.fake.maybe_fail("deallocate", "vm")
        self.fake.power[name.lower()] = "deallocated"

    def begin_start(self, group, name, **kwargs):
        self.fake.record("start", "vm", name)
        self.fake.power[name.lower()] = "running"


class Groups:
    def __init__(self, fake):
        self.fake = fake

    def get(self, group):
        self.fake.record("get", "group", group)
        self.fake.maybe_fail("get", "group")
        if group.lower() not in self.fake.groups:
            raise not_found("resource group %s" % group)
        return resource_models.ResourceGroup(dict(self.fake.groups[group.lower()]))

    def create_or_update(self, group, body):
        self.fake.record("put", "group", group)
        self.fake.maybe_fail("put", "group")
        self.fake.groups[group.lower()] = dict(body, name=group, id="/subscriptions/%s/resourceGroups/%s" % (
            SUBSCRIPTION, group), properties={"provisioningState": "Succeeded"})
        return resource_models.ResourceGroup(dict(self.fake.groups[group.lower()]))

    def begin_delete(self, group):
        self.fake.record("delete", "group", group)
        self.fake.maybe_fail("delete", "group")
        if self.fake.groups.pop(group.lower(), None) is None:
            raise not_found("resource group %s" % group)
        for key in [key for key in self.fake.store if key[1] == group.lower()]:
            del self.fake.store[key]

    def list(self, filter=None):  # pylint: disable=redefined-builtin
        self.fake.record("list", "group", filter)
        self.fake.maybe_fail("list", "group")
        wanted = tag_match(filter)
        for key in sorted(self.fake.groups):
            body = self.fake.groups[key]
            if wanted(body.get("tags")):
                yield resource_models.ResourceGroup(dict(body))


class Resources:
    """``resources.list`` / ``list_by_resource_group``: the top-level objects as generic resources."""

    def __init__(self, fake):
        self.fake = fake

    def _listed(self, group, filter_text):
        wanted = tag_match(filter_text)
        for key, body in sorted(self.fake.store.items()):
            if key[0] == "subnet" or (group is not None and key[1] != group.lower()):
                continue
            if not wanted(body.get("tags")):
                continue
            namespace, type_name, dummy = PROVIDERS[key[0]]
            generic = {"id": body["id"], "name": body["name"], "type": "%s/%s" % (namespace, type_name),
                       "location": body.get("location")}
            if body.get("managedBy"):
                generic["managedBy"] = body["managedBy"]
            if filter_text is None and body.get("tags"):  # ARM leaves tags out of tag-filtered lists
                generic["tags"] = dict(body["tags"])
            yield resource_models.GenericResourceExpanded(generic)

    def list(self, filter=None):  # pylint: disable=redefined-builtin
        self.fake.record("list", "resources", filter)
        self.fake.maybe_fail("list", "resources")
        return self._listed(None, filter)

    def list_by_resource_group(self, group, filter=None):  # pylint: disable=redefined-builtin
        self.fake.record("list", "resources", group)
        self.fake.maybe_fail("list", "resources")
        if group.lower() not in self.fake.groups:
            raise AzureError("Resource group '%s' could not be found." % group, 404, "ResourceGroupNotFound")
        return self._listed(group, filter)


class Sizes:
    def __init__(self, fake):
        self.fake = fake

    def list(self, location):
        self.fake.record("list", "sizes", location)
        if location not in ("westeurope", "northeurope"):
            raise AzureError("No registered resource provider found for location '%s'." % location, 404,
                             "NoRegisteredProviderFound")
        return [compute_models.VirtualMachineSize(dict(size)) for size in SIZES]


class Namespace:
    def __init__(self, **groups):
        self.__dict__.update(groups)


class FakeAzure(AzureClients):
    """``AzureClients`` whose service clients are in-memory fakes; ``call``/``read`` are the real ones."""

    def __init__(self):
        super().__init__(SUBSCRIPTION, "tenant", "client", "fake-secret")
        self.store, self.groups, self.power = {}, {}, {}
        self.calls, self.faults = [], {}
        self.slow = set()  # kinds whose PUT is accepted and still running when the deadline comes
        self.unlisted = {}  # kind -> lower-case names the JSON listings miss
        self.pages = []  # weak references to every JSON page handed out
        self.counter = itertools.count(10)
        self._clients = {
            "resource": Namespace(resource_groups=Groups(self), resources=Resources(self)),
            "network": Namespace(**dict((attr, Operations(self, kind)) for attr, kind in (
                ("virtual_networks", "vnet"), ("subnets", "subnet"), ("public_ip_addresses", "public_ip"),
                ("network_security_groups", "nsg"), ("network_interfaces", "nic")))),
            "compute": Namespace(virtual_machines=Operations(self, "vm"), virtual_machine_sizes=Sizes(self),
                                 disks=Operations(self, "disk")),
        }
        self._credential = object()

    def record(self, verb, kind, name):
        self.calls.append((verb, kind, name))

    # ---- the plain JSON reads (AzureClients.json_pages / json_get) over the same store ----
    def json_pages(self, kind, path, params=None):
        """One page of the subscription's objects of the type ``path`` names, as ARM's JSON
        (``kind`` is the service); ``unlisted[kind]`` names objects the listing misses (made while
        it ran)."""
        if path.endswith("/vmSizes"):
            location = path.split("/")[-2]
            self._clients["compute"].virtual_machine_sizes.list(location)  # recorded, and fails as it does
            yield [dict(size) for size in SIZES]
            return
        kind = [kind for kind, (namespace, type_name, dummy) in PROVIDERS.items()
                if path.lower().endswith(("/providers/%s/%s" % (namespace, type_name)).lower())][0]
        status_only = (params or {}).get("statusOnly") == "true"
        self.record("list_all_status" if status_only else "list_all", kind, "*")
        self.maybe_fail("list_all", kind)
        page = JsonPage()
        for key, body in sorted(self.store.items()):
            if key[0] != kind or key[3] in self.unlisted.get(kind, ()):
                continue
            page.append({"id": body["id"], "name": body["name"], "properties": {
                "instanceView": self.instance_view_body(body["name"])}} if status_only else copy.deepcopy(body))
        self.pages.append(weakref.ref(page))
        yield page

    def json_get(self, kind, resource_id, suffix=""):
        parts = resource_id.split("/")
        group, type_name, name = parts[4], parts[-2], parts[-1]
        kind = [kind for kind, (namespace, listed, dummy) in PROVIDERS.items() if listed.lower() == type_name.lower()][0]
        if suffix == "/instanceView":
            self.record("instance_view", kind, name)
            return self.instance_view_body(name)
        self.record("get", kind, name)
        self.maybe_fail("get", kind)
        body = self.store.get((kind, group.lower(), "", name.lower()))
        if body is None:
            raise not_found(name)
        return copy.deepcopy(body)

    def maybe_fail(self, verb, kind):
        error = self.faults.get((verb, kind))
        if error is not None:
            raise error

    def instance_view_body(self, name):
        return {"statuses": [{"code": "ProvisioningState/succeeded"},
                             {"code": "PowerState/%s" % self.power.get(name.lower(), "running")}]}

    def writes(self):
        return [call for call in self.calls if call[0] in ("put", "patch", "delete", "deallocate", "start")]

    def names(self, kind):
        return sorted(key[3] for key in self.store if key[0] == kind)

    def body(self, kind, name):
        return next(body for key, body in self.store.items() if key[0] == kind and key[3] == name.lower())
