"""Evidence bundles checked offline by the standalone verifier: any changed byte fails."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from sagacity import Phase, Sagacity
from sagacity import verify_bundle as standalone
from sagacity.checkpoints import (
    Checkpoint,
    SigningKey,
    _note,
    checkpoint_log,
    create_checkpoint,
    open_log_checkpoint,
    write_bundle,
)
from sagacity.checkpoints._timestamp import request_timestamp
from sagacity.errors import CheckpointError, JournalIntegrityError

from .tsa import LocalTSA, serve


@pytest.fixture
def journal() -> Sagacity:
    """A memory journal with five sagas, one id needing escapes, one payload with non-ASCII text."""
    sg = Sagacity("memory://")
    for n in range(5):
        for i in range(3):
            sg.journal.append(f"order {n}/ü", "tool", Phase.EXECUTED, f'{{"i":{i}}}', f"ok 日本 {i}")
    return sg


@pytest.fixture
def checkpoint(journal: Sagacity, key: SigningKey) -> Checkpoint:
    return create_checkpoint(journal, key, "test.example/journal")


@pytest.fixture
def pub(key: SigningKey, tmp_path: Path) -> Path:
    path = tmp_path / "test.pub"
    path.write_text(key.verifier.to_text() + "\n")
    return path


@pytest.fixture
def bundle(journal: Sagacity, checkpoint: Checkpoint, tmp_path: Path) -> Path:
    """Sagas 1 and 3, bundled after saga 3 grew past the checkpoint."""
    journal.journal.append("order 3/ü", "tool", Phase.INTENT, "{}")
    return write_bundle(journal, ["order 1/ü", "order 3/ü"], checkpoint, tmp_path / "bundle")


def _verify(bundle: Path, pub: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = standalone.main([str(bundle), "--key", str(pub)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_bundle_verifies_offline(bundle: Path, pub: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fresh bundle verifies; entries after the checkpoint chain correctly but are flagged unattested."""
    code, output = _verify(bundle, pub, capsys)
    assert code == 0, output
    assert "OK order 1/ü: 3 entries attested" in output
    assert "OK order 3/ü: 3 entries attested by the checkpoint, chain intact; 1 later entries" in output


