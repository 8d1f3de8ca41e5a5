"""Contract tests for plugin authors: subclass one, name your component, and pytest checks the promises every
gapbench retriever, reranker and task keeps (as PyTerrier's ``TransformerTestCase`` does for its transformers).

>>> from gapbench.testing import RetrieverContract
>>> class TestMyRetriever(RetrieverContract):  # doctest: +SKIP
...     retriever = "my-retriever"           # a registry spec, a class, or a function making one
...     changed = "my-retriever:ngram=4"     # the same with one option changed: its fingerprint must differ

What a retriever promises (``search`` called directly, with no harness filter or cut behind it):

- its ``search`` returns a :class:`~gapbench.types.Run` or a mapping query_id -> {doc_id: score}, only for the queries
  asked; ids are strings of the corpus, scores finite floats that never rise down a ranking, each document once;
- k respected: exactly min(k, documents allowed) results per query, fewer only where the class says so
  (``empty_query``/``stopword_query`` = "nothing", ``positive_only``, ``cap``);
- ties broken by gapbench's one rule (score descending, then doc_id descending): three identical documents rank
  tie-c, tie-b, tie-a whatever their corpus order;
- exclusions masked before the cut (a query still gets k results), also in the "only these candidates" form of
  multiple-choice tasks (a mapping with ``allowed(query_id)``); unknown ids in exclusions ignored;
- determinism (two searches, and a fresh instance, give the same run); a fingerprint equal in a fresh interpreter
  (for registry specs), equal before and after use, and different when one config option changes; the corpus, the
  queries and the exclusions are never changed.

A reranker promises the same of ``rerank(queries, run, corpus)``: the run's documents exactly (none added, so excluded
ones stay out; those below ``depth`` keep their order), ranked with the tie rule, an empty query handled, an unknown
doc id in the run reported as a :class:`~gapbench.errors.GapbenchError` naming it, determinism, fingerprints, no
mutation. A task promises metadata, string ids, judgements of known queries and documents, and exclusions that never
hide a positive.

An analysis registered through the entry-point group ``gapbench.analyses`` (:mod:`gapbench.plugins`) promises that
its verbs, options and report models import, its options refuse what no run accepts, its commands build, and each
verb returns its report model: subclass :class:`AnalysisContract` and say how to run each verb on :func:`tiny_task`.

The data is real and small: the first documents and queries of ImpliRet multispeaker/wknow (shipped with gapbench),
plus three documents of one text. This module needs pytest; ``import gapbench`` never imports it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import astuple, dataclass, fields
from functools import lru_cache
from typing import Any

from .errors import GapbenchError, MissingDependencyError

try:
    import pytest
except ImportError as exc:  # pragma: no cover - pytest is in the dev extra
    raise MissingDependencyError("pytest", "dev", "gapbench.testing (the contract test classes)") from exc

from .retrieval import Reranker, Retriever, fingerprint_of, get_reranker, get_retriever
from .task import Task, get_task
from .types import Corpus, Document, OtherRowsExcluded, Queries, Query, Run

__all__ = ["AnalysisContract", "ContractData", "Expect", "OnlyAllowed", "RerankerContract", "RetrieverContract",
           "TaskContract", "assert_ranked", "check_analysis", "check_report", "contract_data",
           "fingerprints_in_fresh_process", "tiny_task"]

TIE_TEXT = "The lighthouse keeper repaired the brass lantern on the cliff before the autumn storm reached the harbour."
TIE_IDS = ("tie-c", "tie-b", "tie-a")  # the order every retriever must rank them in
K = 5
EMPTY = Query("empty", "")
STOPWORDS = Query("stop", "the and of to")


@dataclass(frozen=True)
class ContractData:
    """The corpus and queries the contracts run on; ``qrels`` are ImpliRet's judgements of ``queries``."""

    corpus: Corpus
    queries: Queries
    tie_queries: Queries
    qrels: dict

    @property
    def n(self) -> int:
        return len(self.corpus)


