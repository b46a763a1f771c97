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

import time
import traceback
from concurrent.futures import ThreadPoolExecutor, wait, FIRST_COMPLETED


class ItemError(Exception):
    """A failure of one item whose message is meant for the operator (and Waldur)."""


def run_batch(items, worker, max_workers=8, deadline_seconds=None, on_error=None):
    """Call ``worker(item)`` for every item; return a list of results in input order.

    A worker returns a dict. If it raises, the item's result is
    ``on_error(item, exc)`` (default: ``{"failed": True, "msg": str(exc)}``).
    Items not finished by the deadline get ``{"failed": True, "msg": "... deadline ..."}``;
    their threads are left to finish on their own (the pass is idempotent, so
    the next run completes what a timed-out item started).
    """
    items = list(items)
    results = [None] * len(items)
    if not items:
        return results

    def default_error(item, exc):
        message = str(exc) if isinstance(exc, ItemError) else "%s: %s" % (type(exc).__name__, exc)
        return {"failed": True, "changed": False, "msg": message,
                "exception": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}

    on_error = on_error or default_error
    deadline = None if not deadline_seconds else time.monotonic() + deadline_seconds
    pool = ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(items))))
    futures = {pool.submit(worker, item): index for index, item in enumerate(items)}
    pending = set(futures)
    try:
        while pending:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            for future in done:
                index = futures[future]
                try:
                    results[index] = future.result()
                except Exception as exc:  # one item's failure is that item's result
                    results[index] = on_error(items[index], exc)
            if deadline is not None and time.monotonic() >= deadline and pending:
                for future in pending:
                    future.cancel()
                    results[futures[future]] = {
                        "failed": True, "changed": False,
                        "msg": "not finished within the deadline of %s seconds; "
                               "the next run will pick it up" % deadline_seconds}
                break
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return results
