"""ARGUS diagnosis and remedy: NER spans, span pooling, min-over-mentions flagging, KB lookup, views, the collapse rule."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from gapbench.analyses.argus.remedy.diagnosis import (Diagnosis, FlaggedEntity, LabelPrior, diagnose, flag_entities,
                                                      mention_embeddings)
from gapbench.analyses.argus.remedy.kb import ReferenceKB
from gapbench.analyses.argus.remedy.ner import Mention, extract_mentions
from gapbench.analyses.argus.remedy.views import (Augmented, View, expansion_views, kb_hits, synthesis_prompt,
                                                  synthesis_views, view_stats)
from gapbench.errors import ConfigError, GapbenchError
from gapbench.retrieval import get_retriever, search_with
from gapbench.types import Corpus, Document, Queries, Query

from llm_server import LLMServer

KB_FILE = Path(__file__).resolve().parents[1] / "tasks" / "data" / "argus_kb" / "landmarks_kb.jsonl"


class SynthServer(LLMServer):
    """Answers the ARGUS synthesis prompt as a careful editor would: after the first occurrence of each candidate
    entity it inserts ", <the passage's first five words>,"; any other prompt gets the base server's answer."""

    def answer(self, prompt: str) -> tuple[str, str]:
        if "### Candidate Entities and Context" not in prompt:
            return super().answer(prompt)
        ents = prompt.split("### Candidate Entities and Context\n", 1)[1].split("\n\n### Input Text\n", 1)[0]
        text = prompt.split("### Input Text\n", 1)[1].rsplit("\n\n### Augmented Text", 1)[0]
        done = set()
        for line in ents.splitlines():
            surface, passage = line.split(" : ", 1)
            if surface in done or surface not in text:
                continue
            done.add(surface)
            i = text.index(surface) + len(surface)
            text = text[:i] + ", " + " ".join(passage.split()[:5]) + "," + text[i:]
        return text, "synthesis"


def _diag(corpus: Corpus, flagged: dict[str, list[tuple[str, str]]]) -> Diagnosis:
    """A hand-made diagnosis: doc -> [(surface, label)] flagged with RPS 0."""
    fl = {d: tuple(FlaggedEntity(s, s.casefold(), lab, 0.0, 1) for s, lab in flagged.get(d, [])) for d in corpus}
    return Diagnosis({d: () for d in corpus}, {d: () for d in corpus}, fl, 0.3, {"method": "hand"}, {})


# ------------------------------------------------------------------------------------------------ collapse rule
def test_collapse_returns_the_original_id_once_with_the_views_score():
    corpus = Corpus([Document("d1", "a quiet walk near the old arena"),
                     Document("d2", "the weather in Japan is mild in spring"),
                     Document("d3", "cooking rice needs water and patience")])
    queries = Queries([Query("q1", "stadium in Akita Japan")])
    # d1 shares no term with the query; its view adds the KB passage, which does
    view = View("d1::argus-exp-0", "d1", corpus["d1"].text + "\n\nSoyu Stadium is a stadium in Akita, Japan.", "expansion")
    view_corpus = Corpus([*corpus.values(), Document(view.view_id, view.text)])
    plain = get_retriever("bm25")
    plain.index(corpus)
    assert dict(search_with(plain, queries, 3, None)["q1"])["d1"] == 0.0  # the original alone matches nothing
    ref = get_retriever("bm25")
    ref.index(view_corpus)
    ref_run = search_with(ref, queries, 10, None)
    ref_scores = dict(ref_run["q1"])
    assert ref_run["q1"][0][0] == view.view_id  # reference: the view is the best match
    assert ref_scores[view.view_id] > ref_scores["d2"] > 0

    aug = Augmented(get_retriever("bm25"), [view]).indexed(corpus)
    run = search_with(aug, queries, 3, None)
    ids = [d for d, _ in run["q1"]]
    assert ids[0] == "d1" and ids.count("d1") == 1 and len(ids) == 3 and set(ids) == {"d1", "d2", "d3"}
    assert run["q1"][0][1] == pytest.approx(ref_scores[view.view_id])
    assert dict(run["q1"])["d2"] == pytest.approx(ref_scores["d2"])
    assert not any("::argus-" in d for d in ids)


