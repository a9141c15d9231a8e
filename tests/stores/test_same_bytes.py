"""The same entries give the same chain on every store: written to memory, SQLite, PostgreSQL
and MariaDB at the same instants, they export to identical lines, so one verifier (this library's,
the Java library's) accepts them all alike."""

from __future__ import annotations

from pathlib import Path

from sagacity import Phase, Sagacity
from sagacity._journal import Journal

#: A saga exercising what a store could bend: 4-byte and combining characters, a trailing space
#: in the id, NUL (escaped) and newlines in payloads, empty fields, a large input, µs edges.
SAGA = "order-𝄞-é "
ROWS = [
    ("reserve", Phase.INTENT, '{"sku":"日本-😀","note":"a\\u0301"}', ""),
    ("reserve", Phase.EXECUTED, '{"sku":"日本-😀","note":"a\\u0301"}', "line 1\nline 2\x00end"),
    ("charge", Phase.INTENT, '{"blob":"' + "x€" * 50_000 + '"}', ""),
    ("charge", Phase.FAILED, "", "ValueError: declined 😀"),
]
INSTANTS_NS = [1_784_628_000_000_000_000, 1_784_628_000_999_999_999, 1_784_628_001_000_000_999, 0]


def _exported(url: str) -> list[str]:
    with Sagacity(url) as sg:
        clock = iter(INSTANTS_NS)
        journal = Journal(sg.store, clock=lambda: next(clock))
        for tool_name, phase, input_, payload in ROWS:
            journal.append(SAGA, tool_name, phase, input_, payload)
        assert sg.verify(SAGA).valid
        return list(sg.export(SAGA))


def test_every_store_writes_the_same_chain(tmp_path: Path, postgres_url: str, mysql_url: str) -> None:
    """Memory, SQLite, PostgreSQL and MariaDB export byte-identical lines for the same appends."""
    by_store = {
        "memory": _exported("memory://"),
        "sqlite": _exported(f"sqlite:///{tmp_path}/journal.db"),
        "postgres": _exported(postgres_url),
        "mysql": _exported(mysql_url),
    }
    assert len(by_store["memory"]) == len(ROWS)
    for name, lines in by_store.items():
        assert lines == by_store["memory"], f"{name} wrote another chain"
