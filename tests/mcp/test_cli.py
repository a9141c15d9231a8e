"""`sagacity mcp proxy` and `sagacity mcp check`: what is refused before serving, and the check's report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from click.testing import CliRunner
from mcp_tools import PAYMENTS, POLICY, make_setup

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
        "charge": "compensatable",
        "refund": "hidden",
        "create_ticket": "compensatable",
        "close_ticket": "irreversible",
        "send_payout": "irreversible",
        "settle": "compensatable",
    }
    charge = next(row for row in report["tools"] if row["tool"] == "charge")
    assert charge["undo"] == 'refund ["result.structured.charge_id", "saga.id"]'
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