def test_collapse_respects_exclusions_of_the_source_and_still_fills_k():
    corpus = Corpus([Document("d1", "nothing relevant here"), Document("d2", "stadium news"),
                     Document("d3", "a stadium in Japan"), Document("d4", "plain text")])
    views = [View(f"d1::argus-exp-{i}", "d1", f"nothing relevant here stadium Japan Akita {i}", "expansion")
             for i in range(3)]
    queries = Queries([Query("q1", "stadium Japan Akita")])
    aug = Augmented(get_retriever("bm25"), views).indexed(corpus)
    run = search_with(aug, queries, 3, {"q1": frozenset({"d1"})})
    ids = [d for d, _ in run["q1"]]
    assert ids[:2] == ["d3", "d2"] and "d1" not in ids and len(ids) == 3
    full = search_with(aug, queries, 4, None)
    assert [d for d, _ in full["q1"]][0] == "d1" and len(full["q1"]) == 4


def test_view_ids_must_not_clash_with_documents():
    corpus = Corpus([Document("d1", "x"), Document("d1::argus-exp-0", "y")])
    with pytest.raises(GapbenchError, match="also a document id"):
        Augmented(get_retriever("bm25"), [View("d1::argus-exp-0", "d1", "z", "expansion")]).index(corpus)


# ------------------------------------------------------------------------------------------------ diagnosis
def test_flagging_takes_the_minimum_over_mentions_and_flags_once_per_document():
    ms = {"a": (Mention("a", "Paris", "GPE", 0, 5), Mention("a", "Bob", "PERSON", 10, 13),
                Mention("a", "paris", "GPE", 20, 25)),
          "b": (Mention("b", "Bob", "PERSON", 0, 3),)}
    rps = {"a": (0.9, 0.35, 0.1), "b": (0.2,)}
    fl = flag_entities(ms, rps, tau=0.3)
    assert fl["a"] == (FlaggedEntity("Paris", "paris", "GPE", 0.1, 2),)  # min(0.9, 0.1) = 0.1 < 0.3; Bob 0.35 is not
    assert fl["b"] == (FlaggedEntity("Bob", "bob", "PERSON", 0.2, 1),)
    assert flag_entities(ms, rps, tau=0.1)["a"] == ()  # 0.1 is not < 0.1


@pytest.mark.model
def test_spacy_ner_keeps_character_spans_and_caches():
    corpus = Corpus([Document("x", "Barack Obama visited Paris in 2019 and met Angela Merkel."),
                     Document("y", "no names here at all")])
    ms = extract_mentions(corpus)
    got = [(m.text, m.label) for m in ms["x"]]
    assert ("Paris", "GPE") in got and ("Barack Obama", "PERSON") in got
    assert all(corpus["x"].text[m.start:m.end] == m.text for m in ms["x"])
    assert not any(m.label == "DATE" for m in ms["x"])  # dates are not named entities here
    assert ms["y"] == ()
    every = extract_mentions(corpus, labels=None)  # served from the cache: same spans plus the DATE
    assert ("2019", "DATE") in [(m.text, m.label) for m in every["x"]]


def test_transformers_ner_offline_fails_with_a_clear_message():
    corpus = Corpus([Document("x", "Paris")])
    with pytest.raises(GapbenchError, match="ner=spacy"):
        extract_mentions(corpus, ner="dslim/bert-base-NER", cache=False)


@pytest.mark.model
def test_span_pooling_matches_a_char_to_token_reference():
    dense = get_retriever("dense")
    text = "Yesterday we walked from the Louvre to the Eiffel Tower in Paris before dinner."
    corpus = Corpus([Document("d", text)])
    s = text.index("Eiffel Tower")
    ms = {"d": (Mention("d", "Eiffel Tower", "FAC", s, s + len("Eiffel Tower")),
                Mention("d", "Paris", "GPE", text.index("Paris"), text.index("Paris") + 5))}
    emb, info = mention_embeddings(dense, corpus, ms, cache=False)
    assert info["mode"] == "span" and emb.shape == (2, 384) and info["n_truncated"] == 0
    model = dense._load()
    enc = model.tokenizer(text)
    hidden = model.encode([text], output_value="token_embeddings", convert_to_numpy=False)[0].numpy()
    for row, m in zip(emb, ms["d"]):
        toks = sorted({enc.char_to_token(i) for i in range(m.start, m.end) if enc.char_to_token(i) is not None})
        ref = hidden[toks].mean(axis=0)
        ref /= np.linalg.norm(ref)
        np.testing.assert_allclose(row, ref, atol=1e-5)
    assert not np.allclose(emb[0], emb[1])


