"""``sagacity witness``: a C2SP tlog-witness that cosigns logs only while they stay append-only."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from sagacity.cli._common import CommandError, console
from sagacity.errors import SagacityError

if TYPE_CHECKING:
    from sagacity.checkpoints import VerifierKey


@click.command()
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The witness's private key (from `sagacity keys generate --witness`).",
)
@click.option(
    "--log",
    "logs",
    required=True,
    multiple=True,
    nargs=2,
    metavar="ORIGIN PUB",
    help="A log to witness: its checkpoints' origin (e.g. acme.example/orders/log) and its public key. "
    "Repeatable.",
)
@click.option(
    "--state",
    "state_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Where the last cosigned checkpoint of each log is kept (create it; keep it).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=7380, show_default=True, type=click.IntRange(0, 65535), help="Port.")
def witness(key_path: str, logs: tuple[tuple[str, str], ...], state_dir: str, host: str, port: int) -> None:
    """Cosign log checkpoints that extend the last one cosigned; refuse, and say why, any other.

    Speaks the C2SP tlog-witness protocol at POST /add-checkpoint, so `sagacity checkpoint
    --witness URL=PUB` (or any log speaking the protocol) can use it, and any standard witness can
    stand in for it. Run it where the journal's operators have no access: a witness they control
    witnesses nothing.
    """
    from sagacity.checkpoints import WitnessState, load_signing_key, load_verifier_key, make_server

    try:
        key = load_signing_key(key_path)
        trusted: dict[str, list[VerifierKey]] = {}
        for origin, pub in logs:
            trusted.setdefault(origin, []).append(load_verifier_key(pub))
        state = WitnessState(key, trusted, state_dir)
        server = make_server(state, host, port)
    except (SagacityError, OSError) as exc:
        raise CommandError(str(exc)) from exc
    bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
    console().print(
        f"witness {key.name} for {', '.join(sorted(trusted))} on http://{bound_host}:{bound_port}/add-checkpoint",
        markup=False,
        soft_wrap=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console(stderr=True).print("witness stopped")
    finally:
        server.server_close()
