"""ARGUS's honest defaults: the general Wikipedia KB, the landmark KB only as a marked pipeline check, diagnosis by a
bound probe or an exact audit, and the label heuristic only on request (issue 14, item 1)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import gapbench
from gapbench.analyses.argus.audit.rps import hit_probability, mention_rps
from gapbench.analyses.argus.remedy.diagnosis import PLACE_ORG_LABELS, LabelPrior, MentionAudit, diagnose
from gapbench.analyses.argus.remedy.kb import PACKAGED_KBS, PIPELINE_CHECK_NOTE, ReferenceKB
from gapbench.analyses.argus.remedy.ner import extract_mentions
from gapbench.analyses.argus.remedy.probe_binding import bind_probe, diagnosis_for
from gapbench.analyses.argus.remedy.compare_report import read_outputs
from gapbench.analyses.argus.remedy.remedy_compare import argus_compare
from gapbench.cli import main
from gapbench.errors import ConfigError, UnknownNameError
from gapbench.formats import write_beir_folder
from gapbench.retrieval import get_retriever
from gapbench.types import Corpus, Document, Qrels, Queries, TaskData

SLICE = Path(__file__).resolve().parents[1] / "tasks" / "data" / "argus" / "kb_wikipedia_first_paragraphs.jsonl"
TASK = "impliret/multispeaker/wknow"


@pytest.fixture(scope="module")
def wknow120(tmp_path_factory):
    """The first 120 documents of ImpliRet multispeaker wknow, each its own query's gold (as test_augment_cli)."""
    data = gapbench.get_task(TASK).load()
    ids = data.corpus.ids()[:120]
    folder = tmp_path_factory.mktemp("beir") / "wknow120"
    write_beir_folder(TaskData(Corpus(data.corpus[i] for i in ids), Queries(data.queries[i] for i in ids),
                               Qrels({i: {i: 1} for i in ids})), folder)
    return folder


@pytest.fixture(scope="module")
def cli():
    return main


# ------------------------------------------------------------------------------------------------------- the KBs
def test_the_default_kb_is_the_shipped_wikipedia_slice():
    # the file tasks/data/argus/PROVENANCE.md pins (the ARGUS audit slice)
    assert hashlib.sha256(SLICE.read_bytes()).hexdigest() == \
        "6f9e478ae5e4ec717d89011f6868f90ef8c0a70781a125a9646794c225161fcb"
    kb = ReferenceKB.packaged()
    assert kb.name == "wikipedia-slice" and len(kb.passages) == 620
    passages = list(kb.passages.values())
    assert passages[0].passage_id == "Q100" and passages[0].text.startswith("Boston is the capital and most populous")
    assert passages[-1].passage_id == "Q992830" and passages[-1].text.startswith("Santa Clara University is a private")
    assert kb.lookup(["Boston"], 1)["Boston"][0][0] == "Q100"
    assert set(PACKAGED_KBS) == {"wikipedia-slice", "landmarks-oracle"}
    # renamed, no alias: the old name is no KB, and the error lists the packaged ones
    with pytest.raises(ConfigError, match="packaged KB: wikipedia-slice, landmarks-oracle"):
        ReferenceKB.resolve("impliret-wknow")


# ------------------------------------------------------------------------------------------------ the exact audit
def test_hit_probability_by_hand():
    # 2 of 3 neutrals drawn. Two beaters, k=2: a miss only when both are drawn, 1 - C(2,2)/C(3,2) = 2/3
    assert hit_probability(2, 3, n=3, k=2) == pytest.approx(2 / 3)
    # one beater, k=1: a hit only when the two drawn are the two others, C(2,2)/C(3,2) = 1/3
    assert hit_probability(1, 3, n=3, k=1) == pytest.approx(1 / 3)
    assert hit_probability(0, 10, n=800, k=1) == 1.0  # every neutral drawn, none beats the target
    assert hit_probability(5, 10, n=800, k=5) == 0.0  # every neutral drawn, 5 beat it: rank 6 > 5
    assert hit_probability(5, 10, n=800, k=6) == 1.0


