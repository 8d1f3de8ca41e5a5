"""leaderboards/README.md and leaderboards/seed_impliret.py as a submitter and a maintainer use them.

The README's blocks marked ``<!-- run by tests: NAME -->`` run here as written (tests/docs_blocks.py reads and runs
them), in a copy of leaderboards/ (they write submissions and re-render the board), in order: the submitter's path from ``gapbench run`` through ``gapbench submit create``, validate, score and
``gapbench leaderboard build`` to a board that shows the run's own numbers; the Python way to the same submission; and
the seed script, which must re-create the committed bm25 submission (the same run lines, scores and board).
Both start, as a maintainer's checkout does after one build, with the committed submissions' validation, scores and
miss profiles in gapbench's cache (``shipped_cached``, tests/fx_boards.py; that cold build is checked byte for byte
against the committed board in tests/test_leaderboard_page.py); what the blocks submit is new and computed cold.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from docs_blocks import block, blocks, run_block, user_env

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "leaderboards" / "README.md"
BOARD = "leaderboards/impliret"
MINE = f"{BOARD}/submissions/my-retriever"


def test_the_readme_blocks_this_file_runs():
    """tests/test_docs.py checks that every block is marked; these four are run here."""
    assert sorted(b.name for b in blocks(README) if b.kind == "run by tests") == sorted(
        ["submit-create", "submit-check", "python", "seed"])
    text = README.read_text(encoding="utf-8")
    # the layering moved these modules: the old paths must not come back
    assert "gapbench.suites import run_suite" not in text and "from gapbench.submissions" not in text
    assert "gapbench.leaderboard " not in (ROOT / "leaderboards" / "seed_impliret.py").read_text(encoding="utf-8")


def _copy(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    shutil.copytree(ROOT / "leaderboards", work / "leaderboards", ignore=shutil.ignore_patterns("__pycache__"))
    return work


def _run_block(name: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_block(block(README, name), cwd, user_env({"GAPBENCH_PROGRESS": "off"}))


def _entries(work: Path) -> dict:
    board = json.loads((work / BOARD / "leaderboard.json").read_text(encoding="utf-8"))
    return {e["system"]: e for e in board["entries"]}


@pytest.mark.slow
def test_the_submitters_path_from_gapbench_run_to_a_rebuilt_board(tmp_path, shipped_cached):
    work = _copy(tmp_path)
    _run_block("submit-create", work)
    from gapbench.suites import get_suite
    from gapbench.task import get_task

    tasks = get_suite("impliret").tasks
    meta = json.loads((work / MINE / "submission.json").read_text(encoding="utf-8"))
    assert (meta["system"], meta["suite"], meta["k"], meta["adapter"]["name"]) == ("my-retriever", "impliret", 100,
                                                                                     "bm25")
    assert meta["models"] == [] and sorted(meta["tasks"]) == sorted(tasks)
    assert all(meta["tasks"][t]["revision"] == get_task(t).revision for t in tasks)

    out = _run_block("submit-check", work)
    assert "valid submission (6 runs)" in out.stdout
    assert (work / MINE / "scores.json").is_file()
    # the board shows the numbers `gapbench run` printed for each task, recomputed from the submitted files
    mine = _entries(work)["my-retriever"]
    for task in tasks:
        ran = json.loads((work / "runs-out" / task.replace("/", "__") / "results.json").read_text(encoding="utf-8"))
        assert mine["tasks"][task]["mean"] == pytest.approx(ran["measures"]["nDCG@10"], abs=1e-12), task
    assert mine["average"] == pytest.approx(sum(mine["tasks"][t]["mean"] for t in tasks) / len(tasks), abs=1e-12)
    assert "my-retriever" in (work / BOARD / "README.md").read_text(encoding="utf-8")
    assert {"bm25", "bm25-lucene", "dense", "my-retriever"} <= set(_entries(work))
    # export-trec gives back the submitted rankings
    for task in tasks:
        stem = task.replace("/", "__")
        exported = (work / "runs" / f"{stem}.trec").read_text(encoding="utf-8").split("\n")
        with gzip.open(work / MINE / "runs" / f"{stem}.trec.gz", "rt", encoding="utf-8") as fh:
            submitted = fh.read().split("\n")
        assert [line.split()[:4] for line in exported if line] == [line.split()[:4] for line in submitted if line]
    assert any((work / "results").rglob("*.json"))

    _run_block("python", work)  # the Python way writes the same submission under another name
    theirs = work / f"{BOARD}/submissions/my-retriever-py"
    py_meta = json.loads((theirs / "submission.json").read_text(encoding="utf-8"))
    assert py_meta["adapter"] == meta["adapter"] and sorted(py_meta["tasks"]) == sorted(meta["tasks"])
    for task, entry in meta["tasks"].items():  # the same rankings; the run tag is the system's name
        assert _rankings(theirs / py_meta["tasks"][task]["run"]) == _rankings(work / MINE / entry["run"])
    # scored and on the rebuilt board, with the command line's numbers
    assert _entries(work)["my-retriever-py"]["average"] == pytest.approx(mine["average"], abs=1e-12)


def _rankings(path: Path) -> list[list[str]]:
    """A gzipped TREC run's lines without the tag column."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [line.split()[:5] for line in fh]


@pytest.mark.slow
def test_the_seed_script_recreates_the_committed_submission(tmp_path, shipped_cached):
    work = _copy(tmp_path)
    # start from nothing: the script must make the folder, not just leave the committed one in place
    shutil.rmtree(work / BOARD / "submissions" / "bm25")
    _run_block("seed", work)
    committed, made = ROOT / BOARD / "submissions" / "bm25", work / BOARD / "submissions" / "bm25"
    files = sorted(p.relative_to(committed).as_posix() for p in committed.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(made).as_posix() for p in made.rglob("*") if p.is_file())
    # the same lines in every run file (the gzip bytes, and so the sha256s, change with gapbench's gzip level)
    for rel in files:
        if rel.endswith(".trec.gz"):
            with gzip.open(made / rel, "rt") as a, gzip.open(committed / rel, "rt") as b:
                assert a.read() == b.read(), rel
    old, new = (json.loads((d / "submission.json").read_text(encoding="utf-8")) for d in (committed, made))
    for meta in (old, new):
        for entry in meta["tasks"].values():
            entry.pop("sha256")
    assert new == old
    old, new = (json.loads((d / "scores.json").read_text(encoding="utf-8")) for d in (committed, made))
    for scores in (old, new):
        for entry in scores["tasks"].values():
            entry.pop("run_sha256")
    assert new["tasks"] == old["tasks"] and new["full_benchmark_avg"] == old["full_benchmark_avg"]
    # the re-rendered board ranks the same systems the same way with the same numbers
    before, after = _entries(ROOT), _entries(work)
    assert set(before) == set(after)
    for system, entry in before.items():
        for key in ("average", "rank", "position", "rank_stability", "tasks"):
            assert after[system][key] == entry[key], (system, key)
