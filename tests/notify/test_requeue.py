"""Dead letters sent again once their cause is mended (``requeue_dead_letters``, ``sagacity notify
requeue``): due at the next round of any notifier with ``max_attempts`` more attempts, the person who
asked journaled, fenced so that two people requeueing one letter requeue it once."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import notify_tools
import pytest
from click.testing import CliRunner
from notify_receiver import SECRET, Receiver, hook_config, hook_text

from sagacity import Sagacity
from sagacity._payloads import payload_attribute
from sagacity.chain import utc_now
from sagacity.cli import main
from sagacity.errors import DeadLetterNotFoundError
from sagacity.notify import OUTBOX_SAGA, Notifier, NotifyConfig, outbox_status, requeue_dead_letters

WRONG = "whsec_" + "QUJD" * 8  # a secret the receiver does not know: every attempt is refused


def _rounds_until_settled(sg: Sagacity, config: NotifyConfig) -> list[str]:
    """Rounds (each past the last retry's time) until nothing is left to retry: the outcomes."""
    outcomes: list[str] = []
    with Notifier(sg, config) as notifier:
        start = utc_now()
        for n in range(30):
            done = notifier.run_once(start + timedelta(seconds=n))
            outcomes += ["failed"] * len(done.failed) + ["dead"] * len(done.dead)
            outcomes += ["delivered"] * len(done.delivered)
            status = outbox_status(sg)
            if not status.retrying and not status.in_flight and done.claimed == 0:
                break
    return outcomes


def _dead_letter(sg: Sagacity, receiver: Receiver, saga_id: str) -> str:
    """One approval request whose delivery ended a dead letter (two refused attempts); its id."""
    assert sg.run(saga_id, notify_tools.gated).status == "AWAITING_APPROVAL"
    assert _rounds_until_settled(sg, hook_config(receiver.url, "max_attempts = 2", secret=WRONG)) == [
        "failed",
        "dead",
    ]
    (dead,) = outbox_status(sg).dead
    return dead.id


def _requeued_rows(sg: Sagacity) -> list[str]:
    return [
        payload_attribute(e.payload, "by=") or ""
        for e in sg.entries(OUTBOX_SAGA)
        if payload_attribute(e.payload, "notify=") == "requeued"
    ]


def test_a_requeued_dead_letter_is_delivered_once_the_secret_is_mended(
    store_url: str, receiver: Receiver, stack: contextlib.ExitStack
) -> None:
    sg = stack.enter_context(Sagacity(store_url))
    did = _dead_letter(sg, receiver, "order-1")
    assert receiver.refused == 2
    (requeued,) = requeue_dead_letters(sg, [did], by="ops@example.com")
    assert requeued.id == did
    assert requeued.error == "requeued by ops@example.com"
    status = outbox_status(sg)
    assert status.dead == []
    assert [d.id for d in status.retrying] == [did]
    assert _rounds_until_settled(sg, hook_config(receiver.url, "max_attempts = 2")) == ["delivered"]
    assert list(receiver.taken) == [did.split(":")[0]]  # the event's id, delivered once
    assert outbox_status(sg).delivered == 1
    assert _requeued_rows(sg) == ["ops@example.com"]
    assert sg.verify(OUTBOX_SAGA).valid


def test_a_requeued_letter_that_fails_again_gets_max_attempts_more_then_is_dead_again(
    store_url: str, receiver: Receiver, stack: contextlib.ExitStack
) -> None:
    sg = stack.enter_context(Sagacity(store_url))
    did = _dead_letter(sg, receiver, "order-2")
    requeue_dead_letters(sg, by="ops@example.com")  # every dead letter: this one
    again = _rounds_until_settled(sg, hook_config(receiver.url, "max_attempts = 2", secret=WRONG))
    assert again == ["failed", "dead"]
    assert receiver.refused == 4
    (dead,) = outbox_status(sg).dead
    assert (dead.id, dead.attempt) == (did, 4)
    assert "HTTP 401" in dead.error


def test_what_is_not_a_dead_letter_is_refused_and_nothing_is_journaled(
    store_url: str, receiver: Receiver, stack: contextlib.ExitStack
) -> None:
    sg = stack.enter_context(Sagacity(store_url))
    did = _dead_letter(sg, receiver, "order-3")
    before = len(sg.entries(OUTBOX_SAGA))
    with pytest.raises(DeadLetterNotFoundError, match="no delivery 'nope' in the outbox"):
        requeue_dead_letters(sg, [did, "nope"], by="ops@example.com")
    requeue_dead_letters(sg, [did], by="ops@example.com")
    with pytest.raises(
        DeadLetterNotFoundError, match=r"is not a dead letter \(it is failed, requeued by ops@example\.com\)"
    ):
        requeue_dead_letters(sg, [did], by="bob@example.com")
    assert len(sg.entries(OUTBOX_SAGA)) == before + 1
    assert requeue_dead_letters(sg, by="bob@example.com") == []  # --all with none dead: nothing
    assert _requeued_rows(sg) == ["ops@example.com"]


_RACER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from sagacity import Sagacity
    from sagacity.errors import DeadLetterNotFoundError
    from sagacity.notify import requeue_dead_letters

    url, did, name, go = sys.argv[1:]
    with Sagacity(url) as sg:
        print("ready", flush=True)
        while not Path(go).exists():
            time.sleep(0.001)
        try:
            requeue_dead_letters(sg, [did], by=name)
        except DeadLetterNotFoundError as exc:
            print("refused", exc, flush=True)
        else:
            print("requeued", flush=True)
    """
)


@pytest.mark.parametrize("trial", range(3))
def test_two_people_requeueing_one_letter_in_two_processes_requeue_it_once(
    durable_url: str, receiver: Receiver, tmp_path: Path, trial: int
) -> None:
    with Sagacity(durable_url) as sg:
        did = _dead_letter(sg, receiver, f"order-race-{trial}")
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, durable_url, did, name, str(go)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ},
        )
        for name in ("ann@example.com", "bob@example.com")
    ]
    for racer in racers:
        assert racer.stdout is not None
        assert racer.stdout.readline().strip() == "ready"
    go.touch()
    said = sorted(racer.communicate(timeout=60)[0].split()[0] for racer in racers)
    assert [racer.returncode for racer in racers] == [0, 0]
    assert said == ["refused", "requeued"]
    with Sagacity(durable_url) as sg:
        (who,) = _requeued_rows(sg)
        assert who in {"ann@example.com", "bob@example.com"}
        assert [d.id for d in outbox_status(sg).retrying] == [did]
        assert sg.verify(OUTBOX_SAGA).valid


def test_the_command_line_requeues_by_name_or_all_and_refuses_nonsense(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path / 'journal.db'}"
    with Sagacity(db) as sg:
        did = _dead_letter(sg, receiver, "order-cli")
    runner = CliRunner()
    neither = runner.invoke(main, ["notify", "requeue", "--db", db, "--as", "ops"])
    assert neither.exit_code == 2
    assert "name the dead letters to requeue, or pass --all" in neither.output
    unknown = runner.invoke(main, ["notify", "requeue", "nope", "--db", db, "--as", "ops"])
    assert unknown.exit_code == 2
    assert "no delivery 'nope' in the outbox; nothing was requeued" in unknown.output
    done = runner.invoke(main, ["notify", "requeue", "--all", "--db", db, "--as", "ops@example.com"])
    assert done.exit_code == 0, done.output
    assert "requeued 1 dead letter(s) as ops@example.com" in done.output
    assert did in done.output
    (tmp_path / "notify.toml").write_text(hook_text(receiver.url), encoding="utf-8")
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    ran = runner.invoke(
        main, ["notify", "run", "--once", "--config", str(tmp_path / "notify.toml"), "--db", db]
    )
    assert ran.exit_code == 0, ran.output
    assert "delivered 1" in ran.output
    with Sagacity(db) as sg:
        assert outbox_status(sg).dead == []
        assert _requeued_rows(sg) == ["ops@example.com"]
