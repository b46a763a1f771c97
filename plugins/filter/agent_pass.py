# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Which offerings of the site agent configuration a pass works on, and why the others not.

``pass_offerings`` keeps the offerings with the pass's role backend set. Offerings with
``stomp_enabled: true`` are served by the event_process rulebook, as upstream: the polling
order pass leaves them out (and the polling membership pass too, unless
``stomp_membership_sync_enabled: false``), except for a run an event asked for (it names its
orders or resources) or a sweep (``sweep: true``). Each offering left out that the run named,
or left to events, gets a line saying so.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.plugin_utils.backends import create_gaps as _create_gaps

ROLE_KEYS = {"order_process": "order_processing_backend", "report": "reporting_backend",
             "membership_sync": "membership_sync_backend"}
_TRUE = ("1", "true", "yes", "on")


def _flag(offering, key, default):
    value = offering.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def served_by_events(offering, pass_name):
    """True when the event_process rulebook serves this pass for the offering."""
    stomp = _flag(offering, "stomp_enabled", False)
    if pass_name == "order_process":
        return stomp
    if pass_name == "membership_sync":
        return _flag(offering, "stomp_membership_sync_enabled", stomp)
    return False


def pass_offerings(offerings, pass_name, named=False, by_event=False, sweep=False):
    """``{"run": [...], "notes": [...]}`` for ``offerings`` (site_config's list) and the pass.

    ``named``: the run named its offering (say why it is left out); ``by_event``: the run
    names the orders or resources an event brought; ``sweep``: a sweep of the rulebook."""
    role_key = ROLE_KEYS.get(pass_name)
    run, notes = [], []
    for offering in offerings or []:
        name = offering.get("name") or offering.get("waldur_offering_uuid")
        if role_key and not offering.get(role_key):
            if named:
                # site_config's own words for an offering it leaves out of a pass.
                notes.append("offering %r has no %s: left out of the %s pass" % (str(name), role_key, pass_name))
            continue
        if served_by_events(offering, pass_name) and not (by_event or sweep):
            notes.append("Offering %s has stomp_enabled: true: the event_process rulebook serves its %s "
                         "(events and sweeps), skipped by this pass (agent_pass_sweep_event_offerings=true "
                         "sweeps it here)" % (name, "orders" if pass_name == "order_process" else "resources"))
            continue
        run.append(offering)
    return {"run": run, "notes": notes}


def create_gaps(offering, order_form=None):
    """Why no Create order of the offering (site_config's mapping) could be built: one line per
    create input that neither ``backend_settings`` nor the offering's order form in Waldur
    (``order_form``: its ``options``, or a list of field names) supplies. [] when unknown."""
    offering = offering if isinstance(offering, dict) else {}
    # Only an offering whose orders this agent processes builds machines.
    return _create_gaps(offering.get("order_processing_backend"), offering.get("backend_settings"), order_form)


class FilterModule(object):
    def filters(self):
        return {"pass_offerings": pass_offerings, "create_gaps": create_gaps}