def test_mention_rps_by_hand():
    corpus = Corpus([Document("d0", "Ivan trained near Soyu Stadium."), Document("d1", "Maria painted a view."),
                     Document("d2", "Chen cooked dinner."), Document("d3", "Omar read books.")])
    holders = {"soyu stadium": frozenset({"d0"})}
    # "Ivan trained": only d0 scores, rank 1 -> hit. "cooked dinner": only d2 scores; d0 ties with d1, d3 (unscored),
    # so one neutral (d2) beats it: rank 2, a hit only for k >= 2.
    queries = {"soyu stadium": ["Ivan trained", "cooked dinner"], "nobody": ["Ivan"]}
    bm25 = get_retriever("bm25")
    assert mention_rps(bm25, corpus, holders, queries, k=1, n=800) == {("soyu stadium", "d0"): 0.5}
    assert mention_rps(bm25, corpus, holders, queries, k=2, n=800) == {("soyu stadium", "d0"): 1.0}
    # n=2: one neutral drawn of three, d2 with probability 1/3: RPS@1 = (1 + 2/3) / 2
    assert mention_rps(bm25, corpus, holders, queries, k=1, n=2)[("soyu stadium", "d0")] == pytest.approx(5 / 6)


def test_mention_audit_queries_leave_out_the_entity_name():
    kb = ReferenceKB.packaged("landmarks-oracle")
    audit = MentionAudit(get_retriever("bm25"), Corpus([Document("d", "x")]), kb, 1)
    q = audit.queries({"soyu stadium": "Soyu Stadium"})["soyu stadium"]
    assert len(q) == 1 and "soyu" not in q[0].casefold() and "Japan" in q[0]


# ---------------------------------------------------------------------------------------------- diagnosis modes
def test_diagnosis_modes_resolve_and_refuse(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))  # an empty probe store
    bm25 = get_retriever("bm25")
    assert diagnosis_for("auto", bm25) == ("audit", None, None)
    assert diagnosis_for("label-prior", bm25) == ("label-prior", None, None)
    with pytest.raises(ConfigError, match=r"^diagnosis 'probe': no probe is bound .* give one \(probe=DIR\), or use "
                                          r"diagnosis 'audit'\.$"):
        diagnosis_for("probe", bm25)
    with pytest.raises(ConfigError, match=r"^diagnosis 'audit' uses no probe, but a probe was given; leave the probe "
                                          r"out or use diagnosis 'probe'\.$"):
        diagnosis_for("audit", bm25, probe=tmp_path)
    with pytest.raises(UnknownNameError, match="label-prior"):
        diagnosis_for("labels", bm25)


def test_auto_finds_the_probe_bound_to_the_retriever(tmp_path, monkeypatch):
    from gapbench.analyses.argus.probe.training import train_probe

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    dense = get_retriever("dense")
    span_fp = hashlib.sha256(f"argus-span-mean:v1:{dense.fingerprint}".encode()).hexdigest()
    x = np.random.default_rng(0).normal(size=(40, 384)).astype(np.float32)
    probe, _ = train_probe(x, np.clip(0.5 + 0.2 * x[:, 0], 0, 1), span_fp, seed=0, families=("ridge",))
    method, _, source = diagnosis_for("auto", dense)  # nothing bound yet: the probe shipped for the offline MiniLM
    assert method == "probe" and source.startswith("shipped:")
    folder = bind_probe(probe)
    assert folder == tmp_path / "home" / "cache" / "argus" / "probes" / span_fp[:32]
    method, found, source = diagnosis_for("auto", dense)
    assert method == "probe" and found.fingerprint == span_fp and source == str(folder)
    assert diagnosis_for("auto", get_retriever("bm25"))[0] == "audit"  # bound to dense only


