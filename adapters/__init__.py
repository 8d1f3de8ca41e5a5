"""Built-in retriever adapters, registered lazily so their backends import only when used."""

from gapbench.retrieval import RETRIEVERS

for _name, _target in {
    "bm25": "gapbench.adapters.bm25:BM25",
    "bm25-lucene": "gapbench.adapters.bm25:BM25Lucene",
    "dense": "gapbench.adapters.dense:Dense",
    "bm25-qs": "gapbench.adapters.bm25_qs:BM25QS",
    "bm25-okapi": "gapbench.adapters.bm25_okapi:BM25Okapi",
    "colbert": "gapbench.adapters.colbert:ColBERT",
    "openai-embed": "gapbench.adapters.openai_embed:OpenAIEmbed",
    "rrf": "gapbench.adapters.fusion:RRF",
    "fuse-minmax": "gapbench.adapters.fusion:MinMaxFusion",
    "fuse-dbsf": "gapbench.adapters.fusion:DBSFusion",
    "rewrite": "gapbench.adapters.llm_retrievers:QueryRewrite",
    "agent": "gapbench.adapters.llm_retrievers:MultiHopAgent",
}.items():
    if not RETRIEVERS.has(_name):
        RETRIEVERS.register(_name, _target)

from gapbench.retrieval import RERANKERS  # noqa: E402

for _name, _target in {
    "tournament": "gapbench.adapters.tournament:Tournament",
    "sliding-window": "gapbench.adapters.tournament:SlidingWindow",
}.items():
    if not RERANKERS.has(_name):
        RERANKERS.register(_name, _target)