class LinearProbe:
    """Probe-compatible: RPS = clip(0.5 + emb @ w, 0, 1) with a fixed w."""

    def __init__(self, w: np.ndarray, fingerprint: str) -> None:
        self.w, self.fingerprint = w, fingerprint

    def predict(self, embeddings: np.ndarray) -> np.ndarray:
        return np.clip(0.5 + embeddings @ self.w, 0.0, 1.0)


@pytest.mark.model
def test_diagnosis_with_a_probe_scores_span_embeddings_and_flags_below_tau():
    dense = get_retriever("dense")
    corpus = Corpus([Document("a", "We met in Paris and later flew to Tokyo, then back to Paris."),
                     Document("b", "Angela Merkel spoke in Berlin.")])
    mentions = extract_mentions(corpus)
    emb, _ = mention_embeddings(dense, corpus, mentions)
    paris = emb[0]  # the first mention of document a
    assert mentions["a"][0].text == "Paris"
    probe = LinearProbe(-0.5 * paris, dense.fingerprint)  # RPS = 0.5 - 0.5 cos(mention, first Paris)
    diag = diagnose(corpus, dense, probe=probe, tau=0.3)
    flat = [m for d in mentions for m in mentions[d]]
    expect = np.clip(0.5 - 0.5 * emb @ paris, 0, 1)
    got = [x for d in corpus for x in diag.rps[d]]
    np.testing.assert_allclose(got, expect, atol=1e-6)
    assert diag.rps["a"][0] == pytest.approx(0.0, abs=1e-6)
    flagged_a = {e.key: e.rps for e in diag.flagged["a"]}
    assert flagged_a["paris"] == pytest.approx(min(expect[0], expect[2]))  # both Paris mentions, min taken
    want = {m.key for m, v in zip(flat, expect) if v < 0.3 and m.doc_id == "a"}
    assert set(flagged_a) == want
    assert diag.method["method"] == "probe" and diag.stats()["n_mentions"] == len(flat)
    with pytest.raises(ConfigError, match="fingerprint"):
        diagnose(corpus, dense, probe=LinearProbe(paris, "0" * 64))


def test_label_prior_fallback_flags_places_and_organisations_only():
    corpus = Corpus([Document("x", "Ivan walked past Soyu Stadium with Google engineers in Akita.")])
    diag = diagnose(corpus)
    flagged = {(e.surface, e.label) for e in diag.flagged["x"]}
    labels = {m.label for m in diag.mentions["x"]}
    assert all(lab in LabelPrior().risky for _, lab in flagged)
    assert len(flagged) == sum(1 for m in diag.mentions["x"] if m.label in LabelPrior().risky)
    assert "PERSON" in labels and not any(lab == "PERSON" for _, lab in flagged)
    assert diag.method["method"] == "label-prior"


