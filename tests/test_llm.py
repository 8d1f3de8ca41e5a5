"""The LLM client against a real local OpenAI-compatible HTTP server (tests/llm_server.py), never a mocked client."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gapbench.adapters.tournament import Tournament
from gapbench.cli import main
from gapbench.errors import ConfigError, GapbenchError, UnknownNameError
from gapbench.llm.client import (
    ChatRequest, LLMClient, LLMConfig, LLMRequestError, LLMResponseError, LLMUnavailableError, ResponseCache,
    cache_key, listwise_prompt, prompt_fields, prompt_tokens, render,
)
from gapbench.llm.usage import LLMUsage
from gapbench.task import get_task
from gapbench.types import Document, Query
from llm_server import LLMServer, llm_server_fixture, parse_listwise

QUERIES = {f"q{i}": f"question number {i} about topic {i % 4}" for i in range(12)}
CORPUS = {f"d{j}": f"passage {j} discusses topic {j % 4} with detail {j * 7 % 11}" for j in range(40)}
QRELS = {qid: {f"d{(i * 3 + k) % 40}": 3 - k for k in range(3)} for i, qid in enumerate(QUERIES)}
KEY = "sk-test-S3CRET-abcdefghijklmnop0123456789"


def prompts(n_passages: int = 8) -> list[tuple[str, str]]:
    out = []
    for i, (qid, qtext) in enumerate(QUERIES.items()):
        docs = [CORPUS[f"d{(i * 5 + j) % 40}"] for j in range(n_passages - 3)]
        docs += [CORPUS[d] for d in QRELS[qid]]  # the judged ones last, so a right answer reorders them
        out.append((qid, listwise_prompt(qtext, docs)))
    return out


def make_client(srv: LLMServer, tmp_path, cache=False, **kw) -> LLMClient:
    if cache is True:
        cache = tmp_path / "responses.sqlite"
    kw.setdefault("retry_wait", 0.01)
    kw.setdefault("retry_wait_max", 0.05)
    kw.setdefault("timeout", 10.0)
    return LLMClient(base_url=srv.base_url, model="judge", cache=cache, **kw)


def server_of(**kw) -> LLMServer:
    return LLMServer(QRELS, queries=QUERIES, corpus=CORPUS, **kw)


fault_free = llm_server_fixture(qrels=QRELS, queries=QUERIES, corpus=CORPUS)


# ----------------------------------------------------------------------------------------------- prompts and judge
def test_template_fields_render_and_errors():
    assert set(prompt_fields("listwise_rank")) == {"query", "passages", "num"}
    with pytest.raises(ConfigError, match="missing: passages"):
        render("listwise_rank", query="q", num=1)
    with pytest.raises(ConfigError, match="unknown: extra"):
        render("listwise_rank", query="q", num=1, passages="[1] a", extra=1)
    with pytest.raises(UnknownNameError, match="Did you mean 'listwise_rank'"):
        render("listwise_rnk")


def test_listwise_prompt_keeps_one_passage_per_line_and_the_server_parses_it(tmp_path):
    text = listwise_prompt("what\nis  BM25?", ["first\npassage {braces}", "  second ", "", "x" * 50], max_chars=10)
    query, passages = parse_listwise(text)
    assert query == "what is BM25?"
    assert passages == ["first pass", "second", "", "x" * 10]
    assert 'in the form "[2] > [1] > [3]"' in text
    custom = tmp_path / "mine.txt"
    custom.write_text("Q={query} N={num}\n{passages}")
    assert listwise_prompt("q", ["a", "b"], template=str(custom)) == "Q=q N=2\n[1] a\n[2] b"


def test_judge_ranks_by_grade_with_ids_or_texts(fault_free, tmp_path):
    client = make_client(fault_free, tmp_path)
    qid = "q2"
    judged = list(QRELS[qid])  # grades 3, 2, 1
    docs = ["an unjudged passage", CORPUS[judged[2]], CORPUS[judged[0]], CORPUS[judged[1]][:20]]  # cut: prefix match
    answer = client.chat(listwise_prompt(QUERIES[qid], docs)).text
    assert answer.startswith("[3] > [4] > [2]") and answer.endswith("[1]")
    with LLMServer({QUERIES[qid]: {CORPUS[d]: QRELS[qid][d] for d in judged}}) as by_text:
        assert make_client(by_text, tmp_path).chat(listwise_prompt(QUERIES[qid], docs)).text == answer


def test_noise_is_reproducible_and_bad_numbering_is_400(tmp_path):
    with server_of(noise=0.5, seed=3) as noisy, server_of() as clean:
        a, b, c = (make_client(s, tmp_path) for s in (noisy, noisy, clean))
        ps = [p for _, p in prompts(10)]
        first, second = [r.text for r in a.chat_many(ps)], [r.text for r in b.chat_many(ps)]
        assert first == second
        assert first != [r.text for r in c.chat_many(ps)]
        with pytest.raises(LLMRequestError, match="listwise template.*\\[3\\] where \\[2\\]"):
            a.chat("Query: q\n\n[1] a\n[3] b")


def test_content_faults_truncated_and_malformed(tmp_path):
    ps = [p for _, p in prompts(6)]
    with server_of(seed=1) as clean, server_of(faults={"truncated": 0.3, "malformed": 0.4}, seed=1, fault_seed=4) as bad:
        good = [r.text for r in make_client(clean, tmp_path).chat_many(ps)]
        got = [r.text for r in make_client(bad, tmp_path).chat_many(ps)]
        counts = bad.counts
    assert counts["truncated"] + counts["malformed"] > 0 and counts["ok"] == len(ps)
    for g, b in zip(good, got):
        ids = [int(x) for x in re.findall(r"\[(\d+)\]", b)]
        if b == g:
            continue
        bad_kind = (not ids) or len(set(ids)) < len(ids) or any(i < 1 or i > 6 for i in ids) or len(ids) < 6
        assert bad_kind, (g, b)


# ----------------------------------------------------------------------------------------------- retries
def test_retries_through_429_and_500_give_the_fault_free_answers(tmp_path):
    ps = [ChatRequest(p, tag=qid) for qid, p in prompts()]
    with server_of() as clean:
        expected = [r.text for r in make_client(clean, tmp_path).chat_many(ps, concurrency=4)]
    with server_of(faults={"429": 0.1, "500": 0.1}, fault_seed=7) as flaky:
        client = make_client(flaky, tmp_path)
        got = client.chat_many(ps, concurrency=4)
        counts = flaky.counts
        calls = flaky.calls
    assert [r.text for r in got] == expected
    usage = client.usage.total()
    assert counts["429"] + counts["500"] > 0
    assert usage["retries"] == counts["429"] + counts["500"]
    assert usage["calls"] == calls == len(ps) + usage["retries"]
    assert usage["failures"] == 0


def test_timeouts_are_retried(tmp_path):
    with server_of(faults={"slow": 0.5}, slow_delay=1.5, fault_seed=2) as slow:
        client = make_client(slow, tmp_path, timeout=0.4)
        got = [r.text for r in client.chat_many([p for _, p in prompts()[:6]], concurrency=6)]
        assert slow.counts["slow"] > 0
        assert client.usage.total()["retries"] >= slow.counts["slow"]
    with server_of() as clean:
        assert got == [r.text for r in make_client(clean, tmp_path).chat_many([p for _, p in prompts()[:6]])]


def test_retry_after_is_honoured_then_retries_run_out(tmp_path):
    with server_of(faults={"429": 1.0}, retry_after=0.3) as limited:
        client = make_client(limited, tmp_path, max_retries=2, retry_wait=0.0)
        start = time.perf_counter()
        with pytest.raises(LLMUnavailableError) as err:
            client.chat("hello", tag="q1")
        assert time.perf_counter() - start >= 0.6  # two waits of Retry-After 0.3 s
        assert limited.counts["429"] == 3
    msg = str(err.value)
    assert "HTTP 429 after 3 attempts" in msg and f"{limited.base_url}/chat/completions" in msg
    assert err.value.status == 429
    assert client.usage.record().model_dump()["per_query"]["q1"] == {
        "requests": 1, "calls": 3, "retries": 2, "cache_hits": 0, "failures": 1, "prompt_tokens": 0,
        "completion_tokens": 0, "resent": 0, "length_reasks": 0, "truncated": 0, "cost": None}


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_fail_at_once_with_a_clear_message(tmp_path, status):
    with server_of() as srv:
        srv.force_status = status
        client = make_client(srv, tmp_path, max_retries=5)
        with pytest.raises(LLMRequestError) as err:
            client.chat("hello")
        assert srv.calls == 1  # no retry
    msg = str(err.value)
    assert f"{srv.base_url}/chat/completions answered HTTP {status}" in msg and "not retried" in msg
    assert "'judge'" in msg and err.value.status == status
    if status == 401:
        assert "$OPENAI_API_KEY" in msg


def test_unknown_model_is_404_with_the_fix(tmp_path):
    with server_of(models={"judge"}) as srv:
        client = LLMClient(base_url=srv.base_url, model="jduge", cache=False)
        with pytest.raises(LLMRequestError, match="does not exist.*Check the model name"):
            client.chat("hi")


def test_chat_many_raises_the_first_error_or_returns_it(tmp_path):
    with server_of() as srv:
        srv.force_status = 400
        client = make_client(srv, tmp_path)
        with pytest.raises(LLMRequestError):
            client.chat_many(["a", "b", "c"], concurrency=2)
        out = client.chat_many(["a", "b", "c"], concurrency=2, return_exceptions=True)
        assert all(isinstance(o, LLMRequestError) for o in out)


def test_no_server_is_a_connection_error_at_the_first_attempt(tmp_path):
    with socket.socket() as s:  # bound, never listening: the port refuses connections while the test holds it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        client = LLMClient(base_url=f"http://127.0.0.1:{port}/v1", model="m", cache=False, max_retries=6)
        with pytest.raises(LLMUnavailableError) as err:
            client.chat("hi")
    assert str(err.value) == (
        f"cannot connect to the LLM endpoint http://127.0.0.1:{port}/v1/chat/completions: connection refused: nothing "
        f"listens on 127.0.0.1:{port}. Start the server there, or point the base URL (base_url, or $OPENAI_BASE_URL) "
        "at the one that runs.")
    assert client.usage.total()["calls"] == 1 and client.usage.total()["retries"] == 0


def test_an_unknown_host_is_reported_at_once():
    client = LLMClient(base_url="http://gapbench-no-such-host.invalid:8000/v1", model="m", cache=False)
    with pytest.raises(LLMUnavailableError, match=r"the host name 'gapbench-no-such-host.invalid' does not resolve\. "
                                                  r"Check the host in the base URL \(base_url, or \$OPENAI_BASE_URL\)"):
        client.embed_many(["a text"])
    assert client.usage.total()["calls"] == 1


def test_a_server_that_goes_away_after_answering_is_retried(tmp_path):
    with server_of() as srv:
        client = make_client(srv, tmp_path, max_retries=2)
        assert client.chat("first").text.startswith("echo ")
    with pytest.raises(LLMUnavailableError, match=r"still fails after 3 attempts \(model 'judge'\): ConnectError: "
                                                  r".*Connection refused"):
        client.chat("second")  # refused now, but it answered before: a restart, so the retries run
    assert client.usage.total()["retries"] == 2


# ----------------------------------------------------------------------------------------------- cache
def test_second_run_makes_no_calls(tmp_path):
    ps = [ChatRequest(p, tag=qid) for qid, p in prompts()]
    with server_of(faults={"500": 0.2}) as srv:
        first = make_client(srv, tmp_path, cache=True).chat_many(ps, concurrency=4)
        calls = srv.calls
        again = make_client(srv, tmp_path, cache=True)
        second = again.chat_many(ps, concurrency=4)
        assert srv.calls == calls  # nothing reached the server
    assert [r.text for r in first] == [r.text for r in second]
    assert not any(r.cached for r in first) and all(r.cached for r in second)
    usage = again.usage.total()
    assert usage["calls"] == 0 and usage["cache_hits"] == len(ps) and usage["prompt_tokens"] == 0


def test_cache_key_covers_model_messages_and_parameters(tmp_path):
    with server_of() as srv:
        client = make_client(srv, tmp_path, cache=True)
        base = client.payload(ChatRequest("hi"))
        assert cache_key(base) == cache_key(dict(reversed(list(base.items()))))
        for change in ({"model": "other"}, {"messages": [{"role": "user", "content": "hi!"}]}, {"temperature": 0.5},
                       {"max_tokens": 7}, {"seed": 1}, {"stop": ["\n"]}):
            assert cache_key({**base, **change}) != cache_key(base)
        client.chat("hi")
        client.chat("hi", temperature=0.7)
        client.chat("hi")
        assert srv.calls == 2
        cache = ResponseCache(tmp_path / "responses.sqlite")
        assert len(cache) == 2
        assert cache._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_identical_requests_in_one_batch_are_sent_once(tmp_path):
    with server_of() as srv:
        client = make_client(srv, tmp_path, cache=True)
        out = client.chat_many([ChatRequest("same", tag="a"), ChatRequest("same", tag="b"), "other"], concurrency=3)
        assert srv.calls == 2
    assert out[0].text == out[1].text and not out[0].cached and out[1].cached
    per = client.usage.record().model_dump()["per_query"]
    assert per["a"]["calls"] == 1 and per["b"]["calls"] == 0 and per["b"]["cache_hits"] == 1


def test_shared_cache_file_is_safe_across_threads_and_clients(tmp_path):
    with server_of() as srv:
        clients = [make_client(srv, tmp_path, cache=True) for _ in range(4)]
        errors: list[BaseException] = []

        def work(c: LLMClient, k: int) -> None:
            try:
                c.chat_many([f"prompt {k}-{i}" for i in range(15)], concurrency=4)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(c, k)) for k, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert len(ResponseCache(tmp_path / "responses.sqlite")) == 60


# ----------------------------------------------------------------------------------------------- concurrency, counters
def test_concurrency_is_bounded(tmp_path):
    with server_of(latency=0.05) as srv:
        client = make_client(srv, tmp_path, concurrency=3)
        client.chat_many([f"p{i}" for i in range(18)])
        assert srv.max_in_flight == 3
        srv.reset_counts()
        client.chat_many([f"r{i}" for i in range(18)], concurrency=5)
        assert srv.max_in_flight == 5


def test_counters_add_up_with_cost(tmp_path):
    ps = [ChatRequest(p, tag=qid) for qid, p in prompts()] + [ChatRequest("extra", tag="q0")]
    with server_of(faults={"429": 0.15}, fault_seed=11) as srv:
        client = make_client(srv, tmp_path, cache=True, price_in=2.5, price_out=10.0)
        out = client.chat_many(ps, concurrency=4)
        client.chat_many(ps[:3])  # all cached
        server_calls = srv.calls
    d = client.usage.record().model_dump()
    assert d["requests"] == len(ps) + 3 and d["cache_hits"] == 3
    assert d["calls"] == server_calls == len(ps) + d["retries"]
    assert d["prompt_tokens"] == sum(r.prompt_tokens for r in out)
    assert d["completion_tokens"] == sum(r.completion_tokens for r in out)
    assert d["cost"] == pytest.approx((d["prompt_tokens"] * 2.5 + d["completion_tokens"] * 10.0) / 1e6)
    per = d["per_query"]
    assert set(per) == set(QUERIES)
    for name in ("requests", "calls", "retries", "cache_hits", "prompt_tokens", "completion_tokens"):
        assert sum(row[name] for row in per.values()) == d[name], name
    assert sum(row["cost"] for row in per.values()) == pytest.approx(d["cost"])
    assert per["q0"]["requests"] == 3  # its prompt, "extra", and one cached repeat
    json.dumps(client.manifest())  # JSON-ready


def test_the_usage_record_keeps_the_manifest_s_keys_and_values():
    # the manifest's "usage" is UsageRecord.model_dump(): the same keys, in the same order, as the hand-written dict it
    # replaced (issue 25), with the costs worked by hand: q2 100 tokens in at 1.5 and 7 out at 3.0 per 1M
    usage = LLMUsage(1.5, 3.0)
    usage.add("q2", requests=1, calls=2, prompt_tokens=100, completion_tokens=7)
    usage.add("q1", cache_hits=1, truncated=1)
    usage.add(None, retries=3)
    counts = ["requests", "calls", "retries", "cache_hits", "failures", "prompt_tokens", "completion_tokens", "resent",
              "length_reasks", "truncated", "cost"]
    d = usage.record().model_dump()
    assert list(d) == [*counts, "price_in_per_1m", "price_out_per_1m", "per_query"]
    assert d == {"requests": 1, "calls": 2, "retries": 3, "cache_hits": 1, "failures": 0, "prompt_tokens": 100,
                 "completion_tokens": 7, "resent": 0, "length_reasks": 0, "truncated": 1, "cost": 0.000171,
                 "price_in_per_1m": 1.5, "price_out_per_1m": 3.0, "per_query": {
                     "q1": {**dict.fromkeys(counts, 0), "cache_hits": 1, "truncated": 1, "cost": 0.0},
                     "q2": {**dict.fromkeys(counts, 0), "requests": 1, "calls": 2, "prompt_tokens": 100,
                            "completion_tokens": 7, "cost": 0.000171}}}
    assert list(d["per_query"]) == ["q1", "q2"] and list(d["per_query"]["q2"]) == counts
    assert usage.total() == {k: d[k] for k in counts}
    assert LLMUsage().record().model_dump()["cost"] is None  # no price: no cost


# ----------------------------------------------------------------------------------------------- embeddings
def test_embeddings_batched_and_in_order(tmp_path):
    texts = [f"text number {i} with words {i % 3}" for i in range(10)]
    with server_of(faults={"500": 0.2}, fault_seed=5) as srv:
        client = make_client(srv, tmp_path, concurrency=3)
        vecs = client.embed_many(texts, "embedder", batch_size=3, tag="corpus")
        assert srv.counts["ok"] == 4  # ceil(10 / 3) batches
        small = client.embed_many(texts[:2], "embedder", dimensions=16)
    assert vecs.shape == (10, 64) and vecs.dtype == np.float32
    assert np.allclose(vecs, np.array([LLMServer.embed(t, 64) for t in texts]), atol=1e-6)
    assert small.shape == (2, 16)
    usage = client.usage.record().model_dump()["per_query"]["corpus"]
    assert usage["requests"] == 4 and usage["prompt_tokens"] == sum(len(t.split()) for t in texts)
    assert client.embed_many([], "embedder").shape[0] == 0


# ----------------------------------------------------------------------------------------------- config and secrets
def test_config_resolution_and_validation(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env-host:9999/v1/")
    assert LLMClient(model="m", cache=False).endpoint == "http://env-host:9999/v1"
    assert LLMClient(base_url="http://h:1/v1/chat/completions", model="m", cache=False).endpoint == "http://h:1/v1"
    with pytest.raises(ConfigError, match=r"no LLM model given; set model \(LLMConfig\(model=\.\.\.\)\)"):
        LLMClient(cache=False)
    with pytest.raises(ConfigError, match="not an http"):
        LLMClient(base_url="localhost:8000", model="m", cache=False)
    with pytest.raises(ConfigError, match="concurrency=0"):
        LLMConfig(concurrency=0)
    with pytest.raises(ConfigError, match="unknown LLM option.*modle"):
        LLMClient(modle="m")
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"\$OPENAI_API_KEY"):
        LLMClient(model="gpt-4o-mini", cache=False)
    assert isinstance(LLMRequestError("x"), GapbenchError)


def test_the_key_never_leaks(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("GAPBENCH_TEST_LLM_KEY", KEY)
    messages: list[str] = []

    def collect(exc: BaseException) -> None:
        messages.extend([str(exc), repr(exc), *map(str, exc.args), str(getattr(exc, "endpoint", "")),
                         "".join(traceback.format_exception(exc))])
        assert exc.__cause__ is None and exc.__context__ is None  # no link back to the request and its headers

    common = dict(model="judge", api_key_env="GAPBENCH_TEST_LLM_KEY", retry_wait=0.0, max_retries=1,
                  price_in=1.0, price_out=1.0)
    # a careless server that echoes the bearer token it got in its 401 message
    with server_of(api_key="sk-the-right-one-0000000000", echo_key=True) as srv:
        client = LLMClient(base_url=srv.base_url, cache=tmp_path / "c.sqlite", **common)
        with pytest.raises(LLMRequestError) as err:
            client.chat("hello", tag="q1")
        collect(err.value)
        assert "Incorrect API key provided" in str(err.value) and "[redacted]" in str(err.value)
        srv.force_status = 500
        with pytest.raises(LLMUnavailableError) as err:
            client.chat_many(["a", "b"], concurrency=2)
        collect(err.value)
        srv.force_status = None
        srv.api_key = KEY
        client.chat("works now", tag="q2")
        with pytest.raises(LLMRequestError) as err:
            client.embed_many([""], "embedder")  # empty input: 400
        collect(err.value)
        messages += [repr(client), repr(client.config), json.dumps(client.manifest()), json.dumps(client.describe())]
    with pytest.raises(LLMUnavailableError) as err:  # the server is gone now
        LLMClient(base_url=srv.base_url, cache=False, **common).chat("x")
    collect(err.value)
    with server_of(faults={"slow": 1.0}, slow_delay=0.5) as slow:
        with pytest.raises(LLMUnavailableError) as err:
            LLMClient(base_url=slow.base_url, cache=False, timeout=0.1, **common).chat("x")
        collect(err.value)
    messages.append(caplog.text)
    assert len(messages) > 20
    for m in messages:
        assert KEY not in m and "S3CRET" not in m, m
    assert client.manifest()["usage"]["per_query"]["q2"]["calls"] == 1


# ----------------------------------------------------------------------------------------------- unreachable endpoints
@pytest.mark.parametrize("url, problem", [
    ("http://127.0.0.1:99999/v1", "has a port that is not a number from 0 to 65535"),
    ("http://127.0.0.1:8k/v1", "has a port that is not a number from 0 to 65535"),
    ("http://127.0.0.1:0/v1", "has port 0, where no server listens"),
    ("http://local host:8000/v1", "contains spaces or control characters"),
    ("http://localhost:8000/v1\n", None),  # a trailing newline (a pasted line) is only trimmed
    ("http://local\thost:8000/v1", "contains spaces or control characters"),
    ("http://loc$alhost:8000/v1", "has the host name 'loc$alhost', which is not a valid host"),
    ("http://user:pw@:8000/v1", "has no host name"),
])
def test_malformed_base_urls_are_reported_before_any_call(url, problem):
    if problem is None:
        assert LLMClient(base_url=url, model="m", cache=False).endpoint == "http://localhost:8000/v1"
        return
    with pytest.raises(ConfigError) as err:
        LLMClient(base_url=url, model="m", cache=False)
    assert problem in str(err.value) and "(base_url, or $OPENAI_BASE_URL)" in str(err.value)
    assert "\n" not in str(err.value) and "pw" not in str(err.value)


@pytest.mark.parametrize("url", ["localhost:8000/v1", "http://[::1/v1", "ftp://host/v1", "http:///v1"])
def test_base_urls_that_are_not_http_urls(url):
    with pytest.raises(ConfigError, match="is not an http\\(s\\) URL; give the API root"):
        LLMClient(base_url=url, model="m", cache=False)


def test_a_tournament_reports_a_bad_endpoint_when_it_is_built():
    with pytest.raises(ConfigError, match="has a port that is not a number"):
        Tournament(llm_base_url="http://127.0.0.1:123456/v1", llm_model="m")
    with pytest.raises(ConfigError, match="no LLM model given"):
        Tournament(llm_base_url="http://127.0.0.1:8000/v1")


# ----------------------------------------------------------------------------------------------- time bounds
def test_time_limits_come_from_arguments_then_environment_then_defaults(monkeypatch):
    def bounds(**kw) -> tuple:
        c = LLMClient(base_url="http://127.0.0.1:8000/v1", model="m", cache=False, **kw).config
        return c.timeout, c.call_timeout, c.outage_timeout

    for name in ("GAPBENCH_LLM_TIMEOUT", "GAPBENCH_LLM_CALL_TIMEOUT", "GAPBENCH_LLM_OUTAGE_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    assert bounds() == (120.0, 300.0, 300.0)
    monkeypatch.setenv("GAPBENCH_LLM_TIMEOUT", "7.5")
    monkeypatch.setenv("GAPBENCH_LLM_CALL_TIMEOUT", "20")
    monkeypatch.setenv("GAPBENCH_LLM_OUTAGE_TIMEOUT", " 40 ")
    assert bounds() == (7.5, 20.0, 40.0)
    assert bounds(timeout=3, outage_timeout=9) == (3, 20.0, 9)
    described = LLMClient(base_url="http://127.0.0.1:8000/v1", model="m", cache=False).describe()
    assert (described["retry"]["attempt_timeout"], described["retry"]["stop"]["call_timeout"],
            described["retry"]["stop"]["outage_timeout"]) == (7.5, 20.0, 40.0)
    for bad in ("abc", "0", "-1", "nan", "inf"):
        monkeypatch.setenv("GAPBENCH_LLM_OUTAGE_TIMEOUT", bad)
        with pytest.raises(ConfigError, match=re.escape(f"$GAPBENCH_LLM_OUTAGE_TIMEOUT='{bad}' is not accepted; set "
                                                        "it to a finite number of seconds > 0")):
            bounds()
    for field_name in ("timeout", "call_timeout", "outage_timeout"):
        for bad in (0, -2.0, float("nan"), float("inf")):
            with pytest.raises(ConfigError, match=f"LLMConfig.{field_name}="):
                LLMConfig(**{field_name: bad})


def test_a_hanging_endpoint_ends_every_call_within_the_outage_bound(tmp_path):
    with server_of(fault="hang", hang_max=10) as srv:
        client = make_client(srv, tmp_path, timeout=0.3, call_timeout=60, outage_timeout=1.0, max_retries=50,
                             concurrency=4)
        out = client.chat_many([f"p{i}" for i in range(8)], return_exceptions=True)
        hung = srv.counts["hang"]
    assert all(isinstance(o, LLMUnavailableError) for o in out)
    assert len({str(o) for o in out}) == 1  # the first call to give up speaks for all
    msg = str(out[0])
    assert msg.startswith(f"LLM endpoint {srv.base_url}/chat/completions did not answer within ")
    assert ("; gave up: no usable answer for 1 s, the limit for one command ($GAPBENCH_LLM_OUTAGE_TIMEOUT or "
            "outage_timeout). Check that the server is up") in msg
    usage = client.usage.total()
    assert usage["calls"] == hung and usage["failures"] == 8
    # four workers with at most 1 s / 0.3 s + 1 attempts each (51 allowed); the last four prompts were never sent
    assert 4 <= hung <= 20


def test_one_call_with_its_retries_is_bounded_by_call_timeout(tmp_path):
    with server_of(fault="hang", hang_max=10) as srv:
        client = make_client(srv, tmp_path, timeout=0.3, call_timeout=1.0, outage_timeout=60, max_retries=50)
        with pytest.raises(LLMUnavailableError) as err:
            client.chat("hello")
        assert 2 <= srv.counts["hang"] <= 4
    assert re.search(r"did not answer within [0-9.]+ s, after [2-4] attempts \(model 'judge'\); gave up: one call may "
                     r"take 1 s with its retries \(\$GAPBENCH_LLM_CALL_TIMEOUT or call_timeout\)\.", str(err.value))


def test_a_dripping_answer_is_cut_at_the_attempt_timeout(tmp_path):
    with server_of(fault="drip", drip_interval=0.05, fault_times=1) as srv, server_of() as clean:
        client = make_client(srv, tmp_path, timeout=0.5)
        assert client.chat("hello").text == make_client(clean, tmp_path).chat("hello").text
        assert srv.counts["drip"] == 1 and client.usage.total()["retries"] == 1
    with server_of(fault="drip", drip_interval=0.05) as srv:
        client = make_client(srv, tmp_path, timeout=0.5, max_retries=1)
        with pytest.raises(LLMUnavailableError, match=r"still fails after 2 attempts \(model 'judge'\): the answer was "
                                                      r"still arriving after 0\.5 s\. Check that the server is up"):
            client.chat("hello")


@pytest.mark.parametrize("fault", ["close", "close_mid_body", "html_502", "hang"])
def test_transient_faults_are_retried_to_the_fault_free_answer(tmp_path, fault):
    with server_of(fault=fault, fault_times=2, hang_max=10) as srv, server_of() as clean:
        client = make_client(srv, tmp_path, timeout=0.5)
        got = client.chat_many(["first", "second"], concurrency=1)
        vecs = client.embed_many(["a text", "another text"])
        expected = make_client(clean, tmp_path).chat_many(["first", "second"], concurrency=1)
        assert srv.counts[fault] == 2
    assert [r.text for r in got] == [r.text for r in expected]
    assert np.allclose(vecs, [LLMServer.embed(t, 64) for t in ["a text", "another text"]], atol=1e-6)
    assert client.usage.total()["retries"] == 2 and client.usage.total()["failures"] == 0


def test_an_html_error_page_is_summed_up_on_one_line(tmp_path):
    with server_of(fault="html_502") as srv:
        client = make_client(srv, tmp_path, max_retries=1)
        with pytest.raises(LLMUnavailableError) as err:
            client.chat("hello")
    assert str(err.value) == (
        f"LLM endpoint {srv.base_url}/chat/completions still answers HTTP 502 after 2 attempts (model 'judge'): "
        "502 Bad Gateway 502 Bad Gateway The upstream server did not answer. test-proxy. Check that the server is up and not "
        "overloaded, lower concurrency, or raise max_retries, the timeout ($GAPBENCH_LLM_TIMEOUT) or the limits; "
        "nothing was cached (cache=False).")
    assert err.value.status == 502


GARBAGE = {
    "not_json": "36 bytes of application/json text starting 'upstream said: OK but no JSON here {' where JSON was "
                "expected",
    "no_choices": "a JSON object without 'choices' (its keys: created, id, model, object, usage)",
    "empty_choices": "'choices' is empty, not a list with one answer",
    "null_content": "the message has no content (content null, finish_reason 'length'); the answer ran out of "
                    "tokens: raise max_tokens",
    "bad_schema": "choices[0] is a JSON string without a 'message' object",
    "error_200": "an error object with a success status: The model is overloaded; try again later (test server)",
    "html_200": "an HTML page ('Sign in Sign in to continue') where JSON was expected",
    "deep_json": "JSON nested too deeply to read",
}
GARBAGE_EMBEDDINGS = {
    "no_choices": "a JSON object without 'data' (its keys: model, object, usage)",
    "empty_choices": "0 embeddings came back for 2 texts",
    "bad_schema": "an item of 'data' has no 'embedding' list",
    "error_200": GARBAGE["error_200"],
    "html_200": GARBAGE["html_200"],
}


def _garbage_message(url: str, said: str) -> str:
    return (f"LLM endpoint {url} answered with something that is not an OpenAI-format response (model 'judge'): "
            f"{said}. Check that the base URL (base_url, or $OPENAI_BASE_URL) is the API root of an OpenAI-compatible "
            "server (it ends in /v1), not a proxy or sign-in page.")


@pytest.mark.parametrize("fault", list(GARBAGE))
def test_garbage_answers_are_one_clear_error_without_retries(tmp_path, fault):
    with server_of(fault=fault) as srv:
        client = make_client(srv, tmp_path, max_retries=5)
        with pytest.raises(LLMResponseError) as err:
            client.chat("hello")
        assert srv.calls == 1
        if fault in GARBAGE_EMBEDDINGS:
            with pytest.raises(LLMResponseError) as emb_err:
                client.embed_many(["a", "b"], "embedder")
            assert str(emb_err.value) == _garbage_message(f"{srv.base_url}/embeddings",
                                                          GARBAGE_EMBEDDINGS[fault]).replace("'judge'", "'embedder'")
    assert str(err.value) == _garbage_message(f"{srv.base_url}/chat/completions", GARBAGE[fault])
    assert client.usage.total()["failures"] >= 1


def test_a_valid_answer_with_the_wrong_content_type_is_accepted(tmp_path):
    with server_of(fault="text_plain") as srv, server_of() as clean:
        got = make_client(srv, tmp_path).chat_many([p for _, p in prompts()[:3]])
        expected = make_client(clean, tmp_path).chat_many([p for _, p in prompts()[:3]])
        assert srv.counts["text_plain"] == 3
    assert [r.text for r in got] == [r.text for r in expected]


def test_a_huge_body_is_cut_at_max_response_bytes(tmp_path):
    with server_of(fault="huge_body", huge_bytes=3 * 2**20) as srv:
        client = make_client(srv, tmp_path, max_response_bytes=2**20)
        with pytest.raises(LLMResponseError) as err:
            client.chat("hello")
    assert str(err.value) == _garbage_message(f"{srv.base_url}/chat/completions",
                                              "a body larger than 1048576 bytes (max_response_bytes)")


# ---------------------------------------------------------------------------------------- nothing computed is lost
def test_answers_before_an_outage_are_cached_and_reused(tmp_path):
    asked = [f"prompt {i}" for i in range(6)]
    with server_of(fault="hang", fault_after=3, hang_max=10) as srv:
        client = make_client(srv, tmp_path, cache=True, timeout=0.3, outage_timeout=0.8)
        with pytest.raises(LLMUnavailableError, match=re.escape(f"cached in {str(tmp_path / 'responses.sqlite')!r}, so "
                                                                "a re-run resumes where this one stopped.")):
            client.chat_many(asked, concurrency=1)
    with server_of() as clean:
        out = make_client(clean, tmp_path, cache=True).chat_many(asked, concurrency=1)
        assert clean.calls == 3
    assert [r.cached for r in out] == [True] * 3 + [False] * 3


GAP = ["gap", "impliret/multispeaker/wknow", "--retrievers", "bm25", "--depth", "5", "--pool-sizes", "",
       "--max-queries", "2", "--llm-model", "m"]


def _gap_calls(base_url: str, capsys) -> tuple[int, str]:
    code = main([*GAP, "--llm-base-url", base_url, "--json"])
    out, err = capsys.readouterr()
    assert err == "" or code != 0
    return code, err


def test_gap_stops_within_the_bound_and_resumes_from_the_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GAPBENCH_LLM_TIMEOUT", "0.5")
    monkeypatch.setenv("GAPBENCH_LLM_OUTAGE_TIMEOUT", "1.5")
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "fresh"))
    with LLMServer() as clean:
        assert _gap_calls(clean.base_url, capsys)[0] == 0
        full = clean.calls
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    with LLMServer(fault="hang", fault_after=1, hang_max=10) as srv:
        code, err = _gap_calls(srv.base_url, capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"gapbench: error: LLM endpoint {srv.base_url}/chat/completions did not answer within ")
    assert "gave up: no usable answer for 1.5 s, the limit for one command ($GAPBENCH_LLM_OUTAGE_TIMEOUT" in err
    with LLMServer() as clean:
        assert _gap_calls(clean.base_url, capsys)[0] == 0
        assert clean.calls == full - 1  # the one answer received before the outage came from the cache


# ----------------------------------------------------------------------------------------------- the key, end to end
def test_the_key_never_reaches_the_command_line_or_the_manifest(tmp_path, monkeypatch, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    seen: list[str] = []
    with socket.socket() as refused:
        refused.bind(("127.0.0.1", 0))
        port = refused.getsockname()[1]
        urls = [f"http://127.0.0.1:{port}/v1", f"http://user:{KEY}@127.0.0.1:{port}/v1?api_key={KEY}",
                f"http://127.0.0.1:{port}/{KEY}/v1"]
        for url in urls:
            assert main([*GAP, "--llm-base-url", url]) == 2
            seen.extend(capsys.readouterr())
    # short limits for the hanging server only: the answering ones get time enough on a loaded 2-core machine
    for server, limits in ((server_of(fault="hang", hang_max=10), ("0.3", "0.6")),
                           (server_of(fault="error_200"), ("60", "120")),
                           (server_of(api_key="sk-the-right-one-0000000000", echo_key=True), ("60", "120"))):
        monkeypatch.setenv("GAPBENCH_LLM_TIMEOUT", limits[0])
        monkeypatch.setenv("GAPBENCH_LLM_OUTAGE_TIMEOUT", limits[1])
        with server as srv:
            assert main([*GAP, "--llm-base-url", srv.base_url]) == 2
        seen.extend(capsys.readouterr())
    with server_of(api_key=KEY) as srv:
        assert main([*GAP, "--llm-base-url", srv.base_url, "-o", str(tmp_path / "gap")]) == 0
    seen.extend(capsys.readouterr())
    manifest = (tmp_path / "gap" / "gap.json").read_text()
    assert json.loads(manifest)["meta"]["llm"]["endpoint"] == srv.base_url
    seen += [manifest, caplog.text]
    assert "Incorrect API key provided: [redacted]" in "".join(seen)
    for text in seen:
        assert KEY not in text and "S3CRET" not in text, text


# ----------------------------------------------------------------------------------------------- cache from threads
def test_clients_made_from_eight_threads_at_once_share_one_new_cache_file(tmp_path):
    path = tmp_path / "new" / "responses.sqlite"
    start = threading.Barrier(8)

    def make_and_ask(k: int) -> str:
        start.wait()
        return make_client(srv, tmp_path, cache=path).chat(f"prompt {k}").text

    with server_of() as srv:
        with ThreadPoolExecutor(8) as pool:
            texts = list(pool.map(make_and_ask, range(8)))
        expected = [make_client(srv, tmp_path).chat(f"prompt {k}").text for k in range(8)]
    assert texts == expected
    cache = ResponseCache(path)
    assert len(cache) == 8 and cache._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_caches_opened_from_several_processes_and_threads_at_once(tmp_path):
    path = tmp_path / "shared.sqlite"
    script = (
        "import sys, threading\n"
        "from gapbench.llm.client import ResponseCache\n"
        "start = threading.Barrier(8)\n"
        "def work(k):\n"
        "    start.wait()\n"
        "    ResponseCache(sys.argv[1]).put(f'{sys.argv[2]}-{k}', 'm', {'text': str(k)})\n"
        "threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), f"p{i}"], stderr=subprocess.PIPE)
             for i in range(4)]
    errors = [p.communicate()[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    assert len(ResponseCache(path)) == 32


def test_a_damaged_cache_file_is_a_clear_error(tmp_path):
    path = tmp_path / "responses.sqlite"
    path.write_bytes(b"not a database, but a file in its place " * 50)
    with pytest.raises(GapbenchError) as err:
        ResponseCache(path)
    assert str(err.value) == (
        f"the LLM response cache {str(path)!r} cannot be opened (DatabaseError: file is not a database); if it is "
        "damaged, delete it (gapbench cache clear llm) and re-run, or point $GAPBENCH_HOME at a writable folder.")


def test_a_tournament_makes_one_client_from_its_worker_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    data = get_task("impliret/multispeaker/wknow").load()
    qids = data.qrels.positive_queries()[:16]
    docs = list(data.corpus)[:6]
    with server_of() as srv:
        rr = Tournament(llm_base_url=srv.base_url, llm_model="judge", concurrency=8)
        run = rr.rerank_pools(data.queries, {q: docs for q in qids}, data.corpus)
        assert srv.calls == 16
    assert rr.llm_requests == 16 and rr.llm_calls == 16  # every ranking counted by the one shared client
    assert sorted(run) == sorted(qids) and all(len(run[q]) == 6 for q in qids)


def test_openai_embed_reports_a_bad_endpoint_when_built_and_garbage_when_indexing(tmp_path, monkeypatch):
    from gapbench.adapters.openai_embed import OpenAIEmbed

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="'http://127.0.0.1:70000/v1' has a port that is not a number"):
        OpenAIEmbed(model="embedder", base_url="http://127.0.0.1:70000/v1")
    monkeypatch.setenv("GAPBENCH_LLM_TIMEOUT", "0.3")
    assert OpenAIEmbed(model="embedder", base_url="http://127.0.0.1:8000/v1").client.config.timeout == 0.3
    data = get_task("impliret/multispeaker/wknow").load()
    with server_of(fault="html_200") as srv:
        retriever = OpenAIEmbed(model="embedder", base_url=srv.base_url)
        with pytest.raises(LLMResponseError, match=re.escape(f"LLM endpoint {srv.base_url}/embeddings answered with "
                                                             "something that is not an OpenAI-format response (model "
                                                             "'embedder'): an HTML page")):
            retriever.index(data.corpus)


# ----------------------------------------------------------------------------------------------- sampling parameters
def ranked(srv: LLMServer, prompt: str) -> str:
    """The fault-free judge's whole answer to a listwise prompt, e.g. '[6] > [7] > [8] > [1] > ...'."""
    return srv.answer(prompt)[0]


