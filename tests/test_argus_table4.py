"""ARGUS Table 4 (appendix E.1) in ``argus compare``: the max-RPS delta of gold documents retrieved vs not, computed
from the Original run and the comparison's own diagnosis, on hand-checkable cases."""

from __future__ import annotations

import json

import pytest

from gapbench.analyses.argus.remedy.diagnosis import Diagnosis, entity_rps
from gapbench.analyses.argus.remedy.ner import Mention
from gapbench.analyses.argus.remedy.compare_report import read_outputs
from gapbench.analyses.argus.remedy.remedy_compare import argus_compare, table4
from gapbench.schemas import validate_analysis

from test_argus_compare import beir_folder


def _diag(mentions: dict[str, list[tuple[str, float]]]) -> Diagnosis:
    ms = {d: tuple(Mention(d, text, "X", 0, len(text)) for text, _ in v) for d, v in mentions.items()}
    rps = {d: tuple(s for _, s in v) for d, v in mentions.items()}
    return Diagnosis(ms, rps, {}, 0.3, {"method": "test"}, {})


def test_an_entity_is_as_risky_as_its_lowest_mention():
    # "Paris" twice (0.2 and 0.9, one entity by its case-folded key: 0.2), "Ivan" 0.5: the document's max is 0.5, not
    # the 0.9 of a single mention
    diag = _diag({"a": [("Paris", 0.2), ("Ivan", 0.5), ("paris", 0.9)], "b": []})
    assert entity_rps(diag) == {"a": (0.2, 0.5), "b": ()}


def test_table4_by_hand_with_cutoffs_within_the_depth():
    diag = _diag({"a": [("Paris", 0.2), ("Ivan", 0.5)], "b": [("Rome", 0.9)], "c": [("Oslo", 0.1)], "d": []})
    run = {"q1": [("a", 3.0), ("x", 2.0), ("b", 1.0)], "q2": [("x", 1.0), ("c", 0.5)]}
    qrels = {"q1": {"a": 1, "b": 2, "d": 1, "x": 0}, "q2": {"c": 1, "b": 1}}
    out = table4(run, qrels, diag, depth=20, ks=(1, 2, 10, 50))
    assert list(out) == [1, 2, 10]  # 50 is past the retrieval depth
    # k=1: retrieved q1/a (max 0.5); unretrieved q1/b 0.9, q2/c 0.1, q2/b 0.9 -> 1.9/3; d has no entity (left out)
    assert out[1]["retrieved"] == {"n": 1, "mean_max_rps": 0.5}
    assert out[1]["unretrieved"]["n"] == 3 and out[1]["unretrieved"]["mean_max_rps"] == pytest.approx(1.9 / 3)
    assert out[1]["delta"] == pytest.approx(0.5 - 1.9 / 3) and out[1]["no_entities"] == 1
    # k=2: q2/c joins the retrieved: (0.5 + 0.1) / 2 = 0.3 vs (0.9 + 0.9) / 2
    assert out[2]["retrieved"]["mean_max_rps"] == pytest.approx(0.3)
    assert out[2]["delta"] == pytest.approx(0.3 - 0.9)
    # k=10: only q2/b is not retrieved
    assert out[10]["retrieved"]["mean_max_rps"] == pytest.approx((0.5 + 0.9 + 0.1) / 3)
    assert out[10]["unretrieved"] == {"n": 1, "mean_max_rps": 0.9}


# 4 gold candidates and 9 fillers. spaCy tags Ivan PERSON (label prior: RPS 1), Paris and London GPE (RPS 0); g3 has
# no entity. q2 ("festival") shares no term with any document: every score is 0, ties go by doc id descending
# (z9 .. z1, g4, g3, g2, g1), so g4 is 10th and g2, g1 are 12th and 13th
DOCS = {"g1": "Ivan cooked dinner.", "g2": "A parade crossed Paris.", "g3": "A quiet morning at home.",
        "g4": "Ivan visited London.", **{f"z{i}": f"Plain words number {i}." for i in range(1, 10)}}
QUERIES = {"q1": "Who cooked dinner?", "q2": "festival", "q3": "quiet morning"}
QRELS = {"q1": {"g1": 1}, "q2": {"g4": 1, "g2": 1, "g1": 1}, "q3": {"g3": 1}}


