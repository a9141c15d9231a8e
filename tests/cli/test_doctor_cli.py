"""`sagacity doctor`: exit 0 on a healthy journal, 1 with a finding for each thing a human must do."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType

from click.testing import CliRunner, Result

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.cli import main
from sagacity.doctor import FindingKind, in_doubt_findings
from sagacity.model import InDoubtCall
from sagacity.tools import registry


def doctor(runner: CliRunner, db_url: str, *args: str) -> Result:
    return runner.invoke(main, ["doctor", *args, "--db", db_url], catch_exceptions=False)


def findings(result: Result) -> list[tuple[str, str, int | None]]:
    return [(f["kind"], f["sagaId"], f["seq"]) for f in json.loads(result.output)["findings"]]


def test_clean_journal_exits_0(runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType) -> None:
    """Completed, compensated and waiting sagas are healthy: exit 0, no findings."""
    sg.run("ok", tools.plain_order)
    sg.run("gated", tools.gated_order)
    result = doctor(runner, db_url, "--older-than", "0s", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["healthy"] is True
    assert data["sagasChecked"] == 2
    assert data["findings"] == []
    assert "healthy" in doctor(runner, db_url).output


def test_in_doubt_call_exits_1(runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType) -> None:
    """An INTENT with no outcome older than --older-than is a finding with a resolve command."""
    seq = sg.journal.append("crashed", "cli_reserve", Phase.INTENT, '{"sku":"A","quantity":1}').seq
    result = doctor(runner, db_url, "--older-than", "0s", "--json")
    assert result.exit_code == 1
    assert findings(result) == [("in_doubt_call", "crashed", seq)]
    action = json.loads(result.output)["findings"][0]["action"]
    assert f"sagacity sagas resolve crashed {seq}" in action
    table = doctor(runner, db_url, "--older-than", "0")
    assert table.exit_code == 1
    assert "in_doubt_call" in table.output


def test_young_in_doubt_calls_are_left_out(
    runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType
) -> None:
    """An INTENT younger than the threshold is probably running: counted, not a finding, exit 0."""
    sg.journal.append("running", "cli_reserve", Phase.INTENT, '{"sku":"A","quantity":1}')
    result = doctor(runner, db_url, "--older-than", "1d", "--json")
    assert result.exit_code == 0
    assert json.loads(result.output)["recentSkipped"] == 1


def test_in_doubt_threshold_is_inclusive_and_names_compensations() -> None:
    """The pure check keeps calls at least as old as the threshold and tells compensations apart."""
    start = datetime(2026, 1, 1)
    calls = [
        InDoubtCall("a", 3, "t", "{}", start, timedelta(minutes=5)),
        InDoubtCall("b", 4, "t", "{}", start, timedelta(minutes=4)),
        InDoubtCall("c", 9, "t", "{}", start, timedelta(hours=1), "compensation", 2),
    ]
    found, recent = in_doubt_findings(calls, timedelta(minutes=5))
    assert [(f.kind, f.saga_id) for f in found] == [
        (FindingKind.IN_DOUBT_CALL, "a"),
        (FindingKind.IN_DOUBT_COMPENSATION, "c"),
    ]
    assert recent == 1
    assert "undoing seq 2" in found[1].detail


def test_expired_approval_is_a_finding_until_expired(
    runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType
) -> None:
    """An overdue request is a finding; --expire journals REJECTED, compensates, and exits 0."""
    with Sagacity(db_url, approval_ttl=0) as instant:
        seq = instant.run("late", tools.gated_order).awaiting[0].journal_seq
    result = doctor(runner, db_url, "--json")
    assert result.exit_code == 1
    assert findings(result) == [("expired_approval", "late", seq)]
    fixed = doctor(runner, db_url, "--expire", "--import", "cli_tools", "--json")
    assert fixed.exit_code == 0, fixed.output
    data = json.loads(fixed.output)
    assert [(r["sagaId"], r["journalSeq"]) for r in data["expired"]] == [("late", seq)]
    assert data["findings"] == []
    assert sg.status("late") is SagaStatus.REJECTED  # an expiry is a rejection
    assert tools.EFFECTS == ["reserved SKU-1", "released SKU-1"]
    rejected = [e for e in sg.entries("late") if e.tool_name == "approval-gate" and e.phase == Phase.REJECTED]
    assert len(rejected) == 1
    assert "expired" in rejected[0].payload


def test_expire_without_tools_writes_nothing(
    runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType
) -> None:
    """--expire refuses to expire a request whose saga it could not compensate, and says which tool."""
    with Sagacity(db_url, approval_ttl=0) as instant:
        instant.run("late", tools.gated_order)
    before = sg.entries("late")
    with registry.isolated():
        registry.unregister("cli_reserve")
        result = doctor(runner, db_url, "--expire", "--json")
    assert result.exit_code == 1
    assert "cli_reserve" in json.loads(result.output)["findings"][0]["action"]
    assert sg.entries("late") == before


def test_broken_chain_is_a_finding(
    runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType, tmp_path: Path
) -> None:
    """A row altered behind the library's back makes the doctor report a broken chain."""
    sg.run("ok", tools.plain_order)
    with sqlite3.connect(tmp_path / "journal.db") as conn:
        conn.execute("DROP TRIGGER side_effect_journal_no_update")
        conn.execute("UPDATE side_effect_journal SET input = '{}' WHERE saga_id = 'ok' AND seq = 1")
    result = doctor(runner, db_url, "--json")
    assert result.exit_code == 1
    assert ("broken_chain", "ok", None) in findings(result)


