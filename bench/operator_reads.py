"""Operator reads against a journal of 10k, 100k and 1M sagas: does a page cost the same at any size?

Usage: ``.venv/bin/python bench/operator_reads.py [--store sqlite|postgres] [--sizes 10000,100000]
[--dsn URL] [--runs 7]``

The journal grows from one size to the next (sizes ascending). At each size it holds sagas shaped
exactly as the library writes them: the four shapes are journaled once by real sagas on
``memory://`` and each copy gets its own saga id and timestamps, rehashed with
``sagacity.chain.entry_hash`` into a valid chain. Per 1,000 sagas: 948 COMPLETED (3 calls, 6
entries), 50 COMPENSATED (2 calls and a failing third, compensated: 12 entries), 1
AWAITING_APPROVAL (2 calls and a gate: 5 entries, with its approval request and expiry rows, as
``put_approval_request`` writes them) and 1 IN_DOUBT (2 calls and an INTENT without outcome: 5
entries); ~6.3 entries a saga. Sagas start 30 s apart and end about an hour before the run, so a
million of them span a year. Appending a million sagas one durable commit at a time would take
hours, so rows are bulk-loaded with the raw driver: ``COPY`` on PostgreSQL, ``executemany`` in
transactions of 20,000 sagas on SQLite.

After each load: ``sg.reindex()`` (timed on its own), then on PostgreSQL ``VACUUM ANALYZE`` of the
benchmark's tables (what autovacuum does to a table that grew, so the plans are those of a settled
database), then each read through the public facade: one warm-up call (its time shown as "first
call"), then ``--runs`` timed calls, median. "Page 21" and "middle page" are fetched with a cursor
obtained beforehand (by following 20 pages; from the saga at N/2). The two "after" rows time the
first page right after 5 new sagas were appended, by this process through the library or by
another writer straight into the journal (the index catches up on read); the appends are untimed.

The table gives each read in ms per size, the issue's target (#12: PostgreSQL at 1M and SQLite at
100k: pages and pending approvals <= 100 ms, in-doubt <= 1 s, doctor <= 5 s), PASS/MISS at that
size, and the growth from the smallest to the largest size. Answers are checked as it goes (counts
by status, pending requests, in-doubt calls), so a fast wrong answer fails the run.

SQLite runs in a temp directory beside this file; PostgreSQL (``--dsn`` or
``$SAGACITY_TEST_POSTGRES_URL``) in a fresh schema dropped afterwards.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from append import machine, postgres_version, sqlite_version

from sagacity import CompensationContext, Phase, Reversibility, Sagacity, SagaStatus, chain, tool
from sagacity.doctor import diagnose
from sagacity.model import ApprovalRequest, SagaSummary

PAGE = 50
#: A read whose warm-up took longer than this is timed once more, not ``--runs`` times.
SLOW_MS = 10_000
DEEP_PAGES = 20
FRESH_SAGAS = 5
GAP = timedelta(seconds=30)
STEP = timedelta(milliseconds=350)
CHUNK = 20_000
LOAD_NICENESS = 10
DEFAULT_SIZES = {"sqlite": "10000,100000", "postgres": "10000,100000,1000000"}
TARGET_SIZE = {"sqlite": 100_000, "postgres": 1_000_000}


# -- the four shapes, journaled once by the library -------------------------------------------------
@tool
def reserve_inventory(sku: str, quantity: int) -> str:
    return f"reservation-{sku}"


@reserve_inventory.compensation
def release_inventory(ctx: CompensationContext) -> None:
    """Nothing to release in a benchmark."""


@tool
def charge_card(amount: str) -> str:
    return "charge-7f3a"


@charge_card.compensation
def refund_card(ctx: CompensationContext) -> None:
    """Nothing to refund in a benchmark."""


@tool
def notify_customer(order: str) -> str:
    return "sent"


@tool
def book_shipment(order: str) -> str:
    raise RuntimeError("carrier unavailable")


@tool(reversibility=Reversibility.IRREVERSIBLE)
def send_wire_transfer(amount: str, to: str) -> str:
    return f"sent {amount} to {to}"


def _completed() -> None:
    reserve_inventory("SKU-9", 2)
    charge_card("42.00")
    notify_customer("order-1")


def _compensated() -> None:
    reserve_inventory("SKU-9", 2)
    charge_card("42.00")
    book_shipment("order-1")


def _gated() -> None:
    reserve_inventory("SKU-9", 2)
    charge_card("42.00")
    send_wire_transfer("4200.00", "DE89 3704 0044 0532 0130 00")


@dataclass(frozen=True)
class Shape:
    """One saga as the library journaled it: its entries' fields and, if gated, its request."""

    status: SagaStatus
    steps: tuple[tuple[str, str, str, str], ...]  # tool_name, phase, input, payload
    request: ApprovalRequest | None = None


