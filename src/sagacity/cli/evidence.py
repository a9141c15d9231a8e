"""``sagacity verify`` and ``sagacity export``: the journal as evidence."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from sagacity.chain import Verification
from sagacity.cli._common import EXIT_FINDINGS, CommandError, console, db_option, open_sagacity
from sagacity.cli._options import Digits, echo_json, output_option, parse_duration
from sagacity.cli._render import CSV, JSON, Column, show_rows
from sagacity.errors import SagacityError, SagaNotFoundError
from sagacity.stores import safe_url

if TYPE_CHECKING:
    from sagacity import Sagacity
    from sagacity.checkpoints import (
        Checkpoint,
        CheckpointFinding,
        CheckpointReport,
        LogCheckpoint,
        VerifierKey,
    )


def _verify_all(
    sg: Sagacity, saga_ids: Iterable[str], total: int | None
) -> Iterator[tuple[str, Verification]]:
    """Verify sagas one by one, with a transient progress bar on a terminal."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

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
@click.option(
    "--checkpoint",
    "checkpoint_path",
    type=click.Path(exists=True),
    help="Check the whole journal extends this signed checkpoint (a file, or an anchor directory "
    "for its newest); needs --key.",
)
@click.option(
    "--key",
    "key_path",
    type=click.Path(dir_okay=False),
    help="The checkpoint signer's public key (NAME.pub).",
)
@click.option(
    "--max-skew",
    default="60s",
    show_default=True,
    callback=parse_duration,
    metavar="DURATION",
    help="With --checkpoint: how far a saga missing from it may predate it before it counts as forged.",
)
@click.option(
    "--since",
    "since_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="With --checkpoint: an older log checkpoint you kept (signed by --key); the journal must "
    "still fold to its root. Repeatable.",
)
@click.option(
    "--witness-key",
    "witness_key_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="With --checkpoint: a witness's cosigning public key; log checkpoints then need --quorum "
    "valid cosignatures. Repeatable.",
)
@click.option(
    "--quorum",
    type=Digits(min=1),
    help="With --witness-key: cosignatures each log checkpoint needs (default: every witness key).",
)
@click.option(
    "--tsa-cert",
    "tsa_cert_path",
    type=click.Path(exists=True, dir_okay=False),
    help="With --checkpoint: the time-stamping authority's root certificate(s) (PEM); every RFC 3161 "
    "token on a log checkpoint must verify against it, and the newest log checkpoint must carry one.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only broken chains.")
@output_option()
@db_option
def verify(
    saga_ids: tuple[str, ...],
    export_file: IO[str] | None,
    checkpoint_path: str | None,
    key_path: str | None,
    max_skew: timedelta,
    since_paths: tuple[str, ...],
    witness_key_paths: tuple[str, ...],
    quorum: int | None,
    tsa_cert_path: str | None,
    quiet: bool,
    output: str,
    db_url: str,
) -> None:
    """Recompute hash chains: the named sagas, or every saga in the journal.

    With --checkpoint and --key, also prove the journal extends a signed checkpoint: every saga
    it attests is still there, at least as long, with the attested head at the attested length,
    and no saga missing from it claims to predate it. Findings name the saga: BROKEN, SHORTENED,
    MISSING, REWRITTEN, BACKDATED. The log checkpoints in the anchor (and --since ones) are checked
    too: the journal, in log order, must still fold to each one's root (LOG_MISMATCH otherwise),
    no two may differ at one size (FORKED), and with --witness-key each needs its quorum of
    cosignatures (UNWITNESSED). With --tsa-cert, each log checkpoint's RFC 3161 timestamp token
    (the .tsr beside it) must verify against the TSA's root (BAD_TIMESTAMP otherwise), and the
    newest must carry one (UNTIMESTAMPED); each verified token's time is reported.

    --json prints one document: {"valid", "checked", "broken", "sagas": [one verdict per saga]}
    (with --checkpoint, the checkpoint report). A journal with no sagas says so and exits 0:
    there is nothing to check (a checkpoint is what notices sagas that went missing).

    Exit status 0 when every chain is intact, 1 when any is broken (or any finding), 2 on errors
    (e.g. an unknown saga, a checkpoint not signed by the key).
    """
    from sagacity.cli.checkpoint import distinct_witnesses
    from sagacity.export import verify_sagas

    as_json = output == JSON
    if checkpoint_path is not None:
        if saga_ids or export_file is not None:
            raise click.UsageError("--checkpoint checks the whole journal; do not name sagas or --export")
        if key_path is None:
            raise click.UsageError("--checkpoint needs --key PUB, the signer's public key")
        witness_keys = [_load_key(path, witness=True) for path in witness_key_paths]
        needed = len(witness_keys) if quorum is None else quorum
        if needed > len(witness_keys):
            raise click.UsageError(f"--quorum {needed} needs at least {needed} --witness-key")
        distinct_witnesses(witness_keys, needed, "--witness-key")
        trust = _read_trust(tsa_cert_path) if tsa_cert_path is not None else None
        log_policy = LogPolicy(since_paths, witness_keys, needed, trust)
        _verify_checkpoint(db_url, checkpoint_path, key_path, max_skew, log_policy, as_json=as_json)
        return
    if key_path is not None or since_paths or witness_key_paths or quorum is not None or tsa_cert_path:
        raise click.UsageError("--key, --since, --witness-key, --quorum and --tsa-cert go with --checkpoint")
    if export_file is not None:
        if saga_ids:
            raise click.UsageError("--export verifies the file it is given; do not name sagas too")
        results = list(verify_sagas(line.rstrip("\n") for line in export_file))
        if not results:
            raise CommandError(f"{export_file.name} holds no journal entries")
        _report(results, output=output, quiet=quiet)
        return
    with open_sagacity(db_url) as sg:
        ids: list[str] = list(saga_ids) or sg.saga_ids()
        if not ids:
            if as_json:
                echo_json({"valid": True, "checked": 0, "broken": 0, "sagas": []})
            else:
                console().print(f"the journal at {safe_url(sg.url)} holds no sagas: nothing to verify")
            return
        try:
            _report(_verify_all(sg, ids, len(ids)), output=output, quiet=quiet)
        except SagaNotFoundError as exc:
            raise CommandError(str(exc)) from exc


