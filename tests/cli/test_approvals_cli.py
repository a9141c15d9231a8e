"""`sagacity approvals`: list, show, approve, reject and resume against a SQLite journal on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from click.testing import CliRunner, Result

from sagacity import Phase, Sagacity, SagaStatus
from sagacity._payloads import parse_decision_payload, sha256_hex
from sagacity.cli import main
from sagacity.tools import registry

HERE = Path(__file__).parent


def cli(runner: CliRunner, db_url: str, *args: str, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(main, [*args, "--db", db_url], env=env, catch_exceptions=False)


def gate(sg: Sagacity, tools: ModuleType, saga_id: str = "order-1", amount: str = "100.00") -> int:
    """Run an order that suspends on the wire transfer; the gate's seq."""
    result = sg.run(saga_id, tools.gated_order, "SKU-1", amount)
    assert result.status is SagaStatus.AWAITING_APPROVAL
    return result.awaiting[0].journal_seq


def decisions(sg: Sagacity, saga_id: str, phase: Phase) -> list[str]:
    """Approver identities of the saga's decision entries with this phase."""
    return [
        parse_decision_payload(e.payload)[0]
        for e in sg.entries(saga_id)
        if e.tool_name == "approval-gate" and e.phase == phase
    ]


def test_list_shows_pending_requests_as_table_and_json(runner: CliRunner, db_url: str, sg, tools) -> None:
    """`approvals list` names each pending request; `--json` gives the HTTP API's field names."""
    seq = gate(sg, tools, "order-1")
    gate(sg, tools, "order-2", "5.00")
    table = cli(runner, db_url, "approvals", "list")
    assert table.exit_code == 0
    assert "order-1" in table.output
    assert "order-2" in table.output
    assert "cli_wire" in table.output
    listed = cli(runner, db_url, "approvals", "list", "--saga", "order-1", "--json")
    data = json.loads(listed.output)["approvals"]
    assert [(r["sagaId"], r["journalSeq"], r["toolName"]) for r in data] == [("order-1", seq, "cli_wire")]
    assert data[0]["inputHash"] == sha256_hex(data[0]["input"])
    assert data[0]["approvers"] == []
    assert data[0]["readyToResume"] is False


def test_list_says_when_nothing_is_pending(runner: CliRunner, db_url: str, sg, tools) -> None:
    """An empty request table prints a sentence, not an empty table, and `--json` prints []."""
    sg.run("done", tools.plain_order)
    assert "no pending approval requests" in cli(runner, db_url, "approvals", "list").output
    assert json.loads(cli(runner, db_url, "approvals", "list", "--json").output)["approvals"] == []


def test_show_prints_payload_hash_and_journal(runner: CliRunner, db_url: str, sg, tools) -> None:
    """`approvals show` pretty-prints the payload with its SHA-256 and lists the journal so far."""
    seq = gate(sg, tools, amount="250.00")
    result = cli(runner, db_url, "approvals", "show", "order-1", str(seq))
    assert result.exit_code == 0
    request = sg.pending_approvals("order-1")[0]
    assert request.input_hash in result.output
    assert '"amount": "250.00"' in result.output  # pretty-printed, not the compact journal form
    assert "payload and hash match" in result.output
    assert "cli_reserve" in result.output  # the journal so far
    data = json.loads(cli(runner, db_url, "approvals", "show", "order-1", str(seq), "--json").output)
    assert data["matchesJournal"] is True
    assert data["verification"]["valid"] is True
    assert data["sagaStatus"] == "AWAITING_APPROVAL"
    assert [e["phase"] for e in data["journal"]] == [
        "INTENT",
        "INTENT",
        "EXECUTED",
        "AWAITING_APPROVAL",
        "EXECUTED",
    ]  # START ... gate, END
    assert data["journal"][0]["toolName"] == "sagacity:saga"  # the saga's START