def journal_shapes() -> dict[SagaStatus, Shape]:
    """Run one saga of each shape on ``memory://`` and keep what it journaled."""
    with Sagacity("memory://") as sg:
        sg.run("completed", _completed)
        sg.run("compensated", _compensated)
        sg.run("gated", _gated)
        sg.run("in-doubt", lambda: (reserve_inventory("SKU-9", 2), charge_card("42.00")))
        # A crash between a call's INTENT and its outcome: the INTENT the library writes first.
        sg.journal.append("in-doubt", "book_shipment", Phase.INTENT, '{"order":"order-1"}', "")
        shapes = {}
        for saga_id in ("completed", "compensated", "gated", "in-doubt"):
            steps = tuple((e.tool_name, str(e.phase), e.input, e.payload) for e in sg.entries(saga_id))
            requests = sg.pending_approvals(saga_id)
            status = sg.status(saga_id)
            shapes[status] = Shape(status, steps, requests[0] if requests else None)
    assert set(shapes) == {
        SagaStatus.COMPLETED,
        SagaStatus.COMPENSATED,
        SagaStatus.AWAITING_APPROVAL,
        SagaStatus.IN_DOUBT,
    }, shapes
    return shapes


def status_of(i: int) -> SagaStatus:
    """The mix: per 1,000 sagas, 1 gated, 1 in doubt, 50 compensated, the rest completed."""
    slot = i % 1000
    if slot == 0:
        return SagaStatus.AWAITING_APPROVAL
    if slot == 500:
        return SagaStatus.IN_DOUBT
    if slot % 20 == 7:
        return SagaStatus.COMPENSATED
    return SagaStatus.COMPLETED


# -- rows -------------------------------------------------------------------------------------------
JournalRow = tuple[str, int, str, str, str, str, datetime, str]
RequestRow = tuple[str, int, str, str, str, datetime]
ExpiryRow = tuple[str, int, datetime]


@dataclass
class Batch:
    """Rows of some sagas, ready for the bulk writers, and how many sagas of each status."""

    journal: list[JournalRow]
    requests: list[RequestRow]
    expiries: list[ExpiryRow]
    counts: dict[SagaStatus, int]


def saga_rows(shape: Shape, saga_id: str, start: datetime, batch: Batch) -> None:
    """Add one saga's rows to ``batch``, chained and hashed as the library would."""
    prev = chain.GENESIS_HASH
    ts = start
    for seq, (tool_name, phase, input_, payload) in enumerate(shape.steps, 1):
        ts = start + seq * STEP
        prev = chain.entry_hash(prev, saga_id, seq, tool_name, phase, input_, payload, ts)
        batch.journal.append((saga_id, seq, tool_name, phase, input_, payload, ts, prev))
    request = shape.request
    if request is not None:
        batch.requests.append(
            (saga_id, request.journal_seq, request.tool_name, request.input, request.input_hash, ts)
        )
        if request.expires_at is not None:
            batch.expiries.append(
                (saga_id, request.journal_seq, ts + (request.expires_at - request.created_at))
            )
    batch.counts[shape.status] = batch.counts.get(shape.status, 0) + 1


def batches(shapes: dict[SagaStatus, Shape], first: int, last: int, origin: datetime) -> Iterator[Batch]:
    """Sagas ``first`` to ``last - 1``, saga i starting at ``origin + i * GAP``, in chunks."""
    for lo in range(first, last, CHUNK):
        batch = Batch([], [], [], {})
        for i in range(lo, min(last, lo + CHUNK)):
            saga_rows(shapes[status_of(i)], saga_id(i), origin + i * GAP, batch)
        yield batch


def load(
    store: Store, shapes: dict[SagaStatus, Shape], first: int, last: int, origin: datetime
) -> dict[SagaStatus, int]:
    """Write sagas ``first`` to ``last - 1``; how many of each status. Runs in a child process
    at lower priority, so loading yields the machine to others (the reads run at normal priority)."""
    os.nice(LOAD_NICENESS)
    counts: dict[SagaStatus, int] = {}
    for batch in batches(shapes, first, last, origin):
        store.write(batch)
        for status, n in batch.counts.items():
            counts[status] = counts.get(status, 0) + n
    return counts


def saga_id(i: int) -> str:
    return f"agent-run-{i:08d}"


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


