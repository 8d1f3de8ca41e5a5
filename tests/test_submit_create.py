"""`gapbench submit create`: a submission from run directories, and the input it refuses (exit 2, one line naming the
fix). The whole path from `gapbench run` to a rebuilt board runs in tests/test_leaderboard_docs.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import gapbench
from gapbench.cli import main
from gapbench.products.submissions.files import sha256_file
from gapbench.products.submissions.validate import validate_submission

TASK = "impliret/unispeaker/wknow"
STEM = "impliret__unispeaker__wknow"
ABOUT = ["--system", "my-bm25", "--description", "bm25s defaults.", "--contact", "Me <me@example.org>"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / STEM
    gapbench.run(TASK, "bm25", k=30, output=out)
    return out


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("gapbench: error: ") and err.count("\n") == 1, err
    return err


def test_a_run_directory_becomes_a_valid_submission(run_dir, tmp_path, capsys):
    out = tmp_path / "sub"
    assert main(["submit", "create", str(run_dir), "--out", str(out), *ABOUT, "--k", "10", "--digits", "4"]) == 0
    assert f"wrote {out / 'submission.json'} and 1 run file(s)" in capsys.readouterr().out
    meta = json.loads((out / "submission.json").read_text())
    assert (meta["system"], meta["suite"], meta["k"], meta["contact"]) == ("my-bm25", "impliret", 10,
                                                                          "Me <me@example.org>")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert meta["adapter"] == {"name": "bm25", "config": manifest["retriever"]["config"],
                               "fingerprint": manifest["retriever"]["fingerprint"]}
    entry = meta["tasks"][TASK]
    assert entry == {"revision": gapbench.get_task(TASK).revision, "run": f"runs/{STEM}.trec.gz",
                     "sha256": sha256_file(out / entry["run"])}
    # the top 10 of each query, scores rounded to 4 significant digits (ties that rounding makes are then ranked by
    # the tie rule, so compare per query and document)
    with gzip.open(run_dir / "run.trec.gz", "rt") as fh:
        ran = [line.split() for line in fh]
    with gzip.open(out / entry["run"], "rt") as fh:
        written = [line.split() for line in fh]
    head = [r for r in ran if int(r[3]) <= 10]
    assert len(written) == len(head) == 10 * 1500
    assert {(w[0], w[2]): float(w[4]) for w in written} == {(r[0], r[2]): float(f"{float(r[4]):.4g}") for r in head}
    report = validate_submission(out)
    assert report.ok and [p.message for p in report.warnings][0].startswith("covers 1 of 6 tasks of suite 'impliret'")


def test_a_suite_runs_folder_is_read_as_its_run_directories(run_dir, tmp_path):
    out = tmp_path / "sub"
    assert main(["submit", "create", str(run_dir.parent), "--out", str(out), *ABOUT]) == 0
    assert list(json.loads((out / "submission.json").read_text())["tasks"]) == [TASK]


@pytest.mark.parametrize("args, message", [
    (["NOWHERE"], "NOWHERE does not exist; give the folders written by `gapbench run TASK -r RETRIEVER -o DIR`"),
    (["RUN", "RUN"], f"more than one run of task(s) {TASK}; give one run directory per task."),
    (["RUN", "--suite", "bright"], f"task(s) {TASK} are not part of suite 'bright'"),
    (["RUN", "--suite", "nosuch"], "unknown suite 'nosuch'."),
    (["RUN", "--k", "0"], "--k 0: give 1 to 1000 documents per query"),
    (["RUN", "--digits", "30"], "--digits 30: give 1 to 17 significant digits."),
])
def test_bad_input_exits_2_naming_the_fix(run_dir, tmp_path, capsys, args, message):
    args = [str(run_dir) if a == "RUN" else str(tmp_path / a) if a == "NOWHERE" else a for a in args]
    assert main(["submit", "create", *args, "--out", str(tmp_path / "sub"), *ABOUT]) == 2
    assert message in _error(capsys)
    assert not (tmp_path / "sub" / "submission.json").exists()


def test_an_existing_folder_is_not_written_into(run_dir, tmp_path, capsys):
    out = tmp_path / "sub"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / "old.trec").write_text("1 Q0 d 1 1.0 x\n")
    assert main(["submit", "create", str(run_dir), "--out", str(out), *ABOUT]) == 2
    assert f"--out {out} exists and is not an empty folder" in _error(capsys)
    assert sorted(p.name for p in out.rglob("*")) == ["old.trec", "runs"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["submit", "create", str(run_dir), "--out", str(empty), *ABOUT]) == 0
    capsys.readouterr()
    # an invalid system name is refused by the writer before anything is written
    assert main(["submit", "create", str(run_dir), "--out", str(tmp_path / "bad"), "--system", "a b",
                 "--description", "d", "--contact", "c"]) == 2
    assert "system name 'a b'" in _error(capsys)
