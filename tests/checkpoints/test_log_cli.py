"""The log end to end through the CLI: a witness process, cosigned checkpoints, an auditor's copy."""

from __future__ import annotations

import dataclasses
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sagacity import Phase, Sagacity
from sagacity.cli import main

from .conftest import RawSQL, export_bundle, rechain, stored_timestamp, verify_offline
from .tsa import LocalTSA, serve

ORIGIN = "test.example/journal"


@pytest.fixture
def journal_url(sqlite_url: str) -> str:
    """The CLI is store-agnostic; test_log.py covers PostgreSQL."""
    return sqlite_url


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    assert _run("keys", "generate", "--out", str(tmp_path / "keys" / "acme")).exit_code == 0
    made = _run(
        "keys", "generate", "--witness", "--out", str(tmp_path / "keys" / "w1"), "--name", "w1.example"
    )
    assert made.exit_code == 0, made.output
    return {name: tmp_path / "keys" / name for name in ("acme.key", "acme.pub", "w1.key", "w1.pub")}


@pytest.fixture
def witness_url(keys: dict[str, Path], tmp_path: Path) -> Iterator[str]:
    """`sagacity witness` as its own process on a free loopback port."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sagacity.cli",
            "witness",
            "--key",
            str(keys["w1.key"]),
            "--log",
            f"{ORIGIN}/log",
            str(keys["acme.pub"]),
            "--state",
            str(tmp_path / "witness"),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "/add-checkpoint" in line, line
    yield line.split(" on ")[1].strip().removesuffix("/add-checkpoint")
    process.send_signal(signal.SIGINT)
    process.wait(timeout=30)
    process.stdout.close()


def _checkpoint(db: str, keys: dict[str, Path], anchor: Path, *extra: str) -> Result:
    return _run(
        "checkpoint",
        "--db",
        db,
        "--key",
        str(keys["acme.key"]),
        "--origin",
        ORIGIN,
        "--out",
        str(anchor),
        *extra,
    )


def test_a_stolen_key_rewrite_is_refused_by_the_witness_and_caught_by_the_auditor(
    sg: Sagacity,
    journal_url: str,
    keys: dict[str, Path],
    witness_url: str,
    tmp_path: Path,
    raw_sql: RawSQL,
) -> None:
    anchor = tmp_path / "anchor"
    witness = f"{witness_url}={keys['w1.pub']}"
    made = _checkpoint(journal_url, keys, anchor, "--witness", witness)
    assert made.exit_code == 0, made.output
    assert "log of 15 entries" in made.output
    assert "cosigned by 1 of 1" in made.output
    kept = tmp_path / "auditor-copy.txt"
    shutil.copy(anchor / (anchor / "log-latest").read_text().strip(), kept)

    sg.journal.append("a", "tool", Phase.INTENT, "{}")
    grown = _checkpoint(journal_url, keys, anchor, "--witness", witness)
    assert grown.exit_code == 0, grown.output
    verify = ["verify", "--db", journal_url, "--checkpoint", str(anchor), "--key", str(keys["acme.pub"])]
    cosigned = [*verify, "--since", str(kept), "--witness-key", str(keys["w1.pub"])]
    clean = _run(*cosigned)
    assert clean.exit_code == 0, clean.output
    assert "cosigned by w1.example" in clean.output
    bundle = tmp_path / "bundle"
    exported = export_bundle(journal_url, ["a"], bundle, anchor, keys["acme.pub"], "--since", str(kept))
    assert exported.exit_code == 0, exported.output
    offline = verify_offline(
        bundle, keys["acme.pub"], "--witness-key", str(keys["w1.pub"]), "--since", str(kept)
    )
    assert offline.returncode == 0, offline.stderr
    assert "extends your log checkpoint(s) of size 15" in offline.stdout

    # The operator, holding the database, the anchor and the stolen signing key, rewrites saga b.
    entries = sg.entries("b")
    entries[1] = dataclasses.replace(entries[1], payload="a different result")
    for e in rechain(entries):
        raw_sql(
            "UPDATE side_effect_journal SET payload = %s, hash = %s, timestamp = %s "
            "WHERE saga_id = %s AND seq = %s",
            (e.payload, e.hash, stored_timestamp(journal_url, e.timestamp), e.saga_id, e.seq),
        )
    raw_sql("DELETE FROM sagacity_log", ())
    shutil.rmtree(anchor)
    refused = _checkpoint(journal_url, keys, anchor, "--witness", witness)
    assert refused.exit_code == 1
    assert "refused (422)" in refused.output
    assert "(a fork)" in refused.output
    assert not list(anchor.glob("log-checkpoint-*"))
    forged = _checkpoint(journal_url, keys, tmp_path / "anchor2")  # no witness asked
    assert forged.exit_code == 0, forged.output

    forged_verify = [*verify[:4], str(tmp_path / "anchor2"), *verify[5:]]
    assert _run(*forged_verify).exit_code == 0  # the stolen key's own word is consistent
    caught = _run(*forged_verify, "--since", str(kept), "--witness-key", str(keys["w1.pub"]))
    assert caught.exit_code == 1
    assert "LOG_MISMATCH" in caught.output
    assert "UNWITNESSED" in caught.output


def test_doctor_reports_how_far_the_journal_runs_ahead_of_the_last_cosigned_checkpoint(
    sg: Sagacity, journal_url: str, keys: dict[str, Path], witness_url: str, tmp_path: Path
) -> None:
    anchor = tmp_path / "anchor"
    assert (
        _checkpoint(journal_url, keys, anchor, "--witness", f"{witness_url}={keys['w1.pub']}").exit_code == 0
    )
    assert _checkpoint(journal_url, keys, anchor).exit_code == 0  # signed, not cosigned
    for _ in range(3):
        sg.journal.append("a", "tool", Phase.INTENT, "{}")
    doctor = ["doctor", "--db", journal_url, "--anchor", str(anchor), "--key", str(keys["acme.pub"])]
    within = _run(*doctor, "--witness-key", str(keys["w1.pub"]), "--max-lag", "3")
    assert within.exit_code == 0, within.output
    assert "18 entries, 3 ahead of the last cosigned log checkpoint (15 entries)" in within.output
    past = _run(*doctor, "--witness-key", str(keys["w1.pub"]), "--max-lag", "2", "--json")
    assert past.exit_code == 1
    assert '"checkpoint_lag"' in past.output
    unwitnessed = _run(*doctor, "--witness-key", str(keys["acme.pub"]), "--max-lag", "0")
    assert unwitnessed.exit_code == 2  # the log's own key is not a witness key
    stranger = tmp_path / "stranger"
    assert _run("keys", "generate", "--witness", "--out", str(stranger)).exit_code == 0
    none = _run(*doctor, "--witness-key", f"{stranger}.pub", "--max-lag", "17")
    assert none.exit_code == 1  # no checkpoint that stranger cosigned: all 18 entries are ahead
    assert "18 ahead" in none.output


def test_checkpoint_tsa_timestamps_the_log_checkpoint_and_the_bundle_carries_it(
    sg: Sagacity, journal_url: str, keys: dict[str, Path], tmp_path: Path
) -> None:
    tsa = LocalTSA()
    root = tmp_path / "tsa-root.pem"
    root.write_bytes(tsa.root_pem)
    anchor = tmp_path / "anchor"
    with serve(tsa) as url:
        made = _checkpoint(journal_url, keys, anchor, "--tsa", url)
    assert made.exit_code == 0, made.output
    assert "timestamped" in made.output
    assert len(list(anchor.glob("log-checkpoint-*.tsr"))) == 1
    bundle = tmp_path / "bundle"
    exported = export_bundle(journal_url, ["b"], bundle, anchor, keys["acme.pub"])
    assert exported.exit_code == 0, exported.output
    offline = verify_offline(bundle, keys["acme.pub"], "--tsa-cert", str(root))
    assert offline.returncode == 0, offline.stderr
    assert "by the TSA" in offline.stdout
    down = _checkpoint(journal_url, keys, tmp_path / "other", "--tsa", "http://127.0.0.1:9/")
    assert down.exit_code == 2
    assert "did not answer" in down.output


def _verify_stamped(db: str, keys: dict[str, Path], anchor: Path, root: Path, *extra: str) -> Result:
    return _run(
        "verify", "--db", db, "--checkpoint", str(anchor), "--key", str(keys["acme.pub"]),
        "--tsa-cert", str(root), *extra,
    )  # fmt: skip


def test_verify_checkpoint_checks_each_timestamp_token_against_the_tsa_root(
    sg: Sagacity, journal_url: str, keys: dict[str, Path], tmp_path: Path
) -> None:
    """verify --checkpoint --tsa-cert verifies every log checkpoint's RFC 3161 token (signature,
    chain to the given root, imprint = the checkpoint's hash) and reports its time; a tampered
    token, one over another checkpoint, another TSA's root and a missing token are each a finding."""
    import json

    tsa = LocalTSA()
    root = tmp_path / "tsa-root.pem"
    root.write_bytes(tsa.root_pem)
    anchor = tmp_path / "anchor"
    with serve(tsa) as url:
        assert _checkpoint(journal_url, keys, anchor, "--tsa", url).exit_code == 0
        sg.journal.append("b", "tool", Phase.EXECUTED, "{}", "later")
        assert _checkpoint(journal_url, keys, anchor, "--tsa", url).exit_code == 0
    tokens = sorted(anchor.glob("log-checkpoint-*.tsr"))
    assert len(tokens) == 2

    good = _verify_stamped(journal_url, keys, anchor, root)
    assert good.exit_code == 0, good.output
    assert good.output.count("by the TSA") == 2
    as_json = json.loads(_verify_stamped(journal_url, keys, anchor, root, "--json").output)
    assert all(cp["timestamped"] for cp in as_json["logCheckpoints"])
    unchecked = _run(
        "verify", "--db", journal_url, "--checkpoint", str(anchor), "--key", str(keys["acme.pub"])
    )
    assert unchecked.exit_code == 0
    assert "not checked" in unchecked.output

    other_root = tmp_path / "other-root.pem"
    other_root.write_bytes(LocalTSA().root_pem)
    stranger = _verify_stamped(journal_url, keys, anchor, other_root)
    assert stranger.exit_code == 1
    assert stranger.output.count("BAD_TIMESTAMP") == 2
    assert "certificate chain does not verify" in stranger.output

    first = tokens[0].read_bytes()
    tokens[0].write_bytes(first[:-1] + bytes([first[-1] ^ 1]))  # a byte of the TSA's signature
    tampered = _verify_stamped(journal_url, keys, anchor, root)
    assert tampered.exit_code == 1
    assert tampered.output.count("BAD_TIMESTAMP") == 1
    assert "signature failure" in tampered.output

    tokens[0].write_bytes(tokens[1].read_bytes())  # the newer checkpoint's token on the older one
    swapped = _verify_stamped(journal_url, keys, anchor, root)
    assert swapped.exit_code == 1
    assert "message imprint is not this checkpoint's hash" in swapped.output

    tokens[0].write_bytes(first)
    tokens[1].unlink()
    missing = _verify_stamped(journal_url, keys, anchor, root)
    assert missing.exit_code == 1
    assert "UNTIMESTAMPED" in missing.output
    assert "BAD_TIMESTAMP" not in missing.output
