"""``sagacity mcp proxy`` reloads its policy file's guardrails while it runs — on SIGHUP and when the
file changes — as a real process in front of the fake payments server, each version journaled on
the ``sagacity:policy`` chain; a text it cannot use is refused, journaled, and denies every call."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from mcp_tools import (
    POLICY,
    SAGACITY,
    Agent,
    Setup,
    agent,
    free_port,
    make_setup,
    proxy_args,
    text_of,
    wait_for_port,
    wait_until,
)

from sagacity import Sagacity
from sagacity.guardrails import POLICY_SAGA

pytestmark = pytest.mark.timeout(240)

DENY_BIG = (
    POLICY
    + """
[[rules]]
id = "big-charges"
tool = "charge"
amount = "amount"
over = 100
action = "deny"
reason = "charges above 100 need a person"
"""
)
BROKEN = POLICY + '\n[[rules]]\nid = "oops"\ntool = "charge"\nwhen = "args."\naction = "deny"\n'
#: Valid, but it changes how a tool is treated: that waits for a restart.
RETYPED = DENY_BIG.replace('[tools.refund]\nkind = "hidden"', '[tools.refund]\nkind = "irreversible"')


def _replace(path: Path, text: str) -> None:
    """Write the new text beside the file and rename it into place, as docs/mcp.md says."""
    temp = path.with_suffix(".new")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def _policy_chain(setup: Setup) -> list[str]:
    with Sagacity(setup.db_url) as sg:
        return [entry.payload for entry in sg.journal.store.read_entries(POLICY_SAGA)]


def _journaled(setup: Setup, line: str) -> None:
    wait_until(lambda: any(line in p for p in _policy_chain(setup)), what=f"{line!r} on the policy chain")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@contextmanager
def _proxy(setup: Setup, *extra: str) -> Iterator[tuple[subprocess.Popen[bytes], Agent]]:
    port = free_port()
    args = proxy_args(setup, "--listen", str(port), "--agent-tokens-file", str(setup.agent_tokens), *extra)
    with (setup.tmp / f"proxy-{port}.log").open("w") as log:
        proc = subprocess.Popen([SAGACITY, *args], env={**os.environ, **setup.env}, stdout=log, stderr=log)
        try:
            wait_for_port(port, proc)
            with agent(f"http://127.0.0.1:{port}/mcp", "auto") as a:
                yield proc, a
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _charge(a: Agent, amount: int, saga: str) -> str:
    return text_of(a.call("charge", {"customer": "c", "amount": amount}, saga=saga))


def test_sighup_reloads_the_guardrails_whole_or_refuses_the_file(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    with _proxy(setup, "--policy-poll", "0") as (proc, a):  # SIGHUP only
        _charge(a, 500, "r-1")
        assert [e["amount"] for e in setup.ledger.events("charge")] == [500]  # no rules yet

        _replace(setup.policy, DENY_BIG)
        proc.send_signal(signal.SIGHUP)
        _journaled(setup, f"policy={_sha(DENY_BIG)}")
        denied = _charge(a, 500, "r-2")
        assert "charges above 100 need a person" in denied
        _charge(a, 1, "r-2")
        assert [e["amount"] for e in setup.ledger.events("charge")] == [500, 1]  # the 500 never ran
        [entry] = [p for p in _policy_chain(setup) if _sha(DENY_BIG) in p]
        assert "loaded_by=" in entry
        assert f"source={setup.policy}" in entry

        _replace(setup.policy, BROKEN)
        proc.send_signal(signal.SIGHUP)
        _journaled(setup, f"refused={_sha(BROKEN)}")
        refused = _charge(a, 1, "r-3")
        assert "the policy cannot be used" in refused
        assert "when is not a valid CEL condition" in refused
        assert len(setup.ledger.events("charge")) == 2  # fail closed: nothing ran

        _replace(setup.policy, RETYPED)
        proc.send_signal(signal.SIGHUP)
        _journaled(setup, f"refused={_sha(RETYPED)}")
        assert "apply at the proxy's next start" in _charge(a, 1, "r-4")

        _replace(setup.policy, DENY_BIG)
        proc.send_signal(signal.SIGHUP)
        wait_until(
            lambda: "policy=" in _policy_chain(setup)[-1] and _sha(DENY_BIG) in _policy_chain(setup)[-1],
            what="the good text back in force",
        )
        assert "charges above 100" in _charge(a, 500, "r-5")
        _charge(a, 2, "r-5")
        assert [e["amount"] for e in setup.ledger.events("charge")] == [500, 1, 2]
    assert proc.returncode == 0


def test_a_changed_file_is_picked_up_without_a_signal(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    with _proxy(setup, "--policy-poll", "0.2") as (_, a):
        _charge(a, 500, "w-1")
        assert len(setup.ledger.events("charge")) == 1
        _replace(setup.policy, DENY_BIG)
        _journaled(setup, f"policy={_sha(DENY_BIG)}")
        assert "charges above 100 need a person" in _charge(a, 500, "w-2")
