"""The proxy's policy file (TOML): what each upstream tool is, how to undo it, how to reach the upstream.

Parsing is strict and fails at start-up, naming the line: a syntax error (TOML's own message
carries the line), an unknown key (a typo must not silently drop an undo), a wrong type, a
malformed undo template, or an environment variable the policy names that is not set. See
docs/mcp.md for the format.

Upstream tool annotations are defaults only, and they fail closed: a tool the policy does not
mention is passed through only if the upstream says ``readOnlyHint: true``; anything else waits
for a human (IRREVERSIBLE), because a tool with no declared undo cannot be compensated.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

from sagacity.checks import LineIndex, duration_seconds, kind_of, read_config_text, toml_document
from sagacity.errors import PolicyError
from sagacity.guardrails import Policy as GuardrailsPolicy
from sagacity.guardrails import parse_policy as parse_guardrails
from sagacity.mcp._template import Template, TemplateError, compile_template

__all__ = [
    "Decision",
    "GatewayPolicy",
    "PolicyError",
    "ReconcilePolicy",
    "RetryPolicy",
    "SagaPolicy",
    "ToolKind",
    "ToolPolicy",
    "UndoPolicy",
    "UpstreamPolicy",
    "load_gateway_policy",
    "parse_gateway_policy",
]


class ToolKind(StrEnum):
    """What the proxy does with a call to an upstream tool."""

    READ_ONLY = "read-only"  # journaled and passed through; nothing to undo
    COMPENSATABLE = "compensatable"  # journaled; undone through the upstream's undo tool on failure
    IRREVERSIBLE = "irreversible"  # held until enough named humans approve these exact arguments
    HIDDEN = "hidden"  # not listed to the agent and refused; still usable as an undo tool


#: What ``retry.on`` may name. Timeouts and lost connections are never retried: the upstream may
#: have acted, so the call is in doubt and a human decides.
RETRY_ON = ("unavailable", "error")
ERRORS = ("fail", "result")
ON_SESSION_CLOSE = ("keep", "compensate")
SESSIONLESS = ("refuse", "per-call")
PROTOCOLS = ("auto", "legacy", "2026-07-28")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of one call (one INTENT, one final outcome): ``on`` ``unavailable`` (the upstream
    could not be reached, so nothing was sent) and/or ``error`` (it answered isError)."""

    attempts: int = 1
    backoff: float = 0.2
    max_backoff: float = 10.0
    on: frozenset[str] = frozenset({"unavailable"})


@dataclass(frozen=True, slots=True)
class ReconcilePolicy:
    """The upstream read tool that looks a call (or its undo) up after a crash, the template of
    its arguments, and ``missing``: text of its error answer that means "no such effect"."""

    tool: str
    arguments: Template
    missing: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class UndoPolicy:
    """The upstream tool that undoes a call, the template of its arguments, and the read tool
    that looks the undo up (``reconcile``)."""

    tool: str
    arguments: Template
    line: int | None = None
    reconcile: ReconcilePolicy | None = None


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """One ``[tools.NAME]`` table (or ``[defaults]``): ``None`` means not set here."""

    name: str
    kind: ToolKind | None = None
    undo: UndoPolicy | None = None
    reconcile: ReconcilePolicy | None = None
    retry: RetryPolicy | None = None
    approvals: int | None = None
    approval_ttl: timedelta | None = None
    approval_ttl_set: bool = False
    timeout: float | None = None
    errors: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class UpstreamPolicy:
    """How to reach the upstream MCP server (the command line's ``--`` / ``--upstream-url`` win)."""

    command: tuple[str, ...] = ()
    url: str | None = None
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 30.0
    connect_timeout: float = 15.0
    protocol: str = "auto"


@dataclass(frozen=True, slots=True)
class SagaPolicy:
    """Saga boundaries: see docs/mcp.md."""

    on_session_close: str = "keep"
    sessionless: str = "refuse"
    id_prefix: str = "mcp"


@dataclass(frozen=True, slots=True)
class Decision:
    """What the proxy does with one upstream tool, every default applied, and why."""

    name: str
    kind: ToolKind
    why: str
    undo: UndoPolicy | None
    retry: RetryPolicy
    approvals: int
    reconcile: ReconcilePolicy | None
    approval_ttl: timedelta | None
    approval_ttl_set: bool
    timeout: float
    errors: str


