"""``sagacity checkpoint``: sign the journal's state and anchor it outside the database.

Also the pieces ``sagacity verify --checkpoint`` shares: the progress bar and the findings table.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import click

from sagacity.cli._common import EXIT_FINDINGS, CommandError, console, db_option, open_sagacity
from sagacity.cli._options import Digits, parse_duration
from sagacity.errors import JournalIntegrityError, SagacityError

if TYPE_CHECKING:
    from rich.table import Table

    from sagacity import Sagacity
    from sagacity.checkpoints import (
        Checkpoint,
        CheckpointReport,
        DirectorySink,
        LogCheckpoint,
        SigningKey,
        VerifierKey,
        Witness,
    )
    from sagacity.checkpoints import Progress as ProgressCallback


@contextmanager
def scan_progress(description: str) -> Iterator[ProgressCallback]:
    """A transient progress bar on stderr (shown on a terminal only) fed by the scan's callback."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    err = console(stderr=True)
    if not err.is_terminal:  # a pipe or a log: not even the blank line a stopped bar leaves
        yield lambda done, total, entries: None
        return
    with Progress(
        SpinnerColumn(),
        TextColumn(description),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("sagas, {task.fields[entries]} entries"),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task(description, total=None, entries=0)

        def update(done: int, total: int, entries: int) -> None:
            progress.update(task, completed=done, total=total, entries=entries)

        yield update


def findings_table(report: CheckpointReport) -> Table:
    """One row per finding: which saga, what happened to it, where, and the counts then and now."""
    from rich.markup import escape
    from rich.table import Table

    table = Table("saga", "finding", "index", "at checkpoint", "now", "detail")
    for finding in report.findings:
        table.add_row(
            escape(finding.saga_id) or "(log)",
            f"[red]{finding.kind}[/]",
            str(finding.index) if finding.index >= 0 else "-",
            str(finding.attested) if finding.attested else "-",
            str(finding.current),
            escape(finding.detail),
        )
    return table


def distinct_witnesses(keys: list[VerifierKey], quorum: int, option: str) -> None:
    """A usage error (exit 2) when ``option`` names one witness twice: a quorum counts distinct ones."""
    from sagacity.checkpoints import check_witnesses

    try:
        check_witnesses(keys, quorum)
    except SagacityError as exc:
        raise click.UsageError(f"{option}: {exc}") from exc


def _optional_duration(ctx: click.Context, param: click.Parameter, value: str | None) -> timedelta | None:
    return None if value is None else parse_duration(ctx, param, value)


def _sink(out_dir: str | None, git_dir: str | None) -> DirectorySink:
    from sagacity.checkpoints import DirectorySink, GitSink

    if (out_dir is None) == (git_dir is None):
        raise click.UsageError("give exactly one of --out DIR or --git DIR: where the checkpoint is anchored")
    try:
        return DirectorySink(out_dir) if out_dir is not None else GitSink(str(git_dir))
    except SagacityError as exc:
        raise CommandError(str(exc)) from exc


@click.command()
@click.option(
    "--key", "key_path", required=True, type=click.Path(dir_okay=False), help="The private key (NAME.key)."
)
@click.option(
    "--origin", required=True, help="The journal's name in the checkpoint, e.g. acme.example/orders."
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Anchor in this directory.")
@click.option(
    "--git",
    "git_dir",
    type=click.Path(file_okay=False),
    help="Anchor in this git work tree, one commit each.",
)
@click.option(
    "--every",
    callback=_optional_duration,
    metavar="DURATION",
    help="Keep going: a checkpoint every DURATION (30s, 5m, 1h) until interrupted.",
)
@click.option("--count", type=Digits(min=1), help="With --every: stop after this many checkpoints.")
@click.option(
    "--max-skew",
    default="60s",
    show_default=True,
    callback=parse_duration,
    metavar="DURATION",
    help="Entries missing from the previous checkpoint may predate it by this much (clock skew).",
)
@click.option(
    "--witness",
    "witness_specs",
    multiple=True,
    metavar="URL=PUB",
    help="Ask this tlog-witness (its URL prefix and its cosigning public key) to cosign the log "
    "checkpoint. Repeatable.",
)
@click.option(
    "--quorum",
    type=Digits(min=0),
    help="Cosignatures the log checkpoint needs before it is published (default: every --witness).",
)
@click.option(
    "--tsa",
    "tsa_url",
    metavar="URL",
    help="Also get an RFC 3161 timestamp token on the log checkpoint from this time-stamping "
    "authority (needs the 'timestamps' extra); kept beside it as .tsr.",
)
@db_option
def checkpoint(
    key_path: str,
    origin: str,
    out_dir: str | None,
    git_dir: str | None,
    every: timedelta | None,
    count: int | None,
    max_skew: timedelta,
    witness_specs: tuple[str, ...],
    quorum: int | None,
    tsa_url: str | None,
    db_url: str,
) -> None:
    """Verify every chain, sign the journal's state and its log, and anchor both checkpoints.

    The saga checkpoint holds every saga's entry count and head hash under a Merkle root; the log
    checkpoint (a C2SP tlog-checkpoint, origin ORIGIN/log) is the root of the append-only log of
    every entry, which the witnesses cosign only if it extends what they cosigned before. Both
    are signed with Ed25519. Refused (exit 1, with the findings) if a chain is broken, the journal
    does not extend the newest checkpoints in the anchor, or fewer than --quorum witnesses
    cosign: signing would launder the tampering. Both checkpoints are anchored only once both are
    made (cosigned, and timestamped with --tsa): a refused run (exit 1 or 2) leaves the anchor and
    its latest pointers as they were. One witness named twice is an error: a quorum counts distinct
    witnesses. Run it from cron, or as a sidecar with --every.
    On a terminal a progress bar shows the sagas verified (on stderr; nothing in a pipe).
    """
    from sagacity.checkpoints import load_signing_key

    if count is not None and every is None:
        raise click.UsageError("--count bounds the --every loop; give --every too")
    witnesses = [_witness(spec) for spec in witness_specs]
    needed = len(witnesses) if quorum is None else quorum
    if needed > len(witnesses):
        raise click.UsageError(f"--quorum {needed} needs at least {needed} --witness")
    distinct_witnesses([witness.key for witness in witnesses], needed, "--witness")
    try:
        key = load_signing_key(key_path)
    except SagacityError as exc:
        raise CommandError(str(exc)) from exc
    sink = _sink(out_dir, git_dir)
    made = 0
    with open_sagacity(db_url) as sg:
        try:
            while True:
                # Both checkpoints are made (verified, signed, cosigned, timestamped) before either
                # is published: a run that refuses (exit 1 or 2) leaves the anchor as it was.
                saga_checkpoint = _checkpoint_once(sg, key, origin, sink, max_skew)
                log_checkpoint = _log_checkpoint_once(sg, key, origin, sink, witnesses, needed, tsa_url)
                _publish(sink, saga_checkpoint, log_checkpoint)
                made += 1
                if every is None or (count is not None and made >= count):
                    return
                time.sleep(every.total_seconds())
        except KeyboardInterrupt:
            console(stderr=True).print(f"stopped after {made} checkpoint(s)")


def _witness(spec: str) -> Witness:
    from sagacity.checkpoints import Witness, load_witness_key

    url, sep, pub = spec.rpartition("=")
    if not sep or not url.startswith(("http://", "https://")):
        raise click.UsageError(f"--witness {spec!r}: expected URL=PUB, e.g. http://witness:7380=w.pub")
    try:
        return Witness(url, load_witness_key(pub))
    except SagacityError as exc:
        raise CommandError(f"--witness {spec!r}: {exc}") from exc


@dataclass(frozen=True)
class _ReadyLog:
    """A log checkpoint made and not yet published: its cosignatures, token and what to report."""

    checkpoint: LogCheckpoint
    token: bytes | None
    cosigned: int
    asked: int


def _log_checkpoint_once(
    sg: Sagacity,
    key: SigningKey,
    origin: str,
    sink: DirectorySink,
    witnesses: list[Witness],
    quorum: int,
    tsa_url: str | None,
) -> _ReadyLog:
    """Sign, cosign and timestamp the log checkpoint; exit 1 (refused) or 2 (an error) otherwise."""
    from rich.markup import escape

    from sagacity.checkpoints import (
        WitnessRefused,
        checkpoint_log,
        cosign_with_quorum,
        log_consistency_proof,
        request_timestamp,
    )

    try:
        previous = sink.latest_log(key.verifier)
        made = checkpoint_log(sg, key, origin, previous=previous)
    except JournalIntegrityError as exc:
        console(stderr=True).print(f"[red]{escape(str(exc))}[/]")
        sys.exit(EXIT_FINDINGS)
    except SagacityError as exc:
        raise CommandError(str(exc)) from exc
    refusals: list[str] = []
    if witnesses:
        try:
            made, refusals = cosign_with_quorum(
                made,
                witnesses,
                quorum,
                previous.size if previous is not None else 0,
                lambda old: log_consistency_proof(sg, old, made.size, known=previous),
            )
        except WitnessRefused as exc:
            console(stderr=True).print(f"[red]log checkpoint not published: {escape(str(exc))}[/]")
            sys.exit(EXIT_FINDINGS)
    for refusal in refusals:
        console(stderr=True).print(f"[yellow]{escape(refusal)}[/]")
    try:
        token = request_timestamp(tsa_url, made.text.encode("utf-8")) if tsa_url is not None else None
    except SagacityError as exc:
        raise CommandError(f"{exc}; nothing was published") from exc
    return _ReadyLog(made, token, len(witnesses) - len(refusals), len(witnesses))


def _publish(sink: DirectorySink, checkpoint: Checkpoint, log: _ReadyLog) -> None:
    """Anchor the saga checkpoint, then the log checkpoint, and say where each went."""
    from rich.markup import escape

    try:
        where = sink.publish(checkpoint)
        log_where = sink.publish_log(log.checkpoint, log.token)
    except SagacityError as exc:
        raise CommandError(str(exc)) from exc
    console().print(
        f"{escape(where)}: {checkpoint.size} sagas, {checkpoint.entries} entries, "
        f"root {checkpoint.root_base64}",
        soft_wrap=True,
    )
    made = log.checkpoint
    console().print(
        f"{escape(log_where)}: log of {made.size} entries, root {made.root_base64}, "
        f"cosigned by {log.cosigned} of {log.asked} witness(es)" + (", timestamped" if log.token else ""),
        soft_wrap=True,
    )


def _checkpoint_once(
    sg: Sagacity, key: SigningKey, origin: str, sink: DirectorySink, max_skew: timedelta
) -> Checkpoint:
    """Verify every chain and sign the saga checkpoint; exit 1 with the findings otherwise."""
    from rich.markup import escape

    from sagacity.checkpoints import create_checkpoint

    try:
        previous = sink.latest(key.verifier)
    except SagacityError as exc:
        raise CommandError(
            f"the newest checkpoint in the anchor cannot be read with this key ({exc}); "
            "a new key needs a new anchor directory"
        ) from exc
    try:
        with scan_progress("checkpoint") as progress:
            made = create_checkpoint(sg, key, origin, previous=previous, max_skew=max_skew, progress=progress)
    except JournalIntegrityError as exc:
        if exc.report is not None:
            console().print(findings_table(exc.report))
        console(stderr=True).print(f"[red]{escape(str(exc))}[/]")
        sys.exit(EXIT_FINDINGS)
    return made
