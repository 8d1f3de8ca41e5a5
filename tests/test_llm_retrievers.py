"""OBLIQ-Bench's LLM retrieval baselines, ``rewrite:`` and ``agent:``, end to end through ``gapbench run`` against the
real local test server (tests/llm_server.py) with scripted answers and its qrels judge."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import gapbench
from gapbench.adapters.llm_retrievers import MultiHopAgent, QueryRewrite, parse_answer_line, parse_selection
from gapbench.cli import main
from gapbench.errors import ConfigError, GapbenchError
from gapbench.retrieval import get_retriever
from gapbench.types import Corpus, Document, Queries

from llm_server import LLMServer

TASK = "impliret/multispeaker/wknow"


@pytest.fixture(scope="module")
def wknow():
    return gapbench.get_task(TASK).load()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _read_run(folder: Path) -> dict[str, list[str]]:
    """query id -> doc ids in rank order, from a run directory's run.trec.gz."""
    out: dict[str, list[tuple[int, str]]] = {}
    with gzip.open(folder / "run.trec.gz", "rt") as fh:
        for line in fh:
            qid, _, doc, rank, _, _ = line.split()
            out.setdefault(qid, []).append((int(rank), doc))
    return {q: [d for _, d in sorted(rows)] for q, rows in out.items()}


def _cli(capsys, argv: list[str]) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, (out, err)


# ------------------------------------------------------------------------------------------------- answer parsing

def test_parse_selection():
    assert parse_selection("Selected: [3] [1]\nNotes: Dante lives in Aldershot", 3) == ([2, 0], 0, "Dante lives in Aldershot")
    assert parse_selection("Selected: none\nNotes: nothing yet", 3) == ([], 0, "nothing yet")
    # unknown ids are dropped and counted; duplicates are kept once; numbers in notes on the same line are not ids
    assert parse_selection("**Selected:** 2, 9, 2, 0 Notes: 5 people", 3) == ([1], 2, "5 people")
    assert parse_selection("```\nSelected: [1]\n```", 2) == ([0], 0, "")
    assert parse_selection("The first document looks relevant.", 3) == (None, 0, "")
    assert parse_selection("<think>maybe [2]?</think>\nSelected: [1]\nNotes: ok", 2) == ([0], 0, "ok")


@pytest.mark.parametrize("answer, line", [
    ("pottery workshop in Japan", "pottery workshop in Japan"),
    ("Rewritten query: pottery workshop\n", "pottery workshop"),
    ("Sure! Here it is.\n**Rewritten query:** \"pottery  workshop\"", "pottery workshop"),
    ("```text\npottery\nworkshop\n```", "pottery workshop"),
    ("<think>The user wants Japan.</think>\npottery workshop", "pottery workshop"),
    ("<think>never closed", ""),
    ("  \n ", ""),
])
def test_parse_answer_line(answer, line):
    assert parse_answer_line(answer, "rewritten query") == line


# ------------------------------------------------------------------------------------------------- rewrite:bm25

def _queries_cut(folder: Path, wknow, n: int) -> list[str]:
    """A BEIR folder of ImpliRet wknow's whole corpus (titles kept) and its first ``n`` queries: what is checked per
    query needs the whole corpus, not all 1,500 queries (each one LLM call or more)."""
    from gapbench.formats import write_beir_folder
    from gapbench.types import Qrels, TaskData

    qids = wknow.queries.ids()[:n]
    write_beir_folder(TaskData(wknow.corpus, Queries(wknow.queries[q] for q in qids),
                               Qrels({q: dict(wknow.qrels[q]) for q in qids})), folder)
    return qids


