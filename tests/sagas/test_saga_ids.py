"""A saga id names one run (#25): starting a saga under an id that already has a journal is refused
before anything is journaled or any tool runs, unless the saga is continued on purpose."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sagacity import Reversibility, Sagacity, SagaStatus, in_current_saga, tool
from sagacity.errors import SagaExistsError, SagaStateError

EFFECTS: list[str] = []


@pytest.fixture(autouse=True)
def tools() -> None:
    EFFECTS.clear()


def _declare() -> tuple[object, object]:
    @tool
    def reserve(sku: str) -> str:
        EFFECTS.append(f"reserved {sku}")
        return f"r-{sku}"

    @reserve.compensation
    def release(ctx: object) -> None:
        EFFECTS.append("released")

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str) -> str:
        EFFECTS.append(f"wired {amount}")
        return "sent"

    return reserve, wire


def test_running_a_completed_saga_again_is_refused_and_journals_nothing(sg: Sagacity) -> None:
    reserve, _ = _declare()
    assert sg.run("order-1", lambda: reserve("A")).status is SagaStatus.COMPLETED  # type: ignore[operator]
    before = sg.entries("order-1")
    with pytest.raises(SagaExistsError) as refused:
        sg.run("order-1", lambda: reserve("B"))  # type: ignore[operator]
    assert "'order-1' already exists (COMPLETED, 4 journal entries)" in str(refused.value)
    assert "continue_existing=True" in str(refused.value)
    assert isinstance(refused.value, SagaStateError)
    assert sg.entries("order-1") == before
    assert EFFECTS == ["reserved A"]  # B never ran, and nothing of A was compensated


def test_a_compensated_or_awaiting_saga_is_refused_too(sg: Sagacity) -> None:
    reserve, wire = _declare()

    def fails() -> None:
        reserve("A")  # type: ignore[operator]
        raise RuntimeError("boom")

    assert sg.run("c", fails).status is SagaStatus.COMPENSATED
    assert sg.run("w", lambda: wire("5.00")).status is SagaStatus.AWAITING_APPROVAL  # type: ignore[operator]
    for saga_id in ("c", "w"):
        before = sg.entries(saga_id)
        with pytest.raises(SagaExistsError):
            sg.run(saga_id, lambda: wire("9.00"))  # type: ignore[operator]  # a gate first
        assert sg.entries(saga_id) == before
    assert len(sg.pending_approvals("w")) == 1  # no second request


def test_a_saga_block_and_a_run_without_calls_are_refused(sg: Sagacity) -> None:
    reserve, _ = _declare()
    sg.run("s", lambda: reserve("A"))  # type: ignore[operator]
    with pytest.raises(SagaExistsError), sg.saga("s"):
        reserve("B")  # type: ignore[operator]
    with pytest.raises(SagaExistsError), sg.saga("s"):
        pass
    with pytest.raises(SagaExistsError):
        sg.run("s", lambda: None)
    assert EFFECTS == ["reserved A"]
    assert sg.status("s") is SagaStatus.COMPLETED


def test_a_swallowed_refusal_still_refuses_the_run(sg: Sagacity) -> None:
    """An agent that catches the refusal and carries on does not turn it into a compensation."""
    reserve, _ = _declare()
    sg.run("x", lambda: reserve("A"))  # type: ignore[operator]
    before = sg.entries("x")

    def stubborn() -> str:
        try:
            reserve("B")  # type: ignore[operator]
        except SagaExistsError:
            pass
        return "carried on"

    with pytest.raises(SagaExistsError):
        sg.run("x", stubborn)
    assert sg.entries("x") == before
    assert EFFECTS == ["reserved A"]


def test_continue_existing_adds_to_the_saga_on_purpose(sg: Sagacity) -> None:
    reserve, _ = _declare()
    sg.run("turns", lambda: reserve("A"))  # type: ignore[operator]
    with sg.saga("turns", continue_existing=True) as scope:
        reserve("B")  # type: ignore[operator]
    assert scope.result is not None
    assert scope.result.status is SagaStatus.COMPLETED
    # START, the call, END; the continued call, its END: one chain, gap-free.
    assert [e.seq for e in sg.entries("turns")] == [1, 2, 3, 4, 5, 6, 7]
    assert sg.verify("turns").valid
    with sg.saga("new-one", continue_existing=True):  # a saga that does not exist yet starts
        reserve("C")  # type: ignore[operator]
    assert [e.tool_name for e in sg.entries("new-one")] == [
        "sagacity:saga",
        "reserve",
        "reserve",
        "sagacity:saga",
    ]


def test_another_sagacity_on_the_same_journal_is_refused(store_url: str, sg: Sagacity) -> None:
    """The check is the journal's, not this process's memory."""
    reserve, _ = _declare()
    sg.run("shared", lambda: reserve("A"))  # type: ignore[operator]
    with Sagacity(store_url) as other:
        if other.store is not sg.store and store_url.startswith("memory"):
            pytest.skip("memory:// stores are not shared between instances")
        with pytest.raises(SagaExistsError):
            other.run("shared", lambda: reserve("B"))  # type: ignore[operator]
    assert EFFECTS == ["reserved A"]


def test_concurrent_first_calls_of_one_new_saga_are_not_refused(sg: Sagacity) -> None:
    """Threads of one fresh run racing for its first entry: one is first, none is refused."""
    reserve, _ = _declare()
    errors: list[BaseException] = []

    def agent() -> None:
        def call(i: int) -> None:
            try:
                reserve(f"S{i}")  # type: ignore[operator]
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=in_current_saga(call), args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert sg.run("fan-out", agent).status is SagaStatus.COMPLETED
    assert errors == []
    assert len(sg.entries("fan-out")) == 18  # 8 calls, the saga's START and END


def test_async_runs_are_refused_the_same_way(sg: Sagacity) -> None:
    reserve, _ = _declare()

    async def main() -> None:
        await sg.run_async("a", lambda: reserve("A"))  # type: ignore[operator]
        with pytest.raises(SagaExistsError):
            await sg.run_async("a", lambda: reserve("B"))  # type: ignore[operator]
        with pytest.raises(SagaExistsError):
            async with sg.saga("a"):
                pass
        async with sg.saga("a", continue_existing=True):
            await asyncio.to_thread(reserve, "C")  # type: ignore[arg-type]

    asyncio.run(main())
    assert EFFECTS == ["reserved A", "reserved C"]


def test_two_processes_starting_one_saga_id_one_wins(tmp_path: Path) -> None:
    """Real processes race to start the same id: exactly one runs its tool, the other is refused."""
    script = tmp_path / "start.py"
    script.write_text(
        "import sys\n"
        "from sagacity import Sagacity, tool\n"
        "from sagacity.errors import SagaExistsError\n"
        "@tool\n"
        "def step(who: str) -> str:\n"
        "    return who\n"
        f"sg = Sagacity('sqlite:///{tmp_path}/race.db')\n"
        "try:\n"
        "    sg.run('same-id', lambda: step(sys.argv[1]))\n"
        "    print('ran')\n"
        "except SagaExistsError:\n"
        "    print('refused')\n",
        encoding="utf-8",
    )
    Sagacity(f"sqlite:///{tmp_path}/race.db").close()  # the schema, so both start equal
    runs = [
        subprocess.Popen([sys.executable, str(script), who], stdout=subprocess.PIPE, text=True)
        for who in ("p1", "p2")
    ]
    outcomes = sorted(p.communicate(timeout=120)[0].strip() for p in runs)
    assert outcomes == ["ran", "refused"]
    with Sagacity(f"sqlite:///{tmp_path}/race.db") as sg:
        assert len(sg.entries("same-id")) == 4  # one START, one call, one END
