"""Each event kind read off the journal, routing by tool, amount, team, prefix and rule, escalation
to the next group, and a file with a mistake refused with its line."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import notify_tools
import pytest
from notify_receiver import SECRET, Receiver, hook_config

from sagacity import Sagacity
from sagacity.chain import utc_now
from sagacity.errors import ConfigurationError
from sagacity.notify import Notifier, parse_notify_config


def _config(url: str, routes: str, notifier: str = "") -> str:
    return f"""
[notifier]
{notifier}
[teams]
"bob@example.com" = "payments"
[channels.hook]
type = "webhook"
url = "{url}"
secret = "${{HOOK_SECRET}}"
[channels.mail]
type = "email"
host = "127.0.0.1"
from = "sagacity@example.com"
[groups]
ops = ["hook"]
nobody = ["mail:nobody@example.com"]
{routes}
"""


def test_reminder_escalation_and_expiry(receiver: Receiver, stack: contextlib.ExitStack) -> None:
    """A request is told once, reminded before it expires, escalated once nobody decided for the
    step's delay, and told expired when its time is past: each once, whatever the rounds."""
    sg = stack.enter_context(Sagacity("memory://", approval_ttl=3600))
    sg.run("order-1", notify_tools.gated)
    routes = '[[routes]]\nnotify = ["nobody"]\nescalate = [{ after = "30m", notify = ["ops"] }]\n'
    told = '["approval.requested", "approval.reminder", "approval.expired"]'
    routes += f'[[routes]]\nevents = {told}\nnotify = ["ops"]\n'
    config = parse_notify_config(
        _config(receiver.url, routes, 'remind_before = "10m"'), environ={"HOOK_SECRET": SECRET}
    )
    start = utc_now()
    with Notifier(sg, config, sender=None) as notifier:
        for minutes in (0, 1, 31, 32, 51, 52, 61, 62):
            notifier.run_once(start + timedelta(minutes=minutes))
    assert receiver.types() == [
        "approval.escalated",
        "approval.expired",
        "approval.reminder",
        "approval.requested",
    ]
    assert sorted(set(receiver.requests)) == sorted(receiver.requests)  # none twice


def _gate_then_fail(scope: Any, notifier: Notifier) -> None:
    with scope:
        notify_tools.pay_out("10", "acme")
        notifier.run_once()  # the request is told while the saga still runs
        raise ValueError("the agent changed its mind")


def test_voided_switch_and_failed_compensation(receiver: Receiver, stack: contextlib.ExitStack) -> None:
    """A request told of and then voided by its saga's compensation, a kill-switch change, and a
    compensation that failed each reach the receiver."""
    sg = stack.enter_context(Sagacity("memory://"))
    config = hook_config(receiver.url)
    with Notifier(sg, config) as notifier:
        scope = sg.saga("order-2")
        with pytest.raises(ValueError, match="changed its mind"):
            _gate_then_fail(scope, notifier)
        sg.run("order-3", notify_tools.reserve_then_fail)
        sg.kill_switch.set("halt", by="ops@example.com", tool="pay_out", reason="bank incident")
        notifier.run_once(utc_now() + timedelta(minutes=1))  # past the doctor's scan interval
    assert receiver.types() == [
        "approval.requested",
        "approval.voided",
        "compensation.failed",
        "switch.changed",
    ]
    switch = next(b for b in receiver.taken.values() if b["type"] == "switch.changed")
    assert switch["data"]["by"] == "ops@example.com"
    assert switch["data"]["state"] == "halt"


def test_call_in_doubt(
    durable_url: str, receiver: Receiver, live_worker, stack: contextlib.ExitStack
) -> None:
    """A process killed with SIGKILL in the middle of a call leaves it in doubt: the notifier
    tells of it (the call's tool and input) once its process is gone."""
    child = live_worker(durable_url, "crashed-1", in_flight=True)
    child.kill()
    child.wait(timeout=30)
    sg = stack.enter_context(Sagacity(durable_url))
    config = hook_config(receiver.url, 'in_doubt_after = "0.001s"')
    with Notifier(sg, config) as notifier:
        notifier.run_once()
    (body,) = [b for b in receiver.taken.values() if b["type"] == "call.in_doubt"]
    assert body["sagaId"] == "crashed-1"
    assert body["data"]["tool"]


