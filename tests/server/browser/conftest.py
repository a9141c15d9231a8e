"""Fixtures for the dashboard in headless Chromium (Debian's, driven by Playwright): the app served
on a free port, a page, and helpers that keep blocking Sagacity calls off Playwright's event loop.

Skipped with a reason when Chromium or Playwright is missing, unless SAGACITY_REQUIRE_BROWSER=1 (CI).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

from sagacity import Sagacity, SagaResult
from sagacity.server import TokenAuth, create_app

CHROMIUM = os.environ.get("SAGACITY_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[3]
TOKEN = "browser-token-0123456789"
APPROVER_ONLY = "approver-only-token-012345"
ADMIN = "admin-token-0123456789abc"
T = TypeVar("T")


def _require_browser() -> Any:
    """Playwright's sync API, or a skip (a failure when SAGACITY_REQUIRE_BROWSER=1) saying what is missing."""
    missing = []
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        missing.append(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright import sync_api
    except ImportError:
        missing.append("Playwright (pip install playwright; no `playwright install` needed)")
        sync_api = None
    if missing:
        message = "browser tests need " + " and ".join(missing)
        if os.environ.get("SAGACITY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"SAGACITY_REQUIRE_BROWSER=1 but {message}")
        pytest.skip(message)
    return sync_api


@pytest.fixture(scope="module")
def playwright_api() -> Any:
    return _require_browser()


@pytest.fixture(scope="module")
def browser(playwright_api: Any) -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve(sg: Sagacity, **options: Any) -> Iterator[str]:
    """``create_app(sg, **options)`` on uvicorn in a background thread on a free loopback port,
    until the generator is closed; yields the dashboard's URL. Closes ``sg`` afterwards."""
    import uvicorn

    port = _free_port()
    config = uvicorn.Config(
        create_app(sg, **options), host="127.0.0.1", port=port, log_level="warning", lifespan="off", ws="none"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(400):  # until it listens (bounded)
        if server.started:
            break
        time.sleep(0.025)
    else:
        pytest.fail("uvicorn did not start")
    try:
        yield f"http://127.0.0.1:{port}/sagacity/ui/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sg.close()


@pytest.fixture
def served(tools: ModuleType) -> Iterator[tuple[str, Sagacity]]:
    """The app on uvicorn in a background thread on a free loopback port; (dashboard URL, its Sagacity)."""
    sg = Sagacity("memory://")
    auth = TokenAuth(
        {
            TOKEN: {"name": "alice@example.com", "roles": ["approver", "auditor"]},
            APPROVER_ONLY: {"name": "bob@example.com", "roles": ["approver"]},
            ADMIN: {"name": "root@example.com", "roles": ["admin"]},
        }
    )
    for url in serve(sg, auth=auth):
        yield url, sg


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def off_loop(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call`` in a worker thread: Playwright's sync API keeps an event loop running on this one,
    where blocking Sagacity calls refuse to run."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call, *args, **kwargs).result()


def run_saga(sg: Sagacity, saga_id: str, fn: Any, *args: Any, **kwargs: Any) -> SagaResult:
    """``sg.run`` off Playwright's event loop."""
    return off_loop(sg.run, saga_id, fn, *args, **kwargs)


def sign_in(page: Any, url: str, token: str = TOKEN) -> None:
    page.goto(url)
    page.fill("#token", token)
    page.click("#login")


def open_request(page: Any, saga_id: str) -> Any:
    """The card of ``saga_id``'s request in the approval queue, its row opened (as a click on
    the row's toggle does) unless it is open already, once its detail (GET /requests) is shown."""
    row = page.locator(f'tr.request[data-saga="{saga_id}"]')
    row.wait_for()
    if row.get_attribute("aria-expanded") != "true":
        row.locator("button.toggle").click()
    card = page.locator(f'section.approval[data-saga="{saga_id}"]')
    card.locator("aside.context .principal").wait_for()
    return card
