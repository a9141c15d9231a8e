"""docs/stores.md's examples run as written: the capability check, and the shipped contract suite
run by pytest on the store the example names, exactly as a user's CI would."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from sagacity.tools import registry

STORES_MD = Path(__file__).parent.parent.parent / "docs" / "stores.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", STORES_MD.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_capability_example_runs() -> None:
    """The block that inspects a store's declared capabilities executes without error."""
    block = next(b for b in _blocks() if "capable(" in b)
    with registry.isolated():
        exec(compile(block, "docs/stores.md", "exec"), {"__name__": "stores_md"})


def test_the_contract_suite_example_passes_under_pytest(tmp_path: Path) -> None:
    """The documented StoreContract subclass, saved as a user's test module, passes under pytest
    (and runs the suite's tests: a collection of nothing would prove nothing)."""
    block = next(b for b in _blocks() if "StoreContract" in b)
    (tmp_path / "test_my_store.py").write_text(block, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed is not None, done.stdout
    assert int(passed.group(1)) >= 15, done.stdout