def test_every_changed_byte_fails(bundle: Path, pub: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Flipping any single byte of the note, the manifest or a saga file makes verification fail."""
    files = [bundle / "checkpoint.txt", bundle / "bundle.json", *sorted((bundle / "sagas").iterdir())]
    for path in files:
        original = path.read_bytes()
        for offset in range(len(original)):
            altered = bytearray(original)
            altered[offset] ^= 0x01
            path.write_bytes(bytes(altered))
            code, output = _verify(bundle, pub, capsys)
            assert code == 1, f"{path.name} byte {offset} changed, still verified: {output}"
        path.write_bytes(original)
    assert _verify(bundle, pub, capsys)[0] == 0


def test_signature_by_another_key_fails(
    bundle: Path, other_key: SigningKey, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundle checked with an impostor's public key of the same name fails."""
    impostor = tmp_path / "impostor.pub"
    impostor.write_text(other_key.verifier.to_text())
    code, output = _verify(bundle, impostor, capsys)
    assert code == 1
    assert "not signed by test-journal" in output


def test_manifest_paths_cannot_leave_the_bundle(
    bundle: Path, pub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A manifest naming a file outside the bundle directory is refused."""
    manifest = bundle / "bundle.json"
    manifest.write_text(manifest.read_text().replace('"sagas/000001.jsonl"', '"../../etc/passwd"'))
    code, output = _verify(bundle, pub, capsys)
    assert (code, "leaves the bundle" in output) == (1, True)


def test_refuses_sagas_the_checkpoint_does_not_cover(
    journal: Sagacity, checkpoint: Checkpoint, tmp_path: Path
) -> None:
    """Bundling a saga newer than the checkpoint asks for a new checkpoint instead."""
    journal.journal.append("new", "tool", Phase.INTENT, "{}")
    with pytest.raises(CheckpointError, match="take a new checkpoint"):
        write_bundle(journal, ["new"], checkpoint, tmp_path / "b")


def test_refuses_a_saga_that_no_longer_extends_the_checkpoint(key: SigningKey, tmp_path: Path) -> None:
    """A saga whose attested head is no longer in its chain is not bundled."""
    with Sagacity("memory://") as sg:
        sg.journal.append("s", "tool", Phase.INTENT, "{}")
        checkpoint = create_checkpoint(sg, key, "test.example/journal")
    with Sagacity("memory://") as other:
        other.journal.append("s", "tool", Phase.INTENT, '{"other":1}')
        with pytest.raises(JournalIntegrityError, match="not the checkpoint's head"):
            write_bundle(other, ["s"], checkpoint, tmp_path / "b")


def test_standalone_verifier_imports_nothing_from_sagacity() -> None:
    """verify_bundle.py depends only on the standard library and cryptography (and, for --tsa-cert
    alone, rfc3161-client), so it can be copied out."""
    tree = ast.parse(Path(standalone.__file__).read_text(encoding="utf-8"))
    roots = {
        (node.module or "").split(".")[0] if isinstance(node, ast.ImportFrom) else alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert roots - set(sys.stdlib_module_names) == {"cryptography", "rfc3161_client"}


def test_copied_out_verifier_runs_as_a_script(bundle: Path, pub: Path, tmp_path: Path) -> None:
    """The verifier copied to another directory runs with plain `python verify_bundle.py`."""
    copy = tmp_path / "elsewhere" / "verify_bundle.py"
    copy.parent.mkdir()
    copy.write_text(Path(standalone.__file__).read_text(encoding="utf-8"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-I", str(copy), str(bundle), "--key", str(pub)],
        capture_output=True,
        text=True,
        cwd=copy.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("bundle verified\n")


# -- bundles carrying the log checkpoint ----------------------------------------------------------
@pytest.fixture(scope="module")
def witness_key() -> SigningKey:
    return SigningKey.generate("witness.example", witness=True)


@pytest.fixture
def log_bundle(
    journal: Sagacity, checkpoint: Checkpoint, key: SigningKey, witness_key: SigningKey, tmp_path: Path
) -> tuple[Path, Path, Path]:
    """Saga 3 bundled with a cosigned log checkpoint that extends an older one the auditor kept.

    Returns the bundle, the auditor's older log checkpoint and the witness's public key file.
    """
    older = checkpoint_log(journal, key, "test.example/journal")
    journal.journal.append("order 3/ü", "tool", Phase.INTENT, "{}")
    newer = checkpoint_log(journal, key, "test.example/journal", previous=older)
    newer = newer.with_signatures([_note.cosign(newer.text, witness_key, 1_800_000_000)])
    kept = tmp_path / "kept-log-checkpoint.txt"
    kept.write_text(older.note)
    wpub = tmp_path / "witness.pub"
    wpub.write_text(witness_key.verifier.to_text() + "\n")
    made = write_bundle(journal, ["order 3/ü"], checkpoint, tmp_path / "bundle", log=newer, since=[older])
    return made, kept, wpub


def _verify_log(bundle: Path, pub: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    return _verify_args([str(bundle), "--key", str(pub), *extra], capsys)


def _verify_args(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = standalone.main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_log_bundle_verifies_inclusion_consistency_and_cosignatures(
    log_bundle: tuple[Path, Path, Path], pub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, kept, wpub = log_bundle
    code, output = _verify_log(bundle, pub, capsys, "--witness-key", str(wpub), "--since", str(kept))
    assert code == 0, output
    assert "log checkpoint test.example/journal/log: 16 entries, cosigned by witness.example" in output
    assert "extends your log checkpoint(s) of size 15" in output
    assert "entry #4 is log entry 15 of 16" in output  # the entry appended after the older one
    assert _verify_log(bundle, pub, capsys)[0] == 0  # the log key alone: no witness demanded


def test_log_bundle_fails_on_every_changed_byte(
    log_bundle: tuple[Path, Path, Path], pub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A changed byte of the manifest fails with the log key alone too (a witness's cosignature can
    only be checked with its key): a renamed ``"log"`` key must not drop the log out of the report."""
    bundle, kept, wpub = log_bundle
    # the saga files and checkpoint.txt are what test_every_changed_byte_fails flips already
    files = [bundle / "log-checkpoint.txt", bundle / "bundle.json"]
    key_only = [str(bundle), "--key", str(pub)]
    every = [*key_only, "--witness-key", str(wpub), "--since", str(kept)]
    for path in files:
        original = path.read_bytes()
        for offset in range(len(original)):
            altered = bytearray(original)
            altered[offset] ^= 0x01
            path.write_bytes(bytes(altered))
            for args in (every, key_only) if path.name == "bundle.json" else (every,):
                code, output = _verify_args(args, capsys)
                assert code == 1, f"{path.name} byte {offset} changed, still verified: {output}"
        path.write_bytes(original)
    assert _verify_args(every, capsys)[0] == 0
    assert _verify_args(key_only, capsys)[0] == 0


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        ('\n  "log": {', '\n  "lof": {', "bundle.json is malformed: unknown key(s) 'lof'"),
        ('"since": [', '"sinc": [', "section is malformed: missing key(s) 'since'; unknown key(s) 'sinc'"),
        ('"seq": ', '"note": 1, "seq": ', "its log proof is malformed: unknown key(s) 'note'"),
        ('"format": ', '"signed": true, "format": ', "bundle.json is malformed: unknown key(s) 'signed'"),
    ],
)
def test_a_renamed_missing_or_unknown_manifest_key_fails(
    log_bundle: tuple[Path, Path, Path],
    pub: Path,
    capsys: pytest.CaptureFixture[str],
    old: str,
    new: str,
    complaint: str,
) -> None:
    bundle, _, _ = log_bundle
    manifest = bundle / "bundle.json"
    text = manifest.read_text(encoding="utf-8")
    assert old in text
    manifest.write_text(text.replace(old, new, 1), encoding="utf-8")
    code, output = _verify_log(bundle, pub, capsys)
    assert (code, complaint in output) == (1, True), output


