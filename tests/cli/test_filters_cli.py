"""`sagas list` and `approvals list` filters (--prefix, --tool, --since, --until) and
`approvals list --watch` (#25), from outside: the installed command in a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner, Result

from sagacity import Sagacity, SagaStatus
from sagacity.cli import main

HERE = Path(__file__).parent


def cli(runner: CliRunner, db_url: str, *args: str) -> Result:
    return runner.invoke(main, [*args, "--db", db_url], catch_exceptions=False)


@pytest.fixture
def journal(sg: Sagacity, tools: ModuleType) -> Sagacity:
    """Three orders (two held at the wire transfer) and a refund, one after the other."""
    for saga_id, agent in (
        ("order-1", tools.gated_order),
        ("order-2", tools.gated_order),
        ("refund-1", tools.gated_order),
    ):
        assert sg.run(saga_id, agent).status is SagaStatus.AWAITING_APPROVAL
    sg.run("order-3", tools.cli_reserve, "SKU-3", 1)
    return sg


def test_sagas_list_filters_by_prefix_tool_and_time(
    runner: CliRunner, db_url: str, journal: Sagacity
) -> None:
    def ids(*args: str) -> list[str]:
        done = cli(runner, db_url, "sagas", "list", "-q", *args)
        assert done.exit_code == 0, done.output
        return done.output.split()

    assert ids() == ["order-3", "refund-1", "order-2", "order-1"]
    assert ids("--prefix", "order-") == ["order-3", "order-2", "order-1"]
    assert ids("--tool", "cli_wire") == ["refund-1", "order-2", "order-1"]
    assert ids("--tool", "cli_wire", "--prefix", "order") == ["order-2", "order-1"]
    assert ids("--since", "1h") == ids()
    assert ids("--until", "1h") == []
    assert ids("--since", "2000-01-01", "--until", "2999-01-01T00:00Z") == ids()
    started = journal.sagas(prefix="order-3")[0].updated_at.isoformat()
    assert ids("--since", started) == ["order-3"]
    assert ids("--until", started) == ["refund-1", "order-2", "order-1"]
    page = json.loads(cli(runner, db_url, "sagas", "list", "--json", "--tool", "cli_reserve").output)
    assert [s["sagaId"] for s in page["sagas"]] == ids("--tool", "cli_reserve")


def test_the_next_page_hint_repeats_the_filters(runner: CliRunner, db_url: str, journal: Sagacity) -> None:
    done = cli(runner, db_url, "sagas", "list", "--limit", "1", "--prefix", "order", "--since", "2000-01-01")
    assert done.exit_code == 0, done.output
    hint = done.output.strip().splitlines()[-1]
    assert hint.startswith("next page: sagacity sagas list --after ")
    assert "--prefix order --since 2000-01-01T00:00:00.000000Z" in hint
    again = cli(runner, db_url, *hint.removeprefix("next page: sagacity ").split())
    assert again.exit_code == 0, again.output
    assert "order-2" in again.output
    assert "refund-1" not in again.output


def test_approvals_list_filters(runner: CliRunner, db_url: str, journal: Sagacity) -> None:
    def requests(*args: str) -> list[str]:
        done = cli(runner, db_url, "approvals", "list", "-q", *args)
        assert done.exit_code == 0, done.output
        return [line.split("\t")[0] for line in done.output.splitlines()]

    assert requests() == ["order-1", "order-2", "refund-1"]
    assert requests("--prefix", "refund") == ["refund-1"]
    assert requests("--tool", "cli_wire") == requests()
    assert requests("--tool", "cli_reserve") == []
    assert requests("--since", "1d", "--prefix", "order") == ["order-1", "order-2"]
    table = cli(runner, db_url, "approvals", "list", "--tool", "cli_payout")
    assert table.output.strip() == "no pending approval requests"


def test_approvals_list_pages_after_a_cursor_with_a_next_page_hint(
    runner: CliRunner, db_url: str, journal: Sagacity
) -> None:
    """`approvals list --limit N` prints, under a full page, the command for the next one (the
    filters and page size repeated); following the hints walks the queue once, oldest first."""
    seen: list[str] = []
    args = ["approvals", "list", "--limit", "1", "--since", "2000-01-01"]
    while True:
        done = cli(runner, db_url, *args)
        assert done.exit_code == 0, done.output
        lines = done.output.strip().splitlines()
        seen += [saga for saga in ("order-1", "order-2", "refund-1") if f" {saga} " in done.output]
        if not lines[-1].startswith("next page: "):
            break
        assert "--limit 1 --since 2000-01-01T00:00:00.000000Z" in lines[-1]
        args = lines[-1].removeprefix("next page: sagacity ").split()
    assert seen == ["order-1", "order-2", "refund-1"]
    assert done.output.strip() == "no pending approval requests"  # the page after the last


def test_approvals_list_hint_goes_to_stderr_beside_machine_output(db_url: str, journal: Sagacity) -> None:
    """With -q, stdout holds only the data (a pipe reads it as is) and the hint is on stderr; --json
    holds the cursor as its "next"."""
    base = [sys.executable, "-m", "sagacity.cli", "approvals", "list", "--db", db_url, "--limit", "2"]
    ids = subprocess.run([*base, "-q"], capture_output=True, text=True, check=True, timeout=120)
    assert [line.split("\t")[0] for line in ids.stdout.splitlines()] == ["order-1", "order-2"]
    cursor = ids.stderr.split("--after ")[1].split()[0]
    # --json carries the cursor in the document, as `sagas list --json` does: nothing on stderr.
    first = subprocess.run([*base, "--json"], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(first.stdout)["next"] == cursor
    assert first.stderr == ""
    page = subprocess.run([*base, "--json", "--after", cursor], capture_output=True, text=True, check=True)
    last = json.loads(page.stdout)
    assert ([a["sagaId"] for a in last["approvals"]], last["limit"], last["next"]) == (["refund-1"], 2, None)
    assert page.stderr == ""  # not a full page: no hint


@pytest.mark.parametrize("cursor", ["nope", "WyIyMDI2LTEyLTAyVDEwOjAwOjAwLjAwMDAwMCIsIm9yZGVyLTAiXQ"])
def test_approvals_list_refuses_a_cursor_it_did_not_make(
    runner: CliRunner, db_url: str, journal: Sagacity, cursor: str
) -> None:
    """Garbage, or a `sagas list` cursor: one clear line naming --after's value, exit 2."""
    done = cli(runner, db_url, "approvals", "list", "--after", cursor)
    assert done.exit_code == 2
    assert "is not an approval-queue cursor" in done.output
    assert "Traceback" not in done.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "is neither a time ago"),
        (["--since", "90"], "is neither a time ago"),
        (["--until", "2026-13-01"], "is neither a time ago"),
        (["--since", "1h", "--until", "2h"], "must be earlier than --until"),
    ],
)
def test_a_time_that_cannot_be_read_is_a_usage_error(
    runner: CliRunner, db_url: str, journal: Sagacity, args: list[str], message: str
) -> None:
    for command in (["sagas", "list"], ["approvals", "list"]):
        done = cli(runner, db_url, *command, *args)
        assert done.exit_code == 2
        assert message in done.output


