"""The DigitalOcean simulator against DigitalOcean's official OpenAPI spec.

Every exchange, driven by the real python-digitalocean and by plain HTTP, is
checked with openapi-core (``digitalocean_openapi.validate_exchange``), error
responses included. The tolerances are listed in ``digitalocean_openapi``.
"""

from __future__ import annotations

import copy
import json

import digitalocean
import pytest
import requests

from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.catalogue import read_catalogue
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.client import DigitalOceanClient
from tests.contract.digitalocean_openapi import (
    matched_operation, spec_operations, validate_exchange, validate_exchanges,
)
from tests.simulators.digitalocean.presets import (
    ADMIN_KEY_FINGERPRINT, ADMIN_KEY_ID, DO_TOKEN, NEW_KEY_FINGERPRINT, NEW_PUBLIC_KEY,
    OPS_KEY_FINGERPRINT, OPS_KEY_ID,
)

POLL = 0.01
AUTH = {"Authorization": f"Bearer {DO_TOKEN}"}


@pytest.fixture
def do(do_sim, monkeypatch):
    monkeypatch.setenv("DIGITALOCEAN_END_POINT", do_sim.url + "/v2/")
    monkeypatch.setenv("PYTHON_DIGITALOCEAN_REQUEST_TIMEOUT_SEC", "10")
    return do_sim


def call(sim, method, path, **kwargs):
    headers = {**AUTH, **kwargs.pop("headers", {})}
    return requests.request(method, sim.url + path, headers=headers, timeout=10, **kwargs)


def test_python_digitalocean_exchanges_validate(do):
    manager = digitalocean.Manager(token=DO_TOKEN)
    manager.get_account()
    manager.get_all_sizes()
    manager.get_all_sshkeys()
    manager.get_ssh_key(OPS_KEY_ID)
    digitalocean.SSHKey(token=DO_TOKEN, fingerprint=ADMIN_KEY_FINGERPRINT).load()

    # A public key in ssh_keys: the library lists keys, uploads it, then creates.
    droplet = digitalocean.Droplet(token=DO_TOKEN, name="web-1", region="ams3",
                                   size_slug="s-1vcpu-1gb", image="ubuntu-22-04-x64",
                                   ssh_keys=[OPS_KEY_ID, ADMIN_KEY_FINGERPRINT, NEW_PUBLIC_KEY],
                                   tags=["waldur-resource:00ff"], user_data="#cloud-config\n")
    droplet.create()
    assert droplet.get_action(droplet.action_ids[0]).wait(update_every_seconds=POLL)
    digitalocean.Droplet.create_multiple(token=DO_TOKEN, names=["m-1", "m-2"], region="fra1",
                                         size="s-1vcpu-2gb", image="debian-12-x64", tags=["multi"])
    manager.get_all_droplets(tag_name="waldur-resource:00ff")
    droplet.load()

    for step in (droplet.shutdown, lambda **kw: droplet.resize("s-2vcpu-4gb", disk=True, **kw),
                 lambda **kw: droplet.resize("s-4vcpu-8gb", disk=False, **kw),
                 droplet.power_on, droplet.reboot, droplet.power_cycle):
        action = step(return_dict=False)
        action.droplet_id = droplet.id  # polls /v2/droplets/{id}/actions/{aid}
        assert action.wait(update_every_seconds=POLL)
    droplet.get_actions()
    with pytest.raises(digitalocean.DataReadError):  # 422: resize while on
        droplet.resize("s-8vcpu-16gb")
    with pytest.raises(digitalocean.DataReadError):  # 422: unknown size
        digitalocean.Droplet(token=DO_TOKEN, name="x", region="ams3", size_slug="huge",
                             image="ubuntu-22-04-x64").create()

    key = digitalocean.SSHKey(token=DO_TOKEN, fingerprint=NEW_KEY_FINGERPRINT)
    key.load()
    key.name = "renamed"
    key.edit()
    key.destroy()

    tag = digitalocean.Tag(token=DO_TOKEN, name="team-a")
    tag.create()
    tag.load()
    manager.get_all_tags()
    tag.delete()

    do.app.add_fault("sizes.list", 429, retry_after=3)
    do.app.add_fault("account.get", 500)
    for failing in (manager.get_all_sizes, manager.get_account,
                    digitalocean.Manager(token="wrong").get_all_droplets):
        with pytest.raises(digitalocean.DataReadError):
            failing()

    droplet.destroy()
    with pytest.raises(digitalocean.NotFoundError):
        droplet.load()

    exchanges = list(do.app.exchanges)
    assert validate_exchanges(exchanges) == []
    assert {e["status"] for e in exchanges} == {200, 201, 202, 204, 401, 404, 422, 429, 500}
    # The library's string "disk" really went over the wire (tolerance 2 is exercised).
    resize_bodies = [json.loads(e["body"]) for e in exchanges
                     if e["method"] == "POST" and e["url"].endswith("/actions/")]
    assert {"type": "resize", "size": "s-2vcpu-4gb", "disk": "true"} in resize_bodies


