"""Sagacity: the saga pattern for AI agents.

Every tool call in a saga is journaled in an append-only SHA-256 hash chain; on failure the
declared compensations run in reverse; irreversible tools wait for a named human; the journal can
be exported and verified by anyone.
"""

from __future__ import annotations

from sagacity._context import ToolCall, acting_as, allow_irreversible, current_call, in_current_saga
from sagacity._doctor import Diagnosis, Finding, FindingKind
from sagacity._sagacity import Sagacity, SagaScope
from sagacity.chain import Verification
from sagacity.errors import SagacityError
from sagacity.model import (
    ApprovalDecision,
    ApprovalGate,
    ApprovalRequest,
    CallStatus,
    CallView,
    CompensationContext,
    CompensationOutcome,
    CompensationStep,
    Entry,
    InDoubtCall,
    JournaledDecision,
    PendingApproval,
    Phase,
    Reversibility,
    SagaDetail,
    SagaResult,
    SagaStatus,
    SagaSummary,
    SagaView,
)
from sagacity.tools import Retry, Tool, tool

__version__ = "0.1.0"

__all__ = [
    "ApprovalDecision",
    "ApprovalGate",
    "ApprovalRequest",
    "CallStatus",
    "CallView",
    "CompensationContext",
    "CompensationOutcome",
    "CompensationStep",
    "Diagnosis",
    "Entry",
    "Finding",
    "FindingKind",
    "InDoubtCall",
    "JournaledDecision",
    "PendingApproval",
    "Phase",
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
    "Verification",
    "__version__",
    "acting_as",
    "allow_irreversible",
    "current_call",
    "in_current_saga",
    "tool",
]

for _name in __all__:
    _obj = globals()[_name]
    if hasattr(_obj, "__module__") and _name != "__version__":
        _obj.__module__ = "sagacity"
del _name, _obj
