"""Checkpoint and verification cost on large journals, against bare SHA-256, with peak memory.

Usage: ``.venv/bin/python bench/checkpoint.py [--scale 1.0] [--pg URL] [--no-pg]``

Two journal shapes, each at full size and at a tenth of it (to show memory stays flat):

- *many*: 10,000 sagas x 20 entries (200,000 entries)
- *long*: 1 saga x 1,000,000 entries

For each: the time to log every entry and sign the log checkpoint for the first time (``log``:
``checkpoint_log`` on a journal never logged), to sign it again when nothing is new after the
previous run's checkpoint (``relog``: ``previous=`` with its frontier, the run's cost O(new + log
n): here only the journal's anti-join against the log table, in the database), and the same with
no previous checkpoint (``recheck``: every logged entry checked against the journal and the root
recomputed from all of them, which is what ``relog`` cost before the frontier), and the time to create a
checkpoint (``create_checkpoint``: every chain verified, leaves
folded, signed) and to verify the journal against it (``verify_against_checkpoint``), in entries/s,
against a bare loop of ``hashlib.sha256`` over the same framed bytes (the least any verifier must
do). Each measurement runs in a child process, so its peak RSS (``ru_maxrss``) is its own; a second,
untimed run under ``tracemalloc`` gives the Python heap's peak during the operation alone.

Journals are populated directly with ``executemany`` / ``COPY`` of rows whose hashes come from
``sagacity.chain.entry_hash`` (appending a million rows one durable commit at a time would take
longer than everything measured). PostgreSQL runs when ``--pg`` or ``$SAGACITY_TEST_POSTGRES_URL``
is set, in a fresh schema dropped afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from sagacity import Sagacity, chain
from sagacity.checkpoints import SigningKey, checkpoint_log, create_checkpoint, verify_against_checkpoint

TOOL, PHASE, INPUT, PAYLOAD = "reserve_inventory", "EXECUTED", '{"sku":"SKU-9","quantity":2}', "ok"
START = datetime(2026, 1, 1)


def rows(sagas: int, per_saga: int) -> Iterator[tuple[str, int, str, str, str, str, datetime, str]]:
    """Valid chained rows, saga by saga."""
    for s in range(sagas):
        saga_id = f"order-{s:07d}"
        prev = chain.GENESIS_HASH
        for seq in range(1, per_saga + 1):
            ts = START + timedelta(microseconds=s * per_saga + seq)
            prev = chain.entry_hash(prev, saga_id, seq, TOOL, PHASE, INPUT, PAYLOAD, ts)
            yield saga_id, seq, TOOL, PHASE, INPUT, PAYLOAD, ts, prev


def populate(url: str, sagas: int, per_saga: int) -> None:
    Sagacity(url).close()  # creates the schema
    insert = (
        "INSERT INTO side_effect_journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        conn.executemany(
            insert,
            ((*r[:6], r[6].strftime("%Y-%m-%d %H:%M:%S.%f"), r[7]) for r in rows(sagas, per_saga)),
        )
        conn.commit()
        conn.close()
        return
    import psycopg

    columns = "saga_id, seq, tool_name, phase, input, payload, timestamp, hash"
    with psycopg.connect(url) as pg, pg.cursor() as cur:
        with cur.copy(f"COPY side_effect_journal ({columns}) FROM STDIN") as copy:
            for row in rows(sagas, per_saga):
                copy.write_row(row)
        cur.execute("ANALYZE side_effect_journal")


def bare_sha256(sagas: int, per_saga: int, sample: int = 200_000) -> float:
    """Entries/s of hashlib.sha256 over the framed fields (prepared beforehand, a sample of them)."""
    framed = []
    for saga_id, seq, tool, phase, input_, payload, ts, prev in rows(sagas, per_saga):
        fields = (prev, saga_id, str(seq), tool, phase, input_, payload, chain.timestamp_field(ts))
        framed.append(b"".join(chain.frame(f) for f in fields))
        if len(framed) >= sample:
            break
    started = time.perf_counter()
    for data in framed:
        hashlib.sha256(data).hexdigest()
    return len(framed) / (time.perf_counter() - started)


def child(url: str, operation: str, traced: bool) -> dict[str, float]:
    """One measurement in this (child) process: seconds, entries, peak RSS and Python-heap peak in MiB.

    With ``traced``, tracemalloc runs during the operation only (it slows Python down, so the
    timing of a traced run is not reported): its peak is the memory the operation itself needed.
    """
    key = SigningKey.generate("bench")
    with Sagacity(url, init_schema=False) as sg:
        checkpoint = create_checkpoint(sg, key, "bench") if operation == "verify" else None
        previous = None
        if operation in ("relog", "recheck"):
            previous = checkpoint_log(sg, key, "bench")  # the log exists; the timed run finds nothing new
            if operation == "recheck":
                previous = None
        if traced:
            tracemalloc.start()
        started = time.perf_counter()
        if operation in ("log", "relog", "recheck"):
            entries = checkpoint_log(sg, key, "bench", previous=previous).size
        elif checkpoint is not None:
            report = verify_against_checkpoint(sg, checkpoint)
            assert report.ok
            entries = report.entries
        else:
            entries = create_checkpoint(sg, key, "bench").entries
        seconds = time.perf_counter() - started
        heap_peak = tracemalloc.get_traced_memory()[1] if traced else 0
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "entries": entries, "rss_mib": rss_peak / 1024, "heap_mib": heap_peak / 2**20}


def measure(url: str, operation: str, traced: bool = False) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", operation, "--url", url, *(["--traced"] if traced else [])],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def drop_log(url: str) -> None:
    """Forget the log, so that "log" measures logging every entry for the first time."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            db.execute("DROP TABLE IF EXISTS sagacity_log")
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("DROP TABLE IF EXISTS sagacity_log")


