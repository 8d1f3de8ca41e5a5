"""Issue 31 beyond exit codes (the one-line refusals are cases in tests/hostile/cases_newer.py): what is left on disk
after a refused or failed command, the values a refused-then-fixed input gives, and the notes `regress --rescore auto`
prints when it could only check consistency (issue 25)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gapbench.cli import main
from gapbench.errors import ConfigError
from hostile.cases_newer import FOLDER, DOCS, _runs


def _write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def _one_line(err: str) -> str:
    assert err.startswith("gapbench: error: ") and err.count("\n") == 1, err
    return err


# ------------------------------------------------------------------ 1. paths confined to the task's folder

@pytest.mark.parametrize("split", ["../other", "/etc/hosts", "..", ".", "qrels/other", "a\\b", "", " test"])
def test_a_split_that_is_not_a_plain_name_is_refused(tmp_path, split):
    from gapbench.tasks.local import beir_folder_task

    _write(tmp_path, FOLDER)
    with pytest.raises(ConfigError, match="is not a plain name"):
        beir_folder_task(tmp_path / "f", split)


def test_a_plain_split_still_loads_and_a_symlink_out_of_the_folder_does_not(tmp_path):
    from gapbench.task import get_task

    _write(tmp_path, FOLDER)
    data = get_task(f"{tmp_path / 'f'}:split=other").load()
    assert {q: dict(j) for q, j in data.qrels.items()} == {"q1": {"d2": 1}}
    (tmp_path / "f" / "qrels" / "linked.tsv").symlink_to(tmp_path / "other.tsv")
    with pytest.raises(ConfigError, match="leads outside its folder"):
        get_task(f"{tmp_path / 'f'}:split=linked").load()


# ------------------------------------------------------------------ 3. obliq build

def _labels_build(tmp_path: Path, labels: str, *extra: str) -> tuple[int, Path]:
    _write(tmp_path, FOLDER)
    (tmp_path / "labels.tsv").write_text(labels, encoding="utf-8")
    out = tmp_path / "task"
    code = main(["obliq", "build", str(tmp_path / "f" / "corpus.jsonl"), "--lens", "the topic", "--out", str(out),
                 "--labels", str(tmp_path / "labels.tsv"), "--labels-as", "documents", *extra])
    return code, out


def test_a_failed_build_leaves_no_output_folder(tmp_path, capsys):
    # every label has one document: no cluster reaches min_cluster 2, so the build stops at stage 3
    code, out = _labels_build(tmp_path, "d1\ta\nd2\tb\nd3\tc\n", "--min-cluster", "2")
    err = capsys.readouterr().err.splitlines()[-1]  # after the cost estimate printed before any work
    assert code == 2 and err.startswith("gapbench: error: ") and "lost at stage 3 (collapse)" in err
    assert not out.exists()


def test_unknown_label_ids_are_counted_not_dropped_silently(tmp_path, capsys):
    code, out = _labels_build(tmp_path, "d1\tpets\nd2\tpets\nd4\tpets\nx9\tpets\nx8\tbirds\n", "--min-cluster", "2",
                              "--json")
    assert code == 0, capsys.readouterr().err
    card = json.loads(capsys.readouterr().out)
    counts = card["counts"]["collapse"]
    assert counts["labels given"] == 5 and counts["labels of documents outside the corpus built from"] == 2
    assert (out / "card.json").is_file()


def test_the_lens_is_bounded_and_read_as_checked_text(tmp_path):
    from gapbench.analyses.obliq_build.obliq_options import ObliqBuildOptions, read_lens
    from gapbench.errors import DataFormatError

    assert ObliqBuildOptions(lens="x" * 2000, out=tmp_path / "t").lens == "x" * 2000
    with pytest.raises(ConfigError, match="lens is 2,001 characters long, over 2,000"):
        ObliqBuildOptions(lens="x" * 2001, out=tmp_path / "t")
    (tmp_path / "lens.txt").write_bytes(b"the \xff stance")
    with pytest.raises(DataFormatError, match="not valid UTF-8"):
        read_lens(str(tmp_path / "lens.txt"))


# ------------------------------------------------------------------ 4. regress across depths

def test_measure_depth():
    from gapbench.products.regress import measure_depth

    assert [measure_depth(m) for m in ("nDCG@10", "R@100", "ndcg_cut_10", "P.5", "AP", "RR", "R")] == \
        [10, 100, 10, 5, None, None, None]


def test_regress_across_depths_passes_on_a_measure_within_the_smaller_k(tmp_path, capsys):
    root = _runs()
    for k in (2, 5):
        shutil.copytree(root / f"k{k}", tmp_path / f"k{k}")
    # RR@10 reads past k=2: refused; the same pair on nothing deeper than rank 2 would be gated (none is stored)
    assert main(["regress", "--baseline", str(tmp_path / "k5"), "--candidate", str(tmp_path / "k2"), "--measure",
                 "RR@10", "--rescore", "never"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "baseline searched to k=5 and the candidate to k=2, and RR@10 reads to rank 10, past k=2" in err
    assert "re-run the candidate with --k 5" in err


# ------------------------------------------------------------------ issue 25: --rescore auto says what it could not do

def test_rescore_auto_that_only_checked_consistency_says_so_first(tmp_path, capsys):
    root = _runs()
    for side in ("base", "cand"):
        shutil.copytree(root / "k5", tmp_path / side)
        path = tmp_path / side / "f" / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["task"]["spec"] = str(tmp_path / "gone")  # the folder it was made on is not on this machine
        path.write_text(json.dumps(manifest))
    junit, summary = tmp_path / "gate.xml", tmp_path / "summary.md"
    code = main(["regress", "--baseline", str(tmp_path / "base"), "--candidate", str(tmp_path / "cand"), "--junit",
                 str(junit), "--summary", str(summary)])
    out, err = capsys.readouterr()
    assert code == 0
    first = err.splitlines()[0]
    assert first.startswith("gapbench: warning: --rescore auto checked 1 of 1 task(s) for consistency only")
    assert "--rescore always" in first
    assert "for consistency only, not re-scored" in junit.read_text()
    assert "Warning: --rescore auto checked 1 of 1 task(s) for consistency only" in summary.read_text()
    # always: the same pair is refused, as a CI gate should be
    assert main(["regress", "--baseline", str(tmp_path / "base"), "--candidate", str(tmp_path / "cand"),
                 "--rescore", "always"]) == 2


def test_ci_docs_and_example_workflows_gate_with_rescore_always():
    root = Path(__file__).resolve().parent.parent
    texts = [root / "docs" / "ci-regression.md", root / "docs" / "example-workflow.yml",
             *sorted((root / "examples").rglob("*.yml")), *sorted((root / "examples").rglob("*.yaml"))]
    gates = [line for path in texts if path.is_file() for line in path.read_text().splitlines()
             if "gapbench regress" in line and "--baseline" in line]
    assert gates, "no regress command found in the CI docs"
    assert all("--rescore always" in line for line in gates), [g for g in gates if "--rescore always" not in g]


# ------------------------------------------------------------------ 5. completion flags

@pytest.mark.parametrize("argv", [["--install-completion", "junkshell"], ["--install-completion=junk"],
                                  ["--show-completion", "nosh"]])
def test_completion_with_an_unknown_shell_writes_nothing(tmp_path, argv):
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "SHELL": "/bin/bash"}
    proc = subprocess.run([sys.executable, "-m", "gapbench", *argv], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gapbench: error: ") and proc.stderr.count("\n") == 1
    assert "nothing was written" in proc.stderr
    assert list(home.rglob("*")) == []


def test_completion_for_a_named_shell_is_for_that_shell(tmp_path):
    # typer alone would install for the detected shell (bash here) whatever shell was named
    env = {**os.environ, "HOME": str(tmp_path), "SHELL": "/bin/bash"}
    proc = subprocess.run([sys.executable, "-m", "gapbench", "--install-completion", "zsh"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"zsh completion installed in {tmp_path / '.zfunc' / '_gapbench'}")
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".zfunc", ".zshrc", "_gapbench"]


# ------------------------------------------------------------------ 6. trec_eval's list form, names in any case

def test_trec_list_form_gives_p_at_5_and_10(tmp_path, capsys):
    (tmp_path / "run.txt").write_text("".join(f"q1 Q0 d{i} {i} {10 - i}.0 sys\n" for i in range(1, 11)))
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 1\nq1 0 d7 1\n")
    assert main(["evaluate", "--run", str(tmp_path / "run.txt"), "--qrels", str(tmp_path / "qrels.txt"), "-m",
                 "P.5,10", "--json"]) == 0
    means = json.loads(capsys.readouterr().out)["measures"]
    assert means == {"P@5": pytest.approx(2 / 5), "P@10": pytest.approx(3 / 10)}  # d1, d2 in the top 5; d7 too


def test_join_lists_and_case():
    from gapbench.evaluation.evaluation import parse_measures, split_measures
    from gapbench.trec_names import join_lists

    assert join_lists(["P.5", "10", "ndcg_cut.5", "10", "map"]) == ["P.5", "P.10", "ndcg_cut.5", "ndcg_cut.10", "map"]
    assert join_lists(["nDCG@10", "20"]) == ["nDCG@10", "20"]  # not trec_eval's form: the 20 stays and is refused
    assert [str(m) for m in parse_measures(split_measures("ndcg@10 rr@10 r@100 ap judged@10 MAP"))] == \
        ["nDCG@10", "RR@10", "R@100", "AP", "Judged@10", "AP"]


# ------------------------------------------------------------------ no command writes outside its output folder

def test_refused_commands_leave_the_working_folder_as_it_was(tmp_path, capsys, monkeypatch):
    _write(tmp_path, FOLDER)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    monkeypatch.chdir(tmp_path)
    for argv in (["run", f"{tmp_path / 'f'}:split=../other", "-r", "bm25", "-o", str(tmp_path / "out")],
                 ["obliq", "build", str(tmp_path / "f" / "corpus.jsonl"), "--lens", "x" * 3000, "--out",
                  str(tmp_path / "t")]):
        assert main(argv) == 2
    capsys.readouterr()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert len(DOCS) == 5
