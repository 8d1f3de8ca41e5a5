"""Declared component protocols (Retriever, Reranker, Augmenter, Encoder), public members instead of reads of another
object's private attributes, ARGUS span pooling shared by audit and augment, and `gapbench run`'s task reranker
defaults."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import gapbench
import gapbench.tasks.obliq as obliq
from gapbench.analyses.argus.audit import retrievability as aa
from gapbench.adapters.bm25 import BM25
from gapbench.adapters.dense import Dense
from gapbench.adapters.llm_retrievers import QueryRewrite
from gapbench.adapters.tournament import SlidingWindow, Tournament
from gapbench.analyses.argus.remedy.augment import ArgusAugmenter
from gapbench.analyses.argus.remedy.diagnosis import embedding_mode, mention_embeddings
from gapbench.analyses.argus.remedy.ner import Mention
from gapbench.errors import ConfigError, GapbenchError
from gapbench.llm.client import LazyClient, LLMClient, LLMConfig
from gapbench.retrieval import (Augmenter, Encoder, Reranker, Retriever, TokenEncoder, get_retriever,
                                llm_manifest_of)
from gapbench.spans import model_text, span_vectors, token_model
from gapbench.types import Corpus, Document, Queries, Query

from llm_server import LLMServer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "obliq"
NOWHERE = "http://127.0.0.1:9/v1"  # never contacted: these tests make no call


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.delenv(obliq.ENV_VAR, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


# ------------------------------------------------------------------------------------------------ protocols
def test_built_in_components_declare_their_protocols():
    """That every registered retriever is a Retriever and every reranker a Reranker is gapbench.testing's contract
    (tests/test_contract_adapters.py); here: the protocols beyond those, and that none claims one it lacks."""
    dense = Dense(cache=False)
    assert isinstance(dense, Encoder) and isinstance(dense, TokenEncoder)
    assert not isinstance(BM25(), Encoder)
    for reranker in (Tournament(llm_base_url=NOWHERE, llm_model="m"),
                     SlidingWindow(llm_base_url=NOWHERE, llm_model="m")):
        assert not isinstance(reranker, Retriever)
    assert isinstance(ArgusAugmenter("argus-expand:tau=0.5", BM25()), Augmenter)
    assert not isinstance(BM25(), Reranker) and not isinstance(BM25(), Augmenter)


def test_llm_manifest_is_none_before_the_first_call_and_the_client_once_made():
    for component in (Tournament(llm_base_url=NOWHERE, llm_model="m"), QueryRewrite("bm25", llm_base_url=NOWHERE,
                                                                                    llm_model="m")):
        assert component.llm_manifest() is None and llm_manifest_of(component) is None
        client = component.client  # made on first use, once, shared
        assert component.client is client and isinstance(client, LLMClient)
        manifest = component.llm_manifest()
        assert (manifest["model"], manifest["endpoint"]) == ("m", NOWHERE)
        assert manifest["usage"] == client.usage.record().model_dump()
    assert llm_manifest_of(BM25()) is None  # a component without an LLM reports none


def test_lazy_client_checks_the_config_at_once_and_keeps_a_given_client(tmp_path):
    with pytest.raises(ConfigError):
        LazyClient.of(base_url="not a url", model="m")
    given = LLMClient(LLMConfig(base_url=NOWHERE, model="x"), cache=False, api_key="sk-test")
    lazy = LazyClient.of(given, base_url="ignored", model="ignored")
    assert lazy.made is given and lazy.get() is given
    fresh = LazyClient.of(base_url=NOWHERE, model="m", temperature=None, cache=False)
    assert fresh.made is None and fresh.manifest() is None
    made = fresh.get()
    assert fresh.made is made and made.cache is None and made.config.temperature == LLMConfig().temperature


def test_bm25_query_scores_are_the_scores_search_ranks_by():
    corpus = Corpus([Document("a", "the cat sat on the mat"), Document("b", "a dog chased the cat"),
                     Document("c", "birds sing at dawn"), Document("d", "cat cat cat")])
    queries = Queries([Query("q1", "cat"), Query("q2", "the of"), Query("q3", "dog dawn")])
    bm25 = BM25()
    with pytest.raises(GapbenchError, match="before index"):
        next(bm25.query_scores(queries))
    bm25.index(corpus)
    rows = list(bm25.query_scores(queries))
    assert [r.shape for r in rows] == [(4,)] * 3
    run = bm25.search(queries, 4)
    for qid, row in zip(queries, rows):
        got = dict(run.get(qid, ()))
        for pos, did in enumerate(corpus.ids()):
            assert row[pos] == pytest.approx(got.get(did, 0.0), abs=0)
    np.testing.assert_array_equal(rows[1], np.zeros(4))  # stopwords only: nothing to match
    assert rows[0][2] == 0 and rows[0][3] > rows[0][0] > 0  # "cat" three times beats once in a longer text
    assert rows[2][1] > 0 and rows[2][2] > 0 and rows[2][0] == rows[2][3] == 0


# ------------------------------------------------------------------------------------------- span pooling once
@pytest.mark.model
def test_audit_and_augment_give_identical_embeddings_for_the_same_span():
    dense = Dense(cache=False)
    paragraph = "Levington Lagoon is a nature reserve near Levington in Suffolk, run by the Suffolk Wildlife Trust."
    label = "Suffolk Wildlife Trust"
    audit_vec, stats = aa.SpanEncoder(dense).encode_entities([aa.Entity("Q1", label, paragraph)])
    assert stats["label_found"] == 1
    # the same paragraph as a document with leading spaces (stripped before tokenizing: offsets shift) and a mention
    text = "  " + paragraph
    start = text.index(label)
    corpus = Corpus([Document("d", text)])
    mentions = {"d": (Mention("d", label, "ORG", start, start + len(label)),)}
    augment_vec, info = mention_embeddings(dense, corpus, mentions, cache=False)
    assert info["mode"] == "span" and info["n_truncated"] == 0
    np.testing.assert_array_equal(audit_vec, augment_vec)
    # and both are the label's span, not the paragraph's mean
    model = token_model(dense)
    whole, _ = span_vectors(model, [model_text(model, paragraph)[0]], [[None]])
    assert float(audit_vec[0] @ whole[0]) < 0.95
    np.testing.assert_allclose(np.linalg.norm(audit_vec, axis=1), 1.0, atol=1e-6)


@pytest.mark.model
def test_span_vectors_pool_the_overlapping_tokens_and_count_spans_past_the_limit():
    model = token_model(Dense(cache=False))
    text, lead = model_text(model, "  Paris is big.")
    assert (text, lead) == ("Paris is big.", 2)
    vecs, missed = span_vectors(model, [text], [[(0, 5), (9, 12), (500, 510)]])
    hidden = model.encode([text], output_value="token_embeddings", convert_to_numpy=False)[0].numpy()
    # [CLS] paris is big . [SEP]: "Paris" is token 1, "big" token 3; a span past the text pools every real token
    for row, toks in zip(vecs, ([1], [3], [1, 2, 3, 4])):
        ref = hidden[toks].mean(axis=0)
        np.testing.assert_allclose(row, ref / np.linalg.norm(ref), atol=1e-5)
    assert missed == 1


def test_argus_refuses_an_encoder_of_token_matrices_with_a_clear_error():
    # ColBERT's embed needs is_query and gives token matrices: neither span nor sentence pooling reads them
    with pytest.raises(ConfigError, match="one vector per text"):
        aa.get_encoder("colbert")
    assert embedding_mode(get_retriever("colbert")) == "none"
    assert embedding_mode(Dense(cache=False)) == "span" and embedding_mode(BM25()) == "none"


# ------------------------------------------------------------------------------------ no private attribute reads
OWNED = ["harness/runner.py", "harness/analyses/gap.py", "harness/analyses/argus/audit/retrievability.py",
         "harness/analyses/argus/remedy/augment.py", "harness/analyses/argus/probe/training.py", "harness/spans.py",
         "harness/analyses/mcr.py", "tasks/rarb.py", "adapters/tournament.py", "adapters/llm_retrievers.py"]


def _private_reads(path: Path) -> list[str]:
    """``x._name`` and ``getattr(x, "_name")`` where x is not the object itself (self, cls, super(), type(self))."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = ast.unparse(node.value)
            if owner not in ("self", "cls", "super()", "type(self)"):
                out.append(f"{path.name}:{node.lineno} {owner}.{node.attr}")
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr") and \
                isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_") and \
                not str(node.args[1].value).startswith("__") and ast.unparse(node.args[0]) != "self":
            out.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return out


