"""``sagacity workflows``: runs of the workflows a module declares, and their gates.

Every command needs ``--import MODULE`` for the module that declares the workflows: a run is a
saga, and only the declaration says which stages it has. ``list``/``show`` only read;
``approve`` journals an approval (and with ``--continue`` runs the stage here); ``reject``
compensates the run's completed stages here; ``resume`` continues a run from its journal.
"""

from __future__ import annotations

from shlex import quote
from typing import TYPE_CHECKING

import click

from sagacity.cli._common import CommandError, console, db_option, open_sagacity
from sagacity.cli._options import (
    Digits,
    echo_json,
    identity_option,
    import_option,
    json_option,
    one_line_option,
    resolve_identity,
)
from sagacity.cli._render import cells, shorten, status_text, when
from sagacity.errors import SagacityError

if TYPE_CHECKING:
    from sagacity import Sagacity
    from sagacity.workflows import WorkflowResult, WorkflowView

_EPILOG = """\b
Examples:
  sagacity workflows list --import myapp.flows
  sagacity workflows show article-42 --import myapp.flows
  sagacity workflows approve article-42 publish --as lawyer@example.com --continue --import myapp.flows
  sagacity workflows reject article-42 publish --reason "not cleared" --import myapp.flows
"""


@click.group(epilog=_EPILOG)
def workflows() -> None:
    """Workflow runs: where each stands, and the human gates before their stages."""


@workflows.command("list")
@click.option("--workflow", metavar="NAME", help="Only this workflow's runs.")
@click.option("--limit", type=Digits(min=1), default=50, show_default=True, help="At most N runs.")
@json_option
@import_option
@db_option
def list_(workflow: str | None, limit: int, as_json: bool, db_url: str) -> None:
    """Runs of the imported workflows with their status and current stage. Read-only."""
    from rich.table import Table

    from sagacity._wire import workflow_run_json
    from sagacity.workflows import runs

    with open_sagacity(db_url) as sg:
        found = runs(sg, workflow=workflow, limit=limit)
    if as_json:
        echo_json([workflow_run_json(v) for v in found])
        return
    out = console()
    if not found:
        out.print("no workflow runs (did you --import the module that declares the workflows?)")
        return
    table = Table("run", "workflow", "status", "stage", "updated (UTC)")
    for view in found:
        table.add_row(
            *cells(
                view.run_id,
                view.workflow,
                status_text(view.status),
                view.current_stage or "-",
                when(view.updated_at),
            )
        )
    out.print(table)


@workflows.command("show")
@click.argument("run_id")
@json_option
@import_option
@db_option
def show(run_id: str, as_json: bool, db_url: str) -> None:
    """One run: each stage's status, input, output, checks and gate. Read-only."""
    from sagacity._wire import workflow_run_json

    with open_sagacity(db_url) as sg:
        view = _view(sg, run_id)
    if as_json:
        echo_json(workflow_run_json(view, full=True))
        return
    _print_run(view)


@workflows.command("approve")
@click.argument("run_id")
@click.argument("stage")
@identity_option
@click.option("--continue", "go_on", is_flag=True, help="Once approved, continue the run here.")
@import_option
@db_option
def approve(run_id: str, stage: str, identity: str | None, go_on: bool, db_url: str) -> None:
    """Approve the gate before STAGE (approving is not running: --continue, or `resume`, runs it)."""
    from sagacity._wire import decision_json
    from sagacity.workflows import workflow_of_run

    approver = resolve_identity(identity)
    with open_sagacity(db_url) as sg:
        try:
            workflow = workflow_of_run(sg, run_id)
            decision = workflow.approve(sg, run_id, stage, approver)
            result = workflow.resume(sg, run_id) if go_on else None
        except SagacityError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    body = decision_json(decision)
    console().print(f"approved the gate before {stage!r} of run {run_id!r} as {body['approverIdentity']}")
    if result is not None:
        _report(result)
    else:
        console().print(f"continue it with: sagacity workflows resume {quote(run_id)} --import MODULE")


@workflows.command("reject")
@click.argument("run_id")
@click.argument("stage")
@identity_option
@click.option("--reason", required=True, help="Why (required, journaled with the decision).")
@import_option
@db_option
def reject(run_id: str, stage: str, identity: str | None, reason: str, db_url: str) -> None:
    """Reject the gate before STAGE: the run's completed stages are compensated here."""
    from sagacity.workflows import workflow_of_run

    approver = resolve_identity(identity)
    if not reason.strip():
        raise CommandError("--reason must say why the gate is rejected; nothing was journaled")
    reason = one_line_option("reason", reason)
    with open_sagacity(db_url) as sg:
        try:
            workflow = workflow_of_run(sg, run_id)
            workflow.reject(sg, run_id, stage, approver, reason)
            view = workflow.view(sg, run_id)
        except SagacityError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    console().print(f"rejected the gate before {stage!r} of run {run_id!r}: the run is {view.status}")


@workflows.command("resume")
@click.argument("run_id")
@import_option
@db_option
def resume(run_id: str, db_url: str) -> None:
    """Continue a run from its journal: completed stages replay, the next ones run here.

    Exit status 0 when the run completed or waits at a gate, 1 when it compensated.
    """
    from sagacity.workflows import workflow_of_run

    with open_sagacity(db_url) as sg:
        try:
            result = workflow_of_run(sg, run_id).resume(sg, run_id)
        except SagacityError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    _report(result)
    if result.error is not None:
        raise SystemExit(1)


def _view(sg: Sagacity, run_id: str) -> WorkflowView:
    from sagacity.workflows import workflow_of_run

    try:
        return workflow_of_run(sg, run_id).view(sg, run_id)
    except SagacityError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc


def _report(result: WorkflowResult) -> None:
    out = console()
    line = f"run {result.run_id!r}: {result.status}"
    if result.stage is not None:
        line += f" at stage {result.stage!r}"
    if result.error is not None:
        line += f" ({type(result.error).__name__}: {result.error})"
    out.print(line, markup=False)
    _print_run(result.view)


def _print_run(view: WorkflowView) -> None:
    from rich.table import Table

    from sagacity.workflows import StageStatus

    out = console()
    out.print(f"run {view.run_id} of {view.workflow}: {view.status}", markup=False)
    table = Table("stage", "status", "gate", "checks", "policy", "output")
    for stage in view.stages:
        gate = "-"
        if stage.gate is not None:
            gate = f"seq {stage.gate.seq}, {len(stage.gate.approvers)}/{stage.gate.approvals_required}"
        checks = ", ".join(f"{c.name} {c.status}" for c in stage.checks) or "-"
        policy = "-" if stage.policy is None else f"{stage.policy.action} by rule {stage.policy.rule}"
        output = "-" if stage.output is None else shorten(str(stage.output), 40)
        table.add_row(*cells(stage.name, str(stage.status), gate, checks, policy, output))
    out.print(table)
    for stage in view.stages:
        if stage.status is StageStatus.IN_DOUBT:
            out.print(
                f"stage {stage.name!r} is in doubt: its process died before journaling an outcome, so "
                "whether it took effect is unknown; check, then settle it (`sagacity sagas in-doubt`, "
                "`sagacity sagas resolve`) and resume the run",
                markup=False,
            )
