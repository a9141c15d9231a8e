"""What a newcomer hit in the CLI (#25): blank reasons, cut ids, a hung CLI on a dead database,
a mistyped --db creating a file, export and verify --json disagreeing with their usage."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner, Result

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.cli import main

LONG_INPUT = '{"note":"' + "x" * 300 + '"}'


def cli(runner: CliRunner, db_url: str, *args: str, columns: int | None = None) -> Result:
    env = {"COLUMNS": str(columns)} if columns else None
    return runner.invoke(main, [*args, "--db", db_url], env=env, catch_exceptions=False)


def gate(sg: Sagacity, tools: ModuleType, saga_id: str = "order-1") -> int:
    result = sg.run(saga_id, tools.gated_order, "SKU-1", "100.00")
    assert result.status is SagaStatus.AWAITING_APPROVAL
    return result.awaiting[0].journal_seq


# -- 1. a rejection needs a reason ------------------------------------------------------------------
@pytest.mark.parametrize("reason", ["", "   "])
def test_reject_refuses_a_blank_reason(runner: CliRunner, db_url: str, sg, tools, reason: str) -> None:
    """`--reason ""` (or blanks) is refused with exit 2; nothing is journaled, the request stays."""
    seq = gate(sg, tools)
    before = len(sg.entries("order-1"))
    result = cli(runner, db_url, "approvals", "reject", "order-1", str(seq), "--reason", reason, "--as", "x")
    assert result.exit_code == 2
    assert "reason is required" in result.output
    assert len(sg.entries("order-1")) == before
    assert len(sg.pending_approvals("order-1")) == 1


# -- 3. tables never cut ids, seqs or statuses ------------------------------------------------------
def _long_sagas(sg: Sagacity, tools: ModuleType) -> list[str]:
    """Sagas with long ids: one COMPENSATED (a failed compensation-free step), one gated."""
    ids = ["crash-cascade-2026-12-01-000017", "crash-cascade-2026-12-01-000018"]

    def fails() -> None:
        tools.cli_reserve("SKU-LONG", 3)
        raise RuntimeError("boom")

    sg.run(ids[0], fails)
    gate(sg, tools, ids[1])
    sg.journal.append(ids[1], "cli_note", Phase.INTENT, LONG_INPUT)
    return ids


@pytest.mark.parametrize("columns", [80, 100])
def test_sagas_list_keeps_ids_and_statuses_whole(runner, db_url, sg, tools, columns: int) -> None:
    ids = _long_sagas(sg, tools)
    out = cli(runner, db_url, "sagas", "list", columns=columns).output
    for saga_id in ids:
        assert saga_id in out
    assert "COMPENSATED" in out
    assert "AWAITING_APPROVAL" in out or "IN_DOUBT" in out
    assert "…" not in out


@pytest.mark.parametrize("columns", [80, 100])
def test_sagas_show_keeps_every_seq_and_cuts_only_payloads(runner, db_url, sg, tools, columns: int) -> None:
    """Every seq is printed as a number at the start of its row; the long input is cut with an
    ellipsis; `--no-trunc` and `-o wide` print it whole."""
    [_, gated] = _long_sagas(sg, tools)
    entries = sg.entries(gated)
    out = cli(runner, db_url, "sagas", "show", gated, columns=columns).output
    rows = [line for line in out.splitlines() if line.startswith("│")]
    seqs = [line.split("│")[1].strip() for line in rows]
    assert seqs == [str(e.seq) for e in entries]
    assert "AWAITING_APPROVAL" in out
    assert LONG_INPUT not in out.replace("\n", "")
    assert "…" in out
    for flag in (["--no-trunc"], ["-o", "wide"]):
        wide = cli(runner, db_url, "sagas", "show", gated, *flag, columns=columns).output
        assert LONG_INPUT in wide


@pytest.mark.parametrize("columns", [80, 100])
def test_approvals_and_in_doubt_tables_keep_ids(runner, db_url, sg, tools, columns: int) -> None:
    [_, gated] = _long_sagas(sg, tools)
    listed = cli(runner, db_url, "approvals", "list", columns=columns).output
    assert gated in listed
    assert "cli_wire" in listed
    doubt = cli(runner, db_url, "sagas", "in-doubt", columns=columns).output
    assert gated in doubt
    assert "cli_note" in doubt


def test_output_formats_csv_json_and_ids(runner, db_url, sg, tools) -> None:
    """`-o csv` has a header and whole values; `-q` prints ids only, one a line; `-o json` is the
    same document as `--json`; two output choices at once are a usage error."""
    ids = _long_sagas(sg, tools)
    rows = list(csv.DictReader(io.StringIO(cli(runner, db_url, "sagas", "list", "-o", "csv").output)))
    assert sorted(r["saga"] for r in rows) == sorted(ids)
    assert {r["status"] for r in rows} >= {"COMPENSATED"}
    assert sorted(cli(runner, db_url, "sagas", "list", "-q").output.split()) == sorted(ids)
    pairs = cli(runner, db_url, "approvals", "list", "-q").output.splitlines()
    assert [p.split("\t")[0] for p in pairs] == [ids[1]]
    assert json.loads(cli(runner, db_url, "sagas", "list", "-o", "json").output) == json.loads(
        cli(runner, db_url, "sagas", "list", "--json").output
    )
    both = runner.invoke(main, ["sagas", "list", "--json", "-o", "csv", "--db", db_url])
    assert both.exit_code == 2
    journal = list(csv.reader(io.StringIO(cli(runner, db_url, "sagas", "show", ids[1], "-o", "csv").output)))
    assert journal[0][:2] == ["seq", "time (UTC)"]
    assert LONG_INPUT in [row[4] for row in journal[1:]]


# -- 4. an unreachable PostgreSQL: bounded wait, one line, exit 2 ----------------------------------
def test_unreachable_postgres_fails_in_one_line_with_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("psycopg_pool")
    # Port 1 on loopback: nothing listens, every connection is refused.
    done = subprocess.run(
        [sys.executable, "-m", "sagacity.cli", "sagas", "list", "--store-timeout", "1",
         "--db", "postgresql://postgres@127.0.0.1:1/test"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: cannot reach the journal at postgresql://postgres@127.0.0.1:1/test")
    assert "--store-timeout 1 s" in lines[0]


def test_store_timeout_must_be_positive(runner: CliRunner, db_url: str) -> None:
    result = runner.invoke(main, ["sagas", "list", "--store-timeout", "0", "--db", db_url])
    assert result.exit_code == 2
    assert "positive" in result.output


# -- 5. a mistyped --db never creates a database ----------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["sagas", "list"],
        ["sagas", "show", "order-1"],
        ["sagas", "in-doubt"],
        ["approvals", "list"],
        ["doctor"],
        ["verify"],
        ["export", "order-1"],
        ["db", "reindex"],
    ],
)
def test_read_commands_refuse_a_missing_sqlite_file(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    path = tmp_path / "jounral.db"  # the typo
    result = runner.invoke(main, [*args, "--db", f"sqlite:///{path}"])
    assert result.exit_code == 2
    assert f"no journal at {path}: the file does not exist" in result.output
    assert f"sagacity db init --db sqlite:///{path}" in result.output
    assert not path.exists()


def test_verify_on_an_empty_journal_says_so_and_exits_0(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/empty.db"
    assert runner.invoke(main, ["db", "init", "--db", url]).exit_code == 0
    plain = runner.invoke(main, ["verify", "--db", url])
    assert plain.exit_code == 0
    assert "holds no sagas: nothing to verify" in plain.output
    as_json = runner.invoke(main, ["verify", "--json", "--db", url])
    assert json.loads(as_json.output) == {"valid": True, "checked": 0, "broken": 0, "sagas": []}


# -- 6. export of several sagas, verified saga by saga ----------------------------------------------
def test_export_of_several_sagas_verifies_saga_by_saga(runner, db_url, sg, tools, tmp_path: Path) -> None:
    ids = _long_sagas(sg, tools)
    out = tmp_path / "both.jsonl"
    assert cli(runner, db_url, "export", *ids, "--out", str(out)).exit_code == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == sum(len(sg.entries(i)) for i in ids)
    checked = runner.invoke(main, ["verify", "--export", str(out), "--json"])
    assert checked.exit_code == 0, checked.output
    document = json.loads(checked.output)
    assert [v["sagaId"] for v in document["sagas"]] == ids
    assert (document["valid"], document["checked"]) == (True, 2)
    # A line of the second saga moved into the first: both chains break, the file fails.
    moved = [lines[0], lines[-1], *lines[1:-1]]
    out.write_text("\n".join(moved) + "\n", encoding="utf-8")
    tampered = runner.invoke(main, ["verify", "--export", str(out), "--json"])
    assert tampered.exit_code == 1
    assert json.loads(tampered.output)["valid"] is False


def test_export_of_an_unknown_saga_among_several_writes_nothing(runner, db_url, sg, tools, tmp_path) -> None:
    ids = _long_sagas(sg, tools)
    out = tmp_path / "some.jsonl"
    result = cli(runner, db_url, "export", ids[0], "no-such-saga", "--out", str(out))
    assert result.exit_code == 2
    assert "no-such-saga" in result.output
    assert not out.exists() or out.read_text() == ""
