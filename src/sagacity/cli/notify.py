"""``sagacity notify``: tell the right people at once, through the outbox (docs/notifications.md)."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from sagacity.cli._common import CommandError, db_option, open_sagacity
from sagacity.cli._options import echo_json, identity_option, json_option, resolve_identity


@click.group()
def notify() -> None:
    """Notifications from the journal: webhooks, email, Slack (docs/notifications.md)."""


@notify.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    metavar="FILE",
    envvar="SAGACITY_NOTIFY_CONFIG",
    help="The notifier's TOML file: channels, groups, routes (env SAGACITY_NOTIFY_CONFIG).",
)
@click.option("--once", is_flag=True, help="Run one round (derive, claim, send) and exit.")
@click.option("--name", default=None, help="This notifier's name in the outbox (default: host-pid-random).")
@db_option
def run(config_path: str, once: bool, name: str | None, db_url: str) -> None:
    """Run the notifier until stopped (SIGINT/SIGTERM): every event delivered, none twice."""
    from sagacity.errors import SagacityError
    from sagacity.notify import Notifier, load_notify_config

    try:
        config = load_notify_config(config_path)
    except SagacityError as exc:
        raise CommandError(str(exc)) from exc
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with open_sagacity(db_url) as sg:
        notifier = Notifier(sg, config, name=name)
        if once:
            with notifier:
                done = notifier.run_once()
            click.echo(
                f"claimed {done.claimed}: delivered {len(done.delivered)}, failed {len(done.failed)}, "
                f"dead {len(done.dead)}"
            )
            return
        click.echo(
            f"notifier {notifier.name} running on {sg.url} (poll {config.poll.total_seconds():g} s)", err=True
        )
        notifier.run(stop)


@notify.command()
@json_option
@db_option
def status(as_json: bool, db_url: str) -> None:
    """The outbox: its cursor, deliveries in flight, retries waiting, dead letters."""
    from sagacity.notify import outbox_status

    with open_sagacity(db_url) as sg:
        found = outbox_status(sg)
    if as_json:
        echo_json(found.to_json())
        return
    click.echo(
        f"outbox cursor {found.cursor}: {found.delivered} delivered, {len(found.in_flight)} in flight, "
        f"{len(found.retrying)} waiting to retry, {len(found.dead)} dead letters"
    )
    for title, rows in (("in flight", found.in_flight), ("retrying", found.retrying), ("dead", found.dead)):
        for delivery in rows:
            line: dict[str, Any] = delivery.to_json()
            when = f" at {line['retryAt']}" if line["retryAt"] else ""
            error = f": {line['error']}" if line["error"] else ""
            click.echo(
                f"  {title}{when}: {line['delivery']} ({line['type']} {line['sagaId'] or ''} -> "
                f"{line['target']}, attempt {line['attempt']}){error}"
            )


@notify.command()
@click.argument("deliveries", nargs=-1, metavar="[DELIVERY]...")
@click.option("--all", "every", is_flag=True, help="Every dead letter (instead of naming deliveries).")
@identity_option
@db_option
def requeue(deliveries: tuple[str, ...], every: bool, identity: str | None, db_url: str) -> None:
    """Send dead letters again once their cause is mended: each is due at the next round of any
    notifier, with max_attempts more attempts. DELIVERY is an id `notify status` lists."""
    from sagacity.errors import SagacityError
    from sagacity.notify import requeue_dead_letters

    if every == bool(deliveries):
        raise CommandError("name the dead letters to requeue, or pass --all (not both)")
    by = resolve_identity(identity)
    with open_sagacity(db_url) as sg:
        try:
            done = requeue_dead_letters(sg, None if every else list(deliveries), by=by)
        except SagacityError as exc:
            raise CommandError(str(exc)) from exc
    click.echo(f"requeued {len(done)} dead letter(s) as {by}")
    for delivery in done:
        click.echo(f"  {delivery.id} -> {delivery.target.key}")
