"""Start-up time of the ``sagacity`` command: ``--help`` screens, against a click program's floor.

Each measurement is one fresh process, as a person typing the command pays it. The floor is the
cheapest click program: the interpreter starting and ``import click``. With ``--before SRC``
(the ``src`` directory of another checkout, e.g. an exported older commit) the same commands
also run from that code, put first on ``PYTHONPATH``. Subjects, floor and before are run in
turn, round after round (the order rotated each round), so a busy minute of the machine falls
on all of them; each figure is the median over the rounds.

The code measured is byte-compiled first, as ``pip install`` compiles a wheel (the floor's click
already is): an environment with ``PYTHONDONTWRITEBYTECODE=1`` and an editable install would
otherwise compile every ``sagacity`` module from source in every run, which no installed copy
does. ``--source`` measures that case instead: each copy measured runs from a copy of its
package without ``__pycache__``, with ``PYTHONDONTWRITEBYTECODE=1``.

    python bench/startup.py --rounds 30 [--before /tmp/before/src] [--source]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = (
    ("--help",),
    ("approvals", "--help"),
    ("approvals", "list", "--help"),
    ("sagas", "--help"),
    ("sagas", "list", "--help"),
    ("doctor", "--help"),
    ("--version",),
)
_RUN = "import sys; from sagacity.cli import main; main(sys.argv[1:], prog_name='sagacity')"


def _package_dir(env: dict[str, str]) -> str:
    """The directory holding the ``sagacity`` package this interpreter imports (its ``src``)."""
    probe = "import os, sagacity; print(os.path.dirname(os.path.dirname(sagacity.__file__)))"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _uncompiled_copy(src: str, into: str) -> str:
    """``src``'s ``sagacity`` package copied under ``into`` without its byte-code; ``into``."""
    shutil.copytree(
        os.path.join(src, "sagacity"),
        os.path.join(into, "sagacity"),
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return into


def _seconds(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--before", metavar="SRC", help="src directory of the code to compare with")
    parser.add_argument("--source", action="store_true", help="measure without byte-compiling first")
    args = parser.parse_args()
    env = {**os.environ, "COLUMNS": "100"}
    env.pop("PYTHONPATH", None)
    after_src = _package_dir(env)
    if args.source:
        copies = tempfile.mkdtemp(prefix="startup-")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        after_src = _uncompiled_copy(after_src, os.path.join(copies, "after"))
        if args.before:
            args.before = _uncompiled_copy(args.before, os.path.join(copies, "before"))
    else:
        for src in [after_src] + ([args.before] if args.before else []):
            package = os.path.join(src, "sagacity")
            subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)
    after_env = {**env, "PYTHONPATH": after_src}
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    runs: dict[str, tuple[list[str], dict[str, str]]] = {
        "floor: python -c 'import click'": ([sys.executable, "-c", "import click"], env)
    }
    for command in COMMANDS:
        runs[f"after: sagacity {' '.join(command)}"] = ([sys.executable, "-c", _RUN, *command], after_env)
        if args.before:
            before = {**env, "PYTHONPATH": args.before}
            runs[f"before: sagacity {' '.join(command)}"] = ([sys.executable, "-c", _RUN, *command], before)
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for k in range(args.rounds + 1):
        order = names[k % len(names) :] + names[: k % len(names)]
        for name in order:
            seconds = _seconds(*runs[name])
            if k:  # the first round warms the file cache and is discarded
                times[name].append(seconds)
    floor = statistics.median(times[names[0]])
    print(f"{'run':<46} {'median s':>9} {'min s':>7} {'x floor':>8}")
    for name in names:
        median = statistics.median(times[name])
        print(f"{name:<46} {median:>9.3f} {min(times[name]):>7.3f} {median / floor:>7.2f}x")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