def test_show_unknown_request_says_what_the_journal_knows(runner: CliRunner, db_url: str, sg, tools) -> None:
    """Showing a seq that is not a gate, or a rejected one, exits 2 with the journal's account."""
    seq = gate(sg, tools)
    not_gate = cli(runner, db_url, "approvals", "show", "order-1", "1")
    assert not_gate.exit_code == 2
    assert "not an approval request" in not_gate.output
    sg.reject("order-1", seq, "carol", "wrong account")
    rejected = cli(runner, db_url, "approvals", "show", "order-1", str(seq))
    assert rejected.exit_code == 2
    assert "rejected by carol: wrong account" in rejected.output


def test_approve_resume_completes_the_saga(runner: CliRunner, db_url: str, sg, tools) -> None:
    """approve then resume through the CLI runs the wire transfer once and the saga COMPLETES."""
    seq = gate(sg, tools)
    approved = cli(runner, db_url, "approvals", "approve", "order-1", str(seq), "--as", "alice@example.com")
    assert approved.exit_code == 0, approved.output
    assert "approving is not executing" in approved.output
    assert tools.EFFECTS == ["reserved SKU-1"]  # approving ran nothing
    resumed = cli(
        runner, db_url, "approvals", "resume", "order-1", str(seq), "--import", "cli_tools", "--as", "ops"
    )
    assert resumed.exit_code == 0, resumed.output
    assert "COMPLETED" in resumed.output
    assert tools.EFFECTS == ["reserved SKU-1", "wired 100.00 to ACME"]
    assert sg.status("order-1") is SagaStatus.COMPLETED
    assert decisions(sg, "order-1", Phase.APPROVED) == ["alice@example.com"]
    assert [e.payload for e in sg.entries("order-1") if e.payload.startswith("resumes")] == [
        f"resumes seq={seq} by=ops"
    ]
    again = cli(runner, db_url, "approvals", "resume", "order-1", str(seq), "--import", "cli_tools")
    assert again.exit_code == 2
    assert "already resumed" in again.output
    assert tools.EFFECTS.count("wired 100.00 to ACME") == 1


def test_approve_defaults_to_the_os_user(runner: CliRunner, db_url: str, sg, tools) -> None:
    """Without --as the decision is journaled under the operating-system user (LOGNAME first)."""
    seq = gate(sg, tools)
    result = cli(runner, db_url, "approvals", "approve", "order-1", str(seq), env={"LOGNAME": "os-operator"})
    assert result.exit_code == 0, result.output
    assert decisions(sg, "order-1", Phase.APPROVED) == ["os-operator"]


def test_approve_refuses_an_empty_identity(runner: CliRunner, db_url: str, sg, tools) -> None:
    """`--as ""` (or blank) is refused with exit 2 and nothing is journaled."""
    seq = gate(sg, tools)
    before = len(sg.entries("order-1"))
    for blank in ("", "   "):
        result = cli(runner, db_url, "approvals", "approve", "order-1", str(seq), "--as", blank)
        assert result.exit_code == 2
        assert "named identity" in result.output
    assert len(sg.entries("order-1")) == before


def test_approve_json_has_the_decision_shape(runner: CliRunner, db_url: str, sg, tools) -> None:
    """`approve --json` prints the HTTP API's decision fields with the journaled approver."""
    seq = gate(sg, tools)
    out = cli(runner, db_url, "approvals", "approve", "order-1", str(seq), "--as", "dana", "--json").output
    data = json.loads(out)
    assert data["sagaId"] == "order-1"
    assert data["journalSeq"] == seq
    assert data["approved"] is True
    assert data["approverIdentity"] == "dana"
    assert data["decidedAt"].endswith("Z")


def test_approving_twice_is_an_error(runner: CliRunner, db_url: str, sg, tools) -> None:
    """A second approval by the same person exits 2 and journals no second decision."""
    seq = gate(sg, tools)
    assert cli(runner, db_url, "approvals", "approve", "order-1", str(seq), "--as", "erin").exit_code == 0
    again = cli(runner, db_url, "approvals", "approve", "order-1", str(seq), "--as", "erin")
    assert again.exit_code == 2
    assert decisions(sg, "order-1", Phase.APPROVED) == ["erin"]


