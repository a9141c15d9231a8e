"""The README's Python example runs as written, and its hash-chain text matches the code."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from sagacity import chain
from sagacity.tools import registry

README = Path(__file__).parent.parent / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every python block of the README executes without error on a fresh SQLite journal."""
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "the README has no python example"
    with registry.isolated():
        for block in blocks:
            exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "sagacity.db").exists()


def test_readme_worked_example_bytes_hash_to_the_spec_vector() -> None:
    """The bytes the README spells out for row 1 hash to the SPEC's first test vector."""
    framed = b"64:" + b"0" * 64 + b"2:s1" + b"1:1" + b"16:reserveInventory" + b"6:INTENT" + b"2:{}" + b"0:"
    framed += b"17:1784628000.000000"
    digest = hashlib.sha256(framed).hexdigest()
    assert digest == "2b8f009dcde4115339f77250ec69761e299c66809b569f77fe75033c04f80a4b"
    assert digest.startswith("2b8f009d")
    assert chain.GENESIS_HASH == "0" * 64
    assert "`2b8f009d…f80a4b`" in README.read_text(encoding="utf-8")