def test_no_module_reads_another_objects_private_attributes():
    found = [hit for rel in OWNED for hit in _private_reads(ROOT / rel)]
    assert found == []
    assert _private_reads_of("x = getattr(rr, '_client', None)\ny = retriever._model\nz = self._ok\n") == [
        "bad.py:1 getattr(rr, '_client', None)", "bad.py:2 retriever._model"]


def _private_reads_of(source: str) -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bad.py"
        path.write_text(source, encoding="utf-8")
        return _private_reads(path)


# ------------------------------------------------------------------------------ gapbench run: task defaults
def _judge(data) -> LLMServer:
    return LLMServer(qrels={q: dict(data.qrels[q]) for q in data.qrels},
                     queries={q: data.queries[q].text for q in data.queries},
                     corpus={d: data.corpus[d].text for d in data.corpus})


def test_run_takes_the_tasks_tournament_defaults_as_gap_does(tmp_path, monkeypatch):
    # a fresh answer cache: test_obliq_systems' judges answer the same prompts under the same model name differently
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    task = f"obliq/math:data_dir={FIXTURES}"
    data = obliq.load("math", data_dir=str(FIXTURES))
    with _judge(data) as srv:
        plain = gapbench.run(task, "bm25", k=20, reranker="tournament", llm_base_url=srv.base_url, llm_model="judge")
        own = gapbench.run(task, "bm25", k=20, reranker="tournament:batch_size=3", llm_base_url=srv.base_url,
                           llm_model="judge", output=tmp_path / "own")
        window = gapbench.run(task, "bm25", k=20, reranker="sliding-window:window=4,stride=2",
                              llm_base_url=srv.base_url, llm_model="judge")
    entry = plain.manifest.reranker.model_dump()
    assert (entry["config"]["batch_size"], entry["config"]["promote"], entry["config"]["max_final"]) == (6, 2, 16)
    assert entry["task_defaults"] == {"batch_size": 6, "promote": 2, "max_final": 16}
    assert entry["llm"]["model"] == "judge" and entry["llm"]["usage"]["calls"] > 0
    entry = own.manifest.reranker.model_dump()
    assert (entry["config"]["batch_size"], entry["config"]["promote"], entry["config"]["max_final"]) == (3, 2, 16)
    assert entry["task_defaults"] == {"promote": 2, "max_final": 16}
    assert (tmp_path / "own" / "manifest.json").read_text().count('"task_defaults"') == 1
    assert window.manifest.reranker.task_defaults == {}  # OBLIQ declares defaults for the tournament only
    # a perfect judge ranks the gold problems first: the defaults change the rounds, not what a perfect judge finds
    assert plain.means["nDCG@10"] == own.means["nDCG@10"] == window.means["nDCG@10"]
