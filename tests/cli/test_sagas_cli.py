"""`sagacity sagas`: list, show, in-doubt, resolve and recover against a SQLite journal on disk."""

from __future__ import annotations

import json
import sqlite3

from click.testing import CliRunner, Result

from sagacity import Phase, Sagacity, SagaStatus
from sagacity._payloads import parse_decision_payload
from sagacity.cli import main
from sagacity.tools import registry

RESERVE_INPUT = '{"sku":"SKU-7","quantity":1}'


def cli(runner: CliRunner, db_url: str, *args: str) -> Result:
    return runner.invoke(main, [*args, "--db", db_url], catch_exceptions=False)


def in_doubt_saga(sg: Sagacity, saga_id: str = "crashed") -> int:
    """A saga whose process died between a call's INTENT and its outcome; the INTENT's seq."""
    return sg.journal.append(saga_id, "cli_reserve", Phase.INTENT, RESERVE_INPUT).seq


def test_list_shows_statuses_and_filters(runner: CliRunner, db_url: str, sg, tools) -> None:
    """`sagas list` shows every saga with its status; --status keeps one status; --json parses."""
    sg.run("ok", tools.plain_order)
    sg.run("gated", tools.gated_order)
    table = cli(runner, db_url, "sagas", "list")
    assert table.exit_code == 0
    assert "ok" in table.output
    assert "AWAITING_APPROVAL" in table.output
    data = json.loads(cli(runner, db_url, "sagas", "list", "--status", "awaiting_approval", "--json").output)
    assert [(s["sagaId"], s["status"], s["awaitingApproval"]) for s in data["sagas"]] == [
        ("gated", "AWAITING_APPROVAL", 1)
    ]


def test_list_pages_with_limit_and_after(runner: CliRunner, db_url: str, sg, tools) -> None:
    """--limit and --after (the cursor a full page ends with) page through the sagas without overlap."""
    for i in range(3):
        sg.run(f"s{i}", tools.plain_order)
    first = json.loads(cli(runner, db_url, "sagas", "list", "--limit", "2", "--json").output)
    table = cli(runner, db_url, "sagas", "list", "--limit", "2").output
    assert f"sagacity sagas list --after {first['next']}" in table
    rest = json.loads(
        cli(runner, db_url, "sagas", "list", "--limit", "2", "--after", first["next"], "--json").output
    )
    assert len(first["sagas"]) == 2
    assert len(rest["sagas"]) == 1
    assert rest["next"] is None
    assert {s["sagaId"] for s in first["sagas"] + rest["sagas"]} == {"s0", "s1", "s2"}


def test_list_rejects_an_unknown_status(runner: CliRunner, db_url: str, sg, tools) -> None:
    """An unknown --status is a usage error listing the valid ones."""
    result = runner.invoke(main, ["sagas", "list", "--status", "HAPPY", "--db", db_url])
    assert result.exit_code == 2
    assert "compensation_failed" in result.output.lower()


def test_show_prints_journal_status_and_verification(runner: CliRunner, db_url: str, sg, tools) -> None:
    """`sagas show` prints each entry, the status and an intact chain; --json carries all entries."""
    sg.run("ok", tools.plain_order)
    result = cli(runner, db_url, "sagas", "show", "ok")
    assert result.exit_code == 0
    assert "cli_reserve" in result.output
    assert "COMPLETED" in result.output
    assert "intact" in result.output
    data = json.loads(cli(runner, db_url, "sagas", "show", "ok", "--json").output)
    assert data["status"] == "COMPLETED"
    assert data["verification"] == {
        "valid": True,
        "entryCount": 4,
        "breakAtIndex": -1,
        "message": data["verification"]["message"],
    }
    assert [e["seq"] for e in data["entries"]] == [1, 2, 3, 4]
    assert data["entries"][1]["hash"] == sg.entries("ok")[1].hash


def test_show_unknown_saga_exits_2(runner: CliRunner, db_url: str, sg, tools) -> None:
    """Showing a saga with no entries is an error, not an empty table."""
    result = cli(runner, db_url, "sagas", "show", "nope")
    assert result.exit_code == 2
    assert "nope" in result.output


