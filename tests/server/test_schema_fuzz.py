"""The OpenAPI schema fuzzed with schemathesis: whatever a client sends, the server never answers 5xx."""

from __future__ import annotations

from types import ModuleType

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from sagacity import Sagacity

ROOT = {"Authorization": "Bearer root-token-0123456789a"}


@pytest.fixture
def api_schema(app: FastAPI, sg: Sagacity, tools: ModuleType) -> schemathesis.BaseSchema:
    """The app's own schema, over a journal holding a pending, an approved and a completed saga."""
    for saga_id in ("order-1", "order-2", "order-3"):
        sg.run(saga_id, tools.transfer)
    sg.approve("order-2", 4, "alice")  # each gate is seq 4: the START, a call, the gate
    sg.approve("order-3", 4, "alice")
    sg.resume("order-3", 4, '{"amount":"100.00","to":"ACME"}')
    return schemathesis.openapi.from_asgi("/sagacity/openapi.json", app)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_no_input_makes_a_server_error(api_schema: schemathesis.BaseSchema, mode: GenerationMode) -> None:
    """Generated paths, parameters and bodies (valid and invalid) get 2xx or 4xx answers, never a 5xx."""

    @given(case=api_schema.as_strategy(generation_mode=mode))
    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def call(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=ROOT, checks=[not_a_server_error])

    call()