def test_every_sampling_parameter_reaches_the_server_as_given(tmp_path):
    with server_of() as srv:
        make_client(srv, tmp_path).chat("hi")
        make_client(srv, tmp_path, temperature=0.7, top_p=0.9, max_tokens=64, seed=3, stop="\n\n",
                    extra={"reasoning_effort": "low", "top_k": 20}).chat("hi")
        make_client(srv, tmp_path, seed=None, max_tokens=None).chat("hi", stop=["a", "b"], temperature=1.0)
        got = list(srv.received)
    assert got == [
        {"model": "judge", "temperature": 0.0, "max_tokens": 512, "seed": 0},
        {"model": "judge", "temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "seed": 3, "stop": ["\n\n"],
         "reasoning_effort": "low", "top_k": 20},
        {"model": "judge", "temperature": 1.0, "stop": ["a", "b"]},
    ]


@pytest.mark.parametrize("change", [{"temperature": 0.5}, {"top_p": 0.5}, {"max_tokens": 100}, {"seed": 1},
                                    {"stop": "END"}, {"extra": {"reasoning_effort": "high"}}])
def test_each_parameter_changes_the_cache_key_and_the_fingerprint(tmp_path, change):
    with server_of() as srv:
        base = make_client(srv, tmp_path, cache=True)
        other = make_client(srv, tmp_path, cache=True, **change)
        assert cache_key(other.payload(ChatRequest("hi"))) != cache_key(base.payload(ChatRequest("hi")))
        assert other.fingerprint != base.fingerprint
        base.chat("hi")
        assert other.chat("hi").cached is False  # never the answer made with the other parameters
        assert base.chat("hi").cached and other.chat("hi").cached
        assert srv.calls == 2


