"""Microsoft.Compute as the simulator serves it: virtual machines (create/update
LRO, instance view, power actions, delete with delete options), managed disks,
VM sizes, resource SKUs and the vCPU quotas (Usage - List; a VM PUT that would
exceed one is refused as ARM refuses it). Mixed into :class:`AzureSimulator`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from functools import partial

from werkzeug.wrappers import Request, Response

from tests.simulators.azure import presets
from tests.simulators.azure.arm import ArmError, new_guid, normalize_location, now_iso, page
from tests.simulators.common import json_response

COMPUTE = "Microsoft.Compute"
S = "/subscriptions/<sub>/providers/Microsoft.Compute"
RG = "/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute"
# A marketplace image's versions in a location (Virtual Machine Images - List / Get).
VMIMAGE = "/locations/<loc>/publishers/<pub>/artifacttypes/vmimage/offers/<offer>/skus/<sku>"

# action path -> (operation name, transitional power state, final power state)
ACTIONS = {
    "deallocate": ("vms.deallocate", "deallocating", "deallocated"),
    "start": ("vms.start", "starting", "running"),
    "powerOff": ("vms.power_off", "stopping", "stopped"),
    "restart": ("vms.restart", "starting", "running"),
}
POWER_DISPLAY = {
    "running": "VM running", "deallocated": "VM deallocated", "stopped": "VM stopped",
    "starting": "VM starting", "stopping": "VM stopping", "deallocating": "VM deallocating",
}
PROVISIONING_DISPLAY = {"Succeeded": "Provisioning succeeded", "Creating": "Creating",
                        "Updating": "Updating", "Deleting": "Deleting"}
DELETE_OPTIONS = {"delete": "Delete", "detach": "Detach"}
STORAGE_TYPES = {t.lower(): t for t in ("Standard_LRS", "Premium_LRS", "StandardSSD_LRS",
                                        "UltraSSD_LRS", "Premium_ZRS", "StandardSSD_ZRS", "PremiumV2_LRS")}
SSH_KEY = re.compile(r"^(ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,3}( .*)?$")
LINUX_HOSTNAME_FORBIDDEN = set("`~!@#$%^&*()=+_[]{}\\|;:'\",<>/?")
LINUX_HOSTNAME_RULE = ("Linux host name cannot exceed 64 characters in length or contain the following "
                       "characters: " + " ".join("`~!@#$%^&*()=+_[]{}\\|;:'\",<>/?") + ".")
# Fields of the VM's properties the simulator manages; the rest is echoed back.
MANAGED_PROPERTIES = {"hardwareProfile", "storageProfile", "osProfile", "networkProfile",
                      "provisioningState", "vmId", "timeCreated", "instanceView"}


def _invalid(message: str, target: str | None = None) -> ArmError:
    return ArmError(400, "InvalidParameter", message, target)


def _missing(path: str) -> ArmError:
    return _invalid(f"Required parameter '{path}' is missing (null).", path)


class ComputeProvider:
    """Microsoft.Compute routes, validation and rendering (a mixin of AzureSimulator)."""

    def compute_routes(self):
        vm = RG + "/virtualMachines/<name>"
        routes = [
            ("GET", S + "/virtualMachines", "vms.list_all", self._list_vms_all),
            ("GET", S + "/locations/<loc>/virtualMachines", "vms.list_by_location", self._list_vms_by_location),
            ("GET", S + "/locations/<loc>/vmSizes", "vm_sizes.list", self._list_vm_sizes),
            ("GET", S + "/skus", "skus.list", self._list_skus),
            ("GET", S + "/locations/<loc>/usages", "usages.list", self._list_usages),
            ("GET", S + VMIMAGE + "/versions", "vm_images.list", self._list_image_versions),
            ("GET", S + VMIMAGE + "/versions/<version>", "vm_images.get", self._get_image_version),
            ("GET", RG + "/virtualMachines", "vms.list", self._list_vms),
            ("GET", vm, "vms.get", self._get_vm),
            ("PUT", vm, "vms.put", self._put_vm),
            ("DELETE", vm, "vms.delete", self._delete_vm),
            ("GET", vm + "/instanceView", "vms.instance_view", self._get_instance_view),
            ("GET", vm + "/vmSizes", "vms.vm_sizes", self._list_vm_available_sizes),
            ("GET", S + "/disks", "disks.list_all", self._list_disks_all),
            ("GET", RG + "/disks", "disks.list", self._list_disks),
            ("GET", RG + "/disks/<name>", "disks.get", self._get_disk),
            ("PATCH", RG + "/disks/<name>", "disks.update", self._patch_disk),
            ("DELETE", RG + "/disks/<name>", "disks.delete", self._delete_disk),
        ]
        for action, spec in ACTIONS.items():
            routes.append(("POST", f"{vm}/{action}", spec[0], partial(self._vm_action, action=action)))
        return routes

    # ---- ids ----------------------------------------------------------------------------
    def _compute_id(self, record: dict) -> str:
        """The id as the Compute provider echoes it (optionally with an upper-cased group)."""
        if self.compute_id_casing != "upper_rg":
            return record["id"]
        parts = record["id"].split("/")
        parts[4] = parts[4].upper()
        return "/".join(parts)

    def _find_vm(self, group: dict, name: str) -> dict:
        record = self._lookup(self._resource_id(group, COMPUTE, "virtualMachines", name))
        if record is None:
            raise self._not_found(group, COMPUTE, "virtualMachines", name)
        return record

    # ---- VM create / update -------------------------------------------------------------
    def _put_vm(self, request: Request, sub: str, rg: str, name: str) -> Response:
        record, created = self.apply_vm(rg, name, self._json(request), check_quota=True)
        if created:
            record["power"] = "starting"

        def started(current):
            if created:
                current["power"] = "running"

        def failed(current):
            if created:
                current["power"] = None

        return self._finish_put(request, "vms.put", COMPUTE, record, created, started, failed)

    def apply_vm(self, rg: str, name: str, body: dict, check_quota: bool = False) -> tuple[dict, bool]:
        """Validate a VM PUT and store it (the disk too); returns (record, created). ``check_quota``:
        refuse it when its vCPUs would exceed a quota (a PUT; seeds bypass the quotas)."""
        group = self._require_group(rg, write=True)
        location = self._location(body, "Microsoft.Compute/virtualMachines")
        arm_id = self._resource_id(group, COMPUTE, "virtualMachines", name)
        existing = self._lookup(arm_id)
        if existing is not None and existing["provisioning"] == "Deleting":
            raise self._marked_for_deletion(existing, "PUT")
        if existing is not None and existing["location"] != location:
            raise ArmError(409, "PropertyChangeNotAllowed", "Changing property 'location' is not allowed.",
                           "location")
        vm_id = existing["id"] if existing else arm_id
        props = body.get("properties")
        if not isinstance(props, dict):
            raise _missing("properties")
        size = self._vm_size(props, location)
        if check_quota:
            self._check_vcpu_quota(location, size, existing)
        image_key, image_ref = self._image(props, existing)
        image = presets.IMAGES[image_key]
        os_disk = self._os_disk(props, existing, name, image, group)
        os_profile, secret = self._os_profile(props, existing, name, image)
        nics = self._vm_nics(props, vm_id, location)
        record = {
            "kind": "vm", "id": vm_id, "name": existing["name"] if existing else name,
            "parent": group["key"], "location": location, "tags": self._tags(body),
            "provisioning": "Succeeded", "guid": existing["guid"] if existing else new_guid(),
            "created": existing["created"] if existing else now_iso(),
            "etag": existing["etag"] + 1 if existing else 1,
            "size": size.name, "image_key": image_key, "image": image_ref, "os_disk": os_disk,
            "os_profile": os_profile, "secret": secret, "nics": nics,
            "power": existing["power"] if existing else "running",
            "zones": body.get("zones") or (existing or {}).get("zones"),
            "extra": {k: copy.deepcopy(v) for k, v in props.items() if k not in MANAGED_PROPERTIES},
        }
        self._add(record)
        self._attach_disk(record, image, group)
        for nic in nics:
            nic_record = self._lookup(nic["id"])
            if not nic_record.get("mac"):
                digits = nic_record["guid"].replace("-", "")[:6].upper()
                nic_record["mac"] = "00-0D-3A-" + "-".join(digits[i:i + 2] for i in range(0, 6, 2))
        return record, existing is None

    def _vm_size(self, props: dict, location: str) -> presets.VmSize:
        wanted = (props.get("hardwareProfile") or {}).get("vmSize")
        if not wanted:
            raise _missing("hardwareProfile.vmSize")
        offered = {s.name.lower(): s for s in presets.sizes_in(location)}
        size = offered.get(str(wanted).lower())
        if size is None:
            names = ", ".join(s.name for s in offered.values())
            raise _invalid(f"The value {wanted} provided for the VM size is not valid. The valid "
                           f"sizes in the current region are: {names}.", "vmSize")
        return size

    def _image(self, props: dict, existing: dict | None) -> tuple[tuple, dict]:
        reference = (props.get("storageProfile") or {}).get("imageReference")
        if not isinstance(reference, dict):
            if existing is not None:  # an update may leave the storage profile out
                return existing["image_key"], existing["image"]
            raise _missing("storageProfile.imageReference")
        for part in ("publisher", "offer", "sku", "version"):
            if not reference.get(part):
                raise _invalid(f"The value of parameter imageReference.{part} is invalid.",
                               f"imageReference.{part}")
        key = (reference["publisher"].lower(), reference["offer"].lower(), reference["sku"].lower())
        image = presets.IMAGES.get(key)
        version = str(reference["version"])
        if image is None or (version.lower() != "latest" and version not in image.versions):
            raise ArmError(404, "PlatformImageNotFound",
                           f"The platform image '{reference['publisher']}:{reference['offer']}:"
                           f"{reference['sku']}:{version}' is not available. Verify that all fields "
                           "in the storage profile are correct. For more details about storage "
                           "profile information, please refer to https://aka.ms/storageprofile",
                           "imageReference")
        ref = {"publisher": reference["publisher"], "offer": reference["offer"],
               "sku": reference["sku"], "version": version,
               "exactVersion": image.latest if version.lower() == "latest" else version}
        if existing is not None and (key != existing["image_key"]
                                     or ref["exactVersion"] != existing["image"]["exactVersion"]):
            raise ArmError(409, "PropertyChangeNotAllowed",
                           "Changing property 'imageReference' is not allowed.", "imageReference")
        return key, ref

    def _os_disk(self, props: dict, existing: dict | None, vm_name: str,
                 image: presets.PlatformImage, group: dict) -> dict:
        requested = (props.get("storageProfile") or {}).get("osDisk") or {}
        if existing is not None:
            disk = dict(existing["os_disk"])
            if requested.get("name") and requested["name"].lower() != disk["name"].lower():
                raise ArmError(409, "PropertyChangeNotAllowed",
                               "Changing property 'osDisk.name' is not allowed.", "osDisk.name")
        else:
            create_option = str(requested.get("createOption") or "FromImage")
            if create_option.lower() != "fromimage":
                raise _invalid(f"The simulator creates OS disks from platform images only; "
                               f"createOption '{create_option}' is not supported.", "osDisk.createOption")
            name = requested.get("name") or f"{vm_name}_OsDisk_1_{new_guid().replace('-', '')}"
            disk_id = self._resource_id(group, COMPUTE, "disks", name)
            clash = self._lookup(disk_id)
            if clash is not None:
                raise ArmError(409, "Conflict",
                               f"Disk {name} already exists in resource group {group['name'].upper()}. "
                               "Only CreateOption.Attach is supported.", "osDisk.name")
            storage = (requested.get("managedDisk") or {}).get("storageAccountType") or "Standard_LRS"
            if storage.lower() not in STORAGE_TYPES:
                raise _invalid(f"Storage account type '{storage}' is not supported.",
                               "osDisk.managedDisk.storageAccountType")
            disk = {"name": name, "id": disk_id, "storage": STORAGE_TYPES[storage.lower()],
                    "caching": "ReadWrite", "delete_option": "Detach", "size_gb": image.disk_gb}
        if requested.get("caching"):
            disk["caching"] = requested["caching"]
        if requested.get("deleteOption"):
            option = DELETE_OPTIONS.get(str(requested["deleteOption"]).lower())
            if option is None:
                raise _invalid(f"The value '{requested['deleteOption']}' of osDisk.deleteOption is "
                               "invalid. Allowed values are Delete and Detach.", "osDisk.deleteOption")
            disk["delete_option"] = option
        if requested.get("diskSizeGB") is not None:
            size_gb = int(requested["diskSizeGB"])
            floor = max(image.disk_gb, existing["os_disk"]["size_gb"] if existing else 0)
            if size_gb < floor:
                raise _invalid(f"The specified disk size {size_gb} GB is smaller than the size of "
                               f"the corresponding disk in the VM image: {floor} GB. This is not "
                               "allowed. Please choose equal or greater size or do not specify "
                               "explicitly.", "osDisk.diskSizeGB")
            disk["size_gb"] = size_gb
        return disk

    def _os_profile(self, props: dict, existing: dict | None, vm_name: str,
                    image: presets.PlatformImage) -> tuple[dict, dict]:
        requested = props.get("osProfile")
        if existing is not None:
            if requested is not None:
                self._check_os_profile_unchanged(existing, requested)
            return existing["os_profile"], existing["secret"]
        if not isinstance(requested, dict):
            raise _missing("osProfile")
        username = requested.get("adminUsername")
        if not username:
            raise _missing("osProfile.adminUsername")
        if str(username).lower() in presets.DISALLOWED_ADMIN_USERNAMES:
            raise _invalid("The Admin Username specified is not allowed.", "adminUsername")
        computer_name = requested.get("computerName") or vm_name
        password = requested.get("adminPassword")
        custom_data = requested.get("customData")
        if custom_data is not None:
            try:
                base64.b64decode(custom_data, validate=True)
                valid = len(custom_data) <= 87380
            except (binascii.Error, ValueError, TypeError):
                valid = False
            if not valid:
                raise _invalid("Custom data in OSProfile must be in Base64 encoding and with a "
                               "maximum length of 87380 characters.", "customData")
        if password is not None:
            self._check_password(password, image.os_type)
        profile = {"computerName": computer_name, "adminUsername": username, "secrets": [],
                   "allowExtensionOperations": True, "requireGuestProvisionSignal": True}
        if image.os_type == "Windows":
            if password is None:
                raise _missing("adminPassword")
            profile["windowsConfiguration"] = {
                "provisionVMAgent": True, "enableAutomaticUpdates": True,
                "patchSettings": {"patchMode": "AutomaticByOS", "assessmentMode": "ImageDefault"}}
        else:
            if len(computer_name) > 64 or set(computer_name) & LINUX_HOSTNAME_FORBIDDEN:
                raise _invalid(LINUX_HOSTNAME_RULE, "computerName")
            profile["linuxConfiguration"] = self._linux_configuration(requested, username, password)
        return profile, {"adminPassword": password, "customData": custom_data}

    @staticmethod
    def _check_password(password: str, os_type: str) -> None:
        low, high = (8, 123) if os_type == "Windows" else (6, 72)
        classes = sum([any(c.islower() for c in password), any(c.isupper() for c in password),
                       any(c.isdigit() for c in password), any(not c.isalnum() for c in password)])
        if not low <= len(password) <= high or classes < 3:
            raise _invalid(f"The supplied password must be between {low}-{high} characters long and "
                           "must satisfy at least 3 of password complexity requirements from the "
                           "following: 1) Contains an uppercase character 2) Contains a lowercase "
                           "character 3) Contains a numeric digit 4) Contains a special character "
                           "5) Control characters are not allowed", "adminPassword")

    @staticmethod
    def _linux_configuration(requested: dict, username: str, password) -> dict:
        linux = requested.get("linuxConfiguration") or {}
        keys = []
        for key in ((linux.get("ssh") or {}).get("publicKeys") or []):
            data = str(key.get("keyData") or "").strip()
            if not SSH_KEY.match(data):
                raise _invalid("The value of parameter linuxConfiguration.ssh.publicKeys.keyData is "
                               "invalid.", "linuxConfiguration.ssh.publicKeys.keyData")
            default_path = f"/home/{username}/.ssh/authorized_keys"
            path = key.get("path") or default_path
            if path != default_path:
                raise _invalid("Destination path for SSH public keys is currently limited to its "
                               f"default value {default_path} due to a known issue in Linux "
                               "provisioning agent.", "linuxConfiguration.ssh.publicKeys.path")
            keys.append({"path": path, "keyData": data})
        disable_password = bool(linux.get("disablePasswordAuthentication"))
        if disable_password and not keys:
            raise _invalid("Authentication using either SSH or by user name and password must be "
                           "enabled in Linux profile.", "linuxConfiguration")
        if not disable_password and password is None:
            raise _missing("adminPassword")
        configuration = {"disablePasswordAuthentication": disable_password,
                         "provisionVMAgent": linux.get("provisionVMAgent", True),
                         "patchSettings": {"patchMode": "ImageDefault", "assessmentMode": "ImageDefault"},
                         "enableVMAgentPlatformUpdates": False}
        if keys:
            configuration["ssh"] = {"publicKeys": keys}
        return configuration

    @staticmethod
    def _check_os_profile_unchanged(existing: dict, requested: dict) -> None:
        """Azure refuses any change to the OS profile of an existing VM. Fields left out
        (as a GET -> PUT round trip leaves out the password and custom data) are unchanged."""
        current, secret = existing["os_profile"], existing["secret"]
        changed = []
        for field in ("computerName", "adminUsername"):
            if requested.get(field) is not None and requested[field] != current[field]:
                changed.append(field)
        for field in ("adminPassword", "customData"):
            if requested.get(field) is not None and requested[field] != secret.get(field):
                changed.append(field)
        linux = requested.get("linuxConfiguration")
        if isinstance(linux, dict) and "linuxConfiguration" in current:
            have = current["linuxConfiguration"]
            if linux.get("disablePasswordAuthentication") is not None and \
                    bool(linux["disablePasswordAuthentication"]) != have["disablePasswordAuthentication"]:
                changed.append("linuxConfiguration.disablePasswordAuthentication")
            wanted_keys = (linux.get("ssh") or {}).get("publicKeys")
            if wanted_keys is not None:
                username = current["adminUsername"]
                normalised = [(k.get("path") or f"/home/{username}/.ssh/authorized_keys",
                               str(k.get("keyData") or "").strip()) for k in wanted_keys]
                have_keys = [(k["path"], k["keyData"]) for k in (have.get("ssh") or {}).get("publicKeys", [])]
                if normalised != have_keys:
                    changed.append("linuxConfiguration.ssh.publicKeys")
        if changed:
            raise ArmError(409, "PropertyChangeNotAllowed", "Changing property 'osProfile' is not allowed.",
                           "osProfile")

    def _vm_nics(self, props: dict, vm_id: str, location: str) -> list[dict]:
        wanted = (props.get("networkProfile") or {}).get("networkInterfaces") or []
        if not wanted:
            raise _invalid("At least one network interface is required in networkProfile.",
                           "networkProfile.networkInterfaces")
        nics = []
        for entry in wanted:
            nic_id = entry.get("id") if isinstance(entry, dict) else None
            nic = self._lookup(nic_id)
            if nic is None or nic["kind"] != "nic":
                raise ArmError(404, "NotFound", f"Network interface '{nic_id}' was not found.",
                               "networkProfile.networkInterfaces")
            users = [u for u in self._users(nic["key"], "vm") if u.lower() != vm_id.lower()]
            if users:
                raise ArmError(400, "NicInUse",
                               f"Network Interface {nic['id']} is used by existing resource "
                               f"{users[0]}. In order to use this network interface for another "
                               "virtual machine, the network interface must be dissociated from "
                               "the resource.")
            if nic["location"] != location:
                raise _invalid(f"The network interface {nic['id']} is in location "
                               f"'{nic['location']}', but the virtual machine is in '{location}'.",
                               "networkProfile.networkInterfaces")
            nic_props = entry.get("properties") or {}
            item = {"id": nic["id"]}
            if nic_props.get("primary") is not None:
                item["primary"] = bool(nic_props["primary"])
            option = nic_props.get("deleteOption")
            if option is not None:
                item["deleteOption"] = DELETE_OPTIONS.get(str(option).lower())
                if item["deleteOption"] is None:
                    raise _invalid(f"The value '{option}' of deleteOption is invalid. Allowed values "
                                   "are Delete and Detach.", "networkProfile.networkInterfaces.deleteOption")
            nics.append(item)
        if len(nics) > 1 and sum(1 for n in nics if n.get("primary")) != 1:
            raise _invalid("Virtual machine must have exactly one primary network interface.",
                           "networkProfile.networkInterfaces")
        return nics

    def _attach_disk(self, vm: dict, image: presets.PlatformImage, group: dict) -> None:
        spec = vm["os_disk"]
        disk = self._lookup(spec["id"])
        if disk is None:
            disk = self._add({
                "kind": "disk", "id": spec["id"], "name": spec["name"], "parent": group["key"],
                "location": vm["location"], "tags": None, "provisioning": "Succeeded",
                "guid": new_guid(), "created": now_iso(), "zones": vm.get("zones"),
                "storage": spec["storage"], "os_type": image.os_type, "generation": image.generation,
                "image_id": (f"/Subscriptions/{presets.SUBSCRIPTION_ID}/Providers/Microsoft.Compute/"
                             f"Locations/{vm['location']}/Publishers/{image.publisher}/ArtifactTypes/"
                             f"VMImage/Offers/{image.offer}/Skus/{image.sku}/Versions/"
                             f"{vm['image']['exactVersion']}"),
            })
        disk["size_gb"] = spec["size_gb"]
        disk["managed_by"] = vm["key"]

    # ---- VM reads -----------------------------------------------------------------------
    def _render_vm(self, record: dict, instance_view: bool = False) -> dict:
        disk = self._lookup(record["os_disk"]["id"])
        spec = record["os_disk"]
        props = copy.deepcopy(record["extra"])
        props.update({
            "vmId": record["guid"],
            "hardwareProfile": {"vmSize": record["size"]},
            "storageProfile": {
                "imageReference": dict(record["image"]),
                "osDisk": {
                    "osType": presets.IMAGES[record["image_key"]].os_type, "name": spec["name"],
                    "createOption": "FromImage", "caching": spec["caching"],
                    "managedDisk": {"storageAccountType": spec["storage"],
                                    "id": self._compute_id(disk) if disk else spec["id"]},
                    "deleteOption": spec["delete_option"],
                    "diskSizeGB": disk["size_gb"] if disk else spec["size_gb"],
                },
                "dataDisks": [], "diskControllerType": "SCSI",
            },
            "osProfile": copy.deepcopy(record["os_profile"]),
            "networkProfile": {"networkInterfaces": [
                {"id": nic["id"], **({"properties": {k: v for k, v in nic.items() if k != "id"}}
                                     if len(nic) > 1 else {})}
                for nic in record["nics"]]},
            "provisioningState": record["provisioning"],
            "timeCreated": record["created"],
        })
        if instance_view:
            props["instanceView"] = self._instance_view(record)
        body = {"name": record["name"], "id": self._compute_id(record),
                "type": "Microsoft.Compute/virtualMachines", "location": record["location"],
                "etag": f'"{record["etag"]}"', "properties": props}
        if record.get("tags") is not None:
            body["tags"] = dict(record["tags"])
        if record.get("zones"):
            body["zones"] = list(record["zones"])
        return body

    def _instance_view(self, record: dict) -> dict:
        image = presets.IMAGES[record["image_key"]]
        provisioning = record["provisioning"]
        if provisioning == "Failed":
            error = record.get("failure") or {"code": "InternalExecutionError", "message": ""}
            status = {"code": f"ProvisioningState/failed/{error['code']}", "level": "Error",
                      "displayStatus": "Provisioning failed", "message": error["message"]}
        else:
            status = {"code": f"ProvisioningState/{provisioning.lower()}", "level": "Info",
                      "displayStatus": PROVISIONING_DISPLAY[provisioning]}
        status["time"] = record["created"]
        statuses = [status]
        power = record.get("power")
        if power:
            statuses.append({"code": f"PowerState/{power}", "level": "Info",
                             "displayStatus": POWER_DISPLAY[power]})
        view = {"hyperVGeneration": image.generation, "statuses": statuses,
                "disks": [{"name": record["os_disk"]["name"], "statuses": [{
                    "code": "ProvisioningState/succeeded", "level": "Info",
                    "displayStatus": "Provisioning succeeded", "time": record["created"]}]}]}
        if power == "running" and provisioning == "Succeeded":
            # The guest reports itself only while it runs.
            view.update({
                "computerName": record["os_profile"]["computerName"], "osName": image.os_name,
                "osVersion": image.os_version,
                "vmAgent": {"vmAgentVersion": "2.11.1.12", "statuses": [{
                    "code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Ready",
                    "message": "Guest Agent is running", "time": now_iso()}],
                    "extensionHandlers": []},
            })
        return view

    def _get_vm(self, request: Request, sub: str, rg: str, name: str) -> Response:
        record = self._find_vm(self._require_group(rg), name)
        expand = request.args.get("$expand", "")
        return json_response(self._render_vm(record, instance_view=expand.lower() == "instanceview"))

    def _get_instance_view(self, request: Request, sub: str, rg: str, name: str) -> Response:
        return json_response(self._instance_view(self._find_vm(self._require_group(rg), name)))

    def _vms(self, location: str | None = None) -> list[dict]:
        return [r for r in self.records.values()
                if r["kind"] == "vm" and (location is None or r["location"] == location)]

    def _list_vms(self, request: Request, sub: str, rg: str) -> Response:
        group = self._require_group(rg)
        expand = request.args.get("$expand", "").lower() == "instanceview"
        return json_response(page(request, self._children(group["key"], "vm"), self.page_size,
                                  lambda record: self._render_vm(record, expand)))

    def _list_vms_all(self, request: Request, sub: str) -> Response:
        status_only = request.args.get("statusOnly", "").lower() == "true"
        expand = request.args.get("$expand", "").lower() == "instanceview"
        vm_filter = request.args.get("$filter")
        vms = self._vms()
        if vm_filter:
            match = re.fullmatch(r"\s*'?virtualMachineScaleSet/id'?\s+eq\s+'([^']*)'\s*", vm_filter, re.I)
            if not match:
                raise _invalid(f"The $filter '{vm_filter}' is not supported. Only "
                               "'virtualMachineScaleSet/id' eq '<id>' is.", "$filter")
            vms = []  # the simulator has no scale sets
        elif expand:
            raise _invalid("The $expand=instanceView option can only be specified together with "
                           "a valid $filter option.", "$expand")
        return json_response(page(request, vms, self.page_size,
                                  lambda record: self._render_vm(record, status_only or expand)))

    def _list_vms_by_location(self, request: Request, sub: str, loc: str) -> Response:
        return json_response(page(request, self._vms(normalize_location(loc)), self.page_size, self._render_vm))

    # ---- VM actions and delete ----------------------------------------------------------
    @staticmethod
    def _marked_for_deletion(record: dict, operation: str) -> ArmError:
        return ArmError(409, "OperationNotAllowed",
                        f"Operation '{operation}' is not allowed on VM '{record['name']}' since the "
                        "VM is marked for deletion. You can only retry the Delete operation (or "
                        "wait for an ongoing one to complete).")

    def _vm_action(self, request: Request, sub: str, rg: str, name: str, action: str) -> Response:
        record = self._find_vm(self._require_group(rg), name)
        operation, transitional, final = ACTIONS[action]
        if record["provisioning"] == "Deleting":
            raise self._marked_for_deletion(record, action)
        if action in ("restart", "powerOff") and record.get("power") in ("deallocated", "deallocating"):
            raise ArmError(409, "OperationNotAllowed",
                           f"Operation '{action}' is not allowed on VM '{record['name']}' since the "
                           "VM is deallocated or marked to be deallocated.")
        key, previous = record["key"], record.get("power")
        record["power"] = transitional

        def done():
            if key in self.records:
                self.records[key]["power"] = final

        def undo():
            if key in self.records:
                self.records[key]["power"] = previous

        op = self._begin(operation, COMPUTE, record["location"], done, undo)
        return self._accepted(request, op)

    def _delete_vm(self, request: Request, sub: str, rg: str, name: str) -> Response:
        group = self._require_group(rg)
        record = self._lookup(self._resource_id(group, COMPUTE, "virtualMachines", name))
        if record is None:
            return json_response(None, 204)
        key, previous = record["key"], record["provisioning"]
        record["provisioning"] = "Deleting"

        def undo():
            if key in self.records:
                self.records[key]["provisioning"] = previous

        op = self._begin("vms.delete", COMPUTE, record["location"], lambda: self._destroy_vm(key), undo)
        return self._accepted(request, op)

    def _destroy_vm(self, key: str) -> None:
        """Remove a VM and apply its delete options: ``Delete`` takes the OS disk / NIC
        along, ``Detach`` (Azure's default) leaves them, unattached."""
        record = self.records.get(key)
        if record is None:
            return
        self._remove(key)
        disk = self._lookup(record["os_disk"]["id"])
        if disk is not None:
            if record["os_disk"]["delete_option"] == "Delete":
                self._remove(disk["key"])
            else:
                disk["managed_by"] = None
        for nic in record["nics"]:
            nic_record = self._lookup(nic["id"])
            if nic_record is not None and nic.get("deleteOption") == "Delete":
                self._remove(nic_record["key"])

    # ---- sizes and SKUs -----------------------------------------------------------------
    def _list_vm_sizes(self, request: Request, sub: str, loc: str) -> Response:
        location = normalize_location(loc)
        if location not in presets.LOCATIONS:
            raise ArmError(400, "NoRegisteredProviderFound",
                           f"No registered resource provider found for location '{loc}' and API "
                           f"version '{request.args.get('api-version')}' for type "
                           "'locations/vmSizes'.")
        return json_response({"value": [s.as_vm_size() for s in presets.sizes_in(location)]})

    def _list_vm_available_sizes(self, request: Request, sub: str, rg: str, name: str) -> Response:
        record = self._find_vm(self._require_group(rg), name)
        return json_response({"value": [s.as_vm_size() for s in presets.sizes_in(record["location"])]})

    def _list_skus(self, request: Request, sub: str) -> Response:
        locations = list(presets.LOCATIONS)
        sku_filter = request.args.get("$filter")
        if sku_filter:
            match = re.search(r"location\s+eq\s+'([^']+)'", sku_filter, re.I)
            if match:
                locations = [normalize_location(match.group(1))]
        items = []
        for location in locations:
            if location not in presets.LOCATIONS:
                continue
            for size in presets.sizes_in(location):
                items.append({
                    "resourceType": "virtualMachines", "name": size.name, "tier": "Standard",
                    "size": size.name.split("_", 1)[1], "family": size.family,
                    "locations": [location],
                    "locationInfo": [{"location": location, "zones": ["1", "2", "3"], "zoneDetails": []}],
                    "capabilities": size.capabilities(), "restrictions": [],
                })
            for storage, tier in (("Standard_LRS", "Standard"), ("StandardSSD_LRS", "Standard"),
                                  ("Premium_LRS", "Premium")):
                items.append({
                    "resourceType": "disks", "name": storage, "tier": tier, "size": "E4" if "SSD" in storage
                    else ("P4" if tier == "Premium" else "S4"),
                    "family": storage, "locations": [location],
                    "locationInfo": [{"location": location, "zones": ["1", "2", "3"], "zoneDetails": []}],
                    "capabilities": [{"name": "MaxSizeGiB", "value": "32767"},
                                     {"name": "MinSizeGiB", "value": "0"}],
                    "restrictions": [],
                })
        return json_response({"value": items})

    # ---- vCPU quotas (Usage - List) ---------------------------------------------------------
    def vcpu_limit(self, location: str, name: str) -> int:
        """The limit of quota ``name`` (``cores`` or a family, any case) in ``location``: the option
        ``vcpu_quotas`` for that location, else for every location, else the default."""
        quotas = dict((str(quota).lower(), limit) for quota, limit in self.vcpu_quotas.items())
        key = name.lower()
        return int(quotas.get(f"{normalize_location(location)}/{key}", quotas.get(key, presets.DEFAULT_VCPU_QUOTA)))

    def vcpu_use(self, location: str, name: str) -> int:
        """vCPUs the location's machines take of quota ``name``: every VM counts, running or deallocated,
        as ARM counts them."""
        key = name.lower()
        used = 0
        for record in self._vms(normalize_location(location)):
            size = presets.VM_SIZES.get(str(record.get("size") or "").lower())
            if size is not None and (key == presets.REGIONAL_QUOTA or size.family.lower() == key):
                used += size.cores
        return used

    def _check_vcpu_quota(self, location: str, size: presets.VmSize, existing: dict | None) -> None:
        """ARM's refusal of a PUT whose vCPUs exceed the family's quota or the regional total (a resize
        needs only the difference): 409 OperationNotAllowed, family first."""
        old = presets.VM_SIZES.get(str(existing.get("size") or "").lower()) if existing else None
        for name, words, page_name in ((size.family, f"{size.family} Cores", "per-vm-quota-requests"),
                                       (presets.REGIONAL_QUOTA, "Total Regional Cores", "regional-quota-requests")):
            key = name.lower()
            freed = old.cores if old is not None and (key == presets.REGIONAL_QUOTA or old.family.lower() == key) else 0
            required = size.cores - freed
            if required <= 0:
                continue
            limit, used = self.vcpu_limit(location, key), self.vcpu_use(location, key)
            if used + required > limit:
                raise ArmError(409, "OperationNotAllowed", (
                    f"Operation could not be completed as it results in exceeding approved {words} quota. "
                    f"Additional details - Deployment Model: Resource Manager, Location: {location}, Current Limit: "
                    f"{limit}, Current Usage: {used}, Additional Required: {required}, (Minimum) New Limit Required: "
                    f"{used + required}. Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/"
                    "Microsoft_Azure_Capacity/UsageAndQuota.ReactView by specifying parameters listed in the "
                    "'Details' section for deployment to succeed. Please read more about quota limits at "
                    f"https://docs.microsoft.com/en-us/azure/azure-supportability/{page_name}"))

    def _list_usages(self, request: Request, sub: str, loc: str) -> Response:
        location = normalize_location(loc)
        if location not in presets.LOCATIONS:
            raise ArmError(400, "NoRegisteredProviderFound",
                           f"No registered resource provider found for location '{loc}' and API version "
                           f"'{request.args.get('api-version')}' for type 'locations/usages'.")

        def usage(name: str, display: str, used: int, limit: int) -> dict:
            return {"limit": limit, "unit": "Count", "currentValue": used,
                    "name": {"value": name, "localizedValue": display}}

        machines = len(self._vms(location))
        others = {"availabilitySets": 0, "virtualMachines": machines, "virtualMachineScaleSets": 0}
        items = [usage(name, display, others[name], limit) for name, display, limit in presets.OTHER_QUOTAS]
        items.insert(1, usage(presets.REGIONAL_QUOTA, "Total Regional vCPUs",
                              self.vcpu_use(location, presets.REGIONAL_QUOTA),
                              self.vcpu_limit(location, presets.REGIONAL_QUOTA)))
        items += [usage(family, presets.family_display(family), self.vcpu_use(location, family),
                        self.vcpu_limit(location, family)) for family in presets.families()]
        return json_response({"value": items})

    # ---- marketplace images ---------------------------------------------------------------
    def _platform_image(self, loc: str, pub: str, offer: str, sku: str) -> presets.PlatformImage:
        image = presets.IMAGES.get((pub.lower(), offer.lower(), sku.lower()))
        if normalize_location(loc) not in presets.LOCATIONS or image is None:
            raise ArmError(404, "NotFound", "Artifact: VMImage was not found.")
        return image

    def _image_version_id(self, sub: str, loc: str, image: presets.PlatformImage, version: str) -> str:
        return (f"/Subscriptions/{sub}/Providers/Microsoft.Compute/Locations/{normalize_location(loc)}/Publishers/"
                f"{image.publisher}/ArtifactTypes/VMImage/Offers/{image.offer}/Skus/{image.sku}/Versions/{version}")

    def _list_image_versions(self, request: Request, sub: str, loc: str, pub: str, offer: str,
                             sku: str) -> Response:
        """A bare JSON list, as ARM answers Virtual Machine Images - List."""
        image = self._platform_image(loc, pub, offer, sku)
        return json_response([{"location": normalize_location(loc), "name": version,
                               "id": self._image_version_id(sub, loc, image, version)} for version in image.versions])

    def _get_image_version(self, request: Request, sub: str, loc: str, pub: str, offer: str, sku: str,
                           version: str) -> Response:
        image = self._platform_image(loc, pub, offer, sku)
        if version not in image.versions:
            raise ArmError(404, "NotFound", "Artifact: VMImage was not found.")
        return json_response({
            "location": normalize_location(loc), "name": version,
            "id": self._image_version_id(sub, loc, image, version),
            "properties": {"hyperVGeneration": image.generation, "architecture": "x64",
                           "osDiskImage": {"operatingSystem": image.os_type, "sizeInGb": image.disk_gb},
                           "dataDiskImages": [], "automaticOSUpgradeProperties": {"automaticOSUpgradeSupported": False},
                           "imageDeprecationStatus": {"imageState": "Active"}}})

    # ---- disks --------------------------------------------------------------------------
    def _render_disk(self, record: dict) -> dict:
        vm = self.records.get(record.get("managed_by") or "")
        if vm is None:
            state = "Unattached"
        elif vm.get("power") == "deallocated":
            state = "Reserved"
        else:
            state = "Attached"
        premium = record["storage"].startswith("Premium")
        body = {
            "name": record["name"], "id": self._compute_id(record), "type": "Microsoft.Compute/disks",
            "location": record["location"],
            "sku": {"name": record["storage"], "tier": "Premium" if premium else "Standard"},
            "properties": {
                "osType": record["os_type"], "hyperVGeneration": record["generation"],
                "creationData": {"createOption": "FromImage", "imageReference": {"id": record["image_id"]}},
                "diskSizeGB": record["size_gb"], "diskSizeBytes": record["size_gb"] * 1024 ** 3,
                "diskIOPSReadWrite": 120 if premium else 500, "diskMBpsReadWrite": 25 if premium else 60,
                "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
                "timeCreated": record["created"], "provisioningState": record["provisioning"],
                "diskState": state, "uniqueId": record["guid"], "networkAccessPolicy": "AllowAll",
                "publicNetworkAccess": "Enabled",
            },
        }
        if premium:
            body["properties"]["tier"] = "P4"
        if vm is not None:
            body["managedBy"] = self._compute_id(vm)
        if record.get("tags") is not None:
            body["tags"] = dict(record["tags"])
        if record.get("zones"):
            body["zones"] = list(record["zones"])
        return body

    def _find_disk(self, group: dict, name: str) -> dict:
        record = self._lookup(self._resource_id(group, COMPUTE, "disks", name))
        if record is None:
            raise self._not_found(group, COMPUTE, "disks", name)
        return record

    def _get_disk(self, request: Request, sub: str, rg: str, name: str) -> Response:
        return json_response(self._render_disk(self._find_disk(self._require_group(rg), name)))

    def _list_disks(self, request: Request, sub: str, rg: str) -> Response:
        group = self._require_group(rg)
        return json_response(page(request, self._children(group["key"], "disk"), self.page_size, self._render_disk))

    def _list_disks_all(self, request: Request, sub: str) -> Response:
        """Every managed disk of the subscription (``disks.list()`` in the SDK), paged."""
        disks = [record for record in self.records.values() if record["kind"] == "disk"]
        return json_response(page(request, disks, self.page_size, self._render_disk))

    def _patch_disk(self, request: Request, sub: str, rg: str, name: str) -> Response:
        """PATCH a disk: the simulator applies ``tags`` (replacing them, as ARM does) and refuses
        the other updatable properties it does not model."""
        record = self._find_disk(self._require_group(rg, write=True), name)
        body = self._json(request)
        unsupported = sorted(set(body) - {"tags"})
        if unsupported:
            raise _invalid(f"The simulator updates only the tags of a disk, not {', '.join(unsupported)}.",
                           unsupported[0])
        tags = self._tags(body)
        key = record["key"]

        def apply():
            if key in self.records and tags is not None:
                self.records[key]["tags"] = dict(tags)

        op = self._begin("disks.update", COMPUTE, record["location"], apply)
        return self._put_response(request, op, self._render_disk(self.records[key]), created=False)

    def _delete_disk(self, request: Request, sub: str, rg: str, name: str) -> Response:
        group = self._require_group(rg)
        record = self._lookup(self._resource_id(group, COMPUTE, "disks", name))
        if record is None:
            return json_response(None, 204)
        vm = self.records.get(record.get("managed_by") or "")
        if vm is not None:
            raise ArmError(409, "OperationNotAllowed",
                           f"Disk {record['name']} is attached to VM {self._compute_id(vm)}.")
        key = record["key"]
        op = self._begin("disks.delete", COMPUTE, record["location"], lambda: self._remove(key))
        return self._accepted(request, op)

    # ---- seeds and helpers for tests ----------------------------------------------------
    def seed_vm(self, name: str, resource_group: str | None = None, *,
                location: str = presets.DEFAULT_LOCATION, size: str = presets.DEFAULT_SIZE,
                image: str = presets.DEFAULT_IMAGE, power_state: str = "running",
                admin_username: str = "waldur", ssh_public_key: str = presets.SEED_SSH_PUBLIC_KEY,
                admin_password: str | None = None, custom_data: str | None = None,
                nsg_name: str | None = None, allowed_ssh_ranges: list | None = None,
                network_cidr: str = "10.0.0.0/16", subnet_cidr: str = "10.0.0.0/24",
                os_disk_delete_option: str = "Detach", nic_delete_option: str | None = None,
                public_ip: bool = True, tags: dict | None = None, chain_tags: dict | None = None,
                group_tags: dict | None = None, created: str | None = None) -> str:
        """Create a complete, already-provisioned machine the way Waldur Mastermind did
        (group ``group-<4 hex>-<vm>`` unless given, ``net``/``subnet``/``pubip``/``nic``
        + name, ip config ``ipconf<vm>``), bypassing LRO mode and fault injection.

        ``tags`` go on the VM; ``chain_tags`` on every object that takes tags (network, public
        IP, NSG, NIC, VM, OS disk), as the agent tags a chain it builds; ``group_tags`` on the
        resource group (a shared group seeded into again keeps none). ``created`` (ISO 8601)
        backdates every object seeded. Returns the VM's ARM id."""
        if power_state not in POWER_DISPLAY:
            raise ValueError(f"unknown power state {power_state!r}; known: {sorted(POWER_DISPLAY)}")
        with self.lock:
            group_name = resource_group or f"group-{new_guid()[:4]}-{name}"
            first = len(self.records)
            self.apply_group(group_name, {"location": location, "tags": group_tags})
            self.apply_vnet(group_name, f"net{name}", {
                "location": location, "tags": chain_tags,
                "properties": {"addressSpace": {"addressPrefixes": [network_cidr]}}})
            subnet = self.apply_subnet(group_name, f"net{name}", f"subnet{name}",
                                       {"properties": {"addressPrefix": subnet_cidr}})[0]
            ip_config = {"name": f"ipconf{name}", "properties": {"subnet": {"id": subnet["id"]}}}
            if public_ip:
                pip = self.apply_public_ip(group_name, f"pubip{name}", {
                    "location": location, "sku": {"name": "Standard"}, "tags": chain_tags,
                    "properties": {"publicIPAllocationMethod": "Static"}})[0]
                ip_config["properties"]["publicIPAddress"] = {"id": pip["id"]}
            nic_body = {"location": location, "tags": chain_tags, "properties": {"ipConfigurations": [ip_config]}}
            if nsg_name:
                rules = []
                if allowed_ssh_ranges:
                    rules.append({"name": "default-allow-ssh", "properties": {
                        "protocol": "Tcp", "sourcePortRange": "*", "destinationPortRange": "22",
                        "sourceAddressPrefixes": list(allowed_ssh_ranges),
                        "destinationAddressPrefix": "*", "access": "Allow", "priority": 1000,
                        "direction": "Inbound"}})
                nsg = self.apply_nsg(group_name, nsg_name, {
                    "location": location, "tags": chain_tags, "properties": {"securityRules": rules}})[0]
                nic_body["properties"]["networkSecurityGroup"] = {"id": nsg["id"]}
            nic = self.apply_nic(group_name, f"nic{name}", nic_body)[0]
            publisher, offer, sku, version = image.split(":")
            os_profile = {"computerName": name, "adminUsername": admin_username,
                          "linuxConfiguration": {
                              "disablePasswordAuthentication": admin_password is None,
                              "ssh": {"publicKeys": [{
                                  "path": f"/home/{admin_username}/.ssh/authorized_keys",
                                  "keyData": ssh_public_key}]}}}
            if admin_password is not None:
                os_profile["adminPassword"] = admin_password
            if custom_data is not None:
                os_profile["customData"] = custom_data
            nic_ref = {"id": nic["id"]}
            if nic_delete_option:
                nic_ref["properties"] = {"deleteOption": nic_delete_option}
            vm_tags = dict(chain_tags or {}, **(tags or {})) if (chain_tags or tags) else tags
            vm = self.apply_vm(group_name, name, {
                "location": location, "tags": vm_tags,
                "properties": {
                    "hardwareProfile": {"vmSize": size},
                    "storageProfile": {"imageReference": {"publisher": publisher, "offer": offer,
                                                          "sku": sku, "version": version},
                                       "osDisk": {"createOption": "FromImage",
                                                  "deleteOption": os_disk_delete_option}},
                    "osProfile": os_profile,
                    "networkProfile": {"networkInterfaces": [nic_ref]}}})[0]
            vm["power"] = power_state
            disk = self._lookup(vm["os_disk"]["id"])
            if disk is not None and chain_tags:
                disk["tags"] = dict(chain_tags)
            if created:
                for record in list(self.records.values())[first:]:
                    record["created"] = created
            return self._compute_id(vm)

    def vm_power_state(self, arm_id: str) -> str | None:
        """``running``, ``deallocated``, ``stopped``, a transitional state, or None."""
        with self.lock:
            self.lro.advance()
            record = self._lookup(arm_id)
            if record is None or record["kind"] != "vm":
                raise KeyError(arm_id)
            return record.get("power")

    def set_vm_power_state(self, arm_id: str, state: str) -> None:
        """Change a VM's power state out of band (someone used the portal)."""
        if state not in POWER_DISPLAY:
            raise ValueError(f"unknown power state {state!r}; known: {sorted(POWER_DISPLAY)}")
        with self.lock:
            record = self._lookup(arm_id)
            if record is None or record["kind"] != "vm":
                raise KeyError(arm_id)
            record["power"] = state

    def vm_admin_password(self, arm_id: str) -> str | None:
        """The admin password the VM was created with, so a test can assert it never
        shows up in any output. ARM itself never returns it."""
        with self.lock:
            record = self._lookup(arm_id)
            return record["secret"].get("adminPassword") if record else None

    def vm_custom_data(self, arm_id: str) -> str | None:
        """The custom data as sent (base64); ARM does not return it either."""
        with self.lock:
            record = self._lookup(arm_id)
            return record["secret"].get("customData") if record else None
