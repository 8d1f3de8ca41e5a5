"""The tournament and sliding-window algorithms with a counting oracle ranker (no LLM involved)."""

from __future__ import annotations

import json
import random

import pytest

from gapbench.adapters.tournament import (
    LLMListwise, Tournament, TournamentConfig, count_tokens, parse_permutation, read_ranking, sliding_window,
    sliding_window_calls, tournament, tournament_calls, truncate_tokens,
)
from gapbench.errors import ConfigError, OptionsError
from gapbench.analyses.gap import GapReport
from gapbench.schemas.gap import VerifierAnswers
from gapbench.llm.client import LLMClient
from gapbench.retrieval import get_reranker
from gapbench.types import Document, Query
from llm_server import LLMServer


class Oracle:
    """Ranks passages by a known grade (higher first), counting calls and checking batch sizes."""

    def __init__(self, grades: dict[str, int], max_batch: int):
        self.grades = grades
        self.max_batch = max_batch
        self.calls = 0

    def __call__(self, query, passages):
        assert 1 < len(passages) <= self.max_batch
        self.calls += 1
        return sorted(range(len(passages)), key=lambda i: (-self.grades[passages[i]], i))


def test_parse_permutation_is_robust():
    assert parse_permutation("[2] > [1] > [3]", 3) == [1, 0, 2]
    assert parse_permutation("[3] > [3] > [9] > [1]", 4) == [2, 0, 1, 3]  # duplicate and unknown dropped, 2 and 4 appended
    assert parse_permutation("I cannot rank these.", 3) == [0, 1, 2]
    assert parse_permutation("2 > 1", 3) == [1, 0, 2]
    assert parse_permutation("", 0) == []


@pytest.mark.parametrize("n,b,p,final,expected", [
    (20, 20, 4, 20, 1),  # fits the final batch: one call
    (100, 20, 4, 20, 6),  # 5 batches -> 20 promoted -> final
    # 101 = 5 x 20 + 1: 5 calls, the lone candidate is promoted whole -> 21; 21 = 20 + 1: 1 call -> 5; final call
    (101, 20, 4, 20, 5 + 1 + 1),
    (500, 20, 4, 20, 25 + 5 + 1),  # 25 calls -> 100 -> 5 calls -> 20 -> final
    (50, 6, 2, 16, 8 + 3 + 1),  # 8 x 6 + 2: 8 calls (the batch of 2 is promoted whole) -> 18 -> 3 calls -> 6 -> final
    (1, 20, 4, 20, 0),
])
def test_analytic_call_count(n, b, p, final, expected):
    assert tournament_calls(n, b, p, final) == expected


@pytest.mark.parametrize("n,b,p,final", [(500, 20, 4, 20), (137, 6, 2, 16), (64, 4, 2, 16), (21, 20, 4, 20)])
def test_noise_free_oracle_puts_all_gold_on_top_and_counts_match(n, b, p, final):
    rng = random.Random(n)
    docs = [f"d{i}" for i in range(n)]
    gold = set(rng.sample(docs, 3))
    grades = {d: (1 if d in gold else 0) for d in docs}
    oracle = Oracle(grades, max(b, final))
    ranking = tournament("q", "query", docs, {d: d for d in docs}, oracle, TournamentConfig(b, p, final, seed=1))
    assert sorted(ranking) == sorted(docs)  # nothing lost, nothing duplicated
    assert set(ranking[:3]) == gold
    assert oracle.calls == tournament_calls(n, b, p, final)


def test_tournament_is_seeded_and_tails_follow_depth():
    docs = [f"d{i:03d}" for i in range(100)]
    grades = {d: int(d[1:]) for d in docs}  # a total order: the oracle knows the whole ranking
    oracle = Oracle(grades, 20)
    a = tournament("q", "x", docs, {d: d for d in docs}, oracle, TournamentConfig(seed=3))
    b = tournament("q", "x", list(reversed(docs)), {d: d for d in docs}, oracle, TournamentConfig(seed=3))
    # the head is exact: the best 4 of each batch reach the final, so the global top 4 are always found
    assert a[:4] == ["d099", "d098", "d097", "d096"]
    # the first 20 positions are the final batch (the round-1 winners); the next 80 are round-1 losers
    assert len(a) == 100 and a[20:] and all(grades[d] < grades[a[0]] for d in a[20:])
    c = tournament("q", "x", docs, {d: d for d in docs}, oracle, TournamentConfig(seed=3))
    assert a == c


