"""``sagacity db``: create the schema, apply the privilege split."""

from __future__ import annotations

import click

from sagacity.cli._common import CommandError, console, db_option, open_sagacity
from sagacity.stores import safe_url
from sagacity.stores.base import Capability, capable


@click.group()
def db() -> None:
    """Set up the journal database."""


@db.command()
@db_option
def init(db_url: str) -> None:
    """Create the journal tables if missing (idempotent; safe when several processes race)."""
    with open_sagacity(db_url, init_schema=True) as sg:
        console().print(f"schema ready in {safe_url(sg.url)}")


@db.command()
@db_option
@click.option(
    "--role", required=True, help="The database role (MariaDB: account) the application connects as."
)
def grant(db_url: str, role: str) -> None:
    """Privilege split: ROLE may SELECT and INSERT journal rows, never UPDATE or DELETE.

    PostgreSQL and MariaDB/MySQL. Run it as the tables' owner (MariaDB: an account with GRANT
    OPTION); then run the application as ROLE, which must exist (MariaDB: an account, `name` or
    `name@host`, holding no UPDATE or DELETE on the whole database).
    """
    with open_sagacity(db_url, init_schema=True) as sg:
        granting = capable(sg.store, Capability.APPEND_ONLY_GRANT)
        if granting is None:
            raise CommandError(
                f"the privilege split needs a database with roles (PostgreSQL, MariaDB/MySQL); "
                f"{type(sg.store).__name__} enforces append-only otherwise (SQLite: triggers refuse "
                "UPDATE and DELETE)"
            )
        granting.grant_append_only(role)
        console().print(f"role {role!r}: SELECT, INSERT on the journal; no UPDATE, no DELETE")


@db.command()
@db_option
def reindex(db_url: str) -> None:
    """Drop the saga index and fold every journal into it again.

    Never needed for correct answers (every read catches the index up from the journal first);
    run it after restoring a backup or after changes made behind every trigger's back, or during
    an upgrade so the first read after it is not the one that folds a large journal. Takes time
    in proportion to the journal; on a terminal a progress bar shows the sagas folded (on
    stderr; nothing in a pipe).
    """
    from sagacity.cli.checkpoint import scan_progress

    with open_sagacity(db_url) as sg, scan_progress("reindexing") as progress:
        count = sg.reindex(progress=progress)
        console().print(f"saga index rebuilt in {safe_url(sg.url)}: {count} saga(s)")
