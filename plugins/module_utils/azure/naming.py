# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Azure names and ARM ids of a Waldur virtual machine.

Everything a later pass needs (which group, which companion objects, how to
delete) is derived from the Waldur resource's name and uuid, read back out of
the VM's ARM id, or found by the owner tags (``azure_ownership``): the agent
keeps no state of its own.

Names cannot collide by accident: a dedicated group carries the whole resource
UUID (``group-<32 hex>-<vm>``), a machine in a shared group the first 8 hex
digits (``<name>-<8 hex>``, and an object of another owner at that name is
never adopted). A name with nothing usable left after transliteration falls
back to the UUID (``vm-<8 hex>``), never to a word shared by everyone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import unicodedata

from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid

MAX_NAME_LENGTH = 50
UNIQUE_SUFFIX_LENGTH = 8
FALLBACK_PREFIX = "vm-"
# Letters NFKD does not reduce to ASCII, spelled the way passports and URLs do.
_TRANSLITERATION = dict((ord(letter), latin) for letter, latin in (
    # Russian, Ukrainian, Belarusian, Serbian, Macedonian, Bulgarian
    ("а", "a"), ("б", "b"), ("в", "v"), ("г", "g"), ("д", "d"), ("е", "e"), ("ё", "yo"), ("ж", "zh"),
    ("з", "z"), ("и", "i"), ("й", "y"), ("к", "k"), ("л", "l"), ("м", "m"), ("н", "n"), ("о", "o"),
    ("п", "p"), ("р", "r"), ("с", "s"), ("т", "t"), ("у", "u"), ("ф", "f"), ("х", "kh"), ("ц", "ts"),
    ("ч", "ch"), ("ш", "sh"), ("щ", "shch"), ("ъ", ""), ("ы", "y"), ("ь", ""), ("э", "e"), ("ю", "yu"),
    ("я", "ya"), ("є", "ye"), ("і", "i"), ("ї", "yi"), ("ґ", "g"), ("ў", "u"), ("ђ", "dj"), ("ј", "j"),
    ("љ", "lj"), ("њ", "nj"), ("ћ", "c"), ("џ", "dz"), ("ѓ", "gj"), ("ќ", "kj"), ("ѕ", "dz"),
    # Greek
    ("α", "a"), ("β", "v"), ("γ", "g"), ("δ", "d"), ("ε", "e"), ("ζ", "z"), ("η", "i"), ("θ", "th"),
    ("ι", "i"), ("κ", "k"), ("λ", "l"), ("μ", "m"), ("ν", "n"), ("ξ", "x"), ("ο", "o"), ("π", "p"),
    ("ρ", "r"), ("σ", "s"), ("ς", "s"), ("τ", "t"), ("υ", "y"), ("φ", "f"), ("χ", "ch"), ("ψ", "ps"),
    ("ω", "o"),
    # Latin letters without a decomposition
    ("ß", "ss"), ("æ", "ae"), ("ø", "o"), ("œ", "oe"), ("đ", "d"), ("ł", "l"), ("þ", "th"), ("ð", "d"),
    ("ı", "i"),
))

_INVALID_RUN = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")
_VM_ID = re.compile(
    r"^/subscriptions/(?P<subscription>[^/]+)/resourceGroups/(?P<group>[^/]+)"
    r"/providers/Microsoft\.Compute/virtualMachines/(?P<vm>[^/]+)/?$",
    re.IGNORECASE,
)
_RESOURCE_ID = re.compile(
    r"^/subscriptions/(?P<subscription>[^/]+)/resourceGroups/(?P<group>[^/]+)"
    r"/providers/(?P<namespace>[^/]+)/(?P<type>[^/]+)/(?P<name>[^/]+)"
    r"(?:/(?P<child_type>[^/]+)/(?P<child_name>[^/]+))?/?$",
    re.IGNORECASE,
)
# group-<4 hex> is what Waldur Mastermind and versions before the owner tags made; group-<32 hex> is made now.
_DEDICATED_GROUP = re.compile(r"^group-(?P<hex>[0-9a-f]{4}|[0-9a-f]{32})-(?P<rest>.+)$", re.IGNORECASE)
IMAGE_KEYS = ("publisher", "offer", "sku", "version")


