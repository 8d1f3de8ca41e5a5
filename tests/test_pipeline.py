"""Every analysis starts from gapbench.pipeline.prepare: the task's instruction reaches the retrievers of run, gap,
signals, coverage and ARGUS compare alike, and queries are sampled the same way everywhere.

The spy is registered through the public ``register_retriever``, ranks with BM25 and records every query it is asked.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import gapbench
import gapbench.tasks.bright as bright
from gapbench.adapters.bm25 import BM25
from gapbench.errors import ConfigError, GapbenchError
from gapbench.pipeline import prepare
from gapbench.retrieval import RETRIEVERS, register_retriever
from gapbench.types import Run

from llm_server import LLMServer

FIXTURE = Path(__file__).parent / "fixtures" / "bright"
INSTRUCTED = f"bright/biology:data_dir={FIXTURE},instructions=true"
PLAIN = f"bright/biology:data_dir={FIXTURE}"
INSTRUCTION = bright.QUERY_INSTRUCTIONS["biology"]
SEEN: list = []


class Spy(BM25):
    """BM25 that records the queries it is given."""

    name = "instruction-spy"

    def search(self, queries, k, exclude=None):
        SEEN.extend(queries.values())
        return super().search(queries, k, exclude=exclude)


@pytest.fixture
def spy():
    SEEN.clear()
    register_retriever("instruction-spy", Spy)
    yield SEEN
    RETRIEVERS.unregister("instruction-spy")


class Verifier:
    """A pool verifier that records its queries and keeps each pool in retrieval order."""

    name = "order-verifier"

    def __init__(self) -> None:
        self.seen: list = []

    def rerank(self, queries, run, corpus):
        return run

    def rerank_pools(self, queries, pools, corpus, seed=None):
        self.seen.extend(queries.values())
        return Run({q: {d: float(len(pool) - i) for i, d in enumerate(pool)} for q, pool in pools.items()})


class HashEmbedder:
    """Deterministic bag-of-words vectors (8 dimensions), so coverage clusters without a model."""

    def embed(self, texts):
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, hashlib.sha256(word.encode()).digest()[0] % 8] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


class EntityServer(LLMServer):
    """The real local test server, answering the entity prompt with the document's capitalised words, one JSON line
    each."""

    def answer(self, prompt: str) -> tuple[str, str]:
        if prompt.startswith("Extract the key entities"):
            doc = prompt.split("Document:\n", 1)[1]
            words = {w.strip(".,;:()\"'?!") for w in doc.split() if w[:1].isupper()}
            return "\n".join(json.dumps({"name": w, "type": "THING"}) for w in sorted(words) if len(w) > 3), "entities"
        return super().answer(prompt)


def _instructions(seen) -> set[str]:
    assert seen, "the spy was never asked"
    return {q.instruction for q in seen}


def test_prepare_applies_the_instruction_and_samples_with_a_seed():
    everything = prepare(INSTRUCTED)
    assert everything.query_ids == ["0", "1", "2"]
    assert {q.instruction for q in everything.queries.values()} == {INSTRUCTION}
    assert {q.instruction for q in everything.data.queries.values()} == {""}  # the loaded task is left as it was
    assert {q.instruction for q in prepare(PLAIN).queries.values()} == {""}
    picks = [prepare(INSTRUCTED, max_queries=2, seed=s).query_ids for s in range(6)]
    assert all(len(p) == 2 and p == sorted(p) for p in picks)  # two queries, in the task's order
    assert picks == [prepare(INSTRUCTED, max_queries=2, seed=s).query_ids for s in range(6)]
    assert len({tuple(p) for p in picks}) > 1  # the seed decides which
    with pytest.raises(ConfigError, match="max_queries must be at least 1, got 0"):
        prepare(INSTRUCTED, max_queries=0)
    with pytest.raises(GapbenchError, match="no query has a relevant document \\(grade >= 99\\)"):
        prepare(INSTRUCTED, judged=99)


def test_run_applies_the_instruction(spy):
    gapbench.run(INSTRUCTED, "instruction-spy", k=5)
    assert _instructions(spy) == {INSTRUCTION}
    spy.clear()
    gapbench.run(PLAIN, "instruction-spy", k=5)
    assert _instructions(spy) == {""}


def test_gap_applies_the_instruction_for_retrievers_and_verifier(spy):
    verifier = Verifier()
    report = gapbench.gap(INSTRUCTED, ["instruction-spy"], gapbench.GapOptions(verifier=verifier, depth=5,
                                                                                 measure="nDCG@10"))
    assert _instructions(spy) == {INSTRUCTION}
    assert _instructions(verifier.seen) == {INSTRUCTION}
    assert report.meta.retrievers[0].name == "instruction-spy"


def test_signals_applies_the_instruction(spy):
    from gapbench.analyses.signals.signals_options import SignalsOptions

    gapbench.signals(INSTRUCTED, ["instruction-spy", "bm25"], SignalsOptions(
        window=5, n_bootstrap=10, term_extractor=lambda texts: [t.lower().split() for t in texts]))
    assert _instructions(spy) == {INSTRUCTION}


def test_coverage_applies_the_instruction(spy):
    from gapbench.analyses.coverage.coverage_options import CoverageOptions
    from gapbench.analyses.coverage.coverage_run import coverage

    with EntityServer() as srv:
        coverage(INSTRUCTED, ["instruction-spy"], CoverageOptions(
            entities="llm", llm_base_url=srv.base_url, llm_model="capitalised-words", embedder=HashEmbedder(),
            clusters=2, n_resamples=10, min_queries=1))
        assert srv.counts["chat"] > 0
    assert _instructions(spy) == {INSTRUCTION}


def test_argus_compare_applies_the_instruction(spy, tmp_path):
    from gapbench.analyses.argus.remedy.remedy_compare import argus_compare

    kb = tmp_path / "kb.jsonl"
    kb.write_text(json.dumps({"id": "p1", "title": "Insects", "text": "Moths fly towards light at night."}) + "\n")
    result = argus_compare(INSTRUCTED, "instruction-spy", kb=str(kb), variants=["original", "expansion"], measures=["nDCG@10"],
                           k=5)
    assert _instructions(spy) == {INSTRUCTION}
    assert list(next(iter(result.tasks.values())).variants) == ["original", "expansion"]
