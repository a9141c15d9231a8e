"""Without the mcp extra: the core still imports, and `sagacity mcp` says what to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

# Python refuses to import a module whose sys.modules entry is None: as if the SDK were not installed.
WITHOUT_MCP = "import sys; sys.modules['mcp'] = None; sys.modules['mcp_types'] = None; "


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_MCP + code], capture_output=True, text=True, timeout=60, check=False
    )


def test_core_imports_without_the_extra() -> None:
    """`import sagacity` and the CLI never import the MCP SDK until an mcp command runs."""
    done = run(
        "import sagacity, sagacity.cli; "
        "assert 'mcp' not in [m.split('.')[0] for m in sys.modules if sys.modules[m]]; print('ok')"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("command", ["proxy", "check"])
def test_mcp_commands_name_the_extra(tmp_path: Path, command: str) -> None:
    """`sagacity mcp proxy|check` without the SDK exits 2 with the pip command that fixes it."""
    policy = tmp_path / "policy.toml"
    policy.write_text("")
    done = run(
        "from sagacity.cli import main; "
        f"main(['mcp', {command!r}, '--policy', {str(policy)!r}, '--', 'some-server'])"
    )
    assert done.returncode == 2
    assert "pip install 'sagacity[mcp]'" in done.stderr


def test_the_package_says_what_to_install() -> None:
    """Importing sagacity.mcp without the SDK raises ConfigurationError naming the extra."""
    done = run("import sagacity.mcp")
    assert "ConfigurationError" in done.stderr
    assert "pip install 'sagacity[mcp]'" in done.stderr
