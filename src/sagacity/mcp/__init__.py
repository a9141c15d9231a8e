"""The MCP gateway: journal, gate and compensate the tools of any MCP server (docs/mcp.md).

Needs the ``mcp`` extra (``pip install 'sagacity[mcp]'``), the official MCP Python SDK. Most
people run it from the command line (``sagacity mcp proxy --policy policy.toml -- <server ...>``);
a program can do the same::

    from sagacity.mcp import Gateway, UpstreamTarget, load_gateway_policy, serve_stdio

    policy = load_gateway_policy("policy.toml")
    async with Gateway.open(policy, UpstreamTarget(command=("npx", "payments-mcp")), db_url=...) as gw:
        await serve_stdio(gw)
"""

from __future__ import annotations

from sagacity.errors import ConfigurationError

try:
    import mcp  # noqa: F401 - probe for the extra before anything imports it
except ImportError as exc:
    raise ConfigurationError("sagacity.mcp needs the MCP Python SDK: pip install 'sagacity[mcp]'") from exc

from sagacity.mcp._auth import AgentAuth, JwtVerifier, StaticTokens
from sagacity.mcp._canonical import canonical_json
from sagacity.mcp._errors import (
    UndoFailedError,
    UpstreamError,
    UpstreamRejectedError,
    UpstreamToolError,
    UpstreamUnavailableError,
)
from sagacity.mcp._gateway import COMMIT_TOOL, PROXY_TOOLS, ROLLBACK_TOOL, STATUS_TOOL, Gateway
from sagacity.mcp._policy import (
    Decision,
    GatewayPolicy,
    PolicyError,
    ToolKind,
    load_gateway_policy,
    parse_gateway_policy,
)
from sagacity.mcp._proxy import build_server, http_app, serve_stdio
from sagacity.mcp._sagas import SAGA_META_KEY
from sagacity.mcp._template import Template, TemplateError, compile_template
from sagacity.mcp._upstream import Upstream, UpstreamTarget

#: The old name of :class:`GatewayPolicy`, kept as an alias (``sagacity.guardrails.Policy`` is
#: the guardrails policy, a different thing).
Policy = GatewayPolicy
#: The old names of :func:`load_gateway_policy` and :func:`parse_gateway_policy` (the guardrails'
#: ``load_policy`` / ``parse_policy`` read another file into another type), kept as aliases.
load_policy = load_gateway_policy
parse_policy = parse_gateway_policy

__all__ = [
    "COMMIT_TOOL",
    "PROXY_TOOLS",
    "ROLLBACK_TOOL",
    "SAGA_META_KEY",
    "STATUS_TOOL",
    "AgentAuth",
    "Decision",
    "Gateway",
    "GatewayPolicy",
    "JwtVerifier",
    "Policy",
    "PolicyError",
    "StaticTokens",
    "Template",
    "TemplateError",
    "ToolKind",
    "UndoFailedError",
    "Upstream",
    "UpstreamError",
    "UpstreamRejectedError",
    "UpstreamTarget",
    "UpstreamToolError",
    "UpstreamUnavailableError",
    "build_server",
    "canonical_json",
    "compile_template",
    "http_app",
    "load_gateway_policy",
    "load_policy",
    "parse_gateway_policy",
    "parse_policy",
    "serve_stdio",
]
