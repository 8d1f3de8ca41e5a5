"""Built-in retriever adapters, registered lazily so their backends import only when used."""

from gapbench.retrieval import RETRIEVERS

for _name, _target in {
    "bm25": "gapbench.adapters.bm25:BM25",
    "bm25-lucene": "gapbench.adapters.bm25:BM25Lucene",
    "dense": "gapbench.adapters.dense:Dense",
}.items():
    if _name not in RETRIEVERS._entries:
        RETRIEVERS.register(_name, _target)
