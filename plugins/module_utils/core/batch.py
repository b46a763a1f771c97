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

from ansible_collections.waldur.site_agent.plugins.module_utils.core import pass_guard
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import pack


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

    Once the pass that started this run has ended (``core/pass_guard.py``: its controller was
    killed), no further item is started, and every item not finished well by then ends
    ``{"failed": True, "retry": True, "msg": "the pass that started this run ... has ended ..."}``.
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
            result, ended = None, pass_guard.ended()
            if ended is None:
                try:
                    result = worker(items[index])
                except pass_guard.PassEnded as exc:
                    ended = str(exc)
                except Exception as exc:  # one item's failure is that item's result
                    result = on_error(items[index], exc)
                if isinstance(result, dict) and result.get("failed"):
                    ended = pass_guard.ended()  # failed for a write refused? then it is a retry
            if ended is not None:  # not started, or stopped short: the next pass finishes it
                result = dict(result or {}, failed=True, changed=bool((result or {}).get("changed")),
                              retry=True, msg=ended)
                result.pop("exception", None)
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


# ------------------------------------------------------------------ the batch module engine

def batch_argument_spec(deadline=900.0):
    """The options of every batch module (documented by the ``waldur.site_agent.batch`` fragment)."""
    return dict(
        max_workers=dict(type="int", default=8),
        deadline=dict(type="float", default=float(deadline)),
        fail_on_item_error=dict(type="bool", default=False),
    )


def batch_option_problem(params, positive=("max_workers", "deadline")):
    """Why the batch options cannot be used (a message naming the option), or None."""
    for option in positive:
        value = params.get(option)
        if value is not None and value <= 0:
            return "%s must be a positive number, got %s" % (option, value)
    return None


def api_call_counts(reads=0, writes=0, retries=0):
    """The one ``api_calls`` shape every batch module returns."""
    return {"reads": int(reads), "writes": int(writes), "retries": int(retries)}


def count_results(results, **predicates):
    """``{name: how many results predicate(result) holds for}``."""
    return dict((name, sum(1 for result in results if predicate(result))) for name, predicate in predicates.items())


class BatchRunner:
    """Runs a batch module: checks the batch options, works on the items concurrently, shapes
    every result the same way and exits (``fail_on_item_error`` applied, ``api_calls`` one shape).

    ``echo``: the item keys copied into its result (the input's key: ``resource_uuid``,
    ``order_uuid`` ...), so an item cut off by the deadline still says which it was.
    ``api_calls``: a callable giving ``api_call_counts(...)``; None when the module adds them
    itself (``WaldurModule`` does).
    """

    def __init__(self, module, worker, echo=("resource_uuid",), on_error=None, api_calls=None):
        self.module = module
        self.worker = worker
        self.echo = tuple(echo)
        self.on_error = on_error
        self.api_calls = api_calls
        problem = batch_option_problem(module.params)
        if problem:
            self.fail(problem)

    @property
    def max_workers(self):
        return self.module.params["max_workers"]

    def shape(self, item, result):
        """``result`` with the item's echoed keys and ``changed``/``failed``/``retry``/``msg`` always set."""
        shaped = dict((key, item.get(key)) for key in self.echo if isinstance(item, dict))
        shaped.update(changed=False, failed=False, retry=False, msg="")
        shaped.update(result or {})
        return shaped

    def run(self, items, worker=None):
        """One shaped result per item, in input order."""
        items = list(items)
        raw = run_batch(items, worker or self.worker, max_workers=self.max_workers,
                        deadline_seconds=self.module.params["deadline"], on_error=self.on_error)
        return [self.shape(item, result) for item, result in zip(items, raw)]

    def failure_summary(self, failures, results):
        key = self.echo[0] if self.echo else None
        return "%d of %d item(s) failed: %s" % (len(failures), len(results), "; ".join(
            "%s: %s" % (failure.get(key), failure.get("msg")) for failure in failures))

    def _calls(self, result):
        if self.api_calls is not None:
            result["api_calls"] = self.api_calls()
        return result

    def fail(self, msg, **result):
        self.module.fail_json(msg=msg, **self._calls(result))

    def finish(self, results, failed=None, fail_msg=None, packed=False, **extra):
        """Exit: ``changed`` when any result changed; fail with ``fail_msg(failures, results)``
        when ``fail_on_item_error`` and any result is failed (``failed(result)`` decides). With
        ``packed``, the results go back as one JSON text, ``results_packed`` (``core/packed``), and
        the failed ones as ``failures`` too, so that they can be named without unpacking."""
        failed = failed or (lambda result: result.get("failed"))
        summary = dict(extra)
        summary.setdefault("changed", any(result.get("changed") for result in results))
        failures = [result for result in results if failed(result)]
        if packed:
            summary.update(results_packed=pack(results), failures=failures)
        else:
            summary["results"] = results
        if failures and self.module.params.get("fail_on_item_error"):
            summary.pop("msg", None)  # the failure's msg replaces the summary's
            self.fail((fail_msg or self.failure_summary)(failures, results), **summary)
        self.module.exit_json(**self._calls(summary))