def test_stuck_compensation_is_a_finding(
    runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType
) -> None:
    """A saga whose compensation began and never finished is reported with the recover command."""
    sg.run("stuck", tools.plain_order)
    failed = sg.journal.append("stuck", "saga", Phase.FAILED, "", "died")
    result = doctor(runner, db_url, "--older-than", "0s", "--json")
    assert result.exit_code == 1
    assert findings(result) == [("stuck_compensating", "stuck", failed.seq)]
    assert "sagacity sagas recover stuck" in json.loads(result.output)["findings"][0]["action"]
    assert doctor(runner, db_url, "--older-than", "1d").exit_code == 0  # too young to call stuck


def test_compensation_failed_is_a_finding_and_can_be_ignored(
    runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType
) -> None:
    """A failed compensation needs a human (exit 1) until --ignore compensation_failed says handled."""
    assert sg.run("broken", tools.failing_cleanup).status is SagaStatus.COMPENSATION_FAILED
    result = doctor(runner, db_url, "--json")
    assert result.exit_code == 1
    [finding] = json.loads(result.output)["findings"]
    assert (finding["kind"], finding["sagaId"]) == ("compensation_failed", "broken")
    assert "cannot undo boom" in finding["detail"]
    assert doctor(runner, db_url, "--ignore", "compensation_failed").exit_code == 0


def test_gate_whose_request_was_lost_is_a_finding(
    runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType
) -> None:
    """A gate open in the journal with no request row is invisible to approvers: reported, with the
    command that puts the request back."""
    seq = sg.run("orphan", tools.gated_order).awaiting[0].journal_seq
    sg.store.delete_approval_request("orphan", seq)
    result = doctor(runner, db_url, "--older-than", "0s", "--json")
    assert result.exit_code == 1
    assert findings(result) == [("gate_without_request", "orphan", seq)]
    assert "sagacity sagas recover" in json.loads(result.output)["findings"][0]["action"]
    recovered = runner.invoke(main, ["sagas", "recover", "--json", "--db", db_url])
    assert json.loads(recovered.output) == [
        {
            "sagaId": "orphan",
            "status": "AWAITING_APPROVAL",
            "detail": f"request seq {seq} restored from the journal",
        }
    ]
    assert [r.journal_seq for r in sg.pending_approvals("orphan")] == [seq]
    assert doctor(runner, db_url, "--older-than", "0s", "--json").exit_code == 0


def test_bad_older_than_is_a_usage_error(runner: CliRunner, db_url: str, sg: Sagacity) -> None:
    """--older-than takes 30s/5m/2h/1d or seconds; anything else exits 2."""
    result = runner.invoke(main, ["doctor", "--older-than", "soon", "--db", db_url])
    assert result.exit_code == 2
    assert "duration" in result.output


def test_db_comes_from_sagacity_url(runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType) -> None:
    """Without --db the doctor reads the journal named by SAGACITY_URL."""
    sg.journal.append("crashed", "cli_reserve", Phase.INTENT, "{}")
    result = runner.invoke(main, ["doctor", "--older-than", "0s"], env={"SAGACITY_URL": db_url})
    assert result.exit_code == 1
    assert "crashed" in result.output


def test_an_edit_the_index_did_not_see_needs_full_then_reindex_shows_it(
    runner: CliRunner, db_url: str, sg: Sagacity, tools: ModuleType, tmp_path: Path
) -> None:
    """A row edited in place after the index folded its saga (the SQLite file changed behind
    every trigger): the plain doctor cannot see it, `doctor --full` re-verifies every chain and
    does, and `db reindex` folds everything again, after which the plain doctor sees it too."""
    sg.run("ok", tools.plain_order)
    assert doctor(runner, db_url).exit_code == 0  # the index has folded "ok"
    with sqlite3.connect(tmp_path / "journal.db") as conn:
        conn.execute("DROP TRIGGER side_effect_journal_no_update")
        conn.execute("UPDATE side_effect_journal SET input = '{}' WHERE saga_id = 'ok' AND seq = 1")
    assert doctor(runner, db_url, "--json").exit_code == 0
    full = doctor(runner, db_url, "--full", "--json")
    assert full.exit_code == 1
    assert findings(full) == [("broken_chain", "ok", None)]
    rebuilt = runner.invoke(main, ["db", "reindex", "--db", db_url], catch_exceptions=False)
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "1 saga(s)" in rebuilt.output
    assert findings(doctor(runner, db_url, "--json")) == [("broken_chain", "ok", None)]
