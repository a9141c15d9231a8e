"""The README's Python example runs as written, and its hash-chain text matches the code."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sagacity import Sagacity, SagaStatus, chain
from sagacity.tools import registry

README = Path(__file__).parent.parent / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_readme_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc_namespace: Callable[[str], dict[str, Any]]
) -> None:
    """Every python block of the README executes without error on a fresh SQLite journal."""
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "the README has no python example"
    namespace = doc_namespace("readme")
    with registry.isolated():
        for block in blocks:
            exec(compile(block, "README.md", "exec"), namespace)
    assert (tmp_path / "sagacity.db").exists()


def test_readme_example_runs_twice_as_a_script(tmp_path: Path) -> None:
    """The README's example, saved as a script and run twice in the same directory: the second
    run is a new saga in the same journal, not a second run appended to the first one."""
    script = tmp_path / "example.py"
    script.write_text("\n".join(python_blocks(README.read_text(encoding="utf-8"))), encoding="utf-8")
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    with Sagacity(f"sqlite:///{tmp_path}/sagacity.db") as sg:
        sagas = sg.saga_ids()
        assert len(sagas) == 2
        for saga_id in sagas:
            assert sg.status(saga_id) is SagaStatus.COMPLETED
            assert [e.phase for e in sg.entries(saga_id)].count("AWAITING_APPROVAL") == 1
            assert sg.verify(saga_id).valid


def test_readme_worked_example_bytes_hash_to_the_spec_vector() -> None:
    """The bytes the README spells out for row 1 hash to the SPEC's first test vector."""
    framed = b"64:" + b"0" * 64 + b"2:s1" + b"1:1" + b"16:reserveInventory" + b"6:INTENT" + b"2:{}" + b"0:"
    framed += b"17:1784628000.000000"
    digest = hashlib.sha256(framed).hexdigest()
    assert digest == "2b8f009dcde4115339f77250ec69761e299c66809b569f77fe75033c04f80a4b"
    assert digest.startswith("2b8f009d")
    assert chain.GENESIS_HASH == "0" * 64
    assert "`2b8f009d…f80a4b`" in README.read_text(encoding="utf-8")
