"""The gateway's policy file, re-read while the proxy runs: on SIGHUP, or when the file changes.

What is reloaded is the guardrails part (``[guardrails]`` and ``[[rules]]``): the rules a team
tunes on live traffic. The new text is validated whole, as at start (the gateway's own tables
too, and against the upstream's tools), then put in force at once and journaled on the
``sagacity:policy`` chain (its text and SHA-256, ``source=``, ``loaded_by=``) before any verdict
names it, exactly as the library journals a policy it loads.

A new text is *refused* when it does not parse, when it names undo tools the upstream lacks, or
when it changes the gateway's own tables (``[upstream]``, ``[sagas]``, ``[defaults]``,
``[tools.*]``): those define how running sagas are compensated and how the upstream is reached,
so they change with a restart, never under a saga in flight. A refused text is journaled
(``refused=<sha256>``, ``reason=``) and, as a policy file the library cannot use, denies every
call until a good text replaces it (fail closed): never half a policy, never the old one
silently.
"""

from __future__ import annotations

import asyncio
import logging
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from sagacity.errors import PolicyError
from sagacity.guardrails import GATEWAY_TABLES, Guard, Policy, file_stamp, read_policy_text
from sagacity.guardrails import parse_policy as parse_guardrails
from sagacity.mcp._policy import parse_gateway_policy

if TYPE_CHECKING:
    from sagacity import Sagacity

__all__ = ["PolicyReloader"]

log = logging.getLogger("sagacity.mcp")


def _gateway_tables(text: str) -> dict[str, Any]:
    """The gateway's own tables as written (what a reload may not change)."""
    data = tomllib.loads(text)
    return {name: data[name] for name in sorted(GATEWAY_TABLES) if name in data}


class PolicyReloader:
    """Re-reads one gateway's policy file and puts its guardrails in force, whole, or refuses it.

    It knows its owner only by callbacks: ``listed()``, the tool names the upstream lists now
    (a new text is checked against them), and ``in_force(rules)``, called once the guard of
    ``sagacity`` judges by the new guardrails, so the owner's own copy of the policy follows."""

    def __init__(
        self,
        path: Path,
        sagacity: Sagacity,
        listed: Callable[[], Sequence[str]],
        in_force: Callable[[Policy], None],
    ) -> None:
        self.path = path
        self.sagacity = sagacity
        self._listed = listed
        self._in_force = in_force
        self._text = read_policy_text(path)
        self._stamp = file_stamp(path)
        self._tables = _gateway_tables(self._text)
        self._lock = anyio.Lock()

    async def reload(self) -> str:
        """Read the file now; what came of it, in one line (also logged)."""
        async with self._lock:
            said = await asyncio.to_thread(self._reload)
        log.warning("policy %s: %s", self.path, said)
        return said

    async def watch(self, interval: float) -> None:
        """Reload whenever the file's modification time, size or inode change (checked every
        ``interval`` seconds)."""
        while True:
            await anyio.sleep(interval)
            try:
                changed = file_stamp(self.path) != self._stamp
            except OSError:
                changed = True  # gone or unreadable: the reload says so and refuses
            if changed:
                await self.reload()

    def _reload(self) -> str:
        try:
            stamp = file_stamp(self.path)
            text = read_policy_text(self.path)
            if file_stamp(self.path) != stamp:
                return "being written; read again at the next change or signal"  # never half a file
        except (OSError, PolicyError) as exc:
            self._guard().refuse(f"cannot read the policy {self.path}: {exc}", "")
            return f"refused (every call is denied until it is fixed): cannot read it: {exc}"
        self._stamp = stamp
        try:
            rules = self._check(text)
        except PolicyError as exc:
            self._guard().refuse(str(exc), text)
            self._text = text
            return f"refused (every call is denied until it is fixed): {exc}"
        self._guard().use(rules)
        self._in_force(rules)
        self._text = text
        return f"in force: {len(rules.rules)} rule(s), sha256 {rules.sha256}"

    def _check(self, text: str) -> Policy:
        """The new text's guardrails policy, or ``PolicyError`` saying why it cannot be used."""
        source = str(self.path)
        new = parse_gateway_policy(text, source=source)  # every table, as at start
        problems = new.problems_with(self._listed())
        if problems:
            raise PolicyError("; ".join(problems))
        if _gateway_tables(text) != self._tables:
            changed = sorted(
                name for name in GATEWAY_TABLES if _gateway_tables(text).get(name) != self._tables.get(name)
            )
            raise PolicyError(
                f"{source}: the gateway's own table(s) {', '.join(f'[{n}]' for n in changed)} changed; "
                "they apply at the proxy's next start (only [guardrails] and [[rules]] are reloaded)"
            )
        return parse_guardrails(text, source=source)

    def _guard(self) -> Guard:
        """The gateway's guard, made now (with the file's rules as they were) if it had none."""
        sg = self.sagacity
        guard = sg.guard
        return (
            guard if guard is not None else sg.use_policy(parse_guardrails(self._text, source=str(self.path)))
        )
