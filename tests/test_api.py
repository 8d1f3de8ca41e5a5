"""The public API: the README's Python example and the docs' own-retriever example run as written, `import gapbench`
stays light, the wheel carries everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_python_blocks() -> list[str]:
    """The own-retriever example (docs/retrievers.md) and the README's evaluate example, by their markers."""
    from docs_blocks import block

    return [block("docs/retrievers.md", "own-retriever").code, block("README.md", "evaluate").code]


def test_readme_has_short_examples():
    blocks = readme_python_blocks()
    assert len(blocks) >= 2
    own_retriever, evaluate_dict = blocks[0], blocks[1]
    assert "register_retriever" in own_retriever and "gapbench.evaluate" in evaluate_dict
    code_lines = lambda block: [line for line in block.splitlines() if line.strip()]
    assert len(code_lines(own_retriever)) < 15 and len(code_lines(evaluate_dict)) < 15


@pytest.mark.slow
def test_readme_own_retriever_example_runs(capsys):
    from gapbench.retrieval import RETRIEVERS

    RETRIEVERS.unregister("word-overlap")
    namespace: dict = {}
    exec(compile(readme_python_blocks()[0], "docs/retrievers.md", "exec"), namespace)
    result = namespace["result"]
    assert result.n_queries == 1500
    # the word-overlap baseline ranks the gold above chance (1 gold in 1,500 documents)
    assert 0.01 < result.means["nDCG@10"] < 1.0
    assert "word-overlap" in capsys.readouterr().out
    RETRIEVERS.unregister("word-overlap")


def test_readme_evaluate_example_runs(capsys):
    namespace: dict = {}
    exec(compile(readme_python_blocks()[1], "README.md", "exec"), namespace)
    res = namespace["res"]
    # q1: gold d1 (grade 2) at rank 1 -> nDCG 1; q2: gold d3 at rank 2 -> 1/log2(3); mean (1 + 0.63093) / 2
    assert res.means["nDCG@10"] == pytest.approx((1 + 1 / __import__("math").log2(3)) / 2, abs=1e-12)
    assert res.means["RR@10"] == pytest.approx(0.75)
    assert list(namespace["frame"].columns) == ["nDCG@10", "RR@10"]
    out = capsys.readouterr().out
    assert "nDCG@10" in out and "0.8155" in out


def test_import_gapbench_is_light():
    code = (
        "import sys, gapbench\n"
        "gapbench.Run; gapbench.evaluate; gapbench.get_task('impliret/multispeaker/wknow')\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'datasets', 'transformers', 'bm25s', 'openai') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_run_with_an_explicitly_empty_measure_list_is_an_error():
    """``measures=[]`` is not ``measures=None``: it used to mean the task's defaults silently."""
    import gapbench
    from gapbench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^RunOptions: measures is empty; give measures such as"):
        gapbench.run("impliret/multispeaker/wknow", "bm25", measures=[])


# ---------------------------------------------------------------- gapbench.run results given to compare, report, regress

SCIFACT = str(ROOT / "tests" / "fixtures" / "beir" / "scifact")


@pytest.fixture(scope="module")
def two_runs():
    import gapbench

    return (gapbench.run(SCIFACT, "bm25", measures=["nDCG@10", "RR@10"]),
            gapbench.run(SCIFACT, "bm25:k1=0.9,b=0.4", measures=["nDCG@10", "RR@10"]))


def test_compare_takes_run_results(two_runs):
    import gapbench

    a, b = two_runs
    from_runs = gapbench.compare([a, b], n_permutations=200)
    qrels = gapbench.get_task(a.task).load().qrels  # the runs evaluated again: the same tests
    from_results = gapbench.compare([a.run, b.run], qrels, list(a.measures), n_permutations=200)
    assert from_runs.names == ["bm25", "bm25:k1=0.9,b=0.4"]
    assert [t.__dict__ for t in from_runs.tests] == [t.__dict__ for t in from_results.tests]


def test_regress_and_report_take_run_results_as_run_directories_would(two_runs, tmp_path):
    import gapbench
    from gapbench.products.regress import regress as regress_dirs
    from gapbench.store import save_run_dir

    a, b = two_runs
    for r, name in ((a, "a"), (b, "b")):
        manifest = r.manifest.model_dump(mode="json", by_alias=True, exclude_unset=True)
        save_run_dir(tmp_path / name, r.run, r, manifest)
    gate = gapbench.regress(a, b, measure="nDCG@10", n_permutations=1000)
    by_dirs = regress_dirs(tmp_path / "a", tmp_path / "b", measure="nDCG@10", n_permutations=1000)
    assert [r.__dict__ for r in gate.rows] == [r.__dict__ for r in by_dirs.rows]
    assert gate.rows[0].baseline == a.means["nDCG@10"] and gate.checks == by_dirs.checks
    assert gate.baseline == f"bm25 on {a.task} (in memory)"
    # a list of results is a result set (one per task)
    assert [r.__dict__ for r in gapbench.regress([a], [b], measure="nDCG@10", n_permutations=1000).rows] == \
        [r.__dict__ for r in gate.rows]
    report = gapbench.report([a, b], n_permutations=200)
    assert report.task == a.task
    assert [s.system for s in report.systems] == ["bm25", "bm25:k1=0.9,b=0.4"]
    assert [s.run_dir for s in report.systems] == [f"bm25 on {a.task} (in memory)",
                                                    f"bm25:k1=0.9,b=0.4 on {a.task} (in memory)"]


def test_a_result_set_of_other_things_is_refused():
    import gapbench
    from gapbench.errors import ConfigError

    with pytest.raises(ConfigError, match="a result set is a folder of run directories, one gapbench.run result"):
        gapbench.regress([1, 2], [3], measure="nDCG@10")


def test_the_manifest_records_the_gapbench_version(two_runs):
    import gapbench

    assert all(r.manifest.versions["gapbench"] == gapbench.__version__ for r in two_runs)


def test_argus_probe_verb_trains_on_the_audit_it_runs():
    import gapbench
    from gapbench.analyses.argus.audit.retrievability import audit
    from gapbench.analyses.argus.probe.training import Probe, train_probe

    # one labelled set, the audited targets (the default trains the directed and the undirected set)
    options = gapbench.ArgusProbeOptions(k=50, n=300, seed=3, families=["ridge"], datasets=("directed",))
    report = gapbench.argus_probe(retriever="random", options=options)
    probe = report.probe
    # the same as auditing, then training on the audited targets, by hand
    result = audit(None, "random", k=50, n=300, seed=3)
    targets, emb = result.target_embeddings()
    _, by_hand = train_probe(emb, [result.rps()[q] for q in targets], result.encoder.fingerprint, seed=3,
                             families=("ridge",))
    [got] = report.datasets
    assert got.selected == by_hand.selected and got.test == by_hand.test
    assert got.n == len(targets) and isinstance(probe, Probe)


@pytest.mark.parametrize("kw, problem", [
    (dict(pooling="mean"), "ArgusProbeOptions: pooling must be 'auto', 'span' or 'sentence', got 'mean'."),
    (dict(families=["forest"]), "ArgusProbeOptions: families.0 must be 'ridge', 'xgboost' or 'mlp', got 'forest'."),
    (dict(k=0), None),
    (dict(tau=1.5), None),
])
def test_argus_options_refuse_what_no_run_accepts(kw, problem):
    import gapbench
    from gapbench.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        gapbench.ArgusProbeOptions(**kw)
    if problem:
        assert str(err.value) == problem
