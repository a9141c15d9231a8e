"""The CLI: ``sagas reconcile``, ``sagas audit-effects`` and ``doctor``'s count of calls a
reconciler could settle, each in a process of its own importing the tools with ``--import``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from pay_tools import pay
from payments import Payments
from tests.cli.conftest import cli_process

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.chain import idempotency_key

HERE = Path(__file__).parent


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, run here so that ``--import pay_tools`` finds the tools."""
    return cli_process(url, HERE, *args)


def test_doctor_counts_reconcile_settles_audit_reports(
    sqlite_url: str, payments: Payments, pay_tools: object
) -> None:
    with Sagacity(sqlite_url) as sg:
        seq = sg.journal.append("cli-sent", "send_transfer", Phase.INTENT, '{"amount":5,"to":"x"}').seq
        payments.transfers[idempotency_key("cli-sent", seq)] = {"id": "tr_9", "amount": 5, "to": "x"}
        sg.journal.append("cli-held", "reserve", Phase.INTENT, '{"sku":"SKU-1"}')

    doctor = cli(sqlite_url, "doctor", "--older-than", "0s", "--import", "pay_tools", "--json")
    assert doctor.returncode == 1, doctor.stderr
    diagnosis = json.loads(doctor.stdout)
    assert diagnosis["reconcilable"] == 1
    [sent] = [f for f in diagnosis["findings"] if f["sagaId"] == "cli-sent"]
    assert "sagacity sagas reconcile cli-sent" in sent["action"]

    done = cli(sqlite_url, "sagas", "reconcile", "--import", "pay_tools", "--json")
    assert done.returncode == 1, done.stderr  # the hold has no reconciler: still in doubt
    answers = {r["sagaId"]: r for r in json.loads(done.stdout)}
    assert answers["cli-sent"] | {"status": None} == {
        "sagaId": "cli-sent",
        "seq": seq,
        "toolName": "send_transfer",
        "kind": "call",
        "answer": "happened",
        "reconciler": "find_transfer",
        "evidence": "transfer tr_9 to x",
        "settled": True,
        "outcome": "EXECUTED",
        "status": None,
    }
    assert (answers["cli-held"]["answer"], answers["cli-held"]["settled"]) == ("no_reconciler", False)
    again = cli(sqlite_url, "sagas", "reconcile", "cli-sent", "--import", "pay_tools")
    assert (again.returncode, again.stdout.strip()) == (0, "no in-doubt calls")

    with Sagacity(sqlite_url) as sg:
        assert sg.run("cli-paid", pay, "cli-paid").status is SagaStatus.COMPLETED
    audit = cli(sqlite_url, "sagas", "audit-effects", "cli-paid", "--as", "ann", "--import", "pay_tools")
    assert audit.returncode == 1, audit.stderr  # the hold cannot be checked: not all CONFIRMED
    rows = [line.replace("│", " ").split() for line in audit.stdout.splitlines() if "cli-paid" in line]
    assert [r[2:5] for r in rows] == [
        ["reserve", "EXECUTED", "UNVERIFIABLE"],
        ["send_transfer", "EXECUTED", "CONFIRMED"],
    ]
    with Sagacity(sqlite_url) as sg:
        assert [e.payload.split("\n")[0::3] for e in sg.entries("sagacity:audit")] == [
            ["verdict=UNVERIFIABLE", "auditor=ann"],
            ["verdict=CONFIRMED", "auditor=ann"],
        ]
