"""`sagacity keys`, `checkpoint`, `verify --checkpoint` and `export --bundle` through click's runner."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sagacity import Phase, Sagacity
from sagacity.cli import main

from .conftest import RawSQL, export_bundle, verify_offline


@pytest.fixture
def journal_url(sqlite_url: str) -> str:
    """The CLI is store-agnostic; the tamper matrix covers PostgreSQL, so these run on SQLite."""
    return sqlite_url


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    result = _run("keys", "generate", "--out", str(tmp_path / "keys" / "acme"))
    assert result.exit_code == 0, result.output
    return tmp_path / "keys" / "acme.key", tmp_path / "keys" / "acme.pub"


def _checkpoint(db: str, key: Path, *extra: str) -> Result:
    return _run("checkpoint", "--db", db, "--key", str(key), "--origin", "test.example/journal", *extra)


def test_keys_generate_writes_private_key_0600(keys: tuple[Path, Path]) -> None:
    """The private key file is mode 0600, the public one holds a verifier-key line, and reruns refuse."""
    key, pub = keys
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert pub.read_text().startswith("acme+")
    again = CliRunner().invoke(main, ["keys", "generate", "--out", str(key.with_suffix(""))])
    assert again.exit_code == 2
    assert "refusing to overwrite" in again.output


def test_keys_generate_refuses_a_directory_for_out(tmp_path: Path) -> None:
    """`--out keys/` names a directory, not DIR/NAME: it used to write keys.key beside it."""
    (tmp_path / "existing").mkdir()
    for out in (f"{tmp_path / 'keys'}/", str(tmp_path / "existing")):
        refused = CliRunner().invoke(main, ["keys", "generate", "--out", out, "--name", "ops"])
        assert refused.exit_code == 2
        assert "is a directory; give DIR/NAME" in refused.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["existing"]
    assert not any((tmp_path / "existing").iterdir())


def test_checkpoint_then_verify_clean_then_tampered(
    sg: Sagacity, journal_url: str, keys: tuple[Path, Path], tmp_path: Path, raw_sql: RawSQL
) -> None:
    """verify --checkpoint exits 0 on a grown journal and 1 with a table naming the truncated saga."""
    key, pub = keys
    anchor = tmp_path / "anchor"
    made = _checkpoint(journal_url, key, "--out", str(anchor))
    assert made.exit_code == 0, made.output
    assert "3 sagas, 15 entries" in made.output
    sg.journal.append("a", "tool", Phase.INTENT, "{}")
    clean = _run("verify", "--db", journal_url, "--checkpoint", str(anchor), "--key", str(pub))
    assert clean.exit_code == 0, clean.output
    assert "the journal extends the checkpoint" in clean.output
    raw_sql("DELETE FROM side_effect_journal WHERE saga_id = 'b' AND seq >= 4", ())
    tampered = _run("verify", "--db", journal_url, "--checkpoint", str(anchor), "--key", str(pub))
    assert tampered.exit_code == 1
    assert "SHORTENED" in tampered.output
    assert "│ b " in tampered.output
    as_json = _run("verify", "--db", journal_url, "--checkpoint", str(anchor), "--key", str(pub), "--json")
    report = json.loads(as_json.output)
    # the log checkpoint beside it catches the truncation too: its entries in log order are gone
    assert [(f["sagaId"], f["finding"]) for f in report["findings"]] == [
        ("b", "SHORTENED"),
        ("b", "LOG_MISMATCH"),
    ]


def test_checkpoint_refuses_a_journal_that_no_longer_extends_the_anchor(
    sg: Sagacity, journal_url: str, keys: tuple[Path, Path], tmp_path: Path, raw_sql: RawSQL
) -> None:
    """After a saga is deleted, the next checkpoint exits 1 naming it and publishes nothing."""
    key, _ = keys
    anchor = tmp_path / "anchor"
    assert _checkpoint(journal_url, key, "--out", str(anchor)).exit_code == 0
    raw_sql("DELETE FROM side_effect_journal WHERE saga_id = 'c'", ())
    refused = _checkpoint(journal_url, key, "--out", str(anchor))
    assert refused.exit_code == 1
    assert "saga 'c' MISSING" in refused.output
    assert len(list(anchor.glob("checkpoint-*.txt"))) == 1


def test_verify_with_another_key_is_an_error(
    sg: Sagacity, journal_url: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """A checkpoint checked against someone else's public key exits 2 with a signature error."""
    key, _ = keys
    assert _checkpoint(journal_url, key, "--out", str(tmp_path / "anchor")).exit_code == 0
    assert _run("keys", "generate", "--out", str(tmp_path / "other" / "acme")).exit_code == 0
    result = CliRunner().invoke(
        main,
        [
            *("verify", "--db", journal_url, "--checkpoint", str(tmp_path / "anchor")),
            *("--key", str(tmp_path / "other" / "acme.pub")),
        ],
    )
    assert result.exit_code == 2
    assert "SignatureError" in result.output