# -- stores -----------------------------------------------------------------------------------------
COLUMNS = "saga_id, seq, tool_name, phase, input, payload, timestamp, hash"
REQUEST_COLUMNS = "saga_id, journal_seq, tool_name, input, input_hash, created_at"
EXPIRY_COLUMNS = "saga_id, journal_seq, expires_at"


class Store:
    """Where the benchmark's journal lives: the library's URL and a bulk writer beside it."""

    name: str
    url: str

    def write(self, batch: Batch) -> None:
        raise NotImplementedError

    def settle(self) -> None:
        """What a settled database has done after growing (nothing on SQLite)."""


class SQLiteStore(Store):
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"

    def write(self, batch: Batch) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            text = _sqlite_ts
            conn.executemany(
                f"INSERT INTO side_effect_journal ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                ((*r[:6], text(r[6]), r[7]) for r in batch.journal),
            )
            conn.executemany(
                f"INSERT INTO sagacity_approval_request ({REQUEST_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                ((*r[:5], text(r[5])) for r in batch.requests),
            )
            conn.executemany(
                f"INSERT INTO sagacity_approval_expiry ({EXPIRY_COLUMNS}) VALUES (?, ?, ?)",
                ((*r[:2], text(r[2])) for r in batch.expiries),
            )
            conn.execute("COMMIT")
        finally:
            conn.close()


def _sqlite_ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


class PostgresStore(Store):
    name = "postgres"

    def __init__(self, url: str, schema: str) -> None:
        sep = "&" if "?" in url else "?"
        self.url = f"{url}{sep}options=-csearch_path%3D{schema}"
        self.schema = schema

    def write(self, batch: Batch) -> None:
        import psycopg

        with psycopg.connect(self.url) as conn, conn.cursor() as cur:
            for table, columns, rows in (
                ("side_effect_journal", COLUMNS, batch.journal),
                ("sagacity_approval_request", REQUEST_COLUMNS, batch.requests),
                ("sagacity_approval_expiry", EXPIRY_COLUMNS, batch.expiries),
            ):
                with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)

    def settle(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (self.schema,)
            ).fetchall()
            for (table,) in tables:
                conn.execute(f"VACUUM ANALYZE {self.schema}.{table}")


@contextmanager
def open_store(kind: str, dsn: str | None) -> Iterator[Store]:
    """A fresh database with the library's schema, removed afterwards."""
    if kind == "sqlite":
        # On the working disk beside the project, as a user's journal would be.
        with tempfile.TemporaryDirectory(prefix="sagacity-reads-", dir=Path(__file__).parent) as tmp:
            store: Store = SQLiteStore(Path(tmp) / "journal.db")
            Sagacity(store.url).close()
            yield store
        return
    import psycopg

    assert dsn is not None
    schema = f"bench_reads_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        store = PostgresStore(dsn, schema)
        Sagacity(store.url).close()
        yield store
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


# -- measurement ------------------------------------------------------------------------------------
@dataclass
class Read:
    """One operator read: its label, target in ms (None: no target), and a timed run in ms."""

    label: str
    target_ms: float | None
    run: Callable[[], float]


def timed(fn: Callable[[], object]) -> Callable[[], float]:
    def run() -> float:
        started = time.perf_counter()
        fn()
        return (time.perf_counter() - started) * 1e3

    return run


def after(prepare: Callable[[], None], fn: Callable[[], object]) -> Callable[[], float]:
    """Time ``fn`` right after an untimed ``prepare``."""
    measure = timed(fn)

    def run() -> float:
        prepare()
        return measure()

    return run


@dataclass
class Sized:
    """What one size measured: ms per read (first call, median of runs), reindex seconds."""

    size: int
    load_s: float
    reindex_s: float
    first_ms: dict[str, float]
    median_ms: dict[str, float]
    targets_ms: dict[str, float | None]
    #: Reads timed once only (their warm-up took over ``SLOW_MS``).
    once: set[str]
    #: How big the answers were (sagas, pending requests, in-doubt calls, doctor's findings).
    answers: dict[str, int]


