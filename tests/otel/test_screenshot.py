"""scripts/trace_screenshot.py, which drew docs/img/otel-*.png from the SDK's exported spans,
still renders them: the page from the spans (always) and the PNGs in headless Chromium (browser)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import sagacity.otel

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "trace_screenshot.py"
CHROMIUM = os.environ.get("SAGACITY_CHROMIUM", "/usr/bin/chromium")


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trace_screenshot", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_the_three_linked_traces_of_the_approved_saga() -> None:
    script = _script()
    spans = script.record()
    assert not sagacity.otel.enabled()  # the script leaves telemetry as it found it
    page = script.render(spans, "payment-0721-approved", "caption")
    assert page.count("<section>") == 3
    for text in (
        "execute_tool send_wire_transfer",
        "AWAITING_APPROVAL",
        "sagacity.approve",
        "alice@example.com",
        "sagacity.resume",
        "links to trace 1: execute_tool send_wire_transfer",
    ):
        assert text in page, text


@pytest.mark.browser
def test_the_script_renders_the_pngs(tmp_path: Path) -> None:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        if os.environ.get("SAGACITY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"no Chromium at {CHROMIUM}")
        pytest.skip(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--chromium", CHROMIUM],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    made = sorted(p.name for p in tmp_path.glob("*.png"))
    assert made == sorted(p.name for p in (ROOT / "docs" / "img").glob("otel-*.png"))
    assert all((tmp_path / name).read_bytes().startswith(b"\x89PNG") for name in made)