# ------------------------------------------------------------------------------------------------ KB and views
def test_packaged_kb_fingerprint_and_lookup():
    assert hashlib.sha256(KB_FILE.read_bytes()).hexdigest() == \
        "a5b97e29eb3409db0d825c5fbd3b3f1402dd5aae9b3654419d609ae4beb864b4"
    rows = [json.loads(x) for x in KB_FILE.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 97 and rows[0]["title"] == "Northwell Health Ice Center" and rows[-1]["id"] == "Q65393401"
    kb = ReferenceKB.packaged("landmarks-oracle")
    assert len(kb.passages) == 97
    hits = kb.lookup(["Soyu Stadium", "zzqx unknownword"], k=2)
    assert hits["Soyu Stadium"][0][0] == "Q4701236"
    assert "Japan" in kb.passages["Q4701236"].text
    assert hits["zzqx unknownword"] == ()  # no positive score, no passage


def test_expansion_views_one_per_entity_passage_pair():
    corpus = Corpus([Document("0", "I ran near Soyu Stadium last week."), Document("1", "Nothing here.")])
    kb = ReferenceKB.packaged("landmarks-oracle")
    diag = _diag(corpus, {"0": [("Soyu Stadium", "FAC")]})
    hits = kb_hits(diag, kb, 2)
    views = expansion_views(corpus, diag, kb, 2, hits=hits)
    pids = hits["0"]["Soyu Stadium"]
    assert len(views) == len(pids) >= 1 and pids[0] == "Q4701236"
    assert views[0].view_id == "0::argus-exp-0" and views[0].source_id == "0"
    assert views[0].text == corpus["0"].text + "\n\n" + kb.passages["Q4701236"].text
    st = view_stats(corpus, views)
    assert st["n_views"] == len(pids) and st["views_per_doc"] == len(pids) / 2 and st["indexed"] == 2 + len(pids)


def test_synthesis_view_through_the_llm_layer_and_its_cache(tmp_path):
    from gapbench.llm.client import LLMClient

    corpus = Corpus([Document("0", "We trained near Soyu Stadium every day."), Document("1", "Nothing here.")])
    kb = ReferenceKB.packaged("landmarks-oracle")
    diag = _diag(corpus, {"0": [("Soyu Stadium", "FAC")]})
    hits = {"0": {"Soyu Stadium": ("Q4701236",)}, "1": {}}
    prompt = synthesis_prompt(corpus["0"].text, {"Soyu Stadium": [kb.passages["Q4701236"].text]})
    assert "Soyu Stadium : Soyu Stadium is a stadium in Akita, Japan." in prompt
    assert prompt.rstrip().endswith("### Augmented Text") and corpus["0"].text in prompt
    with SynthServer() as srv:
        llm = LLMClient(base_url=srv.base_url, model="judge", cache=tmp_path / "llm.sqlite")
        views = synthesis_views(corpus, diag, kb, llm, 2, hits=hits)
        assert [v.view_id for v in views] == ["0::argus-syn"]
        assert views[0].text == "We trained near Soyu Stadium, Soyu Stadium is a stadium, every day."
        assert srv.counts["chat"] == 1
        again = synthesis_views(corpus, diag, kb, llm, 2, hits=hits)
        assert again == views and srv.counts["chat"] == 1  # answered from the cache
        assert llm.usage.total()["cache_hits"] == 1
    with LLMServer() as srv:  # the plain test server echoes: a view, but no quality
        llm = LLMClient(base_url=srv.base_url, model="judge", cache=False)
        echo = synthesis_views(corpus, diag, kb, llm, 2, hits=hits)
        assert re.fullmatch(r"echo [0-9a-f]{16}", echo[0].text)


def test_argus_synth_augmenter_uses_the_endpoint_given_else_the_embedded_llm(tmp_path, monkeypatch):
    """``gapbench run --augment argus-synth``: an explicit endpoint writes the views; with none, the embedded LLM is
    asked for before the (costly) diagnosis, and its absence says how to install it or give an endpoint."""
    import sys

    import gapbench.analyses.argus.remedy.augment as augment
    from gapbench.analyses.argus.remedy.augment import ArgusAugmenter

    corpus = Corpus([Document("0", "We trained near Soyu Stadium every day."), Document("1", "Nothing here.")])
    bm25 = get_retriever("bm25")
    with SynthServer() as srv:
        # the old defaults, by name: the landmark KB (a pipeline check) and the label heuristic
        views = ArgusAugmenter("argus-synth:kb=landmarks-oracle,diagnosis=label-prior", bm25, llm_base_url=srv.base_url,
                               llm_model="judge").augment(corpus)
        assert srv.counts["chat"] == 1
    assert [v.view_id for v in views] == ["0::argus-syn"]
    # the synthesis server inserts the first five words of the entity's first KB passage after its mention
    assert views[0].text == "We trained near Soyu Stadium, Soyu Stadium is a stadium, every day."
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if gapbench[local-llm] were not installed

    def no_diagnosis(*a, **kw):
        raise AssertionError("the LLM is resolved before the diagnosis")

    monkeypatch.setattr(augment, "diagnose", no_diagnosis)
    with pytest.raises(ConfigError, match=r"^no LLM endpoint given and the embedded LLM is not installed; "
                                          r".*OpenAI-compatible endpoint.*pip install 'gapbench\[local-llm\]'$"):
        ArgusAugmenter("argus-synth", bm25).augment(corpus)
