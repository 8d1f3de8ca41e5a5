"""OBLIQ-Bench (Tchuindjo, Shah and Khattab, 2026): five tasks whose relevance is latent in the document.

``obliq/{twitter,wildchat,math,writing,congress}``, read from the files of the Hugging Face dataset repository
``dianetc/OBLIQ-Bench`` at a pinned revision (``huggingface_hub.hf_hub_download``; they are plain files, not a
``datasets`` config): ``<task folder>/corpus/corpus.jsonl`` and ``<task folder>/queries+qrels/{queries.jsonl,
qrels.tsv, qrels_pool.tsv, per_query_excluded_ids.json}``.

* Gold judgements (``qrels.tsv``) by default; ``qrels=pool`` picks the pooled ones (``qrels_pool.tsv``, twitter,
  wildchat and math only), which add documents a reasoning model judged relevant among the systems' top results.
  :func:`load_both` gives both, so a report can print gold and pooled scores side by side (the paper's G/P columns).
* ``per_query_excluded_ids.json`` (math, writing) becomes ``TaskData.excluded``: the query's own problem, or snippets of
  the same source post, masked before the top-k cut.
* A local copy in the repository layout: task option ``data_dir=DIR`` or ``GAPBENCH_DATA_OBLIQ=DIR``.
* The tournament settings the authors ran (:data:`TOURNAMENT`) are the task's defaults for ``--verifier tournament``;
  options the user gives win.
* ``solutions=true``: the Tournament+Soln system of the paper's Table 3. Retrievers index the problems as they are;
  the verifier reads each problem with its solution, taken from a ``solution`` field of ``corpus.jsonl`` (and of
  ``queries.jsonl``, else the corpus record of the query's own id). The dataset revision pinned here ships no such
  field, so this needs a copy that carries one.

>>> gold, pool = load_both("math")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from gapbench.corpus_store import read_jsonl_corpus
from gapbench.errors import ConfigError, DataFormatError, DatasetUnavailableError
from gapbench.formats import read_beir_qrels, read_jsonl, read_jsonl_queries
from gapbench.task import TASKS, Task
from gapbench.tasks._hub import first_line
from gapbench.types import Corpus, Document, Qrels, Queries, Query, TaskData

HF_DATASET = "dianetc/OBLIQ-Bench"
HF_REVISION = "4ebee29f68ceeb62ca00bd73d5478acdd3cd7764"
ENV_VAR = "GAPBENCH_DATA_OBLIQ"
CITATION = (
    "Tchuindjo, Shah, Khattab. OBLIQ-Bench: Exposing Overlooked Bottlenecks in Modern Retrievers with Latent and "
    "Implicit Queries. 2026. arXiv:2605.06235"
)
LICENSE = f"see the dataset card, https://huggingface.co/datasets/{HF_DATASET}"
MEASURES = ("nDCG@10", "nDCG@50", "R@10", "R@50", "R@100")  # the columns of the paper's Tables 2-4
QRELS_CHOICES = ("gold", "pool")
# the authors' tournament per task (batch size B, promoted P, final batch), as the OBLIQ-Bench authors give them for
# their runs; writing and congress have no published setting and keep the reranker's own defaults
TOURNAMENT = {
    "twitter": {"batch_size": 20, "promote": 4, "max_final": 20},
    "wildchat": {"batch_size": 20, "promote": 4, "max_final": 20},
    "math": {"batch_size": 6, "promote": 2, "max_final": 16},
}
# Tournament+Soln reads longer passages (problem and solution), hence smaller batches; its final batch is not given
# apart from the math one, so it keeps math's 16
TOURNAMENT_WITH_SOLUTIONS = {"batch_size": 4, "promote": 2, "max_final": 16}
SOLUTION_FIELD = "solution"


@dataclass(frozen=True)
class ObliqSet:
    folder: str
    has_pool: bool
    has_exclusions: bool
    n_queries: int  # paper, Table 1
    n_docs: int
    description: str


SETS: dict[str, ObliqSet] = {
    "twitter": ObliqSet(
        "descriptive/twitter", True, False, 281, 72122,
        "Twitter-Conflict (descriptive): tweets that express a stance only implicitly; explicit and news tweets "
        "are hard distractors.",
    ),
    "wildchat": ObliqSet(
        "descriptive/wildchat", True, False, 40, 507729,
        "WildChat Errors (descriptive): 2025 WildChat conversations that exhibit a named assistant failure mode.",
    ),
    "math": ObliqSet(
        "analogues/math", True, True, 151, 3508,
        "Math Meta-Program (analogue): competition problems whose solutions share the query's proof technique.",
    ),
    "writing": ObliqSet(
        "analogues/writing", False, True, 512, 10389,
        "Writing-Style (analogue): snippets by the query snippet's author on other topics; same-post snippets "
        "are masked.",
    ),
    "congress": ObliqSet(
        "tip-of-tongue/congress", False, False, 254, 213650,
        "Congress Hearings (tip of the tongue): the one hearing passage a lossy recollection describes.",
    ),
}


def _check(name: str) -> ObliqSet:
    if name not in SETS:
        raise ConfigError(f"unknown OBLIQ-Bench task {name!r}; known: {', '.join(SETS)}.")
    return SETS[name]


def repo_files(name: str) -> dict[str, str]:
    """Paths inside the dataset repository of each file the task reads."""
    spec = _check(name)
    qq = f"{spec.folder}/queries+qrels"
    files = {"corpus": f"{spec.folder}/corpus/corpus.jsonl", "queries": f"{qq}/queries.jsonl",
             "gold": f"{qq}/qrels.tsv"}
    if spec.has_pool:
        files["pool"] = f"{qq}/qrels_pool.tsv"
    if spec.has_exclusions:
        files["excluded"] = f"{qq}/per_query_excluded_ids.json"
    return files


def _fetch(name: str, relpath: str, data_dir: str | None, revision: str) -> Path:
    if data_dir:
        root = Path(data_dir).expanduser()
        if not root.is_dir():
            raise DataFormatError(f"data_dir for {HF_DATASET} is not a directory.", path=root)
        path = root / relpath
        if not path.exists():
            raise DataFormatError(
                f"missing {relpath} for obliq/{name}; a local copy keeps the layout of the dataset repository "
                f"(huggingface-cli download {HF_DATASET} --repo-type dataset --revision {revision} --local-dir DIR).",
                path=root,
            )
        return path
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ConfigError(f"reading {HF_DATASET} needs 'huggingface_hub': pip install 'gapbench[hub]'.") from None
    try:
        return Path(hf_hub_download(HF_DATASET, relpath, repo_type="dataset", revision=revision))
    except Exception as exc:  # the hub client raises many types (connection, offline mode, missing file or revision)
        raise DatasetUnavailableError(
            f"cannot fetch {relpath} of the Hugging Face dataset {HF_DATASET} (revision {revision[:12]}): "
            f"{type(exc).__name__}: {first_line(exc)}. With hub access it downloads by itself; without, download the "
            f"repository elsewhere (huggingface-cli download {HF_DATASET} --repo-type dataset --revision {revision} "
            f"--local-dir DIR) and pass the task option data_dir=DIR or set {ENV_VAR}=DIR."
        ) from None


def read_exclusions(path: Path) -> dict[str, frozenset[str]]:
    """``{"query id": ["doc id", ...]}`` as written in ``per_query_excluded_ids.json``."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"malformed JSON ({exc.msg}).", path=path, line=exc.lineno) from None
    if not isinstance(raw, dict):
        raise DataFormatError(f"expected a JSON object query id -> list of doc ids, found {type(raw).__name__}.",
                              path=path)
    out: dict[str, frozenset[str]] = {}
    for qid, ids in raw.items():
        if not isinstance(ids, list) or not all(isinstance(d, (str, int)) for d in ids):
            raise DataFormatError(f"query {qid!r}: expected a list of doc ids, found {ids!r:.80}.", path=path)
        out[str(qid)] = frozenset(str(d) for d in ids)
    return out