def test_show_broken_chain_exits_1(runner: CliRunner, db_url: str, sg, tools, tmp_path) -> None:
    """A journal row altered behind the library's back shows BROKEN and exits 1."""
    sg.run("ok", tools.plain_order)
    with sqlite3.connect(tmp_path / "journal.db") as conn:
        conn.execute("DROP TRIGGER side_effect_journal_no_update")
        conn.execute("UPDATE side_effect_journal SET payload = 'forged' WHERE saga_id = 'ok' AND seq = 2")
    result = cli(runner, db_url, "sagas", "show", "ok")
    assert result.exit_code == 1
    assert "BROKEN" in result.output


def test_in_doubt_lists_intents_without_outcome(runner: CliRunner, db_url: str, sg, tools) -> None:
    """`sagas in-doubt` lists an INTENT with no outcome and exits 1; a clean journal exits 0."""
    sg.run("ok", tools.plain_order)
    clean = cli(runner, db_url, "sagas", "in-doubt")
    assert clean.exit_code == 0
    assert "no in-doubt calls" in clean.output
    seq = in_doubt_saga(sg)
    result = cli(runner, db_url, "sagas", "in-doubt", "--json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert [(c["sagaId"], c["seq"], c["toolName"], c["kind"]) for c in data] == [
        ("crashed", seq, "cli_reserve", "call")
    ]


def test_resolve_did_not_happen_records_resolver(runner: CliRunner, db_url: str, sg, tools) -> None:
    """--did-not-happen journals FAILED and a decision naming --as, and the saga compensates."""
    seq = in_doubt_saga(sg)
    result = cli(
        runner,
        db_url,
        "sagas",
        "resolve",
        "crashed",
        str(seq),
        "--did-not-happen",
        "--reason",
        "not in WMS",
        "--as",
        "ops-hank",
    )
    assert result.exit_code == 0, result.output
    entries = sg.entries("crashed")
    decision = next(e for e in entries if e.tool_name == "approval-gate")
    assert parse_decision_payload(decision.payload) == ("ops-hank", "not in WMS")
    assert any(e.tool_name == "cli_reserve" and e.phase == Phase.FAILED for e in entries)
    assert sg.status("crashed") is SagaStatus.COMPENSATED
    assert sg.in_doubt("crashed") == []


def test_resolve_happened_then_compensates_it(runner: CliRunner, db_url: str, sg, tools) -> None:
    """An in-doubt call resolved as happened in a failed saga is compensated afterwards."""
    sg.run("ok", tools.plain_order)  # unrelated saga, left alone
    seq = in_doubt_saga(sg)
    sg.journal.append("crashed", "saga", Phase.FAILED, "", "the worker died")
    result = cli(
        runner,
        db_url,
        "sagas",
        "resolve",
        "crashed",
        str(seq),
        "--happened",
        "--result",
        "reservation SKU-7x1",
        "--as",
        "ops",
    )
    assert result.exit_code == 0, result.output
    assert sg.status("crashed") is SagaStatus.COMPENSATED
    assert tools.EFFECTS == ["reserved SKU-1", "released SKU-7"]
    executed = [e for e in sg.entries("crashed") if e.phase == Phase.EXECUTED]
    assert [e.payload for e in executed] == ["reservation SKU-7x1"]


def test_resolve_needs_a_verdict(runner: CliRunner, db_url: str, sg, tools) -> None:
    """resolve without --happened or --did-not-happen is a usage error and writes nothing."""
    seq = in_doubt_saga(sg)
    result = runner.invoke(main, ["sagas", "resolve", "crashed", str(seq), "--as", "x", "--db", db_url])
    assert result.exit_code == 2
    assert "--happened" in result.output
    assert len(sg.entries("crashed")) == 1


def test_resolve_refuses_a_seq_that_is_not_in_doubt(runner: CliRunner, db_url: str, sg, tools) -> None:
    """Resolving an entry that has an outcome exits 2 and lists what is in doubt."""
    sg.run("ok", tools.plain_order)
    result = cli(runner, db_url, "sagas", "resolve", "ok", "1", "--happened", "--as", "x")
    assert result.exit_code == 2
    assert "not an in-doubt INTENT" in result.output