def test_four_eyes_needs_two_people_before_resume(runner: CliRunner, db_url: str, sg, tools) -> None:
    """A tool requiring two approvers: one approval says 1 of 2 and resume is refused until the second."""
    seq = sg.run("payout", tools.four_eyes_order).awaiting[0].journal_seq
    first = cli(
        runner, db_url, "approvals", "approve", "payout", str(seq), "--as", "alice", "--import", "cli_tools"
    )
    assert first.exit_code == 0, first.output
    assert "1 of 2 approvals" in first.output
    listed = json.loads(cli(runner, db_url, "approvals", "list", "--json").output)["approvals"]
    assert listed[0]["approvers"] == ["alice"]
    assert (listed[0]["approvalsRequired"], listed[0]["readyToResume"]) == (2, False)
    early = cli(runner, db_url, "approvals", "resume", "payout", str(seq), "--import", "cli_tools")
    assert early.exit_code == 2
    assert "1 of 2" in early.output
    second = cli(
        runner, db_url, "approvals", "approve", "payout", str(seq), "--as", "bob", "--import", "cli_tools"
    )
    assert second.exit_code == 0, second.output
    resumed = cli(runner, db_url, "approvals", "resume", "payout", str(seq), "--import", "cli_tools")
    assert resumed.exit_code == 0, resumed.output
    assert tools.EFFECTS == ["paid out 50000.00"]
    assert decisions(sg, "payout", Phase.APPROVED) == ["alice", "bob"]


def test_reject_compensates_and_records_the_reason(runner: CliRunner, db_url: str, sg, tools) -> None:
    """reject journals REJECTED under --as with the reason and compensates the reservation."""
    seq = gate(sg, tools)
    result = cli(
        runner,
        db_url,
        "approvals",
        "reject",
        "order-1",
        str(seq),
        "--reason",
        "wrong account",
        "--as",
        "frank",
    )
    assert result.exit_code == 0, result.output
    assert "REJECTED" in result.output
    assert tools.EFFECTS == ["reserved SKU-1", "released SKU-1"]
    assert sg.status("order-1") is SagaStatus.REJECTED
    rejected = [
        e for e in sg.entries("order-1") if e.tool_name == "approval-gate" and e.phase == Phase.REJECTED
    ]
    assert [parse_decision_payload(e.payload) for e in rejected] == [("frank", "wrong account")]


def test_reject_requires_a_reason(runner: CliRunner, db_url: str, sg, tools) -> None:
    """reject without --reason is a usage error and the request stays pending."""
    seq = gate(sg, tools)
    result = runner.invoke(main, ["approvals", "reject", "order-1", str(seq), "--db", db_url, "--as", "x"])
    assert result.exit_code == 2
    assert len(sg.pending_approvals("order-1")) == 1


def test_reject_without_the_tools_refuses_before_writing(runner: CliRunner, db_url: str, sg, tools) -> None:
    """When a step to compensate has no registered tool, reject writes nothing and names the tool."""
    seq = gate(sg, tools)
    before = sg.entries("order-1")
    with registry.isolated():
        registry.unregister("cli_reserve")
        result = cli(
            runner, db_url, "approvals", "reject", "order-1", str(seq), "--reason", "no", "--as", "g"
        )
    assert result.exit_code == 2
    assert "cli_reserve" in result.output
    assert "--import" in result.output
    assert sg.entries("order-1") == before
    assert len(sg.pending_approvals("order-1")) == 1