def test_the_fingerprint_of_the_first_four_parameters_is_unchanged(tmp_path):
    import hashlib

    with server_of() as srv:
        client = make_client(srv, tmp_path)
        capped = make_client(srv, tmp_path, max_tokens_cap=100)
    old = hashlib.sha256(json.dumps(["judge", 0.0, 512, 0]).encode()).hexdigest()  # fingerprints of earlier runs
    assert client.fingerprint == old and capped.fingerprint != old


def test_refused_parameters_are_sent_again_without_them_for_the_rest_of_the_command(tmp_path):
    ps = [ChatRequest(p, tag=qid) for qid, p in prompts()[:4]]
    refuse = {"max_tokens": "max_completion_tokens", "temperature": None, "seed": None}
    with server_of(reject_params=refuse) as srv:
        client = make_client(srv, tmp_path, cache=True)
        out = client.chat_many(ps, concurrency=1)
        got, counts = list(srv.received), srv.counts
        again = make_client(srv, tmp_path, cache=True)
        again.chat_many(ps)
        assert srv.calls == 4 + 3  # the re-run: all cached
    assert [r.text for r in out] == [ranked(srv, r.messages) for r in ps]
    # the first request learns one refusal at a time, the others go out right at once
    assert got[:4] == [{"model": "judge", "temperature": 0.0, "max_tokens": 512, "seed": 0},
                       {"model": "judge", "temperature": 0.0, "max_completion_tokens": 512, "seed": 0},
                       {"model": "judge", "max_completion_tokens": 512, "seed": 0},
                       {"model": "judge", "max_completion_tokens": 512}]
    assert got[4:] == [{"model": "judge", "max_completion_tokens": 512}] * 3
    assert counts["refused:max_tokens"] == counts["refused:temperature"] == counts["refused:seed"] == 1
    usage = client.usage.record().model_dump()
    assert usage["calls"] == 7 and usage["resent"] == 3 and usage["failures"] == 0
    assert usage["per_query"]["q0"]["resent"] == 3 and usage["per_query"]["q1"]["resent"] == 0
    manifest = client.manifest()
    assert manifest["temperature"] == 0.0 and manifest["max_tokens"] == 512  # asked for
    assert manifest["sent"] == {"max_completion_tokens": 512}  # what the server got
    assert manifest["refused"]["max_tokens"] == ("Unsupported parameter: 'max_tokens' is not supported with this "
                                                 "model. Use 'max_completion_tokens' instead.")
    assert sorted(manifest["refused"]) == ["max_tokens", "seed", "temperature"]
    assert again.manifest()["sent"] == {"max_completion_tokens": 512}  # learnt from the cache


