# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""``waldur_orders``: its options, and its three states run (listed and claimed in ``claim``, settled in ``settle``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.core.batch import BatchRunner, batch_argument_spec
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.claim import run_claim, run_list
from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.settle import run_settle


def orders_argument_spec():
    """The options of ``waldur_orders`` besides the Waldur ones (``WaldurModule`` adds those)."""
    argument_spec = dict(
        state=dict(type="str", default="claimed", choices=["listed", "claimed", "settled"]),
        offering_uuid=dict(type="str", required=True),
        order_uuids=dict(type="list", elements="str"),
        with_pending=dict(type="bool", default=False),
        reject=dict(type="list", elements="dict"),
        hold=dict(type="list", elements="dict"),
        judged_orders=dict(type="raw"),
        outcomes=dict(type="list", elements="dict"),
        outcomes_packed=dict(type="raw"),
        packed=dict(type="bool", default=False),
        retry_max_age=dict(type="float", default=86400),
        order_processing_settle_seconds=dict(type="float", default=1.0),
        order_processing_wait_seconds=dict(type="float", default=30.0),
        order_processing_stuck_seconds=dict(type="float", default=3600.0),
    )
    argument_spec.update(batch_argument_spec())
    return argument_spec


def run_orders(module):
    """List, claim or settle the offering's orders (``state``), with ``module`` a ``WaldurModule``."""
    params = module.params
    BatchRunner(module, None)  # fails on batch options out of range before any call
    offering_uuid = module.uuid_param(params["offering_uuid"], "offering_uuid")
    client = module.client(pool_size=params["max_workers"])
    if params["state"] == "listed":
        run_list(module, client, offering_uuid, params)
    elif params["state"] == "claimed":
        run_claim(module, client, offering_uuid, params)
    else:
        run_settle(module, client, offering_uuid, params)
