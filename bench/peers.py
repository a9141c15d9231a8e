"""The same no-op tool through Sagacity and its peers, each against the same durable-commit floor.

Usage: ``pip install -e '.[bench]' && python bench/peers.py [--pg URL] [--rounds N] [--only NAME,...]``

Subjects (each in its own process, so no library's globals, thread pools or event loops touch
another's figures):

- ``sagacity``: ``with sg.saga(id): noop()`` on SQLite (WAL, ``synchronous=FULL``) and PostgreSQL.
- ``agent-saga``: an ``async def`` COMPENSABLE ``@tool`` with a registered compensation, inside
  ``saga_scope`` on its durable ``FileWAL`` (write + fsync, group commit) and on ``PostgresWAL``
  (asyncpg). Its defaults: ``durable_commit=True``, so STEP_INTENT and STEP_COMMITTED are both
  fenced with ``barrier()`` before the step returns: two durable writes per step, as ours.
- ``dbos``: a ``@DBOS.step()`` inside a ``@DBOS.workflow()``, with the SQLite and the PostgreSQL
  system database (DBOS checkpoints each step's output once, after it ran).

Each subject runs 1 saga (or workflow) of ``--steps`` steps, and 8 at once (threads for Sagacity
and DBOS, tasks on one event loop for agent-saga, which is how each is meant to be used), timing
the saga's start and end too. Its process alternates subject rounds with floor rounds, one
durable commit of a journal-sized row by the raw driver (``bench/_floor.py``; SQLite for the file
and SQLite subjects, PostgreSQL for the PostgreSQL ones), and reports medians. Reported: µs per
step (wall time / all steps) and its ratio to the single-writer floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _floor import FloorWriter, PostgresFloor, SQLiteFloor
from append import interleaved, machine, postgres_version, run_threads, sqlite_version

HERE = Path(__file__).resolve().parent
CONCURRENCY = (1, 8)

# name -> (store the floor and the subject use, the package it needs, what it runs on)
SUBJECTS: dict[str, tuple[str, str, str]] = {
    "sagacity-sqlite": ("sqlite", "sagacity", "SQLite WAL, synchronous=FULL"),
    "sagacity-postgres": ("postgres", "sagacity", "PostgreSQL, autocommit INSERT"),
    "agent-saga-file": ("sqlite", "agent_saga", "FileWAL: JSON lines + fsync"),
    "agent-saga-postgres": ("postgres", "agent_saga", "PostgresWAL (asyncpg)"),
    "dbos-sqlite": ("sqlite", "dbos", "SQLite system DB (its defaults)"),
    "dbos-postgres": ("postgres", "dbos", "PostgreSQL system DB"),
}


# -- subjects (run in the child process) ------------------------------------------------------------
Round = Callable[[int, int], float]
"""A subject round: (round, sagas at once) -> µs of wall time per step."""


def sagacity_subject(url: str, steps: int) -> tuple[Round, Callable[[], None]]:
    from sagacity import Sagacity, tool

    @tool
    def noop() -> str:
        return "ok"

    sg = Sagacity(url)

    def one(saga_id: str) -> None:
        with sg.saga(saga_id):
            for _ in range(steps):
                noop()

    def run(r: int, sagas: int) -> float:
        tag = f"sagacity-{sagas}-{r}-{uuid.uuid4().hex[:8]}"
        elapsed = run_threads(sagas, lambda i: one(f"{tag}-{i}"))
        return elapsed / (sagas * steps) * 1e6

    return run, sg.close


def agent_saga_subject(wal_kind: str, where: str, steps: int) -> tuple[Round, Callable[[], None]]:
    from agent_saga import saga_scope, tool
    from agent_saga.registry import compensator
    from agent_saga.semantics import ActionSemantics, Compensation

    logging.getLogger("agent_saga").setLevel(logging.ERROR)

    @compensator("bench.noop_undo")
    def undo() -> None:
        return None

    @tool(
        "noop",
        semantics=ActionSemantics.COMPENSABLE,
        compensate=lambda result: Compensation(fn=undo, handler="bench.noop_undo"),
    )
    async def noop() -> str:
        return "ok"

    loop = asyncio.new_event_loop()

    async def open_wal() -> Any:
        if wal_kind == "file":
            from agent_saga.wal import FileWAL

            wal: Any = FileWAL(where)
        else:
            import asyncpg
            from agent_saga.wal import PostgresWAL

            url, schema = where.rsplit(" ", 1)
            pool = await asyncpg.create_pool(url, server_settings={"search_path": schema})
            wal = PostgresWAL(pool=pool)
            wal._owns_pool = True  # close() closes the pool it was given
        await wal.start()
        return wal

    wal = loop.run_until_complete(open_wal())

    async def one() -> None:
        async with saga_scope(wal=wal):
            for _ in range(steps):
                await noop()

    async def many(sagas: int) -> float:
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(sagas)))
        return time.perf_counter() - started

    def run(r: int, sagas: int) -> float:
        return loop.run_until_complete(many(sagas)) / (sagas * steps) * 1e6

    def close() -> None:
        loop.run_until_complete(wal.close())
        loop.close()

    return run, close


def dbos_subject(url: str, schema: str | None, steps: int) -> tuple[Round, Callable[[], None]]:
    from dbos import DBOS, DBOSConfig, SetWorkflowID

    config: DBOSConfig = {"name": "sagacity-peers-bench", "system_database_url": url, "log_level": "ERROR"}
    if schema is not None:
        config["dbos_system_schema"] = schema

    @DBOS.step()
    def noop() -> str:
        return "ok"

    @DBOS.workflow()
    def workflow(n: int) -> None:
        for _ in range(n):
            noop()

    DBOS(config=config)
    DBOS.launch()

    def one(workflow_id: str) -> None:
        with SetWorkflowID(workflow_id):
            workflow(steps)

    def run(r: int, sagas: int) -> float:
        tag = f"dbos-{sagas}-{r}-{uuid.uuid4().hex[:8]}"
        elapsed = run_threads(sagas, lambda i: one(f"{tag}-{i}"))
        return elapsed / (sagas * steps) * 1e6

    return run, DBOS.destroy


def in_schema(url: str, schema: str) -> str:
    """``url`` with ``schema`` as its search path (libpq ``options``)."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def child(args: argparse.Namespace) -> int:
    """Measure one subject against its floor; print one JSON line."""
    store = SUBJECTS[args.child][0]
    workdir = Path(args.workdir)
    if store == "sqlite":
        floor: SQLiteFloor | PostgresFloor = SQLiteFloor(str(workdir / f"floor-{args.child}.db"))
    else:
        floor = PostgresFloor(in_schema(args.pg, f"{args.schema}_floor"))
    subject_schema = f"{args.schema}_subject"
    if args.child == "sagacity-sqlite":
        run, close = sagacity_subject(f"sqlite:///{workdir}/sagacity.db", args.steps)
    elif args.child == "sagacity-postgres":
        run, close = sagacity_subject(in_schema(args.pg, subject_schema), args.steps)
    elif args.child == "agent-saga-file":
        run, close = agent_saga_subject("file", str(workdir / "agent-saga.wal"), args.steps)
    elif args.child == "agent-saga-postgres":
        run, close = agent_saga_subject("postgres", f"{args.pg} {subject_schema}", args.steps)
    elif args.child == "dbos-sqlite":
        run, close = dbos_subject(f"sqlite:///{workdir}/dbos.sqlite", None, args.steps)
    else:
        run, close = dbos_subject(args.pg, subject_schema, args.steps)

    writer: FloorWriter = floor.writer()

    def floor_round(r: int) -> float:
        saga = f"floor-{uuid.uuid4().hex}"
        started = time.perf_counter()
        for _ in range(args.floor_ops):
            writer.append(saga)
        return (time.perf_counter() - started) / args.floor_ops * 1e6

    result: dict[str, list[float]] = {}
    try:
        for sagas in CONCURRENCY:
            subject_us, floor_us = interleaved(args.rounds, lambda r, n=sagas: run(r, n), floor_round)
            result[str(sagas)] = [subject_us, floor_us]
    finally:
        writer.close()
        close()
    print(json.dumps(result))
    return 0


