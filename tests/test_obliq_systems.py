"""OBLIQ-Bench's systems as published: per-task tournament defaults, temperature, repeated tournaments over seeds,
Tournament+Soln, and Figure 3's pool scaling (each retriever on a pool without its own top-k), against the local test
server's qrels judge."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

import gapbench.tasks.obliq as obliq
from gapbench.adapters.tournament import Tournament, parse_seeds
from gapbench.errors import ConfigError, DataFormatError
from gapbench.analyses.gap import GapOptions, budget_pool, gap, measure_gap_with, with_task_defaults
from gapbench.llm.client import LLMClient, LLMConfig, command_settings
from gapbench.types import Corpus, Document, Qrels, Queries, Query, Run, TaskData

from llm_server import LLMServer

FIXTURES = Path(__file__).parent / "fixtures" / "obliq"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.delenv(obliq.ENV_VAR, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def judge_for(data: TaskData, **kw) -> LLMServer:
    return LLMServer(qrels={q: dict(data.qrels[q]) for q in data.qrels},
                     queries={q: data.queries[q].text for q in data.queries},
                     corpus={d: data.corpus[d].text for d in data.corpus}, **kw)


def client_for(srv, tmp_path, name="cache.sqlite") -> LLMClient:
    return LLMClient(LLMConfig(base_url=srv.base_url, model="judge", retry_wait=0.01, retry_wait_max=0.05),
                     cache=tmp_path / name, api_key="sk-test")


# ------------------------------------------------------------------------------------------- per-task defaults

def test_task_defaults_fill_what_the_spec_leaves_out():
    math = obliq.make_task("math").reranker_defaults
    assert with_task_defaults("tournament", math) == (
        "tournament:batch_size=6,promote=2,max_final=16", {"batch_size": 6, "promote": 2, "max_final": 16})
    # the user's options win; a value holding commas stays whole
    assert with_task_defaults("tournament:batch_size=3,seeds=0,4", math) == (
        "tournament:promote=2,max_final=16,batch_size=3,seeds=0,4", {"promote": 2, "max_final": 16})
    assert with_task_defaults("sliding-window", math) == ("sliding-window", {})
    assert with_task_defaults("tournament", {}) == ("tournament", {})


def test_math_defaults_reach_the_verifier_and_the_user_overrides(tmp_path):
    task = f"obliq/math:data_dir={FIXTURES}"
    data = obliq.load("math", data_dir=str(FIXTURES))
    with judge_for(data) as srv:
        options = GapOptions(depth=5, pool_sizes=(), llm_base_url=srv.base_url, llm_model="judge")
        report = gap(task, ["bm25"], options)
        own = gap(task, ["bm25"], options.replace(verifier="tournament:batch_size=3"))
    config = report.meta.verifier.config
    assert (config["batch_size"], config["promote"], config["max_final"]) == (6, 2, 16)
    assert report.meta.verifier.task_defaults == {"batch_size": 6, "promote": 2, "max_final": 16}
    config = own.meta.verifier.config
    assert (config["batch_size"], config["promote"], config["max_final"]) == (3, 2, 16)
    assert own.meta.verifier.task_defaults == {"promote": 2, "max_final": 16}
    # a perfect judge puts both gold problems of putnam-1980-a3 and the one of qual-berkeley-f07-p4 on top
    assert report.verifier_gold_infused.value == 1.0


def test_temperature_is_sent_and_the_command_line_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))  # a fresh answer cache: every ranking is a call
    data = _toy(8)
    pools = {"q": ["d00", "d01", "d02"]}
    with judge_for(data) as srv:
        for spec, settings, expected in (({}, {}, 0.0), ({"temperature": 1.0}, {}, 1.0),
                                         ({"temperature": 1.0}, {"temperature": 0.5}, 0.5)):
            srv.received.clear()
            with command_settings(settings):
                Tournament(llm_base_url=srv.base_url, llm_model="judge", **spec).rerank_pools(
                    data.queries, pools, data.corpus)
            assert [r["temperature"] for r in srv.received] == [expected]
        with pytest.raises(ConfigError, match="temperature=1.0 applies to the client the reranker makes"):
            Tournament(client=client_for(srv, tmp_path), temperature=1.0)


# ----------------------------------------------------------------------------------------- repeated tournaments

def test_parse_seeds():
    assert parse_seeds(3) == parse_seeds("3") == (0, 1, 2)
    assert parse_seeds("0,4,7") == parse_seeds([0, 4, 7]) == (0, 4, 7)
    assert Tournament(client=object(), seeds="5,1").tconfig.seed == 5
    for bad, said in ((0, "no times"), ("0,0", "repeats a seed"), ("a,b", "not a count"), ([-1], ">= 0"),
                      (True, "not a count")):
        with pytest.raises(ConfigError, match=said):
            parse_seeds(bad)


def _toy(n: int, gold=("d03", "d17")) -> TaskData:
    """A made-up task: one query, ``n`` documents, the ``gold`` ones relevant."""
    corpus = Corpus(Document(f"d{i:02d}", f"passage number {i} about topic {i % 5}") for i in range(n))
    return TaskData(corpus, Queries([Query("q", "which passages are relevant")]),
                    Qrels({"q": {g: 1 for g in gold}}))


def test_seeds_report_the_mean_and_spread_of_single_seed_runs(tmp_path):
    data = _toy(40)
    # a retriever that ranks both gold documents last: the verifier alone has to find them
    run = Run({"q": {f"d{i:02d}": float(100 - i) + (-200 if f"d{i:02d}" in ("d03", "d17") else 0)
                     for i in range(40)}}, "toy")
    with judge_for(data, noise=0.6, seed=2) as srv:
        client = client_for(srv, tmp_path)
        cfg = {"batch_size": 4, "promote": 2, "max_final": 4}
        rep = Tournament(client=client, seeds=3, **cfg)
        options = GapOptions(depth=40, pool_sizes=(12,))
        report = measure_gap_with("toy", data, [run], rep.rerank_pools, options, verifier_seeds=rep.seeds)
        singles = [measure_gap_with("toy", data, [run], Tournament(client=client, seed=s, **cfg).rerank_pools,
                                    options) for s in (0, 1, 2)]
    spread = report.meta.verifier_seeds.model_dump()
    assert spread["seeds"] == [0, 1, 2]
    for key, attr in (("standard", "verifier_standard"), ("gold_infused", "verifier_gold_infused")):
        values = [getattr(r, attr).value for r in singles]
        assert spread[key]["values"] == values
        assert spread[key]["mean"] == pytest.approx(statistics.fmean(values)) == getattr(report, attr).value
        assert (spread[key]["min"], spread[key]["max"]) == (min(values), max(values))
        assert spread[key]["std"] == pytest.approx(statistics.stdev(values))
    # the noisy judge meets different batches under each seed: the repetitions disagree
    assert spread["standard"]["max"] > spread["standard"]["min"]
    row = report.pool_scaling[0].model_dump()
    assert row["verifier_standard_spread"]["values"] == [r.pool_scaling[0].verifier_standard for r in singles]
    assert row["verifier_standard"] == pytest.approx(statistics.fmean(row["verifier_standard_spread"]["values"]))


def test_seeds_from_the_spec_end_to_end(tmp_path):
    data = obliq.load("math", data_dir=str(FIXTURES))
    with judge_for(data) as srv:
        report = gap(f"obliq/math:data_dir={FIXTURES}", ["bm25"], GapOptions(
            verifier="tournament:seeds=0,5", depth=5, pool_sizes=(), llm_base_url=srv.base_url, llm_model="judge"))
    assert report.meta.verifier.config["seeds"] == [0, 5]
    # a noise-free judge agrees with itself under every seed
    assert report.meta.verifier_seeds.gold_infused.values == [1.0, 1.0]
    assert report.meta.verifier_seeds.gold_infused.std == 0.0


# ----------------------------------------------------------------------------------------------- Tournament+Soln

# Made-up solutions for the hand-written math fixture, written for this test only: the dataset revision gapbench pins
# ships no solution field, so Tournament+Soln is exercised on this copy.
SOLUTIONS = {
    "putnam-1987-b1": "Substitute x -> 6 - x; the two integrals add to the length of the interval.",
    "putnam-2005-a5": "Substitute x = tan t and pair t with pi/4 - t.",
    "qual-berkeley-s03-p2": "The center is nontrivial by the class equation, so G/Z is cyclic.",
    "putnam-1980-a3": "Pair x with pi/2 - x; the integrand and its mirror add to 1.",
}
QUERY_SOLUTIONS = {"qual-berkeley-f07-p4": "Sylow counting leaves one subgroup of each order."}


@pytest.fixture
def soln_copy(tmp_path) -> Path:
    copy = tmp_path / "obliq-with-solutions"
    shutil.copytree(FIXTURES, copy)
    for name, table in (("corpus/corpus.jsonl", SOLUTIONS), ("queries+qrels/queries.jsonl", QUERY_SOLUTIONS)):
        path = copy / "analogues/math" / name
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        path.write_text("".join(json.dumps({**r, **({"solution": table[r["_id"]]} if r["_id"] in table else {})})
                                + "\n" for r in rows))
    return copy


def test_solution_view_texts(soln_copy):
    task = obliq.make_task("math", data_dir=str(soln_copy), solutions=True)
    assert task.name == "obliq/math:solutions=true"
    assert task.reranker_defaults == {"tournament": {"batch_size": 4, "promote": 2, "max_final": 16}}
    data = task.load()
    # the retrievers' corpus is the problems alone
    assert data.corpus["putnam-2005-a5"].text == "Evaluate the integral from 0 to 1 of ln(x+1) divided by x^2+1."
    corpus, queries = task.verifier_view(data)
    assert corpus["putnam-2005-a5"].text == (
        "Evaluate the integral from 0 to 1 of ln(x+1) divided by x^2+1.\n"
        "Solution: Substitute x = tan t and pair t with pi/4 - t.")
    assert corpus["monthly-11145"].text == data.corpus["monthly-11145"].text  # no solution: the problem alone
    # a query's own solution, else the one of the corpus record with its id
    assert queries["qual-berkeley-f07-p4"].text.endswith("\nSolution: Sylow counting leaves one subgroup of each order.")
    assert queries["putnam-1980-a3"].text.endswith(f"\nSolution: {SOLUTIONS['putnam-1980-a3']}")
    assert set(corpus) == set(data.corpus) and set(queries) == set(data.queries)


def test_solutions_needed(tmp_path):
    task = obliq.make_task("math", data_dir=str(FIXTURES), solutions=True)
    with pytest.raises(DataFormatError, match=r"corpus.jsonl.*solutions=true needs a 'solution' field"):
        task.verifier_view(task.load())
    bad = tmp_path / "bad"
    shutil.copytree(FIXTURES, bad)
    path = bad / "analogues/math/corpus/corpus.jsonl"
    path.write_text(path.read_text().replace('"text": "Evaluate the integral from 0 to 1',
                                             '"solution": 7, "text": "Evaluate the integral from 0 to 1', 1))
    with pytest.raises(DataFormatError, match=r"corpus.jsonl.*line 2.*'solution' holds int"):
        obliq.make_task("math", data_dir=str(bad), solutions=True).verifier_view(task.load())


def test_tournament_with_solutions_reads_them(soln_copy):
    """A judge that knows the queries only with their solutions: only the Tournament+Soln verifier can use it."""
    task = obliq.make_task("math", data_dir=str(soln_copy), solutions=True)
    data = task.load()
    corpus, queries = task.verifier_view(data)
    view = TaskData(corpus, queries, data.qrels)
    with judge_for(view) as srv:
        options = GapOptions(depth=6, pool_sizes=(), llm_base_url=srv.base_url, llm_model="judge")
        soln = gap(f"obliq/math:data_dir={soln_copy},solutions=true", ["bm25"], options)
        plain = gap(f"obliq/math:data_dir={soln_copy}", ["bm25"], options)
    assert soln.meta.verifier.reads_verifier_view and not plain.meta.verifier.reads_verifier_view
    assert soln.meta.verifier.task_defaults == {"batch_size": 4, "promote": 2, "max_final": 16}
    assert soln.retrievers == plain.retrievers  # the retrievers never see a solution
    assert soln.verifier_gold_infused.value == 1.0
    assert plain.verifier_gold_infused.value < 1.0  # unjudged for the judge: hash order


# ---------------------------------------------------------------------------------------- Figure 3 pool scaling

def _two_retrievers():
    """Retriever A ranks a01..a12 then b12..b01; B ranks b01..b12 then a01..a12. Gold: a12 and b02."""
    a = [f"a{i:02d}" for i in range(1, 13)]
    b = [f"b{i:02d}" for i in range(1, 13)]
    corpus = Corpus(Document(d, f"text of document {d}") for d in a + b)
    data = TaskData(corpus, Queries([Query("q", "find the two")]), Qrels({"q": {"a12": 1, "b02": 1}}))
    order_a = a + b[::-1]
    order_b = b + a
    runs = [Run({"q": {d: float(24 - i) for i, d in enumerate(order)}}, name)
            for name, order in (("A", order_a), ("B", order_b))]
    return data, runs


def test_pool_scaling_follows_figure_3(tmp_path):
    data, runs = _two_retrievers()
    assert budget_pool(runs, "q", 4) == ["a01", "b01", "a02", "b02"]
    with judge_for(data) as srv:
        verifier = Tournament(client=client_for(srv, tmp_path), concurrency=2)
        report = measure_gap_with("toy", data, runs, verifier.rerank_pools, GapOptions(depth=4, pool_sizes=(4, 12)))
    assert report.meta.pool_scaling_measure == "R@10"
    small, large = (row.model_dump() for row in report.pool_scaling)
    # size 4: the verifier's pool a01 b01 a02 b02 holds b02, found by the perfect judge
    assert small["measure"] == "R@10" and small["pool_recall"] == 0.5
    assert (small["verifier_standard"], small["verifier_gold_infused"]) == (0.5, 1.0)
    # A is scored on B's first four (b01..b04), in its own order b04 b03 b02 b01: b02 within the top 10;
    # B on A's first four (a01..a04): no gold
    assert small["retriever_pools"] == {"A": "others", "B": "others"}
    assert small["retriever_pool_recall"] == {"A": 0.5, "B": 0.0}
    assert small["retrievers"] == {"A": 0.5, "B": 0.0}
    # gold-infused: A's pool gains a12, which A ranks first; B's gains both, b02 first and a12 sixth
    assert small["retrievers_gold_infused"] == {"A": 1.0, "B": 1.0}
    # size 12: A over b01..b12 in its order b12 ... b03 puts b02 at rank 11; B over a01..a12 puts a12 at rank 12.
    # On the shared pool (a01..a06, b01..b06) B would rank b02 second: its own top-k would flatter it here.
    assert large["pool_recall"] == 0.5 and large["verifier_standard"] == 0.5
    assert large["retrievers"] == {"A": 0.0, "B": 0.0}
    assert large["retriever_pool_recall"] == {"A": 0.5, "B": 0.5}
    # infused: A ranks a12 first, b02 twelfth; B ranks b02 first, a12 thirteenth
    assert large["retrievers_gold_infused"] == {"A": 0.5, "B": 0.5}
    assert large["verifier_gold_infused"] == 1.0


def test_pool_scaling_measure_and_a_lone_retriever(tmp_path):
    data, runs = _two_retrievers()
    with judge_for(data) as srv:
        verifier = Tournament(client=client_for(srv, tmp_path), concurrency=2)
        report = measure_gap_with("toy", data, runs[:1], verifier.rerank_pools,
                                  GapOptions(depth=4, pool_sizes=(12,), scaling_measure="R@2"))
    row = report.pool_scaling[0].model_dump()
    # alone, A has no other retriever to build its pool from: its own first 12 (a01..a12), a12 last
    assert row["retriever_pools"] == {"A": "own"} and row["measure"] == "R@2"
    assert row["retrievers"] == {"A": 0.0} and row["pool_recall"] == 0.5
    assert row["verifier_standard"] == 0.5 and row["verifier_gold_infused"] == 1.0
