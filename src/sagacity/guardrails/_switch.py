"""The kill switch: halt or drain, for every agent, one agent or one tool, journaled with who.

Its settings are a chain of their own, the saga ``sagacity:switch``: each change is an entry
(tool ``saga``, phase EXECUTED) whose input says what was set, for whom and until when::

    {"state":"halt"|"drain"|"lift","scope":"global"|"agent"|"tool","target":<name or null>,
     "until":"<UTC ISO time>" or null}

and whose payload says who set it and why (``by=<identity>``, ``reason=<one line>``). The
latest entry for a scope and target is in force until its ``until``. What each state does:

* ``halt``: no saga starts (global, or for that agent); in running sagas the next call is refused
  and the saga compensates; resumes are refused. For one tool: its calls are refused and the saga
  compensates.
* ``drain``: no saga starts (global, or for that agent); running sagas go on and finish. For one
  tool: its calls are denied (the model is told; nothing compensates).
* ``lift``: back to normal.

A process re-reads the switch's tail at most every ``poll`` seconds (the ``Sagacity``'s
``switch_poll``), one indexed read; a change is seen at once by the process that made it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sagacity._journal import Journal
from sagacity._payloads import SAGA_TOOL, decision_payload, parse_decision_payload
from sagacity.chain import utc_now
from sagacity.checks import require_identity
from sagacity.errors import InvalidValueError
from sagacity.model import Entry, Phase

__all__ = ["SWITCH_SAGA", "KillSwitch", "Setting", "SwitchState"]

SWITCH_SAGA = "sagacity:switch"
#: The longest time-to-live a setting takes (longer: set it without one).
_MAX_TTL = timedelta(days=3650)


class SwitchState(StrEnum):
    HALT = "halt"
    DRAIN = "drain"
    LIFT = "lift"


@dataclass(frozen=True, slots=True)
class Setting:
    """One switch change as journaled."""

    state: SwitchState
    scope: str  # "global", "agent" or "tool"
    target: str | None
    until: datetime | None
    by: str
    reason: str
    seq: int
    at: datetime

    def in_force(self, now: datetime) -> bool:
        return self.state is not SwitchState.LIFT and (self.until is None or now < self.until)

    def describe(self) -> str:
        whom = "every agent" if self.scope == "global" else f"{self.scope} {self.target}"
        until = f" until {self.until.isoformat()}Z" if self.until is not None else ""
        why = f": {self.reason}" if self.reason else ""
        return f"the kill switch is set to {self.state} for {whom} by {self.by}{until}{why}"


def _setting(entry: Entry) -> Setting | None:
    try:
        data = json.loads(entry.input)
        state = SwitchState(data["state"])
        until = datetime.fromisoformat(data["until"].removesuffix("Z")) if data.get("until") else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    by, reason = parse_decision_payload(entry.payload)
    return Setting(
        state, str(data.get("scope")), data.get("target"), until, by, reason, entry.seq, entry.timestamp
    )


def _until(ttl: timedelta | float | None) -> str | None:
    """When a setting with ``ttl`` lifts by itself (UTC ISO text), or None."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float | timedelta):
        raise InvalidValueError(f"ttl must be seconds or a timedelta, got {ttl!r}")
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if not 0 < seconds <= _MAX_TTL.total_seconds():  # also refuses NaN
        raise InvalidValueError(f"ttl must be positive and at most {_MAX_TTL.days} days, got {ttl}")
    return (utc_now() + timedelta(seconds=seconds)).isoformat() + "Z"


class KillSwitch:
    """The switch as this process sees it, re-read at most every ``poll`` seconds."""

    def __init__(self, journal: Journal, poll: float = 1.0) -> None:
        self.journal = journal
        self.poll = poll
        self._lock = threading.Lock()
        self._seq = 0
        self._latest: dict[tuple[str, str | None], Setting] = {}
        self._read_at = float("-inf")

    # -- changing it ------------------------------------------------------------------------------
    def set(
        self,
        state: SwitchState | str,
        *,
        by: str,
        tool: str | None = None,
        agent: str | None = None,
        ttl: timedelta | float | None = None,
        reason: str = "",
    ) -> Setting:
        """Journal a change of the switch (who did it, and why) and see it at once here."""
        state = SwitchState(state)
        by = require_identity(by)
        if tool is not None and agent is not None:
            raise InvalidValueError("the kill switch takes a tool or an agent, not both")
        scope, target = (
            ("tool", tool)
            if tool is not None
            else ("agent", agent)
            if agent is not None
            else ("global", None)
        )
        if target is not None and not target:
            raise InvalidValueError(f"the kill switch's {scope} must not be empty")
        until = _until(ttl)
        body = {"state": str(state), "scope": scope, "target": target, "until": until}
        entry = self.journal.append(
            SWITCH_SAGA,
            SAGA_TOOL,
            Phase.EXECUTED,
            json.dumps(body, separators=(",", ":")),
            decision_payload(by, reason),
        )
        self.refresh(force=True)
        setting = _setting(entry)
        assert setting is not None
        return setting

    # -- reading it ---------------------------------------------------------------------------------
    def refresh(self, *, force: bool = False) -> None:
        """Read what was appended since the last read (at most every ``poll`` seconds)."""
        now = time.monotonic()
        if not force and now - self._read_at < self.poll:
            return
        with self._lock:
            tail = self.journal.read(self.journal.store.tail, SWITCH_SAGA)
            if tail is not None and tail.seq != self._seq:
                for entry in self.journal.entries_after(SWITCH_SAGA, self._seq):
                    setting = _setting(entry)
                    if setting is not None:
                        self._latest[(setting.scope, setting.target)] = setting
                    self._seq = entry.seq
            self._read_at = now

    def in_force(self, now: datetime | None = None) -> list[Setting]:
        """The settings in force now (freshly read)."""
        self.refresh(force=True)
        now = now or utc_now()
        return [s for s in self._latest.values() if s.in_force(now)]

    def history(self) -> list[Setting]:
        """Every change ever journaled, oldest first."""
        found = (_setting(e) for e in self.journal.iter_entries(SWITCH_SAGA))
        return [s for s in found if s is not None]

    def _active(self, scope: str, target: str | None, now: datetime) -> Setting | None:
        setting = self._latest.get((scope, target))
        return setting if setting is not None and setting.in_force(now) else None

    def refusing_start(self, agent: str | None) -> Setting | None:
        """The setting (halt or drain, global or for ``agent``) that refuses a new saga, if any."""
        self.refresh()
        if not self._latest:
            return None
        now = utc_now()
        return self._active("global", None, now) or (self._active("agent", agent, now) if agent else None)

    def refusing_call(self, tool: str, agent: str | None) -> Setting | None:
        """The setting that refuses a call of ``tool`` in a running saga: a halt (global, for the
        agent, for the tool) or a drain of the tool."""
        self.refresh()
        if not self._latest:
            return None
        now = utc_now()
        for scope, target in (("global", None), ("agent", agent), ("tool", tool)):
            if target is None and scope != "global":
                continue
            setting = self._active(scope, target, now)
            if setting is not None and (setting.state is SwitchState.HALT or scope == "tool"):
                return setting
        return None