@lru_cache(maxsize=1)
def contract_data(n_docs: int = 30, n_queries: int = 10) -> ContractData:
    """The first ``n_docs`` documents of ImpliRet multispeaker/wknow, its first ``n_queries`` queries judged only on
    them, and three documents of one text (corpus order tie-b, tie-c, tie-a) whose scores must tie."""
    data = get_task("impliret/multispeaker/wknow").load()
    docs = [data.corpus[d] for d in list(data.corpus)[:n_docs]]
    kept = {d.doc_id for d in docs}
    qids = [q for q in data.queries if set(data.qrels.get(q, {})) <= kept][:n_queries]
    qrels = {q: dict(data.qrels[q]) for q in qids}
    corpus = Corpus(docs + [Document("tie-b", TIE_TEXT), Document("tie-c", TIE_TEXT), Document("tie-a", TIE_TEXT)])
    queries = Queries([data.queries[q] for q in qids] + [Query("tie", "lighthouse keeper brass lantern storm")])
    ties = Queries([queries["tie"], Query("tie-2", "who repaired the lantern"),
                    Query("tie-3", "the lighthouse keeper and the autumn storm"), Query("tie-4", TIE_TEXT)])
    return ContractData(corpus, queries, ties, qrels)


@dataclass(frozen=True)
class Expect:
    """One component to test and what its documentation says where the general rule has exceptions.

    ``spec`` and ``changed`` are anything ``get_retriever``/``get_reranker`` take (a registry spec, a class, an
    object) or a function of no arguments making one; ``changed`` differs in one config option.
    """

    spec: Any
    changed: Any = None
    empty_query: str = "k"  # an empty query: "k" (ranked like any query) or "nothing" (an empty ranking)
    stopword_query: str = "k"  # a query of English stop words only, the same choice
    positive_only: bool = False  # only positive scores are ranked (bm25-lucene's keep_zero=false)
    cap: int | None = None  # the most documents one query can get
    post_filter_equal: bool = True  # masked top-k == the deeper ranking without the excluded (exact scoring)
    equal_ties: bool = True  # identical documents score the same (rank-based scores do not, but keep the order)
    depth: int | None = None  # rerankers: documents below this rank keep the run's order


# the multiple-choice exclusions every task uses (RAR-b's MCR rows): the contract tests the real type
OnlyAllowed = OtherRowsExcluded


def build_component(kind: str, spec: Any, **llm: Any) -> Any:
    """A retriever or reranker from a spec, a class, an object, or a function of no arguments making one."""
    make = get_retriever if kind == "retriever" else get_reranker
    if callable(spec) and not isinstance(spec, str) and not isinstance(spec, type) and \
            not callable(getattr(spec, "search" if kind == "retriever" else "rerank", None)):
        spec = spec()
    return make(spec, **llm)


_FINGERPRINTS = """
import json, sys
from gapbench.testing import build_component
from gapbench.retrieval import fingerprint_of
llm, specs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps([fingerprint_of(build_component(kind, spec, **llm)) for kind, spec in specs]))
"""