def test_plain_http_covers_every_operation_of_the_spec(do):
    seeded = do.app.seed_droplet("seeded", tags=["keep"])
    created = call(do, "POST", "/v2/droplets", json={
        "name": "raw-1", "region": "lon1", "size": "s-2vcpu-2gb", "image": "ubuntu-24-04-x64",
        "ssh_keys": [OPS_KEY_ID], "ipv6": True, "monitoring": True, "backups": True,
        "tags": ["raw"], "user_data": "#!/bin/sh\n", "vpc_uuid": "760e09ef-dc84-11e8-981e-3cfdfeaae000"})
    droplet_id = created.json()["droplet"]["id"]
    call(do, "POST", "/v2/droplets", json={
        "names": ["raw-2", "raw-3"], "size": "s-1vcpu-1gb", "image": 129211873, "tags": ["gone"]})
    for i in range(3):
        do.app.seed_droplet(f"page-{i}")
    call(do, "GET", "/v2/droplets", params={"per_page": 2, "page": 2})
    call(do, "GET", "/v2/droplets", params={"name": "raw-1"})
    call(do, "GET", "/v2/droplets", params={"type": "gpus"})
    call(do, "GET", f"/v2/droplets/{droplet_id}")
    action = call(do, "POST", f"/v2/droplets/{droplet_id}/actions", json={"type": "power_off"}).json()
    call(do, "GET", f"/v2/droplets/{droplet_id}/actions", params={"per_page": 1})
    call(do, "GET", f"/v2/droplets/{droplet_id}/actions/{action['action']['id']}")
    call(do, "GET", f"/v2/actions/{action['action']['id']}")
    resize = call(do, "POST", f"/v2/droplets/{droplet_id}/actions",
                  json={"type": "resize", "size": "s-2vcpu-4gb", "disk": True})
    assert resize.status_code == 201
    call(do, "GET", f"/v2/actions/{resize.json()['action']['id']}")  # lets the resize finish
    rename = call(do, "POST", f"/v2/droplets/{droplet_id}/actions",
                  json={"type": "rename", "name": "raw-one"})
    assert rename.status_code == 201
    call(do, "DELETE", "/v2/droplets", params={"tag_name": "gone"})
    call(do, "DELETE", f"/v2/droplets/{seeded['id']}")

    call(do, "GET", "/v2/account/keys", params={"per_page": 1})
    new_key = call(do, "POST", "/v2/account/keys", json={"name": "new", "public_key": NEW_PUBLIC_KEY})
    call(do, "GET", f"/v2/account/keys/{new_key.json()['ssh_key']['id']}")
    call(do, "PUT", f"/v2/account/keys/{NEW_KEY_FINGERPRINT}", json={"name": "renamed"})
    call(do, "DELETE", f"/v2/account/keys/{NEW_KEY_FINGERPRINT}")
    call(do, "DELETE", f"/v2/account/keys/{ADMIN_KEY_ID}")
    call(do, "GET", f"/v2/account/keys/{OPS_KEY_FINGERPRINT}")

    call(do, "GET", "/v2/sizes", params={"per_page": 4, "page": 2})
    # the catalogue: regions, public and private images, snapshots
    snapshot = do.app.seed_image("before-upgrade", regions=("ams3", "fra1"))
    do.app.seed_image("golden", image_type="custom")
    call(do, "GET", "/v2/regions", params={"per_page": 3, "page": 2})
    call(do, "GET", "/v2/images", params={"per_page": 4})
    call(do, "GET", "/v2/images", params={"private": "true"})
    call(do, "GET", "/v2/images", params={"type": "distribution"})
    call(do, "GET", "/v2/images/debian-12-x64")
    call(do, "GET", "/v2/images/129211873")
    call(do, "GET", f"/v2/images/{snapshot['id']}")
    call(do, "GET", "/v2/images/no-such-image")  # 404
    call(do, "GET", "/v2/snapshots")
    call(do, "GET", "/v2/snapshots", params={"resource_type": "droplet", "per_page": 1})
    call(do, "POST", "/v2/tags", json={"name": "env:prod"})
    call(do, "GET", "/v2/tags/env:prod")
    call(do, "GET", "/v2/tags/raw")
    call(do, "GET", "/v2/tags")
    call(do, "DELETE", "/v2/tags/env:prod")
    call(do, "GET", "/v2/account")

    # Errors the spec declares: 404 on every path with an id, 401 and 429 everywhere.
    call(do, "GET", "/v2/droplets/999")
    call(do, "DELETE", "/v2/droplets/999")
    call(do, "GET", "/v2/droplets/999/actions")
    call(do, "GET", "/v2/actions/999")
    call(do, "GET", "/v2/account/keys/999")
    call(do, "DELETE", "/v2/tags/never")
    call(do, "DELETE", "/v2/droplets", params={"tag_name": "never"})
    call(do, "GET", "/v2/account", headers={"Authorization": "Bearer wrong"})
    do.app.set_rate_limit(1, window=60)
    call(do, "GET", "/v2/sizes")
    call(do, "GET", "/v2/sizes")  # past the limit: 429
    do.app.set_rate_limit(None)

    exchanges = list(do.app.exchanges)
    assert validate_exchanges(exchanges) == []
    assert {matched_operation(e) for e in exchanges} == spec_operations()
    assert {e["status"] for e in exchanges} >= {200, 201, 202, 204, 401, 404, 429}