def _read_qrels(name: str, which: str, data_dir: str | None, revision: str) -> Qrels:
    spec = _check(name)
    if which not in QRELS_CHOICES:
        raise ConfigError(f"obliq qrels={which!r}: choose qrels=gold or qrels=pool.")
    if which == "pool" and not spec.has_pool:
        have = ", ".join(n for n, s in SETS.items() if s.has_pool)
        raise ConfigError(f"obliq/{name} has no pooled judgements (qrels_pool.tsv); pooled ones exist for {have}.")
    return read_beir_qrels(_fetch(name, repo_files(name)[which], data_dir, revision))


def _check_docs(qrels: Qrels, corpus, path_hint: str) -> None:
    for qid, docs in qrels.items():
        for did in docs:
            if did not in corpus:
                raise DataFormatError(f"judgement of query {qid!r} names document {did!r}, absent from the corpus.",
                                      path=path_hint)


def load(name: str, qrels: str = "gold", data_dir: str | None = None, revision: str = HF_REVISION) -> TaskData:
    spec = _check(name)
    data_dir = data_dir or os.environ.get(ENV_VAR)
    files = repo_files(name)
    judged = _read_qrels(name, qrels, data_dir, revision)
    corpus = read_jsonl_corpus(_fetch(name, files["corpus"], data_dir, revision))
    queries = read_jsonl_queries(_fetch(name, files["queries"], data_dir, revision))
    _check_docs(judged, corpus, files[qrels])
    missing = [q for q in judged if q not in queries]
    if missing:
        raise DataFormatError(
            f"{len(missing)} judged queries are absent from queries.jsonl (first: {missing[0]!r}).", path=files[qrels]
        )
    queries = Queries(q for q in queries.values() if q.query_id in judged)
    excluded: dict[str, frozenset[str]] = {}
    if spec.has_exclusions:
        excluded = {q: ids for q, ids in read_exclusions(_fetch(name, files["excluded"], data_dir, revision)).items()
                    if q in queries and ids}
    return TaskData(corpus, queries, judged, excluded)


