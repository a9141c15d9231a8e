"""A wrapped no-op tool call inside a saga, against the physical floor of one durable commit.

Usage: ``.venv/bin/python bench/overhead.py [--pg URL] [--mysql URL] [--rounds N] [--quick]
[--stores sqlite,postgres,mysql] [--telemetry | --policy]``

Without ``--telemetry`` or ``--policy`` it prints, per store, every figure of issue #35 with its
target and the machine's load average when it was measured (see ``FIGURES`` below): a long saga,
a short saga (START, 2 calls, END), 8 and 64 sagas at once, a call under 5 CEL rules and under 5
rules and a budget (each against the same call without a policy), and, with no store at all, the
µs one policy evaluation takes.

What it measures, in one run, for SQLite (WAL, ``synchronous=FULL``, a temp file), PostgreSQL
(``--pg`` or ``$SAGACITY_TEST_POSTGRES_URL``, in fresh schemas dropped afterwards) and MariaDB /
MySQL (``--mysql`` or ``$SAGACITY_TEST_MYSQL_URL``, in fresh databases dropped afterwards; each
server store skipped with a message when no URL is given):

- subject: sagas of ``--saga-calls`` calls (default 5, an agent task's size), one after another,
  each ``with sg.saga(new_id): noop()`` x 5, where ``noop`` is ``@tool def noop() -> str``. Each
  saga's start and end are inside the timing, as a user pays them; a single saga of 200 calls (as
  this benchmark ran before #10) spread them too thin to show. "1 saga"
  means one at a time; with 8 and 64 at once each thread runs its own sagas, and the figure is
  wall time divided by all the calls made.
- floor: one durable commit of a journal-sized row by the raw driver (``bench/_floor.py``): an
  autocommit INSERT on PostgreSQL (into the journal's DDL, which SPEC §2 fixes) and on MariaDB
  (raw PyMySQL, into the journal's table without the index's triggers), one INSERT per WAL
  transaction with ``synchronous=FULL`` on SQLite (into a table with the journal's columns and
  primary key only: no index or trigger of ours), one writer on one connection. Both databases
  sit in one directory on the working disk.
- least: what the ratio would be if each of the unit's commits (5 a short saga, 2 a call of a
  long saga; ``--durability``: 3 and 1 deferred) cost one floor commit and the library's Python
  cost what the same unit costs on ``memory://`` in the same run. It tells a target this machine
  cannot reach from one that code could: a target below it needs fewer commits or less CPU, not
  a faster path to the same work. An estimate, not a bound: on the real stores the drivers and
  the liveness lease add to it, and caches gone cold during each commit make the same Python
  slower than on ``memory://``; within rounds' noise a figure can come out a few % under it.

With ``--telemetry`` it measures instead what OpenTelemetry adds to the same call (issue #13), one
saga at a time on each store (``memory`` too: there the call is all CPU, so the cost shows most):
``off`` (the API installed, no provider configured: what an application that has not set up
OpenTelemetry pays), ``sdk`` (the SDK's providers with nothing behind them: spans and metrics are
made, then dropped) and ``sdk+batch`` (a ``BatchSpanProcessor`` and a periodic metric reader, each
into an exporter that discards: what a real pipeline costs in this process, short of the
serialisation and network of OTLP). Modes take turns round by round, the order rotating.

With ``--durability`` it measures instead the deferred durability mode (issue #35 item 4), one
saga at a time, each mode of ``Sagacity(durability=...)`` paired with its own interleaved floor
rounds: a short saga (START, ``--short-calls`` calls (2), END) per saga against four floor
commits, and one long saga of ``--calls`` calls per call against two floor commits. Targets for
``deferred``: short <= 0.80x, long <= 0.60x (``immediate`` is printed beside it, no target).

With ``--policy`` it measures instead what a guardrails policy with no history rule adds to the same
call (issue #22), one saga at a time: two ``Sagacity`` on one store, one without a policy and one
with ``POLICY`` below (rules that apply to the call, a CEL condition evaluated on each, the kill
switch honoured at its default poll), taking turns saga by saga within each round (so a load
spike longer than a few milliseconds hits both sides alike); target: <= 1.05x the call without a
policy, the median of the rounds' paired ratios.

A call journals INTENT and EXECUTED, two durable appends, so 2x the floor is the physical limit for
one saga. Targets (issue #3): one saga <= 2.3x the floor per call; 8 and 64 sagas at once: wall time
per call <= 1.0x the single-writer floor. Subject and floor rounds alternate (swapping order every
round) and each figure is the median of its rounds, so drifting machine load hits both sides.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from _floor import FloorWriter
from append import (
    Target,
    interleaved,
    machine,
    mysql_target,
    mysql_version,
    postgres_target,
    postgres_version,
    run_threads,
    sqlite_target,
    sqlite_version,
)

from sagacity import Sagacity, tool

#: The figures of the default run: (name, what one unit is, floor commits it is held against,
#: target ratio or None, stores the target is for). A call journals INTENT and EXECUTED (2
#: commits); a short saga's START rides with its first INTENT, so START + 2 calls + END is 5
#: commits, 1.25x of 4 at the physical limit.
FIGURES = {
    "long saga": ("call", 2, None, ()),
    "short saga": ("saga", 4, 1.30, ("sqlite", "postgres", "mysql")),
    "8 at once": ("call", 1, 0.80, ("postgres", "mysql")),
    "64 at once": ("call", 1, 0.80, ("postgres", "mysql")),
}
CONCURRENCY = (8, 64)
SHORT_CALLS = 2


def durability_commits(mode: str, shape: str, short_calls: int) -> int:
    """Commits of a unit: a short saga's START rides with its first INTENT; a deferred outcome
    rides with the next INTENT or the END, so a deferred call costs one commit, not two."""
    per_call = 1 if mode == "deferred" else 2
    return per_call * short_calls + 1 if shape == "short" else per_call


#: The commits one unit of a figure makes, one after another, when nothing else is writing
#: (``tests/sagas/test_round_trips.py`` holds the stores to them): with the library's own CPU on
#: ``memory://`` they give the figure's least (``Row.least``). Sagas at once share commits, so
#: they have none.
COMMITS = {
    "long saga": durability_commits("immediate", "long", SHORT_CALLS),
    "short saga": durability_commits("immediate", "short", SHORT_CALLS),
}


@tool
def noop() -> str:
    """The benchmark's tool: does nothing, so all that is left is Sagacity's cost."""
    return "ok"


def load() -> float:
    """The one-minute load average now."""
    return os.getloadavg()[0]


@dataclass(frozen=True)
class Row:
    """One figure: the subject's µs per unit against ``floors`` floor commits, with its target."""

    store: str
    figure: str
    subject_us: float
    floor_us: float
    load: float
    #: The same unit's µs on ``memory://`` (the library's CPU, no store), when it was measured.
    library_us: float | None = None

    @property
    def ratio(self) -> float:
        return self.subject_us / (self.floor_us * FIGURES[self.figure][1])

    @property
    def least(self) -> float | None:
        """The ratio with every commit at this run's floor and the library's CPU as on ``memory://``
        (see "least" in the module's docstring)."""
        commits = COMMITS.get(self.figure)
        if commits is None or self.library_us is None:
            return None
        return least_ratio(commits, self.library_us, self.floor_us, FIGURES[self.figure][1])

    @property
    def target(self) -> float | None:
        _, _, target, stores = FIGURES[self.figure]
        return target if self.store in stores else None

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "—"
        return "PASS" if self.ratio <= self.target else "MISS"

    def line(self) -> str:
        unit, floors, _, _ = FIGURES[self.figure]
        target = f"≤ {self.target:.2f}x" if self.target is not None else "—"
        least = f"{self.least:5.2f}x" if self.least is not None else "    —"
        return (
            f"| {self.store:8} | {self.figure:10} | µs/{unit:4} {self.subject_us:9.1f} "
            f"| {self.floor_us:8.1f} | {floors} | {self.ratio:5.2f}x | {least} | {target:8} "
            f"| {self.verdict:4} | {self.load:5.2f} |"
        )