def test_sliding_window_bubbles_the_best_to_the_top():
    docs = [f"d{i:02d}" for i in range(45)]
    grades = {d: int(d[1:]) for d in docs}
    oracle = Oracle(grades, 20)
    ranking = sliding_window("x", docs, {d: d for d in docs}, oracle, window=20, stride=10)
    # a window of 20 moving up by 10 carries the 10 best all the way to the top
    assert ranking[:10] == [f"d{i:02d}" for i in range(44, 34, -1)]
    assert oracle.calls == sliding_window_calls(45) == 4
    assert sorted(ranking) == sorted(docs)


def test_config_errors():
    with pytest.raises(ConfigError, match="P=20"):
        TournamentConfig(batch_size=20, promote=20)
    with pytest.raises(ConfigError):
        tournament_calls(10, 4, 0, 4)


# ------------------------------------------------------------------------------------------ real-model answers
@pytest.mark.parametrize("answer,n,order,dropped", [
    ("[2] > [1] > [3]", 3, [1, 0, 2], 0),
    ("[3] > [3] > [9] > [1]", 4, [2, 0], 2),  # a repeat and an unknown id dropped; 2 and 4 missing
    ("The Colosseum is in Rome, Italy. It opened in 80 AD.", 3, [], 0),  # prose: its numbers are not ids
    ("The Colosseum is in Rome, Italy. 2 of its 3 tiers stand.", 3, [], 0),
    ("<think>[1] fits, [3] does not</think>\n[2] > [1] > [3]", 3, [1, 0, 2], 0),  # reasoning is not the answer
    ("[1] fits</think>[3] > [2] > [1]", 3, [2, 1, 0], 0),  # the opening tag stripped by the server
    ("<think>Passage [1] fits, [3]", 3, [], 0),  # cut inside its reasoning
    ("Passage [1] first?\n```text\n[2] > [3] > [1]\n```\nbecause of [1]", 3, [1, 2, 0], 0),
    ("```[2] > [1]```", 2, [1, 0], 0),
    ("[2] > [1] > [3], since [2] names it", 3, [1, 0, 2], 0),  # words around the chain
    ("Compare [1] > [3]; final: [2] > [1] > [3]", 3, [1, 0, 2], 0),  # the longest chain
    ("[2] is best, then [1]", 3, [1, 0], 0),
    ("1. [2]\n2. [3]\n3. [1]", 3, [1, 2, 0], 0),  # a numbered list of bracketed ids
    ("2, 1, 3", 3, [1, 0, 2], 0),
    ("[2, 3, 1]", 3, [1, 2, 0], 0),
    ("The ranking is 3 > 1 > 2.", 3, [2, 0, 1], 0),
    ("[2] > [4] > [1] > [3] > [0]", 3, [1, 0, 2], 2),
    (None, 2, [], 0),
])
def test_read_ranking_rules(answer, n, order, dropped):
    assert read_ranking(answer, n) == (order, dropped)
    assert parse_permutation(answer, n) == order + [i for i in range(n) if i not in order]


def test_token_count_and_cut():
    # Hello , world ! BM 25 is 123 45 words: letters by 6, digits by 3, each mark alone
    assert count_tokens("Hello, world! BM25 is 12345 words") == 10
    assert count_tokens("amphitheatre") == 2 and count_tokens("東京タワー") == 5 and count_tokens("") == 0
    assert truncate_tokens("Hello, world! BM25 is", 3) == "Hello, world"
    assert truncate_tokens("The Colosseum was built", 2) == "The Coloss"
    assert truncate_tokens("a b", 5) == "a b" and truncate_tokens("a b", None) == "a b"
    assert truncate_tokens("a", 0) == ""


QUERY = "where is the colosseum"
# input order: bananas (grade 0), rome (3), paris (1), vespasian (2); the judge answers [2] > [4] > [3] > [1]
PASSAGES = ["Bananas are yellow.", "Rome hosts the Colosseum, an amphitheatre.", "Paris has the Eiffel Tower.",
            "The Colosseum was built under Vespasian."]
JUDGE = {QUERY: dict(zip(PASSAGES, (0, 3, 1, 2)))}
IDEAL = [1, 3, 2, 0]


def _client(srv):
    return LLMClient(base_url=srv.base_url, model="judge", cache=False, retry_wait=0.01, retry_wait_max=0.05)


