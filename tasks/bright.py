"""BRIGHT (Su et al., 2024): reasoning-intensive retrieval, 12 domains, from the Hugging Face dataset
``xlangai/BRIGHT``.

Tasks:

- ``bright/<domain>`` for the 12 domains: the ``examples`` config gives the queries (``query``), the qrels
(``gold_ids``,
  grade 1) and the per-query ``excluded_ids``; the ``documents`` config gives the corpus (``id``, ``content``). The
  split is the domain.
- ``bright/<domain>/long`` for the long-document setting (the seven StackExchange domains and pony): qrels from
  ``gold_ids_long``, corpus from ``long_documents``.

``excluded_ids`` (``["N/A"]`` means none) become ``TaskData.excluded``: masked before the top-k cut, so an excluded
document never appears in a run and every query still gets k results. BRIGHT's ``run.py`` checks that no excluded id is
also gold; this loader raises if one is.

Task options (``bright/biology:reasoning=gpt4,instructions=true``):

- ``reasoning=MODEL`` replaces each query by an LLM's reasoning about it, read from the ``<MODEL>_reason`` config
  (``gpt4``, ``claude-3-opus``, ``llama3-70b``, ``grit``, ``Gemini-1.0``). Those configs have the examples schema with
  ``query`` holding the reasoning; as in BRIGHT's ``run.py`` the qrels and exclusions come from the same rows.
- ``instructions=true`` sets ``Task.instruction`` to BRIGHT's query instruction for the domain (the e5-mistral / SFR /
  gte-Qwen form, see :data:`QUERY_INSTRUCTIONS`). Off by default so lexical retrievers never see it.
- ``data_dir=DIR`` (or the environment variable ``GAPBENCH_DATA_BRIGHT=DIR``) reads a local copy laid out as the
  dataset repository: ``DIR/examples/biology-00000-of-00001.parquet`` (or ``DIR/examples/biology.jsonl``),
  ``DIR/documents/biology-*.parquet``, ``DIR/long_documents/...``, ``DIR/gpt4_reason/...``. Get one with
  ``huggingface-cli download xlangai/BRIGHT --repo-type dataset --revision <HF_REVISION> --local-dir DIR``.
- ``revision=SHA`` overrides the pinned dataset revision :data:`HF_REVISION`.

Published BM25 nDCG@10 (x100), :data:`PUBLISHED_BM25_NDCG10`::

    domain               BRIGHT paper   Pyserini bm25qs
    biology                  18.9           19.72
    earth_science            27.2           27.89
    economics                14.9           15.18
    psychology               12.5           12.66
    robotics                 13.6           13.90
    stackoverflow            18.4           18.55
    sustainable_living       15.0           15.15
    leetcode                 24.4           24.97
    pony                      7.9            7.89
    aops                      6.2            6.27
    theoremqa_questions      10.4           10.36
    theoremqa_theorems        4.9            4.92

Both runs are query-side BM25 (k1=0.9, b=0.4; see ``gapbench.adapters.bm25_qs``). On a machine with hub access, one
command reproduces the table with gapbench's implementation of that model (all 12 domains, plus their mean)::

    gapbench run bright --retriever bm25-qs

Expect agreement within a few tenths of a point, not digit for digit: gapbench analyses text with bm25s (Lucene's
English stopwords, Porter stemming) rather than Lucene's StandardAnalyzer, and Pyserini's index quantises lengths.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable

from gapbench.errors import ConfigError, DataFormatError
from gapbench.task import TASKS, Task
from gapbench.tasks import _hub
from gapbench.types import Corpus, Document, Qrels, Queries, Query, TaskData

HF_DATASET = "xlangai/BRIGHT"
# The revision MTEB pins for its BRIGHT tasks (mteb/tasks/retrieval/eng/BrightRetrieval.py), a full commit of the
# dataset repository that holds examples, documents, long_documents and the <model>_reason configs.
HF_REVISION = "3066d29c9651a576c8aba4832d249807b181ecae"
SHORT_NAME = "bright"  # local copies come from data_dir=DIR or GAPBENCH_DATA_BRIGHT=DIR

STACKEXCHANGE = (
    "biology", "earth_science", "economics", "psychology", "robotics", "stackoverflow", "sustainable_living",
)
DOMAINS = STACKEXCHANGE + ("leetcode", "pony", "aops", "theoremqa_questions", "theoremqa_theorems")
LONG_DOMAINS = STACKEXCHANGE + ("pony",)  # long_documents exists only for these
EXCLUDED_SENTINEL = "N/A"  # excluded_ids == ["N/A"] means no exclusion

# reasoning option -> dataset config holding that model's reasoning in the `query` field
REASONING_CONFIGS = {
    "gpt4": "gpt4_reason",
    "claude-3-opus": "claude-3-opus_reason",
    "llama3-70b": "llama3-70b_reason",
    "grit": "grit_reason",
    "Gemini-1.0": "Gemini-1.0_reason",
}

# Queries per domain, from the dataset card (num_examples of every examples-schema config).
N_QUERIES = {
    "biology": 103, "earth_science": 116, "economics": 103, "psychology": 101, "robotics": 101, "stackoverflow": 117,
    "sustainable_living": 108, "leetcode": 142, "pony": 112, "aops": 111, "theoremqa_questions": 194,
    "theoremqa_theorems": 76,
}

# BRIGHT's own query instructions (configs/{sf,e5,qwen,qwen2}/<task>.json, written by generate_configs.py), without the
# model-specific wrapper ("Instruct: ...\nQuery: " for e5/SFR/Qwen, "<|user|>\n...\n<|embed|>\n" for GritLM). BRIGHT
# fills the StackExchange and pony templates with the raw task name (run.py passes --task), hence "earth_science".
_SE_TEMPLATE = "Given a {task} post, retrieve relevant {what} that help answer the post"
QUERY_INSTRUCTIONS = {
    **{d: _SE_TEMPLATE.format(task=d, what="passages") for d in STACKEXCHANGE},
    "pony": "Given a pony question, retrieve relevant passages that help answer the question",
    "leetcode": "Given a coding problem, retrieve relevant examples that help answer the problem",
    "aops": "Given a Math problem, retrieve relevant examples that help answer the problem",
    "theoremqa_questions": "Given a Math problem, retrieve relevant examples that help answer the problem",
    "theoremqa_theorems": "Given a Math problem, retrieve relevant theorems that help answer the problem",
}
# The long-document setting asks for documents instead of passages.
QUERY_INSTRUCTIONS_LONG = {
    **{d: _SE_TEMPLATE.format(task=d, what="documents") for d in STACKEXCHANGE},
    "pony": "Given a pony question, retrieve relevant documents that help answer the question",
}

CITATION = (
    "Su, Yen, Xia, Shi, Muennighoff, Wang, Liu, Shi, Siegel, Tang, Sun, Yoon, Arik, Chen, Yu. BRIGHT: A Realistic and "
    "Challenging Benchmark for Reasoning-Intensive Retrieval. 2024. arXiv:2407.12883"
)
LICENSE = "CC-BY-4.0"  # dataset card and GitHub repository

# Published BM25 nDCG@10 x 100. "paper": BRIGHT paper, Table 2 (gensim LuceneBM25Model on query and documents);
# "pyserini_bm25qs": Pyserini's two-click reproduction, query-side BM25 (Ge, Sharifymoghaddam, Lin 2025).
PUBLISHED_BM25_NDCG10 = {
    "paper": dict(zip(DOMAINS, (18.9, 27.2, 14.9, 12.5, 13.6, 18.4, 15.0, 24.4, 7.9, 6.2, 10.4, 4.9))),
    "pyserini_bm25qs": dict(
        zip(DOMAINS, (19.72, 27.89, 15.18, 12.66, 13.90, 18.55, 15.15, 24.97, 7.89, 6.27, 10.36, 4.92))
    ),
}
REPRODUCE_COMMAND = "gapbench run bright --retriever bm25-qs"


# ---------------------------------------------------------------------------------------------------- loading

def _config_for(reasoning: str | None) -> str:
    """The examples-schema config to read: ``examples`` or ``<model>_reason``."""
    if reasoning is None:
        return "examples"
    by_lower = {k.lower(): k for k in REASONING_CONFIGS}
    by_lower.update({v.lower(): k for k, v in REASONING_CONFIGS.items()})
    key = by_lower.get(reasoning.strip().lower())
    if key is None:
        close = difflib.get_close_matches(reasoning, list(REASONING_CONFIGS), n=1, cutoff=0.4)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"bright: unknown reasoning model {reasoning!r}.{hint} Accepted: {', '.join(REASONING_CONFIGS)} "
            "(each reads the dataset config <model>_reason); leave it out for the original queries."
        )
    return REASONING_CONFIGS[key]


def _id_list(row: dict, field: str, where: str, line: int) -> list[str]:
    if field not in row:
        raise DataFormatError(
            f"BRIGHT example lacks field {field!r} (found: {', '.join(row) or 'none'}).", path=where, line=line
        )
    value = row[field]
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise DataFormatError(f"BRIGHT example field {field!r} is {value!r}; expected a list of id strings.",
                              path=where, line=line)
    return [str(v) for v in value]


def _where(config: str, domain: str, data_dir: str | None, revision: str) -> str:
    root = data_dir or _hub.env_data_dir(SHORT_NAME)
    return f"{root}/{config}/{domain}" if root else f"hf:{HF_DATASET}@{revision[:12]}/{config}/{domain}"


def load_bright(
    domain: str, *, long: bool = False, reasoning: str | None = None, data_dir: str | None = None,
    revision: str = HF_REVISION,
) -> TaskData:
    """Corpus, queries, qrels and exclusions of one BRIGHT domain.

    >>> data = load_bright("biology", data_dir="tests/fixtures/bright")  # doctest: +SKIP
    """
    if domain not in DOMAINS:
        raise ConfigError(f"bright has no domain {domain!r}; domains: {', '.join(DOMAINS)}.")
    if long and domain not in LONG_DOMAINS:
        raise ConfigError(
            f"bright/{domain} has no long-document setting; it exists for {', '.join(LONG_DOMAINS)}."
        )
    examples_config = _config_for(reasoning)
    doc_config = "long_documents" if long else "documents"
    gold_field = "gold_ids_long" if long else "gold_ids"

    doc_where = _where(doc_config, domain, data_dir, revision)
    docs = []
    for n, row in enumerate(_hub.rows(HF_DATASET, doc_config, domain, revision, data_dir=data_dir,
                                      short_name=SHORT_NAME), 1):
        missing = [f for f in ("id", "content") if f not in row]
        if missing:
            raise DataFormatError(f"BRIGHT document lacks field(s) {', '.join(missing)}; documents have id, content.",
                                  path=doc_where, line=n)
        docs.append(Document(str(row["id"]), str(row["content"] or "")))
    corpus = Corpus(docs, source=doc_where)

    ex_where = _where(examples_config, domain, data_dir, revision)
    queries, qrels, excluded = [], {}, {}
    for n, row in enumerate(_hub.rows(HF_DATASET, examples_config, domain, revision, data_dir=data_dir,
                                      short_name=SHORT_NAME), 1):
        for f in ("id", "query"):
            if f not in row:
                raise DataFormatError(f"BRIGHT example lacks field {f!r} (found: {', '.join(row) or 'none'}).",
                                      path=ex_where, line=n)
        qid = str(row["id"])
        gold = _id_list(row, gold_field, ex_where, n)
        masked = frozenset(d for d in _id_list(row, "excluded_ids", ex_where, n) if d != EXCLUDED_SENTINEL)
        both = sorted(masked.intersection(gold))
        if both:
            raise DataFormatError(
                f"BRIGHT example {qid!r} lists {both[0]!r} both in excluded_ids and in {gold_field}; an excluded "
                "document can never be retrieved, so it cannot be gold. Check the copy against the dataset repository.",
                path=ex_where, line=n,
            )
        queries.append(Query(qid, str(row["query"] or "")))
        qrels[qid] = dict.fromkeys(gold, 1)
        if masked:
            excluded[qid] = masked
    return TaskData(corpus, Queries(queries, source=ex_where), Qrels(qrels, source=ex_where), excluded)


# ---------------------------------------------------------------------------------------------------- tasks

def make_task(
    domain: str, *, long: bool = False, reasoning: str | None = None, instructions: bool = False,
    data_dir: str | None = None, revision: str = HF_REVISION,
) -> Task:
    if isinstance(reasoning, str) and reasoning.strip().lower() in ("", "none", "null"):
        reasoning = None
    config = _config_for(reasoning)  # fail on a bad model name when the task is built, not when it loads
    base = f"bright/{domain}" + ("/long" if long else "")
    # the variant is part of the name, so results of different query sets never share a row
    opts = ([f"reasoning={next(k for k, v in REASONING_CONFIGS.items() if v == config)}"] if reasoning else []) + (
        ["instructions=true"] if instructions else []
    )
    name = base + (":" + ",".join(opts) if opts else "")
    instruction = (QUERY_INSTRUCTIONS_LONG if long else QUERY_INSTRUCTIONS)[domain] if instructions else ""
    setting = "long documents (complete web pages)" if long else "documents"
    queries = f"{config.removesuffix('_reason')} reasoning as queries" if reasoning else "the original queries"
    return Task(
        name=name,
        loader=functools.partial(load_bright, domain, long=long, reasoning=reasoning, data_dir=data_dir,
                                 revision=revision),
        source=f"hf:{HF_DATASET}" + (f" (local copy {data_dir})" if data_dir else ""),
        revision=revision,
        split=domain,
        license=LICENSE,
        citation=CITATION,
        description=f"BRIGHT {domain}: reasoning-intensive retrieval over {setting}, {queries}.",
        main_measure="nDCG@10",
        measures=("nDCG@10", "R@10", "R@100", "RR@10"),
        n_docs=None,  # differs between dataset revisions; read len(task.load().corpus)
        n_queries=N_QUERIES[domain],
        instruction=instruction,
    )


def _factory(domain: str, long: bool):
    def task(reasoning: str | None = None, instructions: bool = False, data_dir: str | None = None,
             revision: str = HF_REVISION) -> Task:
        return make_task(domain, long=long, reasoning=reasoning, instructions=instructions, data_dir=data_dir,
                         revision=revision)

    task.__name__ = f"bright_{domain}" + ("_long" if long else "")
    task.__doc__ = f"BRIGHT {domain}{' (long documents)' if long else ''}; options: reasoning, instructions, data_dir."
    return task


for _domain in DOMAINS:
    TASKS.register(f"bright/{_domain}", _factory(_domain, False))
for _domain in LONG_DOMAINS:
    TASKS.register(f"bright/{_domain}/long", _factory(_domain, True))
