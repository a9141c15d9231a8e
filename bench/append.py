"""Append latency and throughput against the physical floor, and verify speed against bare SHA-256.

Usage: ``.venv/bin/python bench/append.py [--pg URL] [--rounds N] [--quick]``

What it measures, in one run, for SQLite (WAL, ``synchronous=FULL``, a temp file) and PostgreSQL
(``--pg`` or ``$SAGACITY_TEST_POSTGRES_URL``; skipped with a message when neither is set):

1. Latency of ``Sagacity(url).journal.append(...)`` on one saga, against the floor: the same-size
   row inserted into an identical table by the raw driver, one durable transaction per row.
2. Appends/s with 1, 8 and 64 threads, each appending to its own saga, against the floor run with
   the same number of threads, each on its own connection.
3. ``Sagacity.verify`` of a 100,000-entry saga, in entries/s, against a bare loop of
   ``hashlib.sha256`` over the same framed bytes (the least any verifier must do).

Subject and floor rounds alternate (and swap order every round), and each figure is the median
of its rounds, so drifting machine load affects both sides alike.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from _floor import INPUT, PAYLOAD, PHASE, TOOL, MySQLFloor, PostgresFloor, SQLiteFloor

from sagacity import Phase, Sagacity, chain
from sagacity.model import Entry

LATENCY_TARGET = 1.15
THROUGHPUT_TARGET = 0.8
CONCURRENCY = (1, 8, 64)
POOL_CAP = 16


# -- measurement ---------------------------------------------------------------------------------
def interleaved(
    rounds: int, subject: Callable[[int], float], floor: Callable[[int], float]
) -> tuple[float, float]:
    """Median of ``rounds`` subject and floor measurements, alternating which goes first.

    A first warm-up round of each is discarded (connections, prepared statements, page cache).
    """
    subject(-1)
    floor(-1)
    subject_values: list[float] = []
    floor_values: list[float] = []
    for r in range(rounds):
        order = [(subject, subject_values), (floor, floor_values)]
        for fn, values in order if r % 2 == 0 else reversed(order):
            values.append(fn(r))
    return statistics.median(subject_values), statistics.median(floor_values)


def run_threads(threads: int, work: Callable[[int], None]) -> float:
    """Seconds from releasing ``threads`` threads at once until the last one finished ``work``."""
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        barrier.wait()
        try:
            work(index)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed


# -- stores ---------------------------------------------------------------------------------------
class Target:
    """One backend: how to open the subject store and the floor for one benchmark."""

    def __init__(self, name: str, subject_url: str, floor: SQLiteFloor | PostgresFloor | MySQLFloor) -> None:
        self.name = name
        self.subject_url = subject_url
        self.floor = floor


@contextmanager
def sqlite_target(workdir: Path) -> Iterator[Target]:
    yield Target("sqlite", f"sqlite:///{workdir}/subject.db", SQLiteFloor(str(workdir / "floor.db")))


@contextmanager
def postgres_target(base: str) -> Iterator[Target]:
    import psycopg

    tag = uuid.uuid4().hex[:8]
    schemas = (f"bench_subject_{tag}", f"bench_floor_{tag}")
    sep = "&" if "?" in base else "?"
    urls = [f"{base}{sep}options=-csearch_path%3D{schema}" for schema in schemas]
    with psycopg.connect(base, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield Target("postgres", urls[0], PostgresFloor(urls[1]))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")


@contextmanager
def mysql_target(base: str) -> Iterator[Target]:
    """Two fresh MariaDB/MySQL databases on the server ``base`` names (subject, floor), dropped after."""
    from urllib.parse import urlsplit, urlunsplit

    import pymysql

    from sagacity.stores.mysql import connect_arguments

    tag = uuid.uuid4().hex[:8]
    names = (f"bench_subject_{tag}", f"bench_floor_{tag}")
    admin = connect_arguments(base)
    del admin["database"]
    with pymysql.connect(**admin, autocommit=True) as conn, conn.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    urls = [urlunsplit(urlsplit(base)._replace(path="/" + name)) for name in names]
    try:
        yield Target("mysql", urls[0], MySQLFloor(urls[1]))
    finally:
        with pymysql.connect(**admin, autocommit=True) as conn, conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE {name}")


def mysql_version(url: str) -> str:
    import pymysql

    from sagacity.stores.mysql import connect_arguments

    with pymysql.connect(**connect_arguments(url)) as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@innodb_flush_log_at_trx_commit")
        version, flush = cur.fetchone()
    return f"MariaDB/MySQL {version} (innodb_flush_log_at_trx_commit={flush})"


# -- 1. latency -----------------------------------------------------------------------------------
def bench_latency(target: Target, rounds: int, ops: int, block: int = 20) -> tuple[float, float]:
    """Mean microseconds per append (subject) and per insert (floor): medians of block means.

    Subject and floor alternate every ``block`` operations, so load that drifts over seconds (other
    processes on the machine) lands on both sides alike.
    """
    with Sagacity(target.subject_url) as sg:
        writer = target.floor.writer()
        journal = sg.journal

        def subject(_: int) -> float:
            started = time.perf_counter()
            for _ in range(block):
                journal.append("latency", TOOL, Phase.EXECUTED, INPUT, PAYLOAD)
            return (time.perf_counter() - started) / block * 1e6

        def floor(_: int) -> float:
            started = time.perf_counter()
            for _ in range(block):
                writer.append("latency")
            return (time.perf_counter() - started) / block * 1e6

        try:
            return interleaved(max(rounds, rounds * ops // block), subject, floor)
        finally:
            writer.close()


# -- 2. throughput --------------------------------------------------------------------------------
def bench_throughput(target: Target, rounds: int, threads: int, ops_per_thread: int) -> tuple[float, float]:
    """Appends/s over all threads (subject) and inserts/s (floor), medians over rounds."""
    # The floor holds a connection per thread. The subject's pool gets as many, open from the start,
    # up to POOL_CAP: 64 + 64 connections would exceed a default server's max_connections=100.
    pool = min(threads, POOL_CAP)
    options = {"min_connections": pool, "max_connections": pool} if target.name == "postgres" else {}
    with Sagacity(target.subject_url, **options) as sg:
        journal = sg.journal
        writers = [target.floor.writer() for _ in range(threads)]
        total = threads * ops_per_thread

        def subject(r: int) -> float:
            def work(i: int) -> None:
                saga = f"tp{threads}-{r}-{i}"
                for _ in range(ops_per_thread):
                    journal.append(saga, TOOL, Phase.EXECUTED, INPUT, PAYLOAD)

            return total / run_threads(threads, work)

        def floor(r: int) -> float:
            def work(i: int) -> None:
                saga = f"tp{threads}-{r}-{i}"
                for _ in range(ops_per_thread):
                    writers[i].append(saga)

            return total / run_threads(threads, work)

        try:
            return interleaved(rounds, subject, floor)
        finally:
            for writer in writers:
                writer.close()


# -- 3. verify ------------------------------------------------------------------------------------
def build_chain(saga_id: str, count: int) -> list[Entry]:
    """A valid chain of ``count`` benchmark entries (built in memory, bulk-loaded below)."""
    entries: list[Entry] = []
    prev = chain.GENESIS_HASH
    start = datetime(2026, 7, 21, 10, 0, 0)
    for seq in range(1, count + 1):
        ts = start + timedelta(microseconds=seq * 137)
        digest = chain.entry_hash(prev, saga_id, seq, TOOL, PHASE, INPUT, PAYLOAD, ts)
        entries.append(Entry(saga_id, seq, TOOL, PHASE, INPUT, PAYLOAD, ts, digest))
        prev = digest
    return entries


def bulk_load(target: Target, entries: list[Entry]) -> None:
    """Write the chain straight into the subject's journal table (setup, not measured)."""
    rows = [
        (e.saga_id, e.seq, e.tool_name, e.phase, e.input, e.payload, e.timestamp, e.hash) for e in entries
    ]
    columns = "saga_id, seq, tool_name, phase, input, payload, timestamp, hash"
    if target.name == "sqlite":
        import sqlite3

        conn = sqlite3.connect(target.subject_url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN")
        conn.executemany(
            f"INSERT INTO side_effect_journal ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row[:6], row[6].strftime("%Y-%m-%d %H:%M:%S.%f"), row[7]) for row in rows],
        )
        conn.execute("COMMIT")
        conn.close()
        return
    import psycopg

    copy_sql = f"COPY side_effect_journal ({columns}) FROM STDIN"
    with psycopg.connect(target.subject_url) as conn, conn.cursor() as cur, cur.copy(copy_sql) as copy:
        for row in rows:
            copy.write_row(row)


def bench_verify(target: Target, rounds: int, count: int) -> tuple[float, float, float]:
    """Entries/s of ``Sagacity.verify`` from the store, of ``chain.verify`` over entries already in
    memory, and of a bare SHA-256 loop over the same framed bytes."""
    saga_id = "verify-bench"
    entries = build_chain(saga_id, count)
    framed = [
        b"".join(
            chain.frame(field)
            for field in (
                chain.GENESIS_HASH if e.seq == 1 else entries[e.seq - 2].hash,
                e.saga_id,
                str(e.seq),
                e.tool_name,
                e.phase,
                e.input,
                e.payload,
                chain.timestamp_field(e.timestamp),
            )
        )
        for e in entries
    ]
    assert hashlib.sha256(framed[-1]).hexdigest() == entries[-1].hash
    with Sagacity(target.subject_url) as sg:
        bulk_load(target, entries)

        def subject(_: int) -> float:
            started = time.perf_counter()
            result = sg.verify(saga_id)
            elapsed = time.perf_counter() - started
            assert result.valid, result
            assert result.entry_count == count, result
            return count / elapsed

        def floor(_: int) -> float:
            started = time.perf_counter()
            for data in framed:
                hashlib.sha256(data).hexdigest()
            return count / (time.perf_counter() - started)

        store_rate, sha_rate = interleaved(rounds, subject, floor)
        in_memory = []
        for _ in range(max(3, rounds // 2)):
            started = time.perf_counter()
            assert chain.verify(entries).valid
            in_memory.append(count / (time.perf_counter() - started))
    return store_rate, statistics.median(in_memory), sha_rate


# -- report ---------------------------------------------------------------------------------------
def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def postgres_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        sync = conn.execute("SHOW synchronous_commit").fetchone()
    return f"PostgreSQL {row[0] if row else '?'} (synchronous_commit={sync[0] if sync else '?'})"


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg", default=os.environ.get("SAGACITY_TEST_POSTGRES_URL"), help="PostgreSQL URL")
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds per figure (median)")
    parser.add_argument("--ops", type=int, default=400, help="appends per latency round")
    parser.add_argument("--verify-entries", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="few rounds and small sizes: a smoke run")
    parser.add_argument("--stores", default="sqlite,postgres", help="comma-separated subset to run")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.ops, args.verify_entries = 3, 50, 5_000

    print(f"machine: {machine()}")
    targets: list[Callable[[], AbstractContextManager[Target]]] = []
    workdir = Path(tempfile.mkdtemp(prefix="sagacity-bench-"))
    print(f"sqlite: {sqlite_version()} in {workdir} (WAL, synchronous=FULL)")
    stores = set(args.stores.split(","))
    if "sqlite" in stores:
        targets.append(lambda: sqlite_target(workdir))
    if "postgres" not in stores:
        pass
    elif args.pg:
        print(f"postgres: {postgres_version(args.pg)}")
        targets.append(lambda: postgres_target(args.pg))
    else:
        print("postgres: skipped (set SAGACITY_TEST_POSTGRES_URL or pass --pg URL)")
    print(f"method: medians of {args.rounds} rounds, subject and floor interleaved, warm-up discarded\n")

    latency_rows: list[str] = []
    throughput_rows: list[str] = []
    verify_rows: list[str] = []
    for make in targets:
        with make() as target:
            subject_us, floor_us = bench_latency(target, args.rounds, args.ops)
            ratio = subject_us / floor_us
            latency_rows.append(
                f"| {target.name:8} | {subject_us:10.1f} | {floor_us:10.1f} | {ratio:5.2f}x "
                f"| ≤ {LATENCY_TARGET}x {verdict(ratio <= LATENCY_TARGET):6} |"
            )
            print(latency_rows[-1], flush=True)
            for threads in CONCURRENCY:
                per_thread = max(args.ops // threads, 10 if not args.quick else 3)
                subject_rate, floor_rate = bench_throughput(target, args.rounds, threads, per_thread)
                ratio = subject_rate / floor_rate
                throughput_rows.append(
                    f"| {target.name:8} | {threads:5} | {subject_rate:9.0f} | {floor_rate:9.0f} "
                    f"| {ratio:5.2f}x "
                    f"| ≥ {THROUGHPUT_TARGET}x {verdict(ratio >= THROUGHPUT_TARGET):6} |"
                )
                print(throughput_rows[-1], flush=True)
            store_rate, memory_rate, sha_rate = bench_verify(
                target, max(3, args.rounds // 2), args.verify_entries
            )
            verify_rows.append(
                f"| {target.name:8} | {args.verify_entries:8,} | {store_rate:10,.0f} | {memory_rate:10,.0f} "
                f"| {sha_rate:10,.0f} | {store_rate / sha_rate:5.2f}x |"
            )
            print(verify_rows[-1], flush=True)

    print("\nAppend latency, one saga, sequential (µs per append; floor = one durable raw INSERT)")
    print("| store    | append µs  | floor µs   | ratio  | target           |")
    print("|----------|-----------:|-----------:|-------:|------------------|")
    print("\n".join(latency_rows))
    print("\nConcurrent appends/s, each thread its own saga (floor: raw INSERTs, a connection per thread)")
    print("| store    | sagas | append/s  | floor/s   | ratio  | target           |")
    print("|----------|------:|----------:|----------:|-------:|------------------|")
    print("\n".join(throughput_rows))
    print("\nverify (entries/s): from the store, chain.verify in memory, bare SHA-256 over the framed bytes")
    print("| store    | entries  | verify/s   | in-memory  | sha256/s   | ratio  |")
    print("|----------|---------:|-----------:|-----------:|-----------:|-------:|")
    print("\n".join(verify_rows))
    return 0


def sqlite_version() -> str:
    import sqlite3

    return f"SQLite {sqlite3.sqlite_version}"


if __name__ == "__main__":
    sys.exit(main())
