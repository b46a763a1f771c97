"""The DigitalOcean API v2 simulator (see the package docstring for the surface)."""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import itertools
import json
import math
import re
import threading
import time
import uuid
from collections import deque
from datetime import datetime, timezone
from urllib.parse import urlencode

from werkzeug.wrappers import Request, Response

from tests.simulators.common import Simulator, json_response
from tests.simulators.digitalocean import catalogue, presets

NOT_FOUND_MESSAGE = "The resource you were accessing could not be found."
UNAUTHORIZED_MESSAGE = "Unable to authenticate you."
# DigitalOcean's answer to a create in a region it listed as available but does not take the
# account's new droplets in (out of capacity, or kept for accounts already there).
REGION_UNAVAILABLE = "Region is not available"
RATE_LIMITED_MESSAGE = "API Rate limit exceeded."
PENDING_EVENT_MESSAGE = "Droplet already has a pending event."
RESIZE_WHILE_ON_MESSAGE = "Droplet is currently on. Please power it off to run this event."
DUPLICATE_KEY_MESSAGE = "SSH Key is already in use on your account"
INVALID_KEY_MESSAGE = "Key invalid, key should be of the format `type key [comment]`"

# DigitalOcean's error ids by status; every error body carries one plus a message.
ERROR_IDS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    422: "unprocessable_entity",
    429: "too_many_requests",
    500: "server_error",
    502: "bad_gateway",
    503: "service_unavailable",
    504: "gateway_timeout",
}

DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 200
MAX_NAMES_PER_CREATE = 10
MAX_USER_DATA_BYTES = 64 * 1024
# DigitalOcean's hostname rule for droplet names (the spec's pattern).
DROPLET_NAME = re.compile(r"^[a-zA-Z0-9]?[a-z0-9A-Z.\-]*[a-z0-9A-Z]$")
TAG_NAME = re.compile(r"^[a-zA-Z0-9_\-:]+$")
SSH_KEY_TYPES = frozenset({
    "ssh-rsa", "ssh-dss", "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
})
POWER_ACTIONS = {"shutdown": "off", "power_off": "off", "power_on": "active",
                 "reboot": "active", "power_cycle": "active"}
OTHER_ACTIONS = frozenset({"resize", "rename", "enable_backups", "disable_backups",
                           "enable_ipv6", "password_reset"})

FIRST_DROPLET_ID = 418_000_001
FIRST_ACTION_ID = 2_100_000_001
FIRST_KEY_ID = 512_301
FIRST_IMAGE_ID = 170_000_001

# Options, their types and defaults. The CLI passes strings, so every value is coerced.
OPTION_DEFAULTS = {
    "action_seconds": 0.0,   # a droplet action stays in-progress this long (0: until the next GET)
    "boot_seconds": 0.0,     # a new droplet stays "new" this long (0: until the next GET)
    "enforce_limits": False,  # apply DigitalOcean's documented request limits
    "burst_limit": presets.BURST_REQUEST_LIMIT,
    "burst_window": presets.BURST_WINDOW_SECONDS,
    "hourly_limit": presets.HOURLY_REQUEST_LIMIT,
    "droplet_limit": presets.DROPLET_LIMIT,
}


class ApiError(Exception):
    """Raised by handlers; becomes a DigitalOcean error response."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _coerce(name: str, value, default):
    if isinstance(default, bool):
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(f"option {name} must be a boolean, got {value!r}")
            return lowered in ("1", "true", "yes", "on")
        return bool(value)
    if isinstance(default, int):
        return int(value)
    return float(value)


def parse_options(options: dict) -> dict:
    """Typed options from keyword or ``--option key=value`` strings; unknown keys fail."""
    unknown = sorted(set(options) - set(OPTION_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown DigitalOcean simulator option(s) {unknown}; "
                         f"known: {sorted(OPTION_DEFAULTS)}")
    settings = dict(OPTION_DEFAULTS)
    for name, value in options.items():
        settings[name] = _coerce(name, value, OPTION_DEFAULTS[name])
    return settings


def fingerprint_of(public_key: str) -> str:
    """DigitalOcean's key fingerprint: MD5 of the base64-decoded blob, colon-separated hex.

    Raises ValueError when the text is not an OpenSSH public key."""
    parts = public_key.strip().split()
    if len(parts) < 2 or parts[0] not in SSH_KEY_TYPES:
        raise ValueError(INVALID_KEY_MESSAGE)
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(INVALID_KEY_MESSAGE) from None
    # The blob starts with its own length-prefixed key type, which must match.
    declared = len(parts[0]).to_bytes(4, "big") + parts[0].encode()
    if not blob.startswith(declared):
        raise ValueError(INVALID_KEY_MESSAGE)
    return ":".join(f"{byte:02x}" for byte in hashlib.md5(blob).digest())


def _now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _as_bool(value, field: str) -> bool:
    """A JSON boolean, or the strings "true"/"false" python-digitalocean sends for resize."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ApiError(422, f"{field} must be a boolean.")


