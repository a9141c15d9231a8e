"""Threads: sagas on many threads at once, and calls sent to a pool with ``in_current_saga``,
each get their own spans under the right parent, and the context is always detached cleanly."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from sagacity import Sagacity, in_current_saga, tool

from .conftest import Otel


def test_eight_threads_of_sagas(otel: Otel, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    @tool
    def step(n: int) -> int:
        return n

    def worker(index: int, sg: Sagacity) -> None:
        for k in range(10):
            with sg.saga(f"t{index}-{k}"):
                for n in range(5):
                    step(n)

    with caplog.at_level(logging.WARNING), Sagacity(sqlite_url) as sg:
        threads = [threading.Thread(target=worker, args=(i, sg)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not [r for r in caplog.records if r.name.startswith(("opentelemetry", "sagacity"))]
    sagas = otel.named("sagacity.saga")
    assert len(sagas) == 80
    for saga in sagas:
        calls = otel.children(saga)
        assert [c.name for c in calls] == ["execute_tool step"] * 5
        saga_id = (saga.attributes or {})["sagacity.saga.id"]
        seqs = [(c.attributes or {})["sagacity.journal.intent_seq"] for c in calls]
        assert all((c.attributes or {})["sagacity.saga.id"] == saga_id for c in calls)
        assert seqs == [2, 4, 6, 8, 10]  # after the START
    assert otel.value("sagacity.tool.calls", **{"sagacity.call.outcome": "EXECUTED"}) == 400
    batches, rows = otel.value("sagacity.journal.batch.size")
    assert rows >= 800
    assert batches <= rows  # several threads' rows share a statement


def test_calls_sent_to_a_pool_stay_in_the_saga_and_its_trace(otel: Otel) -> None:
    @tool
    def fetch(n: int) -> int:
        return n

    def agent() -> list[int]:
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(in_current_saga(fetch), range(12)))

    with Sagacity("memory://") as sg:
        assert sg.run("pooled", agent).value == list(range(12))
    saga = otel.one("sagacity.saga")
    assert len(otel.children(saga)) == 12
