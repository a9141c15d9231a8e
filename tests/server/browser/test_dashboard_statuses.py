"""REJECTED, ABANDONED after a resolution, and a broken chain, as the dashboard shows them in
headless Chromium: the counters, the list's status and chain columns, the chain filter, the saga
page. The sagas are made on a SQLite file by this process and a worker killed (-9) in a call."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sagacity import Sagacity, SagaStatus
from sagacity.server import TokenAuth

from .conftest import TOKEN, off_loop, serve, sign_in

pytestmark = pytest.mark.browser


def _five_sagas(
    sg: Sagacity,
    tools: ModuleType,
    url: str,
    live_worker: Callable[..., subprocess.Popen[str]],
    behind_the_library: Callable[[str, str], int],
) -> None:
    sg.run("done", tools.srv_reserve, "SKU-1", 1)
    sg.run("forged", tools.srv_reserve, "SKU-2", 2)
    assert sg.run("refused", tools.transfer).status is SagaStatus.AWAITING_APPROVAL
    [request] = sg.pending_approvals("refused")
    sg.reject("refused", request.journal_seq, "bob@example.com", reason="unknown payee")
    crashed = live_worker(url, "crashed", in_flight=True)  # a worker killed (-9) in a call
    crashed.send_signal(signal.SIGKILL)
    crashed.wait(30)
    [call] = sg.in_doubt("crashed")
    sg.resolve_in_doubt("crashed", call.seq, happened=True, resolver="carol@example.com", reason="ledger")
    edit = "UPDATE side_effect_journal SET payload = 'forged' WHERE saga_id = 'forged' AND seq = 3"
    assert behind_the_library(url, edit) == 1
    assert not sg.verify("forged").valid  # SQLite's index learns of an in-place edit from a verification


@pytest.fixture
def statuses(
    tools: ModuleType,
    tmp_path: Path,
    live_worker: Callable[..., subprocess.Popen[str]],
    behind_the_library: Callable[[str, str], int],
) -> Iterator[tuple[str, Sagacity]]:
    url = f"sqlite:///{tmp_path}/journal.db"
    sg = Sagacity(url)
    off_loop(
        _five_sagas, sg, tools, url, live_worker, behind_the_library
    )  # Playwright's loop may run on this thread already
    auth = TokenAuth({TOKEN: {"name": "alice@example.com", "roles": ["approver", "auditor"]}})
    for dashboard in serve(sg, auth=auth):
        yield dashboard, sg


def test_statuses_and_a_broken_chain_on_the_dashboard(
    statuses: tuple[str, Sagacity], page: Any, playwright_api: Any
) -> None:
    url, sg = statuses
    expect = playwright_api.expect
    sign_in(page, url)
    page.goto(f"{url}#/sagas")
    for status, count in (("REJECTED", 1), ("ABANDONED", 1), ("COMPLETED", 2), ("COMPENSATED", 0)):
        expect(page.locator(f'button.counter[data-status="{status}"] .count')).to_have_text(str(count))
    expect(page.locator("#broken-counter .count")).to_have_text("1")
    for saga_id, status in (("done", "COMPLETED"), ("forged", "COMPLETED"), ("refused", "REJECTED")):
        expect(page.locator(f'tr[data-saga="{saga_id}"] .pill').first).to_have_text(status)
    expect(page.locator('tr[data-saga="crashed"] .pill').first).to_have_text("ABANDONED")
    forged = page.locator('tr[data-saga="forged"]')
    expect(forged.locator("td.chain")).to_have_text(
        "BROKEN at seq 3"
    )  # the seq edited, as the journal numbers it
    expect(forged).to_have_class("broken-chain")
    expect(page.locator('tr[data-saga="done"] td.chain')).to_have_text("ok")

    page.click("#broken-counter")
    expect(page.locator("table.sagas tbody tr")).to_have_count(1)
    expect(page.locator('tr[data-saga="forged"]')).to_be_visible()
    assert "chain=broken" in page.url
    expect(page.locator("#broken-counter")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#matching")).to_have_text("1 saga whose hash chain is broken")
    page.click('button.counter[data-status="ABANDONED"]')
    expect(page.locator("table.sagas tbody tr")).to_have_count(1)
    expect(page.locator('tr[data-saga="crashed"]')).to_be_visible()
    assert "chain=broken" not in page.url

    page.goto(f"{url}#/saga/forged")
    expect(page.locator("#saga-head")).to_contain_text("chain BROKEN at seq 3")
    page.goto(f"{url}#/saga/crashed")
    expect(page.locator(".saga-status")).to_contain_text("ABANDONED")
    assert off_loop(sg.status, "crashed") is SagaStatus.ABANDONED
