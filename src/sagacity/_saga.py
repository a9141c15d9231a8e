"""One live saga: the call protocol (INTENT -> EXECUTED | FAILED), the failure latch, the ending.

A ``SagaRun`` is shared by every context copied from the saga's (tasks, ``to_thread``,
``in_current_saga``), so its mutable state sits behind a lock. The sync and async call paths
drive the same journaling methods and differ only in ``fn()`` versus ``await fn()``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any

from sagacity._compensation import describe
from sagacity._context import ToolCall, calling
from sagacity._json import encode_result
from sagacity._state import RESUMES
from sagacity.model import ApprovalRequest, Phase, SagaResult, SagaStatus
from sagacity.tools import ToolSpec

if TYPE_CHECKING:
    from sagacity._sagacity import Sagacity


class SagaRun:
    """The saga live in this process under ``saga_id``."""

    def __init__(self, sg: Sagacity, saga_id: str, *, existed: bool = True) -> None:
        self.sg = sg
        # A saga new to the journal can only be waiting on gates this run opened.
        self.existed = existed
        self.saga_id = saga_id
        self.journal = sg.journal
        self._lock = threading.Lock()
        self._failure: BaseException | None = None
        self._gates: list[ApprovalRequest] = []

    # -- state shared across copied contexts ------------------------------------------------------
    @property
    def failure(self) -> BaseException | None:
        """The first tool error seen, even if the caller swallowed it."""
        with self._lock:
            return self._failure

    def latch(self, exc: BaseException) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = exc

    def gated(self, request: ApprovalRequest) -> None:
        with self._lock:
            self._gates.append(request)

    @property
    def gates(self) -> tuple[ApprovalRequest, ...]:
        with self._lock:
            return tuple(self._gates)

    # -- journaling steps -------------------------------------------------------------------------
    def begin(self, spec: ToolSpec, input: str, payload: str = "") -> int:
        """Journal INTENT (durable before the tool runs) and return its seq."""
        return self.journal.append(self.saga_id, spec.name, Phase.INTENT, input, payload).seq

    def failed(self, spec: ToolSpec, input: str, exc: BaseException) -> None:
        self.latch(exc)
        self.journal.append(self.saga_id, spec.name, Phase.FAILED, input, describe(exc))

    def _record_outcome(self, spec: ToolSpec, input: str, result: Any) -> None:
        """Journal EXECUTED with the tool's result."""
        try:
            self.journal.append(self.saga_id, spec.name, Phase.EXECUTED, input, encode_result(result))
        except BaseException as exc:
            # The effect happened but its EXECUTED is not durable: the INTENT stays open (in
            # doubt, for a human) and the saga must not carry on as if all were well.
            self.latch(exc)
            raise

    # -- calls ------------------------------------------------------------------------------------
    def call(self, spec: ToolSpec, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if spec.irreversible:
            return self.sg._approvals.gate(self, spec, input)
        seq = self.begin(spec, input)
        return self.execute(spec, seq, input, args, kwargs)

    def execute(
        self, spec: ToolSpec, seq: int, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        attempt = 1
        while True:
            try:
                with calling(ToolCall(self.saga_id, seq, spec.name, attempt)):
                    result = spec.fn(*args, **kwargs)
                    if spec.is_async:
                        result = asyncio.run(result)
            except BaseException as exc:
                delay = _retry_delay(spec, exc, attempt)
                if delay is not None:
                    time.sleep(delay)
                    attempt += 1
                    continue
                self.failed(spec, input, exc)
                raise
            self._record_outcome(spec, input, result)
            return result

    async def call_async(
        self, spec: ToolSpec, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if spec.irreversible:
            return await asyncio.to_thread(self.sg._approvals.gate, self, spec, input)
        seq = await asyncio.to_thread(self.begin, spec, input)
        return await self.execute_async(spec, seq, input, args, kwargs)

    async def execute_async(
        self, spec: ToolSpec, seq: int, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        attempt = 1
        while True:
            try:
                with calling(ToolCall(self.saga_id, seq, spec.name, attempt)):
                    result = spec.fn(*args, **kwargs)
                    if spec.is_async:
                        result = await result
            except BaseException as exc:
                delay = _retry_delay(spec, exc, attempt)
                if delay is not None:
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
                await asyncio.to_thread(self.failed, spec, input, exc)
                raise
            await asyncio.to_thread(self._record_outcome, spec, input, result)
            return result

    def begin_resume(
        self, spec: ToolSpec, request: ApprovalRequest, payload: str, resumed_by: str | None = None
    ) -> tuple[int, tuple[Any, ...], dict[str, Any]]:
        args, kwargs = spec.decode_input(payload)
        by = f" by={resumed_by}" if resumed_by else ""
        seq = self.begin(spec, payload, f"{RESUMES}{request.journal_seq}{by}")
        return seq, args, kwargs

    # -- ending -----------------------------------------------------------------------------------
    def conclude(self, value: Any, error: BaseException | None) -> SagaResult:
        """The saga's result; compensates first when the work raised or a tool failed."""
        failure = error if error is not None else self.failure
        if failure is not None:
            return self.sg._compensate(self.saga_id, describe(failure), value=value, error=failure)
        return self._settled(value)

    async def conclude_async(self, value: Any, error: BaseException | None) -> SagaResult:
        failure = error if error is not None else self.failure
        if failure is not None:
            return await self.sg._compensate_async(
                self.saga_id, describe(failure), value=value, error=failure
            )
        return await asyncio.to_thread(self._settled, value)

    def _settled(self, value: Any) -> SagaResult:
        pending = tuple(self.sg.pending_approvals(self.saga_id)) if self.existed or self.gates else ()
        status = SagaStatus.AWAITING_APPROVAL if pending else SagaStatus.COMPLETED
        return SagaResult(self.saga_id, status, value, None, (), pending)


def _retry_delay(spec: ToolSpec, exc: BaseException, attempt: int) -> float | None:
    """Seconds to wait before the next try, or None when the failure is final."""
    if spec.retry is not None and spec.retry.should_retry(exc, attempt):
        return spec.retry.delay(attempt)
    return None
