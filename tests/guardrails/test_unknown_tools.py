"""A rule naming a tool that no known tool is called (a typo) would silently never apply: it is
warned of where the policy is loaded — a process opening it, ``sagacity policy check`` — with
the known names, and ``policy check --strict`` refuses it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TYPO = """\
[[rules]]
id = "refunds-held"
tool = "refnud"
action = "hold"

[[rules]]
id = "fraud-first"
tool = "refund"
[rules.requires]
tool = "check_fraud"
"""
TOOLS = """\
from sagacity import tool


@tool
def refund(order: str) -> str:
    return order


@tool
def check_fraud(order: str) -> bool:
    return True
"""


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_process_opening_the_policy_warns_of_a_tool_no_one_registers(
    durable_url: str, tmp_path: Path
) -> None:
    (tmp_path / "policy.toml").write_text(TYPO, encoding="utf-8")
    (tmp_path / "payments.py").write_text(TOOLS, encoding="utf-8")
    program = textwrap.dedent(
        f"""
        import payments
        from sagacity import Sagacity

        with Sagacity({durable_url!r}, policy="policy.toml") as sg:
            print(sg.run("r1", payments.refund, "o-1").status)
        """
    )
    ran = _run(tmp_path, "-c", program)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "COMPLETED"  # the policy is used all the same
    assert (
        "policy.toml line 1: rule 'refunds-held' names tool 'refnud', which no known tool is called, "
        "so the rule never applies to it; did you mean 'refund'? (known: check_fraud, refund)"
    ) in ran.stderr
    assert "fraud-first" not in ran.stderr  # both of its names are registered


def test_policy_check_warns_and_strict_refuses(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(TYPO, encoding="utf-8")
    (tmp_path / "payments.py").write_text(TOOLS, encoding="utf-8")
    check = ("-m", "sagacity.cli", "policy", "check", "policy.toml")

    warned = _run(tmp_path, *check, "--import", "payments")
    assert warned.returncode == 0, warned.stderr
    assert "policy.toml: ok, 2 rules" in warned.stdout
    assert "Warning: policy.toml line 1: rule 'refunds-held' names tool 'refnud'" in warned.stderr
    assert "(known: check_fraud, refund)" in warned.stderr

    refused = _run(tmp_path, *check, "--import", "payments", "--strict")
    assert refused.returncode == 2
    assert "Error: policy.toml line 1: rule 'refunds-held' names tool 'refnud'" in refused.stderr
    assert "ok," not in refused.stdout

    unchecked = _run(tmp_path, *check)  # nothing imported: nothing to check the names against
    assert unchecked.returncode == 0
    assert "the rules' tool names are not checked: no tool is known (--import MODULE)" in unchecked.stderr
    assert _run(tmp_path, *check, "--strict").returncode == 2

    (tmp_path / "fixed.toml").write_text(TYPO.replace("refnud", "refund"), encoding="utf-8")
    fixed = _run(
        tmp_path, "-m", "sagacity.cli", "policy", "check", "fixed.toml", "--import", "payments", "--strict"
    )
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stderr == ""
