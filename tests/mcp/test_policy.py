"""The policy file and the undo template: strict parsing that names the line, fail-closed defaults,
placeholders resolved by path lookup only, canonical arguments."""

from __future__ import annotations

from datetime import timedelta

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from sagacity.mcp import PolicyError, TemplateError, ToolKind, canonical_json, compile_template, parse_policy
from sagacity.mcp._template import result_scope

GOOD = """\
[upstream]
command = ["npx", "-y", "payments-mcp"]
env = { API_KEY = "${KEY}", MODE = "test", LITERAL = "$${NOT_EXPANDED}" }
inherit_env = ["HOME_DIR"]
timeout = 12

[sagas]
on_session_close = "compensate"
sessionless = "per-call"
id_prefix = "pay"

[defaults]
approval_ttl = "2h"
retry = { attempts = 2, on = ["unavailable"] }

[tools.charge]
undo = { tool = "refund", arguments = { charge_id = "{result.structured.charge_id}" } }
retry = { attempts = 4, backoff = 0.5, on = ["unavailable", "error"] }
timeout = 5

[tools.send_payout]
kind = "irreversible"
approvals = 2
approval_ttl = "30m"

[tools."ledger.read"]
kind = "read-only"

[tools.refund]
kind = "hidden"
"""
ENV = {"KEY": "sk_live_x", "HOME_DIR": "/home/a"}


def test_a_good_policy_and_what_it_decides() -> None:
    """Each tool's decision: the policy's kind, defaults applied, environment expanded."""
    policy = parse_policy(GOOD, source="p.toml", environ=ENV)
    assert policy.upstream.command == ("npx", "-y", "payments-mcp")
    assert dict(policy.upstream.env) == {
        "API_KEY": "sk_live_x",
        "MODE": "test",
        "LITERAL": "${NOT_EXPANDED}",
        "HOME_DIR": "/home/a",
    }
    assert (policy.sagas.on_session_close, policy.sagas.sessionless, policy.sagas.id_prefix) == (
        "compensate",
        "per-call",
        "pay",
    )
    charge = policy.decide("charge")
    assert charge.kind is ToolKind.COMPENSATABLE
    assert charge.undo is not None
    assert charge.undo.tool == "refund"
    assert (charge.retry.attempts, charge.retry.on, charge.timeout) == (4, {"unavailable", "error"}, 5)
    assert charge.why == "p.toml line 16"
    payout = policy.decide("send_payout")
    assert (payout.kind, payout.approvals, payout.approval_ttl) == (
        ToolKind.IRREVERSIBLE,
        2,
        timedelta(minutes=30),
    )
    assert payout.retry.attempts == 2  # from [defaults]
    assert policy.decide("ledger.read").kind is ToolKind.READ_ONLY
    assert policy.decide("refund").kind is ToolKind.HIDDEN


def test_annotations_are_defaults_that_fail_closed() -> None:
    """A tool the policy does not name passes through only if the upstream says readOnlyHint; any other
    (no hint, or a hint that it writes) is held for approval."""
    policy = parse_policy("", environ={})
    assert policy.decide("lookup", read_only_hint=True).kind is ToolKind.READ_ONLY
    assert policy.decide("lookup", read_only_hint=True).errors == "result"
    for hint in (None, False):
        held = policy.decide("delete_everything", read_only_hint=hint)
        assert held.kind is ToolKind.IRREVERSIBLE
        assert "fail closed" in held.why
        assert held.errors == "fail"
    explicit = parse_policy('[tools.lookup]\nkind = "irreversible"\n', environ={})
    assert explicit.decide("lookup", read_only_hint=True).kind is ToolKind.IRREVERSIBLE


def test_undo_tools_the_upstream_lacks_are_problems() -> None:
    """An undo naming a tool the upstream does not list is reported with its line (refused at start)."""
    policy = parse_policy(GOOD, source="p.toml", environ=ENV)
    assert policy.problems_with(["charge", "refund", "send_payout", "ledger.read"]) == []
    undo, table = policy.problems_with(["charge", "send_payout", "ledger.read"])
    assert undo.startswith("p.toml line 17: 'charge' is undone by 'refund'")
    assert table.startswith("p.toml line 29: [tools.refund] names a tool the upstream does not list")


