"""``sagacity verify`` and ``sagacity export``: the journal as evidence."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from typing import IO

import click
from rich.progress import Progress, SpinnerColumn, TextColumn
from rich.table import Table

from sagacity._export import verify_lines
from sagacity._sagacity import Sagacity
from sagacity.chain import Verification
from sagacity.cli._common import EXIT_FINDINGS, CommandError, console, db_option, open_sagacity
from sagacity.errors import SagaNotFoundError


def _verification_json(saga_id: str, result: Verification) -> str:
    return json.dumps(
        {
            "sagaId": saga_id,
            "valid": result.valid,
            "entryCount": result.entry_count,
            "breakAtIndex": result.break_at_index,
            "message": result.message,
        },
        ensure_ascii=False,
    )


def _verify_all(
    sg: Sagacity, saga_ids: Iterable[str], total: int | None
) -> Iterator[tuple[str, Verification]]:
    """Verify sagas one by one, with a transient progress bar on a terminal."""
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.completed} sagas, {task.fields[entries]} entries"),
        console=console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("verifying", total=total, entries=0)
        entries = 0
        for saga_id in saga_ids:
            result = sg.verify(saga_id)
            entries += result.entry_count
            progress.update(task, advance=1, entries=entries)
            yield saga_id, result


@click.command()
@click.argument("saga_ids", nargs=-1, metavar="[SAGA_ID]...")
@click.option(
    "--export",
    "export_file",
    type=click.File("r", encoding="utf-8"),
    help="Verify a JSON Lines export offline instead of the database ('-' reads stdin).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per saga instead of a table.")
@click.option("--quiet", "-q", is_flag=True, help="Print only broken chains.")
@db_option
def verify(
    saga_ids: tuple[str, ...], export_file: IO[str] | None, as_json: bool, quiet: bool, db_url: str
) -> None:
    """Recompute hash chains: the named sagas, or every saga in the journal.

    Exit status 0 when every chain is intact, 1 when any is broken, 2 on errors (e.g. an unknown
    saga).
    """
    if export_file is not None:
        if saga_ids:
            raise click.UsageError("--export verifies the file it is given; do not name sagas too")
        results: Iterable[tuple[str, Verification]] = [
            (export_file.name, verify_lines(line.rstrip("\n") for line in export_file))
        ]
        _report(results, as_json=as_json, quiet=quiet)
        return
    with open_sagacity(db_url) as sg:
        ids: list[str] = list(saga_ids) or sg.saga_ids()
        if not ids:
            raise CommandError(f"the journal at {sg.url} has no sagas")
        try:
            _report(_verify_all(sg, ids, len(ids)), as_json=as_json, quiet=quiet)
        except SagaNotFoundError as exc:
            raise CommandError(str(exc)) from exc


def _report(results: Iterable[tuple[str, Verification]], *, as_json: bool, quiet: bool) -> None:
    out = console()
    table = Table("saga", "entries", "chain", "detail", title=None)
    broken = 0
    for saga_id, result in results:
        broken += not result.valid
        if quiet and result.valid:
            continue
        if as_json:
            click.echo(_verification_json(saga_id, result))
        else:
            verdict = (
                "[green]intact[/]" if result.valid else f"[red]BROKEN at index {result.break_at_index}[/]"
            )
            table.add_row(saga_id, str(result.entry_count), verdict, "" if result.valid else result.message)
    if not as_json and table.row_count:
        out.print(table)
    if broken:
        if not as_json:
            out.print(f"[red]{broken} broken chain(s)[/]")
        sys.exit(EXIT_FINDINGS)


@click.command()
@click.argument("saga_id")
@click.option(
    "--output",
    "-o",
    type=click.File("w", encoding="utf-8", lazy=True),
    default="-",
    help="Write to this file instead of stdout.",
)
@db_option
def export(saga_id: str, output: IO[str], db_url: str) -> None:
    """Write one saga's journal as JSON Lines (one entry per line, in seq order).

    The export is streamed, so it works for sagas of any length; check it anywhere with
    ``sagacity verify --export FILE``.
    """
    with open_sagacity(db_url) as sg:
        try:
            lines = sg.export(saga_id)
        except SagaNotFoundError as exc:
            raise CommandError(str(exc)) from exc
        for line in lines:
            output.write(line + "\n")