def test_resume_without_the_tool_refuses(runner: CliRunner, db_url: str, sg, tools) -> None:
    """Resuming a tool not registered here exits 2, names --import, and leaves the request pending."""
    seq = gate(sg, tools)
    sg.approve("order-1", seq, "alice")
    before = sg.entries("order-1")
    with registry.isolated():
        registry.unregister("cli_wire")
        result = cli(runner, db_url, "approvals", "resume", "order-1", str(seq))
    assert result.exit_code == 2
    assert "--import" in result.output
    assert sg.entries("order-1") == before
    assert len(sg.pending_approvals("order-1")) == 1


def test_resume_without_approval_is_refused(runner: CliRunner, db_url: str, sg, tools) -> None:
    """Resuming an unapproved request exits 2 and the tool never runs."""
    seq = gate(sg, tools)
    result = cli(runner, db_url, "approvals", "resume", "order-1", str(seq), "--import", "cli_tools")
    assert result.exit_code == 2
    assert "no approval" in result.output
    assert "wired 100.00 to ACME" not in tools.EFFECTS


def test_resume_with_a_changed_payload_writes_nothing(runner: CliRunner, db_url: str, sg, tools) -> None:
    """A payload that differs from the approved one is refused by the CLI before any write."""
    seq = gate(sg, tools)
    sg.approve("order-1", seq, "alice")
    before = sg.entries("order-1")
    result = cli(
        runner,
        db_url,
        "approvals",
        "resume",
        "order-1",
        str(seq),
        "--payload",
        '{"amount":"9999.00","to":"ACME"}',
    )
    assert result.exit_code == 2
    assert "differs from the approved" in result.output
    assert sg.entries("order-1") == before
    assert "wired 9999.00 to ACME" not in tools.EFFECTS


def test_resume_with_reject_on_mismatch_compensates(runner: CliRunner, db_url: str, sg, tools) -> None:
    """With --reject-on-mismatch a changed payload is submitted: REJECTED, compensated, exit 1."""
    seq = gate(sg, tools)
    sg.approve("order-1", seq, "alice")
    result = cli(
        runner,
        db_url,
        "approvals",
        "resume",
        "order-1",
        str(seq),
        "--payload",
        '{"amount":"9999.00","to":"ACME"}',
        "--reject-on-mismatch",
        "--json",
    )
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["status"] == "REJECTED"  # a payload refused at resume is a rejection
    assert "PayloadMismatchError" in data["reason"]
    assert tools.EFFECTS == ["reserved SKU-1", "released SKU-1"]


def test_resume_from_a_payload_file_is_byte_exact(
    runner: CliRunner, db_url: str, sg, tools, tmp_path
) -> None:
    """--payload-file is read byte for byte: the approved bytes resume, a trailing newline does not."""
    seq = gate(sg, tools)
    sg.approve("order-1", seq, "alice")
    approved = sg.pending_approvals("order-1")[0].input
    with_newline = tmp_path / "newline.json"
    with_newline.write_bytes((approved + "\n").encode())
    refused = cli(
        runner, db_url, "approvals", "resume", "order-1", str(seq), "--payload-file", str(with_newline)
    )
    assert refused.exit_code == 2
    exact = tmp_path / "exact.json"
    exact.write_bytes(approved.encode())
    result = cli(
        runner, db_url, "approvals", "resume", "order-1", str(seq), "--payload-file", str(exact), "--json"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "sagaId": "order-1",
        "status": "COMPLETED",
        "result": "wire 100.00->ACME",
    }


def test_payload_and_payload_file_are_exclusive(runner: CliRunner, db_url: str, sg, tools, tmp_path) -> None:
    """Giving both --payload and --payload-file is a usage error."""
    seq = gate(sg, tools)
    f = tmp_path / "p.json"
    f.write_text("{}")
    result = runner.invoke(
        main,
        [
            "approvals",
            "resume",
            "order-1",
            str(seq),
            "--payload",
            "{}",
            "--payload-file",
            str(f),
            "--db",
            db_url,
        ],
    )
    assert result.exit_code == 2
    assert "not both" in result.output


