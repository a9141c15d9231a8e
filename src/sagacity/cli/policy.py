"""``sagacity policy``: check a guardrails policy file, and explain which rule would decide a call."""

from __future__ import annotations

import json
import tomllib
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sagacity.cli._common import CommandError, db_option, open_sagacity
from sagacity.cli._options import echo_json, import_option, json_option
from sagacity.errors import PolicyError, SagacityError

if TYPE_CHECKING:
    from sagacity.guardrails import Verdict


@click.group()
def policy() -> None:
    """Guardrails policies (docs/policies.md): check a file, explain a verdict."""


@policy.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse (exit 2) a rule naming a tool that no known tool is called, instead of warning.",
)
@import_option
def check(file: Path, strict: bool) -> None:
    """Validate FILE; a problem is reported as `FILE line N: ...` and exits 2.

    A file that also holds the MCP gateway's tables ([upstream], [tools.NAME], ...) is checked
    as the gateway would read it too. The tools its rules name are checked against the tools
    known here (those --import registers, and the file's [tools.NAME] tables): each one unknown
    is a warning, or with --strict an error.
    """
    from sagacity.guardrails import GATEWAY_TABLES, load_policy, unknown_tools
    from sagacity.tools import registry

    try:
        parsed = load_policy(file)
        tables = tomllib.loads(parsed.text)
        if GATEWAY_TABLES & set(tables):
            from sagacity.mcp import load_gateway_policy

            load_gateway_policy(file)
    except PolicyError as exc:
        raise CommandError(str(exc)) from exc
    known = {*registry.names(), *tables.get("tools", {})}
    named = any(r.tools is not None or r.requires is not None for r in parsed.rules)
    if named and not known:
        if strict:
            raise CommandError(
                f"{file}: no tool is known to check the rules' tool names against (--import MODULE)"
            )
        click.echo(
            f"{file}: the rules' tool names are not checked: no tool is known (--import MODULE)", err=True
        )
    unknown = unknown_tools(parsed, known) if known else []
    if unknown and strict:
        raise CommandError("\n".join(unknown))
    for message in unknown:
        click.echo(f"Warning: {message}", err=True)
    history = sum(1 for r in parsed.rules if r.history)
    shadow = sum(1 for r in parsed.rules if r.mode == "shadow")
    click.echo(
        f"{file}: ok, {len(parsed.rules)} rules ({history} on history, {shadow} in shadow mode), "
        f"default {parsed.default}; sha256 {parsed.sha256}"
    )


@policy.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--tool", "tool_name", required=True, help="The tool the call is to.")
@click.option("--args", "arguments", default="{}", show_default=True, help="The call's arguments as JSON.")
@click.option("--saga", "saga_id", default="explain", show_default=True, help="The saga it would be made in.")
@click.option("--principal", default=None, help="Who the call is made for.")
@click.option("--agent", default=None, help="Which agent makes it.")
@click.option(
    "--irreversible",
    is_flag=True,
    help="Treat the tool as IRREVERSIBLE (else as imported with --import, else compensatable).",
)
@import_option
@json_option
@db_option
def explain(
    file: Path,
    tool_name: str,
    arguments: str,
    saga_id: str,
    principal: str | None,
    agent: str | None,
    irreversible: bool,
    as_json: bool,
    db_url: str,
) -> None:
    """Which rule would decide a call of TOOL now, on the journal as it stands (meters, the saga's
    history, the kill switch). Read-only: nothing is debited or journaled."""
    from sagacity.guardrails import Guard, as_agent, load_policy

    try:
        json.loads(arguments)
    except ValueError as exc:
        raise CommandError(f"--args is not JSON: {exc}") from exc
    with open_sagacity(db_url) as sg:
        try:
            guard = Guard(sg.journal, load_policy(file), poll=0, record=False)
            spec = sg.registry.find(tool_name)
            gated = irreversible or (spec is not None and spec.irreversible)
            approvals = spec.approvals_required if spec is not None else 1
            with as_agent(agent) if agent else nullcontext():
                verdict = guard.judge(
                    saga_id,
                    tool_name,
                    arguments,
                    irreversible=gated,
                    approvals=approvals,
                    principal=principal,
                    dry=True,
                )
        except SagacityError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    if as_json:
        echo_json(_verdict_json(verdict))
        return
    click.echo(_sentence(tool_name, verdict))
    click.echo(verdict.lines)


def _sentence(tool: str, verdict: Verdict) -> str:
    who = f"rule {verdict.rule}" if verdict.rule != "default" else "the policy's default (no rule decided)"
    what = {"allow": "would run", "hold": "would be held for approval", "deny": "would be denied"}[
        verdict.action
    ]
    why = f": {verdict.reason}" if verdict.reason else ""
    extra = f" ({verdict.decision.approvals} approvals)" if verdict.action == "hold" else ""
    return f"{tool} {what}{extra}, decided by {who}{why}"


def _verdict_json(verdict: Verdict) -> dict[str, object]:
    return {
        "decision": str(verdict.action),
        "rule": verdict.rule,
        "reason": verdict.reason,
        "approvals": verdict.decision.approvals if verdict.action == "hold" else None,
        "policySha256": verdict.policy,
        "shadow": [{"decision": str(f.action), "rule": f.rule, "reason": f.reason} for f in verdict.shadow],
        "meters": [d.meter for d in verdict.debits],
        "journalLines": verdict.lines.split("\n"),
    }
