"""One protocol, two shells: an operation is written once and driven from sync or async code.

A runtime operation (reject, recover, a compensation run, ...) is a generator. Its journal I/O is
plain blocking code; whenever it needs *user code* run (a compensation), it yields an
:class:`Invoke` and receives an :class:`Outcome`. :func:`drive` runs it in the calling thread (an
``async def`` compensation gets an event loop of its own); :func:`drive_async` runs each stretch of
journal I/O in a worker thread and awaits user code on the caller's loop, so async compensations
share the application's loop, clients and context. The protocol exists once; the shells are a
dozen lines each (the sans-I/O idea of h11 and httpcore, at the size Sagacity needs).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Invoke:
    """Run ``fn(*args)`` (sync or async) and send back how it went."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What user code returned, or the ``Exception`` it raised."""

    value: Any = None
    error: Exception | None = None


Operation = Generator[Invoke, Outcome, T]


def drive(operation: Operation[T]) -> T:
    """Run ``operation`` to its end in this thread."""
    outcome: Outcome | None = None
    while True:
        try:
            effect = operation.send(outcome)  # type: ignore[arg-type]  # None primes the generator
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            value = effect.fn(*effect.args)
            if inspect.isawaitable(value):
                value = asyncio.run(_await(value))
        except Exception as exc:  # noqa: BLE001 - the operation journals it and decides
            outcome = Outcome(error=exc)
        else:
            outcome = Outcome(value)


async def drive_async(operation: Operation[T]) -> T:
    """Run ``operation`` to its end from a coroutine, never blocking the event loop.

    Shielded: once started, an operation is finished even if the awaiting task is cancelled
    (a decision or a compensation is never left half-made); the cancellation is re-raised then.
    """
    return await finish_shielded(_drive_async(operation))


async def _drive_async(operation: Operation[T]) -> T:
    outcome: Outcome | None = None
    while True:
        done, item = await asyncio.to_thread(_step, operation, outcome)
        if done:
            return item  # type: ignore[no-any-return]
        effect: Invoke = item
        try:
            value = effect.fn(*effect.args)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:  # noqa: BLE001 - the operation journals it and decides
            outcome = Outcome(error=exc)
        else:
            outcome = Outcome(value)


def _step(operation: Operation[T], outcome: Outcome | None) -> tuple[bool, Any]:
    """One ``send``; StopIteration cannot cross a thread's future, so its value is returned."""
    try:
        return False, operation.send(outcome)  # type: ignore[arg-type]
    except StopIteration as stop:
        return True, stop.value


async def finish_shielded(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` to its end even if this task is cancelled meanwhile, then re-raise
    the cancellation (so ``asyncio.timeout`` and TaskGroups still see it)."""
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.done():
                raise  # the inner work itself was cancelled, not only this wait
            cancelled = exc
            continue
        break
    if cancelled is not None:
        raise cancelled
    return result


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable
