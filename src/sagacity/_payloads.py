"""The journal's payload formats: how each line Sagacity writes into an entry is written and read.

Pure text in, text out. Every writer (the saga, approvals, compensation, recovery, guardrails)
and the fold (:mod:`sagacity._state`) take these spellings from here, so what is written is what
is read (docs/journal.md documents each of them):

* tool names of Sagacity's own entries (``saga``, ``approval-gate``, ``sagacity:saga``);
* the INTENT and gate payload lines ``compensates seq=``, ``resumes seq=``, ``call_id=``,
  ``on_reject=``, ``requester=``, ``requester_may_not_approve=``, ``approvals=``,
  ``definition=`` (:func:`call_payload`, :func:`payload_attribute`);
* the FAILED prefixes that are no failure (``control flow: ``, ``denied by policy: ``);
* a compensation's outcome payload (``compensated effect seq=<n>``);
* decisions: their input (``{"seq":n,"inputHash":h}``, ``{"seq":n,"resolution":...}``) and
  payload (``approver=``, ``reason=``, one line each: :func:`decision_payload`);
* a saga's start facts and END payload (:func:`start_input`, :func:`end_payload`);
* a reconciler's resolution payload (``reconciler=``, ``evidence=``) and an effect audit's entries
  on their own chain, ``sagacity:audit`` (:func:`reconciler_payload`, :func:`audit_row`).
"""

from __future__ import annotations

import hashlib
import json
import re

from sagacity._json import ESCAPED_PREFIX
from sagacity.errors import InvalidValueError
from sagacity.model import Phase, SagaStatus

#: tool_name of saga-level entries (start and end of compensation).
SAGA_TOOL = "saga"
#: tool_name of decision entries (SPEC §2).
GATE_TOOL = "approval-gate"
#: tool_name of a saga's START (INTENT, seq 1) and END (EXECUTED) entries.
LIFE_TOOL = "sagacity:saga"
#: Names no user tool may take, and the prefix of every name reserved for Sagacity's own entries.
RESERVED_TOOL_NAMES = frozenset({SAGA_TOOL, GATE_TOOL})
RESERVED_PREFIX = "sagacity:"
#: What ``recover`` does with an abandoned saga (journaled in its start facts).
ON_ABANDON_COMPENSATE = "compensate"
ON_ABANDON_REPORT = "report"
ON_ABANDON = (ON_ABANDON_COMPENSATE, ON_ABANDON_REPORT)

#: The reserved saga an effect audit journals its findings on (tool ``saga``, EXECUTED).
AUDIT_SAGA = "sagacity:audit"

COMPENSATES = "compensates seq="
RESUMES = "resumes seq="
#: A payload line naming the agent framework's id of the call.
CALL_ID = "call_id="
#: A gate payload line: what a rejection of it means (``continue``: tell the model, go on).
ON_REJECT = "on_reject="
ON_REJECT_CONTINUE = "continue"
#: A gate payload line: the principal on whose behalf the gated call was made (who asked).
REQUESTER = "requester="
#: A gate payload line: the separation-of-duties rule journaled with the gate (``true``: the
#: requester may not approve it), so every process enforces the same rule, tool imported or not.
REQUESTER_MAY_NOT_APPROVE = "requester_may_not_approve="
#: A gate and INTENT payload line: ``sha256:<hex>`` of the tool's definition (name, description,
#: input schema) the gate was made, or the call was sent, under.
DEFINITION_LINE = "definition="
APPROVALS_LINE = "approvals="
#: Prefix of a FAILED payload that is the framework's control flow, not a failure.
CONTROL_FLOW = "control flow: "
#: Prefix of the FAILED that closes a call the guardrails policy denied: it never ran, it is not
#: a failure (the model is told why), nothing is to compensate.
DENIED = "denied by policy: "
#: FAILED payload prefixes that close a call without it being a failure of the saga.
NOT_FAILURES = (CONTROL_FLOW, DENIED)
#: A gate payload line of a policy hold: ``verdict=hold rule=<id> approvals=<n> ...``.
_HOLD_APPROVALS = re.compile(r"^verdict=hold rule=\S+ approvals=(\d+)", re.MULTILINE)
#: The tool's own number of approvers, journaled on its gate when it needs more than one.
_GATE_APPROVALS = re.compile(r"^approvals=(\d+)$", re.MULTILINE)
#: The executed seq a COMPENSATED or COMPENSATION_FAILED payload names.
EFFECT_SEQ = re.compile(r"effect seq=(\d+)")


