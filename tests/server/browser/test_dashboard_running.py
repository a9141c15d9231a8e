"""The dashboard shows a saga a worker process runs as RUNNING (its liveness lease), not in doubt,
and in doubt once that worker is killed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from sagacity import Sagacity
from sagacity.server import TokenAuth

from .conftest import TOKEN, serve, sign_in

WORKER = Path(__file__).resolve().parents[2] / "concurrency" / "live_worker.py"


def test_a_saga_running_in_a_worker_shows_running(page: Any, playwright_api: Any, tmp_path: Path) -> None:
    """A worker's call in flight: RUNNING in the list, its counter and its page; after kill -9,
    IN DOUBT with the call highlighted."""
    url = f"sqlite:///{tmp_path}/journal.db"
    child = subprocess.Popen(
        [sys.executable, str(WORKER), url, "walker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdin is not None
        assert child.stdout.readline().strip() == "between"
        child.stdin.write("go on\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "in flight"
        auth = TokenAuth({TOKEN: {"name": "alice@example.com", "roles": ["approver", "auditor"]}})
        for dashboard in serve(Sagacity(url), auth=auth):
            expect = playwright_api.expect
            sign_in(page, dashboard)
            page.click('[data-nav="sagas"]')
            row = page.locator('table.sagas tr[data-saga="walker"]')
            expect(row).to_contain_text("RUNNING")
            expect(row).not_to_have_class("in-doubt")
            expect(page.locator("button.counter.RUNNING .count")).to_have_text("1")
            page.select_option("#status-filter", "RUNNING")
            expect(page.locator("table.sagas tbody tr")).to_have_count(1)
            row.locator("a").click()
            expect(page.locator(".saga-status")).to_contain_text("RUNNING")
            expect(page.locator(".timeline li.in-doubt")).to_have_count(0)
            child.send_signal(signal.SIGKILL)
            child.wait(30)
            page.reload()
            expect(page.locator(".saga-status")).to_contain_text("IN DOUBT")
            expect(page.locator(".timeline li.in-doubt")).to_contain_text("IN DOUBT: no outcome journaled")
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)