def fingerprints_in_fresh_process(specs: list[tuple[str, str]], **llm: Any) -> dict[tuple[str, str], str]:
    """(kind, spec) -> fingerprint, computed in a fresh interpreter (one for all: each start costs seconds), so a
    fingerprint that depends on the process (an id, a hash seed, a time) shows."""
    specs = [(kind, spec) for kind, spec in specs if isinstance(spec, str)]
    if not specs:
        return {}
    out = subprocess.run([sys.executable, "-c", _FINGERPRINTS, json.dumps(llm), json.dumps(specs)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return dict(zip(specs, json.loads(out.stdout.strip().splitlines()[-1])))


def _snapshot(records) -> list[tuple]:
    return [(rid, astuple(rec)) for rid, rec in records.items()]


def assert_ranked(ranking, where: str, corpus: Corpus) -> None:
    """String ids of the corpus, each once; finite float scores never rising; equal scores by doc_id descending."""
    ids = [d for d, _ in ranking]
    assert all(isinstance(d, str) for d in ids), f"{where}: doc ids that are not strings: {ids}"
    assert len(set(ids)) == len(ids), f"{where}: a document ranked twice: {ids}"
    assert all(d in corpus for d in ids), f"{where}: ids outside the corpus: {[d for d in ids if d not in corpus]}"
    for d, s in ranking:
        assert isinstance(s, float) and math.isfinite(s), f"{where}: score of {d} is {s!r}, not a finite float"
    for (d1, s1), (d2, s2) in zip(ranking, ranking[1:]):
        assert s1 >= s2, f"{where}: score rises from {d1} ({s1}) to {d2} ({s2})"
        assert s1 > s2 or d1 > d2, f"{where}: tie at {s1} not broken by doc_id descending: {d1} before {d2}"


def _as_run(out: Any, where: str) -> Run:
    if isinstance(out, Run):
        return out
    assert isinstance(out, Mapping), f"{where} returned {type(out).__name__}; expected a Run or a mapping"
    assert all(isinstance(q, str) for q in out), f"{where}: query ids that are not strings: {list(out)}"
    return Run(out)  # a mapping has no order: Run sorts it by the tie rule and checks ids and scores


def _expect_from(cls: type, spec_attr: str) -> Expect:
    values = {f.name: getattr(cls, f.name) for f in fields(Expect) if f.name not in ("spec",) and hasattr(cls, f.name)}
    spec = getattr(cls, spec_attr, None)
    if spec is None:
        raise GapbenchError(f"{cls.__name__}: set the class attribute {spec_attr!r} to the component to test (a "
                            "registry spec such as 'my-retriever', a class, or a function making one).")
    return Expect(spec, **values)


class _ComponentContract:
    """Fixtures shared by the retriever and reranker contracts; a subclass may override any of them (gapbench's own
    tests parametrize ``expect`` over every registered adapter and give ``llm`` a local test server)."""

    kind = ""
    changed: Any = None

    @pytest.fixture(scope="class")
    @classmethod
    def data(cls) -> ContractData:
        return contract_data()

    @pytest.fixture(scope="class")
    @classmethod
    def llm(cls) -> dict:
        """Keyword arguments for get_retriever/get_reranker (``llm_base_url``, ``llm_model``); none by default."""
        return {}

    @pytest.fixture(scope="class")
    @classmethod
    def build(cls, llm) -> Callable[[Any], Any]:
        return lambda spec: build_component(cls.kind, spec, **llm)

    @pytest.fixture(scope="class")
    @classmethod
    def fresh_fingerprints(cls, expect, llm) -> dict:
        return fingerprints_in_fresh_process([(cls.kind, expect.spec), (cls.kind, expect.changed)], **llm)

    def check_fingerprint(self, expect: Expect, component: Any, build, fresh: dict) -> None:
        fp = fingerprint_of(component)
        assert isinstance(fp, str) and fp, f"fingerprint {fp!r}: expected a non-empty string"
        assert fp == fingerprint_of(build(expect.spec)), "using the component changed its fingerprint"
        if (self.kind, expect.spec) in fresh:
            assert fp == fresh[self.kind, expect.spec], "the fingerprint differs in a fresh interpreter"
        assert expect.changed is not None, (f"{type(self).__name__}: set 'changed' to the component with one config "
                                            "option changed, so the test can check the fingerprint follows it")
        changed = fingerprint_of(build(expect.changed))
        assert changed != fp, "changing a config option left the fingerprint as it was"
        if (self.kind, expect.changed) in fresh:
            assert changed == fresh[self.kind, expect.changed], "the fingerprint differs in a fresh interpreter"


class RetrieverContract(_ComponentContract):
    """Subclass as ``TestX(RetrieverContract)``, set ``retriever`` (and ``changed``), and set the :class:`Expect`
    fields where your retriever's documentation makes an exception (``empty_query = "nothing"``, ...)."""

    kind = "retriever"
    retriever: Any = None

    @pytest.fixture(scope="class")
    @classmethod
    def expect(cls) -> Expect:
        return _expect_from(cls, "retriever")

    @pytest.fixture(scope="class")
    @classmethod
    def indexed(cls, expect, build, data):
        r = build(expect.spec)
        r.index(data.corpus)
        return r

    # ----------------------------------------------------------------------------------------------- helpers
    def search(self, r, queries: Queries, k: int, corpus: Corpus, exclude=None) -> Run:
        """``r.search`` called directly (no harness post-filter or cut), its run checked against the shared rules."""
        run = _as_run(r.search(queries, k, exclude=exclude), f"{type(r).__name__}.search")
        assert set(run) <= set(queries), f"results for queries not asked: {set(run) - set(queries)}"
        for q, ranking in run.items():
            assert_ranked(ranking, f"{run.name} query {q}", corpus)
            banned = exclude.get(q, frozenset()) if exclude is not None and q in exclude else frozenset()
            assert not {d for d, _ in ranking} & banned, f"{run.name} query {q} ranks excluded documents"
        return run

    @staticmethod
    def expected(expect: Expect, k: int, allowed: int) -> int:
        return min(k, allowed, expect.cap or allowed)

    def check_count(self, expect, r, queries, k, exclude, run, allowed: int, corpus: Corpus) -> None:
        """Exactly min(k, allowed) per query; with positive_only fewer where a deeper search finds nothing more."""
        for q in queries:
            got = run.get(q, ())
            if expect.positive_only:
                deep = self.search(r, Queries([queries[q]]), len(corpus), corpus, exclude).get(q, ())
                assert all(s > 0 for _, s in deep), f"query {q}: positive_only, yet a score <= 0 was ranked"
                assert list(got) == list(deep[:k]), f"query {q}: the top {k} is not the head of the full ranking"
                assert len(got) == min(k, allowed, len(deep))
            else:
                assert len(got) == self.expected(expect, k, allowed), (q, k, len(got))

    # -------------------------------------------------------------------------------------------------- tests
    def test_declares_the_protocol(self, indexed):
        assert isinstance(indexed, Retriever), f"{type(indexed).__name__} lacks name, index() or search()"
        assert isinstance(indexed.name, str) and indexed.name

    @pytest.mark.parametrize("k", [1, K, 10_000])
    def test_k_is_respected(self, expect, indexed, data, k):
        run = self.search(indexed, data.queries, k, data.corpus)
        self.check_count(expect, indexed, data.queries, k, None, run, data.n, data.corpus)

    def test_ties_are_broken_by_doc_id_descending(self, expect, indexed, data):
        run = self.search(indexed, data.tie_queries, len(TIE_IDS), data.corpus)
        for q in data.tie_queries:
            assert tuple(d for d, _ in run[q]) == TIE_IDS, (q, run[q])
            if expect.equal_ties:
                assert len({s for _, s in run[q]}) == 1, f"identical documents scored differently: {run[q]}"

    def test_exclusions_are_masked_before_the_cut(self, expect, indexed, data):
        base = self.search(indexed, data.queries, K, data.corpus)
        # each query loses its own top 3, plus a document id the corpus does not have
        exclude = {q: frozenset([d for d, _ in base[q][:3]] + ["no-such-doc"]) for q in data.queries}
        masked = self.search(indexed, data.queries, K, data.corpus, exclude)
        self.check_count(expect, indexed, data.queries, K, exclude, masked, data.n - 3, data.corpus)
        if expect.post_filter_equal:
            deep = self.search(indexed, data.queries, K + 3, data.corpus)
            for q in data.queries:
                assert masked[q] == tuple(p for p in deep[q] if p[0] not in exclude[q])[:K], q

    @pytest.mark.parametrize("k", [2, K + 1])
    def test_only_allowed_candidates_are_ranked(self, expect, indexed, data, k):
        """Multiple-choice tasks exclude through ``allowed(query_id)``: every other document is masked."""
        ids = list(data.corpus)
        own = {q: tuple(ids[i::7]) + ("no-such-doc",) for i, q in enumerate(data.queries)}  # 4 or 5 real documents
        exclude = OnlyAllowed(own, frozenset(ids))
        run = self.search(indexed, data.queries, k, data.corpus, exclude)
        for q in data.queries:
            assert {d for d, _ in run.get(q, ())} <= set(own[q]), q
            one = Queries([data.queries[q]])
            self.check_count(expect, indexed, one, k, exclude, Run({q: run.get(q, ())}, _sorted=True),
                             len(own[q]) - 1, data.corpus)

    def test_empty_and_stopword_queries(self, expect, indexed, data):
        queries = Queries([EMPTY, STOPWORDS, data.queries[next(iter(data.queries))]])
        run = self.search(indexed, queries, K, data.corpus)
        for query, documented in ((EMPTY, expect.empty_query), (STOPWORDS, expect.stopword_query)):
            got = run.get(query.query_id, ())
            want = 0 if documented == "nothing" else self.expected(expect, K, data.n)
            assert len(got) == want, (query, documented, got)
        if hasattr(indexed, "empty_queries"):  # a retriever may say which queries had no term to match
            nothing = {q.query_id for q, d in ((EMPTY, expect.empty_query), (STOPWORDS, expect.stopword_query))
                       if d == "nothing"}
            assert set(indexed.empty_queries) == nothing, indexed.empty_queries

    def test_unknown_ids_in_exclusions_are_ignored(self, indexed, data):
        exclude = {q: frozenset({"no-such-doc"}) for q in data.queries} | {"no-such-query": frozenset({"tie-a"})}
        assert self.search(indexed, data.queries, K, data.corpus, exclude).to_dict() == \
            self.search(indexed, data.queries, K, data.corpus).to_dict()

    def test_deterministic(self, expect, indexed, build, data):
        first = self.search(indexed, data.queries, K, data.corpus)
        assert self.search(indexed, data.queries, K, data.corpus).to_dict() == first.to_dict()
        fresh = build(expect.spec)
        fresh.index(data.corpus)
        assert self.search(fresh, data.queries, K, data.corpus).to_dict() == first.to_dict()

    def test_fingerprint(self, expect, indexed, build, data, fresh_fingerprints):
        before = fingerprint_of(indexed)
        self.search(indexed, data.queries, K, data.corpus)
        assert fingerprint_of(indexed) == before, "searching changed the fingerprint"
        self.check_fingerprint(expect, indexed, build, fresh_fingerprints)

    def test_inputs_are_not_mutated(self, indexed, data):
        corpus, queries = _snapshot(data.corpus), _snapshot(data.queries)
        fps = (data.corpus.fingerprint, data.queries.fingerprint)
        exclude = {q: frozenset({"tie-a", "no-such-doc"}) for q in data.queries}
        before = {q: set(v) for q, v in exclude.items()}
        self.search(indexed, data.queries, K, data.corpus, exclude)
        assert _snapshot(data.corpus) == corpus and _snapshot(data.queries) == queries
        # fresh objects: a cached fingerprint would hide a change
        assert (Corpus(data.corpus.values()).fingerprint, Queries(data.queries.values()).fingerprint) == fps
        assert {q: set(v) for q, v in exclude.items()} == before


class RerankerContract(_ComponentContract):
    """Subclass as ``TestX(RerankerContract)``, set ``reranker`` (and ``changed``, and ``depth`` if it reranks only a
    prefix of each ranking). The run it reranks comes from ``first_stage_retriever``."""

    kind = "reranker"
    reranker: Any = None
    first_stage_retriever = "bm25"

    @pytest.fixture(scope="class")
    @classmethod
    def expect(cls) -> Expect:
        return _expect_from(cls, "reranker")

    @pytest.fixture(scope="class")
    @classmethod
    def reranker_under_test(cls, expect, build):
        return build(expect.spec)

    @pytest.fixture(scope="class")
    @classmethod
    def first_stage(cls, data):
        """(queries, run, exclusions): the first stage's top 10, each query's top 2 excluded, and an empty query
        given the tie query's documents."""
        r = get_retriever(cls.first_stage_retriever)
        r.index(data.corpus)
        plain = _as_run(r.search(data.queries, 10), "first stage")
        exclude = {q: frozenset(d for d, _ in plain[q][:2]) for q in data.queries}
        run = _as_run(r.search(data.queries, 10, exclude=exclude), "first stage")
        queries = Queries(list(data.queries.values()) + [EMPTY])
        return queries, Run({**dict(run.items()), "empty": run["tie"]}, run.name, _sorted=True), exclude

    def rerank(self, rr, queries, run, corpus) -> Run:
        out = rr.rerank(queries, run, corpus)
        assert isinstance(out, Run), f"rerank returned {type(out).__name__}; expected a Run"
        return out

    def test_declares_the_protocol(self, reranker_under_test):
        assert isinstance(reranker_under_test, Reranker)

    def test_the_runs_documents_exactly(self, expect, reranker_under_test, first_stage, data):
        queries, run, exclude = first_stage
        out = self.rerank(reranker_under_test, queries, run, data.corpus)
        assert set(out) == set(run)
        for q, ranking in run.items():
            assert_ranked(out[q], f"{out.name} query {q}", data.corpus)
            ids = [d for d, _ in out[q]]
            assert sorted(ids) == sorted(d for d, _ in ranking), q  # none lost, none added (excluded stay out)
            assert not set(ids) & exclude.get(q, frozenset())
            if expect.depth is not None:  # below the depth the first stage's order is kept
                assert ids[expect.depth:] == [d for d, _ in ranking[expect.depth:]], q

    def test_an_unknown_doc_id_in_the_run_is_reported(self, reranker_under_test, first_stage, data):
        queries, run, _ = first_stage
        q = next(iter(data.queries))
        bad = Run({q: [("ghost-doc", 99.0)] + list(run[q])}, "bad")
        with pytest.raises(GapbenchError, match="ghost-doc"):
            reranker_under_test.rerank(queries, bad, data.corpus)

    def test_deterministic(self, expect, reranker_under_test, build, first_stage, data):
        queries, run, _ = first_stage
        first = self.rerank(reranker_under_test, queries, run, data.corpus)
        assert self.rerank(reranker_under_test, queries, run, data.corpus).to_dict() == first.to_dict()
        assert self.rerank(build(expect.spec), queries, run, data.corpus).to_dict() == first.to_dict()

    def test_fingerprint(self, expect, reranker_under_test, build, first_stage, data, fresh_fingerprints):
        self.rerank(reranker_under_test, first_stage[0], first_stage[1], data.corpus)  # used here, not elsewhere
        self.check_fingerprint(expect, reranker_under_test, build, fresh_fingerprints)

    def test_inputs_are_not_mutated(self, reranker_under_test, first_stage, data):
        queries, run, _ = first_stage
        before = (_snapshot(data.corpus), _snapshot(queries), run.to_dict(), run.name)
        self.rerank(reranker_under_test, queries, run, data.corpus)
        assert (_snapshot(data.corpus), _snapshot(queries), run.to_dict(), run.name) == before
        assert Queries(queries.values()).fingerprint == queries.fingerprint


class TaskContract:
    """Subclass as ``TestX(TaskContract)`` and set ``task`` to a registered task name (with options if it needs
    them). ``sample`` bounds how many queries' exclusions are checked (multiple-choice tasks compute them on access)."""

    task: Any = None
    sample = 50

    @pytest.fixture(scope="class")
    @classmethod
    def task_under_test(cls) -> Task:
        if cls.task is None:
            raise GapbenchError(f"{cls.__name__}: set the class attribute 'task' to a registered task name.")
        return cls.task if isinstance(cls.task, Task) else get_task(cls.task)

    @pytest.fixture(scope="class")
    @classmethod
    def loaded(cls, task_under_test):
        return task_under_test.load()

    def test_metadata(self, task_under_test):
        task = task_under_test
        assert isinstance(task, Task) and task.name and task.main_measure in task.measures
        assert task.license and task.citation or task.name.startswith("local/"), task.name

    def test_loaded_data(self, loaded, task_under_test):
        self.check_data(task_under_test.name, loaded)

    def check_data(self, name: str, data) -> None:
        for doc_id, doc in data.corpus.items():
            assert isinstance(doc_id, str) and doc.doc_id == doc_id and isinstance(doc.text, str)
        for qid, q in data.queries.items():
            assert isinstance(qid, str) and q.text.strip()
        assert data.qrels.positive_queries(), name
        for qid, judged in data.qrels.items():
            assert qid in data.queries, (name, qid)
            for doc_id, grade in judged.items():
                assert doc_id in data.corpus and isinstance(grade, int), (name, qid, doc_id)
        for qid in list(data.excluded)[:self.sample]:
            excluded = data.excluded[qid]
            assert qid in data.queries and isinstance(excluded, frozenset)
            assert all(isinstance(d, str) for d in excluded)
            # an excluded document is never a positive judgement of that query
            assert not {d for d, g in data.qrels.get(qid, {}).items() if g > 0} & excluded, (name, qid)


# ------------------------------------------------------------------------------------------------------- analyses

def tiny_task(folder: Any) -> str:
    """:func:`contract_data`'s corpus, queries and judgements written as a BEIR folder (``corpus.jsonl``,
    ``queries.jsonl``, ``qrels/test.tsv``) under ``folder``; returns its path, a task every verb takes by name.

    >>> report = gapbench.coverage(tiny_task(tmp_path / "task"), "bm25")  # doctest: +SKIP
    """
    from pathlib import Path

    data, root = contract_data(), Path(folder)
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as f:
        for d in data.corpus.values():
            f.write(json.dumps({"_id": d.doc_id, "title": d.title or "", "text": d.text}) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as f:
        for q in data.queries.values():
            if q.query_id in data.qrels:  # the tie queries are judged by no one
                f.write(json.dumps({"_id": q.query_id, "text": q.text}) + "\n")
    rows = [f"{q}\t{d}\t{g}" for q, judged in data.qrels.items() for d, g in judged.items()]
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return str(root)


def check_analysis(name: str) -> Any:
    """The :class:`gapbench.plugins.Analysis` registered as ``name`` in the entry-point group ``gapbench.analyses``,
    checked as gapbench checks its own: every verb's function, options model and report model import; the options
    are a :class:`gapbench.contract.Options` built from their defaults where all have one, refusing an unknown
    setting (and ``seed=-1`` where there is a seed) with :class:`~gapbench.errors.OptionsError`; the report model has
    a JSON Schema; and the command-line registrations add commands to a typer app whose ``--help`` works."""
    from importlib.metadata import entry_points

    import typer
    from pydantic import BaseModel
    from typer.testing import CliRunner

    from .contract import Options
    from .errors import OptionsError
    from .plugins import GROUP, get_analysis

    assert name in {ep.name for ep in entry_points(group=GROUP)}, f"no entry point {name!r} in group {GROUP!r}"
    analysis = get_analysis(name)
    assert analysis.name == name and analysis.summary and analysis.verbs
    for verb in analysis.verbs:
        function, options, report = verb.load()
        assert issubclass(options, Options), f"{verb.name}: {options.__name__} is not a gapbench.contract.Options"
        if not any(f.is_required() for f in options.model_fields.values()):
            options()  # built from its defaults (a verb's own inputs, such as OBLIQ's lens, may be required fields)
        with pytest.raises(OptionsError, match="no_such_setting"):
            options(no_such_setting=1)
        if "seed" in options.model_fields:
            with pytest.raises(OptionsError, match="seed"):
                options(seed=-1)
        assert issubclass(report, BaseModel), f"{verb.name}: {report.__name__} is not a pydantic model"
        assert report.model_json_schema()["properties"], f"{verb.name}: {report.__name__} has no fields"
    app = typer.Typer()
    analysis.add_commands(app)
    added = [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]
    assert added, f"analysis {name!r} added no command"
    for command in added:
        assert command, f"analysis {name!r} added a command without a name; name it: app.command(\"NAME\")"
        done = CliRunner().invoke(app, [command, "--help"])
        assert done.exit_code == 0, (command, done.output)
    return analysis


def check_report(analysis: Any, verb: str, result: Any) -> None:
    """``result``, what ``verb`` of ``analysis`` returned, is its report model, and reads back equal from its JSON
    (the file on disk is the result in memory)."""
    report = analysis.verb(verb).load()[2]
    assert isinstance(result, report), f"{verb} returned {type(result).__name__}, not its report {report.__name__}"
    dumped = result.model_dump(mode="json")
    assert report.model_validate(json.loads(result.model_dump_json())).model_dump(mode="json") == dumped


class AnalysisContract:
    """Subclass, name the analysis and say how to call its verbs on a small task; pytest checks that it registers as
    a plugin (:func:`check_analysis`) and that each verb returns its report model (:func:`check_report`).

    >>> class TestNovelty(AnalysisContract):  # doctest: +SKIP
    ...     analysis = "novelty"
    ...     def call(self, verb, function, options, task):
    ...         return function(task, "bm25", options(depth=5))
    """

    analysis: str = ""
    verbs: tuple[str, ...] | None = None  # the verbs :meth:`call` runs; None: every verb of the analysis

    def call(self, verb: str, function: Callable[..., Any], options: type, task: str) -> Any:
        """Run ``function`` (the verb, with its options model) on ``task`` (a :func:`tiny_task` folder)."""
        raise NotImplementedError(f"{type(self).__name__}.call: say how to run {verb!r} on a small task")

    @pytest.fixture(scope="class")
    @classmethod
    def registered(cls):
        return check_analysis(cls.analysis)

    def test_registers_as_a_plugin(self, registered):
        assert registered.name == self.analysis

    def test_each_verb_returns_its_report_model(self, registered, tmp_path):
        names = self.verbs if self.verbs is not None else tuple(v.name for v in registered.verbs)
        assert names, "no verb to run"
        task = tiny_task(tmp_path / "task")
        for name in names:
            function, options, _ = registered.verb(name).load()
            check_report(registered, name, self.call(name, function, options, task))
