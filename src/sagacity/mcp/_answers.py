"""What the agent reads: every answer the proxy writes itself, as an ordinary tool result.

Nothing the proxy decides is a protocol error: a held call, a failure with its compensation, an
unknown outcome, a refusal are all ``CallToolResult`` s the model can read and act on. Answers
that are not the upstream tool's own output are text, and either not errors (a held call: it did
not fail) or ``isError`` (the call did not do what was asked). A held tool is listed without its
output schema (see :func:`present_tool`), so an SDK client accepts the text answer.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from sagacity.mcp._policy import Decision, ToolKind
from sagacity.model import CompensationOutcome, SagaResult, SagaStatus

__all__ = [
    "HELD_NOTE",
    "awaiting",
    "failed",
    "in_doubt",
    "present_tool",
    "refused",
    "running",
    "text",
    "upstream_result",
]

#: Appended to a held tool's description, so the model knows before it calls.
HELD_NOTE = (
    "Sagacity: every call of this tool waits until a person approves its exact arguments. You get an "
    "answer saying so; once approved, call sagacity_status (or send the same call again with the "
    "same arguments) to have it run and see its result. It runs at most once in a task: sent again "
    "after it ran, the same call answers with that result."
)

#: ``_meta`` keys the proxy adds to the tools it lists.
KIND_META_KEY = "io.sagacity/kind"
OUTPUT_SCHEMA_META_KEY = "io.sagacity/outputSchema"
_SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"


def text(
    message: str, *, error: bool = False, structured: dict[str, Any] | None = None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=error, structured_content=structured
    )


def refused(message: str) -> types.CallToolResult:
    """The call was not made (nothing was journaled or sent)."""
    return text(f"[NOT RUN] {message}", error=True)


def upstream_result(wire: dict[str, Any]) -> types.CallToolResult:
    """The upstream's own result, as journaled, back in the wire type."""
    return types.CallToolResult.model_validate(wire, by_name=False)


def present_tool(tool: types.Tool, decision: Decision, *, may_hold: bool = False) -> types.Tool:
    """The upstream tool as the agent sees it through the proxy.

    A held tool (irreversible, or ``may_hold``: one a guardrails rule may hold or deny) loses its
    output schema: its first answer may be the proxy's "awaiting approval" or refusal text, which
    an SDK client would otherwise reject for not matching the schema. The schema stays readable
    under ``_meta["io.sagacity/outputSchema"]``.
    """
    meta = dict(tool.meta or {})
    meta[KIND_META_KEY] = decision.kind.value
    update: dict[str, Any] = {"meta": meta}
    if may_hold and tool.output_schema is not None:
        meta[OUTPUT_SCHEMA_META_KEY] = tool.output_schema
        update["output_schema"] = None
    if decision.kind is ToolKind.IRREVERSIBLE:
        if tool.output_schema is not None:
            meta[OUTPUT_SCHEMA_META_KEY] = tool.output_schema
            update["output_schema"] = None
        update["description"] = f"{tool.description}\n\n{HELD_NOTE}" if tool.description else HELD_NOTE
    return tool.model_copy(update=update)


def _approvals(approvers: tuple[str, ...], required: int) -> str:
    who = f": {', '.join(approvers)}" if approvers else ""
    return f"{len(approvers)} of {required} approval{'s' if required != 1 else ''}{who}"


def awaiting(
    saga_id: str,
    seq: int,
    tool_name: str,
    required: int,
    approvers: tuple[str, ...] = (),
    *,
    again: bool = False,
) -> types.CallToolResult:
    """The call is held for approval (not an error: nothing failed)."""
    lead = (
        "is still waiting for approval"
        if again
        else "did not run: it waits until a person approves these exact arguments"
    )
    message = (
        f"[AWAITING_APPROVAL] {tool_name} {lead} (saga {saga_id!r}, request {seq}; "
        f"{_approvals(approvers, required)}). Tell the user it is waiting for approval. To have it run "
        "once approved and see its result, call sagacity_status, or send this same call again with the "
        "same arguments (it runs once; other arguments make a new request that needs its own approval). "
        "An approver "
        f"runs: sagacity approvals approve {_shell(saga_id)} {seq} (or uses the Sagacity dashboard)."
    )
    return text(message)


def _shell(value: str) -> str:
    return value if value.replace("-", "").replace("_", "").isalnum() else json.dumps(value)


def _report(result: SagaResult) -> str:
    undone = [s for s in result.report if s.outcome is CompensationOutcome.COMPENSATED]
    failed_steps = [s for s in result.report if s.outcome is CompensationOutcome.COMPENSATION_FAILED]
    parts = []
    if undone:
        parts.append("undone, newest first: " + ", ".join(f"{s.tool_name} (seq {s.seq})" for s in undone))
    if failed_steps:
        parts.append(
            "COULD NOT UNDO (still in effect, a person must look): "
            + "; ".join(f"{s.tool_name} (seq {s.seq}): {s.error}" for s in failed_steps)
        )
    if not parts:
        parts.append("nothing needed undoing")
    return "; ".join(parts)


def compensation(result: SagaResult) -> str:
    """How a saga's compensation went, in a sentence."""
    status = result.status
    if status in (SagaStatus.COMPENSATED, SagaStatus.REJECTED):
        return f"Saga {result.saga_id!r} was rolled back ({_report(result)})."
    if status is SagaStatus.COMPENSATION_FAILED:
        return f"Saga {result.saga_id!r} could not be fully rolled back ({_report(result)})."
    if status is SagaStatus.IN_DOUBT:
        return (
            f"Saga {result.saga_id!r} stopped rolling back: a step's outcome is unknown and a person "
            f"must resolve it ({_report(result)})."
        )
    return f"Saga {result.saga_id!r} is {status.value} ({_report(result)})."


def failed(tool_name: str, error: str, result: SagaResult, *, new_saga: bool) -> types.CallToolResult:
    """The call failed and its saga was compensated."""
    after = " Your next call starts a new saga." if new_saga else " Start a new saga id for further work."
    return text(f"[FAILED] {tool_name} failed: {error}. {compensation(result)}{after}", error=True)


def in_doubt(saga_id: str, seq: int, tool_name: str, reason: str, *, new_saga: bool) -> types.CallToolResult:
    """The call was sent and its outcome is unknown."""
    after = " Your next call starts a new saga." if new_saga else " Use a new saga id for further work."
    return text(
        f"[OUTCOME UNKNOWN] {tool_name} was sent to the upstream server but no answer came back "
        f"({reason}). It may or may not have taken effect, so it is NOT retried: do not call it again "
        f"to check. A person must look at the upstream system and resolve it (saga {saga_id!r}, seq {seq}: "
        f"sagacity sagas resolve {_shell(saga_id)} {seq} --happened|--did-not-happen).{after}",
        error=True,
    )


def running(saga_id: str) -> types.CallToolResult:
    """A living process runs a call of the saga right now: nothing was refused, ask again later."""
    return text(
        f"[RUNNING] saga {saga_id!r} has a call running right now in another request or process. "
        "Nothing was done or refused here, and nothing is in doubt: send the call again (or call "
        "sagacity_status) once it has ended.",
        error=True,
    )
