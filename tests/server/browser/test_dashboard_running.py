"""The dashboard shows a saga a worker process runs as RUNNING (its liveness lease), not in doubt,
and in doubt once that worker is killed."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagacity import Sagacity
from sagacity.server import TokenAuth

from .conftest import TOKEN, serve, sign_in


def test_a_saga_running_in_a_worker_shows_running(
    page: Any, playwright_api: Any, tmp_path: Path, live_worker: Callable[..., subprocess.Popen[str]]
) -> None:
    """A worker's call in flight: RUNNING in the list, its counter and its page; after kill -9,
    IN DOUBT with the call highlighted."""
    url = f"sqlite:///{tmp_path}/journal.db"
    child = live_worker(url, "walker", in_flight=True)
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
