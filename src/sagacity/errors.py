"""Every exception Sagacity raises, in one tree.

::

    SagacityError
    ├── ConfigurationError          bad URL, unknown scheme, missing extra, bad option
    │   └── PolicyError             a policy file does not parse or validate (names the line)
    ├── InvalidValueError           (also ValueError) a value no journal can hold, bad arguments
    ├── StoreError                  the database failed; the driver's error is chained (``from``)
    │   ├── StoreUnavailableError   connection refused or lost and not recovered within the bound
    │   │   └── StoreWriteRefusedError  the database reads but refuses writes (a full disk)
    │   └── AppendConflictError     every retry of an append lost the race; nothing was written
    ├── SagaNotFoundError           (also LookupError) no entries for that saga id
    ├── ToolError
    │   ├── ToolRegistrationError   a different function under a name already taken
    │   ├── UnknownToolError        (also LookupError) a journal names a tool not imported here
    │   └── IrreversibleToolError   an IRREVERSIBLE tool called outside a saga
    ├── SagaStateError              the saga is not in a state that allows the call
    │   ├── SagaClosedError         its compensation started (maybe in another process): no new call
    │   ├── SagaExistsError         a saga started under an id that already has a journal
    │   ├── SagaRunningElsewhereError  a living process is still running that call: try again later
    │   └── HaltedError             the kill switch (or a policy halt) refuses it; the saga compensates
    ├── BlockingCallError           (also RuntimeError) a blocking call inside a running event loop
    ├── ApprovalError
    │   ├── ApprovalNotFoundError   (also LookupError) no pending request for that saga and seq
    │   │                           (none made, or already resumed, rejected or voided)
    │   ├── ApprovalRefusedError    not approved in the journal, approved twice by one person, expired
    │   │   ├── DefinitionChangedError  the tool's definition changed since approval: held again
    │   │   └── ApproverScopeError  the approver is not among those the policy names for the gate
    │   └── PayloadMismatchError    the live payload's SHA-256 differs from the approved one
    ├── WorkflowError
    │   ├── WorkflowDefinitionError a workflow declared wrongly (caught where it is written)
    │   ├── CheckFailedError        a check before a stage failed: the run compensates
    │   └── StageOutputError        (also ValueError) a stage's input or output is not JSON
    └── CheckpointError             a checkpoint, key or bundle file is malformed or inconsistent
        ├── SignatureError          a checkpoint is not signed by the given public key
        └── JournalIntegrityError   refused to sign: a chain is broken or the journal does not
                                    extend the previous checkpoint (``.report`` says where)

Messages name the saga, seq and tool involved. Callers never see ``sqlite3`` or ``psycopg`` types:
each store translates driver errors at one boundary.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

__all__ = [
    "AppendConflictError",
    "ApprovalError",
    "ApprovalNotFoundError",
    "ApprovalRefusedError",
    "ApproverScopeError",
    "BlockingCallError",
    "CheckFailedError",
    "CheckpointError",
    "ConfigurationError",
    "DeadLetterNotFoundError",
    "DefinitionChangedError",
    "HaltedError",
    "InvalidValueError",
    "IrreversibleToolError",
    "JournalIntegrityError",
    "PayloadMismatchError",
    "PolicyError",
    "SagaClosedError",
    "SagaExistsError",
    "SagaNotFoundError",
    "SagaRunningElsewhereError",
    "SagaStateError",
    "SagacityError",
    "SignatureError",
    "StageOutputError",
    "StoreError",
    "StoreUnavailableError",
    "StoreWriteRefusedError",
    "ToolError",
    "ToolRegistrationError",
    "UnknownToolError",
    "WorkflowDefinitionError",
    "WorkflowError",
]


class SagacityError(Exception):
    """Base of every error Sagacity raises."""


class ConfigurationError(SagacityError):
    """Sagacity was set up wrongly: a bad URL, an unknown scheme, a missing optional extra."""


class PolicyError(ConfigurationError):
    """A guardrails or gateway policy is malformed; the message names the file and line."""


class InvalidValueError(SagacityError, ValueError):
    """A value that cannot be journaled or an argument out of range; nothing was written."""


class StoreError(SagacityError):
    """The database failed. The driver's exception is chained as ``__cause__``."""


class StoreUnavailableError(StoreError):
    """The database could not be reached, or the connection was lost and not recovered."""


class StoreWriteRefusedError(StoreUnavailableError):
    """The database answered but could not write (a full disk, a write error): what was being
    written may or may not be there, and waiting rarely helps, so appends give up on it sooner."""


class AppendConflictError(StoreError):
    """Every bounded retry of an append lost the race for the next seq; nothing was written."""


class SagaNotFoundError(SagacityError, LookupError):
    """No journal entries exist for the saga id."""


class ToolError(SagacityError):
    """A tool was declared or called wrongly."""


class ToolRegistrationError(ToolError):
    """A different function was registered under a tool name already taken."""


class UnknownToolError(ToolError, LookupError):
    """The journal names a tool that no imported module registered."""


