"""docs/http.md and docs/dashboard.md agree with the code: routes, token files, the example, screenshots."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from sagacity.server import TokenAuth

DOCS = Path(__file__).resolve().parents[2] / "docs"
HTTP = (DOCS / "http.md").read_text(encoding="utf-8")
DASHBOARD = (DOCS / "dashboard.md").read_text(encoding="utf-8")


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def test_every_route_is_documented(app: FastAPI) -> None:
    """Each path of the OpenAPI schema appears in docs/http.md's route table."""
    for path in app.openapi()["paths"]:
        assert f"`GET {path}`" in HTTP or f"`POST {path}`" in HTTP, f"{path} is not in docs/http.md"


def test_token_file_examples_load() -> None:
    """The TOML and JSON tokens files shown in docs/http.md are accepted by TokenAuth."""
    [toml_block] = blocks(HTTP, "toml")
    [json_block] = [b for b in blocks(HTTP, "json") if '"tokens"' in b]
    toml_auth = TokenAuth.from_document(tomllib.loads(toml_block), source="toml example")
    json_auth = TokenAuth.from_document(json.loads(json_block), source="json example")
    assert [p.name for p in toml_auth.principals] == ["alice@example.com", "audit-bot"]
    assert {p.name for p in json_auth.principals} == {"alice@example.com", "ops"}


def test_mounting_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc_namespace: Callable[[str], dict[str, Any]]
) -> None:
    """The python example of docs/http.md builds a FastAPI app with Sagacity mounted in it."""
    monkeypatch.chdir(tmp_path)
    [example] = blocks(HTTP, "python")
    namespace = doc_namespace("docs_http")
    exec(compile(example, "docs/http.md", "exec"), namespace)
    assert isinstance(namespace["app"], FastAPI)


def test_dashboard_doc_shows_every_screenshot() -> None:
    """docs/dashboard.md embeds every docs/img/dashboard-*.png, and each embedded image exists."""
    embedded = set(re.findall(r"\]\((img/[^)]+\.png)\)", DASHBOARD))
    present = {f"img/{p.name}" for p in (DOCS / "img").glob("dashboard-*.png")}
    assert present
    assert embedded == present
