"""The facade's methods made from one another, so a signature is written once.

A twin made here keeps the parameters of the method it is made from for every reader: mypy and
IDEs through the ``ParamSpec`` (the same type an ``async def`` has), ``help()`` and
``inspect.signature`` through ``__wrapped__`` / ``__signature__``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["in_thread", "signature_of"]

S = TypeVar("S")
P = ParamSpec("P")
T = TypeVar("T")


def in_thread(
    blocking: Callable[Concatenate[S, P], T], name: str | None = None
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """The ``_async`` twin of a blocking read: the same method, run in a worker thread.

    A worker thread has no running loop, so the blocking method's refusal (meant for callers on
    a loop) does not fire there; what it raises reaches the awaiting caller. ``name``: the
    twin's, when it is not the blocking method's name with ``_async``."""
    twin_name = name or f"{blocking.__name__}_async"
    qualname = f"{blocking.__qualname__.rpartition('.')[0]}.{twin_name}".lstrip(".")
    signature = inspect.signature(blocking)

    async def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        _check(signature, qualname, self, args, kwargs)
        return await asyncio.to_thread(blocking, self, *args, **kwargs)

    twin.__wrapped__ = blocking  # type: ignore[attr-defined]
    twin.__name__ = twin_name
    twin.__qualname__ = qualname
    twin.__doc__ = (
        f"``{twin_name.removesuffix('_async')}`` for event loops: the read runs in a worker thread."
    )
    return twin


def signature_of(
    source: Callable[Concatenate[S, P], Any],
) -> Callable[[Callable[Concatenate[S, ...], T]], Callable[Concatenate[S, P], T]]:
    """Give the decorated method ``source``'s parameters (its own return type stays): for a
    method that answers the same question in another shape, e.g. a page's items. A call is
    checked against them first, so a wrong argument is named as the method's own."""

    def decorate(method: Callable[Concatenate[S, ...], T]) -> Callable[Concatenate[S, P], T]:
        returns = inspect.signature(method).return_annotation
        signature = inspect.signature(source).replace(return_annotation=returns)

        @functools.wraps(method)
        def checked(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            _check(signature, method.__qualname__, self, args, kwargs)
            return method(self, *args, **kwargs)

        checked.__signature__ = signature  # type: ignore[attr-defined]
        return checked

    return decorate


def _check(signature: inspect.Signature, qualname: str, self: Any, args: Any, kwargs: Any) -> None:
    """A wrong argument is ``TypeError`` naming the method called, as Python words it."""
    try:
        signature.bind(self, *args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{qualname}() {exc}") from None
