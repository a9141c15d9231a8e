"""The public testing helpers behave as documented, failing when they should."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sagacity import Phase, Sagacity, tool
from sagacity.testing import assert_chain_valid, assert_phases, isolated_tools, memory_sagacity
from sagacity.tools import registry


def test_helpers_pass_on_a_good_saga_and_fail_on_a_wrong_expectation() -> None:
    """assert_phases and assert_chain_valid accept a real journal and reject a wrong one."""
    with isolated_tools():

        @tool
        def helper_probe() -> str:
            return "ok"

        with memory_sagacity() as sg:
            sg.run("t", helper_probe)
            assert_chain_valid(sg, "t")
            assert_phases(sg, "t", [("helper_probe", Phase.INTENT), ("helper_probe", "EXECUTED")])
            with pytest.raises(AssertionError, match="expected"):
                assert_phases(sg, "t", [("helper_probe", Phase.INTENT)])
    assert registry.find("helper_probe") is None


def test_assert_chain_valid_reports_a_broken_chain(tmp_path: Path) -> None:
    """A row edited behind the library's back makes assert_chain_valid fail with the verifier's message."""
    path = tmp_path / "j.db"
    with Sagacity(f"sqlite:///{path}") as sg:
        sg.journal.append("t", "x", Phase.INTENT, "{}")
        with sqlite3.connect(path) as raw:
            raw.execute("DROP TRIGGER side_effect_journal_no_update")  # the tamperer's first step
            raw.execute("UPDATE side_effect_journal SET input = '{\"forged\":1}'")
        with pytest.raises(AssertionError, match="hash mismatch"):
            assert_chain_valid(sg, "t")
