"""ARGUS sweep: hand-computed band fractions, every (N, k) cell equal to the audit's for the same seed, the validated
sweep.json shape, stored candidates from a built dataset, and the CLI end to end (MiniLM on the shipped slice: slow)."""

from __future__ import annotations

import json

import pytest
from fx_warm_homes import copy_home

from gapbench.analyses.argus.audit import retrievability as aa
from gapbench.analyses.argus.audit import sweep as sw
from gapbench.errors import ConfigError
from gapbench.schemas import ArgusSweep, SchemaError, validate


def test_band_fractions_hand_computed():
    # bands [0, .33) [.33, .66) [.66, 1]: 0.0 and 0.32 low; 0.33 and 0.5 mid; 0.66 and 1.0 high; > 0.5: 0.66, 1.0
    fr = sw.band_fractions([0.0, 0.32, 0.33, 0.5, 0.66, 1.0])
    assert fr == {"low": 2 / 6, "mid": 2 / 6, "high": 2 / 6, "gt_0_5": 2 / 6}
    assert sw.band_fractions([0.25, 0.75, 0.75, 0.51]) == {"low": 0.25, "mid": 0.25, "high": 0.5, "gt_0_5": 0.75}


@pytest.fixture(scope="module")
def shipped():
    return aa.load_shipped()


def test_cells_equal_audit(shipped):
    res = sw.sweep(shipped, ["random"], ns=[100, 800], ks=[1, 50], seed=3)
    run = res.runs[0]
    for n in (100, 800):
        for k in (1, 50):
            ref = aa.audit(shipped, "random", k=k, n=n, seed=3).rps()
            assert run.rps[(n, k)] == ref
    d = res
    cell = next(c for c in d.retrievers[0].cells if (c.n, c.k) == (100, 50))
    assert cell.n_effective_min == 100  # 100 of >= 500 eligible neutrals per query
    assert cell.chance == pytest.approx(0.5)
    scores = list(run.rps[(100, 50)].values())
    assert cell.frac_rps_gt_0_5 == pytest.approx(sum(s > 0.5 for s in scores) / 103)
    ent = d.retrievers[0].entities[0]
    assert ent.qid == "Q6535666" and len(ent.rps) == 2 and len(ent.rps[0]) == 2
    assert ent.rps[0][1] == run.rps[(100, 50)]["Q6535666"]


def test_report_shape_is_validated(shipped):
    d = sw.sweep(shipped, ["random"], ns=[50], ks=[5], fig_k=50).model_dump(mode="json")
    assert d["kind"] == "argus_sweep" and d["fig_k"] == 5  # the nearest listed k
    with pytest.raises(SchemaError, match=r"unknown field extra"):
        validate("argus_sweep", {**d, "extra": 1}, "sweep.json")
    with pytest.raises(ConfigError, match=r"ns must be integers of at least 2, got \[1\]"):
        sw.sweep(shipped, ["random"], ns=[1], ks=[5])


def test_sweep_on_a_built_dataset_uses_stored_candidates(tmp_path):
    from tests.test_argus_dataset import PARAGRAPHS, json_dump_text
    from gapbench.analyses.argus.audit.rps_dataset import load_dataset
    from gapbench.analyses.argus.tools.wikidata import build_dataset

    (tmp_path / "kb.jsonl").write_text("".join(json.dumps({"qid": q, "text": t}) + "\n" for q, t in PARAGRAPHS.items()))
    (tmp_path / "d.json").write_text(json_dump_text())
    build_dataset(tmp_path / "d.json", tmp_path / "kb.jsonl", tmp_path / "ds")
    data = load_dataset(tmp_path / "ds")
    res = sw.sweep(data, ["random"], ns=[2, 800], ks=[1, 3])
    assert res.runs[0].sizes[800] == {"Q1": [4], "Q2": [5], "Q6": [6]}
    assert res.runs[0].sizes[2] == {"Q1": [2], "Q2": [2], "Q6": [2]}
    assert res.runs[0].rps[(800, 3)] == aa.audit(data, "random", k=3, n=800).rps()


def _cli():
    from gapbench.cli import main
    return main


def _check_outputs(out, retrievers):
    d = ArgusSweep.model_validate(json.loads((out / "sweep.json").read_text()))
    assert [r.retriever for r in d.retrievers] == retrievers
    for name in ("sweep_vs_n.png", "sweep_vs_k.png", "sweep_lda.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Mean RPS" in (out / "sweep.md").read_text()
    return d


def test_cli_sweep_random(tmp_path, shipped):
    out = tmp_path / "sw"
    assert _cli()(["argus", "sweep", "-r", "random", "-r", "random:seed=1", "--n", "100,800", "--k", "10,50",
                   "-o", str(out)]) == 0
    d = _check_outputs(out, ["random", "random:seed=1"])
    ref = aa.audit(shipped, "random", k=50, n=800, seed=0).rps()
    got = {e.qid: e.rps[1][1] for e in d.retrievers[0].entities}
    assert got == ref


@pytest.mark.slow
@pytest.mark.model
def test_cli_sweep_dense_shipped_slice(tmp_path, shipped, argus_slice_dense_home):
    copy_home(argus_slice_dense_home)  # MiniLM's span vectors of the slice, encoded once in the session (fx_docs.py)
    out = tmp_path / "sw"
    assert _cli()(["argus", "sweep", "-r", "dense", "--n", "100,200,400,800", "--k", "1,5,10,20,50,100",
                   "-o", str(out)]) == 0
    d = _check_outputs(out, ["dense"])
    assert len(d.retrievers[0].cells) == 24
    ref = aa.audit(shipped, "dense", k=50, n=400, seed=0).rps()
    assert {e.qid: e.rps[2][4] for e in d.retrievers[0].entities} == ref


def test_dataset_build_then_sweep_on_the_shipped_real_slice(tmp_path):
    """One command each, as a user runs them: the authors' real relations and the shipped Wikipedia first paragraphs
    -> a dataset with stored KG-disjoint neutrals -> the sweep's curves, whose cells equal the audit on that dataset.
    The random encoder (the chance control): what is checked is the dataset's path through the sweep; MiniLM's span
    vectors of these paragraphs are test_cli_sweep_dense_shipped_slice's (the same encoder code for either input)."""
    from gapbench.analyses.argus.audit.rps_dataset import load_dataset

    d = aa.data_dir()
    ds_dir, out = tmp_path / "ds", tmp_path / "sw"
    assert _cli()(["argus", "dataset", "build", "--wikidata", str(d / "entity_relations_with_contriever_ranks.jsonl"),
                   "--paragraphs", str(d / "kb_wikipedia_first_paragraphs.jsonl"), "--out", str(ds_dir)]) == 0
    assert _cli()(["argus", "sweep", "--dataset", str(ds_dir), "-r", "random", "--n", "100,800", "--k", "10,50",
                   "-o", str(out)]) == 0
    sweep_json = _check_outputs(out, ["random"])
    ref = aa.audit(load_dataset(ds_dir), "random", k=50, n=800, seed=0).rps()
    assert {e.qid: e.rps[1][1] for e in sweep_json.retrievers[0].entities} == ref
    assert len(ref) == 103