@dataclass(frozen=True, slots=True)
class GatewayPolicy:
    """A parsed policy file."""

    source: str
    upstream: UpstreamPolicy = field(default_factory=UpstreamPolicy)
    sagas: SagaPolicy = field(default_factory=SagaPolicy)
    defaults: ToolPolicy = field(default_factory=lambda: ToolPolicy("*"))
    tools: Mapping[str, ToolPolicy] = field(default_factory=dict)
    #: The file's ``[guardrails]`` and ``[[rules]]``: the guardrails policy every call through
    #: the gateway is judged by (docs/policies.md); None when the file has no rules.
    guardrails: GuardrailsPolicy | None = None

    def decide(self, name: str, *, read_only_hint: bool | None = None) -> Decision:
        """The effective decision for upstream tool ``name`` (its ``readOnlyHint`` annotation, if any)."""
        entry = self.tools.get(name)
        kind = entry.kind if entry is not None else None
        if kind is None and entry is not None and entry.undo is not None:
            kind = ToolKind.COMPENSATABLE
        if kind is not None:
            assert entry is not None
            why = f"{self.source} line {entry.line}" if entry.line else self.source
        elif read_only_hint is True:
            kind, why = ToolKind.READ_ONLY, "the upstream's readOnlyHint (not in the policy)"
        else:
            kind = ToolKind.IRREVERSIBLE
            why = "not read-only and no undo declared: held for approval (fail closed)"
        d = self.defaults

        def pick(attr: str, fallback: Any) -> Any:
            for source in (entry, d):
                value = getattr(source, attr) if source is not None else None
                if value is not None:
                    return value
            return fallback

        ttl_source = entry if entry is not None and entry.approval_ttl_set else d
        return Decision(
            name=name,
            kind=kind,
            why=why,
            undo=entry.undo if entry is not None else None,
            retry=pick("retry", RetryPolicy()),
            approvals=pick("approvals", 1),
            reconcile=entry.reconcile if entry is not None else None,
            approval_ttl=ttl_source.approval_ttl,
            approval_ttl_set=ttl_source.approval_ttl_set,
            timeout=pick("timeout", self.upstream.timeout),
            errors=pick("errors", "result" if kind is ToolKind.READ_ONLY else "fail"),
        )

    def problems_with(self, listed: Sequence[str]) -> list[str]:
        """What is wrong with this policy for an upstream that lists ``listed``, each with its line:
        a ``[tools.X]`` table for a tool it does not have (a typo: ``hidden`` on a misspelt name
        would leave the real tool exposed, an undo on one would leave it held), and undo tools it
        does not have."""
        have = set(listed)
        problems = []
        for entry in self.tools.values():
            if entry.name not in have:
                where = f"{self.source} line {entry.line}: " if entry.line else f"{self.source}: "
                near = difflib.get_close_matches(entry.name, sorted(have), n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                problems.append(f"{where}[tools.{entry.name}] names a tool the upstream does not list{hint}")
            if entry.undo is not None and entry.undo.tool not in have:
                where = f"{self.source} line {entry.undo.line}: " if entry.undo.line else f"{self.source}: "
                undo = entry.undo.tool
                problems.append(
                    f"{where}{entry.name!r} is undone by {undo!r}, which the upstream does not list"
                )
            lookups = [entry.reconcile, entry.undo.reconcile if entry.undo is not None else None]
            for lookup in (r for r in lookups if r is not None and r.tool not in have):
                where = f"{self.source} line {lookup.line}: " if lookup.line else f"{self.source}: "
                problems.append(
                    f"{where}{entry.name!r} is looked up by {lookup.tool!r}, which the upstream does not list"
                )
        return problems


def load_gateway_policy(path: str | Path, environ: Mapping[str, str] | None = None) -> GatewayPolicy:
    """Read and validate the policy file at ``path``; ``PolicyError`` names the line of a problem."""
    text = read_config_text(path, "the policy", PolicyError)
    return parse_gateway_policy(text, source=str(path), environ=environ)


def parse_gateway_policy(
    text: str, *, source: str = "policy", environ: Mapping[str, str] | None = None
) -> GatewayPolicy:
    """Parse and validate a policy from TOML text."""
    data = toml_document(text, source, PolicyError)
    policy = _Parser(source, LineIndex(text), os.environ if environ is None else environ).policy(data)
    if "rules" in data or "guardrails" in data:
        policy = replace(policy, guardrails=parse_guardrails(text, source=source))
    return policy


# -- the parser ----------------------------------------------------------------------------------
_TOP = {"upstream", "sagas", "defaults", "tools", "guardrails", "rules"}
_UPSTREAM = {
    "command",
    "url",
    "cwd",
    "env",
    "inherit_env",
    "headers",
    "timeout",
    "connect_timeout",
    "protocol",
}
_SAGAS = {"on_session_close", "sessionless", "id_prefix"}
_TOOL = {"kind", "undo", "reconcile", "retry", "approvals", "approval_ttl", "timeout", "errors"}
_DEFAULTS = _TOOL - {"kind", "undo", "reconcile"}
_UNDO = {"tool", "arguments", "reconcile"}
_RECONCILE = {"tool", "arguments", "missing"}
_RETRY = {"attempts", "backoff", "max_backoff", "on"}
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SAGA_PREFIX = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


class _Parser:
    def __init__(self, source: str, index: LineIndex, environ: Mapping[str, str]) -> None:
        self.source = source
        self.index = index
        self.environ = environ

    def fail(self, path: tuple[str, ...], message: str) -> PolicyError:
        line = self.index.line(path)
        where = f"{self.source} line {line}" if line is not None else self.source
        return PolicyError(f"{where}: {message}")

    def table(self, value: Any, path: tuple[str, ...], allowed: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"[{'.'.join(path)}] must be a table")
        for key in value:
            if key not in allowed:
                known = ", ".join(sorted(allowed))
                raise self.fail((*path, key), f"unknown key {'.'.join((*path, key))!r} (known here: {known})")
        return value

    def policy(self, data: dict[str, Any]) -> GatewayPolicy:
        self.table(data, (), _TOP)
        upstream = self.upstream(data.get("upstream", {}))
        sagas = self.sagas(data.get("sagas", {}))
        defaults = self.tool(
            "*", self.table(data.get("defaults", {}), ("defaults",), _DEFAULTS), ("defaults",)
        )
        tools_table = data.get("tools", {})
        if not isinstance(tools_table, dict):
            raise self.fail(("tools",), "tools must be a table of [tools.NAME] tables")
        tools = {}
        for name, body in tools_table.items():
            path = ("tools", name)
            tools[name] = self.tool(name, self.table(body, path, _TOOL), path)
        return GatewayPolicy(self.source, upstream, sagas, defaults, tools)

    # -- scalars -----------------------------------------------------------------------------------
    def string(self, value: Any, path: tuple[str, ...], *, expand: bool = False) -> str:
        if not isinstance(value, str):
            raise self.fail(
                path, f"{'.'.join(path)} must be a string, not {kind_of(value, mapping='a table')}"
            )
        return self.expand(value, path) if expand else value

    def choice(self, value: Any, path: tuple[str, ...], allowed: Sequence[str]) -> str:
        text = self.string(value, path)
        if text not in allowed:
            raise self.fail(
                path, f"{'.'.join(path)} must be one of {', '.join(map(repr, allowed))}, not {text!r}"
            )
        return text

    def number(
        self, value: Any, path: tuple[str, ...], *, minimum: float = 0.0, integer: bool = False
    ) -> float:
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            wanted = "an integer" if integer else "a number"
            raise self.fail(
                path, f"{'.'.join(path)} must be {wanted}, not {kind_of(value, mapping='a table')}"
            )
        if value < minimum or math.isnan(value):
            raise self.fail(path, f"{'.'.join(path)} must be at least {minimum:g}, not {value}")
        return float(value)

    def duration(self, value: Any, path: tuple[str, ...]) -> timedelta | None:
        if value is False or value == "never":
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return timedelta(seconds=self.number(value, path))
        seconds = duration_seconds(value) if isinstance(value, str) else None
        if seconds is None:
            raise self.fail(
                path, f'{".".join(path)} must be seconds, a duration like "30m", "2h", "1d", or "never"'
            )
        return timedelta(seconds=seconds)

    def expand(self, text: str, path: tuple[str, ...]) -> str:
        """``${NAME}`` from the proxy's environment; ``$${`` is a literal ``${``."""
        pieces = text.split("$${")
        out = []
        for piece in pieces:

            def sub(match: re.Match[str]) -> str:
                name = match.group(1)
                if name not in self.environ:
                    raise self.fail(
                        path, f"{'.'.join(path)} uses ${{{name}}}, which is not set in the environment"
                    )
                return self.environ[name]

            out.append(_ENV_REF.sub(sub, piece))
        return "${".join(out)

    def string_map(self, value: Any, path: tuple[str, ...]) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.fail(path, f"{'.'.join(path)} must be a table of strings")
        return {str(k): self.string(v, (*path, k), expand=True) for k, v in value.items()}

    # -- tables --------------------------------------------------------------------------------------
    def upstream(self, value: Any) -> UpstreamPolicy:
        path = ("upstream",)
        body = self.table(value, path, _UPSTREAM)
        command: tuple[str, ...] = ()
        if "command" in body:
            raw = body["command"]
            if isinstance(raw, str):
                raw = [raw]
            if not isinstance(raw, list) or not raw or not all(isinstance(a, str) for a in raw):
                raise self.fail(
                    (*path, "command"),
                    'upstream.command must be an array of strings, e.g. ["npx", "server"]',
                )
            command = tuple(self.expand(a, (*path, "command")) for a in raw)
        url = self.string(body["url"], (*path, "url"), expand=True) if "url" in body else None
        if command and url:
            raise self.fail((*path, "url"), "upstream has both command and url; give one")
        if url is not None and not url.startswith(("http://", "https://")):
            raise self.fail((*path, "url"), f"upstream.url must be an http:// or https:// URL, not {url!r}")
        env = self.string_map(body.get("env", {}), (*path, "env"))
        inherit = body.get("inherit_env", [])
        if not isinstance(inherit, list) or not all(isinstance(n, str) for n in inherit):
            raise self.fail((*path, "inherit_env"), "upstream.inherit_env must be an array of variable names")
        for name in inherit:
            if name not in self.environ:
                raise self.fail(
                    (*path, "inherit_env"), f"upstream.inherit_env names {name}, which is not set"
                )
            env.setdefault(name, self.environ[name])
        return UpstreamPolicy(
            command=command,
            url=url,
            cwd=self.string(body["cwd"], (*path, "cwd"), expand=True) if "cwd" in body else None,
            env=env,
            headers=self.string_map(body.get("headers", {}), (*path, "headers")),
            timeout=self.number(body.get("timeout", 30), (*path, "timeout"), minimum=0.001),
            connect_timeout=self.number(
                body.get("connect_timeout", 15), (*path, "connect_timeout"), minimum=0.001
            ),
            protocol=self.choice(body.get("protocol", "auto"), (*path, "protocol"), PROTOCOLS),
        )

    def sagas(self, value: Any) -> SagaPolicy:
        path = ("sagas",)
        body = self.table(value, path, _SAGAS)
        prefix = self.string(body.get("id_prefix", "mcp"), (*path, "id_prefix"))
        if not _SAGA_PREFIX.match(prefix):
            raise self.fail((*path, "id_prefix"), "sagas.id_prefix must be 1-64 letters, digits or _.:-")
        return SagaPolicy(
            on_session_close=self.choice(
                body.get("on_session_close", "keep"), (*path, "on_session_close"), ON_SESSION_CLOSE
            ),
            sessionless=self.choice(body.get("sessionless", "refuse"), (*path, "sessionless"), SESSIONLESS),
            id_prefix=prefix,
        )

    def tool(self, name: str, body: dict[str, Any], path: tuple[str, ...]) -> ToolPolicy:
        kind = None
        if "kind" in body:
            kind = ToolKind(self.choice(body["kind"], (*path, "kind"), [k.value for k in ToolKind]))
        undo = self.undo(body["undo"], (*path, "undo")) if "undo" in body else None
        if undo is not None and kind not in (None, ToolKind.COMPENSATABLE):
            raise self.fail((*path, "undo"), f"{name!r} is {kind}: only a compensatable tool has an undo")
        if kind is ToolKind.COMPENSATABLE and undo is None:
            raise self.fail(
                (*path, "kind"),
                f"{name!r} is compensatable but has no undo = {{ tool = ..., arguments = {{...}} }}",
            )
        approvals = None
        if "approvals" in body:
            approvals = int(self.number(body["approvals"], (*path, "approvals"), minimum=1, integer=True))
            if (kind not in (None, ToolKind.IRREVERSIBLE) or undo is not None) and name != "*":
                raise self.fail(
                    (*path, "approvals"),
                    f"{name!r} is {kind or 'compensatable'}: approvals apply to irreversible tools",
                )
        return ToolPolicy(
            name=name,
            kind=kind,
            undo=undo,
            reconcile=self.reconcile(body["reconcile"], (*path, "reconcile"))
            if "reconcile" in body
            else None,
            retry=self.retry(body["retry"], (*path, "retry")) if "retry" in body else None,
            approvals=approvals,
            approval_ttl=self.ttl(name, body["approval_ttl"], (*path, "approval_ttl"))
            if "approval_ttl" in body
            else None,
            approval_ttl_set="approval_ttl" in body,
            timeout=self.number(body["timeout"], (*path, "timeout"), minimum=0.001)
            if "timeout" in body
            else None,
            errors=self.choice(body["errors"], (*path, "errors"), ERRORS) if "errors" in body else None,
            line=self.index.line(path),
        )

    def ttl(self, name: str, value: Any, path: tuple[str, ...]) -> timedelta | None:
        ttl = self.duration(value, path)
        if ttl is None and name != "*":
            raise self.fail(path, 'approval_ttl = "never" is for [defaults]; a tool takes a duration')
        return ttl

    def undo(self, value: Any, path: tuple[str, ...]) -> UndoPolicy:
        body = self.table(value, path, _UNDO)
        if "tool" not in body:
            raise self.fail(path, f'{".".join(path)} needs tool = "<the upstream tool that undoes it>"')
        return UndoPolicy(
            self.string(body["tool"], (*path, "tool")),
            self.arguments(body, path),
            self.index.line(path),
            self.reconcile(body["reconcile"], (*path, "reconcile")) if "reconcile" in body else None,
        )

    def arguments(self, body: dict[str, Any], path: tuple[str, ...]) -> Template:
        """The ``arguments`` template of an undo or a look-up (none: no arguments)."""
        arguments = body.get("arguments", {})
        if not isinstance(arguments, dict):
            raise self.fail((*path, "arguments"), f"{'.'.join(path)}.arguments must be a table")
        try:
            return compile_template(arguments)
        except TemplateError as exc:
            raise self.fail((*path, "arguments"), f"{'.'.join(path)}.{exc}") from exc

    def reconcile(self, value: Any, path: tuple[str, ...]) -> ReconcilePolicy:
        body = self.table(value, path, _RECONCILE)
        if "tool" not in body:
            raise self.fail(
                path, f'{".".join(path)} needs tool = "<the upstream read tool that looks it up>"'
            )
        missing = self.string(body["missing"], (*path, "missing")) if "missing" in body else None
        if missing is not None and not missing.strip():
            raise self.fail((*path, "missing"), f"{'.'.join(path)}.missing must not be blank")
        return ReconcilePolicy(
            self.string(body["tool"], (*path, "tool")),
            self.arguments(body, path),
            missing,
            self.index.line(path),
        )

    def retry(self, value: Any, path: tuple[str, ...]) -> RetryPolicy:
        body = self.table(value, path, _RETRY)
        on = body.get("on", ["unavailable"])
        if not isinstance(on, list) or not all(isinstance(o, str) for o in on):
            raise self.fail((*path, "on"), f'{".".join(path)}.on must be an array, e.g. ["unavailable"]')
        for item in on:
            if item not in RETRY_ON:
                raise self.fail(
                    (*path, "on"),
                    f"{'.'.join(path)}.on may name {' and '.join(map(repr, RETRY_ON))}, not {item!r} "
                    "(a call that timed out or lost its connection is in doubt and never retried)",
                )
        return RetryPolicy(
            attempts=int(self.number(body.get("attempts", 1), (*path, "attempts"), minimum=1, integer=True)),
            backoff=self.number(body.get("backoff", 0.2), (*path, "backoff")),
            max_backoff=self.number(body.get("max_backoff", 10), (*path, "max_backoff")),
            on=frozenset(on),
        )
