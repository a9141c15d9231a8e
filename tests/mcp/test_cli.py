"""`sagacity mcp proxy` and `sagacity mcp check`: what is refused before serving, and the check's report."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from click.testing import CliRunner
from mcp_tools import PAYMENTS, POLICY, SAGACITY, agent, free_port, make_setup, wait_for_port

from mcp import StdioServerParameters
from sagacity.cli import main

pytestmark = pytest.mark.timeout(120)
UPSTREAM = ["--", sys.executable, str(PAYMENTS)]


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.output


def test_a_malformed_policy_is_refused_at_start_naming_the_line(tmp_path: Path) -> None:
    """The proxy does not start on a policy with a mistake; the message names file and line."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.charge]\nkind = "compensatable"\n\n[tools.refund]\nkind = "maybe"\n')
    code, output = invoke("mcp", "proxy", "--policy", str(policy), *UPSTREAM)
    assert code == 2
    assert f"{policy} line 2: 'charge' is compensatable but has no undo" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no upstream server"),
        (["--upstream-url", "http://127.0.0.1:1/mcp", *UPSTREAM], "not both"),
        (["--upstream-url", "file:///etc/passwd"], "http:// or https://"),
        (["--listen", "localhost:99999", *UPSTREAM], "is not [HOST:]PORT"),
        (["--listen", "8765", *UPSTREAM], "--listen needs agent authentication"),
        (["--listen", "8765", "--jwks-url", "https://a.example/jwks", *UPSTREAM], "need --issuer"),
        (
            ["--jwks-url", "https://a.example/jwks", "--issuer", "https://a.example", *UPSTREAM],
            "apply to --listen",
        ),
    ],
)
def test_bad_command_lines_are_refused(tmp_path: Path, args: list[str], message: str) -> None:
    """An upstream must be given exactly once, as a command or an http(s) URL; addresses are checked."""
    policy = tmp_path / "policy.toml"
    policy.write_text("")
    code, output = invoke("mcp", "proxy", "--policy", str(policy), *args)
    assert code == 2
    assert message in output


def test_api_needs_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--api serves approvals: like `sagacity serve` it refuses to start without credentials."""
    monkeypatch.delenv("SAGACITY_TOKENS", raising=False)
    monkeypatch.delenv("SAGACITY_TOKENS_FILE", raising=False)
    policy = tmp_path / "policy.toml"
    policy.write_text("")
    code, output = invoke("mcp", "proxy", "--policy", str(policy), "--api", *UPSTREAM)
    assert code == 2
    assert "refusing to serve without credentials" in output


def test_check_reports_what_the_proxy_does_with_each_tool(tmp_path: Path) -> None:
    """`sagacity mcp check` lists the upstream's tools with their kind, undo and why."""
    setup = make_setup(tmp_path)
    code, output = invoke("mcp", "check", "--policy", str(setup.policy), "--json", *UPSTREAM, env=setup.env)
    assert code == 0, output
    report = json.loads(output)
    kinds = {row["tool"]: row["kind"] for row in report["tools"]}
    assert kinds == {
        "get_balance": "read-only",
        "find_charge": "read-only",
        "charge": "compensatable",
        "refund": "hidden",
        "create_ticket": "compensatable",
        "close_ticket": "irreversible",
        "send_payout": "irreversible",
        "settle": "compensatable",
    }
    charge = next(row for row in report["tools"] if row["tool"] == "charge")
    assert charge["undo"] == 'refund ["result.structured.charge_id", "saga.id"]'
    assert charge["reconcile"] is None
    assert report["problems"] == []


def test_check_fails_on_a_typo_in_a_hidden_entry(tmp_path: Path) -> None:
    """`[tools.refnud] kind = "hidden"` hides nothing (the real refund stays listed): `mcp check`
    reports it with its line and exits 2, and the proxy refuses to start on it."""
    setup = make_setup(tmp_path, policy=POLICY.replace("[tools.refund]", "[tools.refnud]"))
    line = POLICY.splitlines().index("[tools.refund]") + 1
    expected = f"{setup.policy} line {line}: [tools.refnud] names a tool the upstream does not list"
    code, output = invoke("mcp", "check", "--policy", str(setup.policy), *UPSTREAM, env=setup.env)
    assert code == 2
    assert expected in " ".join(output.split())
    code, output = invoke("mcp", "proxy", "--policy", str(setup.policy), *UPSTREAM, env=setup.env)
    assert code == 2
    assert expected in " ".join(output.split())


