"""The workflow routes (the Java starter's paths): list runs, read one, decide a stage's gate.

Runs are those of the workflows declared in this process (``sagacity serve --import MODULE``
imports them). Approving a gate journals APPROVED under the authenticated principal and then, once
enough people approved, continues the run here to its next gate or its end (``"continue": false``
in the body only approves); rejecting compensates the run's completed stages here.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam

from sagacity._wire import decision_json, workflow_run_json
from sagacity.errors import SagacityError, SagaNotFoundError
from sagacity.server._errors import ApiError, answering, status_of
from sagacity.server._guard import Approver, Auditor, SagacityDep, authenticated_query
from sagacity.server._routes import SagaIdParam, _body_schema, _json_object, _saga_id, _text_field
from sagacity.workflows import StageStatus, WorkflowView, runs, workflow_of_run

__all__ = ["router"]

log = logging.getLogger("sagacity.server")

router = APIRouter(dependencies=[Depends(authenticated_query)])
StageParam = Annotated[str, PathParam(description="The name of the gated stage.")]


def _error(run_id: str, exc: SagacityError, stage: str | None = None) -> ApiError:
    body: dict[str, Any] = {"runId": run_id, "error": str(exc), "type": type(exc).__name__}
    if stage is not None:
        body["stage"] = stage
    return ApiError(status_of(exc), body)


def _view(sg: Any, run_id: str) -> WorkflowView:
    workflow = workflow_of_run(sg, run_id)
    return workflow.view(sg, run_id)


@router.get("/workflows", tags=["workflows"], summary="Workflow runs, most recently updated first")
def list_runs(
    who: Auditor,
    sg: SagacityDep,
    workflow: Annotated[str | None, Query(description="Only this workflow's runs.")] = None,
    limit: Annotated[int | None, Query(ge=1, le=1000, description="At most this many runs.")] = None,
) -> list[dict[str, Any]]:
    return [workflow_run_json(v) for v in runs(sg, workflow=workflow, limit=limit)]


@router.get("/workflows/{runId:path}", tags=["workflows"], summary="A run: each stage, its gate and checks")
def read_run(runId: SagaIdParam, who: Auditor, sg: SagacityDep) -> dict[str, Any]:
    run_id = _saga_id(runId)
    try:
        return workflow_run_json(_view(sg, run_id), full=True)
    except SagaNotFoundError as exc:
        raise _error(run_id, exc) from exc


def _approve(sg: Any, run_id: str, stage: str, approver: str, go_on: bool) -> dict[str, Any]:
    workflow = workflow_of_run(sg, run_id)
    decision = workflow.approve(sg, run_id, stage, approver)
    view = workflow.view(sg, run_id)
    ready = next(s for s in view.stages if s.name == stage).status is StageStatus.APPROVED
    if go_on and ready:
        view = workflow.resume(sg, run_id).view
    return {"decision": decision_json(decision), "run": workflow_run_json(view, full=True)}


def _reject(sg: Any, run_id: str, stage: str, approver: str, reason: str) -> dict[str, Any]:
    workflow = workflow_of_run(sg, run_id)
    decision = workflow.reject(sg, run_id, stage, approver, reason)
    return {
        "decision": decision_json(decision),
        "run": workflow_run_json(workflow.view(sg, run_id), full=True),
    }


@router.post(
    "/workflows/{runId:path}/gates/{stage}/approve",
    tags=["workflows"],
    summary="Approve the stage's gate as the authenticated principal, then continue the run",
    openapi_extra=_body_schema(
        {"continue": {"type": "boolean", "description": "Continue the run once approved (default true)."}}
    ),
)
async def approve_gate(
    runId: SagaIdParam, stage: StageParam, request: Request, who: Approver, sg: SagacityDep
) -> dict[str, Any]:
    run_id = _saga_id(runId)
    body = await _json_object(request)
    go_on = body.get("continue", True)
    if not isinstance(go_on, bool):
        raise ApiError(400, {"error": "continue must be true or false"})
    answer = await answering(
        partial(_error, run_id, stage=stage), _approve, sg, run_id, stage, who.name, go_on
    )
    log.info("workflow run %r: gate of %r approved by %r", run_id, stage, who.name)
    return answer


@router.post(
    "/workflows/{runId:path}/gates/{stage}/reject",
    tags=["workflows"],
    summary="Reject the stage's gate as the authenticated principal; completed stages are compensated",
    openapi_extra=_body_schema(
        {"reason": {"type": "string", "description": "Why; journaled with the decision."}}, ["reason"]
    ),
)
async def reject_gate(
    runId: SagaIdParam, stage: StageParam, request: Request, who: Approver, sg: SagacityDep
) -> dict[str, Any]:
    run_id = _saga_id(runId)
    reason = _text_field(await _json_object(request), "reason", meaning="why the gate is rejected") or ""
    if not reason.strip():
        raise ApiError(400, {"error": "reason is required: say why the gate is rejected"})
    answer = await answering(
        partial(_error, run_id, stage=stage), _reject, sg, run_id, stage, who.name, reason
    )
    log.info("workflow run %r: gate of %r rejected by %r", run_id, stage, who.name)
    return answer