HEADER = (
    "| store    | figure     | subject          | floor µs | floors | ratio  | least  | target   | verdict "
    "| load  |\n"
    "|----------|------------|-----------------:|---------:|-------:|-------:|-------:|----------|---------"
    "|------:|"
)


def least_ratio(commits: int, library_us: float, floor_us: float, floors: int) -> float:
    """``commits`` floor commits and ``library_us`` of the library's CPU, against ``floors``."""
    return (commits * floor_us + library_us) / (floors * floor_us)


def library_micros(
    rounds: int, calls: int, short_sagas: int, durability: str = "immediate", short_calls: int = SHORT_CALLS
) -> dict[str, float]:
    """The library's own cost of a unit, on ``memory://`` (no store, no disk): µs per short saga
    and per call of a long saga, medians of ``rounds`` after a warm-up round."""
    with Sagacity("memory://") as sg:
        short = durability_round(sg, durability, "short", short_sagas * short_calls, short_calls)
        long = durability_round(sg, durability, "long", calls, short_calls)
        spent: dict[str, list[float]] = {"short saga": [], "long saga": []}
        for r in range(-1, rounds):
            for figure, run in (("short saga", short), ("long saga", long)):
                value = run(r)
                if r >= 0:
                    spent[figure].append(value)
    return {figure: statistics.median(values) for figure, values in spent.items()}