def test_the_refusal_is_what_the_openai_package_parses(tmp_path):
    import openai
    with server_of(reject_params={"max_tokens": "max_completion_tokens"}) as srv:
        api = openai.OpenAI(base_url=srv.base_url, api_key="EMPTY", max_retries=0)
        with pytest.raises(openai.BadRequestError) as err:
            api.chat.completions.create(model="judge", messages=[{"role": "user", "content": "hi"}], max_tokens=5)
    assert err.value.status_code == 400 and err.value.param == "max_tokens"
    assert err.value.code == "unsupported_parameter" and err.value.type == "invalid_request_error"


def test_a_parameter_named_only_in_the_message_is_left_out(tmp_path):
    with server_of(reject_params={"seed": None, "top_k": None}, reject_style="llama.cpp") as srv:
        client = make_client(srv, tmp_path, extra={"top_k": 20})
        assert client.chat("hi").text.startswith("echo ")
        got = list(srv.received)
    assert got == [{"model": "judge", "temperature": 0.0, "max_tokens": 512, "seed": 0, "top_k": 20},
                   {"model": "judge", "temperature": 0.0, "max_tokens": 512, "top_k": 20},
                   {"model": "judge", "temperature": 0.0, "max_tokens": 512}]
    assert client.manifest()["refused"] == {"seed": "Unsupported param: seed", "top_k": "Unsupported param: top_k"}