def test_compare_reports_table4_of_the_original_run(tmp_path):
    task = beir_folder(tmp_path / "t", DOCS, QUERIES, QRELS)
    out = tmp_path / "out"
    argus_compare(task, "bm25", kb="landmarks-oracle", diagnosis="label-prior", variants=["original", "expansion"],
                  measures=["nDCG@10"], k=20, output=out)
    d = read_outputs(out)
    t4 = next(iter(d["tasks"].values()))["max_rps_delta"]
    assert list(t4) == ["10", "20"]  # 50 is past the depth of 20
    # top 10: retrieved q1/g1 (1) and q2/g4 (max(1, 0) = 1); unretrieved q2/g2 (0) and q2/g1 (1); q3/g3 left out
    assert t4["10"] == {"k": 10, "no_entities": 1, "retrieved": {"n": 2, "mean_max_rps": 1.0},
                        "unretrieved": {"n": 2, "mean_max_rps": 0.5}, "delta": 0.5}
    # top 20 holds all 13 documents: nothing unretrieved, no delta
    assert t4["20"] == {"k": 20, "no_entities": 1, "retrieved": {"n": 4, "mean_max_rps": 0.75},
                        "unretrieved": {"n": 0, "mean_max_rps": None}, "delta": None}
    md = (out / "argus_compare.md").read_text()
    assert "| top 10 | 10 | 2 | 2 | 100.00/50.00 (+50.00) |" in md and "| top 20 | 20 | 4 | 0 | n/a |" in md
    validate_analysis("argus_compare", d, out / "argus_compare.json")


def test_a_result_written_before_table4_stays_valid_and_renders(tmp_path):
    from gapbench.analyses.argus.remedy.compare_report import comparison_markdown

    task = beir_folder(tmp_path / "t", DOCS, QUERIES, QRELS)
    res = argus_compare(task, "bm25", kb="landmarks-oracle", diagnosis="label-prior",
                        variants=["original", "expansion"], measures=["nDCG@10"], k=5)
    d = res.model_dump(mode="json", exclude_unset=True)
    row = next(iter(d["tasks"].values()))
    assert row["max_rps_delta"] == {}  # a depth of 5 is under every cut-off
    del row["max_rps_delta"]
    old = json.loads(json.dumps(d))
    validate_analysis("argus_compare", old, tmp_path / "argus_compare.json")
    assert "Table 4" not in comparison_markdown(old)


# ------------------------------------------------------------------- --dataset on `argus audit` and `argus probe`
# (here rather than in test_argus_dataset.py, which another change owns)
@pytest.fixture(scope="module")
def shipped_dataset(tmp_path_factory):
    """A dataset folder built from the shipped relations file over the shipped 620 paragraphs (20 candidates/pair)."""
    from gapbench.analyses.argus.audit import retrievability as aa
    from gapbench.analyses.argus.tools import wikidata as ds

    d, out = aa.data_dir(), tmp_path_factory.mktemp("argus") / "ds"
    ds.build_dataset(d / "entity_relations_with_contriever_ranks.jsonl", d / "kb_wikipedia_first_paragraphs.jsonl",
                     out, candidates=20)
    return out


@pytest.fixture(scope="module")
def argus_main():
    from gapbench.cli import main
    return main


def test_cli_audit_with_dataset_equals_the_api_on_load_dataset(tmp_path, shipped_dataset, argus_main):
    from gapbench.analyses.argus.audit.retrievability import audit
    from gapbench.analyses.argus.audit.rps_dataset import load_dataset

    out = tmp_path / "out"
    assert argus_main(["argus", "audit", "-r", "random", "--dataset", str(shipped_dataset), "--k", "5", "--n", "20",
                       "--no-plot", "-o", str(out)]) == 0
    got = json.loads((out / "argus_audit.json").read_text())
    want = audit(load_dataset(shipped_dataset), "random", k=5, n=20).model_dump(mode="json")
    assert got == json.loads(json.dumps(want))
    # the stored candidates are what ranked: 103 targets, each pair against its 19 neutrals plus the target
    assert got["n_targets"] == 103 and got["n_effective"]["min"] == got["n_effective"]["max"] == 20


def test_cli_probe_reads_the_dataset(tmp_path, shipped_dataset, argus_main, capsys):
    out = tmp_path / "out"
    assert argus_main(["argus", "probe", "-r", "random", "--dataset", str(shipped_dataset), "--k", "5", "--n", "20",
                       "--families", "ridge", "--datasets", "directed", "-o", str(out), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["task"] == str(shipped_dataset) and rep["n_requested"] == 20
    assert sum(rep["split"].values()) == 103  # the dataset's directed targets


@pytest.mark.parametrize("command", ["audit", "probe"])
def test_dataset_excludes_entities_and_relations(tmp_path, shipped_dataset, argus_main, capsys, command):
    rc = argus_main(["argus", command, "-r", "random", "--dataset", str(shipped_dataset), "--relations",
                     str(shipped_dataset / "relations.jsonl"), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and err == ("gapbench: error: give either --dataset DIR or --entities with --relations (or "
                               "neither: the shipped slice).\n")