def test_the_catalogue_as_the_order_pass_reads_it_validates(do):
    """Regions, sizes and every kind of image the catalogue check reads - a public image by slug
    and by id, a snapshot and a custom image of the account by id, one DigitalOcean does not
    have - through the collection's own client, each answer checked against the spec."""
    snapshot = do.app.seed_image("before-upgrade", regions=("ams3", "fra1"))
    custom = do.app.seed_image("golden", image_type="custom", regions=("lon1",))
    client = DigitalOceanClient(DO_TOKEN, api_url=do.url, timeout=10)

    catalogue = read_catalogue(client, ["ubuntu-22-04-x64", "148747795", str(snapshot["id"]),
                                        str(custom["id"]), "no-such-image"])

    assert catalogue["regions"]["ams3"]["available"] and "c-2" in catalogue["regions"]["ams3"]["sizes"]
    assert "blr1" not in catalogue["sizes"]["c-2"]["regions"]
    assert catalogue["images"]["148747795"]["slug"] == "debian-12-x64"
    assert (catalogue["images"][str(snapshot["id"])]["type"], catalogue["images"][str(snapshot["id"])]["public"]) \
        == ("snapshot", False)
    assert catalogue["images"][str(custom["id"])]["regions"] == ["lon1"]
    assert catalogue["images"]["no-such-image"] is None
    exchanges = list(do.app.exchanges)
    assert {matched_operation(e) for e in exchanges} == {
        ("GET", "/v2/regions"), ("GET", "/v2/sizes"), ("GET", "/v2/images/{image_id}")}
    assert sorted(e["status"] for e in exchanges).count(404) == 1
    assert validate_exchanges(exchanges) == []
    # the answers are really checked: a region without "available", an image without its image key
    region_listing = next(copy.deepcopy(e) for e in exchanges if e["url"].split("?")[0].rstrip("/").endswith("/regions"))
    body = json.loads(region_listing["response_body"])
    del body["regions"][0]["available"]
    region_listing["response_body"] = json.dumps(body)
    assert any("'available' is a required property" in p for p in validate_exchange(region_listing))
    image_read = next(copy.deepcopy(e) for e in exchanges if e["status"] == 200 and "/images/" in e["url"])
    image_read["response_body"] = json.dumps(json.loads(image_read["response_body"])["image"])
    assert any("'image' is a required property" in p for p in validate_exchange(image_read))


