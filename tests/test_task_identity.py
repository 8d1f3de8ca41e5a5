"""A local task is its content, not its path: the same BEIR folder (or TREC files, or data_dir= copy) at two paths or on
two machines is one task for compare, regress and report, re-scored from the data on this machine; folder paths take
task options (DIR:split=dev); run directories written before task identity existed still load and pair."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gapbench
from gapbench.cli import main
from gapbench.errors import ConfigError, DataFormatError
from gapbench.evaluation.comparison import compare_run_dirs
from gapbench.evaluation.evaluation import evaluate
from gapbench.identity import content_key, identity_of
from gapbench.products.regress import RegressionInputError, regress
from gapbench.store import load_manifest, load_results, load_run
from gapbench.formats import write_trec_run
from gapbench.types import Run

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT / "tests" / "fixtures" / "beir" / "scifact"
TREC = ROOT / "tests" / "fixtures" / "local_trec"
OLD_RUN = ROOT / "tests" / "fixtures" / "outputs_v0_1" / "local_beir_run"


def _copy(dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(SCIFACT, dest))


def _key_of(folder: Path, split: str = "test") -> str:
    """The identity the folder's content has: sha256 over the three fingerprints gapbench.types computes."""
    data = gapbench.get_task(str(folder) if split == "test" else f"{folder}:split={split}").load()
    text = f"{data.corpus.fingerprint}\n{data.queries.fingerprint}\n{data.qrels.fingerprint}"
    return "local:" + hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.fixture()
def two_paths(tmp_path):
    """bm25 on one copy of the SciFact fixture (the 'workstation') and bm25 k1=0.5 on another (the 'CI runner')."""
    a, b = _copy(tmp_path / "home" / "data" / "scifact"), _copy(tmp_path / "runner" / "work" / "scifact")
    gapbench.run(str(a), "bm25", k=10, output=tmp_path / "base" / "scifact")
    gapbench.run(str(b), "bm25:k1=0.5", k=10, output=tmp_path / "cand" / "scifact")
    return tmp_path, a, b