def load_both(name: str, data_dir: str | None = None, revision: str = HF_REVISION) -> tuple[TaskData, Qrels | None]:
    """Gold task data and the pooled qrels (None where the task has none), restricted to the same queries."""
    gold = load(name, "gold", data_dir, revision)
    if not _check(name).has_pool:
        return gold, None
    pool = _read_qrels(name, "pool", data_dir or os.environ.get(ENV_VAR), revision)
    _check_docs(pool, gold.corpus, repo_files(name)["pool"])
    return gold, pool.restrict(gold.queries)


def read_solutions(path: Path) -> dict[str, str]:
    """``{id: solution}`` from the ``solution`` field of a JSONL file (records without one are left out)."""
    out: dict[str, str] = {}
    for n, obj in read_jsonl(path):
        value = obj.get(SOLUTION_FIELD)
        if value is None:
            continue
        if not isinstance(value, str):
            raise DataFormatError(f"field {SOLUTION_FIELD!r} holds {type(value).__name__}; a solution is text (a JSON "
                                  "string), or leave the field out.", path=path, line=n)
        rid = next((obj[k] for k in ("_id", "doc_id", "id", "query_id") if k in obj), None)
        if value.strip() and rid is not None:
            out[str(rid)] = value.strip()
    return out


def with_solutions(text: str, solution: str | None) -> str:
    return f"{text}\nSolution: {solution}" if solution else text


