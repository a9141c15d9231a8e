"""A nemesis that keeps running: the workload under faults for a given time, then the invariants.

    python tests/faults/soak.py --store sqlite   --minutes 30 --out /tmp/soak-sqlite
    python tests/faults/soak.py --store postgres --minutes 30 --out /tmp/soak-pg   # own HA pair
    python tests/faults/soak.py --store postgres --url postgresql://... --minutes 2 --out DIR
    python tests/faults/soak.py --store mysql --url mysql://root@127.0.0.1:3306/test --out DIR

Not part of the test run (no ``test_`` prefix). Workers run sagas, an approver decides gates, a
recoverer runs ``recover()`` as cron would (``workload.py``); meanwhile the nemesis, every few
seconds, picks a fault that applies to the store:

- ``kill``: SIGKILL a random workload process (restarted under a new name at once);
- ``terminate``: ``pg_terminate_backend`` on every backend of the workload (PostgreSQL), or
  ``KILL`` on every connection to the soak's database (MariaDB);
- ``lock``: another process holds SQLite's write lock (``BEGIN IMMEDIATE``) for 1-8 s;
- ``full``: a worker restarted under ``RLIMIT_FSIZE``, so every write past 64 KiB of any file it
  writes fails as on a full disk (SQLite, where the worker writes the journal's files itself),
  for 5-15 s, then killed and restarted;
- ``failover``: SIGKILL the primary's postmaster, promote the standby, clone a new standby
  (PostgreSQL started by the soak itself: a primary and a synchronous standby, ``pg_pair``).

At the end every process is stopped, one last ``recover()`` runs (cron's next run), and
``invariants.check`` compares the journal with what the processes were told and what the tools
did. The report (operations, faults by kind, violations) is printed and written to
``OUT/report.json``; the exit status is 1 if there is any violation.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import invariants  # noqa: E402
import pg_pair  # noqa: E402
import workload  # noqa: E402

from sagacity import Sagacity  # noqa: E402

#: Bytes a worker under the ``full`` fault may write into any file.
FULL_AT = 64 * 1024


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(args.seed)
        self.effects = self.out / "effects.log"
        self.stop_file = self.out / "stop"
        self.stop_file.unlink(missing_ok=True)
        self.faults: Counter[str] = Counter()
        self.procs: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}  # slot -> (name, process)
        self.generation: Counter[str] = Counter()
        self.names: list[str] = []
        self.pair: pg_pair.PgPair | None = None
        self.schema: str | None = None
        self.app_name = "soak_" + uuid.uuid4().hex[:8]
        self.url = self._store_url()

    # -- the store ---------------------------------------------------------------------------------
    def _store_url(self) -> str:
        store = self.args.store
        if store == "sqlite":
            return f"sqlite:///{self.out}/journal.db"
        if store == "postgres" and not self.args.url:
            missing = pg_pair.binaries_missing()
            if missing:
                sys.exit(missing)
            self.pair = pg_pair.PgPair()
            self.pair.start()
            return f"{self.pair.url}&application_name={self.app_name}"
        if store in ("postgres", "mysql"):
            if not self.args.url:
                sys.exit(f"--store {store} needs --url")
            return self._fresh(self.args.url)
        sys.exit(f"unknown store {store!r}")

    def _fresh(self, base: str) -> str:
        """A new schema (PostgreSQL) or database (MariaDB) on a shared server, so the run starts
        from an empty journal."""
        self.schema = "soak_" + uuid.uuid4().hex[:10]
        if self.args.store == "mysql":
            with self._mysql_admin() as conn, conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE {self.schema} CHARACTER SET utf8mb4")
            return urlunsplit(urlsplit(base)._replace(path="/" + self.schema))
        import psycopg

        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {self.schema}")
        sep = "&" if "?" in base else "?"
        return f"{base}{sep}options=-csearch_path%3D{self.schema}&application_name={self.app_name}"

    def _mysql_admin(self) -> Any:
        """A root session on the MariaDB server, in no database."""
        import pymysql

        from sagacity.stores.mysql import connect_arguments

        arguments = connect_arguments(self.args.url)
        del arguments["database"]
        return pymysql.connect(**arguments, autocommit=True)

    def admin_url(self) -> str:
        if self.pair is not None:
            return self.pair.host_url(self.pair.primary_port)
        return str(self.args.url)

    # -- the workload's processes ------------------------------------------------------------------
    def start(self, slot: str, *, full: bool = False) -> None:
        role = {"w": "worker", "a": "approver", "c": "recoverer"}[slot[0]]
        self.generation[slot] += 1
        name = f"{slot}g{self.generation[slot]}"
        self.names.append(name)
        env = {
            **os.environ,
            "SAGACITY_FAULT_STOP": str(self.stop_file),
            "SAGACITY_FAULT_PAUSE": str(self.args.pause),
            "SAGACITY_FAULT_CRON": str(self.args.cron),
        }
        if full:  # the worker's "disk" is full past FULL_AT bytes of any file
            env["SAGACITY_FAULT_FSIZE"] = str(FULL_AT)

        with (self.out / f"{name}.stderr").open("wb") as stderr:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "workload.py"),
                    role,
                    self.url,
                    str(self.effects),
                    str(self.out / f"{name}.acks"),
                    name,
                ],
                env=env,
                stderr=stderr,
            )
        self.procs[slot] = (name, proc)

    def restart_exited(self) -> None:
        """A process that died by itself (its store failed it at start) is started again."""
        for slot, (_name, proc) in list(self.procs.items()):
            if proc.poll() is not None:
                self.faults["exited_by_itself"] += 1
                self.start(slot)

    # -- the nemesis -------------------------------------------------------------------------------
    def kinds(self) -> list[str]:
        kinds = ["kill"]
        if self.args.store == "sqlite":
            kinds += ["lock", "full"]
        if self.args.store in ("postgres", "mysql"):
            kinds.append("terminate")
        if self.pair is not None:
            kinds.append("failover")
        return kinds

    def strike(self) -> None:
        kind = self.rng.choice(self.kinds())
        if kind == "failover" and self.faults["failover"] * self.args.failover_every > self.elapsed():
            kind = "terminate"  # at most one failover per --failover-every seconds
        getattr(self, f"_{kind}")()
        self.faults[kind] += 1

    def _kill(self) -> None:
        slot = self.rng.choice(sorted(self.procs))
        _name, proc = self.procs[slot]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.start(slot)

    def _terminate(self) -> None:
        if self.args.store == "mysql":
            self._kill_mysql_connections()
            return
        import psycopg

        try:
            with psycopg.connect(self.admin_url(), autocommit=True, connect_timeout=5) as conn:
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (self.app_name,),
                ).fetchone()
            self.faults["backends_terminated"] += row[0] if row else 0
        except psycopg.Error:
            self.faults["terminate_missed"] += 1

    def _kill_mysql_connections(self) -> None:
        """``KILL`` every connection the workload holds to the soak's database."""
        import pymysql

        try:
            with self._mysql_admin() as conn, conn.cursor() as cur:
                cur.execute(
                    "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
                    (self.schema,),
                )
                for (connection_id,) in cur.fetchall():
                    try:
                        cur.execute(f"KILL {int(connection_id)}")
                        self.faults["backends_terminated"] += 1
                    except pymysql.Error:
                        pass  # gone meanwhile
        except pymysql.Error:
            self.faults["terminate_missed"] += 1

    def _lock(self) -> None:
        hold = self.rng.uniform(1, 8)
        conn = sqlite3.connect(self.out / "journal.db", timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._sleep(hold)
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            self.faults["lock_missed"] += 1
        finally:
            conn.close()

    def _full(self) -> None:
        slot = self.rng.choice([s for s in self.procs if s.startswith("w")])
        _name, proc = self.procs[slot]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.start(slot, full=True)
        self._sleep(self.rng.uniform(5, 15))
        _name, proc = self.procs[slot]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.start(slot)

    def _failover(self) -> None:
        assert self.pair is not None
        self.pair.fail_over(no_primary_for=self.rng.uniform(0.5, 3))

    # -- the run -----------------------------------------------------------------------------------
    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def run(self) -> int:
        self.started = time.monotonic()
        with Sagacity(self.url) as sg:
            sg.saga_ids()  # the schema, before several processes race to make it
        for slot in [f"w{i}" for i in range(self.args.workers)] + ["a0", "c0"]:
            self.start(slot)
        deadline = self.started + self.args.minutes * 60
        try:
            while time.monotonic() < deadline:
                time.sleep(self.rng.uniform(self.args.every / 2, self.args.every * 1.5))
                self.restart_exited()
                self.strike()
        finally:
            self.stop_file.touch()
            for _name, proc in self.procs.values():
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    self.faults["hung_at_stop"] += 1
        return self.check()

    def check(self) -> int:
        acks = [self.out / f"{name}.acks" for name in self.names]
        url = self.url
        with Sagacity(url) as sg:
            sg.recover()  # cron's next run, with every fault over
            report = invariants.check(sg, [self.effects], acks)
        records = invariants.read_acks(acks)
        ops = Counter(str(r.get("op")) for r in records if "op" in r)
        runs = Counter(str(r.get("status", "raised")) for r in records if r.get("op") == "run")
        told_completed = {
            r["saga"] for r in records if r.get("op") in ("run", "resume") and r.get("status") == "COMPLETED"
        }
        # Sagas whose process died mid-run (between calls, or before a FAILED could be written)
        # and that nonetheless read COMPLETED: the defect 5 while it is not fixed.
        unreported = sorted(
            saga
            for saga, status in report.status_of.items()
            if status == "COMPLETED" and saga not in told_completed
        )
        result: dict[str, Any] = {
            "store": self.args.store + (" (HA pair)" if self.pair else ""),
            "minutes": self.args.minutes,
            "workers": self.args.workers,
            "processes_started": len(self.names),
            "operations": dict(ops),
            "runs_by_status": dict(runs),
            "store_errors_seen": sum(1 for r in records if str(r.get("error", "")).startswith("Store")),
            "faults": dict(self.faults),
            "sagas": report.sagas,
            "entries": report.entries,
            "acknowledged_entries": report.acked_entries,
            "effects": dict(report.effects),
            "statuses": dict(report.statuses),
            "in_doubt_listed": report.in_doubt,
            "completed_but_no_caller_told": len(unreported),
            "completed_but_no_caller_told_examples": unreported[:10],
            "violations": report.violations,
        }
        (self.out / "report.json").write_text(json.dumps(result, indent=2))
        print(json.dumps({k: v for k, v in result.items() if k != "violations"}, indent=2))
        print(f"{len(report.violations)} violations")
        for line in report.violations[:40]:
            print("  ", line)
        return 1 if report.violations else 0

    def close(self) -> None:
        if self.pair is not None:
            self.pair.stop()
        if self.schema is not None and self.args.store == "mysql":
            with self._mysql_admin() as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE {self.schema}")
        elif self.schema is not None:
            import psycopg

            with psycopg.connect(self.args.url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {self.schema} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=["sqlite", "postgres", "mysql"], required=True)
    parser.add_argument("--url", help="a server to use instead of the soak's own (a fresh schema on it)")
    parser.add_argument("--minutes", type=float, default=2)
    parser.add_argument("--out", required=True, help="folder for the journal, ledgers and report")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--every", type=float, default=8, help="mean seconds between faults")
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between a worker's sagas")
    parser.add_argument("--cron", type=float, default=5, help="seconds between recover() runs")
    parser.add_argument("--failover-every", type=float, default=120, help="at most one failover per this")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL schema afterwards")
    args = parser.parse_args()
    workload_tools = workload  # the final recover() needs the tools imported here
    assert workload_tools.KINDS
    soak = Soak(args)
    try:
        status = soak.run()
    finally:
        if not args.keep:
            soak.close()
    sys.exit(status)


if __name__ == "__main__":
    main()
