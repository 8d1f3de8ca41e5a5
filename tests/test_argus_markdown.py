"""The ARGUS Markdown reports (argus_compare.md, argus_audit.md, argus_probe.md) pinned on hand-made result dicts."""

from __future__ import annotations

from gapbench.analyses.argus.audit.audit_files import audit_markdown
from gapbench.analyses.argus.remedy.compare_report import comparison_markdown
from gapbench.analyses.argus.probe.probe_files import probe_markdown

COMPARE = {
    "task": "s", "retriever": "bm25", "suite": "s",
    "config": {"tau": 0.3, "k_aug": 2, "ner": "spacy", "kb": "impliret-wknow", "probe": None, "k": 10, "seed": 0},
    "tasks": {"toy": {
        "n_queries": 3,
        "variants": {"original": {"means": {"nDCG@10": 0.5, "R@10": 0.25},
                                  "growth": {"views_per_doc": 0.0, "indexed": 4}},
                     "expansion": {"means": {"nDCG@10": 0.75, "R@10": 0.5},
                                   "growth": {"views_per_doc": 0.5, "indexed": 6}}},
        "deltas": {"expansion": {"nDCG@10": {"delta": 0.25, "significant": True},
                                 "R@10": {"delta": 0.25, "significant": False}}},
        "diagnosis": {"method": {"method": "label-prior"}, "n_mentions": 5, "n_docs": 4, "n_flagged_entities": 2,
                      "n_docs_flagged": 2, "seconds": {"ner": 0.1, "embed": 0.2, "probe": 0.0}},
        "kb_seconds": 0.01, "llm": {"requests": 2, "calls": 2, "truncated": 1}, "notes": ["a note"]}},
    "full_benchmark_avg": {"original": {"nDCG@10": 0.5}, "expansion": {"nDCG@10": 0.75}},
    "notes": ["top note"],
}


def test_comparison_markdown_pinned():
    assert comparison_markdown(COMPARE) == "\n".join([
        "# ARGUS with and without: s | bm25", "",
        "Diagnosis: tau=0.3, k_aug=2, NER spacy, Reference KB impliret-wknow, probe none (label-prior fallback); "
        "retrieval depth 10, seed 0.", "",
        "## toy (3 queries)", "",
        "| variant | nDCG@10 | R@10 | views/doc | indexed |",
        "|---|---|---|---|---|",
        "| original | 50.00 | 25.00 | 0.00 | 4 |",
        "| expansion | 75.00 (+25.00*) | 50.00 (+25.00) | 0.50 | 6 |", "",
        "Values x100; (delta vs original, * = significant at 0.05: paired randomization test, Holm-corrected over "
        "the variant pairs).", "",
        "Diagnosis (label-prior): 5 mentions in 4 documents, 2 flagged entities in 2 documents. Cost: NER 0.1 s, "
        "embedding 0.2 s, probe 0.00 s, KB lookup 0.01 s.",
        "LLM synthesis: 2 requests, 2 calls, 0 cache hits, 0 prompt and 0 completion tokens, 1 answers cut by their "
        "token budget.",
        "- a note", "",
        "## Full Benchmark Avg. (s, 1 tasks)", "",
        "| variant | nDCG@10 |",
        "|---|---|",
        "| original | 50.00 |",
        "| expansion | 75.00 |", "",
        "- top note",
    ]) + "\n"


AUDIT = {
    "task": "wiki", "retriever": "dense", "encoder": {"pooling": "span", "dim": 384}, "k": 50, "n_requested": 800,
    "n_effective": {"min": 700, "max": 800, "median": 799.5}, "seed": 0, "hit_rule": "rank <= k",
    "relations": "directed", "n_targets": 3, "n_pairs": 5, "mean_rps": 0.5, "chance": 0.0625,
    "frac_rps_gt_0_5": 1 / 3, "terciles": {"cutoffs": [0.25, 0.75]}, "bands": {"low": 1, "mid": 1, "high": 1},
    "warnings": ["few targets"],
    "entities": [{"qid": "Q2", "label": "B|C", "rps": 0.5, "hits": 1, "n_queries": 2},
                 {"qid": "Q1", "label": None, "rps": 0.0, "hits": 0, "n_queries": 1},
                 {"qid": "Q3", "label": "D", "rps": 1.0, "hits": 2, "n_queries": 2}],
}


def test_audit_markdown_pinned():
    assert audit_markdown(AUDIT) == "\n".join([
        "# ARGUS retrievability audit: wiki", "",
        "Retriever `dense` (span pooling, dim 384), k=50, N=800 requested (effective 700-800, median 799.5), seed 0, "
        "hit = rank <= k, relations directed.", "",
        "| measure | value |",
        "|---|---|",
        "| targets / queries (pairs) | 3 / 5 |",
        "| mean RPS | 0.5000 |",
        "| chance (mean k/N_eff) | 0.0625 |",
        "| fraction RPS > 0.5 | 0.3333 |",
        "| tercile cut-offs | 0.250, 0.750 |",
        "| bands low/mid/high | 1 / 1 / 1 |", "",
        "> warning: few targets", "",
        "Lowest-RPS entities (blind spots):", "",
        "| qid | label | RPS | hits/queries |",
        "|---|---|---|---|",
        "| Q1 |  | 0.000 | 0/1 |",  # no label: an empty cell
        "| Q2 | B\\|C | 0.500 | 1/2 |",  # a pipe in a label is escaped (it split the row before gapbench.tables)
        "| Q3 | D | 1.000 | 2/2 |", "",
    ])
    assert "> warning" not in audit_markdown({**AUDIT, "warnings": []})


_M = {"rmse": 0.2, "mae": 0.15, "pearson": 0.5, "spearman": None, "band_accuracy": 0.6, "band_macro_f1": 0.55}
PROBE = {"task": "wiki", "datasets": [{
    "name": "directed", "n": 30, "split": {"train": 18, "validation": 6, "test": 6}, "rps_mean": 0.4,
    "selected": {"family": "ridge", "params": {"alpha": 1.0}, "validation_rmse": 0.21},
    "families": {"ridge": {"validation_rmse": 0.21, "test": _M}},
    "baselines": {"train_mean": {**_M, "rmse": 0.3, "pearson": None}},
}]}


def test_probe_markdown_pinned():
    assert probe_markdown(PROBE) == "\n".join([
        "# ARGUS blind-spot probes: wiki", "",
        "## directed: 30 labelled entities (train 18 / validation 6 / test 6), mean RPS 0.400", "",
        "Selected on validation RMSE: **ridge** {'alpha': 1.0} (validation RMSE 0.210).", "",
        "| probe (test) | RMSE | MAE | Pearson | Spearman | band acc. | band macro-F1 |",
        "|---|---|---|---|---|---|---|",
        "| ridge (val RMSE 0.210) | 0.200 | 0.150 | 0.500 | n/a | 0.600 | 0.550 |",
        "| train mean | 0.300 | 0.150 | n/a | n/a | 0.600 | 0.550 |", "",
        "> With 6 test entities these figures are noisy; read them as a sanity check, not as a reproduction of the "
        "paper's Table 1 (tens of thousands of entities).", "",
        "Family and hyper-parameters are selected on validation RMSE; the authors' code selected on test.", "",
    ])
