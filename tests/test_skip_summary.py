"""A run without PostgreSQL and MariaDB says why it skipped, once per reason (issue #33 item 26).

pytest's ``-ra`` printed one SKIPPED line per test location (~620 for the suite), burying the
failures; tests/conftest.py now sums skips up by reason. A real pytest run in its own process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVICES = (
    "SAGACITY_TEST_POSTGRES_URL",
    "SAGACITY_TEST_MYSQL_URL",
    "SAGACITY_REQUIRE_POSTGRES",
    "SAGACITY_REQUIRE_MYSQL",
)


def test_skips_without_services_are_one_line_per_reason() -> None:
    env = {k: v for k, v in os.environ.items() if k not in SERVICES}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/sagas/test_decision_text.py", "-q", "-p", "no:cacheprovider"],
        capture_output=True, text=True, timeout=280, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    # One line per reason, each saying how many and what to set; none per test location.
    assert sorted(re.sub(r"^SKIPPED \d+: ", "", line) for line in skipped) == [
        "set SAGACITY_TEST_MYSQL_URL (e.g. mysql://root@127.0.0.1:3306/test) to run MariaDB tests",
        "set SAGACITY_TEST_POSTGRES_URL to run PostgreSQL tests",
    ]
