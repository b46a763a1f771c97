"""A stateful simulator of the DigitalOcean API v2 (the subset the collection uses).

Plain HTTP under ``/v2/``. Every route tolerates a trailing slash, ``per_page`` on
any GET and a ``{}`` body on DELETE, which is how python-digitalocean 1.17 talks.
Point the library at it with ``DIGITALOCEAN_END_POINT=<url>/v2/`` (the library only
honours ``end_point=`` on objects you build yourself; the env var reaches the
objects it builds internally too).

Operations (the names the call log records and faults target):

==========================  ==========================================================
``droplets.list``           GET /v2/droplets (``tag_name`` | ``name``, ``type``, paging)
``droplets.create``         POST /v2/droplets (``name`` or ``names``) -> 202
``droplets.get``            GET /v2/droplets/{id}
``droplets.delete``         DELETE /v2/droplets/{id} -> 204
``droplets.delete_by_tag``  DELETE /v2/droplets?tag_name= -> 204
``droplet_actions.create``  POST /v2/droplets/{id}/actions -> 201
``droplet_actions.list``    GET /v2/droplets/{id}/actions (newest first, paged)
``droplet_actions.get``     GET /v2/droplets/{id}/actions/{action_id}
``actions.get``             GET /v2/actions/{action_id}
``keys.list``               GET /v2/account/keys (paged)
``keys.create``             POST /v2/account/keys -> 201
``keys.get``                GET /v2/account/keys/{id or fingerprint}
``keys.update``             PUT /v2/account/keys/{id or fingerprint} (name)
``keys.delete``             DELETE /v2/account/keys/{id or fingerprint} -> 204
``sizes.list``              GET /v2/sizes (paged)
``regions.list``            GET /v2/regions (paged)
``images.list``             GET /v2/images (``private``, ``type``; paged)
``images.get``              GET /v2/images/{id or slug}
``snapshots.list``          GET /v2/snapshots (``resource_type``; paged)
``tags.list``               GET /v2/tags (paged)
``tags.create``             POST /v2/tags -> 201
``tags.get``                GET /v2/tags/{name}
``tags.delete``             DELETE /v2/tags/{name} -> 204 (untags the droplets)
``tags.tag_resources``      POST /v2/tags/{name}/resources (droplets) -> 204
``tags.untag_resources``    DELETE /v2/tags/{name}/resources (droplets) -> 204
``account.get``             GET /v2/account
==========================  ==========================================================

Behaviour:

* Auth: ``Authorization: Bearer sim-do-token`` (``presets.DO_TOKEN``); anything else
  is 401 ``{"id": "unauthorized", "message": "Unable to authenticate you."}``.
  Every error body has ``id`` and ``message`` (python-digitalocean crashes without
  both); 404 always says "The resource you were accessing could not be found.".
* Lists: ``page`` and ``per_page`` (default 20, capped at 200), ``meta.total`` and
  absolute ``links.pages`` (first/prev/next/last) built from the request's host.
* Droplets are created ``new`` with empty networks and a ``create`` action. When it
  completes they turn ``active`` and get private and public IPv4 (and IPv6 when
  asked). Droplet actions: shutdown, power_off, power_on, reboot, power_cycle,
  resize (``size``, ``disk`` as a boolean or "true"/"false"; only while off, else
  422 "Droplet is currently on. Please power it off to run this event."; the plan's
  disk may not be smaller than the droplet's; ``disk`` true grows the disk, false
  changes CPU/RAM only), rename, enable/disable_backups, enable_ipv6,
  password_reset. An action while another is in progress is 422 "Droplet already
  has a pending event.". Actions are ``in-progress`` until done, then
  ``completed`` (``errored`` when the droplet is destroyed first).
* Timing: ``boot_seconds`` (create) and ``action_seconds`` (other actions). With
  the default 0 an action completes at the next GET after it (any GET, or a
  Python helper below), so ``Action.wait()`` returns after one poll while a caller
  that fires a second action without waiting still gets the pending-event 422.
  With a positive value it completes once that many seconds have passed.
* SSH keys: fingerprint = MD5 of the base64-decoded key blob (colon-separated
  hex); a key already on the account is 422 "SSH Key is already in use on your
  account". Droplet create takes key ids or fingerprints; unknown ones are 422.
  Region, size and image slugs (image also by id) come from ``catalogue``;
  unknown ones are 422 ("You specified an invalid size for Droplet creation."), as
  are a size not offered in the region and an image not in it. The account's own
  snapshots and custom images (``seed_image``) are private, by id only, in their
  regions only. ``restrict_region(region, message="Region is not available")`` makes
  creates there 422 while ``/v2/regions`` still lists the region available, as DigitalOcean
  does for a region out of capacity: a create the catalogue allows can still be refused.
  Tags named at create are created implicitly.
* Rate limits: every response carries ``ratelimit-limit``, ``ratelimit-remaining``
  and ``ratelimit-reset`` (epoch seconds, hourly window). ``set_rate_limit`` and
  429 faults answer ``{"id": "too_many_requests", "message": "API Rate limit
  exceeded."}`` with ``Retry-After``. Option ``enforce_limits`` applies the
  documented limits: ``burst_limit`` (250) per ``burst_window`` (60 s) and
  ``hourly_limit`` (5,000) per hour.

Options (constructor keywords, ``--option key=value``, ``app.configure(...)`` or
POST ``/_sim/options``; ``configure`` lasts until the next reset): ``action_seconds``,
``boot_seconds``, ``enforce_limits``, ``burst_limit``, ``burst_window``,
``hourly_limit``, ``droplet_limit`` (100: the account's ``droplet_limit`` of ``GET /v2/account``; a
create that would take the account's droplets, ``meta.total`` of ``GET /v2/droplets``, past it is
refused as DigitalOcean refuses it: 422 ``unprocessable_entity`` "creating this/these droplet(s) will
exceed your droplet limit").

Presets: ``default`` (no droplets or tags, the two SSH keys of
``presets.PRESET_SSH_KEYS``) and ``empty`` (no keys either).

Python helpers for tests: ``seed_droplet(name, region, size, image, tags,
status="active", created_at=None)`` (``created_at``, ISO 8601, backdates it),
``seed_image(name, image_type="snapshot", regions=("ams3",))``, ``restrict_region(region, message)``,
``droplets()``, ``droplet(id)`` (the droplet as the API shows it, plus ``user_data`` and
``ssh_key_ids`` which the API does not echo),
``actions(droplet_id=None)``, ``keys()``, ``tags()``, ``configure(**options)``.
``dump_state()`` (and GET ``/_sim/state``) returns droplets, actions, keys and tags.
``exchanges`` (and GET ``/_sim/exchanges``) records each API exchange (method,
URL, headers, body, status, response headers and body) for the contract test;
reset clears it.
"""

from tests.simulators.digitalocean.app import DigitalOceanSimulator, fingerprint_of

__all__ = ["DigitalOceanSimulator", "fingerprint_of"]