def sha256_hex(text: str) -> str:
    """SHA-256 of the UTF-8 bytes, lowercase hex: the approval request's ``input_hash``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compensated_payload(executed_seq: int) -> str:
    return f"compensated effect seq={executed_seq}"


def compensation_failed_payload(executed_seq: int, error: str) -> str:
    return f"compensation of effect seq={executed_seq} failed: {error}"


def decision_input(seq: int, input_hash: str) -> str:
    return json.dumps({"seq": seq, "inputHash": input_hash}, separators=(",", ":"))


def require_on_abandon(on_abandon: str) -> str:
    """``compensate`` or ``report``, else ``InvalidValueError`` naming both."""
    if on_abandon not in ON_ABANDON:
        raise InvalidValueError(
            f"on_abandon must be {ON_ABANDON_COMPENSATE!r} or {ON_ABANDON_REPORT!r}, not {on_abandon!r}"
        )
    return on_abandon


def start_input(on_abandon: str, principal: str | None) -> str:
    """A saga's start facts, the input of its START and END entries (compact JSON, fixed order)."""
    facts = {"onAbandon": on_abandon}
    if principal is not None:
        facts["principal"] = principal
    return json.dumps(facts, separators=(",", ":"), ensure_ascii=False)


def start_principal(start_input: str) -> str | None:
    """The principal a START's input names (None: none, or not readable)."""
    try:
        facts = json.loads(start_input)
    except ValueError:
        return None
    principal = facts.get("principal") if isinstance(facts, dict) else None
    return principal if isinstance(principal, str) and principal else None


def end_payload(status: SagaStatus) -> str:
    """The payload of a saga's END entry: how it ended."""
    return json.dumps({"status": str(status)}, separators=(",", ":"))


def resolution_input(seq: int, outcome: Phase) -> str:
    return json.dumps({"seq": seq, "resolution": str(outcome)}, separators=(",", ":"))


#: Characters that end a line for some reader or are not text at all: C0 and C1 controls (line
#: feed, carriage return, vertical tab, form feed, the separators U+001C-U+001E, NEL U+0085: all
#: of them end a line for ``str.splitlines``), DEL, the Unicode line and paragraph separators
#: (which end a line in JavaScript) and unpaired surrogates (no store can hold them). A name or a
#: person's note holding one could add a line, and a line is a field, to a decision's payload.
NOT_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_APPROVER = "approver="
_REASON = "reason="
#: A gate held by a policy rule journals ``verdict=hold rule=<id> ...`` (guardrails._verdict).
HOLD_VERDICT = "verdict=hold rule="
_VIA = "via="
#: The channels a decision can be taken from besides the library, the CLI, HTTP and the
#: dashboard (which write no ``via=`` line): an approval message's buttons or link.
CHANNELS = frozenset({"slack", "email"})
#: A resolution a reconciler made: its name, then what it saw (in place of approver and reason).
RECONCILER = "reconciler="
EVIDENCE = "evidence="
#: How a reconciler's name reads where a resolver's identity is shown (``CallView.resolved_by``).
RECONCILER_PREFIX = "reconciler:"
_VERDICT_LINES = "\npolicy="  # a policy verdict's first line, after a refused resume's reason


