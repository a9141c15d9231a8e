"""The guard a ``Sagacity`` with a policy holds: the policy in force, the kill switch, the meters.

Every call that enters a saga — ``@tool``, a framework adapter's journaled call, the MCP
gateway, a resume — asks :meth:`Guard.judge` first, and journals the verdict in the entry it
writes anyway (``_verdict``). Everything fails closed: a policy that does not parse, a rule that
errs, a meter or switch that cannot be read, each gives a deny with the reason.

The policy file is re-read when it changes (checked at most every ``poll`` seconds): the new text
is parsed whole and swapped in at once, and its SHA-256 and text are journaled in the saga
``sagacity:policy`` (tool ``saga``, EXECUTED; input the text, payload ``policy=<sha256>``,
``source=`` and ``loaded_by=``) before any verdict names it. A changed file that does not parse is
journaled too (``refused=<sha256>`` and ``reason=``), and until it is fixed every call is denied.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

from sagacity._journal import Journal
from sagacity._payloads import COMPENSATES, SAGA_TOOL, as_line, payload_attribute
from sagacity._state import SagaState, fold
from sagacity.errors import HaltedError, PolicyError, SagacityError
from sagacity.guardrails._acting import current_agent
from sagacity.guardrails._cel import ConditionError
from sagacity.guardrails._evaluate import (
    CallFacts,
    Judgement,
    applies,
    default_finding,
    failed,
    finding_of,
    judge_arguments,
    strictest,
)
from sagacity.guardrails._meter import Meter, Planned, Streaks, meter_id, streak_id
from sagacity.guardrails._names import unknown_tools
from sagacity.guardrails._parse import parse_policy, read_policy_text
from sagacity.guardrails._rules import Action, Budget, Mode, Policy, Rule
from sagacity.guardrails._switch import KillSwitch, SwitchState
from sagacity.guardrails._verdict import DEFAULT_RULE, ERROR_RULE, SWITCH_RULE, Debit, RuleFinding, Verdict
from sagacity.model import Entry, Phase

__all__ = ["POLICY_SAGA", "Guard"]

_D = TypeVar("_D")
POLICY_SAGA = "sagacity:policy"
_log = logging.getLogger("sagacity.guardrails")


class Guard:
    """Judges calls on one journal against a policy (a file, re-read when it changes, or a
    :class:`Policy` given in Python)."""

    def __init__(
        self,
        journal: Journal,
        policy: Policy | str | os.PathLike[str],
        *,
        poll: float = 1.0,
        record: bool = True,
        switch: KillSwitch | None = None,
        known: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.journal = journal
        #: The tool names known here (the registry's): a rule naming another is warned of.
        self.known = known
        self.record = record  # False: explain only, journal nothing (``sagacity policy explain``)
        self.poll = poll
        self.switch = switch if switch is not None else KillSwitch(journal, poll)
        self.meter = Meter(journal)
        self.streaks = Streaks(journal)
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._checked = float("-inf")
        self._error: str = ""
        self._error_hash = ""
        if isinstance(policy, Policy):
            self._policy: Policy | None = policy
            self._journal_policy(policy)
            self._warn_unknown(policy)
        else:
            self._path = Path(policy)
            self._policy = None
            self._reload(force=True)
            if self._policy is None:
                raise PolicyError(self._error)

    # -- the policy in force ----------------------------------------------------------------------
    @property
    def policy(self) -> Policy | None:
        """The policy in force (None while a changed file does not parse: every call is denied)."""
        self._reload()
        return self._policy

    def approvers_for(self, tool: str, rule: str | None) -> tuple[tuple[str, ...], frozenset[str]] | None:
        """Who may decide a gate of ``tool`` held by ``rule``: the policy's names as written and
        the identities they stand for; None when the policy names no one. While the policy does not
        parse nobody knows who may, so it refuses (``PolicyError``), as every call is denied then."""
        policy = self.policy
        if policy is None:
            raise PolicyError(f"who may approve is unknown while the policy is broken: {self._error}")
        names = policy.approvers_for(tool, rule)
        return (names, policy.members(names)) if names is not None else None

    def _reload(self, *, force: bool = False) -> None:
        if self._path is None:
            return
        now = time.monotonic()
        if not force and now - self._checked < self.poll:
            return
        with self._lock:
            self._checked = now
            try:
                stamp = file_stamp(self._path)
            except OSError as exc:
                self._fail(f"cannot read the policy {self._path}: {exc.strerror or exc}", "")
                return
            if stamp == self._stamp and not force:
                return
            try:
                text = read_policy_text(self._path)
                if file_stamp(self._path) != stamp:
                    return  # written to while we read it: read it whole next time, never half
                self._stamp = stamp
                policy = parse_policy(text, source=str(self._path))
            except PolicyError as exc:
                self._stamp = stamp
                digest = hashlib.sha256(_text_or_empty(self._path).encode("utf-8")).hexdigest()
                self._fail(str(exc), digest)
                return
            if self._policy is None or policy.sha256 != self._policy.sha256:
                self._journal_policy(policy)
                self._warn_unknown(policy)
            self._policy, self._error = policy, ""

    def use(self, policy: Policy) -> None:
        """Put ``policy`` in force from now on, whole (journaled first when its text is new).

        For an owner that reads the policy itself (the MCP gateway reloading its file): a guard
        given a file path re-reads that file instead."""
        with self._lock:
            if self._policy is None or policy.sha256 != self._policy.sha256:
                self._journal_policy(policy)
                self._warn_unknown(policy)
            self._policy, self._error = policy, ""

    def _warn_unknown(self, policy: Policy) -> None:
        """Warn of each tool a rule names that no tool known here is called (a typo switches the
        rule off); the policy is used all the same (``sagacity policy check --strict`` refuses)."""
        if self.known is not None:
            for message in unknown_tools(policy, self.known()):
                _log.warning("guardrails policy: %s", message)

    def refuse(self, reason: str, text: str) -> None:
        """A new policy text cannot be used: journal its refusal and deny every call (fail closed)
        until :meth:`use` puts a policy in force again."""
        with self._lock:
            self._fail(reason, hashlib.sha256(text.encode("utf-8")).hexdigest())

    def _fail(self, reason: str, digest: str) -> None:
        """The file cannot be used: deny every call from now on, journaled once per text."""
        self._policy, self._error = None, reason
        _log.error("guardrails policy refused, every call is denied until it is fixed: %s", reason)
        if digest and digest != self._error_hash and self.record:
            self._error_hash = digest
            payload = f"refused={digest}\nreason={as_line(reason)}\nloaded_by={_who()}"
            self.journal.append(POLICY_SAGA, SAGA_TOOL, Phase.EXECUTED, "", payload)

    def _journal_policy(self, policy: Policy) -> None:
        """Journal the policy's text and hash, unless the chain's latest entry is that hash."""
        if not self.record:
            return
        tail = self.journal.read(self.journal.store.tail, POLICY_SAGA)
        if tail is not None and payload_attribute(tail.payload, "policy=") == policy.sha256:
            return
        payload = f"policy={policy.sha256}\nsource={as_line(policy.source)}\nloaded_by={_who()}"
        self.journal.append(POLICY_SAGA, SAGA_TOOL, Phase.EXECUTED, policy.text, payload)

    # -- judging ------------------------------------------------------------------------------------
    def check_start(self, saga_id: str) -> None:
        """Refuse a saga starting while the switch halts or drains (everyone, or its agent)."""
        agent = current_agent()
        try:
            setting = self.switch.refusing_start(agent)
        except SagacityError as exc:
            raise HaltedError(
                f"saga {saga_id!r} not started: the kill switch cannot be read ({exc})"
            ) from exc
        if setting is not None:
            raise HaltedError(f"saga {saga_id!r} not started: {setting.describe()}")

    def judge(
        self,
        saga_id: str,
        tool: str,
        input: str,
        *,
        irreversible: bool,
        approvals: int = 1,
        principal: str | None = None,
        dry: bool = False,
        with_intent: bool = False,
    ) -> Verdict:
        """The verdict on a new call (budgets debited when it is allowed; ``dry``: only read the
        meters, debit nothing — what ``sagacity policy explain`` shows). ``principal``: the saga's.

        ``with_intent``: the debits are not written here but planned, as the verdict's
        ``riders``, for the caller to insert with the call's INTENT (``Journal.append_with``), all
        or none; when that insert loses a race the caller reports it (:meth:`settled`) and asks
        again."""
        refused, policy, facts = self._prelude(saga_id, tool, input, principal)
        if refused is not None:
            return refused
        assert policy is not None
        principal, agent = facts.principal, facts.agent
        judgement = judge_arguments(policy, facts)
        if judgement.history:
            self._check_requires(judgement, facts)
            self._check_streaks(judgement, facts)
        decided = strictest(judgement.enforced) if judgement.enforced else None
        debits: tuple[Debit, ...] = ()
        if decided is None and irreversible and judgement.allowed_by is None:
            # An irreversible tool runs unattended only when a rule in force allows it explicitly.
            reason = f"{tool} is irreversible and no rule allows it unattended"
            decided = RuleFinding(DEFAULT_RULE, Action.HOLD, reason, approvals)
        riders: tuple[Planned, ...] = ()
        if (decided is None or decided.action is Action.ALLOW) and judgement.history:
            if with_intent and not dry:
                over, riders = self._plan_budgets(judgement, facts)
                debits = tuple(p.debit for p in riders)
            else:
                over, debits = self._take_budgets(judgement, facts, force=False, dry=dry)
            decided = strictest(over)
            if decided is not None and not dry:
                if not riders:
                    self._give_back_all(debits, saga_id, "the call was not allowed")
                debits, riders = (), ()  # planned debits were never written: nothing to give back
        elif decided is not None and decided.action is Action.HOLD and judgement.history:
            # The budgets are judged with the other rules now, not only once a human approved:
            # a call already over a deny budget is denied, never held (the strictest wins). A
            # held call takes nothing yet; its resume debits (and is judged again).
            over, _ = self._take_budgets(judgement, facts, force=False, dry=True)
            decided = strictest([decided, *over]) or decided
        if decided is None:
            decided = judgement.allowed_by or default_finding(policy)
        return Verdict(
            decided,
            policy.sha256,
            tuple(judgement.shadow),
            debits,
            principal,
            agent,
            explicit=judgement.allowed_by is not None and decided.action is Action.ALLOW,
            riders=tuple(p.rider for p in riders),
            sums=tuple(p.sums for p in riders),
        )

    def settled(self, verdict: Verdict, landed: Sequence[Entry] | None) -> None:
        """The INTENT carrying ``verdict``'s planned debits landed (``landed``: what was written)
        or lost its race (None): the meters' kept tails follow (``Meter.settled``)."""
        if verdict.riders:
            self.meter.settled(verdict.riders, verdict.sums, landed)

    def judge_resume(self, saga_id: str, tool: str, input: str, principal: str | None = None) -> Verdict:
        """The verdict on an approved call about to run: the switch and the budgets, again."""
        refused, policy, facts = self._prelude(saga_id, tool, input, principal)
        if refused is not None:
            return refused
        assert policy is not None
        principal, agent = facts.principal, facts.agent
        judgement = Judgement()
        for rule in policy.rules_for(tool):
            if rule.budget is None:
                continue
            try:
                if applies(rule, facts):
                    judgement.history.append(rule)
            except ConditionError as exc:
                judgement.add(rule, failed(rule, exc))
        over, debits = self._take_budgets(judgement, facts, force=True)
        decided = strictest([*judgement.enforced, *over])
        if decided is not None:
            self._give_back_all(debits, saga_id, "the resumed call was not allowed")
            debits = ()
        finding = decided or RuleFinding("approved", Action.ALLOW, "approved in the journal")
        return Verdict(finding, policy.sha256, tuple(judgement.shadow), debits, principal, agent)

    def _prelude(
        self, saga_id: str, tool: str, input: str, principal: str | None
    ) -> tuple[Verdict | None, Policy | None, CallFacts]:
        """The call's facts, and a verdict already when the switch refuses it or the policy cannot
        be used (else the policy in force)."""
        agent = current_agent()
        facts = CallFacts(tool, input, saga_id, principal, agent)
        refused = self._switched(tool, agent, principal)
        if refused is not None:
            return refused, None, facts
        policy = self.policy
        if policy is None:
            return self._error_verdict(principal, agent), None, facts
        return None, policy, facts

    def _switched(self, tool: str, agent: str | None, principal: str | None) -> Verdict | None:
        try:
            setting = self.switch.refusing_call(tool, agent)
        except SagacityError as exc:
            finding = RuleFinding(
                SWITCH_RULE, Action.DENY, f"the kill switch cannot be read ({exc}); denied (fail closed)"
            )
            return Verdict(finding, self._hash(), principal=principal, agent=agent)
        if setting is None:
            return None
        finding = RuleFinding(SWITCH_RULE, Action.DENY, setting.describe())
        halts = setting.state is SwitchState.HALT
        return Verdict(finding, self._hash(), principal=principal, agent=agent, halts=halts)

    def _hash(self) -> str:
        policy = self._policy
        return policy.sha256 if policy is not None else self._error_hash or "-"

    def _error_verdict(self, principal: str | None, agent: str | None) -> Verdict:
        finding = RuleFinding(
            ERROR_RULE, Action.DENY, f"the policy cannot be used ({self._error}); denied (fail closed)"
        )
        return Verdict(finding, self._hash(), principal=principal, agent=agent)

    def _check_requires(self, judgement: Judgement, facts: CallFacts) -> None:
        rules = [r for r in judgement.history if r.requires is not None]
        if not rules:
            return
        try:
            state = fold(facts.saga_id, self.journal.iter_entries(facts.saga_id))
        except SagacityError as exc:
            for rule in rules:
                judgement.add(rule, failed(rule, exc))
            return
        for rule in rules:
            try:
                if not _requirement_met(rule, state):
                    required = rule.requires.tool if rule.requires else "?"
                    why = f"{required} has not executed (uncompensated) earlier in this saga"
                    judgement.add(rule, finding_of(rule, rule.reason or why))
            except ConditionError as exc:
                judgement.add(rule, failed(rule, exc))

    def _check_streaks(self, judgement: Judgement, facts: CallFacts) -> None:
        for rule in judgement.history:
            if rule.failures is None:
                continue
            try:
                count = self.streaks.current(streak_id(rule, facts.tool, facts.principal, facts.agent))
            except SagacityError as exc:
                judgement.add(rule, failed(rule, exc))
                continue
            if count >= rule.failures.max_in_row:
                why = f"{facts.tool} failed {count} times in a row (at most {rule.failures.max_in_row})"
                judgement.add(rule, finding_of(rule, rule.reason or why))

    def record_outcome(self, saga_id: str, tool: str, principal: str | None, *, failed: bool) -> None:
        """Count a call's outcome on the ``failures`` rules of its tool (a success resets them).
        A count that cannot be journaled is logged: the call has already run."""
        policy = self._policy
        if policy is None:
            return
        agent = current_agent()
        for rule in policy.streak_rules(tool):
            try:
                self.streaks.record(
                    streak_id(rule, tool, principal, agent),
                    failed=failed,
                    about={"saga": saga_id, "tool": tool},
                )
            except SagacityError as exc:
                _log.error("could not count an outcome of %s for rule %s: %s", tool, rule.id, exc)

    def _take_budgets(
        self, judgement: Judgement, facts: CallFacts, *, force: bool, dry: bool = False
    ) -> tuple[list[RuleFinding], tuple[Debit, ...]]:
        """Debit every budget that applies; the findings of those that would go over."""

        def take(rule: Rule, meter: str, budget: Budget, amount: Decimal) -> tuple[Debit | None, Decimal]:
            if dry:
                total = self.meter.total(meter, budget)
                return (None if total + amount > budget.limit else Debit(meter, 0, amount)), total
            about = {"rule": rule.id, "saga": facts.saga_id, "tool": facts.tool}
            # A hold budget is overridden by the approval a resume has; a deny budget never.
            forced = force and rule.action is Action.HOLD
            return self.meter.take(meter, budget, amount, about, force=forced)

        return self._each_budget(judgement, facts, take)

    def _plan_budgets(
        self, judgement: Judgement, facts: CallFacts
    ) -> tuple[list[RuleFinding], tuple[Planned, ...]]:
        """``_take_budgets`` planned, not written: each budget's debit as a row for the INTENT."""

        def plan(rule: Rule, meter: str, budget: Budget, amount: Decimal) -> tuple[Planned | None, Decimal]:
            about = {"rule": rule.id, "saga": facts.saga_id, "tool": facts.tool}
            return self.meter.plan(meter, budget, amount, about)

        return self._each_budget(judgement, facts, plan)

    def _each_budget(
        self,
        judgement: Judgement,
        facts: CallFacts,
        decide: Callable[[Rule, str, Budget, Decimal], tuple[_D | None, Decimal]],
    ) -> tuple[list[RuleFinding], tuple[_D, ...]]:
        """``decide`` each budget rule that applies on its meter and the call's amount; what it
        took, and the findings of those over their limit or that could not be decided (fail
        closed; a shadow rule's go to its shadow findings)."""
        over: list[RuleFinding] = []
        taken: list[_D] = []
        for rule in judgement.history:
            budget = rule.budget
            if budget is None:
                continue
            findings = judgement.shadow if rule.mode is Mode.SHADOW else over
            try:
                amount = facts.amount(rule.amount) if rule.amount is not None else Decimal(1)
                meter = meter_id(rule, facts.tool, facts.principal, facts.agent)
                took, total = decide(rule, meter, budget, amount)
            except (ConditionError, SagacityError) as exc:
                findings.append(failed(rule, exc))
                continue
            if took is not None:
                taken.append(took)
            else:
                findings.append(_over(rule, total, amount, budget))
        return over, tuple(taken)

    def _give_back_all(self, debits: tuple[Debit, ...] | list[Debit], saga_id: str, why: str) -> None:
        for debit in debits:
            self.meter.give_back(debit, {"saga": saga_id, "why": why})

    def give_back_verdict(self, saga_id: str, verdict: Verdict) -> None:
        """The allowed call did not start after all (its INTENT could not be journaled). Debits
        planned to ride with the INTENT were written with it or not at all: nothing to give back."""
        if not verdict.riders:
            self._give_back_all(verdict.debits, saga_id, "the call's INTENT was not journaled")