def test_a_reconcile_tool_the_upstream_lacks_is_a_problem() -> None:
    """A look-up naming a read tool the upstream does not list is refused at start, with its line;
    one it lists is what the tool's decision carries."""
    text = (
        "[tools.charge]\n"
        'undo = { tool = "refund", reconcile = { tool = "get_refund", missing = "no refund" } }\n'
        'reconcile = { tool = "get_charge", missing = "none",'
        ' arguments = { key = "{call.idempotency_key}" } }\n'
    )
    policy = parse_policy(text, source="p.toml", environ={})
    assert policy.problems_with(["charge", "refund", "get_charge", "get_refund"]) == []
    assert policy.problems_with(["charge", "refund"]) == [
        "p.toml line 3: 'charge' is looked up by 'get_charge', which the upstream does not list",
        "p.toml line 2: 'charge' is looked up by 'get_refund', which the upstream does not list",
    ]
    decision = policy.decide("charge")
    assert decision.reconcile is not None
    assert (decision.reconcile.tool, decision.reconcile.missing) == ("get_charge", "none")
    assert decision.reconcile.arguments.render({"call": {"idempotency_key": "sgc_1"}}) == {"key": "sgc_1"}
    assert decision.undo is not None
    assert decision.undo.reconcile is not None
    assert decision.undo.reconcile.tool == "get_refund"


def test_a_table_for_a_tool_the_upstream_lacks_is_a_problem_with_its_line() -> None:
    """`[tools.X]` for a tool the upstream does not list is a mistake (a typo in a hidden entry
    would leave the real tool exposed): a problem naming its line and the likely tool."""
    text = '[tools.charge]\nundo = { tool = "refund" }\n\n[tools.refnud]\nkind = "hidden"\n'
    policy = parse_policy(text, source="p.toml", environ={})
    assert policy.problems_with(["charge", "refund"]) == [
        "p.toml line 4: [tools.refnud] names a tool the upstream does not list (did you mean 'refund'?)"
    ]


@pytest.mark.parametrize(
    ("text", "line"),
    [("timeout = 3\n", 1), ('[upstream]\ntimeout = 3\n\n[toolz.charge]\nkind = "hidden"\n', 4)],
)
def test_an_unknown_top_level_key_names_its_line(text: str, line: int) -> None:
    """A misspelt table (`[toolz.charge]`, where no line says `[toolz]`) or key at the top names
    the line where it first appears."""
    with pytest.raises(PolicyError, match=rf"^p.toml line {line}: unknown key"):
        parse_policy(text, source="p.toml", environ={})


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("[tools.a]\nkind = \n", 2, "Invalid value"),
        (
            "[upstream]\ncommand = ['x']\n\n[tools.a]\nkind = 'read-only'\ntimout = 3\n",
            6,
            "unknown key 'tools.a.timout'",
        ),
        ("[tools.a]\nkind = 'sometimes'\n", 2, "must be one of"),
        ("\n[tools.charge]\nkind = 'compensatable'\n", 3, "has no undo"),
        ("[tools.c]\nundo = { tool = 'r', arguments = { id = '{argz.id}' } }\n", 2, "starts with 'argz'"),
        ("[tools.c]\nundo = { tool = 'r', arguments = { id = '{args.id' } }\n", 2, "never closed"),
        ("[tools.c]\nundo = { arguments = {} }\n", 2, "needs tool ="),
        (
            "[tools.c]\nkind = 'read-only'\nundo = { tool = 'r' }\n",
            3,
            "only a compensatable tool has an undo",
        ),
        ("[tools.c]\nkind = 'read-only'\napprovals = 2\n", 3, "approvals apply to irreversible tools"),
        ("[tools.c]\nretry = { on = ['timeout'] }\n", 2, "never retried"),
        ("[tools.c]\nretry = { attempts = 0 }\n", 2, "at least 1"),
        ("[tools.c]\ntimeout = 'soon'\n", 2, "must be a number"),
        ("[tools.c]\napproval_ttl = 'never'\n", 2, "is for [defaults]"),
        ("[upstream]\nenv = { A = '${MISSING_VAR}' }\n", 2, "${MISSING_VAR}, which is not set"),
        ("[upstream]\ncommand = ['x']\nurl = 'http://h/mcp'\n", 3, "both command and url"),
        ("[upstream]\nurl = 'ftp://h'\n", 2, "http:// or https://"),
        ("[sagas]\non_session_close = 'explode'\n", 2, "must be one of"),
        ("[surprise]\n", 1, "unknown key 'surprise'"),
        ("[tools.c]\nreconcile = { arguments = {} }\n", 2, "needs tool ="),
        (
            "[tools.c]\nreconcile = { tool = 'get', missng = 'no' }\n",
            2,
            "unknown key 'tools.c.reconcile.missng'",
        ),
        ("[tools.c]\nreconcile = { tool = 'get', missing = ' ' }\n", 2, "must not be blank"),
        (
            "[tools.c]\nreconcile = { tool = 'get', arguments = { k = '{kall.seq}' } }\n",
            2,
            "starts with 'kall'",
        ),
        ("[tools.c]\nundo = { tool = 'r', reconcile = { tool = 7 } }\n", 2, "must be a string"),
        ("[defaults]\nreconcile = { tool = 'get' }\n", 2, "unknown key 'defaults.reconcile'"),
    ],
)
def test_a_malformed_policy_is_refused_naming_the_line(text: str, line: int, message: str) -> None:
    """Every kind of mistake is refused with the file and the line it is on."""
    with pytest.raises(PolicyError) as raised:
        parse_policy(text, source="policy.toml", environ={})
    assert f"line {line}" in str(raised.value)
    assert str(raised.value).startswith("policy.toml")
    assert message in str(raised.value)


