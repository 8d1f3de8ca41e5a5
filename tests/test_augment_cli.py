"""`gapbench run --augment argus-expand` gives the numbers of `gapbench argus compare`'s Expansion variant."""

from __future__ import annotations

import json

import pytest

import gapbench
from gapbench.analyses.argus.remedy.remedy_compare import argus_compare
from gapbench.cli import main
from gapbench.formats import write_beir_folder
from gapbench.types import Corpus, Qrels, Queries, TaskData


@pytest.fixture(scope="module")
def wknow120(tmp_path_factory):
    data = gapbench.get_task("impliret/multispeaker/wknow").load()
    ids = data.corpus.ids()[:120]
    folder = tmp_path_factory.mktemp("beir") / "wknow120"
    write_beir_folder(TaskData(Corpus(data.corpus[i] for i in ids), Queries(data.queries[i] for i in ids),
                               Qrels({i: {i: 1} for i in ids})), folder)
    return folder


@pytest.mark.parametrize("options, kb, diagnosis", [
    ("", "wikipedia-slice", "auto"),  # the defaults: the general KB, no probe bound to bm25, so the exact audit
    (":kb=landmarks-oracle,diagnosis=label-prior", "landmarks-oracle", "label-prior"),  # the old settings, by name
])
def test_run_with_argus_expansion(wknow120, tmp_path, capsys, options, kb, diagnosis):
    assert main(["run", str(wknow120), "-r", "bm25", "--augment", "argus-expand" + options, "-m", "nDCG@10,R@10",
                 "--json", "-o", str(tmp_path / "run")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["system"] == "bm25+argus-expand"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["augment"]["spec"] == "argus-expand" + options and manifest["augment"]["n_views"] > 0
    assert manifest["augment"]["kb"] == kb
    assert manifest["augment"]["diagnosis"] == ("audit" if diagnosis == "auto" else diagnosis)
    ref = next(iter(argus_compare(str(wknow120), "bm25", kb=kb, diagnosis=diagnosis, variants=["original", "expansion"],
                                  measures=["nDCG@10", "R@10"], k=1000).tasks.values()))
    assert out["measures"]["nDCG@10"] == pytest.approx(ref.variants["expansion"].means["nDCG@10"], abs=1e-12)
    assert manifest["augment"]["n_views"] == ref.variants["expansion"].growth.n_views


def test_run_with_an_unknown_augmenter(wknow120, capsys):
    assert main(["run", str(wknow120), "-r", "bm25", "--augment", "argus-nope"]) == 2
    assert "Did you mean" in capsys.readouterr().err
