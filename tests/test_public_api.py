"""Pins the public API: what ``from sagacity import *`` gives is deliberate, sorted and complete."""

from __future__ import annotations
import __future__

import types

import sagacity

#: The public names at the time this pin was last updated. Adding or removing an export is an API
#: change: update this list in the same commit (and CHANGELOG.md).
EXPECTED_ALL = [
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


def _public_names() -> set[str]:
    """Names the package namespace exposes, minus submodules and ``from __future__`` features."""
    return {
        name
        for name in dir(sagacity)
        if not name.startswith("_")
        and not isinstance(getattr(sagacity, name), types.ModuleType | __future__._Feature)
    }


def test_all_is_sorted() -> None:
    """``__all__`` is kept sorted, so a diff shows exactly what was added or removed."""
    assert sagacity.__all__ == sorted(sagacity.__all__)


def test_all_lists_every_public_name() -> None:
    """Every public name in the package is exported and every export exists."""
    exported = set(sagacity.__all__) - {"__version__"}
    public = _public_names()
    assert exported == public, (
        f"not in __all__: {sorted(public - exported)}; "
        f"in __all__ but not defined: {sorted(exported - public)}"
    )


def test_all_matches_the_pinned_list() -> None:
    """``__all__`` equals the pinned list; a change to the public API must update the pin on purpose."""
    added = sorted(set(sagacity.__all__) - set(EXPECTED_ALL))
    removed = sorted(set(EXPECTED_ALL) - set(sagacity.__all__))
    assert (added, removed) == ([], []), (
        f"sagacity.__all__ changed: added {added}, removed {removed}. If intended, update "
        "EXPECTED_ALL in tests/test_public_api.py and note it in CHANGELOG.md."
    )


def test_exports_claim_the_package_as_their_module() -> None:
    """Every exported class or function reports ``__module__ == "sagacity"`` (docs, pickles, reprs)."""
    wrong = {
        name: getattr(sagacity, name).__module__
        for name in sagacity.__all__
        if name != "__version__" and getattr(getattr(sagacity, name), "__module__", "sagacity") != "sagacity"
    }
    assert not wrong, f"exports whose __module__ is not 'sagacity': {wrong}"


def test_version_is_a_string() -> None:
    """``__version__`` is exported as a plain version string."""
    assert isinstance(sagacity.__version__, str)
    assert sagacity.__version__.count(".") >= 2
