"""The test suite's workflow: draft -> format -> (legal gate) publish, with a check before publish.

Every stage and compensation appends a line to the effects file named by
``$SAGACITY_WF_EFFECTS``, so a test counts what ran across processes. Run as a script, it is one
process of a test: ``wf_app.py URL ACTION RUN_ID [ARG]`` prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

from sagacity.workflows import CheckResult, StageContext, Workflow

#: A deploy of another code version is this process started with ``SAGACITY_WF_VERSION``.
publishing = Workflow("publish-article", version=os.environ.get("SAGACITY_WF_VERSION", "1"))


def effect(*parts: Any) -> None:
    with open(os.environ["SAGACITY_WF_EFFECTS"], "a", encoding="utf-8") as f:
        f.write(json.dumps(parts) + "\n")


@publishing.stage
def draft(brief: dict[str, Any]) -> dict[str, Any]:
    """Write the article's first draft."""
    effect("draft", brief["topic"])
    return {"title": brief["topic"].title(), "fail_at": brief.get("fail_at"), "embargo": brief.get("embargo")}


@draft.compensation
def discard_draft(ctx: StageContext) -> None:
    effect("discard_draft", ctx.input["topic"], ctx.output["title"])


@publishing.stage(name="format")
def format_article(article: dict[str, Any]) -> dict[str, Any]:
    effect("format", article["title"])
    if article.get("fail_at") == "format":
        raise RuntimeError("the typesetter is down")
    if article.get("fail_at") == "hang":  # a test kills this process here, mid-stage (kill -9)
        time.sleep(3600)
    if article.get("fail_at") == "output":
        return {"not json": {1, 2}}  # type: ignore[dict-item]
    return {**article, "html": f"<h1>{article['title']}</h1>"}


@publishing.compensation("format")
def unformat(ctx: StageContext) -> None:
    effect("unformat", ctx.output["html"])


def publish(article: dict[str, Any]) -> dict[str, Any]:
    effect("publish", article["title"])
    if article.get("fail_at") == "hold":  # a long call: runs until the test writes the release file
        while not os.path.exists(os.environ["SAGACITY_WF_RELEASE"]):
            time.sleep(0.05)
    return {"url": "https://news.example/" + article["title"].replace(" ", "-").lower()}


#: The stage's description, which its gate's definition hash binds; a deploy may change it alone.
publish.__doc__ = os.environ.get("SAGACITY_WF_PUBLISH_DOC", "Publish the article.")
publish = publishing.stage(  # type: ignore[assignment]
    gate=True, reason="Legal must sign off before anything is published", ttl=timedelta(hours=1)
)(publish)


@publishing.check("publish")
def no_embargo(article: dict[str, Any]) -> CheckResult:
    if article.get("embargo"):
        return CheckResult(False, f"embargoed until {article['embargo']}")
    return CheckResult(True)


#: Another workflow whose first stage has the same name (so the same call id, ``stage:draft``):
#: a run of it must never go on in a run of ``publishing``, nor the other way round.
payouts = Workflow("payout-order", version="1")


@payouts.stage(name="draft")
def draft_payout(order: dict[str, Any]) -> dict[str, Any]:
    effect("draft_payout", order.get("topic"))
    return {"amount": "10.00"}


@payouts.stage(gate=True, reason="finance approves payouts")
def pay(order: dict[str, Any]) -> str:
    effect("pay", order["amount"])
    return "paid"


def main() -> None:
    from sagacity import Sagacity

    url, action, run_id = sys.argv[1:4]
    arg = sys.argv[4] if len(sys.argv) > 4 else ""
    sg = Sagacity(url)
    out: dict[str, Any] = {}
    if action == "wait":  # racers: start together on a line from the test
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        action = sys.stdin.readline().strip()
    try:
        if action in ("run", "run-payout"):
            flow = publishing if action == "run" else payouts
            result = flow.run(sg, run_id, json.loads(arg))
            out = {"status": str(result.status), "stage": result.stage, "output": result.output}
        elif action == "resume":
            result = publishing.resume(sg, run_id)
            out = {"status": str(result.status), "stage": result.stage, "output": result.output}
        elif action == "approve":
            [request] = sg.pending_approvals(run_id)
            sg.approve(run_id, request.journal_seq, approver=arg)
            out = {"approved": request.journal_seq}
        elif action == "expire":  # as the doctor does from cron, with the clock past the gate's time
            [request] = sg.pending_approvals(run_id)
            assert request.expires_at is not None
            expired = sg.expire_approvals(now=request.expires_at + timedelta(seconds=1))
            out = {"expired": [r.journal_seq for r in expired]}
        elif action == "reject":
            [request] = sg.pending_approvals(run_id)
            sg.reject(run_id, request.journal_seq, approver=arg, reason="not cleared by legal")
            out = {"rejected": request.journal_seq}
    except Exception as exc:  # the test reads what happened
        out = {"error": type(exc).__name__, "message": str(exc), "new_seq": getattr(exc, "new_seq", None)}
    sys.stdout.write(json.dumps(out) + "\n")
    sg.close()


if __name__ == "__main__":
    main()
