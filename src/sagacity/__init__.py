"""Sagacity: the saga pattern for AI agents.

Every tool call in a saga is journaled in an append-only SHA-256 hash chain; on failure the
declared compensations run in reverse; irreversible tools wait for a named human; the journal can
be exported and verified by anyone.
"""

from __future__ import annotations

import typing as _typing

from sagacity._version import __version__

__all__ = [
    "ApprovalDecision",
    "ApprovalGate",
    "ApprovalPage",
    "ApprovalRequest",
    "CallStatus",
    "CallView",
    "CompensationContext",
    "CompensationOutcome",
    "CompensationStep",
    "CompensationView",
    "Diagnosis",
    "EffectAudit",
    "EffectVerdict",
    "Entry",
    "Finding",
    "FindingKind",
    "InDoubtCall",
    "JournaledDecision",
    "PendingApproval",
    "Phase",
    "ReconcileContext",
    "Reconciled",
    "Reconciliation",
    "Retry",
    "Reversibility",
    "SagaDetail",
    "SagaResult",
    "SagaScope",
    "SagaStatus",
    "SagaSummary",
    "SagaView",
    "Sagacity",
    "SagacityError",
    "Tool",
    "ToolCall",
    "UndoStep",
    "Verification",
    "__version__",
    "acting_as",
    "allow_irreversible",
    "current_call",
    "in_current_saga",
    "tool",
]

#: Where each public name is defined. The names are imported on first use (PEP 562), so a
#: program that imports only a submodule (the ``sagacity`` command's ``--help``, for one) does
#: not pay for the whole library; the first public name asked for imports all of them, so every
#: export reports ``__module__ == "sagacity"`` whichever was asked for first.
_WHERE = {
    "ToolCall": "sagacity._context",
    "acting_as": "sagacity._context",
    "allow_irreversible": "sagacity._context",
    "current_call": "sagacity._context",
    "in_current_saga": "sagacity._context",
    "Diagnosis": "sagacity.doctor",
    "Finding": "sagacity.doctor",
    "FindingKind": "sagacity.model",
    "Sagacity": "sagacity._sagacity",
    "SagaScope": "sagacity._sagacity",
    "Verification": "sagacity.chain",
    "SagacityError": "sagacity.errors",
    "ApprovalDecision": "sagacity.model",
    "ApprovalGate": "sagacity.model",
    "CallStatus": "sagacity.model",
    "CallView": "sagacity.model",
    "ApprovalRequest": "sagacity.model",
    "CompensationContext": "sagacity.model",
    "CompensationOutcome": "sagacity.model",
    "CompensationStep": "sagacity.model",
    "CompensationView": "sagacity.model",
    "Entry": "sagacity.model",
    "EffectAudit": "sagacity.model",
    "EffectVerdict": "sagacity.model",
    "ReconcileContext": "sagacity.model",
    "Reconciled": "sagacity.model",
    "Reconciliation": "sagacity.model",
    "InDoubtCall": "sagacity.model",
    "JournaledDecision": "sagacity.model",
    "ApprovalPage": "sagacity.model",
    "PendingApproval": "sagacity.model",
    "Phase": "sagacity.model",
    "Reversibility": "sagacity.model",
    "SagaDetail": "sagacity.model",
    "SagaResult": "sagacity.model",
    "SagaStatus": "sagacity.model",
    "SagaSummary": "sagacity.model",
    "SagaView": "sagacity.model",
    "UndoStep": "sagacity.model",
    "Retry": "sagacity.tools",
    "Tool": "sagacity.tools",
    "tool": "sagacity.tools",
}

if _typing.TYPE_CHECKING:
    from sagacity._context import ToolCall, acting_as, allow_irreversible, current_call, in_current_saga
    from sagacity._sagacity import Sagacity, SagaScope
    from sagacity.chain import Verification
    from sagacity.doctor import Diagnosis, Finding
    from sagacity.errors import SagacityError
    from sagacity.model import (
        ApprovalDecision,
        ApprovalGate,
        ApprovalPage,
        ApprovalRequest,
        CallStatus,
        CallView,
        CompensationContext,
        CompensationOutcome,
        CompensationStep,
        CompensationView,
        EffectAudit,
        EffectVerdict,
        Entry,
        FindingKind,
        InDoubtCall,
        JournaledDecision,
        PendingApproval,
        Phase,
        ReconcileContext,
        Reconciled,
        Reconciliation,
        Reversibility,
        SagaDetail,
        SagaResult,
        SagaStatus,
        SagaSummary,
        SagaView,
        UndoStep,
    )
    from sagacity.tools import Retry, Tool, tool


def __getattr__(name: str) -> _typing.Any:
    """Import the public API on first use of any of its names (PEP 562)."""
    if name not in _WHERE:
        # Not ours: ``from sagacity import chain`` then imports the submodule.
        raise AttributeError(f"module 'sagacity' has no attribute {name!r}")
    import importlib

    for public, module in _WHERE.items():
        obj = getattr(importlib.import_module(module), public)
        obj.__module__ = "sagacity"
        globals()[public] = obj
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