def test_check_fails_on_an_undo_the_upstream_lacks(tmp_path: Path) -> None:
    """An undo tool the upstream does not list is a problem: exit status 2."""
    setup = make_setup(tmp_path, policy=POLICY + "\n[tools.send_payout]\nundo = { tool = 'claw_back' }\n")
    code, output = invoke("mcp", "check", "--policy", str(setup.policy), *UPSTREAM, env=setup.env)
    assert code == 2
    assert "'send_payout' is undone by 'claw_back', which the upstream does not list" in output


API_TOKENS_TOML = '[tokens."approver-token-0123456789"]\nname = "alice@example.com"\nroles = ["approver"]\n'


@pytest.mark.parametrize(
    ("args", "messages"),
    [
        (
            ["--listen", "8765", "--tokens-file", "tokens.toml"],
            ["--tokens-file is for --api", "--agent-tokens-file"],
        ),
        (
            ["--listen", "8765", "--api", "--tokens-file", "tokens.toml"],
            [
                "--listen needs agent authentication",
                "agents' bearer tokens (with scopes) go in --agent-tokens-file",
            ],
        ),
        (["--listen", "8765", "--agent-tokens-file", "tokens.toml"], ["go in --tokens-file, with --api"]),
        (["--tokens-file", "tokens.toml"], ["--tokens-file is for --api"]),
    ],
)
def test_the_two_tokens_files_are_not_mixed_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], messages: list[str]
) -> None:
    """The approval API's tokens file where the agents' is meant (or without --api, where it does
    nothing), or the other way round: exit 2 with a message that says which option takes which."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tokens.toml").write_text(API_TOKENS_TOML)
    policy = tmp_path / "policy.toml"
    policy.write_text("")
    code, output = invoke("mcp", "proxy", "--policy", str(policy), *args, *UPSTREAM)
    assert code == 2, output
    flat = " ".join(output.split())
    for message in messages:
        assert message in flat, flat


def _help_examples() -> list[str]:
    code, text = invoke("mcp", "proxy", "--help")
    assert code == 0
    return [line.strip() for line in text.split("\n  Examples:\n", 1)[1].splitlines() if line.strip()]


@pytest.mark.parametrize("example", _help_examples())
def test_every_proxy_example_in_the_help_starts(tmp_path: Path, example: str) -> None:
    """Each `mcp proxy --help` example (as docs/cli.md prints it) starts and serves, with the
    files it names made as the docs describe them, its upstream replaced by the tests' payments
    server (a command, or the same server over HTTP) and its ports by free ones."""
    setup = make_setup(tmp_path)
    (tmp_path / "payments.toml").write_text(POLICY)
    (tmp_path / "tokens.toml").write_text(API_TOKENS_TOML)
    (tmp_path / "agent-tokens.json").write_text(setup.agent_tokens.read_text())
    words = shlex.split(example)
    assert words[:3] == ["sagacity", "mcp", "proxy"]
    env = {**os.environ, **setup.env}
    env.pop("SAGACITY_TOKENS", None)
    env.pop("SAGACITY_TOKENS_FILE", None)
    args = words[3 : words.index("--")] if "--" in words else words[3:]
    args += ["--db", setup.db_url]
    upstream = None
    if "--upstream-url" in args:
        port = free_port()
        upstream = subprocess.Popen([sys.executable, str(PAYMENTS), "--http", str(port)], env=env)
        wait_for_port(port, upstream)
        args[args.index("--upstream-url") + 1] = f"http://127.0.0.1:{port}/mcp"
    ports = []
    if "--listen" in args:
        ports.append(free_port())
        args[args.index("--listen") + 1] = f"127.0.0.1:{ports[-1]}"
    elif "--api" in args:
        ports.append(free_port())
        args += ["--api-listen", f"127.0.0.1:{ports[-1]}"]
    command = [*args, *([] if upstream is not None else UPSTREAM)]
    try:
        if ports:
            proc = subprocess.Popen([SAGACITY, "mcp", "proxy", *command], env=env, cwd=tmp_path)
            try:
                wait_for_port(ports[0], proc)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
        else:
            proxy = ["mcp", "proxy", *command]
            params = StdioServerParameters(command=SAGACITY, args=proxy, env=setup.env, cwd=tmp_path)
            with agent(params, "auto") as a:
                assert "get_balance" in {t.name for t in a.list_tools()}
    finally:
        if upstream is not None:
            upstream.send_signal(signal.SIGTERM)
            upstream.wait(timeout=30)
