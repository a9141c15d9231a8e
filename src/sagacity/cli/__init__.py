"""The ``sagacity`` command line: one click group, one module per command group.

Each command is a thin shell over the public library API; what a command can do, a program can do
through :class:`sagacity.Sagacity` too.
"""

from __future__ import annotations

import click

from sagacity import __version__
from sagacity.cli import (
    approvals,
    checkpoint,
    db,
    demo,
    doctor,
    evidence,
    keys,
    mcp,
    policy,
    sagas,
    serve,
    switch,
    witness,
    workflows,
)

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="sagacity")
def main() -> None:
    """Sagacity: journaled, compensating, human-approved tool calls for AI agents."""


for command in (
    approvals.approvals,
    checkpoint.checkpoint,
    db.db,
    demo.demo,
    doctor.doctor,
    evidence.verify,
    evidence.export,
    keys.keys,
    mcp.mcp,
    policy.policy,
    sagas.sagas,
    serve.serve,
    switch.switch,
    witness.witness,
    workflows.workflows,
):
    main.add_command(command)
