"""The LLM tournament as a verifier, and the retrieval-verification gap, against the local OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gapbench
from gapbench.adapters.tournament import Tournament, tournament_calls
from gapbench.cli import main
from gapbench.errors import ConfigError, GapbenchError
from gapbench.analyses.gap import GapOptions, infuse_gold, measure_gap_with, pool_recall, restrict, union_pool
from gapbench.llm.client import LLMClient, LLMConfig
from gapbench.retrieval import get_retriever, search_with
from gapbench.task import get_task
from gapbench.types import Qrels, Queries, Run

from llm_server import LLMServer

TASK = "impliret/multispeaker/wknow"


@pytest.fixture(scope="module")
def wknow():
    data = get_task(TASK).load()
    qids = data.qrels.positive_queries()[:24]
    bm25 = get_retriever("bm25")
    bm25.index(data.corpus)
    run = search_with(bm25, Queries(data.queries[q] for q in qids), 200, None)
    return data, qids, run


def judge_server(data, **kw):
    return LLMServer(
        qrels={q: dict(data.qrels[q]) for q in data.qrels},
        queries={q: data.queries[q].text for q in data.queries},
        corpus={d: data.corpus[d].text for d in data.corpus},
        **kw,
    )


def client_for(srv, tmp_path, name="cache.sqlite", **kw):
    return LLMClient(LLMConfig(base_url=srv.base_url, model="judge", retry_wait=0.01, retry_wait_max=0.05, **kw),
                     cache=tmp_path / name, api_key="sk-test")


def test_pool_helpers():
    a = Run({"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}, "a")
    b = Run({"q": {"d3": 3.0, "d4": 2.0}}, "b")
    assert union_pool([a, b], "q", 2) == ["d1", "d3", "d2", "d4"]
    assert set(infuse_gold(["d1", "d2"], ["d9", "d2"], "q", 0)) == {"d1", "d2", "d9"}
    assert infuse_gold(["d1", "d2"], ["d9"], "q", 0) == infuse_gold(["d1", "d2"], ["d9"], "q", 0)
    assert pool_recall({"q": ["d1", "d5"]}, Qrels({"q": {"d5": 1, "d6": 2, "d7": 0}}), ["q"]) == 0.5
    assert [d for d, _ in restrict(b, {"q": ["d1", "d4", "d3"]})["q"]] == ["d3", "d4", "d1"]


def test_noise_free_verifier_bounds_and_call_counts(wknow, tmp_path):
    data, qids, run = wknow
    with judge_server(data) as srv:
        client = client_for(srv, tmp_path)
        verifier = Tournament(client=client, concurrency=4)
        report = measure_gap_with(TASK, data, [run], verifier.rerank_pools, GapOptions(depth=50, pool_sizes=()),
                                  query_ids=qids, calls=lambda: verifier.llm_calls)
    # gold-infused pools with a perfect judge: the one gold document tops every ranking
    assert report.verifier_gold_infused.value == 1.0
    # standard pools: the perfect judge finds the gold exactly when the pool holds it
    assert report.verifier_standard.value == pytest.approx(report.pool_recall)
    assert report.best_retriever.name == "bm25" and report.gap == pytest.approx(1.0 - report.best_retriever.value)
    # every call is accounted for: the analytic count per query, for the standard and the infused pool
    pools = {q: union_pool([run], q, 50) for q in qids}
    expected = sum(tournament_calls(len(pools[q])) + tournament_calls(len(pools[q]) + (0 if q in pools[q] else 1))
                   for q in qids)
    usage = client.usage.record().model_dump()
    for q in qids:
        infused = len(pools[q]) + (0 if q in pools[q] else 1)
        assert usage["per_query"][q]["requests"] == tournament_calls(len(pools[q])) + tournament_calls(infused)
    assert usage["requests"] == expected == verifier.llm_requests
    # a standard pool that already holds the gold is the infused pool: its rankings come from the cache
    assert report.llm_calls == srv.counts["chat"] == usage["calls"] == expected - usage["cache_hits"]
    assert usage["cache_hits"] == sum(tournament_calls(len(pools[q])) for q in qids if q in pools[q])


def test_noise_lowers_the_verifier(wknow, tmp_path):
    data, qids, run = wknow
    with judge_server(data, noise=0.5, seed=3) as srv:
        verifier = Tournament(client=client_for(srv, tmp_path), concurrency=4)
        report = measure_gap_with(TASK, data, [run], verifier.rerank_pools, GapOptions(depth=50, pool_sizes=()),
                                  query_ids=qids)
    assert 0.3 < report.verifier_gold_infused.value < 1.0
    assert report.verifier_standard.value <= report.verifier_gold_infused.value


def rankings(data, qids, run, srv, client):
    verifier = Tournament(client=client, concurrency=4)
    pools = {q: union_pool([run], q, 60) for q in qids}
    return verifier.rerank_pools(Queries(data.queries[q] for q in qids), pools, data.corpus)


def test_http_faults_do_not_change_rankings_and_reruns_are_free(wknow, tmp_path):
    data, qids, run = wknow
    with judge_server(data, noise=0.2, seed=1) as srv:
        clean = rankings(data, qids, run, srv, client_for(srv, tmp_path, "clean.sqlite"))
    faults = {"429": 0.1, "500": 0.05, "slow": 0.05}  # 20% of attempts fail; retries with backoff recover them
    with judge_server(data, noise=0.2, seed=1, fault_seed=7, faults=faults, slow_delay=0.3) as srv:
        client = client_for(srv, tmp_path, "faulty.sqlite", timeout=0.2)
        faulty = rankings(data, qids, run, srv, client)
        assert srv.counts["429"] > 0 and srv.counts["500"] > 0 and srv.counts["slow"] > 0
        assert client.usage.total()["retries"] >= srv.counts["429"] + srv.counts["500"]
        assert faulty.to_dict() == clean.to_dict()
        before = srv.counts["chat"]
        again = rankings(data, qids, run, srv, client_for(srv, tmp_path, "faulty.sqlite", timeout=0.2))
        assert srv.counts["chat"] == before  # every answer came from the cache: a re-run makes zero calls
        assert again.to_dict() == clean.to_dict()


def test_truncated_and_malformed_answers_are_asked_again(wknow, tmp_path):
    data, qids, run = wknow
    with judge_server(data) as srv:
        clean = rankings(data, qids, run, srv, client_for(srv, tmp_path, "clean.sqlite"))
    faults = {"truncated": 0.1, "malformed": 0.1}
    with judge_server(data, fault_seed=5, faults=faults) as srv:
        verifier = Tournament(client=client_for(srv, tmp_path, "faulty.sqlite"), concurrency=4)
        pools = {q: union_pool([run], q, 60) for q in qids}
        faulty = verifier.rerank_pools(Queries(data.queries[q] for q in qids), pools, data.corpus)
        assert srv.counts["truncated"] > 0 and srv.counts["malformed"] > 0
        # every bad answer is followed by a re-ask, except a last attempt that is repaired instead
        assert verifier.ranker.reasked + verifier.ranker.repaired == srv.counts["truncated"] + srv.counts["malformed"]
    # a re-ask differs from the first request (a system line says what was wrong), so it meets a fresh draw; with a
    # noise-free judge its answer is the ideal order, and the final rankings equal the fault-free ones
    assert verifier.ranker.repaired == 0
    assert faulty.to_dict() == clean.to_dict()
    for q in qids:  # nothing lost: every pool document ranked exactly once
        assert sorted(d for d, _ in faulty[q]) == sorted(pools[q])


@pytest.mark.slow
@pytest.mark.model
def test_gap_cli_offline(tmp_path, capsys, monkeypatch, wknow_dense_cached):
    # dense reads the task's passages' vectors from the session's cache (tests/fx_models.py), encoded once for all tests
    data = get_task(TASK).load()
    with judge_server(data) as srv:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
        out_dir = tmp_path / "gap"
        code = main(["gap", TASK, "--retrievers", "bm25,dense", "--llm-base-url", srv.base_url, "--llm-model", "judge",
                     "--max-queries", "12", "--depth", "20", "--pool-sizes", "20,50", "--json", "-o", str(out_dir)])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"task", "measure", "best_retriever", "verifier_standard", "verifier_gold_infused", "gap",
                        "pool_recall", "llm_calls", "pool_scaling"}
    assert out["task"] == TASK and out["measure"] == "nDCG@10" and out["verifier_gold_infused"]["value"] == 1.0
    assert out["best_retriever"]["name"] in ("bm25", "dense") and out["llm_calls"] > 0
    assert [row["pool_size"] for row in out["pool_scaling"]] == [20, 50]
    # Figure 3's protocol: Recall@10, each retriever on a pool built from the other one's ranking
    assert all(row["measure"] == "R@10" and row["retriever_pools"] == {"bm25": "others", "dense": "others"}
               for row in out["pool_scaling"])
    assert all(row["verifier_gold_infused"] == 1.0 for row in out["pool_scaling"])
    assert (out_dir / "gap.json").exists() and (out_dir / "pool_scaling.png").stat().st_size > 5000
    assert "sk-test-secret" not in (out_dir / "gap.json").read_text()


def test_measure_aliases_are_read_under_their_canonical_name(wknow, tmp_path):
    """NDCG@10 is stored as nDCG@10 and MRR@10 as RR@10; the gap reads them under those names (was a KeyError)."""
    data, qids, run = wknow
    with judge_server(data) as srv:
        verifier = Tournament(client=client_for(srv, tmp_path), concurrency=4)
        alias = measure_gap_with(TASK, data, [run], verifier.rerank_pools,
                                 GapOptions(measure="MRR@10", depth=20, pool_sizes=()), query_ids=qids[:6])
        canonical = measure_gap_with(TASK, data, [run], verifier.rerank_pools,
                                     GapOptions(measure="RR@10", depth=20, pool_sizes=()), query_ids=qids[:6])
    assert alias.measure == "RR@10"
    assert alias.retrievers == canonical.retrievers
    assert alias.verifier_standard == canonical.verifier_standard
    assert alias.verifier_standard.value == pytest.approx(alias.pool_recall)


# -- GapOptions: one settings object, checked when made; gapbench.gap and measure_gap_with take it, the CLI builds it

BRIGHT = f"bright/biology:data_dir={Path(__file__).parent / 'fixtures' / 'bright'}"


class OracleVerifier:
    """Ranks each pool by its judgements (gold first, then by doc id): a noise-free verifier without an LLM."""

    name = "oracle"

    def __init__(self, qrels):
        self.qrels = qrels

    def rerank(self, queries, run, corpus):
        return run

    def rerank_pools(self, queries, pools, corpus, seed=None):
        return Run({q: {d: self.qrels.get(q, {}).get(d, 0) + 1.0 / (2 + i) for i, d in enumerate(sorted(pool))}
                    for q, pool in pools.items()}, "oracle")


def _tiny_gap_data():
    from gapbench.types import Corpus, Document, Query, TaskData

    corpus = Corpus(Document(d, f"text of {d}") for d in ("d1", "d2", "d3", "d4"))
    queries = Queries([Query("q1", "first"), Query("q2", "second")])
    qrels = Qrels({"q1": {"d2": 1}, "q2": {"d4": 1}})
    run = Run({"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d1": 2.0, "d3": 1.0}}, "bm25")
    return TaskData(corpus, queries, qrels), run


def test_measure_gap_with_by_hand():
    data, run = _tiny_gap_data()
    oracle = OracleVerifier({q: dict(data.qrels[q]) for q in data.qrels})
    report = measure_gap_with("tiny", data, [run], oracle.rerank_pools,
                              GapOptions(measure="RR@10", depth=2, pool_sizes=[3]))
    # q1's gold d2 is 2nd for bm25 (RR 1/2), q2's d4 is not retrieved (0); pools of depth 2: q1 {d1, d2}, q2 {d1, d3}
    assert report.retrievers == {"bm25": 0.25} and report.pool_recall == 0.5
    assert (report.verifier_standard.value, report.verifier_gold_infused.value) == (0.5, 1.0)
    assert (report.best_retriever.name, report.best_retriever.value, report.gap, report.gap_standard) == \
        ("bm25", 0.25, 0.75, 0.25)
    # budget 3: q1 {d1, d2, d3}, q2 {d1, d3}; the lone retriever is scored on its own pool, d4 infused for q2
    row = report.pool_scaling[0]
    assert (row.pool_size, row.measure, row.pool_recall) == (3, "R@10", 0.5)
    assert (row.verifier_standard, row.verifier_gold_infused) == (0.5, 1.0)
    assert row.retrievers == {"bm25": 0.5} and row.retrievers_gold_infused == {"bm25": 1.0}
    assert row.retriever_pools == {"bm25": "own"} and row.retriever_pool_recall == {"bm25": 0.5}
    # no verifier seeds: no spread, and the file leaves those keys out as it always did
    assert row.verifier_standard_spread is None
    assert "verifier_standard_spread" not in report.model_dump(mode="json")["pool_scaling"][0]
    assert report.model_dump(mode="json")["meta"] == {"seed": 0, "retrievers": ["bm25"], "pool_scaling_measure": "R@10"}
    # the qrels variants of the options score the same rankings: here one that judges d1 relevant for q1
    variant = Qrels({"q1": {"d1": 1}})
    other = measure_gap_with("tiny", data, [run], oracle.rerank_pools,
                             GapOptions(measure="RR@10", depth=2, pool_sizes=(), qrels_variants={"P": variant}))
    # bm25 has d1 first for q1 (RR 1); the oracle ranks by the gold qrels, d2 before d1: RR 1/2 on the one judged query
    assert other.other_qrels["P"].best_retriever.value == 1.0
    assert (other.other_qrels["P"].verifier_standard, other.other_qrels["P"].verifier_gold_infused) == (0.5, 0.5)
    # measure_gap_with with no measure uses nDCG@10
    default = measure_gap_with("tiny", data, [run], oracle.rerank_pools, GapOptions(depth=2, pool_sizes=()))
    assert default.measure == "nDCG@10"


def test_verifier_seeds_give_the_spread():
    data, run = _tiny_gap_data()
    qrels = {q: dict(data.qrels[q]) for q in data.qrels}

    def rerank(queries, pools, corpus, seed=None):  # seed 0: the oracle's order; seed 1: the reverse
        ranked = OracleVerifier(qrels).rerank_pools(queries, pools, corpus)
        return ranked if seed == 0 else Run({q: {d: -s for d, s in ranked[q]} for q in ranked}, "reverse")

    report = measure_gap_with("tiny", data, [run], rerank, GapOptions(measure="RR@10", depth=2, pool_sizes=()),
                              verifier_seeds=[0, 1])
    # standard pools: seed 0 finds q1's gold first (RR 1, q2 0), the reverse puts it 2nd of 2 (1/2): 0.5 and 0.25
    spread = report.meta.verifier_seeds.standard
    assert (spread.seeds, spread.values, spread.mean, spread.min, spread.max) == ([0, 1], [0.5, 0.25], 0.375, 0.25, 0.5)
    assert spread.std == pytest.approx(0.1767766952966369)  # sample standard deviation of (0.5, 0.25): 0.25 / sqrt(2)
    assert report.verifier_standard.value == 0.375
    with pytest.raises(ConfigError, match=r"verifier seeds \[3, 3\] repeat a seed"):
        measure_gap_with("tiny", data, [run], rerank, GapOptions(depth=2, pool_sizes=()), verifier_seeds=[3, 3])


def test_gap_options_are_checked_when_made():
    from gapbench.errors import OptionsError

    assert GapOptions(pool_sizes=[100, 50]).pool_sizes == (100, 50)
    cases = [
        # depth, pool sizes and seed in gapbench.contract's words (Depth, Seed), as every options class says them
        (dict(depth=0), "GapOptions: depth must be greater than or equal to 1, got 0."),
        (dict(depth=10**6), "GapOptions: depth must be at most 100,000, got 1,000,000."),
        (dict(pool_sizes=(10, 0, -2)), "GapOptions: pool_sizes.1 must be greater than or equal to 1, got 0; "
                                       "pool_sizes.2 must be greater than or equal to 1, got -2."),
        (dict(max_queries=0), "GapOptions: max_queries must be at least 1, got 0; leave it out to use every query."),
        (dict(seed=-1), "GapOptions: seed must be greater than or equal to 0, got -1."),
        (dict(measure=" "), "GapOptions: measure is empty; give a value, or leave the option out."),
        (dict(llm_model=""), "GapOptions: llm_model is empty; give a value, or leave the option out."),
        (dict(verifier=""), "GapOptions: verifier is empty; give a value, or leave the option out."),
        (dict(verifier=object()), "GapOptions: verifier must be a reranker spec such as 'tournament' or an object "
                                  "with rerank_pools(queries, pools, corpus), got object."),
        (dict(depth=0, seed=-1), "GapOptions: depth must be greater than or equal to 1, got 0; seed must be greater "
                                 "than or equal to 0, got -1."),
    ]
    for given, message in cases:
        with pytest.raises(OptionsError) as caught:
            GapOptions(**given)
        assert str(caught.value) == message
    with pytest.raises(OptionsError, match=r"^GapOptions: measure must be a measure gapbench reads; measure 'nDCG@x'"):
        GapOptions(measure="nDCG@x")
    with pytest.raises(OptionsError, match=r"^GapOptions: scaling_measure must be a measure gapbench reads; .*R@ten"):
        GapOptions(scaling_measure="R@ten")
    with pytest.raises(OptionsError, match=r"qrels_variants\.P must be an instance of Qrels"):
        GapOptions(qrels_variants={"P": {"q1": {"d1": 1}}})
    # a copy with changes is checked as a new object is
    with pytest.raises(OptionsError, match=r"^GapOptions: depth must be greater than or equal to 1, got -1\.$"):
        GapOptions().replace(depth=-1)
    assert GapOptions(verifier=OracleVerifier({})).verifier.name == "oracle"


def test_gap_runs_the_retrievers_and_the_verifier_object():
    qrels = get_task(BRIGHT).load().qrels
    oracle = OracleVerifier({q: dict(qrels[q]) for q in qrels})
    options = GapOptions(verifier=oracle, depth=5, pool_sizes=(3, 8), max_queries=3, seed=1)
    report = gapbench.gap(BRIGHT, ["bm25"], options)
    assert report == gapbench.gap(BRIGHT, "bm25", options)  # one spec or a list of specs
    assert report.n_queries == 3 and report.pool_depth == 5 and report.measure == "nDCG@10"
    assert report.verifier_gold_infused.value == 1.0  # the oracle puts every infused gold document first
    assert [row.pool_size for row in report.pool_scaling] == [3, 8]
    assert report.meta.verifier.name == "oracle" and report.meta.verifier.task_defaults == {}
    assert [r.spec for r in report.meta.retrievers] == ["bm25"] and report.verifier_answers is None
    assert report.retriever_llm is None and report.llm_calls == 0
    # a verifier object whose answer counts gap.json cannot hold is named
    odd = OracleVerifier(oracle.qrels)
    odd.answers = {"clean": 1}
    with pytest.raises(GapbenchError, match=r"^the verifier 'oracle' has an 'answers' attribute that is not answer "):
        gapbench.gap(BRIGHT, "bm25", options.replace(verifier=odd))


def test_cli_builds_one_gap_options_object(monkeypatch, capsys):
    import gapbench.analyses.gap as mod

    seen = []

    def fake(task, retrievers, options):
        seen.append((task, retrievers, options))
        return _report(task=task, measure="R@10")

    monkeypatch.setattr(mod, "gap", fake)
    assert main(["gap", "toy", "--retrievers", "bm25, dense", "--verifier", "tournament:batch_size=3", "--depth", "20",
                 "--pool-sizes", "20,50", "--measure", "R@10", "--scaling-measure", "P@5", "--max-queries", "5",
                 "--seed", "3", "--llm-model", "m", "--json"]) == 0
    assert seen == [("toy", ["bm25", "dense"], GapOptions(
        verifier="tournament:batch_size=3", depth=20, pool_sizes=(20, 50), measure="R@10", scaling_measure="P@5",
        max_queries=5, seed=3, llm_model="m"))]
    printed = json.loads(capsys.readouterr().out)
    assert printed == _report(task="toy", measure="R@10").model_dump(mode="json") and printed["gap"] == 0.5
    assert main(["gap", "toy"]) == 0  # the CLI defaults are GapOptions' own
    assert seen[-1][2] == GapOptions()


def _report(**changes):
    from gapbench.analyses.gap import GapReport

    fields = dict(task="t", measure="nDCG@10", retrievers={"bm25": 0.5}, best_retriever={"name": "bm25", "value": 0.5},
                  verifier_standard={"value": 0.5}, verifier_gold_infused={"value": 1.0}, gap=0.5, gap_standard=0.0,
                  pool_recall=0.5, pool_depth=20, n_queries=2, llm_calls=0, verifier_answers=None, pool_scaling=[],
                  other_qrels={}, meta={"seed": 0, "retrievers": ["bm25"]})
    return GapReport(**{**fields, **changes})


def test_the_printed_summary_is_aligned_tables():
    scaling = [{"pool_size": 10, "measure": "R@10", "verifier_standard": 0.5, "verifier_gold_infused": 1.0,
                "pool_recall": 0.5, "retrievers": {"bm25": 0.25, "dense": 0.75},
                "retrievers_gold_infused": {"bm25": 0.5, "dense": 0.75}},
               {"pool_size": 200, "measure": "R@10", "verifier_standard": 0.25, "verifier_gold_infused": 0.75,
                "pool_recall": 0.5, "retrievers": {"bm25": 0.5, "dense": 0.5},
                "retrievers_gold_infused": {"bm25": 0.5, "dense": 0.5}}]
    r = _report(retrievers={"bm25": 0.3, "a-long-retriever-name": 0.25}, best_retriever={"name": "bm25", "value": 0.3},
                verifier_standard={"value": 0.2}, verifier_gold_infused={"value": 0.45}, gap=0.15, gap_standard=-0.1,
                n_queries=4, llm_calls=7, pool_scaling=scaling)
    assert str(r).splitlines() == [
        "t: retrieval-verification gap on nDCG@10 (4 queries, pool depth 20, pool recall 0.500, 7 LLM calls)",
        "                                 nDCG@10   - best",
        "-------------------------------  -------  -------",
        "retriever bm25                    0.3000  +0.0000",
        "retriever a-long-retriever-name   0.2500  -0.0500",
        "verifier, standard pool           0.2000  -0.1000",
        "verifier, gold-infused pool       0.4500  +0.1500",
        "gap (gold-infused verifier - best retriever): +0.1500",
        "pool scaling (R@10):",
        "pool size  verifier standard  verifier gold-infused   bm25  dense",
        "---------  -----------------  ---------------------  -----  -----",
        "       10              0.500                  1.000  0.250  0.750",
        "      200              0.250                  0.750  0.500  0.500",
    ]


def test_gap_json_of_gapbench_0_1_loads_and_writes_back_the_same():
    from gapbench.analyses.gap import GapReport
    from gapbench.schemas import load_file

    path = Path(__file__).parent / "fixtures" / "outputs_v0_1" / "gap.json"
    report = load_file(path)
    assert isinstance(report, GapReport) and report.meta.answers.per_query["82"].clean == 16
    assert report.verifier_answers.mostly_fallbacks is False and report.meta.verifier.name == "tournament"
    # the file as read, with the one key added since (null: no retriever called an LLM)
    assert report.model_dump(mode="json") == {**json.loads(path.read_text()), "retriever_llm": None}
    assert GapReport.model_validate(report.model_dump(mode="json")) == report


def test_gap_json_carries_the_llm_work_of_rewrite_retrievers(tmp_path, monkeypatch):
    """gap.json's retriever_llm: calls, tokens (as the server counted them) and fallbacks of a rewrite: retriever,
    beside llm_calls (the verifier's); none for bm25. One planted rewrite of stop words finds nothing (empty_search),
    one empty rewrite (empty_rewrite)."""
    from gapbench.pipeline import prepare
    from gapbench.schemas import validate_analysis

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))  # an empty LLM cache: every answer is a call
    qids = prepare(TASK, max_queries=4, seed=0, judged=1).query_ids
    data = get_task(TASK).load()
    text = {q: data.queries[q].text for q in qids}
    with judge_server(data, rewrites={text[qids[0]]: "(no)", text[qids[1]]: ""}) as srv:
        report = gapbench.gap(TASK, ["bm25", "rewrite:bm25"], GapOptions(
            max_queries=4, depth=10, pool_sizes=(), seed=0, llm_base_url=srv.base_url, llm_model="judge-gap-usage",
            output=tmp_path / "gap"))
        rewrites = [p for p in srv.prompts if p.rstrip().endswith("Rewritten query:")]
        chats = srv.counts["chat"]
    answers = {0: 1, 1: 0}  # "(no)" is one word, "" none; the others echo their query
    out = json.loads((tmp_path / "gap" / "gap.json").read_text())
    validate_analysis("gap", out, tmp_path / "gap" / "gap.json")
    usage = out["retriever_llm"]["rewrite:bm25"]
    assert set(out["retriever_llm"]) == {"rewrite:bm25"} and len(rewrites) == 4
    assert (usage["requests"], usage["calls"], usage["cache_hits"], usage["failures"]) == (4, 4, 0, 0)
    assert usage["prompt_tokens"] == sum(len(p.split()) for p in rewrites)
    assert usage["completion_tokens"] == sum(answers.get(i, len(text[q].split())) for i, q in enumerate(qids))
    assert usage["fallbacks"] == {"empty_rewrite": 1, "empty_search": 1, "unparsed_selection": 0, "unknown_ids": 0}
    assert usage["model"] == "judge-gap-usage"
    assert out["llm_calls"] == chats - 4  # the verifier's own calls
    line = next(x for x in str(report).splitlines() if x.startswith("retriever rewrite:bm25: "))
    assert line == (f"retriever rewrite:bm25: 4 LLM calls, 0 answers from the cache, "
                    f"{usage['prompt_tokens'] + usage['completion_tokens']:,} tokens ({usage['prompt_tokens']} in, "
                    f"{usage['completion_tokens']} out), fallbacks: empty_rewrite 1, empty_search 1")
