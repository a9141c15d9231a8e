"""Decisions raced by real processes on one journal: whatever the interleaving, the journal
never says both "rejected" and "executed" for one gate, and no effect happens twice.

Each pair of actions runs in two separate worker processes (each with its own ``Sagacity``, so
on PostgreSQL its own connections), released together for every trial saga. The invariants are
checked on the journal itself and on the effects file the tools append to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from sagacity import Entry, Phase, Sagacity, SagaStatus

HERE = Path(__file__).parent
TRIALS = int(os.environ.get("SAGACITY_RACE_TRIALS", "30"))

PAIRS = [
    ("resume", "reject"),
    ("resume", "expire"),
    ("reject", "expire"),
    ("approve", "reject"),
    ("resume", "resume"),
    ("reject", "reject"),
    ("resolve", "recover"),
    ("recover", "recover"),
    # A framework presenting the approved gate under its call id (in band), beside another such
    # run (two processes resuming one saved state), a reject, or an out-of-band resume.
    ("present", "present"),
    ("present", "reject"),
    ("present", "resume"),
]


class Racer:
    """One worker process performing one action on each saga it is sent."""

    def __init__(self, url: str, effects: Path, action: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "race_tools.py"), url, str(effects), action],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.readline() == "ready"

    def readline(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line:
            _, err = self.process.communicate(timeout=30)
            raise AssertionError(f"racer died: {err}")
        return line

    def go(self, saga_id: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"go {saga_id}\n")
        self.process.stdin.flush()

    def outcome(self) -> str:
        word, outcome = self.readline().split(" ", 1)
        assert word == "done"
        return outcome

    def close(self) -> None:
        _, err = self.process.communicate(timeout=30)  # closes its stdin: the racer exits
        assert self.process.returncode == 0, err


def _set_up(race: ModuleType, sg: Sagacity, pair: tuple[str, str], saga_id: str) -> None:
    if "present" in pair:
        race.keyed_gated(sg, saga_id)
    elif "resolve" in pair:
        race.failed_mid_run(sg, saga_id, in_doubt=True)
    elif pair == ("recover", "recover"):
        race.failed_mid_run(sg, saga_id, in_doubt=False)
    else:
        race.gated(sg, saga_id, approved="approve" not in pair)


def _decided_seq(entry: Entry) -> int | None:
    decided = json.loads(entry.input) if entry.input.startswith("{") else {}
    return None if "resolution" in decided else decided.get("seq")


def check_invariants(sg: Sagacity, saga_id: str, effects: list[str]) -> SagaStatus:
    """Every promise about one saga's journal after a race; returns its final status."""
    entries = sg.entries(saga_id)
    assert sg.verify(saga_id).valid
    gates = [e.seq for e in entries if e.phase == Phase.AWAITING_APPROVAL]
    for gate in gates:
        decisions = [e for e in entries if e.tool_name == "approval-gate" and _decided_seq(e) == gate]
        rejected = [e for e in decisions if e.phase == Phase.REJECTED]
        resumed = [
            e for e in entries if e.phase == Phase.INTENT and e.payload.startswith(f"resumes seq={gate}")
        ]
        assert len(resumed) <= 1, f"{saga_id}: gate {gate} resumed twice"
        assert not (rejected and resumed), f"{saga_id}: gate {gate} was rejected and also resumed"
        assert len(rejected) <= 1, f"{saga_id}: gate {gate} rejected twice"
        if rejected:
            later = [e for e in decisions if e.phase == Phase.APPROVED and e.seq > rejected[0].seq]
            assert not later, f"{saga_id}: gate {gate} approved after it was rejected"
    executed_wires = [e for e in entries if e.tool_name == "race_wire" and e.phase == Phase.EXECUTED]
    wires = effects.count(f"wire {saga_id}")
    assert wires <= 1, f"{saga_id}: the irreversible tool ran {wires} times"
    assert wires == len(executed_wires), f"{saga_id}: wire effects {wires}, EXECUTED {len(executed_wires)}"
    if executed_wires:
        failures = [e.payload for e in entries if e.tool_name == "saga" and e.phase == Phase.FAILED]
        assert not failures, f"{saga_id}: compensated after its gate's tool executed: {failures}"
    for e in entries:
        if e.tool_name == "race_reserve" and e.phase == Phase.EXECUTED:
            released = effects.count(f"release {saga_id} {e.seq}")
            journaled = [
                c for c in entries if c.phase == Phase.COMPENSATED and c.payload.endswith(f"seq={e.seq}")
            ]
            claims = [
                c for c in entries if c.phase == Phase.INTENT and c.payload == f"compensates seq={e.seq}"
            ]
            assert released <= 1, f"{saga_id}: executed seq {e.seq} compensated {released} times"
            assert released == len(journaled), (
                f"{saga_id}: seq {e.seq} released {released}, journaled {journaled}"
            )
            assert len(claims) <= 1, f"{saga_id}: seq {e.seq} claimed by {len(claims)} compensation INTENTs"
    saga_level = Counter(e.phase for e in entries if e.tool_name == "saga")
    assert saga_level[Phase.FAILED] <= 1
    assert saga_level[Phase.COMPENSATED] + saga_level[Phase.COMPENSATION_FAILED] <= 1
    status = sg.status(saga_id)
    # A saga a rejection (or expiry) compensated ends REJECTED; one the resume's failure did, COMPENSATED.
    undone = {SagaStatus.COMPENSATED, SagaStatus.REJECTED}
    assert status in {SagaStatus.COMPLETED, *undone}, f"{saga_id}: ended {status}"
    if status in undone:
        for e in entries:
            if e.tool_name == "race_reserve" and e.phase == Phase.EXECUTED:
                assert effects.count(f"release {saga_id} {e.seq}") == 1, (
                    f"{saga_id}: seq {e.seq} never released"
                )
    return status