def fresh_pg_schema(base: str) -> tuple[str, str]:
    import psycopg

    schema = "bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}", schema


def drop_pg_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply journal sizes (0.1 for a quick run)"
    )
    parser.add_argument("--pg", default=os.environ.get("SAGACITY_TEST_POSTGRES_URL"), help="PostgreSQL URL")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    parser.add_argument(
        "--ops", default="create,verify,log,relog,recheck", help="operations to measure (comma-separated)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.url, args.child, args.traced)))
        return

    shapes = []
    for name, sagas, per_saga in (("many", 10_000, 20), ("long", 1, 1_000_000)):
        full = (
            max(1, int(sagas * args.scale)),
            max(1, int(per_saga * args.scale)) if sagas == 1 else per_saga,
        )
        tenth = (max(1, full[0] // 10), full[1]) if sagas > 1 else (1, max(1, full[1] // 10))
        shapes += [(f"{name}/10", *tenth), (name, *full)]
    stores = ["sqlite"] + (["postgres"] if args.pg and not args.no_pg else [])
    print(f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} cores")
    sha = bare_sha256(1, 200_000)
    print(f"bare SHA-256 over framed entries: {sha:,.0f} entries/s")
    header = (
        f"{'store':<9}{'shape':<10}{'sagas':>7}{'entries':>10}{'op':>9}{'seconds':>9}"
        f"{'entries/s':>11}{'vs sha':>8}{'RSS MiB':>9}{'heap MiB':>10}"
    )
    print(header)
    for store in stores:
        for shape, sagas, per_saga in shapes:
            with tempfile.TemporaryDirectory() as tmp:
                if store == "sqlite":
                    url, schema = f"sqlite:///{Path(tmp) / 'journal.db'}", ""
                else:
                    url, schema = fresh_pg_schema(args.pg)
                try:
                    populate(url, sagas, per_saga)
                    for operation in args.ops.split(","):
                        if operation == "log":
                            drop_log(url)
                        r = measure(url, operation)
                        heap = measure(url, operation, traced=True)["heap_mib"]
                        rate = r["entries"] / r["seconds"]
                        print(
                            f"{store:<9}{shape:<10}{sagas:>7}{int(r['entries']):>10}{operation:>9}"
                            f"{r['seconds']:>9.2f}{rate:>11,.0f}{rate / sha:>8.2f}"
                            f"{r['rss_mib']:>9.1f}{heap:>10.2f}",
                            flush=True,
                        )
                finally:
                    if schema:
                        drop_pg_schema(args.pg, schema)


if __name__ == "__main__":
    main()