def test_resolve_refuses_result_with_did_not_happen(runner: CliRunner, db_url: str, sg, tools) -> None:
    """--result only makes sense for a call that happened."""
    seq = in_doubt_saga(sg)
    result = runner.invoke(
        main,
        [
            "sagas",
            "resolve",
            "crashed",
            str(seq),
            "--did-not-happen",
            "--result",
            "x",
            "--as",
            "x",
            "--db",
            db_url,
        ],
    )
    assert result.exit_code == 2
    assert len(sg.entries("crashed")) == 1


def test_recover_finishes_an_interrupted_compensation(runner: CliRunner, db_url: str, sg, tools) -> None:
    """`sagas recover --import` compensates a saga whose compensation run never finished."""
    sg.run("stuck", tools.plain_order)
    sg.journal.append("stuck", "saga", Phase.FAILED, "", "the worker died mid-compensation")
    assert sg.status("stuck") is SagaStatus.COMPENSATING
    result = cli(runner, db_url, "sagas", "recover", "--import", "cli_tools", "--json")
    assert result.exit_code == 0, result.output
    assert [(r["sagaId"], r["status"]) for r in json.loads(result.output)] == [("stuck", "COMPENSATED")]
    assert tools.EFFECTS == ["reserved SKU-1", "released SKU-1"]
    assert sg.status("stuck") is SagaStatus.COMPENSATED
    again = cli(runner, db_url, "sagas", "recover")
    assert again.exit_code == 0
    assert "nothing to recover" in again.output


def test_recover_skips_sagas_whose_tools_are_missing(runner: CliRunner, db_url: str, sg, tools) -> None:
    """A compensating saga whose tool is not imported is listed as skipped (exit 1) and untouched."""
    sg.run("stuck", tools.plain_order)
    sg.journal.append("stuck", "saga", Phase.FAILED, "", "died")
    before = sg.entries("stuck")
    with registry.isolated():
        registry.unregister("cli_reserve")
        result = cli(runner, db_url, "sagas", "recover", "stuck")
    assert result.exit_code == 1
    assert "cli_reserve" in result.output
    assert sg.entries("stuck") == before


def test_recover_leaves_a_compensation_behind_an_in_doubt_call_to_resolve(
    runner: CliRunner, db_url: str, sg, tools
) -> None:
    """A saga due to compensate (a call failed) while another call has no outcome: `recover`
    lists it for `resolve` and writes nothing; an unknown saga id is an error (exit 2)."""
    sg.journal.append("doubt", "cli_reserve", Phase.INTENT, '{"sku":"A","quantity":1}')
    sg.journal.append("doubt", "cli_reserve", Phase.EXECUTED, '{"sku":"A","quantity":1}', "held")
    sg.journal.append("doubt", "cli_flaky", Phase.INTENT, '{"step":"a"}')
    sg.journal.append("doubt", "cli_flaky", Phase.FAILED, '{"step":"a"}', "RuntimeError: down")
    sg.journal.append("doubt", "cli_flaky", Phase.INTENT, '{"step":"b"}')
    before = sg.entries("doubt")
    result = cli(runner, db_url, "sagas", "recover", "--import", "cli_tools", "--json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.output) == [
        {"sagaId": "doubt", "status": "IN_DOUBT", "detail": "in-doubt call: resolve it"}
    ]
    assert sg.entries("doubt") == before
    unknown = cli(runner, db_url, "sagas", "recover", "nobody")
    assert unknown.exit_code == 2
    assert "no journal entries for saga 'nobody'" in unknown.output


def test_markup_like_values_print_literally(runner: CliRunner, db_url: str, sg, tools) -> None:
    """Saga ids and inputs holding rich markup (`[/]`, `[bold]`) print as text in every table."""
    saga_id = "[/]evil [bold]id"
    sg.journal.append(saga_id, "cli_reserve", Phase.INTENT, '{"sku":"[/red]","quantity":1}')
    for args, exit_code in (
        (("sagas", "list"), 0),
        (("sagas", "show", saga_id), 0),
        (("sagas", "in-doubt"), 1),
        (("doctor", "--older-than", "0s"), 1),
    ):
        result = cli(runner, db_url, *args)
        assert result.exit_code == exit_code, args
        assert "[/]evil" in result.output, args
    doctor = json.loads(cli(runner, db_url, "doctor", "--older-than", "0s", "--json").output)
    assert "sagacity sagas resolve '[/]evil [bold]id' 1" in doctor["findings"][0]["action"]