def test_every_loop_is_bounded_by_count(
    sg: Sagacity, journal_url: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """--every with --count writes that many checkpoints, each extending the last, then stops."""
    key, _ = keys
    anchor = tmp_path / "anchor"
    result = _checkpoint(journal_url, key, "--out", str(anchor), "--every", "0.01s", "--count", "3")
    assert result.exit_code == 0, result.output
    notes = sorted(anchor.glob("checkpoint-*.txt"))
    assert len(notes) == 3
    assert (anchor / "latest").read_text().strip() == notes[-1].name


def test_every_rejects_bad_durations(journal_url: str, keys: tuple[Path, Path], tmp_path: Path) -> None:
    """A duration that is not like 30s/5m/1h is a usage error, as is --count without --every."""
    key, _ = keys
    bad = CliRunner().invoke(
        main, ["checkpoint", "--key", str(key), "--origin", "o", "--out", "x", "--every", "soon"]
    )
    assert bad.exit_code == 2
    assert "not a duration" in bad.output
    lone = CliRunner().invoke(
        main, ["checkpoint", "--key", str(key), "--origin", "o", "--out", "x", "--count", "2"]
    )
    assert lone.exit_code == 2


def test_git_anchor_gets_one_commit_per_checkpoint(
    sg: Sagacity, journal_url: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """--git commits each checkpoint to the repository: the saga checkpoint, then the log's."""
    key, _ = keys
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert _checkpoint(journal_url, key, "--git", str(repo)).exit_code == 0
    sg.journal.append("a", "tool", Phase.INTENT, "{}")
    assert _checkpoint(journal_url, key, "--git", str(repo)).exit_code == 0
    log = subprocess.run(["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True, check=True)
    subjects = [line.split(" ", 1)[1] for line in log.stdout.splitlines()]
    assert [s.split(":")[0] for s in subjects] == [
        "log checkpoint test.example/journal/log",
        "checkpoint test.example/journal",
    ] * 2


def test_export_bundle_verifies_with_the_standalone_verifier(
    sg: Sagacity, journal_url: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """export --bundle writes a bundle that `python -m sagacity.verify_bundle` accepts, exit 0."""
    key, pub = keys
    anchor, bundle = tmp_path / "anchor", tmp_path / "bundle"
    assert _checkpoint(journal_url, key, "--out", str(anchor)).exit_code == 0
    made = export_bundle(journal_url, ["a", "c"], bundle, anchor, pub)
    assert made.exit_code == 0, made.output
    done = verify_offline(bundle, pub)
    assert done.returncode == 0, done.stderr
    assert "OK a: 5 entries" in done.stdout
    assert "OK c: 5 entries" in done.stdout


def test_export_keeps_its_plain_form(sg: Sagacity, journal_url: str) -> None:
    """Without --bundle, export writes JSON Lines: one saga's, or several sagas' one after another."""
    plain = _run("export", "a", "--db", journal_url)
    assert plain.exit_code == 0
    assert len(plain.output.splitlines()) == 5
    several = CliRunner().invoke(main, ["export", "a", "b", "--db", journal_url])
    assert several.exit_code == 0, several.output
    assert [json.loads(line)["sagaId"] for line in several.output.splitlines()] == ["a"] * 5 + ["b"] * 5
    missing = CliRunner().invoke(main, ["export", "a", "--db", journal_url, "--bundle", str(Path("x"))])
    assert missing.exit_code == 2
    assert "--checkpoint" in missing.output
