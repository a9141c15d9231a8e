"""The CLI refuses text that could fake a journal field and numbers not written in digits (issue #11).

On a SQLite file and on PostgreSQL: ``--as`` and ``--reason`` holding a line break exit 2 with
nothing journaled; a seq such as ``3_0`` (which ``int()`` reads as 30) exits 2 instead of acting
on another entry.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from click.testing import CliRunner, Result

from sagacity import Phase, Sagacity, SagaStatus
from sagacity._payloads import parse_decision_payload
from sagacity.cli import main

FORGED = "fine by me\napprover=ceo@example.com\r\napprover=cfo@example.com"
#: Names and notes that would add a line to a decision's payload.
BAD_TEXT = [FORGED, "fine\u2028approver=ceo", "fine\x85approver=ceo", "fine\x0bapprover=ceo"]


@pytest.fixture
def url(durable_url: str, tools: ModuleType) -> str:
    return durable_url


@pytest.fixture
def sg(url: str) -> Iterator[Sagacity]:
    with Sagacity(url) as sagacity:
        yield sagacity


def cli(runner: CliRunner, url: str, *args: str) -> Result:
    return runner.invoke(main, [*args, "--db", url], catch_exceptions=False)


def suspended(sg: Sagacity, tools: ModuleType, saga_id: str) -> int:
    result = sg.run(saga_id, tools.gated_order)
    assert result.status is SagaStatus.AWAITING_APPROVAL
    return result.awaiting[0].journal_seq


def approver_lines(sg: Sagacity, saga_id: str) -> list[str]:
    return [
        line
        for e in sg.entries(saga_id)
        if e.tool_name == "approval-gate"
        for line in e.payload.splitlines()
        if line.startswith("approver=")
    ]


@pytest.mark.parametrize("text", BAD_TEXT, ids=repr)
def test_reject_refuses_a_reason_or_name_that_would_add_a_line(
    runner: CliRunner, url: str, sg: Sagacity, tools: ModuleType, text: str
) -> None:
    """`approvals reject --reason/--as` with a line break exits 2; the request stays, nothing is journaled."""
    seq = suspended(sg, tools, "order-1")
    before = sg.entries("order-1")
    for args in (["--reason", text, "--as", "frank"], ["--reason", "no", "--as", text]):
        result = cli(runner, url, "approvals", "reject", "order-1", str(seq), *args, "--import", "cli_tools")
        assert result.exit_code == 2, result.output
        assert "nothing was journaled" in result.output
    assert sg.entries("order-1") == before
    assert [r.journal_seq for r in sg.pending_approvals("order-1")] == [seq]
    done = cli(runner, url, "approvals", "reject", "order-1", str(seq), "--reason", "no", "--as", "frank")
    assert done.exit_code == 0, done.output
    assert approver_lines(sg, "order-1") == ["approver=frank"]


@pytest.mark.parametrize("text", BAD_TEXT, ids=repr)
def test_approve_and_resume_refuse_a_name_that_would_add_a_line(
    runner: CliRunner, url: str, sg: Sagacity, tools: ModuleType, text: str
) -> None:
    """`approvals approve --as` and `approvals resume --as` (journaled as resumed by=) refuse it."""
    seq = suspended(sg, tools, "order-2")
    assert cli(runner, url, "approvals", "approve", "order-2", str(seq), "--as", text).exit_code == 2
    assert cli(runner, url, "approvals", "approve", "order-2", str(seq), "--as", "grace").exit_code == 0
    approved = sg.entries("order-2")
    resume = ["approvals", "resume", "order-2", str(seq), "--import", "cli_tools"]
    assert cli(runner, url, *resume, "--as", text).exit_code == 2
    assert sg.entries("order-2") == approved
    assert cli(runner, url, *resume, "--as", "heidi").exit_code == 0
    assert [e.payload for e in sg.entries("order-2") if e.payload.startswith("resumes")] == [
        f"resumes seq={seq} by=heidi"
    ]
    assert approver_lines(sg, "order-2") == ["approver=grace"]


@pytest.mark.parametrize("text", BAD_TEXT, ids=repr)
def test_resolve_refuses_a_note_or_name_that_would_add_a_line(
    runner: CliRunner, url: str, sg: Sagacity, text: str
) -> None:
    """`sagas resolve --reason/--as` with a line break exits 2 and the call stays in doubt."""
    seq = sg.journal.append("crashed", "cli_reserve", Phase.INTENT, '{"sku":"SKU-7","quantity":1}').seq
    for args in (["--reason", text, "--as", "hank"], ["--reason", "gone", "--as", text]):
        result = cli(runner, url, "sagas", "resolve", "crashed", str(seq), "--did-not-happen", *args)
        assert result.exit_code == 2, result.output
    assert [e.seq for e in sg.entries("crashed")] == [seq]
    result = cli(
        runner,
        url,
        "sagas",
        "resolve",
        "crashed",
        str(seq),
        "--did-not-happen",
        "--reason",
        "gone",
        "--as",
        "hank",
    )
    assert result.exit_code == 0, result.output
    [decision] = [e for e in sg.entries("crashed") if e.tool_name == "approval-gate"]
    assert parse_decision_payload(decision.payload) == ("hank", "gone")


@pytest.mark.parametrize("seq", ["4_0", "4.0", " 4", "+4", "٤", "0x4", str(2**63), "0"])
def test_a_seq_not_written_in_digits_is_a_usage_error(
    runner: CliRunner, url: str, sg: Sagacity, tools: ModuleType, seq: str
) -> None:
    """approve/reject/resume/show/resolve take SEQ in digits 1 to 2^63-1 only: exit 2, nothing done."""
    gate = suspended(sg, tools, "order-3")
    assert gate == 4  # after the saga's START and a call
    before = sg.entries("order-3")
    for args in (
        ["approvals", "approve", "order-3", seq, "--as", "ivan"],
        ["approvals", "reject", "order-3", seq, "--as", "ivan", "--reason", "no"],
        ["approvals", "resume", "order-3", seq, "--as", "ivan"],
        ["approvals", "show", "order-3", seq],
        ["sagas", "resolve", "order-3", seq, "--happened", "--as", "ivan"],
    ):
        result = cli(runner, url, *args)
        assert result.exit_code == 2, (args, result.output)
        assert "SEQ" in result.output
    assert sg.entries("order-3") == before
    assert cli(runner, url, "approvals", "approve", "order-3", "04", "--as", "ivan").exit_code == 0


@pytest.mark.parametrize(
    "option", [["--limit", "5.0"], ["--limit", "1_0"], ["--limit", " 1"], ["--limit", "-0"]]
)
def test_sagas_list_paging_takes_digits_only(
    runner: CliRunner, url: str, sg: Sagacity, option: list[str]
) -> None:
    """`sagas list --limit` is digits only, like the HTTP API's."""
    result = cli(runner, url, "sagas", "list", *option)
    assert result.exit_code == 2, result.output
    assert option[0] in result.output