@pytest.mark.parametrize("style,times,order,outcome,extra,calls", [
    (None, None, IDEAL, "clean", {}, 1),
    ("think", None, IDEAL, "clean", {}, 1),
    ("fenced", None, IDEAL, "clean", {}, 1),
    ("words", None, IDEAL, "clean", {}, 1),
    ("bare", None, IDEAL, "clean", {}, 1),
    ("duplicates", None, IDEAL, "repaired", {}, 1),  # [2] > [4] > [2] > [4] > [3] > [1]: every id, repeats dropped
    ("out_of_range", None, IDEAL, "repaired", {}, 1),  # [2] > [5] > [4] > [3] > [1] > [0]
    ("prose", 1, IDEAL, "reasked", {"reask_calls": 1}, 2),  # prose once, then the ranking
    ("partial", 2, IDEAL, "reasked", {"reask_calls": 2}, 3),
    ("think_open", 1, IDEAL, "reasked", {"reask_calls": 1}, 2),
    # always prose: 1 + 2 re-asks, then the input order
    ("prose", None, [0, 1, 2, 3], "fallback", {"reask_calls": 2, "fallback_ids": 4}, 3),
    # always [2] > [4]: completed with the missing 1 and 3 in input order
    ("partial", None, [1, 3, 0, 2], "fallback", {"reask_calls": 2, "fallback_ids": 2}, 3),
])
def test_answer_styles_of_real_models(style, times, order, outcome, extra, calls):
    with LLMServer(JUDGE, answer_style=style, style_times=times) as srv:
        ranker = LLMListwise(_client(srv), reasks=2)
        assert ranker.rank(QUERY, PASSAGES, tag="q1") == order
        assert srv.counts["chat"] == calls
    expected = {"clean": 0, "repaired": 0, "reasked": 0, "fallback": 0, "reask_calls": 0, "fallback_ids": 0,
                outcome: 1, **extra}
    expected.update(rankings=1, fallback_rate=1.0 if outcome == "fallback" else 0.0)
    answers = ranker.answers()
    assert answers["per_query"] == {"q1": expected}
    assert {k: v for k, v in answers.items() if k != "per_query"} == expected


