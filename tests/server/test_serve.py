"""``sagacity serve``: refuses without credentials, and end to end as a real process on loopback."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from sagacity import Sagacity, SagaStatus
from sagacity.cli import main

from .conftest import free_port, serve_process

HERE = Path(__file__).parent
TOKEN = "e2e-approver-token-0123456789"
AUDIT_TOKEN = "e2e-auditor-token-0123456789"
#: The installed console script, as an operator runs it.
SAGACITY = shutil.which("sagacity", path=str(Path(sys.executable).parent)) or "sagacity"


def test_serve_refuses_without_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a tokens file or $SAGACITY_TOKENS, serve exits 2 naming the options and the insecure flag."""
    monkeypatch.delenv("SAGACITY_TOKENS", raising=False)
    monkeypatch.delenv("SAGACITY_TOKENS_FILE", raising=False)
    result = CliRunner().invoke(main, ["serve", "--db", f"sqlite:///{tmp_path}/j.db"])
    assert result.exit_code == 2
    assert "refusing to serve without credentials" in result.output
    assert "--insecure-no-auth-i-know-what-i-am-doing" in result.output


def test_serve_refuses_a_bad_tokens_file_and_contradictions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tokens file that does not parse, or tokens plus the insecure flag, is refused before serving."""
    monkeypatch.delenv("SAGACITY_TOKENS", raising=False)
    monkeypatch.delenv("SAGACITY_TOKENS_FILE", raising=False)
    bad = tmp_path / "tokens.json"
    bad.write_text("{")
    db = ["--db", f"sqlite:///{tmp_path}/j.db"]
    result = CliRunner().invoke(main, ["serve", *db, "--tokens-file", str(bad)])
    assert result.exit_code == 2
    assert "not valid JSON" in result.output
    bad.write_text(json.dumps({"tokens": {TOKEN: {"name": "alice", "roles": ["approver"]}}}))
    result = CliRunner().invoke(
        main, ["serve", *db, "--tokens-file", str(bad), "--insecure-no-auth-i-know-what-i-am-doing"]
    )
    assert result.exit_code == 2
    assert "contradicts" in result.output


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``sagacity serve`` in a subprocess on a free loopback port, importing ``server_tools``; (url, db)."""
    db = f"sqlite:///{tmp_path}/journal.db"
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(
        f'[tokens."{TOKEN}"]\nname = "alice@example.com"\nroles = ["approver"]\n\n'
        f'[tokens."{AUDIT_TOKEN}"]\nname = "carol"\nroles = ["auditor"]\n'
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    env.pop("SAGACITY_TOKENS", None)
    port = free_port()
    command = [
        SAGACITY, "serve", "--db", db, "--import", "server_tools",
        "--host", "127.0.0.1", "--port", str(port), "--tokens-file", str(tokens), "--log-level", "warning",
        "--proxy-user-header", "X-Forwarded-User",
    ]  # fmt: skip
    with serve_process(command, env) as url:
        yield url, db


def test_serve_end_to_end_approve_and_resume(
    served: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real `sagacity serve`: 401 without token, approver is the principal, resume runs, proxy header ok."""
    url, db = served
    monkeypatch.syspath_prepend(str(HERE))
    import server_tools

    with Sagacity(db) as sg:
        seq = sg.run("e2e-1", server_tools.transfer).awaiting[0].journal_seq
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=url, timeout=10) as http:
        assert http.get("/sagacity/approvals").status_code == 401
        [pending] = http.get("/sagacity/approvals", headers=auth).json()
        assert pending["toolImported"] is True
        approved = http.post(f"/sagacity/approve/e2e-1/{seq}", json={"approver": "mallory"}, headers=auth)
        assert approved.json()["approverIdentity"] == "alice@example.com"
        resumed = http.post(f"/sagacity/resume/e2e-1/{seq}", json={"payload": pending["input"]}, headers=auth)
        assert resumed.status_code == 200, resumed.text
        assert resumed.json() == {"sagaId": "e2e-1", "status": "COMPLETED", "result": "wire 100.00->ACME"}
        audit = http.get("/sagacity/audit/e2e-1", headers={"Authorization": f"Bearer {AUDIT_TOKEN}"})
        assert audit.headers["content-type"].startswith("application/x-ndjson")
        phases = [json.loads(line)["phase"] for line in audit.text.splitlines()]
        dashboard = http.get("/sagacity/ui/")
        proxied = http.get(
            "/sagacity/me", headers={"X-Forwarded-User": "sso-user", "X-Forwarded-Roles": "auditor"}
        )
    assert "APPROVED" in phases
    assert phases[-1] == "EXECUTED"
    assert dashboard.status_code == 200
    assert proxied.json() == {"name": "sso-user", "roles": ["auditor"], "insecure": False}
    with Sagacity(db) as sg:
        assert sg.status("e2e-1") is SagaStatus.COMPLETED
        approved_by = [e.payload for e in sg.entries("e2e-1") if e.phase == "APPROVED"]
    assert approved_by == ["approver=alice@example.com"]
