"""MuSiQue (Trivedi et al., 2022): multi-hop questions composed from single-hop ones, answerable dev set.

``musique`` reads records in the published format of ``musique_ans_v1.0_dev.jsonl``: one JSON object per line with
``id``, ``paragraphs`` (``[{idx, title, paragraph_text, is_supporting}]``, 20 per question), ``question``,
``question_decomposition``, ``answer``, ``answer_aliases`` and ``answerable``.

- corpus: every question's paragraphs pooled into one corpus, deduplicated on (title, paragraph_text), since MuSiQue
  reuses a paragraph as a distractor of many questions. A paragraph's id is the first 16 hex digits of the SHA-256 of
  ``title + "\\n" + paragraph_text`` (UTF-8): the same paragraph has the same id in the shipped slice, the full file
  and the hub copy, whatever the order or subset of questions.
- queries: ``question``, keyed by the record's ``id``; a record with ``answerable`` false (the ``full`` release mixes
  them in) is skipped, as the ``ans`` file has none.
- qrels: the paragraphs marked ``is_supporting`` (one per hop), grade 1.

Sources (task options): ``source=packaged`` (default) reads the slice shipped inside gapbench (100 real dev questions,
see ``tasks/data/musique/PROVENANCE.md``); ``path=FILE`` (or ``GAPBENCH_DATA_MUSIQUE=FILE``) reads a local copy of the
published file (``.jsonl`` or ``.jsonl.gz``), e.g. ``musique_ans_v1.0_dev.jsonl`` from the authors'
``musique_v1.0.zip``; ``source=hub`` reads the Hugging Face mirror ``dgslibisey/MuSiQue`` (split ``validation``) through
``datasets``.

>>> get_task("musique").load()  # doctest: +SKIP
>>> get_task("musique:path=/data/musique/musique_ans_v1.0_dev.jsonl")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path

from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError
from gapbench.formats import read_jsonl
from gapbench.task import TASKS, Task
from gapbench.tasks._hub import load_dataset
from gapbench.types import Corpus, Document, Qrels, Queries, Query, TaskData

PACKAGED = ("data", "musique", "musique_ans_v1.0_dev.slice100.jsonl.gz")
HF_DATASET = "dgslibisey/MuSiQue"
HF_SPLIT = "validation"
ENV_VAR = "GAPBENCH_DATA_MUSIQUE"
SOURCES = ("packaged", "hub")
RECORD_FIELDS = ("id", "paragraphs", "question")
PARAGRAPH_FIELDS = ("title", "paragraph_text", "is_supporting")
DEV_QUESTIONS = 2417  # answerable dev questions in musique_ans_v1.0_dev.jsonl
CITATION = (
    "Trivedi, Balasubramanian, Khot, Sabharwal. MuSiQue: Multihop Questions via Single-hop Question Composition. "
    "TACL 10 (2022). arXiv:2108.00573"
)


def paragraph_id(title: str, text: str) -> str:
    """The corpus id of a paragraph: 16 hex digits of SHA-256 over ``title + "\\n" + text``."""
    return hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:16]


def _paragraphs(row: dict, source: str, n: int) -> list[dict]:
    paragraphs = row["paragraphs"]
    if not isinstance(paragraphs, list):
        raise DataFormatError(f"MuSiQue record {row['id']!r}: 'paragraphs' is not a list.", path=source, line=n)
    for i, p in enumerate(paragraphs):
        missing = [f for f in PARAGRAPH_FIELDS if not isinstance(p, dict) or f not in p]
        if missing:
            raise DataFormatError(f"MuSiQue record {row['id']!r}: paragraph {i} lacks field(s) {', '.join(missing)} "
                                  f"(each has {', '.join(PARAGRAPH_FIELDS)}).", path=source, line=n)
    return paragraphs


def build(rows: Iterable[tuple[int, dict]], source: str) -> TaskData:
    """TaskData from numbered MuSiQue records (``(line, record)``): pooled, deduplicated paragraphs, the questions,
    and their supporting paragraphs as grade-1 qrels."""
    docs: dict[str, Document] = {}
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    seen: dict[str, int] = {}
    for n, row in rows:
        missing = [f for f in RECORD_FIELDS if f not in row]
        if missing:
            raise DataFormatError(f"MuSiQue record lacks field(s) {', '.join(missing)}; the published format has "
                                  "id, paragraphs, question, question_decomposition, answer, answer_aliases, "
                                  "answerable.", path=source, line=n)
        if row.get("answerable", True) is False:
            continue
        qid = str(row["id"])
        if qid in seen:
            raise DuplicateIdError(f"duplicate MuSiQue id {qid!r} (first seen on line {seen[qid]}).", path=source,
                                   line=n)
        seen[qid] = n
        gold = {}
        for p in _paragraphs(row, source, n):
            title, text = str(p["title"]), str(p["paragraph_text"])
            pid = paragraph_id(title, text)
            docs.setdefault(pid, Document(pid, text, title))
            if p["is_supporting"] is True:
                gold[pid] = 1
        if not gold:
            raise DataFormatError(f"MuSiQue record {qid!r} is answerable but marks no paragraph is_supporting.",
                                  path=source, line=n)
        queries.append(Query(qid, str(row["question"])))
        qrels[qid] = gold
    return TaskData(Corpus(docs.values(), source=source), Queries(queries, source=source), Qrels(qrels, source=source))


def packaged_file():
    return resources.files("gapbench.tasks").joinpath(*PACKAGED)


def load_packaged() -> TaskData:
    with resources.as_file(packaged_file()) as real:
        return build(read_jsonl(real), str(real))


def load_file(path: str | os.PathLike) -> TaskData:
    real = Path(path).expanduser()
    if not real.is_file():
        raise DataFormatError(f"no MuSiQue file here; give the published musique_ans_v1.0_dev.jsonl (or .jsonl.gz) "
                              f"from the authors' musique_v1.0.zip as path=FILE or {ENV_VAR}=FILE.", path=real)
    return build(read_jsonl(real), str(real))


def load_hub(revision: str = "main") -> TaskData:
    fix = (f"Without hub access give a local copy of musique_ans_v1.0_dev.jsonl as path=FILE or {ENV_VAR}=FILE, or "
           "use the slice shipped with gapbench (source=packaged).")
    ds = load_dataset(HF_DATASET, None, HF_SPLIT, revision, feature="source=hub", fix=fix)
    return build(((i + 1, dict(r)) for i, r in enumerate(ds)), f"hf:{HF_DATASET}@{revision[:12]}")


def make_task(source: str = "packaged", path: str | None = None, revision: str = "main") -> Task:
    if source not in SOURCES:
        raise ConfigError(f"musique source {source!r}: choose source=packaged (shipped slice), source=hub "
                          f"({HF_DATASET}), or give a local file with path=FILE.")
    path = path or os.environ.get(ENV_VAR)
    loader: Callable[[], TaskData]
    if path:
        loader, src, rev, n_queries = functools.partial(load_file, path), f"local file {path}", "local", None
    elif source == "hub":
        loader, src, rev, n_queries = functools.partial(load_hub, revision), f"hf:{HF_DATASET}", revision, DEV_QUESTIONS
    else:
        loader, src, rev, n_queries = load_packaged, "gapbench package data (MuSiQue dev slice)", \
            "github:AdelWang/MIGRES@a261f2b30ad5ff31e21c1c5fdc1763de738c1958", 100
    return Task(
        name="musique",
        loader=loader,
        source=src,
        revision=rev,
        split="dev",
        license="CC BY 4.0",
        citation=CITATION,
        description="MuSiQue answerable dev: 2-4 hop questions over their pooled Wikipedia paragraphs; the gold is "
                    "every supporting paragraph (one per hop).",
        main_measure="nDCG@10",
        measures=("nDCG@10", "R@10", "R@100", "RR@10"),
        n_docs=1769 if loader is load_packaged else None,
        n_queries=n_queries,
    )


def musique(source: str = "packaged", path: str | None = None, revision: str = "main") -> Task:
    return make_task(source, path, revision)


TASKS.register("musique", musique)
