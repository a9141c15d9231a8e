"""Paired before/after runs of ``bench/overhead.py``: whole runs of two source trees, alternating.

Usage: ``.venv/bin/python bench/paired.py --before ../before/src [--runs 10] [-- overhead args]``

``--before`` is the ``src`` directory of another checkout (``git worktree add ../before <rev>``);
the current tree's ``src`` is "after". Each run is a fresh process of this checkout's
``bench/overhead.py`` with ``PYTHONPATH`` pointing at one tree; the two sides take turns (the
order flips every pair), so a machine whose fsync latency drifts over minutes hits both alike.
Printed per figure: the median of each side's ratios and their range. Arguments after ``--`` go
to ``overhead.py`` (for example ``--stores sqlite``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROW = re.compile(r"^\| (\w+)\s+\| ([^|]+?)\s+\|[^|]+\|[^|]+\|[^|]+\|\s+([\d.]+)x", re.M)


def run_once(src: Path, extra: list[str]) -> dict[tuple[str, str], float]:
    """One whole ``overhead.py`` run against ``src``: its summary's ratio per (store, figure)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, str(HERE / "overhead.py"), *extra],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    summary = out.split("one durable commit of a journal row")[-1].split("under a policy")[0]
    return {(m.group(1), m.group(2)): float(m.group(3)) for m in ROW.finditer(summary)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True, help="the src directory of the other checkout")
    parser.add_argument("--runs", type=int, default=10, help="runs per side")
    parser.add_argument("extra", nargs="*", help="arguments for overhead.py (after --)")
    args = parser.parse_args(argv)
    sides = {"before": args.before.resolve(), "after": (HERE.parent / "src").resolve()}
    ratios: dict[tuple[str, str, str], list[float]] = {}
    for i in range(args.runs):
        for side in list(sides) if i % 2 == 0 else list(sides)[::-1]:
            for (store, sagas), ratio in run_once(sides[side], args.extra).items():
                ratios.setdefault((store, sagas, side), []).append(ratio)
            print(f"run {i + 1}/{args.runs} {side} done", file=sys.stderr, flush=True)
    print("| store | figure | before: median (range) | after: median (range) |")
    print("|---|---:|---:|---:|")
    for store, sagas in sorted({(k[0], k[1]) for k in ratios}):
        cells = []
        for side in sides:
            values = ratios.get((store, sagas, side), [])
            median = statistics.median(values) if values else float("nan")
            cells.append(f"{median:.2f}x ({min(values, default=0):.2f}-{max(values, default=0):.2f})")
        print(f"| {store} | {sagas} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
