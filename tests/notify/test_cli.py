"""``sagacity notify run --once`` and ``sagacity notify status`` on a real SQLite journal."""

from __future__ import annotations

import json
from pathlib import Path

import notify_tools
import pytest
from click.testing import CliRunner
from notify_receiver import SECRET, Receiver, hook_text

from sagacity import Sagacity
from sagacity.cli import main

LOCAL = "http://127.0.0.1:9/hook"


def test_run_once_then_status(tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """One round from the command line delivers the waiting request; status then shows the
    outbox's cursor and one delivery, nothing in flight."""
    db = f"sqlite:///{tmp_path / 'journal.db'}"
    with Sagacity(db) as sg:
        sg.run("order-1", notify_tools.gated)
    (tmp_path / "notify.toml").write_text(hook_text(receiver.url), encoding="utf-8")
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    runner = CliRunner()
    ran = runner.invoke(
        main, ["notify", "run", "--once", "--config", str(tmp_path / "notify.toml"), "--db", db]
    )
    assert ran.exit_code == 0, ran.output
    assert "claimed 1: delivered 1, failed 0, dead 0" in ran.output
    assert receiver.types() == ["approval.requested"]
    status = runner.invoke(main, ["notify", "status", "--json", "--db", db])
    assert status.exit_code == 0, status.output
    found = json.loads(status.output)
    assert found["delivered"] == 1
    assert found["inFlight"] == []
    assert found["deadLetters"] == []
    assert found["cursor"] == 3  # opened, claim, delivered


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "cannot read the notifier's file"),
        (hook_text(LOCAL).replace("${HOOK_SECRET}", "whsec_QUJDRA=="), "must be an environment reference"),
    ],
)
def test_a_bad_file_is_refused_before_anything_runs(tmp_path: Path, text: str | None, message: str) -> None:
    """A missing file or a secret written into it: exit 2, one line saying what, nothing journaled."""
    path = tmp_path / "notify.toml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'journal.db'}"
    Sagacity(db).close()
    ran = CliRunner().invoke(main, ["notify", "run", "--config", str(path), "--db", db])
    assert ran.exit_code == 2
    assert message in ran.output
    with Sagacity(db) as sg:
        assert sg.entries("sagacity:notify") == []