# -- parent -------------------------------------------------------------------------------------------
@contextmanager
def postgres_schemas(base: str | None, names: list[str]) -> Iterator[str | None]:
    """A fresh schema prefix; ``<prefix>_floor`` and ``<prefix>_subject`` per subject, all dropped."""
    if base is None:
        yield None
        return
    import psycopg

    prefix = f"bench_peers_{uuid.uuid4().hex[:8]}"
    schemas = [
        f"{prefix}_{n.replace('-', '_')}_{part}"
        for n in names
        if SUBJECTS[n][0] == "postgres"
        for part in ("floor", "subject")
    ]
    with psycopg.connect(base, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield prefix
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def run_child(name: str, args: argparse.Namespace, workdir: Path, prefix: str | None) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--workdir",
        str(workdir),
        "--rounds",
        str(args.rounds),
        "--steps",
        str(args.steps),
        "--floor-ops",
        str(args.floor_ops),
    ]
    if prefix is not None:
        command += ["--pg", args.pg, "--schema", f"{prefix}_{name.replace('-', '_')}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=1800, cwd=HERE)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {done.returncode}: {tail}"}
    return dict(json.loads(lines[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg", default=os.environ.get("SAGACITY_TEST_POSTGRES_URL"), help="PostgreSQL URL")
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds per figure (median)")
    parser.add_argument("--steps", type=int, default=50, help="steps (tool calls) per saga")
    parser.add_argument("--floor-ops", type=int, default=200, help="commits per floor round")
    parser.add_argument("--only", default=",".join(SUBJECTS), help="comma-separated subjects to run")
    parser.add_argument("--quick", action="store_true", help="few rounds and steps: a smoke run")
    parser.add_argument("--child", choices=sorted(SUBJECTS), help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.floor_ops = 3, 10, 50
    if args.child:
        return child(args)

    names = [n for n in args.only.split(",") if n]
    print(f"machine: {machine()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"sqlite: {sqlite_version()}")
    if args.pg:
        print(f"postgres: {postgres_version(args.pg)}")
    else:
        print("postgres: skipped (set SAGACITY_TEST_POSTGRES_URL or pass --pg URL)")
    print(
        f"method: {args.steps} steps per saga, medians of {args.rounds} rounds interleaved with the floor\n"
    )
    header = (
        "| subject             | runs on                         | 1 saga µs/step | ratio  "
        "| 8 sagas µs/step | ratio  |\n"
        "|---------------------|---------------------------------|---------------:|-------:"
        "|----------------:|-------:|"
    )
    print(header)
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="sagacity-peers-") as tmp,
        postgres_schemas(args.pg, names) as prefix,
    ):
        for name in names:
            store, module, runs_on = SUBJECTS[name]
            if store == "postgres" and prefix is None:
                outcome: dict[str, Any] = {"error": "no PostgreSQL URL"}
            elif not installed(module):
                outcome = {"error": f"{module} not installed: pip install -e '.[bench]'"}
            else:
                workdir = Path(tmp) / name
                workdir.mkdir()
                outcome = run_child(name, args, workdir, prefix if store == "postgres" else None)
            if "error" in outcome:
                row = f"| {name:19} | {runs_on:31} | {outcome['error']} |"
            else:
                cells = []
                for sagas in CONCURRENCY:
                    subject_us, floor_us = outcome[str(sagas)]
                    cells.append(f"{subject_us:8.0f} ({floor_us:4.0f}) | {subject_us / floor_us:5.2f}x")
                row = f"| {name:19} | {runs_on:31} | {' | '.join(cells)} |"
            rows.append(row)
            print(row, flush=True)
    print("\nµs of wall time per step (floor µs per durable commit measured beside it); ratio = step / floor")
    print(header)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
