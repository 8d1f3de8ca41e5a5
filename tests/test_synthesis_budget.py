"""ARGUS synthesis never silently cut: each answer's ``max_tokens`` comes from the view's expected length, an answer cut
by it is asked again with double the budget (the LLM client's re-ask), and one still cut is counted and not indexed."""

from __future__ import annotations

import pytest

from gapbench.analyses.argus.remedy.augment import augment_for_run
from gapbench.analyses.argus.remedy.kb import ReferenceKB
from gapbench.analyses.argus.remedy.views import synthesis_budget, synthesis_note, synthesis_views, view_stats
from gapbench.llm.client import LLMClient
from gapbench.retrieval import get_retriever
from gapbench.types import Corpus, Document

from llm_server import LLMServer
from test_argus_augment import _diag

# Three documents of one flagged entity each. Budgets, by hand: 2 * (ceil(chars / 4) + 12 * 1) + 64.
DOCS = {
    "a": "We trained near Soyu Stadium every day.",  # 39 chars -> 10 tokens -> 2 * 22 + 64 = 108
    "b": "They played at Soyu Stadium last year.",  # 38 chars -> 10 tokens -> 108
    "c": "We all met at Soyu Stadium today.",  # 33 chars -> 9 tokens -> 2 * 21 + 64 = 106
}
# Answer lengths in words (the test server's tokens): a fits its first budget; b (150) is cut at 108 and fits the
# re-ask's 216; c (300) is cut at 106 and again at 212.
WORDS = {"a": 50, "b": 150, "c": 300}


class LongServer(LLMServer):
    """Answers a synthesis prompt with ``WORDS[doc]`` words (the document's, then filler), cut at the request's budget
    (``enforce_max_tokens``)."""

    def answer(self, prompt: str) -> tuple[str, str]:
        text = prompt.split("### Input Text\n", 1)[1].rsplit("\n\n### Augmented Text", 1)[0]
        doc = next(d for d, t in DOCS.items() if t == text)
        # the document's words first, as a rewrite keeps them (else the LLM watch stops a model that rewrites nothing)
        words = text.split()
        return " ".join(words + [f"{doc}{i}" for i in range(WORDS[doc] - len(words))]), "synthesis"


def _setup(docs=tuple(DOCS)):
    corpus = Corpus([Document(d, DOCS[d]) for d in docs])
    diag = _diag(corpus, {d: [("Soyu Stadium", "FAC")] for d in docs})
    hits = {d: {"Soyu Stadium": ("Q4701236",)} for d in docs}
    return corpus, diag, hits


def test_budget_is_twice_the_expected_length_plus_a_margin_within_the_cap():
    assert synthesis_budget("x" * 400, 2) == 2 * (100 + 24) + 64 == 312
    assert synthesis_budget("x" * 401, 0) == 2 * 101 + 64 == 266
    assert synthesis_budget("x" * 400, 2, cap=200) == 200
    assert [synthesis_budget(DOCS[d], 1) for d in DOCS] == [108, 108, 106]


def test_a_cut_answer_is_asked_again_and_a_still_cut_one_is_counted_and_not_indexed(tmp_path):
    corpus, diag, hits = _setup()
    kb = ReferenceKB.packaged("landmarks-oracle")
    with LongServer(enforce_max_tokens=True) as srv:
        llm = LLMClient(base_url=srv.base_url, model="m", cache=tmp_path / "llm.sqlite")
        views = synthesis_views(corpus, diag, kb, llm, 2, hits=hits)
        budgets = sorted(r["max_tokens"] for r in srv.received)
        kept = synthesis_views(corpus, diag, kb, llm, 2, hits=hits, keep_truncated=True)
        assert srv.counts["chat"] == 5  # the second call is answered from the cache, truncation flag included
    assert budgets == [106, 108, 108, 212, 216]
    assert [v.view_id for v in views] == ["a::argus-syn", "b::argus-syn"]
    assert len(views[1].text.split()) == 150  # the re-ask got b's whole answer
    check = {"asked": 3, "views": 2, "empty": 0, "truncated": 1, "dropped_truncated": 1, "keep_truncated": False,
             "max_tokens": [106, 108]}
    assert views.check == check
    usage = llm.usage.total()
    assert usage["length_reasks"] == 2 and usage["truncated"] == 2  # c, asked twice: once sent, once from the cache
    stats = view_stats(corpus, views)
    assert stats["n_views"] == 2 and stats["synthesis"] == check
    assert synthesis_note(check) == ("synthesis: 1 of 3 answers were still cut by their token budget after the re-ask "
                                     "with double it (1 dropped, not indexed).")
    assert [v.view_id for v in kept] == ["a::argus-syn", "b::argus-syn", "c::argus-syn"]
    assert len(kept[2].text.split()) == 212
    assert kept.check == {**check, "views": 3, "dropped_truncated": 0, "keep_truncated": True}
    assert synthesis_note(kept.check).endswith("(kept as views (keep_truncated)).")
    assert synthesis_note(view_stats(corpus, views[:1]).get("synthesis")) is None  # a plain list has no check


def test_a_fixed_budget_overrides_the_estimate():
    corpus, diag, hits = _setup(("a",))
    with LongServer(enforce_max_tokens=True) as srv:
        llm = LLMClient(base_url=srv.base_url, model="m", cache=False)
        views = synthesis_views(corpus, diag, ReferenceKB.packaged("landmarks-oracle"), llm, 2, hits=hits,
                                max_tokens=20)
        assert [r["max_tokens"] for r in srv.received] == [20, 40]
    assert views == [] and views.check["dropped_truncated"] == 1 and views.check["max_tokens"] == [20, 20]


@pytest.mark.parametrize("keep", [False, True])
def test_run_augment_manifest_counts_the_cut_views(keep):
    corpus, _, _ = _setup(("c",))
    spec = "argus-synth:kb=landmarks-oracle,diagnosis=label-prior" + (",keep_truncated=true" if keep else "")
    with LongServer(enforce_max_tokens=True) as srv:
        augmented, entry = augment_for_run(spec, get_retriever("bm25"), corpus, llm_base_url=srv.base_url,
                                           llm_model="m")
    assert entry["synthesis"]["truncated"] == 1 and entry["synthesis"]["dropped_truncated"] == (0 if keep else 1)
    assert entry["n_views"] == len(augmented.views) == (1 if keep else 0)
    assert "still cut by their token budget" in entry["note"] and "pipeline check" in entry["note"]


def test_argus_compare_reports_the_cut_views_in_its_growth(tmp_path):
    from gapbench.analyses.argus.remedy.remedy_compare import argus_compare

    from test_argus_compare import beir_folder

    task = beir_folder(tmp_path / "t", docs=DOCS, queries={"q": "Who trained in Japan?"}, qrels={"q": {"a": 1}})
    with LongServer(enforce_max_tokens=True) as srv:
        llm = LLMClient(base_url=srv.base_url, model="m", cache=False)
        res = argus_compare(task, "bm25", kb="landmarks-oracle", diagnosis="label-prior", llm=llm,
                            measures=["nDCG@10"], k=10)
    row = next(iter(res.model_dump(mode="json", exclude_unset=True)["tasks"].values()))
    growth = row["variants"]["synthesis"]["growth"]
    assert growth["n_views"] == 2 and growth["synthesis"]["dropped_truncated"] == 1
    assert row["llm"]["truncated"] == 1 and row["llm"]["length_reasks"] == 2
    assert ("synthesis: 1 of 3 answers were still cut by their token budget after the re-ask with double it "
            "(1 dropped, not indexed).") in row["notes"]
    assert "1 answers cut by their token budget." in str(res)
