"""openai-embed against the local OpenAI-compatible server: exact vectors, caching, exclusions, no leaked key."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gapbench
from gapbench.adapters.openai_embed import OpenAIEmbed
from gapbench.types import Corpus, Document, Queries, Query

from llm_server import LLMServer

KEY = "sk-embed-test-0123456789"


@pytest.fixture()
def server(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    # fault_seed 1 makes one of the three embedding requests below meet a 500 (the draws are deterministic)
    with LLMServer(embed_dim=48, api_key=KEY, faults={"500": 0.5}, fault_seed=1) as srv:
        yield srv


CORPUS = Corpus([
    Document("a", "solar panels convert sunlight into electricity"),
    Document("b", "the cat sat on the mat"),
    Document("c", "wind turbines and solar farms produce electricity", "Energy"),
    Document("d", ""),
])


def test_vectors_ranking_cache_and_exclusions(server):
    r = OpenAIEmbed(model="embedder", base_url=server.base_url, batch_size=2)
    r.index(CORPUS)
    # the server's vectors are hashed bags of words; the adapter L2-normalises and keeps them exactly
    expected = np.asarray([LLMServer.embed(t, 48) for t in (CORPUS["a"].text, CORPUS["b"].text, CORPUS["c"].full_text)])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(r._doc_emb[:3], expected, atol=1e-6)
    assert not r._doc_emb[3].any()  # empty document: zero vector, no call
    queries = Queries([Query("q", "solar electricity")])
    run = r.search(queries, 4)
    scores = dict(run["q"])
    qv = np.asarray(LLMServer.embed("solar electricity", 48))
    qv /= np.linalg.norm(qv)
    assert scores["a"] == pytest.approx(float(expected[0] @ qv), abs=1e-6)
    assert [d for d, _ in run["q"]][:2] in (["a", "c"], ["c", "a"])
    assert server.counts["500"] > 0, dict(server.counts)  # faults were injected and retried
    calls = server.counts["embeddings"]
    again = OpenAIEmbed(model="embedder", base_url=server.base_url, batch_size=2)
    again.index(CORPUS)
    assert again.search(queries, 4).to_dict() == run.to_dict()
    assert server.counts["embeddings"] == calls  # served from the embedding cache
    excl = again.search(queries, 4, exclude={"q": frozenset({"a"})})
    assert [d for d, _ in excl["q"]][0] == "c" and len(excl["q"]) == 3


@pytest.mark.slow
def test_run_manifest_has_no_key(server, tmp_path, wknow_sample_folder):
    """A real run on a real task's sample (tests/fx_models.py: ImpliRet multispeaker/wknow's first 100 queries against
    300 of its passages, a BEIR folder): what is checked is the key's absence, not the task's size."""
    result = gapbench.run(str(wknow_sample_folder), f"openai-embed:model=embedder,base_url={server.base_url}",
                          measures=["nDCG@10", "R@100"], output=tmp_path / "run")
    assert 0.0 < result.means["R@100"] <= 1.0
    text = result.manifest.model_dump_json() + (tmp_path / "run" / "manifest.json").read_text()
    assert KEY not in text and "embedder" in text