def one_line(field: str, text: str) -> str:
    """``text`` if it is one line of storable text; else ``InvalidValueError`` naming what is in it."""
    if not isinstance(text, str):
        raise InvalidValueError(f"{field} must be a str, not {type(text).__name__}")
    found = NOT_ONE_LINE.search(text)
    if found is not None:
        raise InvalidValueError(
            f"{field} must be one line of text without control characters or line separators, "
            f"but it holds U+{ord(found.group()):04X} at index {found.start()}: a line break in a "
            f"decision's payload could add a field to it (got {text!r})"
        )
    return text


def as_line(text: str) -> str:
    """``text`` as one storable line: itself, or escaped as :func:`decision_payload` does."""
    if NOT_ONE_LINE.search(text) is None and not text.startswith(ESCAPED_PREFIX):
        return text
    return _quoted(text)


def unescaped(text: str) -> str:
    """The text :func:`as_line` was given."""
    if text.startswith(ESCAPED_PREFIX):
        try:
            decoded = json.loads(text[len(ESCAPED_PREFIX) :])
        except ValueError:
            return text
        if isinstance(decoded, str):
            return decoded
    return text


def held_approvals(payload: str) -> int:
    """The approvals a gate says it needs (0: it does not say): the tool's four-eyes number
    (``approvals=<n>``) or a policy hold's, the larger. Read from the gate, so a process that has
    not imported the tool counts them as the one that made the gate did."""
    if "approvals=" not in payload:
        return 0
    own = _GATE_APPROVALS.search(payload)
    hold = _HOLD_APPROVALS.search(payload) if "verdict=hold" in payload else None
    return max(int(found.group(1)) if found is not None else 0 for found in (own, hold))


def required_reason(text: str) -> str:
    """Why a person rejects: one line of text that is not blank, stripped. The CLI, the HTTP API
    and the dashboard require one; a rejection nobody can explain later is no evidence."""
    one_line("reason", text)
    if not text.strip():
        raise InvalidValueError("a reason is required to reject: say why, in one line")
    return text.strip()


def _quoted(text: str) -> str:
    """``text`` as the escape prefix and a JSON string literal that is one line of storable text."""
    literal = json.dumps(text, ensure_ascii=False)  # escapes C0 controls, quotes and backslashes
    return ESCAPED_PREFIX + NOT_ONE_LINE.sub(lambda m: f"\\u{ord(m.group()):04x}", literal)


def call_payload(
    first: str,
    call_id: str | None,
    on_reject: str = "",
    *,
    requester: str | None = None,
    requester_may_not_approve: bool = False,
    approvals: int = 1,
    definition: str = "",
    extra: str = "",
) -> str:
    """An INTENT or AWAITING_APPROVAL payload: ``first`` (may be empty), then the call id, the
    rejection policy, the requester, the separation rule and the tool's approvals (more than one)
    as ``key=value`` lines (the last four only on a gate; the requester is an identity, one line,
    checked by the caller), then ``extra`` lines (a guardrails policy's verdict)."""
    lines = [first] if first else []
    if call_id is not None:
        lines.append(f"{CALL_ID}{call_id}")
    if on_reject:
        lines.append(f"{ON_REJECT}{on_reject}")
    if requester:
        lines.append(f"{REQUESTER}{one_line('requester', requester)}")
    if requester_may_not_approve:
        lines.append(f"{REQUESTER_MAY_NOT_APPROVE}true")
    if approvals > 1:
        lines.append(f"{APPROVALS_LINE}{approvals}")
    if definition:
        lines.append(f"{DEFINITION_LINE}{definition}")
    if extra:
        lines.append(extra)
    return "\n".join(lines)


def payload_attribute(payload: str, key: str) -> str | None:
    """The value of the payload line ``key=value``, if there is one."""
    if key not in payload:  # the common case: a payload without attributes, no split
        return None
    for line in payload.split("\n"):
        if line.startswith(key):
            return line[len(key) :]
    return None