@pytest.mark.parametrize(
    ("route", "told"),
    [
        ('tools = ["pay_out"]', True),
        ('tools = ["refund"]', False),
        ('min_amount = "1000"', True),
        ('min_amount = "10000"', False),
        ("max_amount = 5000", True),
        ('teams = ["payments"]', True),
        ('teams = ["support"]', False),
        ('prefix = "order-"', True),
        ('prefix = "trip-"', False),
        ('rules = ["big-payouts"]', False),
    ],
)
def test_routing(receiver: Receiver, stack: contextlib.ExitStack, route: str, told: bool) -> None:
    """A route's conditions decide who hears of a request: tool, amount (from the payload's
    ``amount``), the requester's team, the saga id's prefix, the policy rule that held it."""
    sg = stack.enter_context(Sagacity("memory://", principal="bob@example.com"))
    sg.run("order-9", notify_tools.gated, "5000")
    config = parse_notify_config(
        _config(receiver.url, f'[[routes]]\n{route}\nnotify = ["ops"]\n'), environ={"HOOK_SECRET": SECRET}
    )
    with Notifier(sg, config) as notifier:
        notifier.run_once()
    assert receiver.types() == (["approval.requested"] if told else [])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ('secret = "${HOOK_SECRET}"', None),
        ('secret = "whsec_literal"', "line 9: channels.hook.secret must be an environment reference"),
        ('secret = "${MISSING}"', "uses ${MISSING}, which is not set"),
        ('secret = "${HOOK_SECRET}"\nretries = 3', "line 10: unknown key 'channels.hook.retries'"),
    ],
)
def test_config_errors_name_the_line(change: str, message: str | None) -> None:
    """A secret written into the file, an unset variable, a typo: refused at start, with the line."""
    text = _config("http://127.0.0.1:1/hook", '[[routes]]\nnotify = ["ops"]\n').replace(
        'secret = "${HOOK_SECRET}"', change
    )
    if message is None:
        parse_notify_config(text, environ={"HOOK_SECRET": SECRET})
        return
    with pytest.raises(
        ConfigurationError, match=message.replace("$", r"\$").replace("{", r"\{").replace("}", r"\}")
    ):
        parse_notify_config(text, environ={"HOOK_SECRET": SECRET})


_FORGE = "UPDATE side_effect_journal SET payload = 'sent 0' WHERE saga_id = 'forged-1' AND seq = 3"


def test_abandoned_saga_and_broken_chain(
    durable_url: str,
    receiver: Receiver,
    behind_the_library: Callable[[str, str], int],
    lease_gone: Callable[[Sagacity, str], None],
    live_worker: Callable[..., subprocess.Popen[str]],
    stack: contextlib.ExitStack,
) -> None:
    """A saga whose process was killed between calls (SIGKILL), and a saga whose journal someone
    edited behind the library, are each told once (the doctor's findings, read by the scan)."""
    child = live_worker(durable_url, "left-1")
    child.kill()
    child.wait(timeout=30)
    sg = stack.enter_context(Sagacity(durable_url))
    lease_gone(sg, "left-1")
    assert sg.run("forged-1", notify_tools.reserve, "B").status == "COMPLETED"
    assert behind_the_library(durable_url, _FORGE) == 1
    if durable_url.startswith("sqlite:"):
        assert not sg.verify("forged-1").valid  # SQLite's index learns of an edit from a verification
    config = hook_config(receiver.url, 'in_doubt_after = "0.001s"')
    with Notifier(sg, config) as notifier:
        notifier.run_once()
        notifier.run_once(utc_now() + timedelta(hours=1))  # a later scan tells nothing twice
    told = sorted(
        (b["type"], b["sagaId"]) for b in receiver.taken.values() if b["type"] != "approval.requested"
    )
    assert told == [("chain.broken", "forged-1"), ("saga.abandoned", "left-1")]
    assert receiver.dropped == []