def test_watch_refuses_machine_output(runner: CliRunner, db_url: str, journal: Sagacity) -> None:
    done = cli(runner, db_url, "approvals", "list", "--watch", "--json")
    assert done.exit_code == 2
    assert "--watch draws a table" in done.output


def test_watch_shows_new_requests_and_stops_cleanly_on_ctrl_c(
    db_url: str, journal: Sagacity, tools: ModuleType
) -> None:
    """A real process: it redraws the queue, a request made meanwhile appears, SIGINT ends it, 0."""
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sagacity.cli",
            "approvals",
            "list",
            "--watch",
            "--interval",
            "0.2",
            "--db",
            db_url,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "160"},
    )
    try:
        lines: list[str] = []
        assert watcher.stdout is not None
        deadline = time.monotonic() + 60
        while "3 pending" not in "".join(lines) and time.monotonic() < deadline:
            lines.append(watcher.stdout.readline())
        assert "3 pending" in "".join(lines)
        assert journal.run("late-1", tools.gated_order).status is SagaStatus.AWAITING_APPROVAL
        while "late-1" not in "".join(lines) and time.monotonic() < deadline:
            lines.append(watcher.stdout.readline())
        assert "4 pending" in "".join(lines)
        watcher.send_signal(signal.SIGINT)
        out, err = watcher.communicate(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert watcher.returncode == 0, err
    assert "Traceback" not in err
    assert out.strip().endswith("stopped watching")
