"""One contract over every registered retriever and reranker (PyTerrier style), beside tests/test_contract.py's over
every task. The contract itself is gapbench.testing's, the one plugin authors subclass: here it is parametrized over
every registered adapter.

The data is real: the first documents and queries of ImpliRet multispeaker/wknow, plus three documents with one text
(corpus order tie-b, tie-c, tie-a) whose scores must tie. LLM adapters talk to the real local server in
tests/llm_server.py (its qrels judge ranks and selects, its hashed bag of words embeds); dense and colbert use the
offline MiniLM. Each adapter is built from the registry with its lightest settings (``RETRIEVER_CASES``,
``RERANKER_CASES``) and indexed once.

What every retriever and reranker promises is written in gapbench.testing's docstring.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from gapbench.retrieval import RERANKERS, RETRIEVERS, payload_fingerprint
from gapbench.testing import (Expect, RerankerContract, RetrieverContract, contract_data,
                              fingerprints_in_fresh_process)

from llm_server import LLMServer

LLM_MODEL = "judge"
DEPTH = 8
BM25_FAMILY = {"empty_query": "nothing", "stopword_query": "nothing"}
# How to build each registered adapter (``{url}`` is the test server's API root) and, where the general rule has
# exceptions, what its documentation says it does.
RETRIEVER_CASES = {
    "bm25": Expect("bm25", "bm25:k1=1.2", **BM25_FAMILY),
    "bm25-lucene": Expect("bm25-lucene", "bm25-lucene:b=0.5", **BM25_FAMILY, positive_only=True),
    "bm25-qs": Expect("bm25-qs", "bm25-qs:variant=anserini", **BM25_FAMILY),
    # rank-bm25 has no stopword list: "the and of" are terms like any other
    "bm25-okapi": Expect("bm25-okapi", "bm25-okapi:epsilon=0.5", empty_query="nothing"),
    "dense": Expect("dense", "dense:normalize=false"),
    "colbert": Expect("colbert", "colbert:seed=1"),
    # an empty text gets a zero vector: every document scores 0 and the tie rule orders them
    "openai-embed": Expect("openai-embed:model=embedder,base_url={url}",
                           "openai-embed:model=embedder,base_url={url},dimensions=32"),
    "rrf": Expect("rrf:bm25+bm25-okapi", "rrf:[k=20]bm25+bm25-okapi", empty_query="nothing",
                  post_filter_equal=False, equal_ties=False),
    "fuse-minmax": Expect("fuse-minmax:bm25+bm25-qs", "fuse-minmax:[weights=1;2]bm25+bm25-qs", **BM25_FAMILY,
                          post_filter_equal=False),
    "fuse-dbsf": Expect("fuse-dbsf:bm25-okapi+bm25-qs", "fuse-dbsf:[depth=50]bm25-okapi+bm25-qs",
                        empty_query="nothing", post_filter_equal=False),
    # The LLM's words are searched. The server rewrites a query to itself, so rewrite:bm25 ranks as bm25 does and a
    # query of stop words finds nothing; it answers an empty query's prompt with an "echo <digest>" line, whose words
    # no document has: bm25 (keep_zero) ranks every document at 0, so the empty query gets k.
    "rewrite": Expect("rewrite:bm25", "rewrite:[llm_model=other]bm25", stopword_query="nothing"),
    "agent": Expect("agent:[hops=2,per_hop=8]bm25", "agent:[hops=3,per_hop=8]bm25", stopword_query="nothing", cap=8,
                    post_filter_equal=False, equal_ties=False),
}
RERANKER_CASES = {
    "tournament": Expect(f"tournament:batch_size=4,promote=2,max_final=4,depth={DEPTH}",
                         f"tournament:batch_size=5,promote=2,max_final=4,depth={DEPTH}", depth=DEPTH),
    "sliding-window": Expect(f"sliding-window:window=4,stride=2,depth={DEPTH}",
                             f"sliding-window:window=5,stride=2,depth={DEPTH}", depth=DEPTH),
}


def _names(registry) -> list[str]:
    import gapbench.adapters  # noqa: F401  registers the built-in adapters (lazily)

    return registry.names()


def test_every_registered_adapter_has_a_case():
    for registry, cases in ((RETRIEVERS, RETRIEVER_CASES), (RERANKERS, RERANKER_CASES)):
        missing = sorted(set(_names(registry)) - set(cases))
        assert not missing, f"registered {registry.kind}s without a contract case: {missing}; add an Expect for each"


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
    data = contract_data()
    corpus = {d: data.corpus[d].full_text for d in data.corpus}
    queries = {q: data.queries[q].text for q in data.queries}
    with LLMServer(data.qrels, queries=queries, corpus=corpus) as srv:
        yield srv


def _with_url(case: Expect, url: str) -> Expect:
    return Expect(**{**vars(case), "spec": case.spec.format(url=url), "changed": case.changed.format(url=url)})


@pytest.fixture(scope="module")
def every_fingerprint(server):
    """(kind, spec) -> fingerprint of every case, computed in one fresh interpreter (each start costs seconds)."""
    specs = [(kind, spec) for kind, cases in (("retriever", RETRIEVER_CASES), ("reranker", RERANKER_CASES))
             for c in cases.values() for spec in (_with_url(c, server.base_url).spec,
                                                  _with_url(c, server.base_url).changed)]
    return fingerprints_in_fresh_process(specs, llm_base_url=server.base_url, llm_model=LLM_MODEL)


class _OnTheTestServer:
    """Every registered adapter in turn, LLM adapters talking to the local test server."""

    @pytest.fixture(scope="class")
    @classmethod
    def llm(cls, server):
        return {"llm_base_url": server.base_url, "llm_model": LLM_MODEL}

    @pytest.fixture(scope="class")
    @classmethod
    def fresh_fingerprints(cls, every_fingerprint):
        return every_fingerprint


class TestRetrievers(_OnTheTestServer, RetrieverContract):
    @pytest.fixture(scope="class", params=[pytest.param(n, id=n) for n in _names(RETRIEVERS)])
    @classmethod
    def expect(cls, request, server):
        return _with_url(RETRIEVER_CASES[request.param], server.base_url)


class TestRerankers(_OnTheTestServer, RerankerContract):
    first_stage_retriever = "bm25-okapi"

    @pytest.fixture(scope="class", params=[pytest.param(n, id=n) for n in _names(RERANKERS)])
    @classmethod
    def expect(cls, request, server):
        return _with_url(RERANKER_CASES[request.param], server.base_url)

    def test_the_judged_document_comes_first(self, reranker_under_test, first_stage, data):
        """The server's judge ranks by ImpliRet's qrels: its one relevant document, where the run has it within the
        depth, must reach the top (the reranker does rerank)."""
        queries, run, _ = first_stage
        out = self.rerank(reranker_under_test, queries, run, data.corpus)
        checked = 0
        for q, judged in data.qrels.items():
            (gold,) = [d for d, g in judged.items() if g > 0]
            if gold in [d for d, _ in run[q][:DEPTH]]:
                assert out[q][0][0] == gold, (q, out[q])
                checked += 1
        assert checked >= 3, "too few queries with their relevant document within the depth"
