"""Long-running operations as ARM runs them, in two speeds.

``instant``: the operation is over before the first response is sent; the
response carries a terminal state and no polling headers, so the SDK's
``begin_*().result()`` returns without polling.

``realistic``: the first response carries ``Azure-AsyncOperation`` (and for
POST/DELETE ``Location``) with an integer ``Retry-After``; the operation stays
``InProgress`` for ``lro_seconds`` and then completes. Completion is applied
lazily, at the start of the next request to the simulator (or the next read
helper call), in deadline order, so no background thread mutates state.

An operation that was told to fail (``fail_lro``) always takes the polled
path, even in instant mode, because only the operation status resource can
carry the error the SDK raises from ``.result()``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from tests.simulators.azure.arm import new_guid, now_iso

LRO_MODES = ("instant", "realistic")


@dataclass
class LroFailure:
    operation: str
    code: str
    message: str
    status: int = 409  # what a Location poll answers once the operation failed
    times: int = 1


@dataclass
class Operation:
    name: str  # the simulator operation that started it, e.g. "vms.put"
    provider: str | None  # "Microsoft.Compute", "Microsoft.Network", None for resource groups
    location: str
    deadline: float
    on_success: Callable[[], None]
    on_failure: Callable[[], None] | None = None
    failure: LroFailure | None = None
    tracked: bool = False  # the client was given polling URLs
    id: str = field(default_factory=new_guid)
    status: str = "InProgress"
    start_time: str = field(default_factory=now_iso)
    end_time: str | None = None

    @property
    def error(self) -> dict | None:
        if self.status != "Failed" or self.failure is None:
            return None
        return {"code": self.failure.code, "message": self.failure.message}

    def finish(self) -> None:
        if self.status != "InProgress":
            return
        self.end_time = now_iso()
        if self.failure is not None:
            self.status = "Failed"
            if self.on_failure:
                self.on_failure()
        else:
            self.status = "Succeeded"
            self.on_success()


class LroEngine:
    """Starts operations and completes those that are due."""

    def __init__(self):
        self.operations: dict[str, Operation] = {}
        self.failures: list[LroFailure] = []

    def clear(self) -> None:
        self.operations.clear()
        self.failures.clear()

    def fail_next(self, failure: LroFailure) -> None:
        self.failures.append(failure)

    def _take_failure(self, name: str) -> LroFailure | None:
        for failure in self.failures:
            if failure.operation == name and failure.times != 0:
                if failure.times > 0:
                    failure.times -= 1
                if failure.times == 0:
                    self.failures.remove(failure)
                return failure
        return None

    def begin(self, name: str, provider: str | None, location: str, mode: str, seconds: float,
              on_success: Callable[[], None], on_failure: Callable[[], None] | None = None,
              seeded: bool = False) -> Operation:
        failure = None if seeded else self._take_failure(name)
        realistic = mode == "realistic" and not seeded
        now = time.monotonic()
        operation = Operation(name=name, provider=provider, location=location,
                              deadline=now + seconds if realistic else now,
                              on_success=on_success, on_failure=on_failure, failure=failure,
                              tracked=realistic or failure is not None)
        self.operations[operation.id] = operation
        if not operation.tracked:
            operation.finish()
        return operation

    def advance(self) -> None:
        now = time.monotonic()
        due = sorted((op for op in self.operations.values()
                      if op.status == "InProgress" and op.deadline <= now),
                     key=lambda op: op.deadline)
        for operation in due:
            operation.finish()

    def pending(self) -> list[Operation]:
        return [op for op in self.operations.values() if op.status == "InProgress"]
