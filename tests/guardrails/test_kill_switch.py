"""The kill switch: halt, drain, lift — global, per agent, per tool, with a time-to-live."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import CliRunner

from sagacity import Sagacity, SagaStatus, tool
from sagacity.cli import main
from sagacity.errors import HaltedError
from sagacity.guardrails import SWITCH_SAGA, as_agent

Guarded = Callable[[str], Sagacity]
EMPTY = "# no rules: the kill switch alone\n"


def test_halt_refuses_new_sagas_and_the_next_call_of_running_ones_which_compensate(guarded: Guarded) -> None:
    sg = guarded(EMPTY)
    undone: list[str] = []

    @tool
    def book(item: str) -> str:
        return f"booked {item}"

    @book.compensation
    def unbook(ctx: object) -> None:
        undone.append("unbooked")

    def work() -> None:
        book("a")
        sg.kill_switch.set("halt", by="ops@example.com", reason="incident 42")
        book("b")

    result = sg.run("k1", work)
    assert result.status is SagaStatus.COMPENSATED
    assert undone == ["unbooked"]
    assert isinstance(result.error, HaltedError)
    assert "incident 42" in str(result.error)
    with pytest.raises(
        HaltedError, match="not started: the kill switch is set to halt for every agent by ops@"
    ):
        sg.run("k2", lambda: book("c"))
    [change] = sg.entries(SWITCH_SAGA)
    assert '"state":"halt"' in change.input
    assert change.payload.startswith("approver=ops@example.com")
    sg.kill_switch.set("lift", by="ops@example.com")
    assert sg.run("k3", lambda: book("d")).status is SagaStatus.COMPLETED


def test_drain_lets_running_sagas_finish_but_starts_nothing(guarded: Guarded) -> None:
    sg = guarded(EMPTY)

    @tool
    def step(n: int) -> int:
        return n

    def work() -> int:
        step(1)
        sg.kill_switch.set("drain", by="ops@example.com")
        return int(step(2))

    assert sg.run("k4", work).value == 2
    with pytest.raises(HaltedError, match="drain"):
        sg.run("k5", lambda: step(3))


def test_per_agent_and_per_tool(guarded: Guarded) -> None:
    """An agent's halt stops only that agent; a tool's drain denies only that tool's calls."""
    sg = guarded(EMPTY)

    @tool
    def mail(to: str) -> str:
        return f"mailed {to}"

    @tool
    def read(doc: str) -> str:
        return doc

    sg.kill_switch.set("halt", by="ops@example.com", agent="spammer")
    sg.kill_switch.set("drain", by="ops@example.com", tool="mail")
    with as_agent("spammer"), pytest.raises(HaltedError):
        sg.run("k6", lambda: read("x"))
    out: list[str] = []
    with as_agent("helper"):
        result = sg.run("k7", lambda: (out.append(mail("a")), out.append(read("y"))))
    assert result.status is SagaStatus.COMPLETED
    assert out[0].startswith("[DENIED] mail did not run")
    assert "drain for tool mail" in out[0]
    assert out[1] == "y"


def test_a_setting_with_a_ttl_lifts_by_itself(guarded: Guarded) -> None:
    sg = guarded(EMPTY)
    setting = sg.kill_switch.set("halt", by="ops@example.com", ttl=3600)
    assert setting.until is not None
    assert sg.kill_switch.in_force()
    assert not sg.kill_switch.in_force(now=setting.until)


def test_the_switch_from_the_cli(sqlite_url: str) -> None:
    """`sagacity switch halt|status|lift` journals each change under the --as identity."""
    sg = Sagacity(sqlite_url)
    db = ["--db", sqlite_url]
    runner = CliRunner()
    result = runner.invoke(
        main, ["switch", "halt", "--tool", "mail", "--ttl", "30m", "--reason", "spam", "--as", "ops", *db]
    )
    assert result.exit_code == 0, result.output
    assert "halt for tool mail by ops" in result.output
    result = runner.invoke(main, ["switch", "status", "--json", *db])
    assert '"target": "mail"' in result.output
    assert '"by": "ops"' in result.output
    assert runner.invoke(main, ["switch", "lift", "--tool", "mail", "--as", "ops", *db]).exit_code == 0
    assert "is off" in runner.invoke(main, ["switch", "status", *db]).output
    assert len(sg.entries(SWITCH_SAGA)) == 2
    sg.close()


def test_a_halt_refuses_resumes_and_keeps_the_request(guarded: Guarded) -> None:
    """An approved call is not run while everything is halted; lifted, it resumes."""
    sg = guarded(EMPTY)
    from sagacity import Reversibility

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str) -> str:
        return f"wired {amount}"

    sg.run("k8", lambda: wire("5.00"))
    [request] = sg.pending_approvals("k8")
    sg.approve("k8", request.journal_seq, "alice@example.com")
    sg.kill_switch.set("halt", by="ops@example.com", reason="incident")
    with pytest.raises(HaltedError, match="resume refused"):
        sg.resume("k8", request.journal_seq, request.input)
    assert sg.pending_approvals("k8") == [request]
    sg.kill_switch.set("lift", by="ops@example.com")
    assert sg.resume("k8", request.journal_seq, request.input).status is SagaStatus.COMPLETED
