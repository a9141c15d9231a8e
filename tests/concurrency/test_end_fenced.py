"""A run's END is a decision on the journal it describes, fenced like every other: written once,
never after another run's END that already says the saga's state, and never with a status the
journal no longer has (issue 33, item 4)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.model import Entry
from sagacity.stores.sqlite import SQLiteStore

HERE = Path(__file__).parent


def _ends(sg: Sagacity, saga_id: str) -> list[str]:
    """The saga's END payloads after its gate, in journal order."""
    entries = sg.entries(saga_id)
    gate = next(e.seq for e in entries if e.phase == Phase.AWAITING_APPROVAL)
    return [
        e.payload
        for e in entries
        if e.tool_name == "sagacity:saga" and e.phase == Phase.EXECUTED and e.seq > gate
    ]


def _approve_and_resume(sg: Sagacity, saga_id: str) -> None:
    [request] = sg.pending_approvals(saga_id)
    sg.approve(saga_id, request.journal_seq, "alice@example.com")
    assert sg.resume(saga_id, request.journal_seq, request.input).status is SagaStatus.COMPLETED


def test_a_gate_resumed_in_another_process_before_its_run_ends_gets_one_end(
    race: ModuleType, durable_url: str
) -> None:
    """The run that opened the gate ends after another process approved and resumed it: the
    resume's END COMPLETED already says what the saga is, so the late run adds none."""
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "end_worker.py"), durable_url, "late-end"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        assert worker.stdin is not None
        assert worker.stdout.readline().strip() == "gated"
        with Sagacity(durable_url) as sg:
            _approve_and_resume(sg, "late-end")
            worker.stdin.write("end\n")
            worker.stdin.flush()
            out, err = worker.communicate(timeout=60)
            assert worker.returncode == 0, err
            assert out.strip() == "COMPLETED"
            assert _ends(sg, "late-end") == ['{"status":"COMPLETED"}']
            assert sg.status("late-end") is SagaStatus.COMPLETED
            assert sg.verify("late-end").valid
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate(timeout=30)


class _DecidedBeforeTheEnd(SQLiteStore):
    """The real SQLite store; the insert of a run's END is preceded, once, by ``decide()``
    (another client's decisions landing between the run's reads and its END)."""

    decide: Callable[[], object] | None = None

    def _before(self, entries: list[Entry]) -> None:
        if any(e.tool_name == "sagacity:saga" and e.phase == Phase.EXECUTED for e in entries):
            decide, self.decide = self.decide, None
            if decide is not None:
                decide()

    def insert_entry(self, entry: Entry) -> bool:
        self._before([entry])
        return super().insert_entry(entry)

    def insert_entry_at(self, entry: Entry, stamp: str) -> bool:
        self._before([entry])
        return super().insert_entry_at(entry, stamp)

    def insert_entries(self, entries: list[Entry]) -> bool:  # type: ignore[override]
        self._before(list(entries))
        return super().insert_entries(entries)


def test_an_approve_and_resume_landing_right_before_the_end_leaves_no_stale_end(
    race: ModuleType, tmp_path: Path
) -> None:
    """Seen with a held store: the run read its gate open, then another client approved and
    resumed it (END COMPLETED) before the run's END landed, which used to append END
    AWAITING_APPROVAL on a COMPLETED saga."""
    url = f"sqlite:///{tmp_path}/journal.db"
    store = _DecidedBeforeTheEnd(url)
    with Sagacity(url) as other:
        store.decide = lambda: _approve_and_resume(other, "held-end")

        def agent() -> None:
            race.race_reserve("A")
            race.race_wire("100.00", "ACME")

        with Sagacity(store=store) as sg:
            result = sg.run("held-end", agent)
            assert result.status is SagaStatus.COMPLETED
            assert result.awaiting == ()
            assert _ends(sg, "held-end") == ['{"status":"COMPLETED"}']
            assert sg.status("held-end") is SagaStatus.COMPLETED
