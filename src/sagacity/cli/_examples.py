"""Examples at the end of every command's ``--help``, kept in one table.

:class:`sagacity.cli._lazy.LazyGroup` attaches them (as click epilogs) when it loads a command,
so ``--help`` of any command ends with a few lines a person can copy. ``tests/cli/test_examples.py``
checks that every command has some, that each names the command it is under, and that every
option an example uses is one of that command's; ``tests/cli/test_examples_run.py`` runs every
one as written, so an example must work when pasted into a directory holding the files it names.
"""

from __future__ import annotations

import click

#: ``sagacity --help``'s own.
TOP = (
    "sagacity demo",
    "sagacity approvals list",
    "sagacity doctor",
    "sagacity sagas show order-123",
)

EXAMPLES: dict[str, tuple[str, ...]] = {
    "approvals": (
        "sagacity approvals list",
        "sagacity approvals show order-123 5",
        "sagacity approvals approve order-123 5 --as alice@example.com",
        "sagacity approvals resume order-123 5 --import myapp.tools",
    ),
    "approvals list": (
        "sagacity approvals list",
        "sagacity approvals list --tool send_wire_transfer --since 2h",
        "sagacity approvals list --watch --interval 5",
        "sagacity approvals list --prefix order- -q",
        "sagacity approvals list --limit 20",
    ),
    "approvals show": (
        "sagacity approvals show order-123 5",
        "sagacity approvals show order-123 5 --json",
    ),
    "approvals approve": (
        "sagacity approvals approve order-123 5 --as alice@example.com",
        "sagacity approvals approve payout-9 3 --as bob@example.com --import myapp.tools",
    ),
    "approvals reject": (
        'sagacity approvals reject order-123 5 --reason "not on the supplier list" --import myapp.tools',
    ),
    "approvals resume": (
        "sagacity approvals resume order-123 5 --import myapp.tools",
        "sagacity approvals resume order-123 5 --payload-file approved.json --import myapp.tools",
    ),
    "checkpoint": (
        "sagacity checkpoint --key ops.key --origin acme.example/orders --out anchor/",
        "sagacity checkpoint --key ops.key --origin acme.example/orders --git anchor/ --every 5m",
        "sagacity checkpoint --key ops.key --origin acme.example/orders --out anchor/ "
        "--witness https://witness.example=witness.pub",
    ),
    "db": (
        "sagacity db init --db postgresql://sagacity@db.internal/orders",
        "sagacity db grant --role app --db postgresql://owner@db.internal/orders",
    ),
    "db init": (
        "sagacity db init",
        "sagacity db init --db postgresql://sagacity@db.internal/orders",
    ),
    "db grant": ("sagacity db grant --role app --db postgresql://owner@db.internal/orders",),
    "db reindex": ("sagacity db reindex", "sagacity db reindex --db postgresql://owner@db.internal/orders"),
    "demo": ("sagacity demo", "sagacity demo --db sqlite:///demo.db"),
    "doctor": (
        "sagacity doctor",
        "sagacity doctor --older-than 10m --json",
        "sagacity doctor --full --ignore expired_approval",
        "sagacity doctor --anchor anchor/ --key ops.pub --max-lag 1000",
    ),
    "export": (
        "sagacity export order-123 > order-123.jsonl",
        "sagacity export order-123 order-124 --out orders.jsonl",
        "sagacity export order-123 --bundle evidence/ --checkpoint anchor/ --key ops.pub",
    ),
    "keys": ("sagacity keys generate --out keys/ops",),
    "keys generate": (
        "sagacity keys generate --out keys/ops",
        "sagacity keys generate --out keys/witness-1 --name witness.example/w1 --witness",
    ),
    "mcp": (
        "sagacity mcp check --policy payments.toml -- npx -y @acme/payments-mcp",
        "sagacity mcp proxy --policy payments.toml -- npx -y @acme/payments-mcp",
    ),
    "mcp check": (
        "sagacity mcp check --policy payments.toml -- npx -y @acme/payments-mcp",
        "sagacity mcp check --policy payments.toml --upstream-url https://mcp.acme.example/mcp",
    ),
    "mcp proxy": (
        "sagacity mcp proxy --policy payments.toml -- npx -y @acme/payments-mcp",
        "sagacity mcp proxy --policy payments.toml --api --tokens-file tokens.toml "
        "-- npx -y @acme/payments-mcp",
        "sagacity mcp proxy --policy payments.toml --upstream-url https://mcp.acme.example/mcp "
        "--listen 127.0.0.1:8765 --agent-tokens-file agent-tokens.json --api --tokens-file tokens.toml",
    ),
    "policy": (
        "sagacity policy check payments.toml",
        "sagacity policy explain payments.toml --tool refund --args '{\"amount\": 900}'",
    ),
    "policy check": ("sagacity policy check payments.toml",),
    "policy explain": (
        "sagacity policy explain payments.toml --tool refund --args '{\"amount\": 900}'",
        "sagacity policy explain payments.toml --tool wire --args '{}' --agent billing --irreversible",
    ),
    "sagas": (
        "sagacity sagas list --status IN_DOUBT",
        "sagacity sagas show order-123",
        "sagacity sagas in-doubt",
    ),
    "sagas list": (
        "sagacity sagas list --status COMPENSATION_FAILED",
        "sagacity sagas list --prefix order- --tool charge_card --since 1d",
        "sagacity sagas list --limit 100 -o csv > sagas.csv",
        "sagacity sagas list -q --status AWAITING_APPROVAL",
    ),
    "sagas show": (
        "sagacity sagas show order-123",
        "sagacity sagas show order-123 -o wide",
        "sagacity sagas show order-123 --json",
    ),
    "sagas in-doubt": ("sagacity sagas in-doubt", "sagacity sagas in-doubt order-123 --json"),
    "sagas resolve": (
        'sagacity sagas resolve order-123 4 --did-not-happen --reason "no charge at the bank" '
        "--import myapp.tools",
        'sagacity sagas resolve order-123 4 --happened --result "ch_3Nx" --reason "in the Stripe dashboard"',
    ),
    "sagas reconcile": (
        "sagacity sagas reconcile --import myapp.tools",
        "sagacity sagas reconcile order-123 --timeout 10 --import myapp.tools --json",
    ),
    "sagas audit-effects": (
        "sagacity sagas audit-effects --import myapp.tools --as audit@example.com",
        "sagacity sagas audit-effects order-123 --import myapp.tools --json",
    ),
    "sagas recover": (
        "sagacity sagas recover --import myapp.tools",
        "sagacity sagas recover order-123 --json",
    ),
    "serve": (
        "sagacity serve --tokens-file tokens.toml --import myapp.tools",
        "sagacity serve --host 0.0.0.0 --port 8080 --tokens-file tokens.toml",
    ),
    "notify": ("sagacity notify status", "sagacity notify run --config notify.toml"),
    "notify run": (
        "sagacity notify run --config notify.toml",
        "sagacity notify run --config notify.toml --once",
    ),
    "notify status": ("sagacity notify status", "sagacity notify status --json"),
    "notify requeue": (
        "sagacity notify requeue --all --as ops@example.com",
        "sagacity notify requeue evt_5d41402abc4b2a76b9719d911017c592:hook",
    ),
    "switch": (
        "sagacity switch status",
        'sagacity switch halt --tool wire --reason "bank incident" --as alice@example.com',
    ),
    "switch status": ("sagacity switch status", "sagacity switch status --json"),
    "switch halt": (
        'sagacity switch halt --reason "incident 42" --as alice@example.com',
        'sagacity switch halt --tool wire --reason "bank incident" --ttl 2h',
    ),
    "switch drain": ('sagacity switch drain --agent billing --reason "deploying" --ttl 30m',),
    "switch lift": ('sagacity switch lift --tool wire --reason "bank is back" --as alice@example.com',),
    "verify": (
        "sagacity verify",
        "sagacity verify order-123 --json",
        "sagacity verify --export order-123.jsonl",
        "sagacity verify --checkpoint anchor/ --key ops.pub",
    ),
    "witness": (
        "sagacity witness --key witness-1.key --log acme.example/orders/log ops.pub --state witness-state/ "
        "--port 8800",
    ),
    "workflows approve": (
        "sagacity workflows approve article-42 publish --as lawyer@example.com --import myapp.flows",
        "sagacity workflows approve article-42 publish --continue --import myapp.flows",
    ),
    "workflows list": (
        "sagacity workflows list --import myapp.flows",
        "sagacity workflows list --workflow publish_article --limit 20 --import myapp.flows",
    ),
    "workflows reject": (
        'sagacity workflows reject article-42 publish --reason "not cleared" --import myapp.flows',
    ),
    "workflows resume": ("sagacity workflows resume article-42 --import myapp.flows",),
    "workflows show": (
        "sagacity workflows show article-42 --import myapp.flows",
        "sagacity workflows show article-42 --json --import myapp.flows",
    ),
}


def epilog(lines: tuple[str, ...]) -> str:
    """Examples as a click epilog (``\\b``: printed as written, not re-wrapped)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def attach(command: click.Command, path: str) -> None:
    """Give ``command`` (the one at ``path``, e.g. ``"sagas list"``) and every command under it
    their examples, unless the command carries an epilog of its own."""
    if command.epilog is None and path in EXAMPLES:
        command.epilog = epilog(EXAMPLES[path])
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            attach(sub, f"{path} {name}")