def test_log_bundle_refuses_a_fork_and_a_missing_quorum(
    log_bundle: tuple[Path, Path, Path],
    pub: Path,
    key: SigningKey,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bundle, kept, wpub = log_bundle
    older = open_log_checkpoint(kept.read_text(), key.verifier)
    other_root = _note.b64(bytes(32))
    text = f"{older.origin}\n{older.size}\n{other_root}\n"
    forked = tmp_path / "forked.txt"
    forked.write_text(_note.join_note(text, [_note.sign_text(text, key)]))
    code, output = _verify_log(bundle, pub, capsys, "--since", str(forked))
    assert code == 1
    assert "a different root at that size is a fork" in output
    stranger = tmp_path / "stranger.pub"
    stranger.write_text(SigningKey.generate("witness.example", witness=True).verifier.to_text())
    code, output = _verify_log(bundle, pub, capsys, "--witness-key", str(stranger))
    assert code == 1
    assert "0 valid cosignature(s)" in output
    code, output = _verify_log(bundle, pub, capsys, "--witness-key", str(wpub), "--quorum", "2")
    assert code == 1
    assert "needs 2 witness keys" in output


def test_the_bundle_report_says_who_asked_and_who_approved(
    key: SigningKey, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The offline verifier reads the gate facts from the chain (docs/journal.md): the requester,
    the separation rule, the tool definition approved under, and the approvers."""
    from sagacity import Reversibility, acting_as, tool
    from sagacity.tools import registry

    with registry.isolated():

        @tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
        def payout(amount: str) -> str:
            return "paid"

        sg = Sagacity("memory://")
        with acting_as("alice@example.com"):
            seq = sg.run("payout-1", payout, "10.00").awaiting[0].journal_seq
        sg.approve("payout-1", seq, "bob@example.com")
        sg.approve("payout-1", seq, "carol@example.com")
        definition = payout.spec.definition_hash
        bundle = write_bundle(sg, ["payout-1"], create_checkpoint(sg, key, "test.example/j"), tmp_path / "b")
    pub = tmp_path / "test.pub"
    pub.write_text(key.verifier.to_text() + "\n")
    code, output = _verify(bundle, pub, capsys)
    assert code == 0, output
    assert (
        f"  gate seq {seq} payout: requested by alice@example.com, approved by bob@example.com, "
        f"carol@example.com; requester may not approve; definition {definition}"
    ) in output


# -- RFC 3161 timestamps, from a local TSA the test starts ------------------------------------------
def test_timestamped_log_bundle_verifies_offline_against_the_tsa_root(
    journal: Sagacity,
    checkpoint: Checkpoint,
    key: SigningKey,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tsa = LocalTSA()
    log = checkpoint_log(journal, key, "test.example/journal")
    with serve(tsa) as url:
        token = request_timestamp(url, log.text.encode())
    made = write_bundle(journal, ["order 3/ü"], checkpoint, tmp_path / "bundle", log=log, log_timestamp=token)
    root = tmp_path / "tsa-root.pem"
    root.write_bytes(tsa.root_pem)
    pub = tmp_path / "test.pub"
    pub.write_text(key.verifier.to_text())
    args = [str(made), "--key", str(pub), "--tsa-cert", str(root)]
    code, output = _verify_args(args, capsys)
    assert code == 0, output
    assert "timestamped 20" in output
    other = tmp_path / "other-root.pem"
    other.write_bytes(LocalTSA().root_pem)
    code, output = _verify_args([*args[:-1], str(other)], capsys)
    assert code == 1
    assert "timestamp token does not verify" in output
    # the token covers this checkpoint's text: moved onto another checkpoint it fails
    (made / "log-checkpoint.tsr").write_bytes(token[:-1] + bytes([token[-1] ^ 1]))  # the TSA's signature
    assert _verify_args(args, capsys)[0] == 1
    with serve(tsa) as url:
        (made / "log-checkpoint.tsr").write_bytes(request_timestamp(url, b"another checkpoint\n"))
    code, output = _verify_args(args, capsys)
    assert code == 1
    assert "Mismatch between messages" in output
    (made / "log-checkpoint.tsr").unlink()
    assert "cannot read the timestamp token" in _verify_args(args, capsys)[1]


def test_a_tsa_that_is_down_or_answers_garbage_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="did not answer"):
        request_timestamp("http://127.0.0.1:9/", b"x", timeout=5)
    garbage = LocalTSA()
    garbage.respond = lambda request: b"\x30\x03\x02\x01\x02"  # type: ignore[method-assign]
    with serve(garbage) as url, pytest.raises(CheckpointError, match=r"not a TimeStampResp|refused"):
        request_timestamp(url, b"x")