def test_a_refused_extra_field_is_left_out_and_other_400s_fail_at_once(tmp_path):
    with server_of(reject_params={"reasoning_effort": None}) as srv:
        client = make_client(srv, tmp_path, extra={"reasoning_effort": "low"})
        assert client.chat("hi").text.startswith("echo ")
        assert srv.received[-1] == {"model": "judge", "temperature": 0.0, "max_tokens": 512, "seed": 0}
        assert client.manifest()["sent"] == {"temperature": 0.0, "max_tokens": 512, "seed": 0}
        srv.force_status = 400  # an error that names no parameter: not sent again
        with pytest.raises(LLMRequestError, match="answered HTTP 400 .* not retried: forced status 400"):
            client.chat("other")
    assert client.usage.total()["calls"] == 3 and client.usage.total()["resent"] == 1


def test_an_answer_cut_by_its_budget_is_asked_again_with_double_the_budget(tmp_path):
    (qid, prompt), = prompts()[:1]  # the judge's answer: 8 ids and 7 '>', 15 tokens
    with server_of(enforce_max_tokens=True) as srv:
        client = make_client(srv, tmp_path, max_tokens=10)
        out = client.chat(prompt, tag=qid)
        budgets = [r["max_tokens"] for r in srv.received]
    assert budgets == [10, 20]
    assert out.text == ranked(srv, prompt) and out.finish_reason == "stop" and not out.truncated
    assert client.usage.record().model_dump()["per_query"][qid] | {"cost": None} == {
        "requests": 1, "calls": 2, "retries": 0, "cache_hits": 0, "failures": 0,
        "prompt_tokens": 2 * len(prompt.split()), "completion_tokens": 10 + 15, "resent": 0, "length_reasks": 1, "truncated": 0, "cost": None}


