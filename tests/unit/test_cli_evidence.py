"""``sagacity db init``, ``verify`` and ``export`` on the command line, against a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sagacity import Phase, Sagacity
from sagacity.cli import main
from sagacity.stores.sqlite import path_from_url


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def db(sqlite_url: str) -> str:
    """A SQLite journal with sagas "order-1" (3 entries) and "order-2" (2 entries)."""
    with Sagacity(sqlite_url) as sg:
        sg.journal.append("order-1", "reserve", Phase.INTENT, '{"sku":"ü-9"}')
        sg.journal.append("order-1", "reserve", Phase.EXECUTED, '{"sku":"ü-9"}', "ok 日本")
        sg.journal.append("order-1", "charge", Phase.INTENT, '{"amount":"10"}')
        sg.journal.append("order-2", "reserve", Phase.INTENT, "{}")
        sg.journal.append("order-2", "reserve", Phase.FAILED, "{}", "RuntimeError: out of stock")
    return sqlite_url


def _tamper(url: str) -> None:
    """Edit order-1's second row behind the library's back (dropping the refusing trigger first)."""
    conn = sqlite3.connect(path_from_url(url), isolation_level=None)
    conn.execute("DROP TRIGGER side_effect_journal_no_update")
    conn.execute("UPDATE side_effect_journal SET payload = 'forged' WHERE saga_id = 'order-1' AND seq = 2")
    conn.close()


def test_db_init_creates_the_schema_idempotently(sqlite_url: str) -> None:
    """``db init`` creates the journal tables in a new file, and running it again changes nothing."""
    for _ in range(2):
        result = _run("db", "init", "--db", sqlite_url)
        assert result.exit_code == 0, result.output
        assert "schema ready" in result.output
    conn = sqlite3.connect(path_from_url(sqlite_url))
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert {"side_effect_journal", "sagacity_approval_request"} <= tables


def test_verify_all_sagas_intact(db: str) -> None:
    """``verify`` without saga ids checks every saga and exits 0 when all chains are intact."""
    result = _run("verify", "--db", db)
    assert result.exit_code == 0, result.output
    assert "order-1" in result.output
    assert "order-2" in result.output
    assert "BROKEN" not in result.output


def test_verify_one_saga_as_json(db: str) -> None:
    """``verify SAGA --json`` prints one JSON document: the verdict, and per saga the SPEC §7
    verification fields."""
    result = _run("verify", "order-1", "--json", "--db", db)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "valid": True,
        "checked": 1,
        "broken": 0,
        "sagas": [
            {
                "sagaId": "order-1",
                "valid": True,
                "entryCount": 3,
                "breakAtIndex": -1,
                "message": "chain intact: 3 entries",
            }
        ],
    }


def test_verify_tampered_journal_exits_1(db: str) -> None:
    """A row edited behind the library's back makes ``verify`` exit 1 and name the index."""
    _tamper(db)
    result = _run("verify", "--db", db)
    assert result.exit_code == 1
    assert "BROKEN at seq 2" in result.output
    as_json = _run("verify", "--json", "--db", db)
    assert as_json.exit_code == 1
    document = json.loads(as_json.stdout)
    assert (document["valid"], document["checked"], document["broken"]) == (False, 2, 1)
    verdicts = {v["sagaId"]: v for v in document["sagas"]}
    assert (verdicts["order-1"]["valid"], verdicts["order-1"]["breakAtIndex"]) == (False, 1)
    assert verdicts["order-2"]["valid"] is True
    only_intact = _run("verify", "order-2", "--db", db)
    assert only_intact.exit_code == 0, only_intact.output


def test_verify_unknown_saga_exits_2(db: str) -> None:
    """Naming a saga with no entries is an error (exit 2), not an intact empty chain."""
    result = _run("verify", "no-such-saga", "--db", db)
    assert result.exit_code == 2
    assert "no-such-saga" in result.output


def test_export_to_file_then_verify_offline(db: str, tmp_path: Path) -> None:
    """``export --out FILE`` writes JSON Lines that ``verify --export FILE`` accepts without the database."""
    out = tmp_path / "order-1.jsonl"
    result = _run("export", "order-1", "--out", str(out), "--db", db)
    assert result.exit_code == 0, result.output
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2, 3]
    assert json.loads(lines[1])["payload"] == "ok 日本"
    with Sagacity(db) as sg:
        assert lines == list(sg.export("order-1"))
    Path(path_from_url(db)).unlink()  # offline: the database is gone
    checked = _run("verify", "--export", str(out), "--json")
    assert checked.exit_code == 0, checked.output
    [verdict] = json.loads(checked.stdout)["sagas"]
    assert verdict["sagaId"] == "order-1"
    assert (verdict["valid"], verdict["entryCount"], verdict["breakAtIndex"]) == (True, 3, -1)


def test_export_with_one_byte_changed_fails_offline(db: str, tmp_path: Path) -> None:
    """Changing a single byte of an exported entry makes offline verification exit 1 at that entry."""
    out = tmp_path / "order-1.jsonl"
    assert _run("export", "order-1", "--out", str(out), "--db", db).exit_code == 0
    data = out.read_bytes()
    position = data.index(b"ok ")
    changed = data[:position] + b"oK" + data[position + 2 :]
    assert len(changed) == len(data)
    assert sum(a != b for a, b in zip(data, changed, strict=True)) == 1
    out.write_bytes(changed)
    result = _run("verify", "--export", str(out), "--json")
    assert result.exit_code == 1
    [verdict] = json.loads(result.stdout)["sagas"]
    assert (verdict["valid"], verdict["breakAtIndex"]) == (False, 1)


def test_export_of_unknown_saga_exits_2(db: str, tmp_path: Path) -> None:
    """Exporting a saga with no entries is an error (exit 2) and writes no file."""
    out = tmp_path / "none.jsonl"
    result = _run("export", "no-such-saga", "--out", str(out), "--db", db)
    assert result.exit_code == 2
    assert not out.exists()


def test_verify_prints_saga_ids_that_look_like_markup(tmp_path: Path) -> None:
    """A saga id holding rich markup such as ``[/]`` is printed literally, not parsed."""
    url = f"sqlite:///{tmp_path}/markup.db"
    with Sagacity(url) as sg:
        sg.journal.append("a[/]b[red]", "x", Phase.INTENT, "{}")
    result = CliRunner().invoke(main, ["verify", "--db", url])
    assert result.exit_code == 0, result.output
    assert "a[/]b[red]" in result.output