def test_the_same_folder_at_two_paths_is_one_task_and_both_are_rescored(two_paths, capsys):
    root, a, b = two_paths
    key = _key_of(a)
    assert key == _key_of(b)
    base, cand = (identity_of(root / s / "scifact", load_results(root / s / "scifact")) for s in ("base", "cand"))
    # the names (paths) differ, the identity does not
    assert (base.name, cand.name) == (str(a.resolve()), str(b.resolve())) and base.key == cand.key == key
    report = regress(root / "base", root / "cand", n_permutations=1000)
    label = f"scifact [{key}]"
    assert [(r.task, r.n_queries) for r in report.rows] == [(label, 4)]
    assert [(c.task, c.rescored) for c in report.checks] == [(label, True)] and report.passed
    # the baseline's mean is its run file scored on the folder's qrels
    data = gapbench.get_task(str(b)).load()
    ref = evaluate(load_run(root / "base" / "scifact"), data.qrels, ["nDCG@10"])
    assert report.rows[0].baseline == ref.means["nDCG@10"]
    capsys.readouterr()
    assert main(["regress", "--baseline", str(root / "base"), "--candidate", str(root / "cand"),
                 "--permutations", "1000"]) == 0
    out = capsys.readouterr().out
    assert f"Re-scored from run.trec.gz against the task's qrels: {label}." in out
    # compare pairs them as one task and re-scores them too
    assert main(["compare", str(root / "base" / "scifact"), str(root / "cand" / "scifact"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["checks"] == [{"task": label, "rescored": True, "why": ""}] and len(doc["systems"]) == 2


def test_the_workstation_folder_gone_the_runner_copy_rescores_both(two_paths):
    root, a, b = two_paths
    shutil.rmtree(a)  # the baseline's recorded path does not exist here, as on a CI runner
    report = regress(root / "base", root / "cand", n_permutations=1000)
    assert report.checks[0].rescored and report.passed
    # re-scoring is real: the baseline's run file replaced by a worse one (each ranking reversed) is caught, although
    # its own folder is gone
    run = load_run(root / "base" / "scifact")
    reversed_run = Run({q: {d: float(i) for i, (d, _) in enumerate(ranking)} for q, ranking in run.items()}, run.name)
    write_trec_run(reversed_run, root / "base" / "scifact" / "run.trec.gz")
    with pytest.raises(DataFormatError, match=r"metrics\.tsv: task scifact \[local:[0-9a-f]{16}\], nDCG@10: query "):
        regress(root / "base", root / "cand", n_permutations=1000)


def test_no_copy_here_says_how_to_point_at_the_data_and_data_rescores(two_paths, capsys):
    root, a, b = two_paths
    shutil.rmtree(a)
    moved = root / "elsewhere" / "scifact"
    moved.parent.mkdir()
    shutil.move(b, moved)
    key = _key_of(moved)
    label = f"scifact [{key}]"
    report = regress(root / "base", root / "cand", n_permutations=1000)
    why = report.checks[0].why
    assert not report.checks[0].rescored
    assert why.startswith(f"its folder {a.resolve()} does not exist here; its folder {b.resolve()} does not exist here;"
                          " give its data on this machine with --data DIR")
    capsys.readouterr()
    assert main(["regress", "--baseline", str(root / "base"), "--candidate", str(root / "cand"),
                 "--permutations", "1000", "--rescore", "always"]) == 2
    err = capsys.readouterr().err
    assert f"task {label} cannot be re-scored here: its folder {a.resolve()} does not exist here" in err
    assert "--data DIR" in err
    # pointed at the data, both sides are re-scored
    assert main(["regress", "--baseline", str(root / "base"), "--candidate", str(root / "cand"),
                 "--permutations", "1000", "--data", str(moved), "--rescore", "always"]) == 0
    assert f"Re-scored from run.trec.gz against the task's qrels: {label}." in capsys.readouterr().out
    cmp = compare_run_dirs([root / "base" / "scifact", root / "cand" / "scifact"], data=[str(moved)])
    assert [c.model_dump() for c in cmp.checks] == [{"task": label, "rescored": True, "why": ""}]
    # a folder of other data given as --data is refused, not silently ignored
    other = _copy(root / "other" / "scifact")
    with open(other / "qrels" / "test.tsv", "a") as fh:
        fh.write("1\t5836\t1\n")
    with pytest.raises(RegressionInputError, match=rf"data {re.escape(str(other))} holds data that none of the run "):
        regress(root / "base", root / "cand", n_permutations=1000, data=[str(other)])


def test_other_data_at_the_same_path_is_another_task(two_paths):
    root, a, b = two_paths
    with open(b / "qrels" / "test.tsv", "a") as fh:
        fh.write("1\t5836\t1\n")  # one more judgement: other qrels, so another task
    gapbench.run(str(b), "bm25", k=10, output=root / "cand2" / "scifact")
    with pytest.raises(RegressionInputError, match=r"lacks task\(s\) scifact \[local:[0-9a-f]{16}\] of the baseline "
                                                   r"\(a local task is its data"):
        regress(root / "base", root / "cand2", n_permutations=1000)
    with pytest.raises(ConfigError, match="compare run directories of one task"):
        compare_run_dirs([root / "base" / "scifact", root / "cand2" / "scifact"])
    # the recorded path now holds other data: it is not used to re-score the old runs
    shutil.rmtree(a)
    report = regress(root / "base", root / "cand", n_permutations=1000)
    assert not report.checks[0].rescored and f"{b.resolve()} now holds other data" in report.checks[0].why


def test_regress_warns_when_k_differs(tmp_path, capsys):
    a, b = _copy(tmp_path / "a" / "scifact"), _copy(tmp_path / "b" / "scifact")
    gapbench.run(str(a), "bm25", k=10, measures=["nDCG@3", "nDCG@10"], output=tmp_path / "base" / "scifact")
    gapbench.run(str(b), "bm25", k=3, measures=["nDCG@3", "nDCG@10"], output=tmp_path / "cand" / "scifact")
    capsys.readouterr()
    # nDCG@10 reads past the candidate's k=3: refused (issue 31); nDCG@3 is gated, with the warning
    assert main(["regress", "--baseline", str(tmp_path / "base"), "--candidate", str(tmp_path / "cand"),
                 "--permutations", "1000"]) == 2
    assert "nDCG@10 reads to rank 10, past k=3" in capsys.readouterr().err
    assert main(["regress", "--baseline", str(tmp_path / "base"), "--candidate", str(tmp_path / "cand"),
                 "--permutations", "1000", "--output", str(tmp_path / "out"), "--measure", "nDCG@3"]) == 0
    captured = capsys.readouterr()
    warning = (f"task scifact [{_key_of(a)}]: the baseline searched to k=10 and the candidate to k=3; a measure that "
               "looks past rank 3 (recall at a deeper cut-off, AP) differs for that reason alone; run both with the "
               "same --k.")
    assert captured.err == f"gapbench: warning: {warning}\n"
    assert f"Warning: {warning}" in captured.out
    doc = json.loads((tmp_path / "out" / "regress.json").read_text())
    assert doc["warnings"] == [warning]
    # the same k: no warning
    assert regress(tmp_path / "base", tmp_path / "base", n_permutations=1000).warnings == ()


def test_folder_path_takes_task_options(tmp_path):
    folder = _copy(tmp_path / "with:colon" / "scifact")
    train = gapbench.get_task(f"{folder}:split=train")
    assert (train.name, train.split) == (f"{folder.resolve()}:split=train", "train")
    data = train.load()
    assert list(data.queries) == ["0"] and dict(data.qrels["0"]) == {"5836": 1}  # qrels/train.tsv: one judgement
    assert list(gapbench.get_task(str(folder)).load().queries) == ["1", "3", "5", "13"]
    with pytest.raises(ConfigError, match=r"nope is not a setting; accepted settings: split\."):
        gapbench.get_task(f"{folder}:nope=1")
    # the error for a folder without qrels/test.tsv says to give split=, and that works
    dev = tmp_path / "dev_only"
    shutil.copytree(folder, dev)
    (dev / "qrels" / "test.tsv").unlink()
    (dev / "qrels" / "train.tsv").rename(dev / "qrels" / "dev.tsv")
    with pytest.raises(gapbench.errors.GapbenchError,
                       match=r"no qrels for split .test.: expected qrels/test\.tsv; found dev\.tsv \(choose one with "
                             r"split=\.\.\.\)"):
        gapbench.get_task(str(dev)).load()
    result = gapbench.run(f"{dev}:split=dev", "bm25", k=10, output=tmp_path / "run")
    assert result.n_queries == 1 and result.task == f"{dev.resolve()}:split=dev"
    assert load_manifest(tmp_path / "run")["task"]["spec"] == f"{dev.resolve()}:split=dev"
    # the dev split of the folder is another task than the test split of the same folder
    assert identity_of(tmp_path / "run", result).key != _key_of(folder)


def test_local_trec_and_data_dir_at_two_paths_are_one_task(tmp_path):
    for side in ("a", "b"):
        trec = tmp_path / side / "trec"
        trec.mkdir(parents=True)
        for name in ("topics.301-303.txt", "qrels.301-303.txt", "corpus.jsonl"):
            shutil.copy(TREC / name, trec / name)
        spec = (f"local/trec:topics={trec}/topics.301-303.txt,qrels={trec}/qrels.301-303.txt,"
                f"corpus={trec}/corpus.jsonl")
        gapbench.run(spec, "bm25", k=10, output=tmp_path / f"trec_{side}" / "t")
        _copy(tmp_path / side / "beir" / "scifact")
        gapbench.run(f"beir/scifact:data_dir={tmp_path / side / 'beir'}", "bm25", k=10,
                     output=tmp_path / f"copy_{side}" / "s")
    shutil.rmtree(tmp_path / "a")
    for kind in ("trec", "copy"):
        # --rescore always re-scores from the copy here; it never tries BEIR's download for beir/scifact
        report = regress(tmp_path / f"{kind}_a", tmp_path / f"{kind}_b", n_permutations=1000, rescore="always")
        assert [c.rescored for c in report.checks] == [True] and report.passed, report.checks
        assert re.fullmatch(r".+ \[local:[0-9a-f]{16}\]", report.rows[0].task)


def test_report_takes_runs_of_the_same_folder_made_elsewhere(two_paths, capsys):
    root, a, b = two_paths
    shutil.rmtree(a)
    assert main(["report", str(b), str(root / "base" / "scifact"), str(root / "cand" / "scifact"),
                 "--out", str(root / "rep")]) == 0
    doc = json.loads((root / "rep" / "report.json").read_text())
    assert [s["run_dir"] for s in doc["systems"]] == [str(root / "base" / "scifact"), str(root / "cand" / "scifact")]
    other = _copy(root / "other" / "scifact")
    (other / "corpus.jsonl").write_text((other / "corpus.jsonl").read_text().replace("aspirin", "asprin"))
    assert main(["report", str(other), str(root / "cand" / "scifact"), "--out", str(root / "rep2")]) == 2
    assert "was made on other data" in capsys.readouterr().err


def test_an_old_run_directory_of_a_local_folder_loads_and_pairs(tmp_path):
    """tests/fixtures/outputs_v0_1/local_beir_run: bm25 on this SciFact fixture, written by gapbench before task
    identity (its task is the absolute path of a folder that exists on no test machine, its manifest has no spec)."""
    old = shutil.copytree(OLD_RUN, tmp_path / "base" / "scifact")
    manifest = load_manifest(old)
    assert "spec" not in manifest["task"] and not Path(manifest["task"]["name"]).exists()
    res = load_results(old)
    ident = identity_of(old, res)
    assert ident.spec == manifest["task"]["name"] and ident.k == 10
    assert ident.key == content_key(**manifest["fingerprints"])
    folder = _copy(tmp_path / "data" / "scifact")
    assert ident.key == _key_of(folder)
    gapbench.run(str(folder), "bm25:k1=0.5", k=10, output=tmp_path / "cand" / "scifact")
    cmp = compare_run_dirs([old, tmp_path / "cand" / "scifact"], n_permutations=1000)
    assert [c.model_dump() for c in cmp.checks] == [{"task": f"scifact [{ident.key}]", "rescored": True, "why": ""}]
    assert cmp.systems[0].means == res.means
    report = regress(tmp_path / "base", tmp_path / "cand", n_permutations=1000)
    assert report.passed and report.checks[0].rescored


def _doc_blocks() -> dict[str, str]:
    """The bash blocks of docs/ci-regression.md that follow a '<!-- run by tests: NAME -->' marker."""
    text = (ROOT / "docs" / "ci-regression.md").read_text(encoding="utf-8")
    return dict(re.findall(r"<!-- run by tests: (\S+) -->\n```bash\n(.*?)```", text, flags=re.S))


def test_ci_example_with_a_folder_at_another_path_runs_as_written(tmp_path):
    blocks = _doc_blocks()
    assert set(blocks) >= {"local-baseline", "local-ci"}
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    _copy(home / "data" / "scifact")
    _copy(workspace / "data" / "scifact")
    env = {**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1", "RETRIEVER": "bm25:k1=0.5",
           "GITHUB_WORKSPACE": str(workspace), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # the baseline on the workstation, committed with the repository
    subprocess.run(["bash", "-euo", "pipefail", "-c", blocks["local-baseline"]], cwd=workspace, env=env, check=True)
    shutil.rmtree(home)  # the runner has no such folder
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks["local-ci"]], cwd=workspace, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    key = _key_of(workspace / "data" / "scifact")
    assert f"Re-scored from run.trec.gz against the task's qrels: scifact [{key}]." in (
        tmp_path / "summary.md").read_text()
    text = (ROOT / "docs" / "ci-regression.md").read_text(encoding="utf-8")
    assert f"`scifact [{key}]`" in text  # the key the page shows is this folder's
    # the folder-with-options command the page shows, as written, in the checkout
    inline = re.search(r'`(gapbench run "data/scifact:split=train" -r bm25)`', text).group(1)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", inline], cwd=workspace, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{workspace / 'data' / 'scifact'}:split=train | bm25: 1 query")
    # the workflow file runs the same command for its folder
    workflow = (ROOT / "docs" / "example-workflow.yml").read_text()
    ci_run = next(line for line in blocks["local-ci"].splitlines() if line.startswith("gapbench run"))
    assert shlex.split(ci_run)[:3] == ["gapbench", "run", "$GITHUB_WORKSPACE/data/scifact"]
    assert 'gapbench run "$GITHUB_WORKSPACE/data/scifact"' in workflow


@pytest.mark.slow
def test_ci_example_on_impliret_runs_as_written(tmp_path):
    """The page's first example, as written: a bm25 change within noise passes the gate."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RETRIEVER": "bm25:k1=1.2",
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", _doc_blocks()["impliret"]], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## gapbench regression gate: PASSED")
    assert "Re-scored from run.trec.gz against the task's qrels: impliret/unispeaker/wknow." in summary
    assert (tmp_path / "regress-junit.xml").is_file()


def test_a_manifest_naming_a_public_set_as_its_data_is_not_loaded(two_paths):
    """A forged task.spec may not make the gate download a public set: only local data re-scores a local task."""
    root, a, b = two_paths
    for side in ("base", "cand"):
        path = root / side / "scifact" / "manifest.json"
        doc = json.loads(path.read_text())
        doc["task"]["spec"] = "beir/msmarco"
        path.write_text(json.dumps(doc))
    report = regress(root / "base", root / "cand", n_permutations=1000)
    assert not report.checks[0].rescored
    assert report.checks[0].why.startswith("its manifest names beir/msmarco, which is not local data; give its data")