def test_rewrite_bm25_end_to_end_on_impliret(tmp_path, capsys, wknow):
    cut = tmp_path / "cut"
    qids = _queries_cut(cut, wknow, 8)  # 0 to 7
    text = {q: wknow.queries[q].text for q in qids}
    doc0, doc2 = _one_line(wknow.corpus["0"].full_text), _one_line(wknow.corpus["2"].full_text)
    rewrites = {
        text["0"]: doc0,  # a rewrite that is document 0's own text ranks it first
        text["1"]: "   ",  # empty: the original query is kept
        text["2"]: f"```\nRewritten query: {doc2}\n```",  # fence and label around the rewrite are taken off
    }
    qrels = {q: dict(wknow.qrels[q]) for q in qids}
    with LLMServer(qrels=qrels, queries=text, rewrites=rewrites) as srv:
        argv = ["run", str(cut), "-r", "rewrite:bm25", "--llm-base-url", srv.base_url, "--llm-model", "judge-rewrite",
                "-m", "R@10", "--k", "20"]
        _cli(capsys, argv + ["-o", str(tmp_path / "a")])
        assert srv.calls == 8  # one rewrite per query
        assert sum(p.rstrip().endswith("Rewritten query:") for p in srv.prompts) == 8
        _cli(capsys, argv + ["-o", str(tmp_path / "b")])
        assert srv.calls == 8  # the re-run is answered from the cache
    run_a, run_b = _read_run(tmp_path / "a"), _read_run(tmp_path / "b")
    assert run_a == run_b
    assert run_a["0"][0] == "0" and run_a["2"][0] == "2"
    # the inner bm25 searched the rewrites: the same rankings as bm25 on the rewritten texts, and the original text
    # where the rewrite was empty or the server echoed the query
    bm25 = get_retriever("bm25")
    bm25.index(wknow.corpus)
    expected = bm25.search(Queries.from_dict({"0": doc0, "1": text["1"], "2": doc2, "3": text["3"]}), 20)
    for q in ("0", "1", "2", "3"):
        assert run_a[q] == [d for d, _ in expected[q]], q
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    cfg = manifest["retriever"]["config"]
    assert manifest["system"] == "rewrite:bm25"
    assert cfg["fallbacks"]["empty_rewrite"] == 1
    assert cfg["fallbacks"]["per_query"] == {"1": {"empty_rewrite": 1, "empty_search": 0, "unparsed_selection": 0,
                                                   "unknown_ids": 0}}
    assert cfg["rewrites"]["0"] == doc0 and cfg["rewrites"]["1"] == text["1"] and cfg["rewrites"]["2"] == doc2
    usage = cfg["llm"]["usage"]
    assert usage["calls"] == 8 and usage["per_query"]["7"]["calls"] == 1
    assert cfg["llm"]["model"] == "judge-rewrite" and cfg["retriever"]["name"] == "bm25"
    again = json.loads((tmp_path / "b" / "manifest.json").read_text())["retriever"]["config"]["llm"]["usage"]
    assert again["calls"] == 0 and again["cache_hits"] == 8
    fp = manifest["retriever"]["fingerprint"]
    assert fp == json.loads((tmp_path / "b" / "manifest.json").read_text())["retriever"]["fingerprint"]


# ------------------------------------------------------------------------------------------------- agent:bm25

def _write_cut(folder: Path, wknow, docs: list[str], queries: list[str]) -> None:
    """A BEIR folder with a few documents and queries of ImpliRet wknow."""
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w") as fh:
        for d in docs:
            fh.write(json.dumps({"_id": d, "title": "", "text": wknow.corpus[d].text}) + "\n")
    with open(folder / "queries.jsonl", "w") as fh:
        for q in queries:
            fh.write(json.dumps({"_id": q, "text": wknow.queries[q].text}) + "\n")
    with open(folder / "qrels" / "test.tsv", "w") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for q in queries:
            for d, g in wknow.qrels[q].items():
                fh.write(f"{q}\t{d}\t{g}\n")


