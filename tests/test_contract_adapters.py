"""One contract over every registered retriever and reranker (PyTerrier style), beside tests/test_contract.py's over
every task.

The data is real: the first documents and queries of ImpliRet multispeaker/wknow, plus three documents with one text
(corpus order tie-b, tie-c, tie-a) whose scores must tie. LLM adapters talk to the real local server in
tests/llm_server.py (its qrels judge ranks and selects, its hashed bag of words embeds); dense and colbert use the
offline MiniLM. Each adapter is built from the registry with its lightest settings (``RETRIEVER_CASES``,
``RERANKER_CASES``) and indexed once.

What every retriever promises:

- k respected: exactly min(k, documents allowed) results per query, fewer only where the retriever documents that it
  ranks nothing more: bm25's family gives a query without terms (empty, or stop words only where its analysis drops
  them) an empty ranking and lists it in ``empty_queries``; ``keep_zero=false`` (bm25-lucene's default) ranks only
  positive scores; the agent ranks only the ``per_hop`` documents its searches found.
- ties broken by doc_id descending, scores never rising down a ranking, each document once, every id in the corpus;
- exclusions masked before the cut (a query still gets k results), also in the "only these candidates" form that
  multiple-choice tasks use; unknown doc ids and query ids in exclusions ignored;
- determinism (two searches, and a fresh instance, give the same run); a fingerprint equal in another process, equal
  before and after use, and different when one config option changes; no mutation of the corpus, the queries or the
  exclusion mapping.

Rerankers promise the same of ``rerank(queries, run, corpus)``: the run's documents exactly (none added, so excluded
ones stay out; those below ``depth`` keep their order underneath), ranked with the tie rule, an empty query handled,
an unknown doc id in the run reported as a GapbenchError naming it, determinism, fingerprints, no mutation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import astuple, dataclass
from pathlib import PurePosixPath

import pytest

import gapbench
from gapbench.errors import GapbenchError
from gapbench.retrieval import RERANKERS, RETRIEVERS, fingerprint_of, get_reranker, get_retriever, payload_fingerprint
from gapbench.tasks.rarb import OtherRowsExcluded
from gapbench.types import Corpus, Document, Queries, Query, Run

from llm_server import LLMServer

LLM_MODEL = "judge"
TIE_TEXT = "The lighthouse keeper repaired the brass lantern on the cliff before the autumn storm reached the harbour."
TIE_IDS = ("tie-c", "tie-b", "tie-a")  # the order every retriever must rank them in


def _impliret(n_docs: int = 30, n_queries: int = 10):
    data = gapbench.get_task("impliret/multispeaker/wknow").load()
    docs = [data.corpus[d] for d in list(data.corpus)[:n_docs]]
    kept = {d.doc_id for d in docs}
    qids = [q for q in data.queries if set(data.qrels.get(q, {})) <= kept][:n_queries]
    qrels = {q: dict(data.qrels[q]) for q in qids}
    return docs, [data.queries[q] for q in qids], qrels


_DOCS, _QUERIES, QRELS = _impliret()
CORPUS = Corpus(_DOCS + [Document("tie-b", TIE_TEXT), Document("tie-c", TIE_TEXT), Document("tie-a", TIE_TEXT)])
QUERIES = Queries(_QUERIES + [Query("tie", "lighthouse keeper brass lantern storm")])
TIE_QUERIES = Queries([QUERIES["tie"], Query("tie-2", "who repaired the lantern"),
                       Query("tie-3", "the lighthouse keeper and the autumn storm"), Query("tie-4", TIE_TEXT)])
N = len(CORPUS)
K = 5
EMPTY = Query("empty", "")
STOPWORDS = Query("stop", "the and of to")


@dataclass(frozen=True)
class Case:
    """How to build one registered adapter, and what its documentation says it does where the rule has exceptions.

    ``spec`` and ``changed`` are formatted with ``url`` (the test server's API root); ``changed`` differs in one config
    option, so its fingerprint must differ.
    """

    spec: str
    changed: str
    empty: str = "k"  # an empty query: "k" (ranked like any query) or "nothing" (an empty ranking)
    stopwords: str = "k"  # a query of English stop words only, the same choice
    positive_only: bool = False  # keep_zero=false: only positive scores are ranked
    cap: int | None = None  # the most documents one query can get (the agent's per_hop)
    post_filter_equal: bool = True  # masked top-k == the deeper ranking without the excluded (exact scoring)
    equal_ties: bool = True  # identical documents score the same (rank-based scores do not, but keep the order)


BM25_FAMILY = {"empty": "nothing", "stopwords": "nothing"}
RETRIEVER_CASES = {
    "bm25": Case("bm25", "bm25:k1=1.2", **BM25_FAMILY),
    "bm25-lucene": Case("bm25-lucene", "bm25-lucene:b=0.5", **BM25_FAMILY, positive_only=True),
    "bm25-qs": Case("bm25-qs", "bm25-qs:variant=anserini", **BM25_FAMILY),
    # rank-bm25 has no stopword list: "the and of" are terms like any other
    "bm25-okapi": Case("bm25-okapi", "bm25-okapi:epsilon=0.5", empty="nothing"),
    "dense": Case("dense", "dense:normalize=false"),
    "colbert": Case("colbert", "colbert:seed=1"),
    # an empty text gets a zero vector: every document scores 0 and the tie rule orders them
    "openai-embed": Case("openai-embed:model=embedder,base_url={url}",
                         "openai-embed:model=embedder,base_url={url},dimensions=32"),
    "rrf": Case("rrf:bm25+bm25-okapi", "rrf:[k=20]bm25+bm25-okapi", empty="nothing", post_filter_equal=False,
                equal_ties=False),
    "fuse-minmax": Case("fuse-minmax:bm25+bm25-qs", "fuse-minmax:[weights=1;2]bm25+bm25-qs", **BM25_FAMILY,
                        post_filter_equal=False),
    "fuse-dbsf": Case("fuse-dbsf:bm25-okapi+bm25-qs", "fuse-dbsf:[depth=50]bm25-okapi+bm25-qs", empty="nothing",
                      post_filter_equal=False),
    # The LLM's words are searched. The server rewrites a query to itself, so rewrite:bm25 ranks as bm25 does and a
    # query of stop words finds nothing; it answers an empty query's prompt with an "echo <digest>" line, whose words
    # no document has: bm25 (keep_zero) ranks every document at 0, so the empty query gets k.
    "rewrite": Case("rewrite:bm25", "rewrite:[llm_model=other]bm25", stopwords="nothing"),
    "agent": Case("agent:[hops=2,per_hop=8]bm25", "agent:[hops=3,per_hop=8]bm25", stopwords="nothing", cap=8,
                  post_filter_equal=False, equal_ties=False),
}
DEPTH = 8
RERANKER_CASES = {
    "tournament": Case(f"tournament:batch_size=4,promote=2,max_final=4,depth={DEPTH}",
                       f"tournament:batch_size=5,promote=2,max_final=4,depth={DEPTH}"),
    "sliding-window": Case(f"sliding-window:window=4,stride=2,depth={DEPTH}",
                           f"sliding-window:window=5,stride=2,depth={DEPTH}"),
}


def _names(registry) -> list[str]:
    import gapbench.adapters  # noqa: F401  registers the built-in adapters (lazily)

    return registry.names()


def _params(registry) -> list:
    return [pytest.param(n, id=n) for n in _names(registry)]


def test_every_registered_adapter_has_a_case():
    for registry, cases in ((RETRIEVERS, RETRIEVER_CASES), (RERANKERS, RERANKER_CASES)):
        missing = sorted(set(_names(registry)) - set(cases))
        assert not missing, f"registered {registry.kind}s without a contract case: {missing}; add a Case for each"


def test_fingerprint_bytes_are_pinned():
    """Caches and committed results are keyed by payload_fingerprint's bytes: sha256 of the payload's JSON with sorted
    keys (``hashlib.sha256(b'{"adapter": "bm25s", "k1": 1.5}').hexdigest()``), a non-JSON value as its str."""
    import hashlib

    import bm25s

    from gapbench.adapters.bm25 import BM25

    assert payload_fingerprint({"k1": 1.5, "adapter": "bm25s"}) == (
        "3ae672658d905ed444cf3d8b3f58fbbad124e0327d0b95be19d3e5543465d523"
    )
    assert payload_fingerprint({"p": PurePosixPath("/tmp")}) == (
        "6bd08cae7c43ad77bec5508f3590d86f86b18ed9587ccf2533d68befb2bb0cb3"
    )
    text = ('{"adapter": "bm25s", "b": 0.75, "k1": 1.5, "keep_zero": true, "method": "lucene", "stemmer": null, '
            f'"stopwords": "en", "use_title": true, "version": "{bm25s.__version__}"}}')
    assert BM25().fingerprint == hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def server():
    corpus = {d: CORPUS[d].full_text for d in CORPUS}
    queries = {q: QUERIES[q].text for q in QUERIES}
    with LLMServer(QRELS, queries=queries, corpus=corpus) as srv:
        yield srv


def _build(kind: str, spec: str, url: str):
    make = get_retriever if kind == "retriever" else get_reranker
    return make(spec.format(url=url), llm_base_url=url, llm_model=LLM_MODEL)


_FINGERPRINTS = """
import json, sys
from gapbench.retrieval import fingerprint_of, get_reranker, get_retriever
url, specs = sys.argv[1], json.loads(sys.argv[2])
make = {"retriever": get_retriever, "reranker": get_reranker}
print(json.dumps([fingerprint_of(make[kind](spec.format(url=url), llm_base_url=url, llm_model=%r))
                  for kind, spec in specs]))
""" % LLM_MODEL


@pytest.fixture(scope="module")
def other_process(server):
    """(kind, spec) -> fingerprint, computed in a fresh interpreter (one for all adapters: each start costs seconds)."""
    specs = [(kind, spec) for kind, cases in (("retriever", RETRIEVER_CASES), ("reranker", RERANKER_CASES))
             for c in cases.values() for spec in (c.spec, c.changed)]
    out = subprocess.run([sys.executable, "-c", _FINGERPRINTS, server.base_url, json.dumps(specs)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return dict(zip(specs, json.loads(out.stdout.strip().splitlines()[-1])))


# Contract breaks in modules this test may not change yet, (test, adapter) -> why. Strict: the test must fail, so a fix
# turns it red until its entry is removed.
KNOWN_BREAKS: dict = {}  # (test, adapter) -> why it cannot hold yet; none today


def known_break(request) -> None:
    name = request.node.callspec.params.get("retr") or request.node.callspec.params.get("rerank")
    reason = KNOWN_BREAKS.get((request.node.originalname, name))
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def _snapshot(records) -> list[tuple]:
    return [(rid, astuple(rec)) for rid, rec in records.items()]


def assert_ranked(ranking, where: str) -> None:
    """Scores finite and never rising, equal scores by doc_id descending, each document once and in the corpus."""
    ids = [d for d, _ in ranking]
    assert len(set(ids)) == len(ids), f"{where}: a document ranked twice: {ids}"
    assert all(d in CORPUS for d in ids), f"{where}: ids outside the corpus: {[d for d in ids if d not in CORPUS]}"
    for (d1, s1), (d2, s2) in zip(ranking, ranking[1:]):
        assert isinstance(s1, float) and s1 >= s2, f"{where}: score rises from {d1} ({s1}) to {d2} ({s2})"
        assert s1 > s2 or d1 > d2, f"{where}: tie at {s1} not broken by doc_id descending: {d1} before {d2}"


def search(r, queries: Queries, k: int, exclude=None) -> Run:
    """``r.search`` called directly (no harness post-filter or cut), its run checked against the shared rules."""
    run = r.search(queries, k, exclude=exclude)
    assert isinstance(run, Run), type(run)
    assert set(run) <= set(queries), f"results for queries not asked: {set(run) - set(queries)}"
    for q, ranking in run.items():
        assert_ranked(ranking, f"{run.name} query {q}")
        banned = exclude.get(q, frozenset()) if exclude is not None else frozenset()
        assert not {d for d, _ in ranking} & banned, f"{run.name} query {q} ranks excluded documents"
    return run


# -------------------------------------------------------------------------------------------------- retrievers

@pytest.fixture(scope="module", params=_params(RETRIEVERS))
def retr(request, server):
    """(case, retriever indexed on CORPUS, the test server's URL)."""
    case = RETRIEVER_CASES[request.param]
    r = _build("retriever", case.spec, server.base_url)
    r.index(CORPUS)
    return case, r, server.base_url


class TestRetrieverContract:
    def expected(self, case: Case, k: int, allowed: int) -> int:
        return min(k, allowed, case.cap or allowed)

    def check_count(self, case, r, queries, k, exclude, run, allowed: int) -> None:
        """Exactly min(k, allowed) per query; with positive_only fewer where a deeper search finds nothing more."""
        for q in queries:
            got = run.get(q, ())
            if case.positive_only:
                deep = search(r, Queries([queries[q]]), N, exclude)[q]
                assert all(s > 0 for _, s in deep), f"query {q}: keep_zero=false ranked a zero score"
                assert list(got) == list(deep[:k]), f"query {q}: the top {k} is not the head of the full ranking"
                assert len(got) == min(k, allowed, len(deep))
            else:
                assert len(got) == self.expected(case, k, allowed), (q, k, len(got))

    @pytest.mark.parametrize("k", [1, K, N + 5])
    def test_k_is_respected(self, retr, k):
        case, r, _ = retr
        self.check_count(case, r, QUERIES, k, None, search(r, QUERIES, k), N)

    def test_ties_are_broken_by_doc_id_descending(self, retr):
        case, r, _ = retr
        run = search(r, TIE_QUERIES, len(TIE_IDS))
        for q in TIE_QUERIES:
            assert tuple(d for d, _ in run[q]) == TIE_IDS, (q, run[q])
            if case.equal_ties:
                assert len({s for _, s in run[q]}) == 1, f"identical documents scored differently: {run[q]}"

    def test_exclusions_are_masked_before_the_cut(self, retr):
        case, r, _ = retr
        base = search(r, QUERIES, K)
        # each query loses its own top 3, plus a document id the corpus does not have
        exclude = {q: frozenset([d for d, _ in base[q][:3]] + ["no-such-doc"]) for q in QUERIES}
        masked = search(r, QUERIES, K, exclude)
        self.check_count(case, r, QUERIES, K, exclude, masked, N - 3)
        if case.post_filter_equal:
            deep = search(r, QUERIES, K + 3)
            for q in QUERIES:
                assert masked[q] == tuple(p for p in deep[q] if p[0] not in exclude[q])[:K], q

    @pytest.mark.parametrize("k", [2, K + 1])
    def test_only_allowed_candidates_are_ranked(self, retr, k):
        """Multiple-choice tasks exclude through ``allowed(query_id)``: every other document is masked."""
        case, r, _ = retr
        ids = list(CORPUS)
        own = {q: tuple(ids[i::7]) + ("no-such-doc",) for i, q in enumerate(QUERIES)}  # 4 or 5 real documents each
        exclude = OtherRowsExcluded(own, frozenset(ids))
        run = search(r, QUERIES, k, exclude)
        for q in QUERIES:
            assert {d for d, _ in run.get(q, ())} <= set(own[q]), q
        for q in QUERIES:
            one = Queries([QUERIES[q]])
            self.check_count(case, r, one, k, exclude, Run({q: run.get(q, ())}, _sorted=True), len(own[q]) - 1)

    def test_empty_and_stopword_queries(self, retr):
        case, r, _ = retr
        queries = Queries([EMPTY, STOPWORDS, QUERIES[next(iter(QUERIES))]])
        run = search(r, queries, K)
        for query, documented in ((EMPTY, case.empty), (STOPWORDS, case.stopwords)):
            got = run.get(query.query_id, ())
            want = 0 if documented == "nothing" else self.expected(case, K, N)
            assert len(got) == want, (query, documented, got)
        if hasattr(r, "empty_queries"):  # bm25's family says which queries had no term to match
            nothing = {q.query_id for q, d in ((EMPTY, case.empty), (STOPWORDS, case.stopwords)) if d == "nothing"}
            assert set(r.empty_queries) == nothing, r.empty_queries

    def test_unknown_ids_in_exclusions_are_ignored(self, retr):
        _, r, _ = retr
        exclude = {q: frozenset({"no-such-doc"}) for q in QUERIES} | {"no-such-query": frozenset({"tie-a"})}
        assert search(r, QUERIES, K, exclude).to_dict() == search(r, QUERIES, K).to_dict()

    def test_deterministic(self, retr):
        case, r, url = retr
        first = search(r, QUERIES, K)
        assert search(r, QUERIES, K).to_dict() == first.to_dict()
        fresh = _build("retriever", case.spec, url)
        fresh.index(CORPUS)
        assert search(fresh, QUERIES, K).to_dict() == first.to_dict()

    def test_fingerprint(self, retr, other_process):
        case, r, url = retr
        fp = fingerprint_of(r)
        search(r, QUERIES, K)
        assert fingerprint_of(r) == fp, "searching changed the fingerprint"
        assert fp == fingerprint_of(_build("retriever", case.spec, url)) == other_process["retriever", case.spec]
        changed = fingerprint_of(_build("retriever", case.changed, url))
        assert changed != fp and changed == other_process["retriever", case.changed]

    def test_inputs_are_not_mutated(self, retr):
        _, r, _ = retr
        corpus, queries = _snapshot(CORPUS), _snapshot(QUERIES)
        fps = (CORPUS.fingerprint, QUERIES.fingerprint)
        exclude = {q: frozenset({"tie-a", "no-such-doc"}) for q in QUERIES}
        before = {q: set(v) for q, v in exclude.items()}
        search(r, QUERIES, K, exclude)
        assert _snapshot(CORPUS) == corpus and _snapshot(QUERIES) == queries
        # fresh objects: a cached fingerprint would hide a change
        assert (Corpus(CORPUS.values()).fingerprint, Queries(QUERIES.values()).fingerprint) == fps
        assert {q: set(v) for q, v in exclude.items()} == before


# --------------------------------------------------------------------------------------------------- rerankers

@pytest.fixture(scope="module")
def first_stage():
    """The run rerankers get: bm25-okapi's top 10, each query's top 2 excluded, and an empty query given the
    tie query's documents."""
    r = get_retriever("bm25-okapi")
    r.index(CORPUS)
    plain = r.search(QUERIES, 10)
    exclude = {q: frozenset(d for d, _ in plain[q][:2]) for q in QUERIES}
    run = r.search(QUERIES, 10, exclude=exclude)
    queries = Queries(list(QUERIES.values()) + [EMPTY])
    return queries, Run({**dict(run.items()), "empty": run["tie"]}, run.name, _sorted=True), exclude


@pytest.fixture(scope="module", params=_params(RERANKERS))
def rerank(request, server):
    case = RERANKER_CASES[request.param]
    return case, _build("reranker", case.spec, server.base_url), server.base_url


class TestRerankerContract:
    def test_the_runs_documents_exactly(self, rerank, first_stage):
        _, rr, _ = rerank
        queries, run, exclude = first_stage
        out = rr.rerank(queries, run, CORPUS)
        assert set(out) == set(run)
        for q, ranking in run.items():
            assert_ranked(out[q], f"{out.name} query {q}")
            ids = [d for d, _ in out[q]]
            assert sorted(ids) == sorted(d for d, _ in ranking), q  # none lost, none added (excluded stay out)
            assert not set(ids) & exclude.get(q, frozenset())
            # below the depth the first stage's order is kept
            assert ids[DEPTH:] == [d for d, _ in ranking[DEPTH:]], q

    def test_the_judged_document_comes_first(self, rerank, first_stage):
        """The server's judge ranks by ImpliRet's qrels: its one relevant document, where the run has it within the
        depth, must reach the top (the reranker does rerank)."""
        _, rr, _ = rerank
        queries, run, _ = first_stage
        out = rr.rerank(queries, run, CORPUS)
        checked = 0
        for q, judged in QRELS.items():
            (gold,) = [d for d, g in judged.items() if g > 0]
            if gold in [d for d, _ in run[q][:DEPTH]]:
                assert out[q][0][0] == gold, (q, out[q])
                checked += 1
        assert checked >= 3, "too few queries with their relevant document within the depth"

    def test_an_unknown_doc_id_in_the_run_is_reported(self, rerank, first_stage):
        _, rr, _ = rerank
        queries, run, _ = first_stage
        q = next(iter(QUERIES))
        bad = Run({q: [("ghost-doc", 99.0)] + list(run[q])}, "bad")
        with pytest.raises(GapbenchError, match="ghost-doc"):
            rr.rerank(queries, bad, CORPUS)

    def test_deterministic(self, rerank, first_stage):
        case, rr, url = rerank
        queries, run, _ = first_stage
        first = rr.rerank(queries, run, CORPUS)
        assert rr.rerank(queries, run, CORPUS).to_dict() == first.to_dict()
        assert _build("reranker", case.spec, url).rerank(queries, run, CORPUS).to_dict() == first.to_dict()

    def test_fingerprint(self, rerank, first_stage, other_process, request):
        case, rr, url = rerank
        known_break(request)
        rr.rerank(first_stage[0], first_stage[1], CORPUS)  # this process has made LLM calls; the other has not
        fp = fingerprint_of(rr)
        assert fp == fingerprint_of(_build("reranker", case.spec, url)), "using the reranker changed its fingerprint"
        changed = fingerprint_of(_build("reranker", case.changed, url))
        assert changed != fp
        assert (fp, changed) == (other_process["reranker", case.spec], other_process["reranker", case.changed])

    def test_inputs_are_not_mutated(self, rerank, first_stage):
        _, rr, _ = rerank
        queries, run, _ = first_stage
        before = (_snapshot(CORPUS), _snapshot(queries), run.to_dict(), run.name)
        rr.rerank(queries, run, CORPUS)
        assert (_snapshot(CORPUS), _snapshot(queries), run.to_dict(), run.name) == before
        assert Queries(queries.values()).fingerprint == queries.fingerprint
