"""``recover`` beside living processes: it never takes over work a living process is doing, and
takes over at once when that process dies (its lease dies with it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from sagacity import CompensationContext, Phase, Sagacity, SagaStatus, tool
from sagacity.errors import SagaClosedError
from sagacity.tools import registry

HERE = Path(__file__).parent


@pytest.fixture
def tools_isolated() -> Iterator[None]:
    with registry.isolated():
        yield


def test_recover_beside_a_live_owner_refuses_its_next_call(durable_url: str, tools_isolated: None) -> None:
    """Cron recovers a saga whose owner swallowed a failure and is still running: the owner's
    next call is refused before its tool runs, and nothing is compensated twice."""
    effects: list[str] = []

    @tool
    def live_reserve(sku: str) -> str:
        effects.append(f"reserve {sku}")
        return sku

    @live_reserve.compensation
    def live_release(ctx: CompensationContext) -> None:
        effects.append(f"release {ctx.args['sku']}")

    @tool
    def live_flaky() -> str:
        raise RuntimeError("down")

    @tool
    def live_ship() -> str:
        effects.append("ship")
        return "shipped"

    failed, proceed = threading.Event(), threading.Event()
    refused: list[BaseException] = []

    def agent() -> None:
        live_reserve("A")
        try:
            live_flaky()
        except RuntimeError:
            pass  # an agent framework turns the error into text and goes on
        failed.set()
        assert proceed.wait(30)
        try:
            live_ship()
        except SagaClosedError as exc:
            refused.append(exc)

    with Sagacity(durable_url) as owner, Sagacity(durable_url) as cron:
        results: list[SagaStatus] = []
        worker = threading.Thread(target=lambda: results.append(owner.run("alive", agent).status))
        worker.start()
        assert failed.wait(30)
        recovered = cron.recover("alive")
        proceed.set()
        worker.join(30)
        assert [r.status for r in recovered] == [SagaStatus.COMPENSATED]
        assert results == [SagaStatus.COMPENSATED]
        assert len(refused) == 1
        assert effects == ["reserve A", "release A"]  # ship never ran; released once
        assert not [e for e in cron.entries("alive") if e.tool_name == "live_ship"]
        assert cron.verify("alive").valid


def test_recover_skips_a_compensation_in_progress_then_takes_over_after_kill9(
    race: ModuleType, durable_url: str, tmp_path: Path, lease_gone: Callable[[Sagacity, str], None]
) -> None:
    """A process hangs inside an idempotent compensation: ``recover`` leaves it alone while the
    process lives, and re-runs it once the process is killed."""
    effects_file = tmp_path / "effects.log"
    child = subprocess.Popen(
        [sys.executable, str(HERE / "race_tools.py"), durable_url, str(effects_file), "fail"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SAGACITY_RACE_HANG": "1"},
    )
    try:
        assert child.stdout is not None
        assert child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        child.stdin.write("go hung\n")
        child.stdin.flush()
        deadline = time.monotonic() + 30
        while not (effects_file.exists() and "unhold hung" in effects_file.read_text()):
            assert time.monotonic() < deadline, "the child never reached its compensation"
            time.sleep(0.05)
        with Sagacity(durable_url) as sg:
            assert sg.recover("hung") == []  # the living runner holds the lease
            # Its compensation INTENT is open, but a living process runs it: RUNNING, not in doubt.
            assert sg.status("hung") is SagaStatus.RUNNING
            child.send_signal(signal.SIGKILL)
            child.wait(30)
            lease_gone(sg, "hung")  # the server ends the dead process's session a moment later
            assert sg.status("hung") is SagaStatus.IN_DOUBT
            [result] = sg.recover("hung")
            assert result.status is SagaStatus.COMPENSATED
            claims = [
                e
                for e in sg.entries("hung")
                if e.phase == Phase.INTENT and e.payload.startswith("compensates")
            ]
            assert len(claims) == 2  # the dead runner's, and the re-run's (declared idempotent)
        assert effects_file.read_text().count("unhold hung") == 2
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)


@pytest.mark.postgres
def test_many_compensations_at_once_on_a_small_pool(postgres_url: str, tools_isolated: None) -> None:
    """Sixteen sagas compensating at once through a pool of two connections: leases never hold
    the connections their holders' own reads and writes need."""
    released: list[str] = []

    @tool
    def pool_reserve(sku: str) -> str:
        return sku

    @pool_reserve.compensation
    def pool_release(ctx: CompensationContext) -> None:
        time.sleep(0.01)
        released.append(f"{ctx.saga_id}/{ctx.args['sku']}")

    def agent() -> None:
        pool_reserve("A")
        pool_reserve("B")
        raise RuntimeError("agent failed")

    with Sagacity(postgres_url, max_connections=2, connect_timeout=5) as sg:
        statuses: list[SagaStatus] = []
        threads = [
            threading.Thread(target=lambda n=n: statuses.append(sg.run(f"pool-{n}", agent).status))
            for n in range(16)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert statuses == [SagaStatus.COMPENSATED] * 16
        assert sorted(released) == sorted(f"pool-{n}/{sku}" for n in range(16) for sku in "AB")
