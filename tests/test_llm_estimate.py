"""The estimate before long LLM work on the embedded model: calls, tokens and minutes at the documented speed, then
revised from the first calls, through a real client talking to the local test server (tests/llm_server.py)."""

from __future__ import annotations

import re

import pytest

from gapbench.llm.client import ChatRequest, LLMClient
from gapbench.llm.estimate import Estimate, chat_many_reporting, is_embedded, llm_progress

from llm_server import LLMServer


def test_estimate_text_from_tokens_at_the_measured_cpu_speed():
    est = Estimate("argus synthesis", "SmolLM2-135M-Instruct.Q4_1.gguf", 40, 52_000, 9_000)
    assert est.seconds == pytest.approx(52_000 / 100 + 9_000 / 30)  # 520 + 300 s
    assert est.text().startswith("argus synthesis: 40 calls to the embedded SmolLM2-135M-Instruct.Q4_1.gguf, about "
                                 "52,000 prompt and 9,000 answer tokens: about 14 min at ~100 prompt and ~30 answer "
                                 "tokens/s on a CPU")
    # 4 answered, the last 3 in 66 s: 22 s a call, 36 left -> 792 s
    assert est.revised(4, 3, 66.0) == ("argus synthesis: after the first call (the model warming up), 3 calls took "
                                       "1m06s (22 s a call): about 13 min left for 36 calls.")


def test_llm_progress_says_the_estimate_then_revises_it_on_a_fake_clock(monkeypatch, capsys):
    monkeypatch.setenv("GAPBENCH_PROGRESS", "off")  # the estimate is said even with progress lines off
    now = [0.0]
    with LLMServer() as srv:
        llm = LLMClient(base_url=srv.base_url, model="tiny.gguf", cache=False)
        assert not is_embedded(llm)  # a server this process did not start as the embedded one
        with llm_progress(llm, "tournament: LLM rankings", calls=10, prompt_tokens=20_000, answer_tokens=1_000,
                          embedded=True, clock=lambda: now[0]) as advance:
            first = capsys.readouterr().err
            now[0] += 50.0
            advance(1)  # the first call, with the model's warm-up: not measured
            for _ in range(3):
                now[0] += 30.0
                advance(1)
            revised = capsys.readouterr().err
            for _ in range(6):
                advance(1)
    # 20,000 / 100 + 1,000 / 30 = 233 s -> 4 min; then 3 calls in 90 s: 30 s a call, 6 left -> 180 s -> 3 min
    assert first == ("gapbench: tournament: LLM rankings: 10 calls to the embedded tiny.gguf, about 20,000 prompt and "
                     "1,000 answer tokens: about 4 min at ~100 prompt and ~30 answer tokens/s on a CPU (give "
                     "--llm-base-url for a faster endpoint; answers already cached cost nothing).\n")
    assert revised == ("gapbench: tournament: LLM rankings: after the first call (the model warming up), 3 calls "
                       "took 1m30s (30 s a call): about 3 min left for 6 calls.\n")
    assert capsys.readouterr().err == ""  # revised once


def test_short_work_is_not_announced(capsys):
    with LLMServer() as srv:
        llm = LLMClient(base_url=srv.base_url, model="tiny.gguf", cache=False)
        with llm_progress(llm, "x", calls=2, prompt_tokens=100, answer_tokens=10, embedded=True) as advance:
            advance(2)
    assert capsys.readouterr().err == ""


def test_chat_many_reporting_counts_only_uncached_requests_and_reports_every_answer(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GAPBENCH_PROGRESS", "lines")
    monkeypatch.setenv("GAPBENCH_PROGRESS_INTERVAL", "0")
    prompts = [f"please summarise document number {i} " + "word " * 400 for i in range(6)]
    with LLMServer() as srv:
        llm = LLMClient(base_url=srv.base_url, model="tiny.gguf", cache=tmp_path / "llm.sqlite")
        llm.chat(prompts[0], max_tokens=2000)  # one answer already cached
        capsys.readouterr()
        reqs = [ChatRequest(p, tag=str(i), params={"max_tokens": 2000}) for i, p in enumerate(prompts)]
        answers = chat_many_reporting(llm, reqs, "argus synthesis", embedded=True)
        assert srv.counts["chat"] == 1 + 5
    assert [a.text for a in answers] == [llm.chat(p, max_tokens=2000).text for p in prompts]  # input order
    err = capsys.readouterr().err.splitlines()
    # 5 uncached: prompt tokens = ceil(chars / 4) each; answers: half of max_tokens, 1,000 each
    tokens = sum(-(-len(p) // 4) for p in prompts[1:])
    assert err[0].startswith(f"gapbench: argus synthesis: 5 calls to the embedded tiny.gguf, about {tokens:,} prompt "
                             "and 5,000 answer tokens: about ")
    steps = [int(m.group(1)) for line in err if (m := re.match(r"gapbench: argus synthesis (\d)/6 calls \(", line))]
    assert steps == [1, 2, 3, 4, 5, 6]  # the cached answer first, then one step per call
    revised = [line for line in err if line.startswith("gapbench: argus synthesis: after the first call")]
    assert len(revised) == 1 and revised[0].endswith(" left for 1 call.")
    assert err[-1].startswith("gapbench: argus synthesis 6/6 calls in ")


def test_a_tournament_reports_each_listwise_ranking(monkeypatch, capsys):
    """Two pools, 30 and 10 documents, batches of 10 promoting 3, a final of at most 10: 3 + 1 rankings for the first
    (30 -> 9 promoted -> one final), 1 for the second: one progress step per ranking, 5 in all."""
    from gapbench.adapters.tournament import Tournament, tournament_calls
    from gapbench.types import Corpus, Document, Queries, Query

    monkeypatch.setenv("GAPBENCH_PROGRESS", "lines")
    monkeypatch.setenv("GAPBENCH_PROGRESS_INTERVAL", "0")
    corpus = Corpus([Document(f"d{i:02d}", f"passage number {i} about something") for i in range(30)])
    queries = Queries([Query("q1", "what is passage 3"), Query("q2", "what is passage 7")])
    pools = {"q1": [f"d{i:02d}" for i in range(30)], "q2": [f"d{i:02d}" for i in range(10)]}
    assert tournament_calls(30, 10, 3, 10) == 4 and tournament_calls(10, 10, 3, 10) == 1
    with LLMServer() as srv:
        client = LLMClient(base_url=srv.base_url, model="judge", cache=False)
        run = Tournament(batch_size=10, promote=3, max_final=10, client=client, concurrency=2).rerank_pools(
            queries, pools, corpus)
        assert srv.counts["chat"] == 5
    assert sorted(d for d, _ in run["q2"]) == pools["q2"]
    err = capsys.readouterr().err.splitlines()
    steps = [int(m.group(1)) for line in err
             if (m := re.match(r"gapbench: tournament: LLM rankings (\d)/5 calls \(", line))]
    assert steps == [1, 2, 3, 4, 5]
    assert err[-1].startswith("gapbench: tournament: LLM rankings 5/5 calls in ")