def floor_round(writer: FloorWriter, ops: int) -> Callable[[int], float]:
    """One round of the floor: ``ops`` durable single-row commits, in µs per commit."""

    def run(r: int) -> float:
        saga = f"floor-{r}"
        started = time.perf_counter()
        for _ in range(ops):
            writer.append(saga)
        return (time.perf_counter() - started) / ops * 1e6

    return run


def subject_round(sg: Sagacity, sagas: int, calls_per_thread: int, saga_calls: int) -> Callable[[int], float]:
    """One round of the subject: ``sagas`` threads, each making ``calls_per_thread`` calls in
    sagas of ``saga_calls`` calls, in µs of wall time per call."""

    def sagas_of(tag: str) -> None:
        for n in range(max(1, calls_per_thread // saga_calls)):
            with sg.saga(f"{tag}-{n}") as scope:
                for _ in range(saga_calls):
                    noop()
            assert scope.result is not None
            assert scope.result.status.value == "COMPLETED", scope.result

    def run(r: int) -> float:
        tag = f"ov{sagas}-{r}-{time.monotonic_ns()}"
        if sagas == 1:
            started = time.perf_counter()
            sagas_of(tag)
            elapsed = time.perf_counter() - started
        else:
            elapsed = run_threads(sagas, lambda i: sagas_of(f"{tag}-{i}"))
        calls = sagas * max(1, calls_per_thread // saga_calls) * saga_calls
        return elapsed / calls * 1e6

    return run


def bench_store(target: Target, args: argparse.Namespace, library: dict[str, float]) -> list[Row]:
    """The figures of one store; each pairs its own interleaved floor rounds (``library``: each
    figure's µs on ``memory://``, for its least ratio)."""
    rounds: dict[str, Callable[[int], float]] = {}
    with Sagacity(target.subject_url) as sg:
        rounds["long saga"] = subject_round(sg, 1, args.calls, args.calls)
        short = subject_round(sg, 1, args.short_sagas * SHORT_CALLS, SHORT_CALLS)
        rounds["short saga"] = lambda r: short(r) * SHORT_CALLS  # per saga, not per call
        for sagas in CONCURRENCY:
            rounds[f"{sagas} at once"] = subject_round(sg, sagas, args.calls_concurrent, args.saga_calls)
        rows = []
        writer = target.floor.writer()
        try:
            for figure, subject in rounds.items():
                subject_us, floor_us = interleaved(args.rounds, subject, floor_round(writer, args.floor_ops))
                rows.append(Row(target.name, figure, subject_us, floor_us, load(), library.get(figure)))
                print(rows[-1].line(), flush=True)
        finally:
            writer.close()
    return rows


@contextmanager
def chosen_targets(args: argparse.Namespace) -> Iterator[list[Callable[[], AbstractContextManager[Target]]]]:
    """The stores asked for, each as a context manager that creates and removes its database."""
    stores = set(args.stores.split(","))
    targets: list[Callable[[], AbstractContextManager[Target]]] = []
    # On the working disk beside the project, as a user's journal would be (not in /tmp, which
    # may be memory-backed on other machines and makes every fsync free).
    with tempfile.TemporaryDirectory(prefix="sagacity-overhead-", dir=Path(__file__).parent) as tmp:
        workdir = Path(tmp)
        if "sqlite" in stores:
            print(f"sqlite: {sqlite_version()} (WAL, synchronous=FULL) in {workdir}")
            targets.append(lambda: sqlite_target(workdir))
        if "postgres" in stores:
            if args.pg:
                print(f"postgres: {postgres_version(args.pg)}, fresh schemas dropped afterwards")
                targets.append(lambda: postgres_target(args.pg))
            else:
                print("postgres: skipped (set SAGACITY_TEST_POSTGRES_URL or pass --pg URL)")
        if "mysql" in stores:
            if args.mysql:
                print(f"mysql: {mysql_version(args.mysql)}, fresh databases dropped afterwards")
                targets.append(lambda: mysql_target(args.mysql))
            else:
                print("mysql: skipped (set SAGACITY_TEST_MYSQL_URL or pass --mysql URL)")
        yield targets


def telemetry_modes() -> dict[str, Callable[[], None]]:
    """Each mode, as the function that switches Sagacity's telemetry to it."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    import sagacity.otel

    class DiscardSpans(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class DiscardMetrics(MetricExporter):
        def export(
            self, metrics_data: object, timeout_millis: float = 10_000, **kwargs: object
        ) -> MetricExportResult:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
            pass

    bare = (TracerProvider(), MeterProvider())
    batched_tracer = TracerProvider()
    batched_tracer.add_span_processor(BatchSpanProcessor(DiscardSpans()))
    # The SDK's default interval (60 s): a reader collecting every second would mostly measure
    # the gauges' reads of the store, which no pipeline does that often.
    batched_meter = MeterProvider(metric_readers=[PeriodicExportingMetricReader(DiscardMetrics())])
    return {
        "off": sagacity.otel.reset,
        "sdk": lambda: sagacity.otel.enable(*bare),
        "sdk+batch": lambda: sagacity.otel.enable(batched_tracer, batched_meter),
    }


def bench_telemetry(url: str, name: str, rounds: int, calls: int, saga_calls: int) -> list[str]:
    """µs per call in each telemetry mode, modes alternating round by round; the median extra
    over ``off`` both as medians' difference and as the median of each round's paired difference."""
    modes = telemetry_modes()
    values: dict[str, list[float]] = {mode: [] for mode in modes}
    with Sagacity(url) as sg:
        round_of = subject_round(sg, 1, calls, saga_calls)
        names = list(modes)
        for r in range(-1, rounds):
            order = names[r % len(names) :] + names[: r % len(names)] if r >= 0 else names
            for mode in order:
                modes[mode]()
                value = round_of(r)
                if r >= 0:  # the first round of each mode is a warm-up
                    values[mode].append(value)
        modes["off"]()
    off = values["off"]
    lines = []
    for mode in names:
        median = statistics.median(values[mode])
        paired = statistics.median(v - o for v, o in zip(values[mode], off, strict=True))
        lines.append(
            f"| {name:8} | {mode:9} | {median:9.1f} | {median - statistics.median(off):+8.1f} "
            f"| {paired:+8.1f} | {median / statistics.median(off):5.2f}x |"
        )
        print(lines[-1], flush=True)
    return lines


#: ``--policy``'s policy: argument rules only; both apply to ``noop`` and neither decides.
POLICY = """\
[[rules]]
id = "no-interns"
when = 'principal.startsWith("intern")'
action = "deny"
reason = "interns may not act"

[[rules]]
id = "noop-held-for-large"
tool = "noop"
when = 'has(args.size) && args.size > 100'
action = "hold"
"""
POLICY_TARGET = 1.05

#: The default run's policies (issue #35): five CEL rules that apply to ``noop`` and none of which
#: matches, then the same with a budget on ``noop`` that is never spent.
FIVE_RULES = "\n".join(
    f"""[[rules]]
id = "rule-{n}"
tool = "noop"
when = '{when}'
action = "deny"
"""
    for n, when in enumerate(
        (
            'principal.startsWith("intern")',
            "has(args.size) && args.size > 100",
            'agent == "untrusted"',
            'saga.startsWith("forbidden-")',
            'tool == "noop" && has(args.to) && args.to.endsWith(".ru")',
        )
    )
)
WITH_BUDGET = (
    FIVE_RULES
    + """
[[rules]]
id = "noop-budget"
tool = "noop"
action = "deny"
[rules.budget]
limit = "1000000000"
window = "24h"
"""
)
#: Targets of the policies' figures: their call against the same call without a policy.
POLICY_TARGETS = {"5 CEL rules": 1.05, "rules+budget": 1.10}


def bench_policies(url: str, name: str, rounds: int, sagas: int) -> list[str]:
    """µs per call without a policy, with ``FIVE_RULES`` and with ``WITH_BUDGET``, the three
    taking turns saga by saga (sagas of ``SHORT_CALLS`` calls, the order rotating); each
    policy's median paired ratio to no policy over the rounds, with the load at its end."""
    with tempfile.TemporaryDirectory() as folder:
        paths = {}
        for side, text in (("5 CEL rules", FIVE_RULES), ("rules+budget", WITH_BUDGET)):
            paths[side] = Path(folder) / f"{side.replace(' ', '-')}.toml"
            paths[side].write_text(text, encoding="utf-8")
        with (
            Sagacity(url) as plain,
            Sagacity(url, policy=paths["5 CEL rules"]) as rules,
            Sagacity(url, policy=paths["rules+budget"]) as budget,
        ):
            sides = {"none": plain, "5 CEL rules": rules, "rules+budget": budget}
            names = list(sides)
            spent: dict[str, list[float]] = {side: [] for side in names}
            for r in range(-1, rounds):
                tag = f"pol-{r}-{time.monotonic_ns()}"
                took = dict.fromkeys(names, 0.0)
                for n in range(sagas):
                    for side in names[n % 3 :] + names[: n % 3]:
                        started = time.perf_counter()
                        with sides[side].saga(f"{tag}-{side[:4]}-{n}") as scope:
                            for _ in range(SHORT_CALLS):
                                noop()
                        took[side] += time.perf_counter() - started
                        assert scope.result is not None
                        assert scope.result.status.value == "COMPLETED", scope.result
                if r >= 0:  # the first round warms up
                    for side in names:
                        spent[side].append(took[side] / (sagas * SHORT_CALLS) * 1e6)
    lines = []
    for side in names[1:]:
        paired = statistics.median(p / o for p, o in zip(spent[side], spent["none"], strict=True))
        target = POLICY_TARGETS[side]
        lines.append(
            f"| {name:8} | {side:12} | {statistics.median(spent['none']):9.1f} "
            f"| {statistics.median(spent[side]):9.1f} | {paired:5.3f}x | ≤ {target:.2f}x "
            f"| {'PASS' if paired <= target else 'MISS'} | {load():5.2f} |"
        )
        print(lines[-1], flush=True)
    return lines


POLICIES_HEADER = (
    "| store    | policy       | none µs   | policy µs | paired | target  | verdict | load  |\n"
    "|----------|--------------|----------:|----------:|-------:|---------|---------|------:|"
)


def evaluation_micros(calls: int = 20_000) -> tuple[float, float]:
    """µs of one evaluation of ``FIVE_RULES`` on a call, no store involved: with arguments new
    every call (CEL runs), and the same arguments again (the value remembered)."""
    from sagacity.guardrails import parse_policy
    from sagacity.guardrails._evaluate import CallFacts, judge_arguments

    policy = parse_policy(FIVE_RULES)
    facts = [CallFacts("noop", f'{{"to":"acct-{n}","size":{n % 50}}}', "s") for n in range(calls)]
    started = time.perf_counter()
    for call in facts:
        judge_arguments(policy, call)
    fresh = (time.perf_counter() - started) / calls * 1e6
    same = CallFacts("noop", '{"to":"acct-1","size":1}', "s")
    started = time.perf_counter()
    for _ in range(calls):
        judge_arguments(policy, same)
    return fresh, (time.perf_counter() - started) / calls * 1e6


def _alternating_sagas(
    sides: tuple[Sagacity, Sagacity], sagas: int, saga_calls: int, tag: str
) -> tuple[list[float], list[float]]:
    """One round: ``sagas`` sagas on each side, taking turns saga by saga (who goes first flips
    every pair), so a load spike lasting more than a few milliseconds hits both alike; µs per
    call of each side, in wall time and in this thread's CPU time (which a loaded machine's run
    queue does not stretch)."""
    spent, cpu = [0.0, 0.0], [0.0, 0.0]
    for n in range(sagas):
        for side in (0, 1) if n % 2 == 0 else (1, 0):
            started, started_cpu = time.perf_counter(), time.thread_time()
            with sides[side].saga(f"{tag}-{side}-{n}") as scope:
                for _ in range(saga_calls):
                    noop()
            spent[side] += time.perf_counter() - started
            cpu[side] += time.thread_time() - started_cpu
            assert scope.result is not None
            assert scope.result.status.value == "COMPLETED", scope.result
    calls = sagas * saga_calls
    return [s / calls * 1e6 for s in spent], [c / calls * 1e6 for c in cpu]


def bench_policy(url: str, name: str, rounds: int, calls: int, saga_calls: int) -> str:
    """µs per call without and with the policy, saga by saga in turn within each round (see
    :func:`_alternating_sagas`); the ratio of medians and the median of each round's paired ratio."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "policy.toml"
        path.write_text(POLICY, encoding="utf-8")
        with Sagacity(url) as plain, Sagacity(url, policy=path) as guarded:
            values: dict[str, list[float]] = {"off": [], "on": [], "cpu off": [], "cpu on": []}
            sagas = max(1, calls // saga_calls)
            for r in range(-1, rounds):
                (off_us, on_us), (off_cpu, on_cpu) = _alternating_sagas(
                    (plain, guarded), sagas, saga_calls, f"pol-{r}-{time.monotonic_ns()}"
                )
                if r >= 0:
                    values["off"].append(off_us)
                    values["on"].append(on_us)
                    values["cpu off"].append(off_cpu)
                    values["cpu on"].append(on_cpu)
    off, on = statistics.median(values["off"]), statistics.median(values["on"])
    cpu = statistics.median(b - a for a, b in zip(values["cpu off"], values["cpu on"], strict=True))
    cpu_off = statistics.median(values["cpu off"])
    paired = statistics.median(b / a for a, b in zip(values["off"], values["on"], strict=True))
    verdict = "PASS" if paired <= POLICY_TARGET else "MISS"
    line = (
        f"| {name:8} | {off:9.1f} | {on:9.1f} | {on - off:+8.1f} | {on / off:5.3f}x | {paired:5.3f}x "
        f"| {cpu_off:7.1f} | {cpu:+7.1f} | ≤ {POLICY_TARGET:.2f}x | {verdict} |"
    )
    print(line, flush=True)
    return line


POLICY_HEADER = (
    "| store    | no policy | policy    | Δ µs     | ratio  | paired | cpu µs  | Δ cpu   | target  "
    "| verdict |\n"
    "|----------|----------:|----------:|---------:|-------:|-------:|--------:|--------:|---------"
    "|---------|"
)


def main_policy(args: argparse.Namespace) -> int:
    print(f"machine: {machine()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"method: one saga at a time, {args.saga_calls} calls a saga, {args.calls} calls a side per round, "
        f"with and without the policy taking turns saga by saga; medians of {args.rounds} rounds\n"
    )
    print(POLICY_HEADER)
    lines: list[str] = []
    if "memory" in args.stores.split(","):  # all CPU: the policy's own cost, with no disk to hide it
        lines.append(bench_policy("memory://", "memory", args.rounds, args.calls, args.saga_calls))
    with chosen_targets(args) as targets:
        for make in targets:
            with make() as target:
                lines.append(
                    bench_policy(target.subject_url, target.name, args.rounds, args.calls, args.saga_calls)
                )
    print("\nWhat a guardrails policy without history rules adds to a wrapped no-op call (µs per call)")
    print(POLICY_HEADER)
    print("\n".join(lines))
    return 0


TELEMETRY_HEADER = (
    "| store    | telemetry | µs/call   | Δ median | Δ paired | ratio  |\n"
    "|----------|-----------|----------:|---------:|---------:|-------:|"
)


def main_telemetry(args: argparse.Namespace) -> int:
    print(f"machine: {machine()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"method: one saga at a time, {args.saga_calls} calls a saga, {args.calls} calls a round, "
        f"medians of {args.rounds} rounds per mode, modes alternating (order rotating)\n"
    )
    print(TELEMETRY_HEADER)
    lines: list[str] = []
    stores = args.stores.split(",")
    if "memory" in stores:
        lines += bench_telemetry("memory://", "memory", args.rounds, args.calls, args.saga_calls)
    with chosen_targets(args) as targets:
        for make in targets:
            with make() as target:
                url, name = target.subject_url, target.name
                lines += bench_telemetry(url, name, args.rounds, args.calls, args.saga_calls)
    print("\nWhat telemetry adds to a wrapped no-op tool call in a saga (µs of wall time per call)")
    print(TELEMETRY_HEADER)
    print("\n".join(lines))
    return 0


#: ``--durability`` targets for the deferred mode: (short saga / 4 floors, long saga / 2 floors).
DURABILITY_TARGETS = {"short": 0.80, "long": 0.60}


DURABILITY_HEADER = (
    "| store    | mode      | saga  | µs/unit   | floor µs | ratio  | least  | target | load (1 min) |\n"
    "|----------|-----------|-------|----------:|---------:|-------:|-------:|--------|-------------:|"
)


def durability_round(
    sg: Sagacity, mode: str, shape: str, calls: int, short_calls: int
) -> Callable[[int], float]:
    """One round in ``mode``: µs per short saga, or per call of one long saga."""

    def run(r: int) -> float:
        tag = f"dur-{mode}-{shape}-{r}-{time.monotonic_ns()}"
        sizes = [short_calls] * max(1, calls // short_calls) if shape == "short" else [calls]
        started = time.perf_counter()
        for n, size in enumerate(sizes):
            with sg.saga(f"{tag}-{n}", durability=mode) as scope:
                for _ in range(size):
                    noop()
            assert scope.result is not None
            assert scope.result.status.value == "COMPLETED", scope.result
        elapsed = (time.perf_counter() - started) * 1e6
        return elapsed / len(sizes) if shape == "short" else elapsed / calls

    return run


def main_durability(args: argparse.Namespace) -> int:
    print(f"machine: {machine()} (shared with other work: the load beside each figure)")
    library = {
        mode: library_micros(
            args.rounds, args.calls, max(1, args.calls // args.short_calls), mode, args.short_calls
        )
        for mode in ("immediate", "deferred")
    }
    for mode, costs in library.items():
        print(
            f"the library's own cost on memory://, {mode}: {costs['short saga']:.1f} µs a short saga, "
            f"{costs['long saga']:.1f} µs a call of a long saga"
        )
    lines = []
    with chosen_targets(args) as targets:
        print(DURABILITY_HEADER)
        for make in targets:
            with make() as target, Sagacity(target.subject_url) as sg:
                writer = target.floor.writer()
                try:
                    for shape, floors in (("short", 4), ("long", 2)):
                        for mode in ("immediate", "deferred"):
                            subject_us, floor_us = interleaved(
                                args.rounds,
                                durability_round(sg, mode, shape, args.calls, args.short_calls),
                                floor_round(writer, args.floor_ops),
                            )
                            ratio = subject_us / (floors * floor_us)
                            least = least_ratio(
                                durability_commits(mode, shape, args.short_calls),
                                library[mode][f"{shape} saga"],
                                floor_us,
                                floors,
                            )
                            aim = DURABILITY_TARGETS[shape] if mode == "deferred" else None
                            verdict = (
                                "—" if aim is None else f"≤ {aim:.2f}x {'PASS' if ratio <= aim else 'MISS'}"
                            )
                            figures = f"{subject_us:9.1f} | {floor_us:8.1f} | {ratio:5.2f}x | {least:5.2f}x"
                            lines.append(
                                f"| {target.name:8} | {mode:9} | {shape:5} | {figures} | {verdict} "
                                f"| {os.getloadavg()[0]:12.2f} |"
                            )
                            print(lines[-1], flush=True)
                finally:
                    writer.close()
    print("\nDeferred durability: per short saga / 4 floor commits, per long-saga call / 2 floor commits")
    print(DURABILITY_HEADER)
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg", default=os.environ.get("SAGACITY_TEST_POSTGRES_URL"), help="PostgreSQL URL")
    parser.add_argument(
        "--mysql", default=os.environ.get("SAGACITY_TEST_MYSQL_URL"), help="MariaDB/MySQL URL"
    )
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds per figure (median)")
    parser.add_argument("--calls", type=int, default=200, help="calls in the one-saga round")
    parser.add_argument(
        "--calls-concurrent", type=int, default=25, help="calls per thread with 8 and 64 sagas at once"
    )
    parser.add_argument("--saga-calls", type=int, default=5, help="calls per saga with 8 and 64 at once")
    parser.add_argument("--short-sagas", type=int, default=40, help="short sagas a round (and a side)")
    parser.add_argument("--floor-ops", type=int, default=400, help="commits per floor round")
    parser.add_argument("--quick", action="store_true", help="few rounds and small sizes: a smoke run")
    parser.add_argument("--stores", default="sqlite,postgres,mysql", help="comma-separated subset to run")
    parser.add_argument(
        "--telemetry",
        action="store_true",
        help="measure what OpenTelemetry adds per call (off / sdk / sdk+batch; --stores may add memory)",
    )
    parser.add_argument(
        "--policy",
        action="store_true",
        help="measure what a guardrails policy without history rules adds per call (paired with none)",
    )
    parser.add_argument(
        "--durability",
        action="store_true",
        help="measure the deferred durability mode: short and long sagas, paired with the immediate mode",
    )
    parser.add_argument("--short-calls", type=int, default=2, help="calls per short saga (--durability)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.calls, args.calls_concurrent, args.floor_ops, args.short_sagas = 3, 40, 5, 80, 10
    if args.telemetry:
        return main_telemetry(args)
    if args.policy:
        return main_policy(args)
    if args.durability:
        return main_durability(args)
    print(f"machine: {machine()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows: list[Row] = []
    policies: list[str] = []
    with chosen_targets(args) as targets:
        print(
            f"method: medians of {args.rounds} rounds, subject and floor interleaved, warm-up discarded; "
            f"floor = {args.floor_ops} durable single-row commits by one writer; long saga: "
            f"{args.calls} calls; short saga: START, {SHORT_CALLS} calls, END; 8 and 64 at once: "
            f"{args.calls_concurrent} calls per thread in sagas of {args.saga_calls}\n"
        )
        library = library_micros(args.rounds, args.calls, args.short_sagas)
        print(
            f"the library's own cost on memory://: {library['short saga']:.1f} µs a short saga, "
            f"{library['long saga']:.1f} µs a call of a long saga (load {load():.2f})\n"
        )
        print(HEADER)
        for make in targets:
            with make() as target:
                rows.extend(bench_store(target, args, library))
                policies.extend(
                    bench_policies(target.subject_url, target.name, args.rounds, args.short_sagas)
                )
    fresh, same = evaluation_micros()

    print("\nA wrapped no-op tool call in a saga against the floor: one durable commit of a journal row")
    print(HEADER)
    print("\n".join(row.line() for row in rows))
    print("\nThe same call under a policy, against it without one (sagas taking turns, paired by round)")
    print(POLICIES_HEADER)
    print("\n".join(policies))
    print(
        f"\nOne evaluation of the 5 CEL rules, no store: {fresh:.1f} µs with new arguments, "
        f"{same:.1f} µs with the same arguments again (load {load():.2f})"
    )
    met = sum(row.verdict == "PASS" for row in rows) + sum("PASS" in line for line in policies)
    targets_count = sum(row.target is not None for row in rows) + len(policies)
    print(f"\n{met} of {targets_count} targets met")
    beyond = [
        row for row in rows if row.target is not None and row.least is not None and row.least > row.target
    ]
    if beyond:
        print(
            "targets below their least (commits at the floor plus the library's CPU on memory://): "
            + ", ".join(
                f"{row.store} {row.figure} (least {row.least:.2f}x, target {row.target:.2f}x)"
                for row in beyond
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