class InvalidAzureId(ValueError):
    """A backend id that is not the ARM id of a virtual machine."""


class InvalidImage(ValueError):
    """An image that is neither ``publisher:offer:sku:version`` nor a dict with those keys."""


def transliterate(text):
    """``text`` in ASCII as far as it goes: Cyrillic and Greek spelled in Latin letters,
    accents dropped (``é`` -> ``e``); what has no Latin spelling (CJK, symbols) is dropped."""
    # Letters with their own spelling first (й -> y, not i), then what is left of accented
    # letters once the accents are dropped (ί -> ι -> i), and NFKD's compatibility forms (№ -> no).
    text = str(text or "").lower().translate(_TRANSLITERATION)
    bare = "".join(char for char in unicodedata.normalize("NFKD", text) if not unicodedata.combining(char))
    return "".join(char for char in bare.lower().translate(_TRANSLITERATION) if ord(char) < 128)


def sanitize(name):
    """The part of a name Azure accepts for a VM and its companions; may be empty.

    Transliterated to ASCII, lower-case; every run of characters outside
    ``[a-z0-9-]`` becomes one ``-``; repeated dashes collapse; no dash at either
    end; at most 50 characters. A name of CJK characters or symbols only leaves
    nothing: callers fall back to the resource UUID (:func:`vm_base_name`).
    """
    text = _INVALID_RUN.sub("-", transliterate(name))
    text = _DASHES.sub("-", text).strip("-")
    return text[:MAX_NAME_LENGTH].strip("-")


def unique_suffix(resource_uuid):
    """The first 8 hex digits of the resource uuid (dashed or not, any case)."""
    return normalize_uuid(resource_uuid)[:UNIQUE_SUFFIX_LENGTH]


def vm_base_name(name, resource_uuid):
    """``sanitize(name)``, or ``vm-<first 8 hex of the uuid>`` when nothing is left of the name."""
    return sanitize(name) or FALLBACK_PREFIX + unique_suffix(resource_uuid)


COMPANION_PREFIXES = {
    "vm": "",
    "vnet": "net",
    "subnet": "subnet",
    "public_ip": "pubip",
    "nsg": "nsg",
    "nic": "nic",
    "ip_config": "ipconf",
}


def companion_names(vm_name):
    """Names of the objects built around a VM, derived from the VM name as it is."""
    return dict((kind, prefix + vm_name) for kind, prefix in COMPANION_PREFIXES.items())


def dedicated_group_name(resource_uuid, vm_name):
    """``group-<the whole resource uuid, 32 hex>-<vm>``: at most 89 characters (Azure allows 90)."""
    return "group-%s-%s" % (normalize_uuid(resource_uuid), vm_name)


def dedicated_names(name, resource_uuid):
    """A VM in a group of its own: VM = :func:`vm_base_name`, group = ``group-<32 hex>-<vm>``."""
    return dedicated_names_for_vm(vm_base_name(name, resource_uuid), resource_uuid)


def dedicated_names_for_vm(vm_name, resource_uuid):
    """The dedicated names of a VM whose name is already known."""
    return names_in_group(vm_name, dedicated_group_name(resource_uuid, vm_name), dedicated=True)


def shared_names(name, resource_uuid, group):
    """A VM in a shared group: the name carries 8 hex of the uuid so two alike names stay apart."""
    return shared_names_for_vm("%s-%s" % (sanitize(name) or "vm", unique_suffix(resource_uuid)), group)


def shared_names_for_vm(vm_name, group):
    """The names of a VM in a shared group whose name is already known (found, not derived)."""
    return names_in_group(vm_name, group, dedicated=False)