def test_template_keeps_types_and_writes_text() -> None:
    """A lone placeholder keeps the JSON type of what it names; placeholders in text are written in."""
    template = compile_template(
        {
            "id": "{result.structured.charge_id}",
            "amount": "{args.amount}",
            "items": ["{args.items.1}", 7, True],
            "note": "undo {args.amount} of {args.items} for {saga.id} {{literal}}",
            "nested": {"key": "{call.idempotency_key}"},
            "plain": "no placeholders",
        }
    )
    scope = {
        "args": {"amount": 12.5, "items": ["a", {"b": 1}]},
        "result": result_scope(
            {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"charge_id": "ch_1"}}
        ),
        "saga": {"id": "s-1"},
        "call": {"seq": 3, "idempotency_key": "sgc_x"},
    }
    assert template.render(scope) == {
        "id": "ch_1",
        "amount": 12.5,
        "items": [{"b": 1}, 7, True],
        "note": 'undo 12.5 of ["a",{"b":1}] for s-1 {literal}',
        "nested": {"key": "sgc_x"},
        "plain": "no placeholders",
    }
    assert template.placeholders() == [
        "result.structured.charge_id",
        "args.amount",
        "args.items.1",
        "args.amount",
        "args.items",
        "saga.id",
        "call.idempotency_key",
    ]


def test_template_reads_json_text_results() -> None:
    """{result.json.*} reads a result whose text is JSON (servers without structured content)."""
    template = compile_template({"ticket": "{result.json.ticket_id}", "text": "{result.text}"})
    scope = {
        "args": {},
        "result": result_scope({"content": [{"type": "text", "text": '{"ticket_id": "T-9"}'}]}),
    }
    assert template.render(scope) == {"ticket": "T-9", "text": '{"ticket_id": "T-9"}'}


@pytest.mark.parametrize(
    ("arguments", "result", "message"),
    [
        ({"id": "{args.missing}"}, {}, "has no key 'missing' (it has list, order)"),
        ({"id": "{args.order.x}"}, {}, "is a string, which has no key 'x'"),
        ({"id": "{result.structured.id}"}, {"content": []}, "no structured content"),
        ({"id": "{result.json.id}"}, {"content": [{"type": "text", "text": "not json"}]}, "not JSON"),
        ({"id": "{args.list.5}"}, {}, "has 1 items, no [5]"),
    ],
)
def test_template_names_what_is_missing(
    arguments: dict[str, str], result: dict[str, object], message: str
) -> None:
    """A placeholder that names nothing fails with a message saying what the call had instead."""
    scope = {"args": {"order": "o-1", "list": [1]}, "result": result_scope(result), "saga": {}, "call": {}}
    with pytest.raises(TemplateError) as raised:
        compile_template(arguments).render(scope)
    assert message in str(raised.value)


def test_template_never_evaluates() -> None:
    """Placeholder text is a path, never code: anything that is not a known root and plain keys is refused."""
    for bad in ("{__import__('os').system('x')}", "{args.a + 1}", "{ args.a }", "{args..a}", "{}"):
        with pytest.raises(TemplateError):
            compile_template({"x": bad})


def test_canonical_json_ignores_key_order_and_spacing() -> None:
    """The same arguments in any key order are the same text (and so the same hash)."""
    a = canonical_json({"to": "DE89", "amount": 5, "meta": {"z": 1, "a": [2, {"y": 0, "b": 1}]}, "név": "é"})
    b = canonical_json({"név": "é", "meta": {"a": [2, {"b": 1, "y": 0}], "z": 1}, "amount": 5, "to": "DE89"})
    assert a == b == '{"amount":5,"meta":{"a":[2,{"b":1,"y":0}],"z":1},"név":"é","to":"DE89"}'
    with pytest.raises(ValueError, match="not plain JSON"):
        canonical_json({"x": float("nan")})
