"""What the adapters share: the settings each takes and how ``saga_id=`` is read.

Private to ``sagacity.integrations``: each adapter's class is its public face (documented in
docs/integrations/). One copy of the settings and of the reading of ``saga_id=`` keeps the
adapters from coming to disagree on either. Built on the public package alone.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Generic, Literal, TypeVar

from sagacity import Sagacity, SagaScope
from sagacity.framework import current_saga_id
from sagacity.tools import ToolRegistry

#: What the framework hands a hook (a run context, a tool-call request): where a saga id is read.
Ctx = TypeVar("Ctx")


def named_saga(source: str | Callable[[Ctx], str] | None, ctx: Ctx) -> str | None:
    """The saga id ``saga_id=`` gives for ``ctx``: the id itself, or the function's answer for it;
    None when it was not given (the adapter then looks to its framework's own id, or refuses)."""
    if isinstance(source, str):
        return source
    return source(ctx) if source is not None else None


class Adapter(Generic[Ctx]):
    """An adapter's settings, as its constructor takes them: ``saga_id`` (an id, or a function of
    the framework's context), ``on_reject`` (what a rejected gate means), ``wait`` (seconds a
    duplicate presented in this process waits for the first), ``registry`` (where tools are found by name; the
    Sagacity instance's by default)."""

    def __init__(
        self,
        sagacity: Sagacity,
        *,
        saga_id: str | Callable[[Ctx], str] | None = None,
        on_reject: Literal["compensate", "continue"] = "compensate",
        wait: float = 60.0,
        registry: ToolRegistry | None = None,
    ) -> None:
        super().__init__()
        self.sagacity = sagacity
        self.saga_id = saga_id
        self.on_reject = on_reject
        self.wait = wait
        self.registry = registry

    def _saga_id(self, ctx: Ctx) -> str:
        """The saga a call made outside any live saga runs in (each adapter says where it looks)."""
        raise NotImplementedError

    def _saga(self, ctx: Ctx) -> nullcontext[None] | SagaScope:
        """The live saga if there is one (nothing to enter), else the adapter's, entered for the
        call (sync or async) and continued if it exists."""
        if current_saga_id() is not None:
            return nullcontext()
        return self.sagacity.saga(self._saga_id(ctx), continue_existing=True)
