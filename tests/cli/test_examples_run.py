"""Every example of the generated reference (docs/cli.md: ``--help``'s examples) is executed as
written, in its own process, in a directory holding the files it names (#33 item 21).

``test_examples.py`` checks each example's words against the command's options; that cannot see a
value the option refuses (``--max-lag 1h`` for a count) or a path that makes no file
(``--out keys/``). Here each one runs through the shell, as a reader pastes it. None may be refused
at its command line or crash; those the directory has all they need for must succeed. The rest
need what no test directory has (a host such as db.internal, an approval at seq 5 of a saga made
by the reader's own tools, a server that runs until stopped) and must get past their arguments:
they fail, if at all, with the command's own error, and a server still running when stopped is fine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sagacity import Phase, Sagacity
from sagacity.checkpoints import write_key_pair
from sagacity.cli._examples import EXAMPLES, TOP

ALL = list(dict.fromkeys([*TOP, *(line for lines in EXAMPLES.values() for line in lines)]))

#: What the directory below has everything for: each of these must exit 0.
SUCCEED = {
    "sagacity demo",
    "sagacity demo --db sqlite:///demo.db",
    "sagacity approvals list",
    "sagacity approvals list --tool send_wire_transfer --since 2h",
    "sagacity approvals list --prefix order- -q",
    "sagacity approvals list --limit 20",
    "sagacity doctor --older-than 10m --json",
    "sagacity doctor --full --ignore expired_approval",
    "sagacity doctor --anchor anchor/ --key ops.pub --max-lag 1000",
    "sagacity db init",
    "sagacity db reindex",
    "sagacity checkpoint --key ops.key --origin acme.example/orders --out anchor/",
    "sagacity export order-123 > order-123.jsonl",
    "sagacity export order-123 --bundle evidence/ --checkpoint anchor/ --key ops.pub",
    "sagacity keys generate --out keys/ops",
    "sagacity keys generate --out keys/witness-1 --name witness.example/w1 --witness",
    "sagacity policy check payments.toml",
    "sagacity policy explain payments.toml --tool refund --args '{\"amount\": 900}'",
    "sagacity sagas show order-123",
    "sagacity sagas show order-123 -o wide",
    "sagacity sagas show order-123 --json",
    "sagacity sagas list --status IN_DOUBT",
    "sagacity sagas list --limit 100 -o csv > sagas.csv",
    "sagacity sagas in-doubt",
    "sagacity notify status",
    "sagacity notify status --json",
    "sagacity switch status",
    "sagacity switch status --json",
    "sagacity verify",
    "sagacity verify order-123 --json",
    "sagacity verify --export order-123.jsonl",
    "sagacity verify --checkpoint anchor/ --key ops.pub",
}

#: Servers and watch loops: they run until stopped.
RUNS_UNTIL_STOPPED = ("--watch", "--every", "sagacity serve", "sagacity witness", "sagacity mcp proxy")

POLICY = """\
[guardrails]
default = "allow"

[[rules]]
id = "refund-one-approver"
tool = "refund"
amount = "amount"
over = "100.00"
action = "hold"
reason = "a refund above 100.00 needs one approver"
"""

TOKENS = """\
[tokens."sha256:5d41402abc4b2a76b9719d911017c592ae8d4c6a1d8b39c2e6b5a5e1c0b8c0f1"]
name = "alice@example.com"
roles = ["approver"]
"""

#: The agents' static tokens (`--agent-tokens-file`, docs/mcp.md "Over HTTP").
AGENT_TOKENS = """\
{"tokens": {"sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae":
  {"name": "agent-a", "scopes": ["sagacity:call"]}}}
"""


def test_every_example_is_run_here() -> None:
    assert set(SUCCEED) <= set(ALL), set(SUCCEED) - set(ALL)
    assert len(ALL) > 60


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A reader's directory: a journal with saga order-123, the keys, files and modules the
    examples name, an anchor with a checkpoint, and an `npx` that fails (no registry is asked)."""
    box = tmp_path_factory.mktemp("examples")
    env = {
        **os.environ,
        "SAGACITY_URL": f"sqlite:///{box / 'journal.db'}",
        "PATH": os.pathsep.join([str(box / "bin"), str(Path(sys.executable).parent), os.environ["PATH"]]),
        "PYTHONPATH": str(box),
        "COLUMNS": "200",
    }
    with Sagacity(env["SAGACITY_URL"]) as sg:
        for i in range(4):
            sg.journal.append("order-123", "charge_card", Phase.EXECUTED, f'{{"i":{i}}}', f"ch_{i}")
    write_key_pair(box / "ops")
    write_key_pair(box / "witness-1", "witness.example/w1", witness=True)
    (box / "witness.pub").write_text((box / "witness-1.pub").read_text())
    (box / "payments.toml").write_text(POLICY)
    (box / "tokens.toml").write_text(TOKENS)
    (box / "agent-tokens.json").write_text(AGENT_TOKENS)
    (box / "approved.json").write_text("{}\n")
    (box / "myapp").mkdir()
    for module in ("__init__.py", "tools.py", "flows.py"):
        (box / "myapp" / module).write_text('"""The reader\'s own tools and workflows."""\n')
    (box / "bin").mkdir()
    (box / "bin" / "npx").write_text("#!/bin/sh\necho 'npx: not in this test' >&2\nexit 1\n")
    (box / "bin" / "npx").chmod(0o755)
    for setup in (
        "sagacity checkpoint --key ops.key --origin acme.example/orders --out anchor/",
        "sagacity export order-123 > order-123.jsonl",
    ):
        status, output = _run(setup, box, env)
        assert status == 0, output
    return box, env


def _run(example: str, box: Path, env: dict[str, str]) -> tuple[int | None, str]:
    """The example through the shell; (exit status, output), the status None for a server or
    watch loop that was still running when stopped (SIGINT, as a person stops it)."""
    child = subprocess.Popen(
        ["bash", "-c", f"exec {example}" if ">" not in example else example],
        cwd=box,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    if not any(marker in example for marker in RUNS_UNTIL_STOPPED):
        output, _ = child.communicate(timeout=120)
        return child.returncode, output
    try:
        output, _ = child.communicate(timeout=8)
        return child.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGINT)
        try:
            output, _ = child.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            output, _ = child.communicate()
        return None, output


@pytest.mark.parametrize("example", ALL, ids=ALL)
def test_example_runs_as_written(example: str, workdir: tuple[Path, dict[str, str]]) -> None:
    box, env = workdir
    status, output = _run(example, box, env)
    assert "Traceback" not in output, f"{example!r} crashed:\n{output}"
    refused = "Try 'sagacity" in output or "Usage: sagacity" in output
    assert not refused, f"{example!r} is refused at its command line:\n{output}"
    if example in SUCCEED:
        assert status == 0, f"{example!r} exited {status}:\n{output}"
