"""``sagacity keys``: the Ed25519 key pair that signs checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

import click

from sagacity.cli._common import CommandError, console
from sagacity.errors import SagacityError


@click.group()
def keys() -> None:
    """Signing keys for checkpoints (Ed25519, C2SP signed-note encoding)."""


@keys.command()
@click.option(
    "--out",
    "stem",
    required=True,
    metavar="DIR/NAME",
    help="Write DIR/NAME.key (private, mode 0600) and DIR/NAME.pub (public). Never overwrites.",
)
@click.option("--name", help="The key's name inside signatures (default: NAME).")
@click.option(
    "--witness",
    is_flag=True,
    help="A cosigning witness's key (C2SP cosignature/v1, type 0x04) for `sagacity witness`.",
)
def generate(stem: str, name: str | None, witness: bool) -> None:
    """Generate a key pair for `sagacity checkpoint` (or, with --witness, `sagacity witness`).

    Keep NAME.key where the database's operators cannot read it (the point of a checkpoint is that
    they cannot forge one); hand NAME.pub to auditors, who pass it to `sagacity verify --key`
    (a witness's to `--witness-key`).
    """
    from sagacity.checkpoints import write_key_pair

    if stem.endswith(("/", os.sep)) or Path(stem).is_dir():
        raise click.BadParameter(
            f"{stem!r} is a directory; give DIR/NAME, e.g. {stem.rstrip('/' + os.sep) or '.'}/ops",
            param_hint="'--out'",
        )
    try:
        key_path, pub_path = write_key_pair(stem, name, witness=witness)
    except SagacityError as exc:
        raise CommandError(str(exc)) from exc
    out = console()
    out.print(f"private key: {key_path} (mode 0600; keep it away from the database host)")
    out.print(f"public key:  {pub_path} (share it with auditors)")
    out.print(pub_path.read_text(encoding="ascii").strip(), markup=False)