def test_passages_are_cut_by_tokens_before_the_prompt():
    # the server counts prompt tokens as words: cut to 2 tokens, the passages lose 2 + 4 + 3 + 4 words ("Bananas"
    # is Banana|s, then "Rome hosts", "Paris has", "The Coloss"); the judge still knows a cut passage by its prefix
    used = []
    for cut in (None, 2):
        with LLMServer(JUDGE) as srv:
            client = _client(srv)
            assert LLMListwise(client, max_tokens_per_passage=cut).rank(QUERY, PASSAGES) == IDEAL
            used.append(client.usage.total()["prompt_tokens"])
    assert used[0] - used[1] == 13
    with pytest.raises(OptionsError, match="reranker tournament: max_tokens_per_passage must be greater than or equal "
                                           "to 0, got -1"):
        Tournament(client=object(), max_tokens_per_passage=-1)
    rr = get_reranker("tournament:max_tokens_per_passage=300", llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    assert rr.max_tokens_per_passage == 300 and rr.max_chars is None


DOCS = {f"d{i}": text for i, text in enumerate(PASSAGES + ["Lyon is in France.", "Ancient Rome had an amphitheatre.",
                                                           "Tea is a drink.", "The Colosseum seated 50,000."])}


def _tournament_over(srv, qids=("q1", "q2")):
    rr = Tournament(client=_client(srv), batch_size=4, promote=2, max_final=4, reasks=1, concurrency=1)
    queries = {q: Query(q, QUERY) for q in qids}
    run = rr.rerank_pools(queries, {q: list(DOCS) for q in qids}, {d: Document(d, t) for d, t in DOCS.items()})
    return rr, run


def test_tournament_counts_outcomes_per_query_and_the_gap_report_warns():
    judge = {QUERY: {**JUDGE[QUERY], "Ancient Rome had an amphitheatre.": 1, "The Colosseum seated 50,000.": 2}}
    with LLMServer(judge) as srv:
        _, clean = _tournament_over(srv)
    with LLMServer(judge, answer_style="duplicates") as srv:
        rr, repaired = _tournament_over(srv)
        # 8 documents, B=4, P=2: two batches, then a final of 4: 3 rankings per query, one call each
        assert srv.counts["chat"] == 6 and srv.counts["style:duplicates"] == 6
    assert repaired.to_dict() == clean.to_dict()  # repeats dropped: the judge's order, as without them
    assert rr.answers["per_query"]["q2"]["repaired"] == 3 and rr.answers["repaired"] == 6
    assert rr.answers["fallback"] == 0
    with LLMServer(judge, answer_style="prose") as srv:
        rr, fallback = _tournament_over(srv, ("q1",))
        assert srv.counts["chat"] == 6  # 3 rankings x (1 + 1 re-ask)
    assert rr.answers["fallback"] == 3 and rr.answers["fallback_rate"] == 1.0 and rr.answers["fallback_ids"] == 12
    # no ranking from the model: each batch keeps its shuffled order, so the "verifier" is the shuffle
    assert sorted(d for d, _ in fallback["q1"]) == sorted(DOCS)

    report = _gap_report(rr.answers)
    text = str(report)
    assert "verifier answers: 3 rankings: 0 clean, 0 repaired, 0 re-asked, 3 completed by fallback (100%)" in text
    assert "WARNING: most verifier answers did not rank their passages" in text
    data = report.model_dump(mode="json")["verifier_answers"]
    assert data["fallback"] == 3 and data["rankings"] == 3 and data["mostly_fallbacks"] is True
    assert "per_query" not in data and report.model_dump(mode="json")["meta"]["answers"]["per_query"]["q1"]["fallback"] == 3
    half = dict(rr.answers, clean=3, fallback=3, rankings=6, fallback_rate=0.5)
    quiet = _gap_report(half)
    assert "WARNING" not in str(quiet) and quiet.model_dump(mode="json")["verifier_answers"]["mostly_fallbacks"] is False
    assert _gap_report(None).model_dump(mode="json")["verifier_answers"] is None


def _gap_report(answers):
    """A gap report whose verifier gave these answer counts (None: a verifier without them)."""
    return GapReport(task="t", measure="nDCG@10", retrievers={"bm25": 0.5},
                     best_retriever={"name": "bm25", "value": 0.5}, verifier_standard={"value": 0.4},
                     verifier_gold_infused={"value": 0.6}, gap=0.1, gap_standard=-0.1, pool_recall=1.0, pool_depth=8,
                     n_queries=1, llm_calls=6, pool_scaling=[], other_qrels={},
                     verifier_answers=VerifierAnswers.of(answers),
                     meta={"seed": 0, "retrievers": ["bm25"], "answers": answers})

@pytest.mark.slow
def test_gap_and_run_commands_show_the_fallbacks_of_a_prose_model(tmp_path, capsys, monkeypatch):
    from gapbench.cli import main
    from gapbench.formats import write_beir_folder
    from gapbench.task import get_task
    from gapbench.types import Qrels, Queries, TaskData

    task = "impliret/multispeaker/wknow"
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # the watch on a model's first answers would stop gap on this prose model (test_llm_competence pins that); off
    # here, so the fallback accounting of a run that goes on is what is checked
    monkeypatch.setenv("GAPBENCH_LLM_WATCH_WINDOW", "0")
    data = get_task(task).load()
    # the run command on the whole corpus and 3 of its queries: a reranking per query
    cut = tmp_path / "cut"
    qids = data.queries.ids()[:3]
    write_beir_folder(TaskData(data.corpus, Queries(data.queries[q] for q in qids),
                               Qrels({q: dict(data.qrels[q]) for q in qids})), cut)
    llm = ["--llm-base-url", None, "--llm-model", "judge"]
    with LLMServer({q: dict(data.qrels[q]) for q in data.qrels},
                   queries={q: data.queries[q].text for q in data.queries},
                   corpus={d: data.corpus[d].text for d in data.corpus}, answer_style="prose") as srv:
        llm[1] = srv.base_url
        assert main(["gap", task, "--retrievers", "bm25", "--max-queries", "2", "--depth", "6", "--pool-sizes", "",
                     "--verifier", "tournament:reasks=1", *llm]) == 0
        text = capsys.readouterr().out
        assert main(["run", str(cut), "-r", "bm25", "--reranker", "tournament:depth=6,reasks=0", "-o",
                     str(tmp_path / "run"), *llm]) == 0
    # 2 queries x (standard + gold-infused pool) x one final batch of at most 6 (+ gold): 4 rankings, all prose
    assert "verifier answers: 4 rankings: 0 clean, 0 repaired, 0 re-asked, 4 completed by fallback (100%)" in text
    assert "WARNING: most verifier answers did not rank their passages" in text
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    answers = manifest["reranker"]["answers"]
    assert answers["fallback"] == answers["rankings"] == len(qids) and answers["reask_calls"] == 0
    assert manifest["reranker"]["config"]["passage_cut"]["max_tokens_per_passage"] == 500