def decision_payload(approver: str, reason: str = "", via: str = "") -> str:
    """``approver=<identity>``, then ``via=<channel>`` (a decision taken from a message), then
    ``reason=<text>``, one per line: never a line more.

    Nothing in any value can add a line, so a reader splitting the payload into lines always
    finds at most one ``approver=`` and it is the one the library was given:

    * ``approver`` is a name and must be one line (``InvalidValueError`` otherwise).
    * ``via`` is one of :data:`CHANNELS` (the caller checks, :func:`require_channel`); it is
      written only with an approver, and only when the decision came from a message.
    * A reason given *with* an approver is what that person typed: it must be one line too, and
      ``InvalidValueError`` is raised before anything is journaled. It is journaled verbatim.
    * A reason the library writes on its own (no approver: an expiry, a void, a payload
      mismatch) quotes things that already happened, such as a tool's error message, and cannot
      be refused. When it holds a character of :data:`NOT_ONE_LINE` (or starts with the escape
      prefix) it is journaled as ``reason=sagacity-escaped:"<JSON string literal>"``, one line,
      and :func:`parse_decision_payload` gives the original back.
    """
    lines = [_APPROVER + one_line("approver", approver)] if approver else []
    if via and approver:
        lines.append(_VIA + require_channel(via))
    if reason:
        if approver:
            one_line("reason", reason)
        elif NOT_ONE_LINE.search(reason) is not None or reason.startswith(ESCAPED_PREFIX):
            reason = _quoted(reason)
        lines.append(_REASON + reason)
    return "\n".join(lines)


def require_channel(via: str) -> str:
    """``via`` if it names a channel a decision can come from, else ``InvalidValueError``."""
    if via not in CHANNELS:
        raise InvalidValueError(f"via must be one of {', '.join(sorted(CHANNELS))}, not {via!r}")
    return via


def decision_channel(payload: str) -> str | None:
    """The channel a decision entry names on its second line (``via=slack``), if any."""
    first, _, rest = payload.partition("\n")
    if not first.startswith(_APPROVER) or not rest.startswith(_VIA):
        return None
    return rest.partition("\n")[0].removeprefix(_VIA)


def reconciler_payload(name: str, evidence: str) -> str:
    """A reconciler's resolution: ``reconciler=<name>`` and ``evidence=<what it saw>``, one line
    each (either escaped as :func:`as_line` does when it is not one line of text)."""
    return f"{RECONCILER}{as_line(name)}\n{EVIDENCE}{as_line(evidence)}"


def audit_row(saga_id: str, seq: int, tool_name: str, effect: str) -> str:
    """The input of an audit entry: the effect it checked, as compact JSON."""
    return json.dumps(
        {"sagaId": saga_id, "seq": seq, "toolName": tool_name, "effect": effect},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def audit_payload(verdict: str, reconciler: str, evidence: str, auditor: str) -> str:
    """The payload of an audit entry: the verdict, who checked (the reconciler, empty: none), what
    it saw or why nothing could check, and who ran the audit; one line each."""
    return (
        f"verdict={verdict}\n{RECONCILER}{as_line(reconciler)}\n{EVIDENCE}{as_line(evidence)}"
        f"\nauditor={as_line(auditor)}"
    )


def parse_decision_payload(payload: str) -> tuple[str, str]:
    """(approver, reason) from a decision entry's payload.

    A reconciler's resolution reads as (``reconciler:<name>``, its evidence).

    The approver is the first line's, and only the first line's: a journal written before reasons
    were kept to one line may hold a reason with line breaks, some reading ``approver=...``; they
    are part of the reason. An escaped reason is unescaped.
    """
    if payload.startswith(RECONCILER):
        name, _, evidence = payload.partition("\n")
        return (
            RECONCILER_PREFIX + unescaped(name.removeprefix(RECONCILER)),
            unescaped(evidence.removeprefix(EVIDENCE)),
        )
    approver, _, rest = payload.partition("\n") if payload.startswith(_APPROVER) else ("", "", payload)
    if approver and rest.startswith(_VIA):  # the channel's line, never part of the reason
        rest = rest.partition("\n")[2]
    rest = rest.partition(_VERDICT_LINES)[0]  # a policy's refusal: its verdict follows the reason
    return approver.removeprefix(_APPROVER), unescaped(rest.removeprefix(_REASON))
