"""The task folder a build writes, in BEIR's layout so that ``gapbench run DIR`` takes it as it is:

    corpus.jsonl                    the documents built from ({"_id", "title", "text"})
    queries.jsonl                   the queries ({"_id", "text"})
    qrels/test.tsv                  gold (G) judgements: the documents graded 2 after rejudging
    qrels/pooled.tsv                pooled (P) judgements: G plus the positives the pool stage added
    per_query_excluded_ids.json     per query, documents masked before the top-k cut (OBLIQ's file of that name)
    clusters.jsonl                  per query, the cluster or target it came from, its description and tries
    card.json                       the build's card (:class:`gapbench.schemas.ObliqBuildReport`)
    .obliq_build/                   per-stage checkpoints a re-run reuses

Every file is written atomically; the card last, so a folder with a card is a finished build.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from ...files import atomic_writer, write_text_atomic
from ...formats import write_jsonl
from ...types import Corpus

FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/pooled.tsv", "per_query_excluded_ids.json",
         "clusters.jsonl", "card.json")


def write_qrels(path: Path, qrels: Mapping[str, Mapping[str, int]]) -> None:
    with atomic_writer(path) as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid in sorted(qrels):
            for did in sorted(qrels[qid]):
                fh.write(f"{qid}\t{did}\t{qrels[qid][did]}\n")


def write_task(out: Path, corpus: Corpus, queries: Mapping[str, str], gold: Mapping[str, Mapping[str, int]],
               pooled: Mapping[str, Mapping[str, int]], excluded: Mapping[str, Iterable[str]],
               clusters: list[dict]) -> None:
    out = Path(out)
    write_jsonl(({"_id": d.doc_id, "title": d.title or "", "text": d.text} for d in corpus.values()),
                out / "corpus.jsonl")
    write_jsonl(({"_id": q, "text": queries[q]} for q in sorted(queries)), out / "queries.jsonl")
    write_qrels(out / "qrels" / "test.tsv", gold)
    write_qrels(out / "qrels" / "pooled.tsv", pooled)
    write_text_atomic(out / "per_query_excluded_ids.json",
                      json.dumps({q: sorted(ids) for q, ids in sorted(excluded.items()) if ids}, indent=1) + "\n")
    write_jsonl(clusters, out / "clusters.jsonl")


def write_card(out: Path, card_json: str) -> None:
    write_text_atomic(Path(out) / "card.json", card_json + "\n")