def _over(rule: Rule, total: Decimal, amount: Decimal, budget: Budget) -> RuleFinding:
    """The finding of a budget the call would take over its limit."""
    what = "calls" if rule.amount is None else "amount"
    why = rule.reason or (
        f"budget {rule.id}: {total} + {amount} would exceed the limit of {budget.limit} {what} "
        f"per {_window(budget.window)}"
    )
    return finding_of(rule, why)


def _requirement_met(rule: Rule, state: SagaState) -> bool:
    requires = rule.requires
    assert requires is not None
    for call in state.executed:
        if call.intent.tool_name != requires.tool or call.intent.payload.startswith(COMPENSATES):
            continue
        assert call.outcome is not None
        undone = state.compensations.get(call.outcome.seq)
        if undone is not None and undone.outcome is not None and undone.outcome.phase == Phase.COMPENSATED:
            continue
        if requires.result is None:
            return True
        facts = CallFacts(call.intent.tool_name, call.intent.input, state.saga_id)
        if requires.result.holds({"result": _result_value(call.outcome.payload_text), "args": facts.args()}):
            return True
    return False


def _result_value(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def file_stamp(path: Path) -> tuple[int, int, int]:
    """What tells a changed policy file (modification time, size, inode: a rename into place
    too); an owner re-reading the file itself, as the MCP gateway does, compares these."""
    info = path.stat()
    return (info.st_mtime_ns, info.st_size, info.st_ino)


def _window(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _text_or_empty(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _who() -> str:
    return f"{socket.gethostname()} pid {os.getpid()}"