def test_client_error_answers_have_the_declared_shapes(do):
    """400/422 for requests that are wrong on purpose: only the answer is checked."""
    call(do, "POST", "/v2/tags", json={"name": "no spaces"})  # the spec's tags_bad_request
    call(do, "POST", "/v2/droplets", json={"name": "x", "size": "s-1vcpu-1gb", "image": "nope"})
    call(do, "POST", "/v2/account/keys", json={"name": "k", "public_key": "garbage"})
    exchanges = list(do.app.exchanges)
    assert [e["status"] for e in exchanges] == [400, 422, 422]
    for exchange in exchanges:
        assert validate_exchange(exchange, check_request=False) == []
    # The tags 400 was also checked against error_with_root_causes: drop a required key.
    broken = copy.deepcopy(exchanges[0])
    body = json.loads(broken["response_body"])
    del body["root_causes"]
    broken["response_body"] = json.dumps(body)
    assert any("root_causes" in p for p in validate_exchange(broken, check_request=False))


def test_validator_reports_bad_shapes_and_keeps_tolerances_narrow(do):
    droplet_id = call(do, "POST", "/v2/droplets", json={
        "name": "v", "region": "ams3", "size": "s-1vcpu-1gb", "image": "ubuntu-22-04-x64"}
    ).json()["droplet"]["id"]
    call(do, "GET", f"/v2/droplets/{droplet_id}")
    call(do, "POST", f"/v2/droplets/{droplet_id}/actions", json={"type": "power_off"})
    call(do, "GET", "/v2/droplets/1")
    create, get, action, missing = (copy.deepcopy(e) for e in do.app.exchanges)
    assert validate_exchanges([create, get, action, missing]) == []

    def altered(exchange, field, change):
        changed = copy.deepcopy(exchange)
        data = json.loads(changed[field])
        change(data)
        changed[field] = json.dumps(data)
        return validate_exchange(changed)

    # Response shapes: a droplet without status, a wrong type, an error without message.
    problems = altered(get, "response_body", lambda d: (d["droplet"].pop("status"),
                                                        d["droplet"].update(memory="1GB")))
    assert any("'status' is a required property" in p for p in problems)
    assert any("droplet/memory" in p for p in problems)
    assert any("'message' is a required property" in p
               for p in altered(missing, "response_body", lambda d: d.pop("message")))
    assert altered(action, "response_body", lambda d: d["action"].update(status="done"))

    # Requests: a non-string vpc_uuid and a "disk" that is neither boolean nor
    # "true"/"false" are still reported; so are a malformed key identifier,
    # a missing Authorization header and an unknown path.
    assert altered(create, "body", lambda d: d.update(vpc_uuid=5))
    assert altered(create, "body", lambda d: d.update(size=1))
    resize = copy.deepcopy(action)
    resize["body"] = json.dumps({"type": "resize", "size": "s-2vcpu-4gb", "disk": "yes"})
    assert any("disk" in p for p in validate_exchange(resize))
    resize["body"] = json.dumps({"type": "resize", "size": "s-2vcpu-4gb", "disk": "true"})
    assert validate_exchange(resize) == []
    bad_key = copy.deepcopy(get)
    bad_key["url"] = bad_key["url"].replace(f"droplets/{droplet_id}", "account/keys/not-a-key")
    assert any("ssh_key_identifier" in p for p in validate_exchange(bad_key))
    anonymous = copy.deepcopy(get)
    anonymous["headers"].pop("Authorization")
    assert any("Security" in p for p in validate_exchange(anonymous))
    unknown = copy.deepcopy(get)
    unknown["url"] = unknown["url"].replace("/v2/droplets/", "/v2/volumes/")
    assert any("PathNotFound" in p for p in validate_exchange(unknown))
    # A trailing slash is only presentation: the same exchange with one validates.
    slashed = copy.deepcopy(get)
    slashed["url"] += "/"
    assert validate_exchange(slashed) == []