def test_agent_bm25_end_to_end_on_a_cut(tmp_path, capsys, wknow):
    cut = tmp_path / "cut"
    _write_cut(cut, wknow, ["0", "1", "2", "3", "4", "5"], ["0", "1", "2"])
    text = {q: wknow.queries[q].text for q in ("0", "1", "2")}  # "Who has participated in ... in <country>?"
    # each place name is in one document of the cut only: Aldershot 0, Soyu 1, Cinemagic 2, Leptis 4
    searches = {text["0"]: ["Aldershot", "Leptis"], text["1"]: ["", "Soyu"], text["2"]: [text["2"], "Cinemagic"]}
    selections = {text["1"]: ["The pottery ones look relevant.", "Selected: [2] [7]\nNotes: a coffee farmer"]}
    qrels = {q: dict(wknow.qrels[q]) for q in text}
    docs = {d: wknow.corpus[d].full_text for d in ("0", "1", "2", "3", "4", "5")}
    with LLMServer(qrels=qrels, queries=text, corpus=docs, searches=searches, selections=selections) as srv:
        argv = ["run", str(cut), "-r", "agent:[hops=2,per_hop=2]bm25", "--llm-base-url", srv.base_url,
                "--llm-model", "judge-agent", "-m", "R@10", "--k", "10"]
        _cli(capsys, argv + ["-o", str(tmp_path / "a")])
        assert srv.calls == 12  # 3 queries x 2 hops x (search query + selection)
        prompts = list(srv.prompts)
        _cli(capsys, argv + ["-o", str(tmp_path / "b")])
        assert srv.calls == 12
    run = _read_run(tmp_path / "a")
    assert run == _read_run(tmp_path / "b")
    # bm25 on the cut for the original queries (q1's empty search falls back to it, q2 searches it first)
    bm25 = get_retriever("bm25")
    bm25.index(gapbench.get_task(str(cut)).load().corpus)
    top2 = {q: [d for d, _ in r] for q, r in bm25.search(Queries.from_dict(text), 2).items()}
    # 0 holds "who", "has", "community", "participated"; 3 "community skills workshop", "participated"
    assert top2 == {"0": ["0", "3"], "1": ["0", "3"], "2": ["0", "3"]}
    # q0: hop 1 "Aldershot" -> [0, 5] (5: the highest id of the zero scores), the judge selects 0;
    #     hop 2 "Leptis" -> [4, 5], nothing relevant. Selected first, then retrieved in order.
    assert run["0"] == ["0", "5", "4"]
    # q1: hop 1 empty search -> the original query -> [0, 3], prose answer: nothing selected;
    #     hop 2 "Soyu" -> [1, 5], "[2] [7]" selects 5 and drops the unknown 7.
    assert run["1"] == ["5", "0", "3", "1"]
    # q2: hop 1 the original query -> [0, 3], the judge selects nothing (2 is the relevant one);
    #     hop 2 "Cinemagic" -> [2, 5], the judge selects 2.
    assert run["2"] == ["2", "0", "3", "5"]
    # notes reach the next hop's search prompt
    q0_hop2 = next(p for p in prompts if "Hop 2 of 2." in p and p.rstrip().endswith("Search query:") and text["0"] in p)
    assert "Hop 1: hop 1: 1 relevant" in q0_hop2
    q1_hop2 = next(p for p in prompts if "Hop 2 of 2." in p and p.rstrip().endswith("Search query:")
                   and text["1"] in p)
    assert "(none yet)" in q1_hop2  # the prose answer left no notes
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    cfg = manifest["retriever"]["config"]
    assert manifest["system"] == "agent:[hops=2,per_hop=2]bm25"
    assert cfg["fallbacks"]["per_query"] == {"1": {"empty_rewrite": 0, "empty_search": 1, "unparsed_selection": 1,
                                                   "unknown_ids": 1}}
    assert cfg["trace"]["1"] == [{"search": text["1"], "selected": []}, {"search": "Soyu", "selected": ["5"]}]
    assert cfg["llm"]["usage"]["per_query"]["0"]["requests"] == 4
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["retriever"]["config"]["llm"]["usage"][
        "calls"] == 0


def test_agent_search_that_finds_nothing_searches_the_original_query(tmp_path, capsys, wknow):
    """SmolLM2 answers "(no)" as its search query: all stop words, so bm25 finds nothing; the original query is
    searched instead and the fallback counted (it used to leave the query with an empty ranking)."""
    cut = tmp_path / "cut"
    _write_cut(cut, wknow, ["0", "1", "2", "3", "4", "5"], ["0"])
    text = {"0": wknow.queries["0"].text}
    with LLMServer(qrels={"0": dict(wknow.qrels["0"])}, queries=text,
                   corpus={d: wknow.corpus[d].full_text for d in ("0", "1", "2", "3", "4", "5")},
                   searches={text["0"]: ["(no)"]}, selections={text["0"]: ["Selected: none\nNotes: -"]}) as srv:
        _cli(capsys, ["run", str(cut), "-r", "agent:[hops=1,per_hop=2]bm25", "--llm-base-url", srv.base_url,
                      "--llm-model", "judge-agent-no", "-m", "R@10", "--k", "10", "-o", str(tmp_path / "a")])
        assert srv.calls == 2  # the search query and the selection over what the original query found
    cfg = json.loads((tmp_path / "a" / "manifest.json").read_text())["retriever"]["config"]
    assert cfg["trace"]["0"] == [{"search": text["0"], "selected": []}]
    assert cfg["fallbacks"]["per_query"]["0"]["empty_search"] == 1
    assert _read_run(tmp_path / "a")["0"] == ["0", "3"]  # bm25's top 2 for the original query (see the test above)


