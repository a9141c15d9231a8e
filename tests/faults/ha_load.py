"""The load a failover test runs, and what it checks afterwards: shared by the hand-promoted
standby (test_failover.py) and Patroni (test_patroni.py), so both hold the library to one bar.

Three worker processes run sagas (compensatable calls, failures that compensate, gates), an
approver decides the gates and a recoverer runs ``recover()`` as cron would, all on one DSN. Each
records what the library acknowledged (ACKS) and what its tools did (EFFECTS); ``check`` reads the
new primary's journal back against both (invariants.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sagacity import Sagacity

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import invariants  # noqa: E402

sys.path.remove(str(HERE))

#: docs/operations.md: an operation that starts this long after the new primary takes writes
#: reaches it (the pool's and the journal's reconnects, with room for a loaded machine).
RECONNECT_BOUND = 15.0
WORKERS = 3


class Load:
    """The workload's processes on ``url``, their ledgers in ``folder``."""

    def __init__(self, url: str, folder: Path) -> None:
        with Sagacity(url) as sg:
            sg.saga_ids()  # creates the schema on the primary (and so on the standby)
        self.folder = folder
        self.effects = folder / "effects.log"
        self._stop = folder / "stop"
        env = {**os.environ, "SAGACITY_FAULT_STOP": str(self._stop)}
        self.roles = [(f"w{i}", "worker") for i in range(WORKERS)] + [
            ("approver", "approver"),
            ("cron", "recoverer"),
        ]
        self.acks = {name: folder / f"{name}.acks" for name, _ in self.roles}
        self.workers = [name for name, role in self.roles if role == "worker"]
        self.procs: list[subprocess.Popen[bytes]] = []
        for name, role in self.roles:
            command = [sys.executable, str(HERE / "workload.py"), role, url, str(self.effects)]
            with (folder / f"{name}.stderr").open("wb") as stderr:
                self.procs.append(
                    subprocess.Popen([*command, str(self.acks[name]), name], env=env, stderr=stderr)
                )

    def runs(self, name: str) -> list[dict[str, Any]]:
        return [r for r in invariants.read_acks([self.acks[name]]) if r.get("op") == "run"]

    def wait(self, condition: Callable[[], bool], seconds: float, what: str) -> None:
        """Until ``condition``; fails the test if a workload process died or time ran out."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition():
                return
            for proc in self.procs:
                assert proc.poll() is None, f"a workload process exited with {proc.returncode}: {what}"
            time.sleep(0.1)
        pytest.fail(f"not within {seconds:g} s: {what}")

    def each_worker_ran(self, since: float, n: int) -> bool:
        """Every worker finished ``n`` sagas it started at or after ``since`` (epoch seconds)."""
        return all(
            sum(1 for r in self.runs(w) if "error" not in r and float(r["t0"]) >= since) >= n
            for w in self.workers
        )

    def approver_decided(self, since: float) -> bool:
        return any(
            r.get("op") in ("resume", "reject") and "error" not in r and float(r["t0"]) >= since
            for r in invariants.read_acks([self.acks["approver"]])
        )

    def carries_on(self, since: float, what: str) -> None:
        """Every worker runs 6 sagas, and the approver decides a gate, after ``since``."""
        self.wait(lambda: self.each_worker_ran(since, 6), 60, f"every worker ran 6 sagas {what}")
        self.wait(lambda: self.approver_decided(since), 60, f"the approver decided a gate {what}")

    def stop(self) -> None:
        """Ask every process to stop; kill one that does not within a minute."""
        self._stop.touch()
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def failed(self) -> list[dict[str, Any]]:
        """The operations that raised a store error (the database was not there)."""
        records = invariants.read_acks(self.acks.values())
        return [r for r in records if str(r.get("error", "")).startswith("Store")]

    def check(self, url: str, since: float) -> str:
        """Every process exited cleanly, none failed for want of the database ``RECONNECT_BOUND``
        seconds after ``since``, and the journal at ``url`` keeps every promise (invariants.py).
        A printable summary (with each writer's first append after ``since``)."""
        stderrs = {
            name: (self.folder / f"{name}.stderr").read_text(errors="replace") for name, _ in self.roles
        }
        assert all(proc.returncode == 0 for proc in self.procs), stderrs
        failed = self.failed()
        late = [r for r in failed if float(r.get("t0", 0)) > since + RECONNECT_BOUND]
        assert not late, (
            f"operations started {RECONNECT_BOUND:g} s after the new primary still failed: {late}"
        )
        # How long after ``since`` each writing process's first append landed (reported, not
        # asserted: the bound is asserted on what failed, above).
        reconnected = {
            name: round(
                min(
                    (
                        float(r["t"])
                        for r in invariants.read_acks([path])
                        if "entry" in r and float(r["t"]) >= since
                    ),
                    default=float("nan"),
                )
                - since,
                2,
            )
            for name, path in self.acks.items()
            if name != "cron"
        }
        # What cron does next (the workers' own recoverer may not have run since), with every
        # process stopped: abandoned sagas are compensated now, their effects in the run's ledger.
        invariants.recover_after_stop(url, self.effects)
        with Sagacity(url) as sg:
            report = invariants.check(sg, [self.effects], self.acks.values())
        summary = invariants.summary(report)
        assert not report.violations, summary + "\n" + "\n".join(report.violations[:50])
        assert report.acked_entries > 0, summary
        assert report.effects["do"] > 0, summary
        assert report.effects["undo"] > 0, summary
        lines = [
            summary,
            f"{len(failed)} operations failed for want of the database",
            f"first append after the new primary, seconds: {reconnected}",
        ]
        return "\n".join(lines)


def through(url: str, folder: Path, fault: Callable[[Load], float]) -> tuple[Load, str]:
    """The whole run: start the load, let every worker finish 6 sagas, inject ``fault`` (which
    returns the time, epoch seconds, from which operations must succeed again), require every
    process to carry on after it, stop, and ``check``. The load and the summary."""
    load = Load(url, folder)
    try:
        load.wait(lambda: load.each_worker_ran(0, 6), 60, "every worker ran 6 sagas before the fault")
        since = fault(load)
        load.carries_on(time.time(), "after the fault")
    finally:
        load.stop()
    return load, load.check(url, since)
