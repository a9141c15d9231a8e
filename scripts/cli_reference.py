"""Regenerate the command reference in docs/cli.md from the live ``--help`` of every command.

python scripts/cli_reference.py          # rewrite docs/cli.md
python scripts/cli_reference.py --check  # exit 1 if docs/cli.md is stale (CI, tests)
"""

from __future__ import annotations

import sys
from pathlib import Path

from sagacity.cli import main
from sagacity.cli._reference import render, splice

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def run(argv: list[str]) -> int:
    current = DOC.read_text(encoding="utf-8")
    fresh = splice(current, render(main))
    if "--check" in argv:
        if fresh != current:
            print(f"{DOC} is stale: run `python scripts/cli_reference.py`", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        DOC.write_text(fresh, encoding="utf-8")
        print(f"rewrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
