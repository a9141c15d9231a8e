"""What an auditor's (or a misconfigured worker's) process does with a SQLite journal it may not
write, run as a separate process by test_read_only_sqlite.py:

    python read_only_child.py URL ACTION

Prints one JSON object: what came back, or the error's type and message.
"""

from __future__ import annotations

import json
import sys

from sagacity import Sagacity, tool


# Names of their own: this module is imported into the test process too, where the registry is
# shared with every other test module (a bare "pay" would refuse another module's "pay").
@tool(name="ro_book")
def book(item: str) -> str:
    return f"booked {item}"


@book.compensation
def unbook(ctx: object) -> None:
    return None


@tool(name="ro_pay")
def pay(amount: int) -> str:
    raise RuntimeError(f"card declined for {amount}")


def act(sg: Sagacity, action: str) -> object:
    if action == "verify":
        return [
            (saga_id, sg.verify(saga_id).valid, sg.verify(saga_id).entry_count) for saga_id in sg.saga_ids()
        ]
    if action == "export":
        return {saga_id: list(sg.export(saga_id)) for saga_id in sg.saga_ids()}
    if action == "run":
        return str(sg.run("new-saga", book, "seat").status)
    if action == "fail":

        def agent() -> None:
            book("seat")
            pay(10)

        return str(sg.run("failing", agent).status)
    if action == "list":
        return [s.saga_id for s in sg.sagas()]
    raise SystemExit(f"unknown action {action}")


if __name__ == "__main__":
    url, action = sys.argv[1:3]
    try:
        with Sagacity(url) as sagacity:
            print(json.dumps({"value": act(sagacity, action)}))
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
