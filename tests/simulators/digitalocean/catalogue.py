"""The simulator's fixed catalogue: regions, sizes and public images.

Slugs, sizes and prices follow DigitalOcean's public catalogue (Basic,
General Purpose and CPU-Optimized droplets). Only these slugs are accepted by
droplet create and resize; anything else is a 422, as on the real API.
"""

REGION_FEATURES = ["backups", "ipv6", "metadata", "install_agent", "storage", "image_transfer"]

# slug -> display name, in the order DigitalOcean lists them
REGION_NAMES = {
    "nyc1": "New York 1",
    "nyc3": "New York 3",
    "sfo3": "San Francisco 3",
    "ams3": "Amsterdam 3",
    "sgp1": "Singapore 1",
    "lon1": "London 1",
    "fra1": "Frankfurt 1",
    "tor1": "Toronto 1",
    "blr1": "Bangalore 1",
    "syd1": "Sydney 1",
}
ALL_REGIONS = list(REGION_NAMES)
# Dedicated-CPU sizes are not offered everywhere; droplet create checks this.
DEDICATED_REGIONS = ["nyc1", "nyc3", "sfo3", "ams3", "lon1", "fra1", "tor1"]


def _size(slug, memory, vcpus, disk, transfer, monthly, hourly, description, regions=None):
    return {
        "slug": slug,
        "memory": memory,
        "vcpus": vcpus,
        "disk": disk,
        "transfer": transfer,
        "price_monthly": monthly,
        "price_hourly": hourly,
        "regions": list(regions or ALL_REGIONS),
        "available": True,
        "description": description,
        "disk_info": [{"type": "local", "size": {"amount": disk, "unit": "gib"}}],
    }


SIZES = [
    _size("s-1vcpu-512mb-10gb", 512, 1, 10, 0.5, 4.0, 0.00595, "Basic"),
    _size("s-1vcpu-1gb", 1024, 1, 25, 1.0, 6.0, 0.00893, "Basic"),
    _size("s-1vcpu-2gb", 2048, 1, 50, 2.0, 12.0, 0.01786, "Basic"),
    _size("s-2vcpu-2gb", 2048, 2, 60, 3.0, 18.0, 0.02679, "Basic"),
    _size("s-2vcpu-4gb", 4096, 2, 80, 4.0, 24.0, 0.03571, "Basic"),
    _size("s-4vcpu-8gb", 8192, 4, 160, 5.0, 48.0, 0.07143, "Basic"),
    _size("s-8vcpu-16gb", 16384, 8, 320, 6.0, 96.0, 0.14286, "Basic"),
    _size("c-2", 4096, 2, 25, 4.0, 42.0, 0.0625, "CPU-Optimized", DEDICATED_REGIONS),
    _size("c-4", 8192, 4, 50, 5.0, 84.0, 0.125, "CPU-Optimized", DEDICATED_REGIONS),
    _size("g-2vcpu-8gb", 8192, 2, 25, 4.0, 63.0, 0.09375, "General Purpose", DEDICATED_REGIONS),
]
SIZES_BY_SLUG = {size["slug"]: size for size in SIZES}


def _image(image_id, slug, name, distribution, min_disk, gigabytes, created_at):
    return {
        "id": image_id,
        "name": name,
        "distribution": distribution,
        "slug": slug,
        "public": True,
        "regions": list(ALL_REGIONS),
        "created_at": created_at,
        "min_disk_size": min_disk,
        "type": "base",
        "size_gigabytes": gigabytes,
        "description": f"{distribution} {name}",
        "tags": [],
        "status": "available",
        "error_message": "",
    }


IMAGES = [
    _image(112929454, "ubuntu-20-04-x64", "20.04 (LTS) x64", "Ubuntu", 7, 2.36, "2022-07-12T15:16:28Z"),
    _image(129211873, "ubuntu-22-04-x64", "22.04 (LTS) x64", "Ubuntu", 7, 2.41, "2023-03-28T16:23:03Z"),
    _image(155943395, "ubuntu-24-04-x64", "24.04 (LTS) x64", "Ubuntu", 7, 2.73, "2024-04-25T12:09:41Z"),
    _image(135305422, "debian-11-x64", "11 x64", "Debian", 5, 1.61, "2023-06-15T09:11:27Z"),
    _image(148747795, "debian-12-x64", "12 x64", "Debian", 5, 1.77, "2024-01-29T14:44:03Z"),
    _image(151213926, "rockylinux-9-x64", "9 x64", "Rocky Linux", 10, 1.91, "2024-03-06T17:30:12Z"),
    _image(160244522, "fedora-40-x64", "40 x64", "Fedora", 7, 1.52, "2024-06-17T20:03:40Z"),
]
IMAGES_BY_SLUG = {image["slug"]: image for image in IMAGES}
IMAGES_BY_ID = {image["id"]: image for image in IMAGES}


def regions_listing():
    """``GET /v2/regions``: every region, as DigitalOcean lists them."""
    return [region_object(slug) for slug in ALL_REGIONS]


def region_object(slug):
    """The region object embedded in droplets and actions."""
    return {
        "name": REGION_NAMES[slug],
        "slug": slug,
        "features": list(REGION_FEATURES),
        "available": True,
        "sizes": [size["slug"] for size in SIZES if slug in size["regions"]],
    }


def find_image(value, private=None):
    """An image by slug or numeric id (int or digit string); None when unknown. ``private``:
    the account's own images and snapshots by id (they have no slug)."""
    private = private or {}
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return IMAGES_BY_ID.get(value) or private.get(value)
    if isinstance(value, str):
        if value.isdigit():
            return IMAGES_BY_ID.get(int(value)) or private.get(int(value))
        return IMAGES_BY_SLUG.get(value)
    return None


def private_image(image_id, name, image_type, regions, created_at, min_disk=25, gigabytes=2.5):
    """A snapshot or custom image of the account: no slug, not public, only in ``regions``."""
    return {
        "id": image_id,
        "name": name,
        "distribution": "Ubuntu",
        "slug": None,
        "public": False,
        "regions": list(regions),
        "created_at": created_at,
        "min_disk_size": min_disk,
        "type": image_type,
        "size_gigabytes": gigabytes,
        "description": "",
        "tags": [],
        "status": "available",
        "error_message": "",
    }


def snapshot_object(image):
    """The ``/v2/snapshots`` view of a snapshot image (its id is a string there)."""
    return {
        "id": str(image["id"]),
        "name": image["name"],
        "created_at": image["created_at"],
        "regions": list(image["regions"]),
        "resource_id": str(image.get("resource_id") or ""),
        "resource_type": "droplet",
        "min_disk_size": image["min_disk_size"],
        "size_gigabytes": image["size_gigabytes"],
        "tags": [],
    }
