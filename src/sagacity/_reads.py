"""The operator's read models, derived from folded journals: what every surface shows.

The CLI, the HTTP API and the dashboard all read pending requests, decisions and a saga's detail
through the facade, which builds them here, so a fact (who approved, may it resume) is worked out
once and cannot differ between surfaces.
"""

from __future__ import annotations

from collections.abc import Iterable

from sagacity._compensation import UndoStep, undo_preview
from sagacity._state import fold
from sagacity.model import PendingApproval, SagaDetail
from sagacity.tools import ToolRegistry


def pending_at(pending: Iterable[PendingApproval], seq: int) -> PendingApproval | None:
    """The request at ``seq`` among a saga's pending ones."""
    return next((p for p in pending if p.request.journal_seq == seq), None)


def rejection_undoes(saga: SagaDetail, registry: ToolRegistry) -> list[UndoStep]:
    """What rejecting a request of ``saga`` now would compensate, in order: shown before a person
    confirms (the dashboard's dialog, ``approvals show``, ``GET /requests``)."""
    return undo_preview(fold(saga.saga_id, saga.entries), registry)