def names_in_group(vm_name, group, dedicated):
    """The names of a chain found in Azure (its VM name and group as they are there)."""
    names = companion_names(vm_name)
    names["group"] = group
    names["dedicated"] = dedicated
    return names


def machine_names(name, resource_uuid, shared_group=None):
    """Dedicated names unless a shared group is given."""
    if shared_group:
        return shared_names(name, resource_uuid, shared_group)
    return dedicated_names(name, resource_uuid)


def is_dedicated_group(group, vm_name):
    """Whether ``group`` is the group of this VM alone (``group-<4 or 32 hex>-<vm>``).

    Compared case-insensitively: ARM ids often come back with the group upper-cased,
    and Azure names are case-insensitive. Four hex digits is the pattern of machines
    made by Waldur Mastermind and by versions before owner tags: they keep their route.
    """
    match = _DEDICATED_GROUP.match(group or "")
    return bool(match) and match.group("rest").lower() == (vm_name or "").lower()


def is_group_of_resource(group, resource_uuid):
    """Whether ``group`` is a name the agent gives this resource's dedicated group
    (``group-<its whole uuid, 32 hex>-<vm>``, any machine name, any case). A group merely
    carrying the resource's owner tag (copied onto a customer's group for cost reports) is not."""
    match = _DEDICATED_GROUP.match(group or "")
    return bool(match) and match.group("hex").lower() == normalize_uuid(resource_uuid)


def vm_name_of_dedicated_group(group):
    """The VM name a dedicated group's name carries (``group-<hex>-<vm>`` -> ``vm``), else None."""
    match = _DEDICATED_GROUP.match(group or "")
    return match.group("rest") if match else None


def vm_name_of_companion(kind, name):
    """The VM name a companion's name carries (``nic`` + ``web`` -> ``web``), else None."""
    prefix = COMPANION_PREFIXES.get(kind)
    if prefix is None or not (name or "").lower().startswith(prefix) or len(name) <= len(prefix):
        return None
    return name[len(prefix):]


def build_vm_id(subscription_id, group, vm_name):
    return "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s" % (
        subscription_id, group, vm_name)


def parse_vm_id(vm_id):
    """``(subscription, group, vm)`` from a VM's ARM id; anything else raises InvalidAzureId."""
    match = _VM_ID.match(str(vm_id or "").strip())
    if not match:
        raise InvalidAzureId("Not an Azure virtual machine id: %r" % (vm_id,))
    return match.group("subscription"), match.group("group"), match.group("vm")


def names_from_vm_id(vm_id):
    """The VM's names as found in its id (never re-sanitized), its group and its deletion route."""
    subscription, group, vm_name = parse_vm_id(vm_id)
    names = companion_names(vm_name)
    names["group"] = group
    names["subscription"] = subscription
    names["dedicated"] = is_dedicated_group(group, vm_name)
    return names


def parse_resource_id(resource_id):
    """Parts of any ARM resource id (``group``, ``namespace``, ``type``, ``name``, child parts).

    Returns None for something that is not a resource id.
    """
    match = _RESOURCE_ID.match(str(resource_id or "").strip())
    return match.groupdict() if match else None


def same_name(left, right):
    """Azure resource names compare case-insensitively."""
    return (left or "").lower() == (right or "").lower()


def parse_image(image):
    """``{publisher, offer, sku, version}`` from ``publisher:offer:sku:version`` or a dict."""
    if isinstance(image, dict):
        missing = [key for key in IMAGE_KEYS if not str(image.get(key) or "").strip()]
        if missing:
            raise InvalidImage("Azure image %r lacks %s" % (image, ", ".join(missing)))
        return dict((key, str(image[key]).strip()) for key in IMAGE_KEYS)
    parts = str(image or "").split(":")
    if len(parts) != 4 or not all(part.strip() for part in parts):
        raise InvalidImage("Azure image %r is not of the form publisher:offer:sku:version" % (image,))
    return dict(zip(IMAGE_KEYS, (part.strip() for part in parts)))
