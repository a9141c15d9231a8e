"""The ``sagacity`` click group and its table of commands (the face, ``sagacity.cli``, hands
``main`` on; ``python -m sagacity.cli`` runs it)."""

from __future__ import annotations

import click

import sagacity.cli._examples as examples
from sagacity import __version__
from sagacity.cli._lazy import Lazy, LazyGroup

__all__ = ["main"]

#: Every subcommand: where it is defined and its summary (the first sentence of its docstring).
COMMANDS = {
    "approvals": Lazy(
        "sagacity.cli.approvals",
        "approvals",
        "Approval requests of irreversible tools: list, show, approve, reject, resume.",
    ),
    "checkpoint": Lazy(
        "sagacity.cli.checkpoint",
        "checkpoint",
        "Verify every chain, sign the journal's state and its log, and anchor both checkpoints.",
    ),
    "db": Lazy("sagacity.cli.db", "db", "Set up the journal database."),
    "demo": Lazy(
        "sagacity.cli.demo",
        "demo",
        "Run a scripted order-placing agent: success, failure with compensation, approvals, tampering.",
    ),
    "doctor": Lazy(
        "sagacity.cli.doctor",
        "doctor",
        "Check every saga for what needs a human; exit 1 when anything does, 0 when all is well.",
    ),
    "export": Lazy(
        "sagacity.cli.evidence",
        "export",
        "Write sagas' journals as JSON Lines (one entry per line; each saga's in seq order, the "
        "sagas in the order named).",
    ),
    "keys": Lazy(
        "sagacity.cli.keys", "keys", "Signing keys for checkpoints (Ed25519, C2SP signed-note encoding)."
    ),
    "mcp": Lazy(
        "sagacity.cli.mcp",
        "mcp",
        "The MCP gateway: journal, gate and compensate the tools of any MCP server.",
    ),
    "policy": Lazy(
        "sagacity.cli.policy",
        "policy",
        "Guardrails policies (docs/policies.md): check a file, explain a verdict.",
    ),
    "notify": Lazy(
        "sagacity.cli.notify",
        "notify",
        "Notifications from the journal: webhooks, email, Slack (docs/notifications.md).",
    ),
    "sagas": Lazy(
        "sagacity.cli.sagas",
        "sagas",
        "Sagas and their journals; resolve in-doubt calls, recover interrupted compensations.",
    ),
    "serve": Lazy(
        "sagacity.cli.serve",
        "serve",
        "Serve the HTTP API (/sagacity/...) and the approvals dashboard (/sagacity/ui/).",
    ),
    "switch": Lazy(
        "sagacity.cli.switch",
        "switch",
        "The kill switch (docs/policies.md): every change is journaled with who made it.",
    ),
    "verify": Lazy(
        "sagacity.cli.evidence",
        "verify",
        "Recompute hash chains: the named sagas, or every saga in the journal.",
    ),
    "witness": Lazy(
        "sagacity.cli.witness",
        "witness",
        "Cosign log checkpoints that extend the last one cosigned; refuse, and say why, any other.",
    ),
    "workflows": Lazy(
        "sagacity.cli.workflows",
        "workflows",
        "Workflow runs: where each stands, and the human gates before their stages.",
    ),
}


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    epilog=examples.epilog(examples.TOP),
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="sagacity")
def main() -> None:
    """Sagacity: journaled, compensating, human-approved tool calls for AI agents."""