def test_a_tampered_request_row_is_refused(runner: CliRunner, db_url: str, sg, tools) -> None:
    """approve refuses when the request row's payload was swapped after the gate was journaled."""
    seq = gate(sg, tools)
    request = sg.pending_approvals("order-1")[0]
    forged_input = '{"amount":"9999.00","to":"MALLORY"}'
    sg.store.delete_approval_request("order-1", seq)
    sg.store.put_approval_request(
        type(request)(
            request.saga_id,
            seq,
            request.tool_name,
            forged_input,
            sha256_hex(forged_input),
            request.created_at,
        )
    )
    shown = cli(runner, db_url, "approvals", "show", "order-1", str(seq))
    assert "MISMATCH" in shown.output
    result = cli(runner, db_url, "approvals", "approve", "order-1", str(seq), "--as", "alice")
    assert result.exit_code == 2
    assert "differs from the journaled" in result.output
    assert decisions(sg, "order-1", Phase.APPROVED) == []


def test_import_of_a_missing_module_is_a_usage_error(runner: CliRunner, db_url: str, sg, tools) -> None:
    """--import of a module that does not exist exits 2 naming the module."""
    seq = gate(sg, tools)
    result = runner.invoke(
        main, ["approvals", "resume", "order-1", str(seq), "--import", "no_such_module_xyz", "--db", db_url]
    )
    assert result.exit_code == 2
    assert "no_such_module_xyz" in result.output


def test_a_new_process_approves_and_resumes_with_import(db_url: str, sg, tools, tmp_path: Path) -> None:
    """`python -m sagacity.cli` in a fresh process imports the tool module and completes the saga."""
    seq = gate(sg, tools)
    env = {**os.environ, "SAGACITY_URL": db_url, "PYTHONPATH": str(HERE)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sagacity.cli", *args],
            env=env,
            check=False,
            timeout=120,
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )

    approved = run("approvals", "approve", "order-1", str(seq), "--as", "alice")
    assert approved.returncode == 0, approved.stderr
    resumed = run("approvals", "resume", "order-1", str(seq), "--import", "cli_tools")
    assert resumed.returncode == 0, resumed.stderr
    assert sg.status("order-1") is SagaStatus.COMPLETED
    assert [(e.tool_name, e.phase) for e in sg.entries("order-1")][-3:] == [
        ("cli_wire", Phase.INTENT),
        ("cli_wire", Phase.EXECUTED),
        ("sagacity:saga", Phase.EXECUTED),
    ]


def test_the_requester_may_not_approve_their_own_four_eyes_request(
    runner: CliRunner, db_url: str, sg, tools
) -> None:
    """`approvals list/show` name who asked; `approve --as` the requester is refused (exit 1,
    nothing journaled); two other people approve."""
    from sagacity import acting_as

    with acting_as("alice@example.com"):
        seq = sg.run("self-payout", tools.four_eyes_order).awaiting[0].journal_seq
    listed = cli(runner, db_url, "approvals", "list")
    assert "alice@example.com" in listed.output
    shown = cli(runner, db_url, "approvals", "show", "self-payout", str(seq))
    assert "may not approve it" in shown.output
    as_json = json.loads(cli(runner, db_url, "approvals", "list", "--json").output)["approvals"]
    assert as_json[0]["requester"] == "alice@example.com"
    before = len(sg.entries("self-payout"))
    own = runner.invoke(
        main, ["approvals", "approve", "self-payout", str(seq), "--as", "alice@example.com", "--db", db_url]
    )
    assert own.exit_code == 2, own.output  # a refusal, as every refused decision
    assert "requester_may_not_approve" in own.output
    assert len(sg.entries("self-payout")) == before
    for who in ("bob@example.com", "carol@example.com"):
        assert (
            cli(runner, db_url, "approvals", "approve", "self-payout", str(seq), "--as", who).exit_code == 0
        )
    assert decisions(sg, "self-payout", Phase.APPROVED) == ["bob@example.com", "carol@example.com"]
