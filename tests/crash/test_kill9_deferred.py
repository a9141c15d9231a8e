"""The deferred durability mode under ``kill -9`` (SIGKILL) at every point between a call's
return and the commit that carries its outcome, on SQLite, PostgreSQL and MariaDB.

What a crash there costs: the call is in doubt (its INTENT without an outcome, listed by
``in_doubt``), never lost (the INTENT is durable, the chain verifies) and never run twice
(``recover`` runs nothing while it is in doubt; once a person says what happened, the saga is
compensated as usual and each effect happened once).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from sagacity import Sagacity, SagaStatus
from sagacity.tools import registry

pytestmark = pytest.mark.crash

WORKER = Path(__file__).parent / "deferred_worker.py"

#: point -> (the journal after the kill, the call in doubt (seq, tool, did it happen), effects)
CASES = {
    "after-return": (["START", "book INTENT"], (2, True), ["book A"]),
    "before-next-commit": (["START", "book INTENT"], (2, True), ["book A"]),
    "after-next-commit": (
        ["START", "book INTENT", "book EXECUTED", "book INTENT"],
        (4, False),
        ["book A"],
    ),
    "before-end-commit": (
        ["START", "book INTENT", "book EXECUTED", "book INTENT"],
        (4, True),
        ["book A", "book B"],
    ),
    "before-compensation-commit": (["START", "book INTENT"], (2, True), ["book A"]),
}


@pytest.fixture
def tools(markers: Path) -> Iterator[None]:
    """This process imports the worker's tools, as an operator's process would to recover."""
    sys.path.insert(0, str(WORKER.parent))
    with registry.isolated():
        for name in ("crash_tools", "deferred_worker"):
            sys.modules.pop(name, None)
        import crash_tools
        import deferred_worker  # noqa: F401

        crash_tools.MARKERS = markers
        yield
    sys.path.remove(str(WORKER.parent))
    for name in ("crash_tools", "deferred_worker"):
        sys.modules.pop(name, None)


def _shape(sg: Sagacity, saga_id: str) -> list[str]:
    return [
        "START" if e.tool_name == "sagacity:saga" else f"{e.tool_name} {e.phase}" for e in sg.entries(saga_id)
    ]


@pytest.mark.parametrize("point", list(CASES))
def test_a_kill_before_the_outcome_commits_leaves_the_call_in_doubt(
    durable_url: str, markers: Path, point: str, lease_gone: Callable[[Sagacity, str], None], tools: None
) -> None:
    saga_id = f"deferred-{point}"
    child = subprocess.run(
        [sys.executable, str(WORKER), durable_url, saga_id, point],
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    journal, (seq, happened), done = CASES[point]
    effects = markers / "effects"
    with Sagacity(durable_url) as sg:
        lease_gone(sg, saga_id)
        assert sg.verify(saga_id).valid
        assert _shape(sg, saga_id) == journal  # never lost: every INTENT the child committed
        assert sg.status(saga_id) is SagaStatus.IN_DOUBT
        assert [(d.seq, d.tool_name) for d in sg.in_doubt(saga_id)] == [(seq, "book")]
        assert (
            sg.recover(abandoned_after=timedelta(0)) == []
        )  # in doubt: nothing runs again, nothing is compensated
        assert effects.read_text().splitlines() == done
        # A person says what happened; the saga is then compensated as usual, each effect once.
        sg.resolve_in_doubt(saga_id, seq, happened=happened, resolver="ops@example.com", reason="checked")
        sg.recover(abandoned_after=timedelta(0))
        assert sg.status(saga_id) is SagaStatus.COMPENSATED
        assert sg.verify(saga_id).valid
    undo = [f"unbook {line.split()[1]}" for line in reversed(done)]
    assert effects.read_text().splitlines() == done + undo