class Bench:
    """The growing journal of one store and the reads measured at each size."""

    def __init__(self, store: Store, runs: int, largest: int) -> None:
        self.store = store
        self.runs = runs
        self.shapes = journal_shapes()
        self.loaded = 0
        self.fresh = 0
        # The newest loaded saga starts about an hour ago; sagas appended later are newer still.
        self.origin = utc_now() - timedelta(hours=1) - largest * GAP
        self.expected: dict[SagaStatus, int] = {}

    def grow(self, size: int) -> float:
        """Bulk-load sagas up to ``size`` (in a child process at lower priority); seconds taken."""
        started = time.perf_counter()
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            counts = pool.submit(load, self.store, self.shapes, self.loaded, size, self.origin).result()
        self.count(counts)
        self.loaded = size
        return time.perf_counter() - started

    def count(self, counts: dict[SagaStatus, int]) -> None:
        for status, n in counts.items():
            self.expected[status] = self.expected.get(status, 0) + n

    def behind_the_back(self) -> None:
        """Another writer (say, another implementation) inserts finished sagas straight into the journal."""
        batch = Batch([], [], [], {})
        start = utc_now()
        for _ in range(FRESH_SAGAS):
            self.fresh += 1
            saga_rows(self.shapes[SagaStatus.COMPLETED], f"other-writer-{self.fresh:06d}", start, batch)
        self.store.write(batch)
        self.count(batch.counts)

    def through_library(self, sg: Sagacity) -> None:
        for _ in range(FRESH_SAGAS):
            self.fresh += 1
            sg.run(f"live-{self.fresh:06d}", _completed)
        self.expected[SagaStatus.COMPLETED] += FRESH_SAGAS

    def measure(self, size: int) -> Sized:
        print(f"\n{self.store.name} at {size:,} sagas: loading ...", flush=True)
        load_s = self.grow(size)
        with Sagacity(self.store.url) as sg:
            started = time.perf_counter()
            reindex = getattr(sg, "reindex", None)
            held = reindex() if reindex is not None else None
            reindex_s = time.perf_counter() - started
            self.store.settle()
            print(
                f"  loaded in {load_s:.1f} s; reindex {reindex_s:.2f} s "
                f"({'no reindex() on this version' if held is None else f'{held:,} sagas'})",
                flush=True,
            )
            self.check(sg)
            reads = self.reads(sg, size)
            first: dict[str, float] = {}
            medians: dict[str, float] = {}
            targets = {read.label: read.target_ms for read in reads}
            once: set[str] = set()
            for read in reads:
                first[read.label] = read.run()
                runs = self.runs if first[read.label] < SLOW_MS else 1
                if runs == 1:
                    once.add(read.label)
                medians[read.label] = statistics.median(read.run() for _ in range(runs))
                print(
                    f"  {read.label:52} first {first[read.label]:9.1f} ms, "
                    f"median {medians[read.label]:9.1f} ms",
                    flush=True,
                )
            answers = self.check(sg)
        return Sized(size, load_s, reindex_s, first, medians, targets, once, answers)

    def check(self, sg: Sagacity) -> dict[str, int]:
        """The reads' answers are right (a fast wrong answer is no result); how big they were."""
        counts = sg.saga_counts()
        assert counts == self.expected, (counts, self.expected)
        pending = sg.pending_approvals()
        assert len(pending) == self.expected.get(SagaStatus.AWAITING_APPROVAL, 0), len(pending)
        in_doubt = sg.in_doubt()
        assert len(in_doubt) == self.expected.get(SagaStatus.IN_DOUBT, 0), len(in_doubt)
        assert sg.verify(saga_id(self.loaded // 2)).valid
        return {
            "sagas": sum(counts.values()),
            "pending requests": len(pending),
            "in-doubt calls": len(in_doubt),
            "doctor's findings": len(diagnose(sg).findings),
        }

    def reads(self, sg: Sagacity, size: int) -> list[Read]:
        first_page = sg.sagas(limit=PAGE)
        assert len(first_page) == PAGE
        deep = first_page
        for _ in range(DEEP_PAGES - 1):
            page = sg.sagas(limit=PAGE, after=deep[-1].cursor)
            if not page:  # a journal shorter than the pages followed
                break
            deep = page
        middle = size // 2
        shape = self.shapes[status_of(middle)]
        started = self.origin + middle * GAP
        ended = started + len(shape.steps) * STEP
        middle_cursor = SagaSummary(saga_id(middle), shape.status, len(shape.steps), started, ended).cursor
        in_doubt = sg.in_doubt
        return [
            Read(f"sagas(limit={PAGE}): first page", 100, timed(lambda: sg.sagas(limit=PAGE))),
            Read(
                "sagas(status=COMPENSATED): first page",
                100,
                timed(lambda: sg.sagas(status=SagaStatus.COMPENSATED, limit=PAGE)),
            ),
            Read(
                "sagas(after=cursor): next page",
                100,
                timed(lambda: sg.sagas(limit=PAGE, after=first_page[-1].cursor)),
            ),
            Read(
                f"sagas(after=cursor): page {DEEP_PAGES + 1}",
                100,
                timed(lambda: sg.sagas(limit=PAGE, after=deep[-1].cursor)),
            ),
            Read(
                "sagas(after=cursor): middle page",
                100,
                timed(lambda: sg.sagas(limit=PAGE, after=middle_cursor)),
            ),
            Read("saga_counts()", None, timed(sg.saga_counts)),
            Read("pending_approvals()", 100, timed(sg.pending_approvals)),
            Read("in_doubt()", 1000, timed(in_doubt)),
            Read("doctor: diagnose(sg)", 5000, timed(lambda: diagnose(sg))),
            Read(
                f"first page, {FRESH_SAGAS} sagas appended by the library",
                100,
                after(lambda: self.through_library(sg), lambda: sg.sagas(limit=PAGE)),
            ),
            Read(
                f"first page, {FRESH_SAGAS} sagas inserted by another writer",
                100,
                after(self.behind_the_back, lambda: sg.sagas(limit=PAGE)),
            ),
        ]


# -- report -----------------------------------------------------------------------------------------
def table(results: Sequence[Sized], store: str, first: bool = False) -> str:
    """Rows = reads, columns = sizes (ms), then target, verdict at the target size, and growth."""
    target_size = TARGET_SIZE[store]
    sizes = [r.size for r in results]
    head = (
        "| read | "
        + " | ".join(f"{n:,}" for n in sizes)
        + f" | target at {target_size:,} | verdict | growth |"
    )
    rule = "|---|" + "---:|" * len(sizes) + "---|---|---:|"
    lines = [head, rule]
    for label in results[0].median_ms:
        cells = [(r.first_ms if first else r.median_ms)[label] for r in results]
        marks = ["*" if label in r.once and not first else "" for r in results]
        target = results[0].targets_ms[label]
        at_target = next((r for r in results if r.size == target_size), None)
        if target is None:
            verdict = "—"
        elif at_target is None:
            verdict = f"n/a (not run at {target_size:,})"
        else:
            verdict = "PASS" if at_target.median_ms[label] <= target else "MISS"
        growth = f"{cells[-1] / cells[0]:.2f}x" if len(cells) > 1 and cells[0] > 0 else "—"
        lines.append(
            f"| {label} | "
            + " | ".join(_ms(c) + mark for c, mark in zip(cells, marks, strict=True))
            + f" | {'—' if target is None else f'≤ {_ms(target)}'} | {verdict} | {growth} |"
        )
    if not first:
        lines.append(
            "| reindex() (s) | " + " | ".join(f"{r.reindex_s:.2f}" for r in results) + " | — | — | — |"
        )
        lines.append(
            "| bulk load of the growth (s) | "
            + " | ".join(f"{r.load_s:.1f}" for r in results)
            + " | — | — | — |"
        )
    return "\n".join(lines)


def _ms(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 1 else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--sizes",
        help="comma-separated saga counts, ascending (default: sqlite 10k,100k; postgres 10k,100k,1M)",
    )
    parser.add_argument("--dsn", default=os.environ.get("SAGACITY_TEST_POSTGRES_URL"), help="PostgreSQL URL")
    parser.add_argument("--runs", type=int, default=7, help="timed calls per read after one warm-up (median)")
    args = parser.parse_args(argv)
    sizes = sorted(int(s.replace("_", "")) for s in (args.sizes or DEFAULT_SIZES[args.store]).split(","))
    if args.store == "postgres" and not args.dsn:
        parser.error("postgres needs --dsn URL or $SAGACITY_TEST_POSTGRES_URL")

    print(f"machine: {machine()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(sqlite_version() if args.store == "sqlite" else postgres_version(args.dsn))
    print(f"method: reads through the facade, one warm-up then median of {args.runs} calls, after reindex()")
    results: list[Sized] = []
    started = time.perf_counter()
    with open_store(args.store, args.dsn) as store:
        bench = Bench(store, args.runs, sizes[-1])
        for size in sizes:
            results.append(bench.measure(size))
    print(f"\nOperator reads on {args.store}, ms (median of {args.runs} after one warm-up)")
    print(table(results, args.store))
    if any(r.once for r in results):
        print(f"* timed once: its warm-up took over {SLOW_MS / 1000:.0f} s")
    print("\nSize of the answers")
    print("| answer | " + " | ".join(f"{r.size:,}" for r in results) + " |")
    print("|---|" + "---:|" * len(results))
    for name in results[0].answers:
        print(f"| {name} | " + " | ".join(f"{r.answers[name]:,}" for r in results) + " |")
    print("\nFirst call after reindex() (and VACUUM ANALYZE on PostgreSQL), ms")
    print(table(results, args.store, first=True))
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
