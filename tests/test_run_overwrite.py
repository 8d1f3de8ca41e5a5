"""`gapbench run -o DIR` over an existing run directory: a re-run of the same task and retriever replaces it; a run of
another task or retriever is refused (exit 2, naming both) unless --overwrite is given."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gapbench
from gapbench.cli import main
from gapbench.store import RunDirInUse, check_replace, run_identity

SCIFACT = Path("tests/fixtures/beir/scifact").resolve()


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


@pytest.fixture
def other_task(tmp_path):
    """The SciFact fixture with one query's judgement changed: another task (other qrels), another name."""
    other = tmp_path / "scifact_edited"
    shutil.copytree(SCIFACT, other)
    qrels = other / "qrels" / "test.tsv"
    lines = qrels.read_text().splitlines()
    lines[1] = "\t".join(lines[1].split("\t")[:2] + ["2"])
    qrels.write_text("\n".join(lines) + "\n")
    return other


def test_a_run_of_another_task_or_retriever_is_not_replaced_without_overwrite(tmp_path, other_task, capsys):
    out = tmp_path / "run"
    assert main(["run", str(SCIFACT), "-r", "bm25", "-m", "nDCG@10", "-o", str(out)]) == 0
    first = _manifest(out)
    capsys.readouterr()
    # another task into the same folder: refused before any work, the first run untouched
    assert main(["run", str(other_task), "-r", "bm25", "-m", "nDCG@10", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gapbench: error: {out} holds a run of task '{SCIFACT}' (corpus ")
    assert f"writing a run of task '{other_task}' (corpus " in err
    assert "would replace it with one of another task; give another --output folder, or add --overwrite" in err
    assert _manifest(out) == first
    # another retriever
    assert main(["run", str(SCIFACT), "-r", "bm25-lucene", "-m", "nDCG@10", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "with retriever 'bm25' (fingerprint " in err and "with retriever 'bm25-lucene' (fingerprint " in err
    assert "one of another retriever;" in err
    assert _manifest(out) == first
    # the same task and retriever again: a re-run, allowed
    assert main(["run", str(SCIFACT), "-r", "bm25", "-m", "nDCG@10", "-o", str(out)]) == 0
    assert _manifest(out)["retriever"] == first["retriever"]
    # --overwrite: replaced
    assert main(["run", str(other_task), "-r", "bm25-lucene", "-m", "nDCG@10", "-o", str(out), "--overwrite"]) == 0
    replaced = _manifest(out)
    assert replaced["task"]["name"] == str(other_task) and replaced["retriever"]["name"] == "bm25-lucene"


def test_the_library_refuses_without_cli_words_and_takes_overwrite(tmp_path, other_task):
    out = tmp_path / "run"
    gapbench.run(str(SCIFACT), "bm25", measures=["nDCG@10"], output=out)
    with pytest.raises(RunDirInUse) as info:  # the `what` of the error, without the fix, is what the CLI words
        gapbench.run(str(other_task), "bm25", measures=["nDCG@10"], output=out)
    assert "--" not in str(info.value) and str(info.value).endswith(
        "; give another folder, or allow the replacement (overwrite=True).")
    result = gapbench.run(str(other_task), "bm25", measures=["nDCG@10"], output=out, overwrite=True)
    assert result.manifest.task.name == str(other_task) == _manifest(out)["task"]["name"]


def test_check_replace_by_hand(tmp_path):
    """Same content is the same task whatever its name (a folder at another path); the fingerprint decides the
    retriever, with the reranker and the augmentation; nothing there is nothing to compare."""
    out = tmp_path / "run"
    gapbench.run(str(SCIFACT), "bm25", measures=["nDCG@10"], output=out)
    same = run_identity(_manifest(out))
    assert same["task"] == str(SCIFACT) and same["retriever"] == "bm25" and same["reranker"] is None
    check_replace(out, same)
    assert same["revision"] == "local"  # a folder: its identity is its content
    check_replace(out, {**same, "task": "/elsewhere/scifact"})  # moved: same content
    # a registered task is its name: the same name is the same task (a new revision of its data included)
    named = {**same, "revision": "abc", "task": "impliret/unispeaker/wknow"}
    (out / "manifest.json").write_text(json.dumps({**_manifest(out), "task": {**_manifest(out)["task"],
                                                   "revision": "abc", "name": "impliret/unispeaker/wknow"}}))
    check_replace(out, {**named, "corpus": "0" * 64})
    with pytest.raises(RunDirInUse, match="another task; give"):
        check_replace(out, {**named, "task": "impliret/multispeaker/wknow"})
    gapbench.run(str(SCIFACT), "bm25", measures=["nDCG@10"], output=out, overwrite=True)
    check_replace(out, lambda: {**same, "retriever": "renamed"})  # the fingerprint decides
    with pytest.raises(RunDirInUse, match="another task; give"):
        check_replace(out, {**same, "qrels": "0" * 64})
    with pytest.raises(RunDirInUse, match="another task and retriever; give"):
        check_replace(out, {**same, "corpus": "0" * 64, "fingerprint": "1" * 64})
    with pytest.raises(RunDirInUse, match="another retriever; give"):
        check_replace(out, {**same, "reranker": "tournament"})
    with pytest.raises(RunDirInUse, match="another retriever; give"):
        check_replace(out, {**same, "augment": "argus-expand"})
    check_replace(tmp_path / "absent", same)


def test_a_damaged_manifest_is_not_replaced(tmp_path):
    out = tmp_path / "run"
    gapbench.run(str(SCIFACT), "bm25", measures=["nDCG@10"], output=out)
    identity = run_identity(_manifest(out))
    check_replace(out, identity)
    (out / "manifest.json").write_text("{not json")
    with pytest.raises(RunDirInUse, match="whose manifest cannot be read"):
        check_replace(out, identity)
    # a manifest without the content fingerprints (hand-made, old) compares task names
    doc = json.loads(json.dumps({"task": {"name": "t"}, "retriever": {"name": "bm25"}}))
    assert run_identity(doc)["corpus"] is None
