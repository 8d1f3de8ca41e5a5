"""ImpliRet (Taghavi et al., 2025): implicit fact retrieval, six sets.

``impliret/{multispeaker,unispeaker}/{arithmetic,wknow,temporal}``. Protocol as the authors' retrieval code: the corpus
of a set is its 1,500 ``pos_document`` texts, query i is ``question`` i, and its one gold document is document i.

``source=packaged`` (default) reads the copy shipped inside gapbench (GitHub jsonl, pinned commit, offline);
``source=hub`` reads the Hugging Face dataset ``zeinabTaghavi/ImpliRet`` at a pinned revision through ``datasets``.
"""

from __future__ import annotations

import functools
from importlib import resources

from gapbench.errors import ConfigError, DataFormatError
from gapbench.formats import read_jsonl
from gapbench.task import TASKS, Task
from gapbench.tasks._hub import load_dataset
from gapbench.types import Corpus, Document, Qrels, Queries, Query, TaskData

HF_DATASET = "zeinabTaghavi/ImpliRet"
HF_REVISION = "5ba604482dd2e55890289e494e4e457f61c9095a"
GITHUB_COMMIT = "ddd14afc6efa55a0f832315314ca556ac6a1df39"
CONFIGS = {"multispeaker": "Multi", "unispeaker": "Uni"}
SPLITS = {"arithmetic": "A", "wknow": "W", "temporal": "T"}
CITATION = (
    "Taghavi, Modarressi, Ma, Schütze. ImpliRet: Benchmarking the Implicit Fact Retrieval Challenge. 2025. "
    "arXiv:2506.14407"
)
# The authors' published BM25 (bm25s defaults) nDCG@10 x 100 (retrieval_report.txt).
PUBLISHED_BM25_NDCG10 = {
    ("unispeaker", "wknow"): 14.18, ("multispeaker", "wknow"): 15.20,
    ("unispeaker", "arithmetic"): 14.05, ("multispeaker", "arithmetic"): 8.07,
    ("unispeaker", "temporal"): 10.20, ("multispeaker", "temporal"): 11.76,
}


def packaged_file(config: str, split: str):
    return resources.files("gapbench.tasks") / "data" / "impliret" / f"{SPLITS[split]}_{CONFIGS[config]}.jsonl.gz"


def _build(rows: list[tuple[int, dict]], source: str) -> TaskData:
    docs, queries, qrels = [], [], {}
    for n, row in rows:
        missing = [f for f in ("id", "pos_document", "question") if f not in row]
        if missing:
            raise DataFormatError(f"ImpliRet row lacks field(s) {', '.join(missing)}.", path=source, line=n)
        rid = str(row["id"])
        docs.append(Document(rid, str(row["pos_document"])))
        queries.append(Query(rid, str(row["question"])))
        qrels[rid] = {rid: 1}
    return TaskData(Corpus(docs, source=source), Queries(queries, source=source), Qrels(qrels, source=source))


def load_packaged(config: str, split: str) -> TaskData:
    path = packaged_file(config, split)
    with resources.as_file(path) as real:
        return _build(list(read_jsonl(real)), str(real))


def load_hub(config: str, split: str, revision: str = HF_REVISION) -> TaskData:
    fix = (f"Without hub access use the copy shipped with gapbench (impliret/{config}/{split}, source=packaged) or a "
           "local BEIR folder path.")
    ds = load_dataset(HF_DATASET, config, split, revision, feature="source=hub", fix=fix)
    return _build([(i + 1, dict(r)) for i, r in enumerate(ds)], f"hf:{HF_DATASET}@{revision[:12]}")


def make_task(config: str, split: str, source: str = "packaged", revision: str = HF_REVISION) -> Task:
    if source not in ("packaged", "hub"):
        raise ConfigError(f"impliret source {source!r}: choose source=packaged (offline copy) or source=hub.")
    if source == "packaged":
        loader = functools.partial(load_packaged, config, split)
        rev = f"github:ZeinabTaghavi/ImpliRet@{GITHUB_COMMIT}"
        src = "gapbench package data (ImpliRet Dataset_Generation/Data)"
    else:
        loader = functools.partial(load_hub, config, split, revision)
        rev = revision
        src = f"hf:{HF_DATASET}"
    return Task(
        name=f"impliret/{config}/{split}",
        loader=loader,
        source=src,
        revision=rev,
        split=split,
        license="MIT",
        citation=CITATION,
        description=f"ImpliRet {split} reasoning, {config} discourse: the answer is implicit in the document.",
        main_measure="nDCG@10",
        measures=("nDCG@10", "R@10", "RR@10", "R@100"),
        n_docs=1500,
        n_queries=1500,
    )


def _factory(config: str, split: str):
    def task(source: str = "packaged", revision: str = HF_REVISION) -> Task:
        return make_task(config, split, source, revision)

    task.__name__ = f"impliret_{config}_{split}"
    return task


for _config in CONFIGS:
    for _split in SPLITS:
        TASKS.register(f"impliret/{_config}/{_split}", _factory(_config, _split))