def run_races(race: ModuleType, url: str, tmp_path: Path, pair: tuple[str, str]) -> Counter[str]:
    effects_file = tmp_path / "effects.log"
    saga_ids = [f"{pair[0]}-{pair[1]}-{n}" for n in range(TRIALS)]
    racers = [Racer(url, effects_file, action) for action in pair]
    outcomes: Counter[str] = Counter()
    try:
        for saga_id in saga_ids:
            with Sagacity(url) as sg:  # one saga at a time: expiry looks at every pending request
                _set_up(race, sg, pair, saga_id)
            for racer in racers:
                racer.go(saga_id)
            outcomes.update(f"{action}:{racer.outcome()}" for action, racer in zip(pair, racers, strict=True))
    finally:
        for racer in racers:
            racer.close()
    effects = effects_file.read_text().splitlines() if effects_file.exists() else []
    with Sagacity(url) as sg:
        endings = Counter(str(check_invariants(sg, saga_id, effects)) for saga_id in saga_ids)
    assert sum(endings.values()) == TRIALS
    print(pair, dict(outcomes), dict(endings))  # seen with -s: how the races went
    return outcomes


#: What a decision that lost its gate to another gets, whatever the interleaving: the request
#: was consumed, so there is no pending request (the error a moment later would give), or, for
#: a resume that lost to a resume still running its call, that it is running elsewhere.
CONSUMED = {"refused_ApprovalNotFoundError", "refused_SagaRunningElsewhereError"}


def _assert_documented_losses(pair: tuple[str, str], outcomes: Counter[str]) -> None:
    """Every refused approve, reject or resume says the request was consumed: never
    ApprovalRefusedError ("already resumed") or SagaStateError for the same outcome."""
    if not set(pair) <= {"approve", "reject", "resume", "expire"}:
        return
    refused = {o for o in outcomes if o.split(":")[1].startswith("refused")}
    assert {o.split(":")[1] for o in refused} <= CONSUMED, dict(outcomes)


def _assert_raced(pair: tuple[str, str], outcomes: Counter[str]) -> None:
    """The two racers really met: in some trial one of them was refused (or found nothing to do).

    Not asked of approve x reject, where both may rightly land (approved, then rejected).
    """
    if pair == ("approve", "reject"):
        return
    losses = sum(
        n for outcome, n in outcomes.items() if "refused" in outcome or outcome.endswith(("_0", "replayed"))
    )
    assert losses, f"{pair}: no racer ever lost, so no race was run: {dict(outcomes)}"


@pytest.mark.parametrize("pair", PAIRS, ids=["x".join(p) for p in PAIRS])
def test_decisions_race_across_processes_on_sqlite(
    race: ModuleType, sqlite_url: str, tmp_path: Path, pair: tuple[str, str]
) -> None:
    """Two processes racing each pair of decisions on SQLite never break a promise."""
    outcomes = run_races(race, sqlite_url, tmp_path, pair)
    _assert_raced(pair, outcomes)
    _assert_documented_losses(pair, outcomes)


@pytest.mark.postgres
@pytest.mark.parametrize("pair", PAIRS, ids=["x".join(p) for p in PAIRS])
def test_decisions_race_across_processes_on_postgres(
    race: ModuleType, postgres_url: str, tmp_path: Path, pair: tuple[str, str]
) -> None:
    """Two processes racing each pair of decisions on PostgreSQL never break a promise."""
    outcomes = run_races(race, postgres_url, tmp_path, pair)
    _assert_raced(pair, outcomes)
    _assert_documented_losses(pair, outcomes)


@pytest.mark.parametrize("durable_url", ["sqlite", "postgres"], indirect=True)
def test_four_resumes_in_four_processes_one_runs_three_are_not_found(
    race: ModuleType, durable_url: str, tmp_path: Path
) -> None:
    """Four processes resume one approved gate at once, trial after trial: the tool runs once,
    and each of the three others gets ApprovalNotFoundError (the request was consumed) or, while
    the winner's call runs, SagaRunningElsewhereError, never ApprovalRefusedError, however the
    reads and appends interleave."""
    effects_file = tmp_path / "effects.log"
    racers = [Racer(durable_url, effects_file, "resume") for _ in range(4)]
    saga_ids = [f"four-{n}" for n in range(TRIALS)]
    try:
        for saga_id in saga_ids:
            with Sagacity(durable_url) as sg:
                race.gated(sg, saga_id, approved=True)
            for racer in racers:
                racer.go(saga_id)
            outcomes = sorted(racer.outcome() for racer in racers)
            assert outcomes[0] == "COMPLETED", f"{saga_id}: {outcomes}"
            assert set(outcomes[1:]) <= CONSUMED, f"{saga_id}: {outcomes}"
    finally:
        for racer in racers:
            racer.close()
    effects = effects_file.read_text().splitlines()
    with Sagacity(durable_url) as sg:
        for saga_id in saga_ids:
            assert check_invariants(sg, saga_id, effects) is SagaStatus.COMPLETED