def test_an_answer_cut_again_is_marked_truncated_and_counted_per_query(tmp_path):
    ps = prompts()[:3]
    with server_of(enforce_max_tokens=True) as srv:
        client = make_client(srv, tmp_path, cache=True, max_tokens=4, max_tokens_cap=6)
        out = client.chat_many([ChatRequest(p, tag=q) for q, p in ps] + [ChatRequest("hi", tag="q9")])
        budgets = sorted(r["max_tokens"] for r in srv.received)
        again = make_client(srv, tmp_path, cache=True, max_tokens=4, max_tokens_cap=6)
        cached = again.chat_many([ChatRequest(p, tag=q) for q, p in ps])
        assert srv.calls == 3 * 2 + 1
    assert budgets == [4, 4, 4, 4, 6, 6, 6]  # "echo <digest>" fits in 4 tokens
    for (q, p), r in zip(ps, out):
        assert r.truncated and r.finish_reason == "length" and r.text == " ".join(ranked(srv, p).split()[:6])
    assert not out[3].truncated
    usage = client.usage.record().model_dump()
    assert usage["truncated"] == 3 and usage["length_reasks"] == 3
    assert all(usage["per_query"][q]["truncated"] == 1 for q, _ in ps) and usage["per_query"]["q9"]["truncated"] == 0
    assert all(r.cached and r.truncated for r in cached)
    assert again.usage.total()["truncated"] == 3 and again.usage.total()["calls"] == 0


def test_no_reask_when_the_budget_is_already_at_the_cap_and_the_rename_carries_the_larger_budget(tmp_path):
    (qid, prompt), = prompts()[:1]
    with server_of(enforce_max_tokens=True) as srv:
        out = make_client(srv, tmp_path, max_tokens=8, max_tokens_cap=8).chat(prompt, tag=qid)
        assert [r["max_tokens"] for r in srv.received] == [8] and out.truncated
    with server_of(enforce_max_tokens=True, reject_params={"max_tokens": "max_completion_tokens"}) as srv:
        out = make_client(srv, tmp_path, max_tokens=10).chat(prompt, tag=qid)
        sent = [r.get("max_completion_tokens", r.get("max_tokens")) for r in srv.received]
        assert sent == [10, 10, 20] and "max_tokens" not in srv.received[-1]
    assert out.text == ranked(srv, prompt) and not out.truncated