class IrreversibleToolError(ToolError):
    """An IRREVERSIBLE tool was called outside a saga without an explicit opt-out."""


class SagaStateError(SagacityError):
    """The saga's journal does not allow the call (e.g. it was already compensated)."""


class SagaClosedError(SagaStateError):
    """A call was refused before its tool ran: the saga's compensation started, perhaps in
    another process (a rejected gate, ``recover``), so nothing new may begin in it."""


class SagaExistsError(SagaStateError):
    """A saga was started (``sg.run``, ``sg.saga``) under an id whose journal already has entries:
    a saga id names one run. Refused before anything is journaled or any tool runs; continue a
    saga on purpose with ``sg.saga(saga_id, continue_existing=True)``."""


class SagaRunningElsewhereError(SagaStateError):
    """The call (a resume of an approved gate, a framework's call id) is still running in a
    living process (another worker, another request of this one): nothing was done here and
    nothing was decided; ask again once it has ended. Not an ``ApprovalError``: the call was not
    refused, and it may well succeed. A saga block that this error leaves is not compensated.

    ``saga_id`` and ``seq`` name the saga and the gate (or the call's INTENT) that is running.
    """

    def __init__(self, message: str, saga_id: str = "", seq: int = 0) -> None:
        super().__init__(message)
        self.saga_id = saga_id
        self.seq = seq

    def __reduce__(self) -> tuple[type[SagaRunningElsewhereError], tuple[str, str, int]]:
        return (type(self), (str(self), self.saga_id, self.seq))


class HaltedError(SagaStateError):
    """The kill switch refuses this saga or call (halt or drain); a refused call compensates."""


class DeadLetterNotFoundError(SagacityError, LookupError):
    """A requeue named a delivery that is not a dead letter of the notifier's outbox (unknown,
    delivered, waiting to retry or already requeued): nothing was requeued."""


class ApprovalError(SagacityError):
    """An approval decision or resume was refused."""


class ApprovalNotFoundError(ApprovalError, LookupError):
    """There is no pending approval request for that saga and seq."""


class ApprovalRefusedError(ApprovalError):
    """The decision or resume is not allowed: decided already, not approved, expired or void."""


class DefinitionChangedError(ApprovalRefusedError):
    """The tool's definition (name, description, input schema) is not the one the gate was
    approved under: nothing ran, and the call is held again as request ``new_seq``."""

    def __init__(self, message: str, new_seq: int) -> None:
        super().__init__(message)
        self.new_seq = new_seq


class ApproverScopeError(ApprovalRefusedError):
    """The approver may not decide this gate: the guardrails policy names who may (a hold rule's
    ``approvers``, or ``[approvers]`` for the tool), and this identity is not among them. Nothing
    was journaled. Every surface answers it the same way (HTTP 403).

    ``allowed`` is the policy's list as written (``group:finance``, identities).
    """

    def __init__(self, message: str, allowed: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.allowed = allowed

    def __reduce__(self) -> tuple[type[ApproverScopeError], tuple[str, tuple[str, ...]]]:
        return (type(self), (str(self), self.allowed))


class PayloadMismatchError(ApprovalError):
    """The payload to resume differs (by SHA-256) from the payload that was approved."""


class BlockingCallError(SagacityError, RuntimeError):
    """A blocking facade method was called inside a running event loop; use its ``_async`` twin."""


class CheckpointError(SagacityError):
    """A checkpoint, key or bundle file is malformed, or a checkpoint's parts disagree."""


class SignatureError(CheckpointError):
    """A checkpoint carries no valid signature by the given public key: it cannot be trusted."""


class IntegrityReport(Protocol):
    """What an integrity report offers, so this ground-floor module need not import the checkpoint
    code that makes one (``sagacity.checkpoints.CheckpointReport`` is the one there is)."""

    @property
    def ok(self) -> bool: ...

    def summary(self) -> str: ...


ReportT = TypeVar("ReportT", bound=IntegrityReport)


class JournalIntegrityError(CheckpointError, Generic[ReportT]):
    """A checkpoint was refused: the journal is broken or does not extend the previous checkpoint.

    Signing such a state would launder the tampering, so nothing is signed. ``report`` (a
    ``sagacity.checkpoints.CheckpointReport``) names every saga and index found wrong.
    """

    def __init__(self, message: str, report: ReportT | None = None) -> None:
        super().__init__(message)
        self.report = report


class WorkflowError(SagacityError):
    """A workflow (``sagacity.workflows``) was declared or run wrongly."""


class WorkflowDefinitionError(WorkflowError):
    """A workflow declared wrongly: raised where it is written, before any run."""


class CheckFailedError(WorkflowError):
    """A check before a stage failed; the run's completed stages are compensated."""

    def __init__(self, message: str, *, stage: str, check: str, reason: str) -> None:
        super().__init__(message)
        self.stage = stage
        self.check = check
        self.reason = reason


class StageOutputError(WorkflowError, ValueError):
    """A stage's input or output is not JSON: refused before it is journaled as done."""
