"""A stateful Waldur marketplace simulator (werkzeug), for the site agent's tests and demo.

It speaks Waldur's REST API as a site agent (provider token) and as a consumer placing
orders (consumer token) sees it; shapes, states and quirks follow a real Waldur
(``real-waldur-samples.md`` beside this file) and the official 8.0.5 OpenAPI schema, which
``tests/contract`` checks every recorded exchange against.

Auth: ``Authorization: Token <key>`` with three users (``presets.py``): the provider
organisation's owner (``sim-provider-token``), the consumer organisation's owner
(``sim-consumer-token``) and staff (``sim-staff-token``). No header → 401 "Authentication
credentials were not provided."; an unknown key → 401 "Invalid token.". An object the caller
cannot see is a 404 (the provider sees nothing under ``/api/marketplace-resources/``, the
consumer nothing under ``/api/marketplace-provider-*``); one it can see but may not act on is
a 403 (the consumer approving as provider, the provider setting the staff-only flags).

UUIDs are accepted dashed or undashed in paths and query values; responses use 32 hex.
Lists page like Waldur (``page``, ``page_size`` default 10 max 300, ``Link`` first/prev/
next/last keeping every query parameter, ``X-Result-Count``) and every object honours
``field=`` (sparse objects). Unknown filters are ignored (django-filter); an invalid
``state`` is a 400.

Event mode (``events.py``): site agent identities and one queue per identity; with a
``broker`` (constructor argument), every order change and every change of a resource's
``paused``/``downscaled`` flag is published to the queues of the offering, as Waldur does.

Operation names (call log, ``add_fault``):

=====================================  ========================================================
operation                              endpoint
=====================================  ========================================================
``orders.list``                        GET  /api/marketplace-orders/
``orders.create``                      POST /api/marketplace-orders/  (consumer; 201)
``orders.get``                         GET  /api/marketplace-orders/{uuid}/
``orders.approve_by_consumer``         POST .../{uuid}/approve_by_consumer/
``orders.approve_by_provider``         POST .../{uuid}/approve_by_provider/
``orders.reject_by_provider``          POST .../{uuid}/reject_by_provider/
``orders.set_state_executing``         POST .../{uuid}/set_state_executing/
``orders.set_state_done``              POST .../{uuid}/set_state_done/
``orders.set_state_erred``             POST .../{uuid}/set_state_erred/
``resources.list``                     GET  /api/marketplace-provider-resources/
``resources.get``                      GET  /api/marketplace-provider-resources/{uuid}/
``resources.team``                     GET  .../{uuid}/team/
``resources.set_backend_id``           POST .../{uuid}/set_backend_id/
``resources.set_backend_metadata``     POST .../{uuid}/set_backend_metadata/
``resources.set_limits``               POST .../{uuid}/set_limits/
``resources.set_paused``               POST .../{uuid}/set_paused/  (staff)
``resources.set_downscaled``           POST .../{uuid}/set_downscaled/  (staff)
``resources.set_as_ok``                POST .../{uuid}/set_as_ok/  (Erred -> OK, no body)
``consumer_resources.list``            GET  /api/marketplace-resources/
``consumer_resources.get``             GET  /api/marketplace-resources/{uuid}/
``consumer_resources.update_limits``   POST .../{uuid}/update_limits/  (Update order)
``consumer_resources.terminate``       POST .../{uuid}/terminate/  (Terminate order)
``offering.get``                       GET  /api/marketplace-provider-offerings/{uuid}/
``offering.create_offering_component`` POST .../{uuid}/create_offering_component/  (201)
``offering.update_offering_component`` POST .../{uuid}/update_offering_component/
``plans.get``                          GET  /api/marketplace-plans/{uuid}/
``plans.update_prices``                POST /api/marketplace-plans/{uuid}/update_prices/ (no body)
``service_provider.list``              GET  /api/marketplace-service-providers/
``service_provider.get``               GET  /api/marketplace-service-providers/{uuid}/
``service_provider.keys``              GET  /api/marketplace-service-providers/{uuid}/keys/
``users.me``                           GET  /api/users/me/
``usages.list``                        GET  /api/marketplace-component-usages/
``usages.get``                         GET  /api/marketplace-component-usages/{uuid}/
``agent_identities.list``              GET  /api/marketplace-site-agent-identities/  (``name=``)
``agent_identities.create``            POST /api/marketplace-site-agent-identities/  (201)
``agent_identities.get``               GET  .../{uuid}/
``agent_identities.update``            PUT  .../{uuid}/
``agent_identities.register_service``  POST .../{uuid}/register_service/
``agent_identities.register_queue``    POST .../{uuid}/register_queue/  (event mode's queue)
``usages.set_usage``                   POST /api/marketplace-component-usages/set_usage/ (201)
=====================================  ========================================================

Order state machine (409 ``{"detail": "Valid states for operation: ..."}`` otherwise):
``approve_by_consumer`` pending-consumer → pending-provider; ``approve_by_provider``
pending-provider → executing (Update/Terminate move the resource to Updating/Terminating,
a Create gets its plugin scope, so the order's ``resource_uuid`` differs from
``marketplace_resource_uuid`` as in real Waldur); ``reject_by_provider`` from
pending-consumer/pending-provider → rejected (a Create's resource → Terminated);
``set_state_executing`` from pending-consumer/pending-provider/erred; ``set_state_done``
only from executing (Create/Restore → resource OK, Update → OK and limits = the order's,
Terminate → Terminated); ``set_state_erred`` from any state, storing ``error_message`` and
``error_traceback`` (a Create's resource → Erred and kept, with or without a backend id, as
Waldur 7.0.7 does; an Update's → Erred; a Terminate's stays OK). A Create whose attributes
carry no ``name`` is taken, and erred by Waldur itself right after ``approve_by_provider``
(its resource ``Erred``), as 7.0.7's Slurm processor does. Orders the consumer places start in
pending-provider: the consumer token is an owner of the consumer organisation, for whom
Waldur skips consumer approval. One order in progress per resource (409 otherwise).

Plans price each component (``prices``; only priced components are listed in a plan's
``components``); components created later have no price until ``update_prices`` gives one, and
``set_state_done`` of an Update order whose limits name an unpriced component answers an HTML
500 ``PlanComponent matching query does not exist`` (the order stays executing), as 7.0.7 does.
``set_usage`` needs the resource in OK, Updating or Terminating (400 ``{"resource": ["Resource
is not in valid state."]}`` otherwise, for example after an erred Update order).

Quirks (constructor options, ``set_quirks()`` or ``POST /_sim/quirks``), reset with the
state: ``empty_bodies`` makes the order transitions answer 200 with an empty body as
Waldur 7.0.7 did (by default they answer ``{"detail": ...}``); ``usage_ignores_date`` stores
every usage in the current month whatever ``date`` says; ``no_set_as_ok`` and
``no_set_paused`` answer Django's HTML 404 for ``set_as_ok`` and for ``set_paused`` /
``set_downscaled``. Waldur's processing of an approval (real-waldur-samples.md section 6c):
``processing_delay`` (seconds, default 0) runs an order's processor that long after
``approve_by_provider`` in a timer thread under the simulator's lock, as Celery does (until then
the order reads ``executing``, a Create has no scope and the resource keeps its state); a Create
without a name is erred by its processor whenever it runs, even once done (done -> erred, the
resource Erred with its backend id kept); ``processor_errs_updates`` errs every Update with
``Can't switch from state '5' using method 'schedule_updating'`` (``'1'`` after an Update) unless
the resource's backing record was set ok (7.0.7's ``POST /api/marketplace-slurm-remote/<uuid>/
set_state/`` is not in the vendored schema, so this is ``set_backing_state(uuid)`` or ``POST
/_sim/backing_state {"resource_uuid": ...}``), leaving the resource OK; ``future_prices`` makes
``update_prices`` on a plan with resources write ``future_prices``; ``waldur_slugs`` gives 7.0.7's
slugs (``alloc-on-1``, ``-3`` for an empty name); ``no_restore`` refuses Restore orders (400
``"Restore" is not a valid choice.``). ``process_after(operation, order_uuid)`` (``POST
/_sim/process {"order_uuid", "after"}``) runs an order's processor right after the next call of
an operation, or at once. Every quirk is a constructor option (``--option processing_delay=2``).
``profile="waldur_7"`` (constructor) turns on all quirks but ``processing_delay`` by default; the
default profile is current Waldur. Orders filter ``modified`` (modified after).

Python handle for tests: ``seed_resource(offering_uuid, name, backend_id=, state="OK",
attributes=, limits=, ...)``, ``seed_order(offering_uuid, type=, state=, resource_uuid=,
attributes=, limits=, ...)`` (also ``POST /_sim/seed/resource`` and ``/_sim/seed/order``),
``order(uuid)``, ``resource(uuid)`` (None once gone), ``usages(resource_uuid, billing_period)``,
``market`` (the model), and ``exchanges``: every API call with method, full URL, request
headers and body bytes, response status, headers and body bytes (cleared on reset; the
newest ``max_exchanges``, default 20000, are kept), which ``tests/contract/waldur_openapi.py``
validates. ``dump_state()`` (``GET /_sim/state``) gives
orders, resources, usages and offering components.
"""

from tests.simulators.waldur.simulator import WaldurSimulator

__all__ = ["WaldurSimulator"]
