"""Tools that call the fake payments service, with reconcilers that look their effects up by the
call's idempotency key; imported by the tests and by ``pay_worker`` alike.

``$PAY_PARK`` names a point where the running tool or compensation stops and waits to be
killed (it touches ``$PAY_MARKERS/$PAY_SAGA`` first): ``in-reserve``, ``before-send``,
``after-send``, ``before-refund``, ``after-refund``. ``in-service`` sends the transfer with
``X-Hold: 1``: the service does it and holds its answer.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from sagacity import CompensationContext, ReconcileContext, Reconciliation, current_call, tool


def _http(method: str, path: str, body: dict[str, Any] | None = None, hold: bool = False) -> tuple[int, Any]:
    request = urllib.request.Request(
        os.environ["PAYMENTS_URL"] + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"Content-Type": "application/json", **({"X-Hold": "1"} if hold else {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=90) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def park(point: str) -> None:
    if os.environ.get("PAY_PARK") == point:
        (Path(os.environ["PAY_MARKERS"]) / os.environ["PAY_SAGA"]).touch()
        time.sleep(120)


def _key() -> str:
    call = current_call()
    assert call is not None
    return call.idempotency_key


@tool
def reserve(sku: str) -> str:
    """Hold stock at the service (no reconciler: nobody can look a hold up)."""
    key = _key()
    _http("POST", "/holds", {"key": key, "sku": sku})
    park("in-reserve")
    return key


@reserve.compensation
def release(ctx: CompensationContext) -> None:
    _http("DELETE", f"/holds/{ctx.result}")


@tool
def send_transfer(amount: int, to: str) -> str:
    """Send money; the idempotency key makes a repeat the same transfer."""
    key = _key()
    park("before-send")
    status, body = _http(
        "POST",
        "/transfers",
        {"key": key, "amount": amount, "to": to},
        hold=os.environ.get("PAY_PARK") == "in-service",
    )
    assert status == 200, body
    park("after-send")
    return str(body["id"])


@send_transfer.compensation
def refund(ctx: CompensationContext) -> None:
    park("before-refund")
    status, body = _http("POST", f"/transfers/{ctx.idempotency_key}/refund", {})
    assert status == 200, body
    park("after-refund")


@send_transfer.reconcile
def find_transfer(call: ReconcileContext) -> Reconciliation:
    status, body = _http("GET", f"/transfers/{call.idempotency_key}")
    if status == 200:
        return Reconciliation.happened(f"transfer {body['id']} to {body['to']}", result=body["id"])
    if status == 404:
        return Reconciliation.did_not_happen(f"GET /transfers/{call.idempotency_key}: 404")
    raise RuntimeError(f"the payments service answered {status}")


@send_transfer.reconcile_compensation
def find_refund(call: ReconcileContext) -> Reconciliation:
    status, body = _http("GET", f"/refunds/{call.idempotency_key}")
    if status == 200:
        return Reconciliation.happened(f"refund {body['refund']}")
    if status == 404:
        return Reconciliation.did_not_happen(f"GET /refunds/{call.idempotency_key}: 404")
    return Reconciliation.unknown(f"the payments service answered {status}")


def pay(saga_id: str, *, fail: bool = False) -> str:
    """The agent: hold the stock, pay; ``fail``: then fail, so the saga compensates."""
    reserve("SKU-1")
    park("before-intent")
    transfer = send_transfer(100, saga_id)
    if fail:
        raise RuntimeError("the agent failed after paying")
    return transfer
