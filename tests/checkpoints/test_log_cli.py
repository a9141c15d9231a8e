"""The log end to end through the CLI: a witness process, cosigned checkpoints, an auditor's copy."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sagacity import Phase, Sagacity
from sagacity.checkpoints import (
    Witness,
    _note,
    checkpoint_log,
    cosign_with_quorum,
    load_signing_key,
    load_witness_key,
)
from sagacity.checkpoints._tlog import sign_log_checkpoint
from sagacity.cli import main
from sagacity.errors import CheckpointError

from .conftest import RawSQL, export_bundle, rewrite_saga_b, verify_offline
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
    rewrite_saga_b(sg, raw_sql, journal_url)
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


# -- a witness named twice counts once (#33 item 19) ------------------------------------------------
def test_one_witness_named_twice_is_an_error_not_a_second_cosignature(
    sg: Sagacity, journal_url: str, keys: dict[str, Path], witness_url: str, tmp_path: Path
) -> None:
    """`--witness W --witness W --quorum 2` would publish W's one cosignature twice and pass a
    2-of-n quorum; every command that takes witnesses refuses the repeat, and nothing is anchored."""
    anchor = tmp_path / "anchor"
    witness = f"{witness_url}={keys['w1.pub']}"
    twice = _checkpoint(
        journal_url, keys, anchor, "--witness", witness, "--witness", witness, "--quorum", "2"
    )
    assert twice.exit_code == 2, twice.output
    assert "w1.example is named more than once" in twice.output
    assert not anchor.exists()
    with pytest.raises(CheckpointError, match="named more than once"):
        cosign_with_quorum(
            checkpoint_log(sg, load_signing_key(keys["acme.key"]), ORIGIN),
            [Witness(witness_url, load_witness_key(keys["w1.pub"]))] * 2,
            2,
            0,
            lambda old: [],
        )

    made = _checkpoint(journal_url, keys, anchor, "--witness", witness)
    assert made.exit_code == 0, made.output
    w1 = str(keys["w1.pub"])
    verify = ["verify", "--db", journal_url, "--checkpoint", str(anchor), "--key", str(keys["acme.pub"])]
    doctor = ["doctor", "--db", journal_url, "--anchor", str(anchor), "--key", str(keys["acme.pub"])]
    for command in (verify, doctor):
        refused = _run(*command, "--witness-key", w1, "--witness-key", w1, "--quorum", "2")
        assert refused.exit_code == 2, refused.output
        assert "w1.example is named more than once" in refused.output

    bundle = tmp_path / "bundle"
    assert export_bundle(journal_url, ["b"], bundle, anchor, keys["acme.pub"]).exit_code == 0
    offline = verify_offline(
        bundle, keys["acme.pub"], "--witness-key", w1, "--witness-key", w1, "--quorum", "2"
    )
    assert offline.returncode == 1, offline.stdout
    assert "w1.example is named more than once" in offline.stderr
    assert verify_offline(bundle, keys["acme.pub"], "--witness-key", w1).returncode == 0


def test_a_repeated_cosignature_line_is_kept_once(keys: dict[str, Path]) -> None:
    key = load_signing_key(keys["acme.key"])
    witness = load_signing_key(keys["w1.key"])
    made = sign_log_checkpoint(f"{ORIGIN}/log", 0, hashlib.sha256().digest(), key)
    line = _note.cosign(made.text, witness, 1_800_000_000)
    assert made.with_signatures([line, line]).note.count("\N{EM DASH} w1.example ") == 1


# -- a refused run leaves the anchor as it was (#33 item 20) ----------------------------------------
def _anchor_state(anchor: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(anchor.iterdir())} if anchor.exists() else {}


def test_a_refused_checkpoint_run_publishes_nothing(
    sg: Sagacity, journal_url: str, keys: dict[str, Path], tmp_path: Path, raw_sql: RawSQL
) -> None:
    """A run that exits 1 (quorum missed, the log table re-ordered) or 2 (the TSA did not answer)
    anchors neither checkpoint and leaves `latest` and `log-latest` where they were."""
    anchor = tmp_path / "anchor"
    down = "http://127.0.0.1:9"  # nothing listens on the discard port
    missed = _checkpoint(journal_url, keys, anchor, "--witness", f"{down}={keys['w1.pub']}")
    assert missed.exit_code == 1, missed.output
    assert "log checkpoint not published" in missed.output
    assert _anchor_state(anchor) == {}

    assert _checkpoint(journal_url, keys, anchor).exit_code == 0
    before = _anchor_state(anchor)
    sg.journal.append("a", "tool", Phase.INTENT, "{}")
    missed = _checkpoint(journal_url, keys, anchor, "--witness", f"{down}={keys['w1.pub']}")
    assert missed.exit_code == 1, missed.output
    no_tsa = _checkpoint(journal_url, keys, anchor, "--tsa", f"{down}/")
    assert no_tsa.exit_code == 2, no_tsa.output
    assert "did not answer" in no_tsa.output
    assert _anchor_state(anchor) == before

    for frontier in anchor.glob("*.frontier"):
        frontier.unlink()  # without it the run re-folds every logged entry and sees the new order
    before = _anchor_state(anchor)
    raw_sql("UPDATE sagacity_log SET log_index = -1 WHERE log_index = 0")
    raw_sql("UPDATE sagacity_log SET log_index = 0 WHERE log_index = 1")
    raw_sql("UPDATE sagacity_log SET log_index = 1 WHERE log_index = -1")
    reordered = _checkpoint(journal_url, keys, anchor)
    assert reordered.exit_code == 1, reordered.output
    assert "re-ordered or re-hashed" in reordered.output
    assert _anchor_state(anchor) == before


# -- both sides of a fork are checked (#33 item 18) ---------------------------------------------------
def test_a_forged_log_of_the_kept_size_is_named_against_the_auditors_copy(
    sg: Sagacity, journal_url: str, keys: dict[str, Path], witness_url: str, tmp_path: Path, raw_sql: RawSQL
) -> None:
    """`verify --checkpoint forged --since copy`, the forged log rebuilt to the copy's size: besides
    FORKED, LOG_MISMATCH names the copy's root, and the copy's cosignature is reported."""
    anchor = tmp_path / "anchor"
    assert (
        _checkpoint(journal_url, keys, anchor, "--witness", f"{witness_url}={keys['w1.pub']}").exit_code == 0
    )
    kept = tmp_path / "auditor-copy.txt"
    shutil.copy(anchor / (anchor / "log-latest").read_text().strip(), kept)
    rewrite_saga_b(sg, raw_sql, journal_url)
    forged = tmp_path / "forged"
    assert _checkpoint(journal_url, keys, forged).exit_code == 0
    kept_root = kept.read_text().split("\n")[2]
    text = _run(
        "verify", "--db", journal_url, "--checkpoint", str(forged), "--key", str(keys["acme.pub"]),
        "--since", str(kept), "--witness-key", str(keys["w1.pub"]),
    )  # fmt: skip
    assert f"root {kept_root} cosigned by w1.example" in " ".join(text.output.split())
    caught = _run(
        "verify", "--db", journal_url, "--checkpoint", str(forged), "--key", str(keys["acme.pub"]),
        "--since", str(kept), "--witness-key", str(keys["w1.pub"]), "--json",
    )  # fmt: skip
    assert caught.exit_code == 1
    findings = json.loads(caught.output)["findings"]
    assert {f["finding"] for f in findings} == {"FORKED", "LOG_MISMATCH", "UNWITNESSED"}
    mismatch = next(f for f in findings if f["finding"] == "LOG_MISMATCH")
    assert f"size 15 (root {kept_root})" in mismatch["detail"]
