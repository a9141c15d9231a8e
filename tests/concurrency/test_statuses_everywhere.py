"""Every status, and a broken chain, the same through the library, the CLI and HTTP, read from a
process that wrote none of it.

Five sagas on one store, made by real processes: ``done`` completed; ``refused`` held for approval
and rejected by the CLI in its own process (REJECTED, not COMPENSATED); ``crashed`` a worker
killed (-9) in a call, then resolved by a person with ``--happened`` (ABANDONED: its agent never
finished, so not COMPLETED); ``forged`` completed, then a row edited behind the library's back
(a broken chain, shown in every list and counter once a read has verified it); ``walker`` run by a
living worker between calls (RUNNING). Dashboards read the same HTTP (tests/server/browser/
test_dashboard_statuses.py shows it in Chromium).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sagacity import Sagacity, SagaStatus
from sagacity.tools import registry

HERE = Path(__file__).parent
CLI = Path(sys.executable).with_name("sagacity")
TOKEN = "statuses-token-0123456789"
EXPECTED = {
    "done": "COMPLETED",
    "refused": "REJECTED",
    "crashed": "ABANDONED",
    "forged": "COMPLETED",
    "walker": "RUNNING",
}
_EDIT = "UPDATE side_effect_journal SET payload = 'step 9' WHERE saga_id = 'forged' AND seq = 3"


def _cli(url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """One ``sagacity`` command in its own process."""
    return subprocess.run(
        [str(CLI), *args, "--db", url],
        capture_output=True,
        text=True,
        check=check,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            "COLUMNS": "200",
        },
        timeout=120,
    )


@pytest.fixture
def five_sagas(
    durable_url: str,
    lease_gone: Callable[[Sagacity, str], None],
    live_worker: Callable[..., subprocess.Popen[str]],
    behind_the_library: Callable[[str, str], int],
) -> str:
    """The store with the five sagas above; ``walker``'s worker lives until the test ends."""
    with registry.isolated():
        sys.path.insert(0, str(HERE))
        try:
            import live_worker as tools
        finally:
            sys.path.remove(str(HERE))
        with Sagacity(durable_url) as sg:
            sg.run("done", tools.live_step, 1)
            sg.run("forged", lambda: tools.live_step(2))
            assert sg.run("refused", tools.live_wire, "9.99").status is SagaStatus.AWAITING_APPROVAL
            [request] = sg.pending_approvals("refused")
            refused = _cli(
                durable_url, "approvals", "reject", "refused", str(request.journal_seq),
                "--reason", "not this payee", "--as", "bob",
            )  # fmt: skip
            assert "REJECTED" in refused.stdout

            crashed = live_worker(durable_url, "crashed", in_flight=True)
            crashed.send_signal(signal.SIGKILL)
            crashed.wait(30)
            lease_gone(sg, "crashed")
            [call] = sg.in_doubt("crashed")
            resolved = _cli(
                durable_url, "sagas", "resolve", "crashed", str(call.seq), "--happened",
                "--result", "done by hand", "--reason", "checked the ledger", "--as", "carol",
                check=False,
            )  # fmt: skip
            assert "ABANDONED" in resolved.stdout
            # Settled no further than ABANDONED: it still needs a human, so exit 1 (#33 item 26).
            assert resolved.returncode == 1, resolved.stderr
    assert behind_the_library(durable_url, _EDIT) == 1
    live_worker(durable_url, "walker")
    return durable_url


def _http(url: str, *paths: str) -> list[Any]:
    """GET each path from the HTTP API serving this store (its own Sagacity, as a server has)."""
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    import httpx

    from sagacity.server import TokenAuth, create_app

    async def get_all(sg: Sagacity) -> list[Any]:
        app = create_app(sg, auth=TokenAuth({TOKEN: {"name": "dana", "roles": ["auditor"]}}))
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            answers = []
            for path in paths:
                answer = await client.get(f"/sagacity/{path}", headers={"Authorization": f"Bearer {TOKEN}"})
                assert answer.status_code == 200, answer.text
                answers.append(answer.json())
            return answers

    with Sagacity(url) as sg:
        return asyncio.run(get_all(sg))


def test_statuses_and_a_broken_chain_read_alike_everywhere(five_sagas: str) -> None:
    url = five_sagas
    # The chain's break is found by a verification in its own process (the CLI's): SQLite's file
    # was edited in place, which no trigger sees; the server stores' triggers saw it already.
    verified = _cli(url, "verify", "forged", check=False)
    assert verified.returncode == 1, verified.stdout + verified.stderr

    with Sagacity(url) as sg:  # the library, in a process that ran none of the five
        assert {s.saga_id: str(s.status) for s in sg.sagas()} == EXPECTED
        assert {sid: str(sg.status(sid)) for sid in EXPECTED} == EXPECTED
        assert {s.saga_id: s.chain_broken_at for s in sg.sagas() if not s.chain_valid} == {"forged": 2}
        assert [s.saga_id for s in sg.sagas(broken_chain=True)] == ["forged"]
        assert sg.saga_counts() == {
            SagaStatus.COMPLETED: 2,
            SagaStatus.REJECTED: 1,
            SagaStatus.ABANDONED: 1,
            SagaStatus.RUNNING: 1,
        }
        assert sg.broken_chain_count() == 1
        assert [s.saga_id for s in sg.sagas(status="ABANDONED")] == ["crashed"]
        assert [s.saga_id for s in sg.sagas(status="REJECTED")] == ["refused"]
        assert [s.saga_id for s in sg.sagas(status="RUNNING")] == ["walker"]
        assert sg.view("crashed").status is SagaStatus.ABANDONED
        assert sg.in_doubt() == []

    listed = json.loads(_cli(url, "sagas", "list", "--json").stdout)["sagas"]
    assert {row["sagaId"]: row["status"] for row in listed} == EXPECTED
    assert {
        row["sagaId"]: (row["chainValid"], row["chainBrokenAt"])
        for row in listed
        if row["sagaId"] in ("forged", "done")
    } == {
        "forged": (False, 2),
        "done": (True, None),
    }
    broken = json.loads(_cli(url, "sagas", "list", "--broken-chain", "--json").stdout)["sagas"]
    assert [row["sagaId"] for row in broken] == ["forged"]
    table = _cli(url, "sagas", "list").stdout
    [forged_line] = [line for line in table.splitlines() if "forged" in line]
    assert "BROKEN at seq 3" in forged_line
    for status, saga_id in (("abandoned", "crashed"), ("rejected", "refused"), ("running", "walker")):
        only = json.loads(_cli(url, "sagas", "list", "--status", status, "--json").stdout)["sagas"]
        assert [row["sagaId"] for row in only] == [saga_id], status

    page, overview, chain_page, detail = _http(
        url, "sagas", "overview", "sagas?brokenChain=true", "sagas/crashed"
    )
    assert {row["sagaId"]: row["status"] for row in page["sagas"]} == EXPECTED
    assert {row["sagaId"]: row["chainValid"] for row in page["sagas"]} == {
        sid: sid != "forged" for sid in EXPECTED
    }
    assert overview == {
        "counts": {"ABANDONED": 1, "COMPLETED": 2, "REJECTED": 1, "RUNNING": 1},
        "total": 5,
        "brokenChains": 1,
    }
    assert [(row["sagaId"], row["chainBrokenAt"]) for row in chain_page["sagas"]] == [("forged", 2)]
    assert detail["status"] == "ABANDONED"
