"""The built wheel ships the dashboard: its static files are package data, not files of the checkout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "src" / "sagacity" / "server" / "static"


@pytest.mark.slow
def test_wheel_carries_every_dashboard_asset(tmp_path: Path) -> None:
    """The wheel carries sagacity/server/static/* byte for byte: an installed `sagacity serve` has its UI."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("sagacity-*.whl")
    assets = sorted(p.name for p in STATIC.iterdir() if p.is_file())
    assert {"index.html", "app.js", "style.css"} <= set(assets)
    with zipfile.ZipFile(wheel) as archive:
        for name in assets:
            assert archive.read(f"sagacity/server/static/{name}") == (STATIC / name).read_bytes()
