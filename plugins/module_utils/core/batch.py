# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Run one worker per item on a bounded thread pool with an overall deadline.

Batch modules (``do_droplet``, ``azure_vm_chain``, ``waldur_orders`` ...) take a
list and act on every item concurrently: one item failing never stops the
others, and results come back in the order of the input.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import traceback


class ItemError(Exception):
    """A failure of one item whose message is meant for the operator (and Waldur)."""


def _default_error(item, exc):
    message = str(exc) if isinstance(exc, ItemError) else "%s: %s" % (type(exc).__name__, exc)
    return {"failed": True, "changed": False, "msg": message,
            "exception": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}


def run_batch(items, worker, max_workers=8, deadline_seconds=None, on_error=None):
    """Call ``worker(item)`` for every item; return a list of results in input order.

    A worker returns a dict. If it raises, the item's result is
    ``on_error(item, exc)`` (default: ``{"failed": True, "msg": str(exc)}``).
    Items not finished by the deadline get ``{"failed": True, "retry": True, "msg": "... deadline ..."}``
    (``retry``: settle leaves the order for the next pass instead of erring it).
    Workers are daemon threads, so the module can exit at the deadline without
    waiting for calls still in flight; the pass is idempotent, so the next run
    completes what a timed-out item started.
    """
    items = list(items)
    results = [None] * len(items)
    if not items:
        return results
    on_error = on_error or _default_error
    lock = threading.Lock()
    all_done = threading.Event()
    state = {"next": 0, "finished": 0, "closed": False}

    def work():
        while True:
            with lock:
                if state["closed"] or state["next"] >= len(items):
                    return
                index = state["next"]
                state["next"] += 1
            try:
                result = worker(items[index])
            except Exception as exc:  # one item's failure is that item's result
                result = on_error(items[index], exc)
            with lock:
                if state["closed"]:  # the deadline passed; this result arrives too late
                    return
                results[index] = result
                state["finished"] += 1
                if state["finished"] == len(items):
                    all_done.set()

    for number in range(max(1, min(max_workers, len(items)))):
        threading.Thread(target=work, name="batch-worker-%d" % number, daemon=True).start()
    all_done.wait(timeout=deadline_seconds or None)
    with lock:
        state["closed"] = True
        for index, result in enumerate(results):
            if result is None:
                results[index] = {
                    "failed": True, "changed": False, "retry": True,
                    "msg": "not finished within the deadline of %s seconds; "
                           "the next run will pick it up" % deadline_seconds}
    return results
