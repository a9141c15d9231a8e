"""`approvals reject` of a gate whose rejection lets the saga go on (``on_reject=continue``).

Issue #33 item 27: cli.md said such a saga ends COMPENSATED, where it reads COMPLETED; and the
command itself failed on an assertion after journaling the REJECTED. Run as its own process, on
every durable store.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.framework import CallPending, journaled_call, spec_of

from .conftest import cli_process


def gate_that_goes_on(sg: Sagacity, tools: ModuleType, saga_id: str) -> int:
    """A framework's run: a reversible step, then a wire held under ``on_reject="continue"``."""
    reserve, wire = spec_of(tools.cli_reserve), spec_of(tools.cli_wire)
    assert reserve is not None
    assert wire is not None
    with sg.saga(saga_id):
        journaled_call(reserve, '{"sku":"A","quantity":1}', "c1", lambda: tools.cli_reserve("A", 1))
        held = journaled_call(
            wire, '{"amount":"5.00","to":"ACME"}', "c2", lambda: "never", on_reject="continue"
        )
    assert isinstance(held, CallPending)
    return held.request.journal_seq


def test_reject_that_goes_on_reads_completed_and_exits_0(
    durable_url: str, tools: ModuleType, tmp_path: Path
) -> None:
    with Sagacity(durable_url) as sg:
        first = gate_that_goes_on(sg, tools, "goes-on-1")
        second = gate_that_goes_on(sg, tools, "goes-on-2")
    done = cli_process(
        durable_url, tmp_path, "approvals", "reject", "goes-on-1", str(first), "--reason", "no", "--as", "bob"
    )
    assert done.returncode == 0, done.stderr
    assert "saga goes-on-1 is COMPLETED" in done.stdout
    as_json = cli_process(
        durable_url, tmp_path,
        "approvals", "reject", "goes-on-2", str(second), "--reason", "no", "--as", "bob", "--json",
    )  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["approved"] is False
    with Sagacity(durable_url) as sg:
        for saga_id in ("goes-on-1", "goes-on-2"):
            assert sg.status(saga_id) is SagaStatus.COMPLETED
            phases = [e.phase for e in sg.entries(saga_id)]
            assert Phase.REJECTED in phases
            assert Phase.COMPENSATED not in phases
    assert not [effect for effect in tools.EFFECTS if effect.startswith("released")]