class DigitalOceanSimulator(Simulator):
    name = "digitalocean"

    def __init__(self, preset: str | None = "default", latency: float = 0.0, **options):
        self.settings = parse_options(options)  # validated before anything starts
        self.exchanges: deque = deque(maxlen=20000)
        self._hour_lock = threading.Lock()
        super().__init__(preset, latency, **options)

    # ---- routes -----------------------------------------------------------------------
    def routes(self):
        api = self._api
        return [
            ("GET", "/v2/droplets", "droplets.list", api(self.list_droplets)),
            ("POST", "/v2/droplets", "droplets.create", api(self.create_droplets)),
            ("DELETE", "/v2/droplets", "droplets.delete_by_tag", api(self.delete_droplets_by_tag)),
            ("GET", "/v2/droplets/<int:droplet_id>", "droplets.get", api(self.get_droplet)),
            ("DELETE", "/v2/droplets/<int:droplet_id>", "droplets.delete", api(self.delete_droplet)),
            ("GET", "/v2/droplets/<int:droplet_id>/actions", "droplet_actions.list",
             api(self.list_droplet_actions)),
            ("POST", "/v2/droplets/<int:droplet_id>/actions", "droplet_actions.create",
             api(self.create_droplet_action)),
            ("GET", "/v2/droplets/<int:droplet_id>/actions/<int:action_id>", "droplet_actions.get",
             api(self.get_droplet_action)),
            ("GET", "/v2/actions/<int:action_id>", "actions.get", api(self.get_action)),
            ("GET", "/v2/account/keys", "keys.list", api(self.list_keys)),
            ("POST", "/v2/account/keys", "keys.create", api(self.create_key)),
            ("GET", "/v2/account/keys/<identifier>", "keys.get", api(self.get_key)),
            ("PUT", "/v2/account/keys/<identifier>", "keys.update", api(self.update_key)),
            ("DELETE", "/v2/account/keys/<identifier>", "keys.delete", api(self.delete_key)),
            ("GET", "/v2/sizes", "sizes.list", api(self.list_sizes)),
            ("GET", "/v2/regions", "regions.list", api(self.list_regions)),
            ("GET", "/v2/images", "images.list", api(self.list_images)),
            ("GET", "/v2/images/<identifier>", "images.get", api(self.get_image)),
            ("GET", "/v2/snapshots", "snapshots.list", api(self.list_snapshots)),
            ("GET", "/v2/tags", "tags.list", api(self.list_tags)),
            ("POST", "/v2/tags", "tags.create", api(self.create_tag)),
            ("GET", "/v2/tags/<tag_name>", "tags.get", api(self.get_tag)),
            ("DELETE", "/v2/tags/<tag_name>", "tags.delete", api(self.delete_tag)),
            ("POST", "/v2/tags/<tag_name>/resources", "tags.tag_resources", api(self.tag_resources)),
            ("DELETE", "/v2/tags/<tag_name>/resources", "tags.untag_resources", api(self.untag_resources)),
            ("GET", "/v2/account", "account.get", api(self.get_account)),
        ]

    def _api(self, handler):
        """Authenticate, let time pass for pending actions, run the handler under the lock."""
        def wrapped(request: Request, **args) -> Response:
            if request.headers.get("Authorization", "") != f"Bearer {presets.DO_TOKEN}":
                return self.error_response(401, UNAUTHORIZED_MESSAGE)
            try:
                with self.lock:
                    self._advance(read=request.method == "GET")
                    return handler(request, **args)
            except ApiError as exc:
                return self.error_response(exc.status, exc.message)
        wrapped.__name__ = handler.__name__
        return wrapped

    # ---- state ------------------------------------------------------------------------
    def reset_state(self, preset: str | None) -> None:
        preset = preset or "default"
        if preset not in presets.PRESETS:
            raise ValueError(f"unknown DigitalOcean preset {preset!r}; known: {presets.PRESETS}")
        self.settings = parse_options(self.options)
        self.exchanges.clear()
        self._droplets: dict[int, dict] = {}
        self._droplet_private: dict[int, dict] = {}
        self._actions: dict[int, dict] = {}
        self._pending: dict[int, dict] = {}  # action id -> {"due": monotonic, "gated": bool, ...}
        self._keys: dict[int, dict] = {}
        self._images: dict[int, dict] = {}  # the account's snapshots and custom images
        self._restricted_regions: dict[str, str] = {}  # region -> the create's 422 message
        self._image_ids = itertools.count(FIRST_IMAGE_ID)
        self._tags: dict[str, dict] = {}  # name -> {"name"}; the droplets say what is tagged
        self._droplet_ids = itertools.count(FIRST_DROPLET_ID)
        self._action_ids = itertools.count(FIRST_ACTION_ID)
        self._key_ids = itertools.count(FIRST_KEY_ID)
        self._network_seq = itertools.count(0)
        with self._hour_lock:
            self._hour_reset = int(time.time()) + 3600
            self._hour_used = 0
        if preset == "default":
            for key in presets.PRESET_SSH_KEYS:
                self._keys[key["id"]] = dict(key)
        self._apply_limits()

    def configure(self, **options) -> dict:
        """Change options until the next reset (which restores the constructor's)."""
        parsed = parse_options(options)  # rejects unknown names and bad values first
        with self.lock:
            for name in options:
                self.settings[name] = parsed[name]
            self._apply_limits()
            return dict(self.settings)

    def _apply_limits(self) -> None:
        if self.settings["enforce_limits"]:
            self.set_rate_limit(self.settings["burst_limit"], self.settings["burst_window"])
        else:
            self.set_rate_limit(None)

    def dump_state(self) -> dict:
        with self.lock:
            self._advance(read=True)
            return {
                "droplets": [self._droplet_view(d) for d in self._droplets.values()],
                "actions": [copy.deepcopy(a) for a in self._actions.values()],
                "keys": [dict(k) for k in self._keys.values()],
                "tags": [self._tag_object(name) for name in self._tags],
            }

    # ---- Python helpers for tests -----------------------------------------------------
    def seed_droplet(self, name: str, region: str = "ams3", size: str = "s-1vcpu-1gb",
                     image: str | int = "ubuntu-22-04-x64", tags=(), status: str = "active",
                     ipv6: bool = False, user_data: str | None = None, created_at: str | None = None) -> dict:
        """Add a droplet as if it had been created earlier; ``status`` new|active|off;
        ``created_at`` (ISO 8601) backdates it."""
        if status not in ("new", "active", "off"):
            raise ValueError(f"status must be new, active or off, not {status!r}")
        size_obj = catalogue.SIZES_BY_SLUG[size]
        image_obj = catalogue.find_image(image)
        if image_obj is None or region not in catalogue.REGION_NAMES:
            raise ValueError(f"unknown image {image!r} or region {region!r}")
        with self.lock:
            for tag in tags:
                self._ensure_tag(tag)
            droplet = self._new_droplet(name, region, size_obj, image_obj, list(tags),
                                        ipv6=ipv6, backups=False, monitoring=False, vpc_uuid=None)
            self._droplet_private[droplet["id"]] = {"user_data": user_data, "ssh_key_ids": []}
            if created_at:
                droplet["created_at"] = created_at
            if status == "new":
                self._start_action(droplet, "create", self.settings["boot_seconds"])
            else:
                droplet["status"] = status
                self._assign_networks(droplet)
            return self._droplet_view(droplet)

    def seed_image(self, name: str, image_type: str = "snapshot", regions=("ams3",),
                   created_at: str = "2026-01-15T10:00:00Z") -> dict:
        """Add a snapshot (``snapshot``) or custom image (``custom``) to the account: private, by
        id only, usable in ``regions``."""
        if image_type not in ("snapshot", "custom"):
            raise ValueError(f"image_type must be snapshot or custom, not {image_type!r}")
        with self.lock:
            image = catalogue.private_image(next(self._image_ids), name, image_type, regions, created_at)
            self._images[image["id"]] = image
            return copy.deepcopy(image)

    def restrict_region(self, region: str, message: str = REGION_UNAVAILABLE) -> None:
        """Refuse droplet creates in ``region`` with 422 ``message`` while the regions listing
        still shows it ``available`` with its sizes: DigitalOcean does this for a region out of
        capacity or held for accounts that already have resources there, so a create the
        catalogue allows can still be refused. Until the next reset."""
        if region not in catalogue.REGION_NAMES:
            raise ValueError(f"unknown region {region!r}; known: {', '.join(catalogue.ALL_REGIONS)}")
        with self.lock:
            self._restricted_regions[region] = message

    def droplets(self) -> list[dict]:
        """Every droplet, as GET shows it plus ``user_data`` and ``ssh_key_ids``."""
        with self.lock:
            self._advance(read=True)
            return [self._droplet_view(d) for d in self._droplets.values()]

    def droplet(self, droplet_id: int) -> dict | None:
        with self.lock:
            self._advance(read=True)
            droplet = self._droplets.get(int(droplet_id))
            return self._droplet_view(droplet) if droplet else None

    def keys(self) -> list[dict]:
        with self.lock:
            return [dict(k) for k in self._keys.values()]

    def actions(self, droplet_id: int | None = None) -> list[dict]:
        with self.lock:
            self._advance(read=True)
            return [copy.deepcopy(a) for a in self._actions.values()
                    if droplet_id is None or a["resource_id"] == int(droplet_id)]

    def tags(self) -> list[str]:
        with self.lock:
            return list(self._tags)

    # ---- errors, rate-limit headers, exchanges ----------------------------------------
    def error_response(self, status: int, message: str, code: str | None = None,
                       headers: dict | None = None) -> Response:
        if status == 404:
            message = NOT_FOUND_MESSAGE  # DigitalOcean says the same for every missing thing
        body = {"id": ERROR_IDS.get(status, code or "error"), "message": message,
                "request_id": str(uuid.uuid4())}
        return json_response(body, status, headers)

    def throttle_response(self, retry_after: int) -> Response:
        reset = int(time.time()) + retry_after
        return self.error_response(429, RATE_LIMITED_MESSAGE, "too_many_requests", {
            "Retry-After": str(retry_after),
            "ratelimit-limit": str(self.settings["hourly_limit"]),
            "ratelimit-remaining": "0",
            "ratelimit-reset": str(reset),
        })

    def _injected(self, operation: str):
        # The hourly allowance (5,000/h) is checked before the burst limit and faults.
        if self.settings["enforce_limits"]:
            with self._hour_lock:
                now = int(time.time())
                if now >= self._hour_reset:
                    self._hour_reset, self._hour_used = now + 3600, 0
                if self._hour_used >= self.settings["hourly_limit"]:
                    return self.throttle_response(max(1, self._hour_reset - now))
        return super()._injected(operation)

    def decorate(self, request: Request, response: Response) -> Response:
        with self._hour_lock:
            now = int(time.time())
            if now >= self._hour_reset:
                self._hour_reset, self._hour_used = now + 3600, 0
            self._hour_used += 1
            remaining = max(0, self.settings["hourly_limit"] - self._hour_used)
            reset = self._hour_reset
        for name, value in (("ratelimit-limit", self.settings["hourly_limit"]),
                            ("ratelimit-remaining", remaining), ("ratelimit-reset", reset)):
            if name not in response.headers:
                response.headers[name] = str(value)
        self.exchanges.append({
            "method": request.method,
            "url": request.url,
            "headers": dict(request.headers),
            "body": request.get_data(as_text=True),
            "status": response.status_code,
            "response_headers": dict(response.headers),
            # (a streamed answer, a reset or timeout fault's, is not read here: it breaks or stalls)
            "response_body": "" if response.direct_passthrough else response.get_data(as_text=True),
        })
        return response

    def _control(self, request: Request) -> Response:
        if request.path == "/_sim/options":
            if request.method == "POST":
                try:
                    return json_response(self.configure(**(request.get_json(silent=True) or {})))
                except (ValueError, TypeError) as exc:
                    return json_response({"detail": str(exc)}, 400)
            return json_response(dict(self.settings))
        if request.path == "/_sim/exchanges":
            if request.method == "DELETE":
                self.exchanges.clear()
                return json_response({"cleared": True})
            since = int(request.args.get("since", 0))
            return json_response(list(self.exchanges)[since:])
        return super()._control(request)

    # ---- request helpers --------------------------------------------------------------
    @staticmethod
    def _json_body(request: Request) -> dict:
        raw = request.get_data(as_text=True)
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, f"Invalid JSON body: {exc}.") from None
        if not isinstance(body, dict):
            raise ApiError(400, "The request body must be a JSON object.")
        return body

    @staticmethod
    def _paging(request: Request) -> tuple[int, int]:
        values = {}
        for name, default in (("page", 1), ("per_page", DEFAULT_PER_PAGE)):
            raw = request.args.get(name)
            if raw is None or raw == "":
                values[name] = default
                continue
            try:
                values[name] = int(raw)
            except ValueError:
                raise ApiError(400, f"{name} must be a positive integer.") from None
            if values[name] < 1:
                raise ApiError(400, f"{name} must be a positive integer.")
        return values["page"], min(values["per_page"], MAX_PER_PAGE)

    def _paged(self, request: Request, key: str, items: list, path: str) -> Response:
        """One page of ``items`` with DigitalOcean's absolute ``links.pages`` and ``meta``."""
        page, per_page = self._paging(request)
        total = len(items)
        last = max(1, math.ceil(total / per_page))
        filters = [(k, v) for k, v in request.args.items(multi=True) if k not in ("page", "per_page")]
        base = request.host_url.rstrip("/") + path

        def link(number):
            return base + "?" + urlencode(filters + [("page", number), ("per_page", per_page)])

        pages = {}
        if page > 1:
            pages["first"] = link(1)
            pages["prev"] = link(min(page - 1, last))
        if page < last:
            pages["next"] = link(page + 1)
            pages["last"] = link(last)
        chunk = items[(page - 1) * per_page:page * per_page]
        return json_response({key: chunk, "links": {"pages": pages} if pages else {},
                              "meta": {"total": total}})

    # ---- lifecycle --------------------------------------------------------------------
    def _start_action(self, droplet: dict, action_type: str, seconds: float, **params) -> dict:
        action = {
            "id": next(self._action_ids),
            "status": "in-progress",
            "type": action_type,
            "started_at": _now_iso(),
            "completed_at": None,
            "resource_id": droplet["id"],
            "resource_type": "droplet",
            "region": copy.deepcopy(droplet["region"]),
            "region_slug": droplet["region"]["slug"],
        }
        self._actions[action["id"]] = action
        # seconds == 0: done at the next read, so a caller that never polls sees the
        # action pending, and one that polls (Action.wait) sees it done at once.
        self._pending[action["id"]] = {"due": time.monotonic() + seconds, "gated": seconds <= 0,
                                       "params": params}
        if action_type == "resize":
            droplet["locked"] = True
        return action

    def _advance(self, read: bool) -> None:
        """Complete the pending actions whose time has come and apply their effects."""
        now = time.monotonic()
        for action_id in list(self._pending):
            pending = self._pending[action_id]
            if now < pending["due"] or (pending["gated"] and not read):
                continue
            del self._pending[action_id]
            action = self._actions[action_id]
            action["status"] = "completed"
            action["completed_at"] = _now_iso()
            droplet = self._droplets.get(action["resource_id"])
            if droplet is not None:
                self._apply(droplet, action["type"], pending["params"])

    def _apply(self, droplet: dict, action_type: str, params: dict) -> None:
        droplet["locked"] = False
        if action_type == "create":
            droplet["status"] = "active"
            self._assign_networks(droplet)
        elif action_type in POWER_ACTIONS:
            droplet["status"] = POWER_ACTIONS[action_type]
        elif action_type == "resize":
            size = catalogue.SIZES_BY_SLUG[params["size"]]
            droplet["size"] = copy.deepcopy(size)
            droplet["size_slug"] = size["slug"]
            droplet["memory"] = size["memory"]
            droplet["vcpus"] = size["vcpus"]
            if params["disk"]:  # permanent: the disk grows with the plan
                droplet["disk"] = size["disk"]
                droplet["disk_info"] = copy.deepcopy(size["disk_info"])
        elif action_type == "rename":
            droplet["name"] = params["name"]
        elif action_type in ("enable_backups", "disable_backups"):
            features = [f for f in droplet["features"] if f != "backups"]
            if action_type == "enable_backups":
                features.append("backups")
            droplet["features"] = features
        elif action_type == "enable_ipv6" and "ipv6" not in droplet["features"]:
            droplet["features"].append("ipv6")
            if droplet["networks"]["v4"]:
                droplet["networks"]["v6"] = [self._v6_network(droplet["id"])]

    def _assign_networks(self, droplet: dict) -> None:
        if droplet["networks"]["v4"]:
            return
        seq = next(self._network_seq)
        high, low = divmod(seq, 250)
        droplet["networks"]["v4"] = [
            {"ip_address": f"10.110.{high % 250}.{low + 2}", "netmask": "255.255.0.0",
             "gateway": "10.110.0.1", "type": "private"},
            {"ip_address": f"164.90.{high % 250}.{low + 2}", "netmask": "255.255.240.0",
             "gateway": "164.90.0.1", "type": "public"},
        ]
        if "ipv6" in droplet["features"]:
            droplet["networks"]["v6"] = [self._v6_network(droplet["id"])]

    @staticmethod
    def _v6_network(droplet_id: int) -> dict:
        return {"ip_address": f"2a03:b0c0:2:d0::{droplet_id % 0xffff:x}:1", "netmask": 64,
                "gateway": "2a03:b0c0:2:d0::1", "type": "public"}

    def _new_droplet(self, name, region, size, image, tags, ipv6, backups, monitoring,
                     vpc_uuid) -> dict:
        features = ["droplet_agent", "private_networking"]
        if ipv6:
            features.append("ipv6")
        if backups:
            features.append("backups")
        if monitoring:
            features.append("monitoring")
        droplet = {
            "id": next(self._droplet_ids),
            "name": name,
            "memory": size["memory"],
            "vcpus": size["vcpus"],
            "disk": size["disk"],
            "disk_info": copy.deepcopy(size["disk_info"]),
            "locked": False,
            "status": "new",
            "kernel": None,
            "created_at": _now_iso(),
            "features": features,
            "backup_ids": [],
            "next_backup_window": None,
            "snapshot_ids": [],
            "image": copy.deepcopy(image),
            "volume_ids": [],
            "size": copy.deepcopy(size),
            "size_slug": size["slug"],
            "networks": {"v4": [], "v6": []},
            "region": catalogue.region_object(region),
            "tags": list(dict.fromkeys(tags)),
            "vpc_uuid": vpc_uuid or str(uuid.uuid5(uuid.NAMESPACE_URL, f"do-sim/default-vpc/{region}")),
        }
        self._droplets[droplet["id"]] = droplet
        return droplet

    def _droplet_view(self, droplet: dict) -> dict:
        view = copy.deepcopy(droplet)
        view.update(copy.deepcopy(self._droplet_private.get(droplet["id"], {})))
        return view

    def _droplet_or_404(self, droplet_id: int) -> dict:
        droplet = self._droplets.get(droplet_id)
        if droplet is None:
            raise ApiError(404, NOT_FOUND_MESSAGE)
        return droplet

    @staticmethod
    def _check_tag_name(name) -> None:
        if not isinstance(name, str) or not TAG_NAME.match(name) or len(name) > 255:
            raise ApiError(422, f"Tag name {name!r} is invalid: use letters, digits, '_', '-' "
                                f"and ':' (at most 255).")

    def _ensure_tag(self, name) -> None:
        self._check_tag_name(name)
        self._tags.setdefault(name, {"name": name})

    # ---- droplets ---------------------------------------------------------------------
    def list_droplets(self, request: Request) -> Response:
        tag_name = request.args.get("tag_name")
        name = request.args.get("name")
        if tag_name and name:
            raise ApiError(422, "tag_name and name cannot be combined.")
        kind = request.args.get("type", "droplets")
        if kind not in ("droplets", "gpus"):
            raise ApiError(422, "type must be droplets or gpus.")
        droplets = [] if kind == "gpus" else list(self._droplets.values())
        if tag_name:
            droplets = [d for d in droplets if tag_name in d["tags"]]
        if name:
            droplets = [d for d in droplets if d["name"] == name]
        return self._paged(request, "droplets", droplets, "/v2/droplets")

    def create_droplets(self, request: Request) -> Response:
        body = self._json_body(request)
        if ("name" in body) == ("names" in body):
            raise ApiError(422, "Give either name or names.")
        multi = "names" in body
        names = body["names"] if multi else [body["name"]]
        if not isinstance(names, list) or not names or len(names) > MAX_NAMES_PER_CREATE:
            raise ApiError(422, f"names must list 1 to {MAX_NAMES_PER_CREATE} droplet names.")
        for name in names:
            if not isinstance(name, str) or len(name) > 255 or not DROPLET_NAME.match(name):
                raise ApiError(422, "Only valid hostname characters are allowed. "
                                    "(a-z, A-Z, 0-9, . and -)")
        size = catalogue.SIZES_BY_SLUG.get(body.get("size")) if isinstance(body.get("size"), str) else None
        if size is None:
            raise ApiError(422, "You specified an invalid size for Droplet creation.")
        image = catalogue.find_image(body.get("image"), self._images)
        if image is None:
            raise ApiError(422, "You specified an invalid image for Droplet creation.")
        region = body.get("region")
        if region is None:
            region = size["regions"][0]  # DigitalOcean picks a region when none is given
        if region not in catalogue.REGION_NAMES:
            raise ApiError(422, "You specified an invalid region for Droplet creation.")
        if region not in size["regions"]:
            raise ApiError(422, "This size is unavailable in the selected region.")
        if region not in image["regions"]:
            raise ApiError(422, "This image is unavailable in the selected region.")
        if region in self._restricted_regions:
            raise ApiError(422, self._restricted_regions[region])
        key_ids = self._resolve_keys(body.get("ssh_keys") or [])
        tags = body.get("tags") or []
        if not isinstance(tags, list):
            raise ApiError(422, "tags must be a list of tag names.")
        for tag in tags:
            self._check_tag_name(tag)
        user_data = body.get("user_data")
        if user_data is not None and (not isinstance(user_data, str)
                                      or len(user_data.encode()) > MAX_USER_DATA_BYTES):
            raise ApiError(422, "user_data must be a string of at most 64 KiB.")
        vpc_uuid = body.get("vpc_uuid")
        if vpc_uuid is not None and not isinstance(vpc_uuid, str):
            raise ApiError(422, "vpc_uuid must be a string.")
        flags = {}
        for flag in ("backups", "ipv6", "monitoring", "private_networking"):
            value = body.get(flag, False)
            if not isinstance(value, bool):
                raise ApiError(422, f"{flag} must be a boolean.")
            flags[flag] = value
        if len(self._droplets) + len(names) > self.settings["droplet_limit"]:
            raise ApiError(422, "creating this/these droplet(s) will exceed your droplet limit")
        for tag in tags:
            self._ensure_tag(tag)

        created, links = [], []
        for name in names:
            droplet = self._new_droplet(name, region, size, image, tags, ipv6=flags["ipv6"],
                                        backups=flags["backups"], monitoring=flags["monitoring"],
                                        vpc_uuid=vpc_uuid)
            self._droplet_private[droplet["id"]] = {"user_data": user_data,
                                                    "ssh_key_ids": list(key_ids)}
            action = self._start_action(droplet, "create", self.settings["boot_seconds"])
            created.append(copy.deepcopy(droplet))
            links.append({"id": action["id"], "rel": "create",
                          "href": request.host_url.rstrip("/") + f"/v2/actions/{action['id']}"})
        if multi:
            return json_response({"droplets": created, "links": {"actions": links}}, 202)
        return json_response({"droplet": created[0], "links": {"actions": links}}, 202)

    def _resolve_keys(self, entries) -> list[int]:
        if not isinstance(entries, list):
            raise ApiError(422, "ssh_keys must be a list of key ids or fingerprints.")
        ids = []
        for entry in entries:
            key = self._find_key(entry)
            if key is None:
                raise ApiError(422, f"You specified an invalid SSH key for Droplet creation: {entry!r}.")
            ids.append(key["id"])
        return ids

    def _find_key(self, identifier):
        if isinstance(identifier, bool):
            return None
        if isinstance(identifier, int) or (isinstance(identifier, str) and identifier.isdigit()):
            return self._keys.get(int(identifier))
        if isinstance(identifier, str):
            return next((k for k in self._keys.values() if k["fingerprint"] == identifier.lower()), None)
        return None

    def get_droplet(self, request: Request, droplet_id: int) -> Response:
        return json_response({"droplet": copy.deepcopy(self._droplet_or_404(droplet_id))})

    def _destroy(self, droplet_id: int) -> None:
        del self._droplets[droplet_id]
        self._droplet_private.pop(droplet_id, None)
        for action_id in list(self._pending):
            if self._actions[action_id]["resource_id"] == droplet_id:
                del self._pending[action_id]
                self._actions[action_id]["status"] = "errored"
                self._actions[action_id]["completed_at"] = _now_iso()

    @staticmethod
    def _no_content() -> Response:
        # DigitalOcean answers droplet deletes with 204 and a JSON content type, no body.
        return Response(b"", status=204, content_type="application/json; charset=utf-8")

    def delete_droplet(self, request: Request, droplet_id: int) -> Response:
        self._droplet_or_404(droplet_id)
        self._destroy(droplet_id)
        return self._no_content()

    def delete_droplets_by_tag(self, request: Request) -> Response:
        tag_name = request.args.get("tag_name")
        if not tag_name:
            raise ApiError(422, "tag_name is required to delete droplets by tag.")
        if tag_name not in self._tags:
            raise ApiError(404, NOT_FOUND_MESSAGE)
        for droplet_id in [d["id"] for d in self._droplets.values() if tag_name in d["tags"]]:
            self._destroy(droplet_id)
        return self._no_content()

    # ---- droplet actions --------------------------------------------------------------
    def create_droplet_action(self, request: Request, droplet_id: int) -> Response:
        droplet = self._droplet_or_404(droplet_id)
        body = self._json_body(request)
        action_type = body.get("type")
        if action_type not in POWER_ACTIONS and action_type not in OTHER_ACTIONS:
            raise ApiError(422, f"Action type {action_type!r} is not valid for a droplet.")
        if any(self._actions[a]["resource_id"] == droplet_id for a in self._pending):
            raise ApiError(422, PENDING_EVENT_MESSAGE)
        params = {}
        if action_type == "resize":
            size = catalogue.SIZES_BY_SLUG.get(body.get("size")) if isinstance(body.get("size"), str) else None
            if size is None:
                raise ApiError(422, "You specified an invalid size for Droplet resize.")
            disk = _as_bool(body.get("disk", False), "disk")
            if droplet["status"] != "off":
                raise ApiError(422, RESIZE_WHILE_ON_MESSAGE)
            if droplet["region"]["slug"] not in size["regions"]:
                raise ApiError(422, "This size is unavailable in the droplet's region.")
            if size["disk"] < droplet["disk"]:
                raise ApiError(422, "This size is not available because it has a smaller disk.")
            params = {"size": size["slug"], "disk": disk}
        elif action_type == "rename":
            name = body.get("name")
            if not isinstance(name, str) or not DROPLET_NAME.match(name):
                raise ApiError(422, "Only valid hostname characters are allowed. "
                                    "(a-z, A-Z, 0-9, . and -)")
            params = {"name": name}
        action = self._start_action(droplet, action_type, self.settings["action_seconds"], **params)
        return json_response({"action": copy.deepcopy(action)}, 201)

    def list_droplet_actions(self, request: Request, droplet_id: int) -> Response:
        self._droplet_or_404(droplet_id)
        # Newest first, as DigitalOcean lists them.
        actions = [copy.deepcopy(a) for a in reversed(self._actions.values())
                   if a["resource_id"] == droplet_id]
        return self._paged(request, "actions", actions, f"/v2/droplets/{droplet_id}/actions")

    def get_droplet_action(self, request: Request, droplet_id: int, action_id: int) -> Response:
        self._droplet_or_404(droplet_id)
        action = self._actions.get(action_id)
        if action is None or action["resource_id"] != droplet_id:
            raise ApiError(404, NOT_FOUND_MESSAGE)
        return json_response({"action": copy.deepcopy(action)})

    def get_action(self, request: Request, action_id: int) -> Response:
        action = self._actions.get(action_id)
        if action is None:
            raise ApiError(404, NOT_FOUND_MESSAGE)
        return json_response({"action": copy.deepcopy(action)})

    # ---- SSH keys ---------------------------------------------------------------------
    def list_keys(self, request: Request) -> Response:
        return self._paged(request, "ssh_keys", [dict(k) for k in self._keys.values()],
                           "/v2/account/keys")

    def create_key(self, request: Request) -> Response:
        body = self._json_body(request)
        name, public_key = body.get("name"), body.get("public_key")
        if not isinstance(name, str) or not name.strip():
            raise ApiError(422, "Name can't be blank")
        if not isinstance(public_key, str) or not public_key.strip():
            raise ApiError(422, "Public key can't be blank")
        try:
            fingerprint = fingerprint_of(public_key)
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        if any(k["fingerprint"] == fingerprint for k in self._keys.values()):
            raise ApiError(422, DUPLICATE_KEY_MESSAGE)
        key = {"id": next(self._key_ids), "fingerprint": fingerprint,
               "public_key": public_key.strip(), "name": name}
        self._keys[key["id"]] = key
        return json_response({"ssh_key": dict(key)}, 201)

    def _key_or_404(self, identifier: str) -> dict:
        key = self._find_key(identifier)
        if key is None:
            raise ApiError(404, NOT_FOUND_MESSAGE)
        return key

    def get_key(self, request: Request, identifier: str) -> Response:
        return json_response({"ssh_key": dict(self._key_or_404(identifier))})

    def update_key(self, request: Request, identifier: str) -> Response:
        key = self._key_or_404(identifier)
        name = self._json_body(request).get("name")
        if name is not None:
            if not isinstance(name, str) or not name.strip():
                raise ApiError(422, "Name can't be blank")
            key["name"] = name
        return json_response({"ssh_key": dict(key)})

    def delete_key(self, request: Request, identifier: str) -> Response:
        key = self._key_or_404(identifier)
        del self._keys[key["id"]]
        return Response(b"", status=204)

    # ---- sizes, tags, account ---------------------------------------------------------
    def list_sizes(self, request: Request) -> Response:
        return self._paged(request, "sizes", copy.deepcopy(catalogue.SIZES), "/v2/sizes")

    def list_regions(self, request: Request) -> Response:
        return self._paged(request, "regions", catalogue.regions_listing(), "/v2/regions")

    def list_images(self, request: Request) -> Response:
        """Public images and the account's own; ``private=true`` gives the account's only,
        ``type`` (distribution, application) filters the public ones (private ones carry no such
        type and drop out), as DigitalOcean does."""
        private = _as_bool(request.args.get("private", "false"), "private")
        kind = request.args.get("type")
        images = list(self._images.values()) if private else list(catalogue.IMAGES) + list(self._images.values())
        if kind == "distribution":
            images = [image for image in images if image["public"]]
        elif kind == "application":
            images = []
        elif kind is not None:
            raise ApiError(422, "type must be distribution or application.")
        return self._paged(request, "images", copy.deepcopy(images), "/v2/images")

    def get_image(self, request: Request, identifier: str) -> Response:
        image = catalogue.find_image(identifier, self._images)
        if image is None:
            raise ApiError(404, NOT_FOUND_MESSAGE)
        return json_response({"image": copy.deepcopy(image)})

    def list_snapshots(self, request: Request) -> Response:
        kind = request.args.get("resource_type")
        if kind not in (None, "droplet", "volume"):
            raise ApiError(422, "resource_type must be droplet or volume.")
        snapshots = [catalogue.snapshot_object(image) for image in self._images.values()
                     if image["type"] == "snapshot" and kind != "volume"]
        return self._paged(request, "snapshots", snapshots, "/v2/snapshots")

    def _tag_object(self, name: str) -> dict:
        tagged = [d for d in self._droplets.values() if name in d["tags"]]
        droplets = {"count": len(tagged)}
        if tagged:
            droplets["last_tagged_uri"] = self.url(f"/v2/droplets/{tagged[-1]['id']}")
        # Only droplets are simulated, so the totals are the droplets' own.
        resources = dict(droplets, droplets=droplets)
        for kind in ("images", "volumes", "volume_snapshots", "databases"):
            resources[kind] = {"count": 0}
        return {"name": name, "resources": resources}

    def list_tags(self, request: Request) -> Response:
        return self._paged(request, "tags", [self._tag_object(n) for n in self._tags], "/v2/tags")

    def create_tag(self, request: Request) -> Response:
        name = self._json_body(request).get("name")
        if not isinstance(name, str) or not TAG_NAME.match(name) or len(name) > 255:
            # The tags endpoint answers 400 in its own shape; id and message are kept
            # alongside because python-digitalocean needs both.
            message = f"Error validating resource tag: \"tag-name {name!r} contains invalid characters\""
            return json_response({"id": "bad_request", "message": message, "error": message,
                                  "messages": None, "root_causes": [message],
                                  "request_id": str(uuid.uuid4())}, 400)
        self._tags.setdefault(name, {"name": name})
        return json_response({"tag": self._tag_object(name)}, 201)

    def get_tag(self, request: Request, tag_name: str) -> Response:
        if tag_name not in self._tags:
            raise ApiError(404, NOT_FOUND_MESSAGE)
        return json_response({"tag": self._tag_object(tag_name)})

    def delete_tag(self, request: Request, tag_name: str) -> Response:
        if tag_name not in self._tags:
            raise ApiError(404, NOT_FOUND_MESSAGE)
        del self._tags[tag_name]
        for droplet in self._droplets.values():  # deleting a tag untags its resources
            if tag_name in droplet["tags"]:
                droplet["tags"].remove(tag_name)
        return Response(b"", status=204)

    def _tagged_droplets(self, request: Request, tag_name: str) -> list[dict]:
        """The droplets a tag/untag request names (``resources``: ``resource_id``, ``resource_type``
        droplet); 404 when the tag or a droplet does not exist, 400 for anything else."""
        if tag_name not in self._tags:
            raise ApiError(404, NOT_FOUND_MESSAGE)
        resources = self._json_body(request).get("resources")
        if not isinstance(resources, list) or not resources:
            raise ApiError(400, "resources must be a non-empty list.")
        droplets = []
        for item in resources:
            if not isinstance(item, dict) or item.get("resource_type") != "droplet" or \
                    not str(item.get("resource_id", "")).isdigit():
                raise ApiError(400, "Only droplets can be tagged here: resource_id and resource_type droplet.")
            droplets.append(self._droplet_or_404(int(item["resource_id"])))
        return droplets

    def tag_resources(self, request: Request, tag_name: str) -> Response:
        for droplet in self._tagged_droplets(request, tag_name):
            if tag_name not in droplet["tags"]:
                droplet["tags"].append(tag_name)
        return Response(b"", status=204)

    def untag_resources(self, request: Request, tag_name: str) -> Response:
        for droplet in self._tagged_droplets(request, tag_name):
            if tag_name in droplet["tags"]:
                droplet["tags"].remove(tag_name)
        return Response(b"", status=204)

    def get_account(self, request: Request) -> Response:
        return json_response({"account": {
            "droplet_limit": self.settings["droplet_limit"],
            "floating_ip_limit": 3,
            "volume_limit": 100,
            "email": presets.ACCOUNT_EMAIL,
            "name": "Waldur Simulator",
            "uuid": presets.ACCOUNT_UUID,
            "email_verified": True,
            "status": "active",
            "status_message": "",
            "team": {"uuid": "0f2ad3e2-7f7b-4d4c-9b1e-5a0b8f3c2d11", "name": "Waldur Sim Team"},
        }})