# ------------------------------------------------------------------------------------- compare on real ImpliRet
def test_default_compare_uses_the_wikipedia_slice_and_the_audit(wknow120, tmp_path):
    res = argus_compare(str(wknow120), "bm25", variants=["original", "expansion"], measures=["nDCG@10"], k=100,
                        output=tmp_path / "out")
    d = read_outputs(tmp_path / "out")
    cfg = d["config"]
    assert cfg["kb"] == "wikipedia-slice" and cfg["pipeline_check"] is False
    assert cfg["diagnosis"] == "auto" and cfg["diagnosis_method"] == "audit" and cfg["probe"] is None
    row = next(iter(d["tasks"].values()))
    method = row["diagnosis"]["method"]
    assert method["method"] == "audit" and method["kb"] == "wikipedia-slice" and (method["k"], method["n"]) == (50, 800)
    assert not any("pipeline check" in n for n in d["notes"] + row["notes"])
    # the flags are the audit's: entities of the document with exact RPS < 0.3 against bm25 itself
    corpus = gapbench.get_task(str(wknow120)).load().corpus
    by_hand = diagnose(corpus, get_retriever("bm25"), fallback=MentionAudit(get_retriever("bm25"), corpus,
                                                                            ReferenceKB.packaged()))
    assert row["diagnosis"]["n_flagged_entities"] == by_hand.stats()["n_flagged_entities"]
    assert all(e.rps < 0.3 for fl in by_hand.flagged.values() for e in fl)
    assert next(iter(res.tasks.values())).variants["expansion"].growth.n_views == \
        row["variants"]["expansion"]["growth"]["n_views"]


def test_label_prior_on_request_reproduces_the_old_flags(wknow120):
    res = argus_compare(str(wknow120), "bm25", diagnosis="label-prior", variants=["original", "expansion"],
                        measures=["nDCG@10"])
    row = next(iter(res.model_dump(mode="json", exclude_unset=True)["tasks"].values()))
    assert row["diagnosis"]["method"]["method"] == "label-prior"
    # by hand: one flag per (document, case-folded surface) among the FAC/GPE/LOC/ORG mentions
    corpus = gapbench.get_task(str(wknow120)).load().corpus
    ms = extract_mentions(corpus)
    expected = {(d, m.key) for d in ms for m in ms[d] if m.label in PLACE_ORG_LABELS}
    assert row["diagnosis"]["n_flagged_entities"] == len(expected)
    got = diagnose(corpus, fallback=LabelPrior()).flagged
    assert {(d, e.key) for d, fl in got.items() for e in fl} == expected


def test_landmarks_oracle_is_marked_as_a_pipeline_check(wknow120, tmp_path, cli):
    out = tmp_path / "out"
    assert cli(["argus", "compare", str(wknow120), "-r", "bm25", "--kb", "landmarks-oracle", "--diagnosis",
                "label-prior", "--variants", "original,expansion", "-m", "nDCG@10", "-o", str(out)]) == 0
    d = read_outputs(out)
    assert d["config"]["kb"] == "landmarks-oracle" and d["config"]["pipeline_check"] is True
    assert d["config"]["diagnosis"] == "label-prior"
    assert PIPELINE_CHECK_NOTE in d["notes"] and PIPELINE_CHECK_NOTE in next(iter(d["tasks"].values()))["notes"]
    assert "pipeline check: the KB states the answers" in PIPELINE_CHECK_NOTE
    md = (out / "argus_compare.md").read_text()
    assert md.splitlines()[2] == f"**{PIPELINE_CHECK_NOTE}**"
    assert "diagnosis label-prior (label-prior)" in md


def test_run_augment_records_a_pipeline_check(wknow120, tmp_path, capsys):
    spec = "argus-expand:kb=landmarks-oracle,diagnosis=label-prior"
    assert main(["run", str(wknow120), "-r", "bm25", "--augment", spec, "-m", "nDCG@10", "--json",
                 "-o", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    aug = json.loads((tmp_path / "run" / "manifest.json").read_text())["augment"]
    assert (aug["kb"], aug["diagnosis"], aug["note"]) == ("landmarks-oracle", "label-prior", PIPELINE_CHECK_NOTE)