def _load_checkpoint(checkpoint_path: str, key_path: str) -> Checkpoint:
    """The checkpoint, its signature by ``key_path`` and its leaves checked; errors exit 2."""
    from sagacity.checkpoints import load_verifier_key, read_checkpoint

    try:
        return read_checkpoint(checkpoint_path, load_verifier_key(key_path))
    except SagacityError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc


def _load_key(path: str, *, witness: bool = False) -> VerifierKey:
    from sagacity.checkpoints import load_verifier_key, load_witness_key

    try:
        return load_witness_key(path) if witness else load_verifier_key(path)
    except SagacityError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class LogPolicy:
    """What the auditor brings for the log: checkpoints kept, witness keys, the quorum."""

    since: tuple[str, ...]
    witnesses: list[VerifierKey]
    quorum: int
    tsa_trust: bytes | None = None  # the TSA's root certificate(s), PEM: check timestamp tokens


def _read_trust(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read the TSA certificate {path}: {exc}") from exc


def _log_checkpoints(checkpoint_path: str, key: VerifierKey, policy: LogPolicy) -> list[LogCheckpoint]:
    """The anchor's log checkpoints (a directory's), then the ones the auditor kept."""
    from sagacity.checkpoints import DirectorySink, read_log_checkpoint

    try:
        found = DirectorySink(checkpoint_path).log_checkpoints(key) if Path(checkpoint_path).is_dir() else []
        found += [read_log_checkpoint(path, key) for path in policy.since]
    except SagacityError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    return found


def _unwitnessed(checkpoints: list[LogCheckpoint], policy: LogPolicy) -> list[CheckpointFinding]:
    from sagacity.checkpoints import CheckpointFinding, CheckpointFindingKind

    found = []
    for cp in checkpoints:
        try:
            cp.check_quorum(policy.witnesses, policy.quorum)
        except SagacityError as exc:
            found.append(
                CheckpointFinding("", CheckpointFindingKind.UNWITNESSED, -1, cp.size, cp.size, str(exc))
            )
    return found


def _verify_checkpoint(
    db_url: str,
    checkpoint_path: str,
    key_path: str,
    max_skew: timedelta,
    policy: LogPolicy,
    *,
    as_json: bool,
) -> None:
    from sagacity.checkpoints import verify_against_checkpoint, verify_log, verify_log_timestamps
    from sagacity.cli.checkpoint import findings_table, scan_progress

    checkpoint = _load_checkpoint(checkpoint_path, key_path)
    logs = _log_checkpoints(checkpoint_path, _load_key(key_path), policy)
    with open_sagacity(db_url) as sg, scan_progress("verifying") as progress:
        report = verify_against_checkpoint(sg, checkpoint, max_skew=max_skew, progress=progress)
        try:
            log_findings = verify_log(sg, logs)
        except SagacityError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    if policy.witnesses:
        log_findings += _unwitnessed(logs, policy)
    times: dict[int, datetime] = {}
    if policy.tsa_trust is not None:
        try:
            stamped, times = verify_log_timestamps(logs, policy.tsa_trust)
        except SagacityError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
        log_findings += stamped
    report = dataclasses.replace(report, findings=report.findings + tuple(log_findings))
    if as_json:
        echo_json(_report_json(checkpoint, report, logs, times))
    else:
        out = console()
        out.print(
            f"checkpoint {checkpoint.origin} of {checkpoint.time:%Y-%m-%d %H:%M:%S} UTC: "
            f"{checkpoint.size} sagas, {checkpoint.entries} entries",
            markup=False,
        )
        if report.findings:
            out.print(findings_table(report))
        out.print(
            f"now: {report.sagas} sagas, {report.entries} entries; {report.grown} grew and "
            f"{len(report.added)} were added since the checkpoint"
        )
        if logs:
            out.print(_largest_cosigned(logs, policy.witnesses), markup=False)
        if policy.tsa_trust is not None:
            for size, moment in sorted(times.items()):
                out.print(
                    f"log checkpoint of size {size}: timestamped {moment:%Y-%m-%dT%H:%M:%SZ} by the TSA"
                )
        elif any(cp.timestamp is not None for cp in logs):
            out.print("log: timestamp tokens present but not checked (give --tsa-cert ROOT.pem)")
        if report.ok:
            out.print("[green]the journal extends the checkpoint: every chain intact[/]")
        else:
            out.print(f"[red]{len(report.findings)} finding(s)[/]")
    if not report.ok:
        sys.exit(EXIT_FINDINGS)


def _largest_cosigned(logs: list[LogCheckpoint], witnesses: list[VerifierKey]) -> str:
    """Who cosigned the largest log checkpoint: per root when two of that size differ (a fork),
    each root's cosigners gathered from every copy of it (the anchor's, the auditor's)."""
    largest = max(cp.size for cp in logs)
    by_root: dict[str, set[str]] = {}
    for cp in logs:
        if cp.size == largest:
            by_root.setdefault(cp.root_base64, set()).update(cp.cosigners(witnesses))
    said = [(root, ", ".join(sorted(names)) or "no known witness") for root, names in by_root.items()]
    cosigned = (
        f" cosigned by {said[0][1]}"
        if len(said) == 1
        else ": " + "; ".join(f"root {root} cosigned by {names}" for root, names in said)
    )
    return (
        f"log: {len(logs)} log checkpoint(s) checked against the journal, the largest of "
        f"{largest} entries{cosigned}"
    )


def _report_json(
    checkpoint: Checkpoint, report: CheckpointReport, logs: list[LogCheckpoint], times: dict[int, datetime]
) -> dict[str, Any]:
    return {
        "logCheckpoints": [
            {
                "origin": cp.origin,
                "size": cp.size,
                "root": cp.root_base64,
                "timestamped": f"{times[cp.size]:%Y-%m-%dT%H:%M:%SZ}" if cp.size in times else None,
            }
            for cp in logs
        ],
        "checkpoint": {
            "origin": checkpoint.origin,
            "time": checkpoint.time.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "sagas": checkpoint.size,
            "entries": checkpoint.entries,
            "root": checkpoint.root_base64,
        },
        "ok": report.ok,
        "findings": [
            {
                "sagaId": f.saga_id,
                "finding": str(f.kind),
                "index": f.index,
                "attested": f.attested,
                "current": f.current,
                "detail": f.detail,
            }
            for f in report.findings
        ],
        "added": list(report.added),
        "grown": report.grown,
        "sagas": report.sagas,
        "entries": report.entries,
    }


_VERDICT_COLUMNS = (
    Column("saga"),
    Column("entries", right=True),
    Column("chain"),
    Column("detail", cut=True),
)


def _report(results: Iterable[tuple[str, Verification]], *, output: str, quiet: bool) -> None:
    """The verdicts as a table or CSV (``--quiet``: broken ones only) or one JSON document."""
    from rich.text import Text

    from sagacity._wire import verification_json

    verdicts: list[dict[str, Any]] = []
    rows: list[tuple[str | Text, ...]] = []
    checked = broken = 0
    for saga_id, result in results:
        checked += 1
        broken += not result.valid
        if quiet and result.valid:
            continue
        verdicts.append({"sagaId": saga_id, **verification_json(result)})
        chain = (
            Text("intact", style="green")
            if result.valid
            else Text(f"BROKEN at seq {result.break_at_index + 1}", style="red")
        )
        rows.append((saga_id, str(result.entry_count), chain, "" if result.valid else result.message))
    if output == JSON:
        echo_json({"valid": not broken, "checked": checked, "broken": broken, "sagas": verdicts})
    elif rows:
        show_rows(_VERDICT_COLUMNS, rows, output=output)
    if broken:
        if output not in (JSON, CSV):
            console().print(f"[red]{broken} broken chain(s)[/]")
        sys.exit(EXIT_FINDINGS)


def _refuse_output_format(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``-o`` names an output format in every other command: here it would have named a file
    (``export ID -o json`` wrote one called ``json``), so it is refused before anything is written."""
    if value is not None:
        raise click.UsageError(
            f"export writes JSON Lines only; -o is an output format in other commands, not a file: "
            f"to write a file use --out {value if value not in ('json', 'jsonl') else 'FILE'}"
        )


@click.command()
@click.argument("saga_ids", nargs=-1, required=True, metavar="SAGA_ID...")
@click.option(
    "--out",
    "output",
    type=click.File("w", encoding="utf-8", lazy=True),
    default="-",
    metavar="FILE",
    help="Write to this file instead of stdout.",
)
@click.option(
    "--output",
    "-o",
    "output_format",
    hidden=True,
    expose_value=False,
    callback=_refuse_output_format,
    help="Refused: -o is an output format elsewhere, and export writes JSON Lines only.",
)
@click.option(
    "--bundle",
    "bundle_dir",
    type=click.Path(file_okay=False),
    help="Write an evidence bundle to this new directory: the sagas, the checkpoint and inclusion proofs.",
)
@click.option(
    "--checkpoint",
    "checkpoint_path",
    type=click.Path(exists=True),
    help="With --bundle: the checkpoint to prove against (a file, or an anchor directory for its newest).",
)
@click.option(
    "--key",
    "key_path",
    type=click.Path(dir_okay=False),
    help="With --bundle: the signer's public key (NAME.pub).",
)
@click.option(
    "--since",
    "since_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="With --bundle from an anchor directory: also prove its newest log checkpoint extends this "
    "older one (an auditor's copy). Repeatable.",
)
@db_option
def export(
    saga_ids: tuple[str, ...],
    output: IO[str],
    bundle_dir: str | None,
    checkpoint_path: str | None,
    key_path: str | None,
    since_paths: tuple[str, ...],
    db_url: str,
) -> None:
    """Write sagas' journals as JSON Lines (one entry per line; each saga's in seq order, the
    sagas in the order named).

    The export is streamed, so it works for sagas of any length; check it anywhere with
    ``sagacity verify --export FILE`` (saga by saga). With --bundle, write one or more sagas as an evidence
    bundle that anyone can check offline with the public key alone:
    ``python -m sagacity.verify_bundle DIR --key NAME.pub``. From an anchor directory the bundle
    also carries its newest log checkpoint, with its cosignatures, and each saga's log inclusion
    proof; on a terminal a progress bar shows the sagas written (on stderr; nothing in a pipe).
    """
    from sagacity.checkpoints import DirectorySink, read_log_checkpoint, write_bundle

    if bundle_dir is not None:
        if checkpoint_path is None or key_path is None:
            raise click.UsageError("--bundle needs --checkpoint FILE|DIR and --key PUB")
        checkpoint = _load_checkpoint(checkpoint_path, key_path)
        verifier = _load_key(key_path)
        try:
            anchor = DirectorySink(checkpoint_path) if Path(checkpoint_path).is_dir() else None
            log = anchor.latest_log(verifier) if anchor is not None else None
            token = anchor.latest_log_timestamp() if anchor is not None else None
            since = [read_log_checkpoint(path, verifier) for path in since_paths]
        except SagacityError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
        if since and log is None:
            raise click.UsageError("--since needs --checkpoint DIR, an anchor holding log checkpoints")
        from sagacity.cli.checkpoint import scan_progress

        with open_sagacity(db_url) as sg, scan_progress("bundling") as progress:
            try:
                where = write_bundle(
                    sg,
                    saga_ids,
                    checkpoint,
                    bundle_dir,
                    log=log,
                    since=since,
                    log_timestamp=token,
                    progress=progress,
                )
            except SagacityError as exc:
                raise CommandError(f"{type(exc).__name__}: {exc}") from exc
        console().print(
            f"bundle {where}: {len(set(saga_ids))} saga(s) proven against the checkpoint of "
            f"{checkpoint.time:%Y-%m-%d %H:%M:%S} UTC",
            markup=False,
        )
        return
    if checkpoint_path is not None or key_path is not None or since_paths:
        raise click.UsageError("--checkpoint, --key and --since go with --bundle")
    with open_sagacity(db_url) as sg:
        try:  # every saga is found (export raises at once) before a line is written
            streams = [sg.export(saga_id) for saga_id in dict.fromkeys(saga_ids)]
        except SagaNotFoundError as exc:
            raise CommandError(str(exc)) from exc
        for lines in streams:
            for line in lines:
                output.write(line + "\n")