def solution_view(name: str, data_dir: str | None, revision: str, data: TaskData) -> tuple[Corpus, Queries]:
    """The corpus and queries the Tournament+Soln verifier reads: each problem followed by its solution."""
    data_dir = data_dir or os.environ.get(ENV_VAR)
    files = repo_files(name)
    corpus_path = _fetch(name, files["corpus"], data_dir, revision)
    doc_solutions = read_solutions(corpus_path)
    if not doc_solutions:
        raise DataFormatError(
            f"obliq/{name}:solutions=true needs a {SOLUTION_FIELD!r} field (the problem's solution, as text) in the "
            f"corpus records, and none has one; use a copy of the data that carries solutions, or drop solutions=true.",
            path=corpus_path,
        )
    query_solutions = read_solutions(_fetch(name, files["queries"], data_dir, revision))
    corpus = Corpus((Document(d.doc_id, with_solutions(d.text, doc_solutions.get(d.doc_id)), d.title)
                     for d in data.corpus.values()), source=str(corpus_path))
    queries = Queries(
        (Query(q.query_id, with_solutions(q.text, query_solutions.get(q.query_id, doc_solutions.get(q.query_id))),
               q.instruction) for q in data.queries.values()),
    )
    return corpus, queries


def make_task(name: str, qrels: str = "gold", data_dir: str | None = None, revision: str = HF_REVISION,
              solutions: bool = False) -> Task:
    spec = _check(name)
    if qrels not in QRELS_CHOICES:
        raise ConfigError(f"obliq qrels={qrels!r}: choose qrels=gold or qrels=pool.")
    if qrels == "pool" and not spec.has_pool:
        have = ", ".join(n for n, s in SETS.items() if s.has_pool)
        raise ConfigError(f"obliq/{name} has no pooled judgements (qrels_pool.tsv); pooled ones exist for {have}.")
    local = data_dir or os.environ.get(ENV_VAR)
    options = [o for o, on in (("qrels=pool", qrels == "pool"), ("solutions=true", solutions)) if on]
    tournament = TOURNAMENT_WITH_SOLUTIONS if solutions else TOURNAMENT.get(name)
    return Task(
        name=f"obliq/{name}" + (":" + ",".join(options) if options else ""),
        loader=functools.partial(load, name, qrels, data_dir, revision),
        source=f"local copy {Path(local).expanduser()}" if local else f"hf:{HF_DATASET}/{spec.folder}",
        revision="local" if local else revision,
        split="pool" if qrels == "pool" else "gold",
        license=LICENSE,
        citation=CITATION,
        description=f"OBLIQ-Bench {spec.description}" + (" Verified with solutions." if solutions else ""),
        main_measure="nDCG@10",
        measures=MEASURES,
        n_docs=spec.n_docs,
        n_queries=spec.n_queries,
        reranker_defaults={"tournament": dict(tournament)} if tournament else {},
        verifier_view=functools.partial(solution_view, name, data_dir, revision) if solutions else None,
        extra_qrels=functools.partial(pooled_qrels, name, data_dir, revision) if qrels == "gold" and spec.has_pool
        else None,
    )


def pooled_qrels(name: str, data_dir: str | None, revision: str, data: TaskData) -> dict[str, Qrels]:
    """The gold task's ``extra_qrels``: OBLIQ reports gold (G) and pooled (P) judgements side by side."""
    pool = _read_qrels(name, "pool", data_dir or os.environ.get(ENV_VAR), revision)
    _check_docs(pool, data.corpus, repo_files(name)["pool"])
    return {"P": pool.restrict(data.queries)}


def _factory(name: str):
    def task(qrels: str = "gold", data_dir: str | None = None, revision: str = HF_REVISION,
             solutions: bool = False) -> Task:
        return make_task(name, qrels, data_dir, revision, solutions)

    task.__name__ = f"obliq_{name}"
    return task


for _name in SETS:
    TASKS.register(f"obliq/{_name}", _factory(_name))
