"""The built wheel carries everything (DDL files included): installed in a fresh venv, the demo runs."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.slow


def test_wheel_installs_and_runs_the_demo(tmp_path: Path) -> None:
    """pip wheel -> fresh venv -> `sagacity demo` exits 0 and verifies four chains from package data."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
        timeout=300,
    )
    [wheel] = wheels.glob("sagacity-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=300)
    demo = subprocess.run(
        [str(env_dir / "bin" / "sagacity"), "demo", "--db", f"sqlite:///{tmp_path}/demo.db"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=tmp_path,
    )
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.count("chain intact") == 4
    verify = subprocess.run(
        [str(env_dir / "bin" / "sagacity"), "verify", "--db", f"sqlite:///{tmp_path}/demo.db", "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stderr
    document = json.loads(verify.stdout)
    assert (document["valid"], document["checked"]) == (True, 4)
    assert [v["valid"] for v in document["sagas"]] == [True] * 4