def test_a_tournament_gets_the_whole_answer_after_the_budget_reask(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    docs = list(CORPUS)[:6]
    with server_of(enforce_max_tokens=True) as srv:
        client = make_client(srv, tmp_path, max_tokens=6)  # 6 ids need 11 tokens
        rr = Tournament(client=client, batch_size=6, promote=2, max_final=6)
        run = rr.rerank_pools({q: Query(q, QUERIES[q]) for q in ("q1", "q2")}, {"q1": docs, "q2": docs},
                              {d: Document(d, CORPUS[d]) for d in docs})
    assert rr.ranker.repaired == 0 and rr.ranker.reasked == 0
    assert client.usage.total()["length_reasks"] == 2 and client.usage.total()["truncated"] == 0
    for q in ("q1", "q2"):
        order = srv.ideal_order(QUERIES[q], [CORPUS[d] for d in docs])
        assert [d for d, _ in run[q]] == [docs[i] for i in order]


def test_the_cli_options_reach_every_request_and_the_manifest(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    opts = ["--llm-temperature", "0.3", "--llm-top-p", "0.5", "--llm-max-tokens", "300", "--llm-seed", "7",
            "--llm-stop", "END", "--llm-stop", "STOP", "--llm-extra", "reasoning_effort=low",
            "--llm-extra", '{"top_k": 20, "min_p": 0.1}', "--llm-extra", "top_k=40"]
    with LLMServer(reject_params={"seed": None}) as srv:
        assert main([*GAP, "--llm-base-url", srv.base_url, *opts, "-o", str(tmp_path / "gap")]) == 0
        got, refused = list(srv.received), srv.counts["refused:seed"]
    capsys.readouterr()
    asked = {"model": "m", "temperature": 0.3, "top_p": 0.5, "max_tokens": 300, "stop": ["END", "STOP"],
             "reasoning_effort": "low", "top_k": 40, "min_p": 0.1}
    # queries run side by side: each one sent before the first refusal came back carries the seed once
    assert got.count({**asked, "seed": 7}) == refused >= 1 and got.count(asked) == len(got) - refused >= 2
    llm = json.loads((tmp_path / "gap" / "gap.json").read_text())["meta"]["llm"]
    assert llm["usage"]["resent"] == refused
    assert llm["temperature"] == 0.3 and llm["seed"] == 7 and llm["extra"] == {"reasoning_effort": "low", "top_k": 40,
                                                                                 "min_p": 0.1}
    assert llm["sent"] == {k: v for k, v in asked.items() if k != "model"} and list(llm["refused"]) == ["seed"]
    with LLMClient(model="m", base_url=srv.base_url) as plain:  # the options end with the command
        assert plain.config.temperature == 0.0 and plain.config.extra == {}


@pytest.mark.parametrize("args, said", [
    (["--llm-temperature", "-1"], "--llm-temperature -1.0 is not accepted; give a number from 0 to 2."),
    (["--llm-temperature", "nan"], "--llm-temperature nan is not accepted; give a number from 0 to 2."),
    (["--llm-top-p", "2"], "--llm-top-p 2.0 is not accepted; give a number from 0 to 1"),
    (["--llm-max-tokens", "0"], "--llm-max-tokens 0 is not accepted; give an integer >= 1"),
    (["--llm-stop", ""], "--llm-stop [''] is not accepted; give one to four non-empty strings"),
    (["--llm-extra", "oops"], "--llm-extra 'oops' is not key=value; give a request field and its value"),
    (["--llm-extra", "{bad"], "--llm-extra '{bad' starts like a JSON object but is not one"),
    (["--llm-extra", "temperature=1"], "--llm-extra field 'temperature' has its own setting"),
    (["--llm-extra", "n=2"], "--llm-extra field 'n' is not accepted"),
    (["--llm-extra", "x=NaN"], "--llm-extra field 'x' = nan is not a JSON value"),
])
def test_bad_cli_values_exit_2_with_one_line_before_any_call(tmp_path, monkeypatch, capsys, args, said):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    with LLMServer() as srv:
        for command in (GAP, ["run", "impliret/multispeaker/wknow", "-r", "bm25", "--reranker", "tournament",
                              "--llm-model", "m"]):
            assert main([*command, "--llm-base-url", srv.base_url, *args]) == 2
            out, err = capsys.readouterr()
            assert out == "" and err.count("\n") == 1 and err.startswith(f"gapbench: error: {said}"), err
        assert srv.calls == 0


@pytest.mark.parametrize("option, value", [("--llm-temperature", "0.5"), ("--llm-stop", "END"),
                                           ("--llm-extra", "top_k=20")])
def test_a_suite_run_refuses_llm_options_it_would_not_use(capsys, option, value):
    assert main(["run", "impliret", "-r", "bm25", option, value]) == 2
    out, err = capsys.readouterr()
    assert err == (f"gapbench: error: impliret is a suite, and a suite run takes no {option}; run its tasks one by one "
                   f"with {option} (`gapbench tasks` lists them).\n")


# ----------------------------------------------------------------------------------------------- adaptive concurrency
def test_a_single_slot_server_ends_with_one_request_at_a_time_and_none_times_out(tmp_path):
    ps = [p for _, p in prompts()[:8]]
    with server_of(slots=1, latency=0.25) as srv, server_of() as clean:
        # 0.6 s per attempt: the last of 8 sent at once waits 2 s in the server's queue, served behind the others
        client = make_client(srv, tmp_path, timeout=0.6, concurrency=8)
        got = client.chat_many(ps)
        first = list(srv.arrivals)
        srv.reset_counts()
        client.chat_many([p for _, p in prompts(6)[:8]])
        later = list(srv.arrivals)
        expected = make_client(clean, tmp_path).chat_many(ps)
    assert [r.text for r in got] == [r.text for r in expected]
    assert sorted(first) == list(range(1, 9))  # all 8 went out at once, before anything was known
    assert later == [1] * 8  # then one at a time
    usage = client.usage.total()
    assert usage["calls"] == 16 and usage["retries"] == 0 and usage["failures"] == 0
    pacing = client.manifest()["pacing"]
    assert 1.0 <= pacing["lowest"] <= pacing["limit"] < 2.0 and pacing["cuts"] >= 3  # one place: 8 -> 4 -> 2 -> 1


def test_a_fixed_concurrency_keeps_eight_in_flight_on_a_single_slot_server(tmp_path):
    with server_of(slots=1, latency=0.1) as srv:
        client = make_client(srv, tmp_path, timeout=0.5, concurrency=8, adaptive=False)
        client.chat_many([f"p{i}" for i in range(16)])
        assert srv.max_in_flight == 8 and sum(a >= 7 for a in srv.arrivals) >= 10
    assert client.manifest()["pacing"] == {"adaptive": False, "limit": 8.0, "lowest": 8.0, "cuts": 0}
    assert client.usage.total()["retries"] == 0  # a request behind 7 others waits 0.8 s: its deadline moves on


def test_a_fast_server_keeps_eight_in_flight(tmp_path):
    with server_of(latency=0.3) as srv:
        client = make_client(srv, tmp_path, concurrency=8)
        client.chat_many([f"p{i}" for i in range(24)])
        assert srv.max_in_flight == 8  # eight requests on the server at once: the client never waited for one
    assert client.manifest()["pacing"] == {"adaptive": True, "limit": 8.0, "lowest": 8.0, "cuts": 0}


@pytest.mark.parametrize("status", [429, 503])
def test_an_overloaded_server_lowers_concurrency_and_every_request_completes(tmp_path, status):
    ps = [ChatRequest(p, tag=qid) for qid, p in prompts()]
    with server_of(overload_at=2, overload_status=status, latency=0.1) as srv, server_of() as clean:
        client = make_client(srv, tmp_path, concurrency=8, max_retries=10)
        got = client.chat_many(ps)
        counts = srv.counts
        expected = make_client(clean, tmp_path).chat_many(ps)
    assert [r.text for r in got] == [r.text for r in expected]
    usage = client.usage.total()
    assert counts[str(status)] > 0 and usage["retries"] == counts[str(status)] and usage["failures"] == 0
    pacing = client.manifest()["pacing"]
    assert pacing["lowest"] <= 2.0 and pacing["cuts"] >= 2  # 8 -> 4 -> 2, once per round


def test_retry_after_holds_every_new_request(tmp_path):
    with server_of(overload_at=1, retry_after=0.4, latency=0.05) as srv:
        client = make_client(srv, tmp_path, concurrency=4)
        client.chat_many([f"p{i}" for i in range(4)])
        times, arrivals = list(srv.arrival_times), list(srv.arrivals)
        refused = srv.counts["429"]
    assert len(arrivals) == 4 + refused and refused >= 3
    burst_end = max(times[:4])
    assert all(t >= burst_end + 0.39 for t in times[4:])  # none before the Retry-After passed


def test_the_attempt_time_grows_with_the_prompt_within_the_call_bound(tmp_path):
    long = "word " * 1000  # 5,000 characters: about 1,250 tokens
    with server_of(latency=0.6) as srv:
        client = make_client(srv, tmp_path, timeout=0.3, timeout_tokens=100, max_retries=0)
        assert client.chat(long).text.startswith("echo ")  # 0.3 s x 1250 / 100 = 3.75 s
        with pytest.raises(LLMUnavailableError, match=r"did not answer within 0\.3 s, after 1 attempt"):
            client.chat("a short prompt")
        bounded = make_client(srv, tmp_path, timeout=0.3, timeout_tokens=100, max_retries=0, call_timeout=0.45)
        with pytest.raises(LLMUnavailableError, match=r"did not answer within 0\.4[0-9]* s, after 1 attempt"):
            bounded.chat(long + "again")
    assert prompt_tokens(["abcd" * 10, {"role": "user", "content": "abcde"}]) == 12


def test_adaptive_and_timeout_tokens_are_checked():
    for name, bad in (("adaptive", "yes"), ("timeout_tokens", 0), ("timeout_tokens", 2.5)):
        with pytest.raises(ConfigError, match=f"LLMConfig.{name}="):
            LLMConfig(**{name: bad})


def test_a_failed_batch_makes_none_of_the_calls_still_waiting_for_a_place(tmp_path):
    with server_of(slots=1, latency=0.1) as srv:
        client = make_client(srv, tmp_path, timeout=1.0)
        client.chat_many([f"p{i}" for i in range(8)])  # the limit falls to one place
        assert client.manifest()["pacing"]["limit"] < 2.0
        srv.force_status = 400
        srv.reset_counts()
        with pytest.raises(LLMRequestError, match="answered HTTP 400"):
            client.chat_many([f"r{i}" for i in range(8)])
        assert srv.calls == 1  # the seven waiting for the place were not sent


def test_sigterm_during_an_llm_call_ends_the_command_at_once(tmp_path):
    """An interrupted command does not sit on the answers in flight: its worker threads see the command ending and give
    up, so SIGTERM ends `gapbench gap` within seconds even though the server never answers and the attempt's own
    bound is 120 s (it used to wait for the attempt, minutes on a slow llama.cpp server)."""
    import signal
    import subprocess
    import sys

    with LLMServer(fault="hang", hang_max=60) as srv:
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
        env.update(HF_HUB_OFFLINE="1", GAPBENCH_HOME=str(tmp_path / "home"), GAPBENCH_LLM_TIMEOUT="120")
        proc = subprocess.Popen([sys.executable, "-m", "gapbench", "gap", "impliret/multispeaker/wknow", "--retrievers",
                                 "bm25", "--depth", "5", "--pool-sizes", "", "--max-queries", "2", "--llm-base-url",
                                 srv.base_url, "--llm-model", "m"], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while srv.counts.get("hang", 0) < 1 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert srv.counts.get("hang", 0) >= 1, proc.communicate(timeout=5)
        time.sleep(0.5)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        ended = time.monotonic() - start
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1].startswith("gapbench: interrupted by SIGTERM"), err
    assert ended < 10, f"took {ended:.1f} s to end"


def test_an_abandoned_attempt_closes_its_connection(tmp_path):
    """A request the client stops waiting for is not left open: llama.cpp's server, for one, checks the connection before
    it starts a queued request, so an abandoned one must not hold its single slot (the attempt's hard bound is 30 s)."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict[str, float] = {}

    def serve():
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            seen["request"] = time.monotonic()
            conn.settimeout(30)
            try:
                while conn.recv(65536):  # never answers; returns b"" once the client shuts the connection
                    pass
            except OSError:
                pass
            seen["closed"] = time.monotonic()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    # preflight off: this server takes one connection, the chat request's (the preflight would be named instead)
    client = LLMClient(base_url=f"http://127.0.0.1:{listener.getsockname()[1]}/v1", model="judge", cache=False,
                       timeout=0.4, call_timeout=30, outage_timeout=30, max_retries=0, preflight_timeout=0)
    with pytest.raises(LLMUnavailableError, match="did not answer within 0.4 s"):
        client.chat("hello")
    thread.join(10)
    listener.close()
    assert "closed" in seen, "the abandoned connection was still open 10 s after the client gave up"
    assert seen["closed"] - seen["request"] < 3.0


# ----------------------------------------------------------------------------------------------- preflight
def test_preflight_names_an_endpoint_that_accepts_connections_and_never_answers():
    """An endpoint that accepts connections and never answers used to hold a command for the calls' time bounds
    (120-300 s) before any message; GET /models before the first call names it after preflight_timeout, and no chat
    request is sent to it."""
    from llm_server import SilentServer

    with SilentServer() as srv:
        client = LLMClient(base_url=srv.base_url, model="judge", cache=False, preflight_timeout=1.5)
        with pytest.raises(LLMUnavailableError) as err:
            client.chat("hello")
        assert srv.requests == ["GET /v1/models HTTP/1.1"]
    message = str(err.value)
    assert message.startswith(f"LLM endpoint {srv.base_url} accepted the connection but sent no answer to GET /models "
                              f"within 1.5 s ({srv.base_url}/models, checked before the first call)"), message
    assert "$GAPBENCH_LLM_PREFLIGHT_TIMEOUT" in message and err.value.endpoint == f"{srv.base_url}/models"


def test_preflight_in_a_command_names_the_endpoint(tmp_path, monkeypatch, capsys):
    """gapbench run with rewrite: against such an endpoint exits 2 with the preflight's message."""
    from gapbench.cli import main
    from llm_server import SilentServer

    monkeypatch.setenv("GAPBENCH_LLM_PREFLIGHT_TIMEOUT", "1")
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    with SilentServer() as srv:
        code = main(["run", "tests/fixtures/beir/scifact", "-r", "rewrite:bm25", "--llm-base-url", srv.base_url,
                     "--llm-model", "judge", "-m", "nDCG@10"])
        assert srv.requests == ["GET /v1/models HTTP/1.1"]
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"gapbench: error: LLM endpoint {srv.base_url} accepted the connection but "
                                        "sent no answer to GET /models within 1 s"), err


def test_preflight_passes_a_server_without_models_route_and_checks_once(tmp_path):
    """A 404 on /models is an answer (some servers lack the route): the call goes ahead. An endpoint that answered is
    not checked again by later clients of the process; preflight_timeout=0 skips the check."""
    with server_of() as srv:
        srv.models_route = False
        first = make_client(srv, tmp_path)
        assert first.chat("hello").text.startswith("echo ")
        assert make_client(srv, tmp_path).chat("again").text.startswith("echo ")
        assert (srv.counts["models:404"], srv.counts["models"], srv.counts["chat"]) == (1, 0, 2)
    with server_of() as srv:
        assert make_client(srv, tmp_path, preflight_timeout=0).chat("hello").text.startswith("echo ")
        assert (srv.counts["models"], srv.counts["models:404"], srv.counts["chat"]) == (0, 0, 1)
    with server_of() as srv:
        make_client(srv, tmp_path).chat("hello")
        assert srv.counts["models"] == 1


def test_preflight_timeout_is_checked(monkeypatch):
    with pytest.raises(ConfigError, match="preflight_timeout=-1"):
        LLMConfig(preflight_timeout=-1)
    monkeypatch.setenv("GAPBENCH_LLM_PREFLIGHT_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match=r"\$GAPBENCH_LLM_PREFLIGHT_TIMEOUT='soon' is not accepted.*>= 0 \(0: off\)"):
        LLMClient(base_url="http://127.0.0.1:8000/v1", model="m", cache=False)
    monkeypatch.setenv("GAPBENCH_LLM_PREFLIGHT_TIMEOUT", "0")
    assert LLMClient(base_url="http://127.0.0.1:8000/v1", model="m", cache=False).config.preflight_timeout == 0
    monkeypatch.delenv("GAPBENCH_LLM_PREFLIGHT_TIMEOUT")
    assert LLMClient(base_url="http://127.0.0.1:8000/v1", model="m", cache=False).describe()["preflight_timeout"] == 10