def test_rewrite_that_finds_nothing_searches_the_original_query(tmp_path, capsys, wknow):
    """A rewrite of only stop words ("(no)") finds nothing with bm25: the original query is searched instead and the
    fallback counted, so the query keeps the ranking plain bm25 gives it."""
    cut = tmp_path / "cut"
    _write_cut(cut, wknow, ["0", "1", "2", "3", "4", "5"], ["0"])
    text = {"0": wknow.queries["0"].text}
    with LLMServer(qrels={"0": dict(wknow.qrels["0"])}, queries=text, rewrites={text["0"]: "(no)"}) as srv:
        _cli(capsys, ["run", str(cut), "-r", "rewrite:bm25", "--llm-base-url", srv.base_url,
                      "--llm-model", "judge-rewrite-no", "-m", "R@10", "--k", "2", "-o", str(tmp_path / "a")])
        assert srv.calls == 1
    cfg = json.loads((tmp_path / "a" / "manifest.json").read_text())["retriever"]["config"]
    assert cfg["rewrites"]["0"] == "(no)"
    assert cfg["fallbacks"]["per_query"]["0"] == {"empty_rewrite": 0, "empty_search": 1, "unparsed_selection": 0,
                                                  "unknown_ids": 0}
    assert _read_run(tmp_path / "a")["0"] == ["0", "3"]  # bm25's top 2 for the original query (as the agent's test)


# ------------------------------------------------------------------------------------------------- specs and identity

def test_specs_options_and_fingerprints():
    with LLMServer() as srv:
        llm = {"llm_base_url": srv.base_url, "llm_model": "judge"}
        agent = get_retriever("agent:[hops=3,per_hop=10](rrf:bm25+bm25-lucene)", **llm)
        assert isinstance(agent, MultiHopAgent) and (agent.hops, agent.per_hop) == (3, 10)
        assert agent.name == "agent:[hops=3,per_hop=10]rrf:bm25+bm25-lucene"
        # the command's endpoint and model reach an LLM retriever inside a fusion
        fused = get_retriever("rrf:bm25+(rewrite:bm25-lucene)", **llm)
        assert isinstance(fused.retrievers[1], QueryRewrite) and fused.retrievers[1].client.config.model == "judge"
        assert fused.name == "rrf:bm25+rewrite:bm25-lucene"
        plain = get_retriever("rewrite:bm25", **llm)
        assert isinstance(plain, QueryRewrite) and plain.name == "rewrite:bm25"
        # the bracket's model wins over the command's
        other = get_retriever("rewrite:[llm_model=other]bm25", **llm)
        assert other.client.config.model == "other"
        fps = {plain.fingerprint, other.fingerprint, get_retriever("rewrite:bm25-lucene", **llm).fingerprint,
               get_retriever("agent:bm25", **llm).fingerprint, get_retriever("agent:[hops=2]bm25", **llm).fingerprint}
        assert len(fps) == 5
        assert plain.fingerprint == get_retriever("rewrite:bm25", **llm).fingerprint


@pytest.mark.parametrize("spec, words", [
    ("agent:[hops=0]bm25", "retriever agent: hops must be greater than or equal to 1, got '0'"),
    ("agent:[hops=two]bm25", "retriever agent: hops must be a whole number >= 1, got 'two'"),
    ("rewrite:[hops=2]bm25", "hops"),
    ("rewrite:", "needs the retriever"),
    ("agent:[hops=2]", "needs the retriever"),
    ("agent:[hops=2", "not closed"),
    ("rewrite:bm52", "bm52"),
])
def test_bad_specs_are_one_line_errors(spec, words):
    with pytest.raises(GapbenchError) as err:
        get_retriever(spec, llm_base_url="http://127.0.0.1:9/v1", llm_model="judge")
    assert words in str(err.value) and "\n" not in str(err.value)


def test_no_model_is_reported_before_any_work(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="no LLM model given"):
        get_retriever("agent:bm25", llm_base_url="http://127.0.0.1:9/v1")


