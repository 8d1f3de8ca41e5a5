"""LLM endpoints that refuse, hang or answer garbage, met by ``gapbench gap`` and ``gapbench run --reranker``.

The endpoints are real: a port that is bound but never listens (so it refuses), host names that do not resolve,
malformed base URLs, and local OpenAI-compatible servers (tests/llm_server.py) that hang, drip, hang up, or answer
with HTML, non-JSON or JSON of the wrong shape. The servers are started once, when this module is imported, in daemon
threads; a hanging handler lets go after 30 s or when the process ends. Each case gets small time bounds through
``$GAPBENCH_LLM_*`` and its own ``$GAPBENCH_HOME``, so no answer cached by one case serves another. Fault-free
servers, a valid answer labelled text/plain and a dropped first connection must succeed.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from llm_server import LLMServer

from . import Case

TASK = "impliret/multispeaker/wknow"
KEY = "sk-hostile-FAKEKEY-0123456789abcdef"
BOUNDS = {"GAPBENCH_HOME": "{tmp}/home", "GAPBENCH_LLM_TIMEOUT": "1", "GAPBENCH_LLM_CALL_TIMEOUT": "3",
          "GAPBENCH_LLM_OUTAGE_TIMEOUT": "2", "OPENAI_API_KEY": KEY}
FIX = "--llm-base-url (or $OPENAI_BASE_URL)"

# bound and never listening: connections to it are refused for as long as this process holds it
_REFUSING = socket.socket()
_REFUSING.bind(("127.0.0.1", 0))
REFUSED = f"http://127.0.0.1:{_REFUSING.getsockname()[1]}/v1"


def _server(**kwargs) -> str:
    # never stopped, so it need not look for a stop often
    return LLMServer(hang_max=30.0, drip_interval=0.1, **kwargs).start(poll_interval=5.0).base_url


def _chat(url: str) -> str:
    return f"{url}/chat/completions"


SERVERS = {fault: _server(fault=fault) for fault in (
    "hang", "drip", "close", "close_mid_body", "not_json", "no_choices", "empty_choices", "null_content",
    "bad_schema", "error_200", "html_502", "html_200", "deep_json", "text_plain")}
SERVERS["ok"] = _server()
SERVERS["models"] = _server(models={"judge"})
SERVERS["key"] = _server(api_key="sk-the-right-one-0000000000", echo_key=True)
SERVERS["flaky"] = _server(fault="close", fault_times=1)  # the first request of the session only


def gap(case_id: str, url: str, names=(), *, expect: int = 2, model: str = "m", env=None, setup=None,
        process: bool = False) -> Case:
    argv = ["gap", TASK, "--retrievers", "bm25", "--depth", "5", "--pool-sizes", "", "--max-queries", "2",
            "--llm-base-url", url, "--llm-model", model]
    return Case(case_id, argv, expect=expect, names=tuple(names), env={**BOUNDS, **(env or {})}, setup=setup,
                process=process)


_DOCS = [
    {"_id": "d1", "title": "Apple orchards", "text": "Apple trees grow in orchards and give apples in autumn."},
    {"_id": "d2", "title": "Banana farming", "text": "Banana plants need warm weather and a lot of water."},
    {"_id": "d3", "title": "Cherry blossom", "text": "Cherry trees blossom in spring; the fruit ripens in summer."},
    {"_id": "d4", "title": "Date palms", "text": "Date palms grow in deserts near oases and give sweet dates."},
]
BEIR = {
    "beir/corpus.jsonl": "".join(json.dumps(d) + "\n" for d in _DOCS),
    "beir/queries.jsonl": '{"_id": "q1", "text": "which trees give apples"}\n'
                          '{"_id": "q2", "text": "plants that need warm weather"}\n',
    "beir/qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq2\td2\t1\n",
}


def rerank(case_id: str, url: str, names=(), *, expect: int = 2, process: bool = False) -> Case:
    argv = ["run", "{tmp}/beir", "-r", "bm25", "-m", "nDCG@10", "--reranker", "tournament:depth=4",
            "--llm-base-url", url, "--llm-model", "m"]
    return Case(case_id, argv, files=BEIR, expect=expect, names=tuple(names), env=BOUNDS, process=process)


def _damaged_cache(tmp: Path) -> None:
    path = tmp / "home" / "cache" / "llm" / "responses.sqlite"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is no SQLite database " * 40)


CASES: list[Case] = [
    # nothing there, or no address at all: at once, naming the endpoint and where to fix it
    gap("refused-port", REFUSED, [_chat(REFUSED), "connection refused: nothing listens on", "Start the server", FIX]),
    gap("unknown-host", "http://gapbench-no-such-host.invalid:8000/v1",
        ["'gapbench-no-such-host.invalid' does not resolve", FIX]),
    gap("port-out-of-range", "http://127.0.0.1:99999/v1",
        ["'http://127.0.0.1:99999/v1' has a port that is not a number", "$OPENAI_BASE_URL"]),
    gap("port-not-a-number", "http://127.0.0.1:8o00/v1", ["'http://127.0.0.1:8o00/v1' has a port that is not"]),
    gap("port-zero", "http://127.0.0.1:0/v1", ["has port 0, where no server listens"]),
    gap("space-in-host", "http://local host:8000/v1", ["'http://local host:8000/v1' contains spaces"]),
    gap("no-scheme", "localhost:8000/v1", ["'localhost:8000/v1' is not an http(s) URL", "--llm-base-url"]),
    gap("unclosed-ipv6", "http://[::1/v1", ["'http://[::1/v1' is not an http(s) URL"]),
    gap("key-in-url", f"http://user:{KEY}@127.0.0.1:99999/v1?api_key={KEY}",
        ["'http://127.0.0.1:99999/v1' has a port"]),
    gap("empty-model", SERVERS["ok"], ["--llm-model"], model=""),
    gap("timeout-not-a-number", SERVERS["ok"], ["$GAPBENCH_LLM_TIMEOUT='soon' is not accepted", "seconds > 0"],
        env={"GAPBENCH_LLM_TIMEOUT": "soon"}),
    gap("outage-bound-zero", SERVERS["ok"], ["$GAPBENCH_LLM_OUTAGE_TIMEOUT='0' is not accepted"],
        env={"GAPBENCH_LLM_OUTAGE_TIMEOUT": "0"}),
    gap("call-bound-nan", SERVERS["ok"], ["$GAPBENCH_LLM_CALL_TIMEOUT='nan' is not accepted"],
        env={"GAPBENCH_LLM_CALL_TIMEOUT": "nan"}),
    # endpoints that answer too slowly, or not at all: within the bounds set above
    gap("accepts-never-answers", SERVERS["hang"],
        [_chat(SERVERS["hang"]), "did not answer within", "no usable answer for 2 s", "$GAPBENCH_LLM_OUTAGE_TIMEOUT"]),
    gap("slow-drip", SERVERS["drip"], [_chat(SERVERS["drip"]), "the answer was still arriving after"]),
    gap("hangs-up-at-once", SERVERS["close"], [_chat(SERVERS["close"]), "Server disconnected without sending"]),
    gap("hangs-up-mid-body", SERVERS["close_mid_body"], ["peer closed connection without sending complete message"]),
    gap("html-502-page", SERVERS["html_502"], ["still answers HTTP 502", "502 Bad Gateway The upstream server"]),
    # answers that are not OpenAI-format responses: one clear line, no retry
    gap("not-json", SERVERS["not_json"], [_chat(SERVERS["not_json"]), "where JSON was expected", FIX]),
    gap("no-choices", SERVERS["no_choices"], ["a JSON object without 'choices'"]),
    gap("empty-choices", SERVERS["empty_choices"], ["'choices' is empty"]),
    gap("null-content", SERVERS["null_content"], ["content null, finish_reason 'length'", "raise max_tokens"]),
    gap("choices-are-strings", SERVERS["bad_schema"], ["choices[0] is a JSON string without a 'message' object"]),
    gap("error-object-with-200", SERVERS["error_200"], ["an error object with a success status: The model is"]),
    gap("sign-in-page-with-200", SERVERS["html_200"], ["an HTML page ('Sign in Sign in to continue')"]),
    gap("json-nested-100000-deep", SERVERS["deep_json"], ["JSON nested too deeply to read"]),
    # the endpoint refuses the request itself
    gap("wrong-key-echoed", SERVERS["key"], ["answered HTTP 401", "Incorrect API key provided: [redacted]",
                                             "$OPENAI_API_KEY"]),
    gap("unknown-model", SERVERS["models"], ["answered HTTP 404", "The model `m` does not exist",
                                             "Check the model name"]),
    gap("damaged-cache-file", SERVERS["ok"], ["{tmp}/home/cache/llm/responses.sqlite' cannot be opened",
                                              "gapbench cache clear llm"], setup=_damaged_cache),
    # gapbench run with the tournament reranker, in-process and as a real process that must end within the bound
    rerank("run-refused-port", REFUSED, [_chat(REFUSED), "connection refused", FIX]),
    rerank("run-accepts-never-answers", SERVERS["hang"], ["did not answer within", "no usable answer for 2 s"],
           process=True),
    rerank("run-garbage", SERVERS["not_json"], ["where JSON was expected"]),
    rerank("run-unknown-host", "http://gapbench-no-such-host.invalid/v1", ["does not resolve"], process=True),
    gap("gap-accepts-never-answers-process", SERVERS["hang"], ["did not answer within"], process=True),
    # valid endpoints
    gap("fault-free", SERVERS["ok"], expect=0),
    gap("answer-labelled-text-plain", SERVERS["text_plain"], expect=0),
    gap("first-connection-dropped", SERVERS["flaky"], expect=0),
    gap("pasted-endpoint-url", f"{SERVERS['ok']}/chat/completions", expect=0),
    rerank("run-fault-free", SERVERS["ok"], expect=0),
]