def test_search_before_index_and_exclusions():
    docs = {"a": "red apple", "b": "green apple", "c": "blue car"}
    corpus = Corpus(Document(k, v) for k, v in docs.items())
    queries = Queries.from_dict({"q": "apple"})
    with LLMServer(qrels={"apple": {"red apple": 1, "green apple": 1}}) as srv:
        agent = get_retriever("agent:[hops=1,per_hop=3]bm25", llm_base_url=srv.base_url, llm_model="judge")
        with pytest.raises(ConfigError, match="index"):
            agent.search(queries, 5)
        agent.index(corpus)
        # b is excluded for q: the inner search never returns it, so it is neither shown nor ranked
        run = agent.search(queries, 5, exclude={"q": frozenset({"b"})})
        assert [d for d, _ in run["q"]] == ["a", "c"]
        assert "green apple" not in srv.prompts[-1]


@pytest.mark.slow
def test_one_hop_agent_on_impliret_puts_every_found_gold_first(tmp_path, capsys, wknow):
    # with one hop on the original query the judge selects the gold document whenever bm25's top 25 holds it, so
    # the agent's R@10 and RR@10 both equal bm25's R@25; over the whole corpus and the first 60 queries, among them
    # queries whose gold bm25's top 25 holds and queries whose gold it misses
    cut = tmp_path / "cut"
    qids = _queries_cut(cut, wknow, 60)
    qrels = {q: dict(wknow.qrels[q]) for q in qids}
    corpus = {d: doc.full_text for d, doc in wknow.corpus.items()}
    with LLMServer(qrels=qrels, queries={q: wknow.queries[q].text for q in qids}, corpus=corpus) as srv:
        argv = ["run", str(cut), "-r", "agent:[hops=1]bm25", "--llm-base-url", srv.base_url, "--llm-model",
                "judge-hop", "-m", "R@10,RR@10", "--k", "25", "--json"]
        assert main(argv) == 0
        got = json.loads(capsys.readouterr().out)["measures"]
        assert srv.calls == 120  # a search query and a selection per query
    base = gapbench.run(str(cut), "bm25", measures=["R@25"], k=25).means["R@25"]
    assert 0.5 < base < 1
    assert got["R@10"] == pytest.approx(base) and got["RR@10"] == pytest.approx(base)


def test_gap_pools_the_llm_retrievers(capsys, wknow):
    # the server echoes each query as its rewrite, so rewrite:bm25 scores as bm25; the one-hop agent reorders bm25's
    # top 10 with the gold first when it is there, so its nDCG@10 is the pool's recall (one gold document per query)
    qrels = {q: dict(r) for q, r in wknow.qrels.items()}
    corpus = {d: doc.full_text for d, doc in wknow.corpus.items()}
    with LLMServer(qrels=qrels, queries={q: v.text for q, v in wknow.queries.items()}, corpus=corpus) as srv:
        assert main(["gap", TASK, "--retrievers", "bm25,rewrite:bm25,agent:[hops=1,per_hop=10]bm25",
                     "--max-queries", "3", "--depth", "10", "--pool-sizes", "", "--llm-base-url", srv.base_url,
                     "--llm-model", "judge-gap", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        prompts = [p.rstrip().splitlines()[-1] for p in srv.prompts]
    # the session's cache is keyed by model and prompt: this test's own model, so every answer is asked for here
    assert prompts.count("Rewritten query:") == 3 and prompts.count("Search query:") == 3
    scores = report["retrievers"]
    assert scores["rewrite:bm25"] == pytest.approx(scores["bm25"])
    assert scores["agent:[hops=1,per_hop=10]bm25"] == pytest.approx(report["pool_recall"])
    assert report["pool_recall"] > scores["bm25"]
    # gap.json says what each retriever cost: the rewriter's and the agent's own LLM calls, beside the verifier's
    systems = {s["spec"]: s for s in report["meta"]["retrievers"]}
    assert list(systems) == ["bm25", "rewrite:bm25", "agent:[hops=1,per_hop=10]bm25"]
    assert "llm" not in systems["bm25"]["config"]
    assert systems["rewrite:bm25"]["config"]["llm"]["usage"]["calls"] == 3
    assert systems["agent:[hops=1,per_hop=10]bm25"]["config"]["llm"]["usage"]["calls"] == 6  # a search, a selection
    assert systems["rewrite:bm25"]["fingerprint"] != systems["bm25"]["fingerprint"]
