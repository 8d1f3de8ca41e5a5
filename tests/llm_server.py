"""A real, local OpenAI-compatible HTTP server for tests and benchmarks (a helper module, not a test file).

It speaks ``POST /v1/chat/completions``, ``POST /v1/embeddings`` and ``GET /v1/models`` in the OpenAI wire format,
``usage`` token counts included (tokens = whitespace-separated words), on 127.0.0.1 at a free port, served from a
background thread::

    from llm_server import LLMServer
    with LLMServer(qrels={"what is bm25": {"BM25 is a ranking function": 2}}, seed=0) as srv:
        client = LLMClient(base_url=srv.base_url, model="judge")
        ...
        assert srv.counts["chat"] == 1 and srv.max_in_flight <= 4

    server = llm_server_fixture(qrels=..., faults={"429": 0.2})   # in a test module: a pytest fixture

The judge. A chat prompt that follows ``harness/llm/prompts/listwise_rank.txt`` (a line ``Query: <text>``, then passage
lines ``[1] <text>``, ``[2] <text>``, ... numbered from 1 without gaps) is answered RankGPT-style, ``[2] > [1] > [3]``:
passages sorted by their grade in ``qrels`` (highest first; ties and unjudged passages by a hash seeded with ``seed``),
then, with probability ``noise`` per adjacent pair, swapped (one pass, the random stream seeded by ``seed`` and the
prompt, so an answer is reproducible). ``qrels`` maps query -> passage -> grade; keys are texts, or ids when
``queries`` (id -> text) and ``corpus`` (id -> text) are given. Whitespace is collapsed before matching; a passage
that is a prefix of a judged text (cut by ``max_chars``) counts as that text; a query that is not a judged text
exactly matches the longest judged query it contains. A prompt with a ``Query:`` line but bad passage numbering gets
400. Any other prompt gets ``echo <digest>``, deterministic in the messages.

Faults (``faults={"429": 0.1, "500": 0.1, "slow": 0.05, "truncated": 0.1, "malformed": 0.1}``: a fraction each).
HTTP faults (429 and 503 with ``Retry-After: retry_after``, 500, ``slow``: an answer delayed by ``slow_delay`` seconds) are
drawn per attempt from (fault_seed, request body, how many times this body was seen before), so a retry can succeed and a
rerun meets the same faults. Content faults are drawn per request body (and fault_seed, which defaults to seed; the judge's ties and noise
use ``seed`` alone, so changing ``fault_seed`` leaves fault-free answers as they were): ``truncated`` drops the last half of the
permutation; ``malformed`` is garbage text, a duplicated id (one missing) or out-of-range ids (kind chosen by the same
hash, or fixed with ``malformed_kinds``). ``latency`` delays every answer; ``force_status`` (settable at any time)
answers every request with that HTTP status;
``slots=1`` serves one request at a time (``latency`` is then its service time) while the others wait in its queue,
as llama.cpp's server does (``slots=n``: n at once); ``overload_at=n`` answers a request that arrives while n others
are in flight with ``overload_status`` (429 or 503) and ``Retry-After: retry_after``, as a rate-limited API does;
``api_key`` makes a missing or wrong bearer token a 401 (whose message echoes the token received when ``echo_key``, as
careless servers do); ``models`` makes other model names a 404; ``server.models_route = False`` answers
``GET /v1/models`` with 404, as servers without the route do (counted as ``models:404``; answered ones as ``models``).
:class:`SilentServer` accepts connections and never answers at all.

Endpoint faults (``fault="hang"``, or set ``server.fault`` at any time): every API request from the ``fault_after``-th
on (counted from 0 since the fault was set), for ``fault_times`` requests (None: all), is answered badly, as broken
servers and proxies do: ``hang`` (read the request, never answer; the handler gives up after ``hang_max`` seconds or
when the server stops), ``drip`` (the right answer, ``drip_bytes`` bytes every ``drip_interval`` seconds), ``close``
(hang up without a response), ``close_mid_body`` (headers and half the body, then hang up), ``not_json``,
``no_choices``, ``empty_choices``, ``null_content``, ``bad_schema`` (choices that are strings), ``error_200`` (an
OpenAI error object with status 200), ``html_502`` (a proxy's multi-line HTML 502 page), ``html_200`` (a sign-in
page with status 200), ``text_plain`` (the right answer labelled text/plain), ``deep_json`` (JSON nested 100,000
deep), ``huge_body`` (a 200 whose body is ``huge_bytes`` of spaces before the answer).

Sampling parameters. Every chat request's parameters (all of the body but ``messages``) are kept in ``received``, in
order of arrival, so a test sees what reached the server. ``reject_params`` refuses named parameters the way OpenAI's
reasoning models do: ``{"max_tokens": "max_completion_tokens", "temperature": None}`` answers a request carrying
``max_tokens`` with HTTP 400 ``{"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this
model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens", "code":
"unsupported_parameter"}}`` (a name to use instead, or None: the parameter is refused outright, code
``unsupported_value`` for ``temperature`` and ``top_p``); ``reject_style="llama.cpp"`` words it as llama.cpp's
server does, ``{"error": {"code": 400, "message": "Unsupported param: max_tokens", "type": "invalid_request_error"}}``,
naming the parameter only in the message. ``enforce_max_tokens`` cuts a chat answer longer than the
request's ``max_tokens`` (or ``max_completion_tokens``) to that many tokens, with ``finish_reason: "length"``.

Answer styles, as real small models answer (``answer_style="prose"``, settable at any time; ``style_times``: only
the next that many listwise answers, None: all), applied to an answer that meets no content fault, for ids
``[2] > [1] > [3]``: ``prose`` ``The Colosseum is in Rome, Italy. It opened in 80 AD.`` (no ids); ``partial`` the
first half, ``[2]``; ``duplicates`` every id, the first two again: ``[2] > [1] > [2] > [1] > [3]``; ``out_of_range``
``[2] > [4] > [1] > [3] > [0]``; ``think`` reasoning naming the ids backwards, then the ranking:
``<think>\nPassage [3] looks off-topic; [2] and [1] are close.\n</think>\n[2] > [1] > [3]``; ``think_open`` that
reasoning never closed (cut by its budget); ``fenced`` ``Here is the ranking:\n```text\n[2] > [1] > [3]\n```\nPassage
[3] is the least relevant.``; ``words`` ``My ranking: [2] > [1] > [3]. Passage [2] answers the query directly.``;
``bare`` ``2, 1, 3``. Counted as ``style:<name>``.

Embeddings: a hashed bag of lowercased words (sign from the hash), L2-normalised, ``embed_dim`` wide (or the
request's ``dimensions``); ``encoding_format`` float or base64. An empty input string gets 400, as from OpenAI.

Query rewriting and the multi-hop agent (``gapbench.adapters.llm_retrievers``): prompts with an ``Original query:``
line are answered by :meth:`LLMServer.retrieval_answer` from ``rewrites``, ``searches`` and ``selections`` (scripted
answers per query text) or the qrels judge; they are kept in ``prompts``.

Counters: ``counts`` (requests, chat, embeddings, ok, 429, 500, slow, truncated, malformed, malformed:<kind>, 400,
401, 404, refused:<param>, length), ``calls`` (all API requests), ``max_in_flight``, ``in_flight``, ``arrivals`` (requests
in flight when each arrived, itself included), ``arrival_times`` and ``log`` (path, status, kind) per request.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import random
import re
import socket
import struct
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping

HTTP_FAULTS = ("429", "500", "slow", "503")
ENDPOINT_FAULTS = ("hang", "drip", "close", "close_mid_body", "not_json", "no_choices", "empty_choices", "null_content",
                   "bad_schema", "error_200", "html_502", "html_200", "text_plain", "deep_json", "huge_body")
CONTENT_FAULTS = ("truncated", "malformed")
MALFORMED_KINDS = ("garbage", "duplicate", "out_of_range")
ANSWER_STYLES = ("prose", "partial", "duplicates", "out_of_range", "think", "think_open", "fenced", "words", "bare")
# ports this process's LLMServers listened on: gapbench's preflight remembers a base URL that answered it, so a
# SilentServer given one of them by the system would not be checked (see SilentServer.__init__)
_SERVED_PORTS: set[int] = set()
_PASSAGE = re.compile(r"^\[(\d+)\](?: (.*))?$")
_WORD = re.compile(r"\w+")


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def _unit(*parts: object) -> float:
    """A number in [0, 1) from a hash of ``parts``: the server's only source of randomness besides seeded Randoms."""
    h = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _tokens(text: str) -> int:
    return len(text.split())


def parse_listwise(prompt: str) -> tuple[str, list[str]] | None:
    """``(query, passages)`` from a listwise prompt, None when it has no ``Query:`` line; ValueError on bad ids."""
    lines = prompt.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Query: ")), None)
    if start is None:
        return None
    query = lines[start][len("Query: "):]
    passages: list[str] = []
    for line in lines[start + 1:]:
        m = _PASSAGE.match(line.rstrip())
        if m:
            if int(m.group(1)) != len(passages) + 1:
                raise ValueError(f"passage id [{m.group(1)}] where [{len(passages) + 1}] was expected; passages are "
                                 "numbered [1], [2], ... one per line after the 'Query:' line")
            passages.append(m.group(2) or "")
    if not passages:
        raise ValueError("no passage lines '[1] ...' after the 'Query:' line")
    return query, passages


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 drops bursts of concurrent connections into SYN retries
    app: "LLMServer"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._open: set = set()  # connections being served, closed on stop as a stopping server's are
        self._open_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        with self._open_lock:
            open_now = list(self._open)
        for sock in open_now:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return  # a client that timed out and hung up: expected with slow faults
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: Nagle + delayed ACK would add ~40 ms
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _send_bytes(self, status: int, data: bytes, content_type: str, headers: Mapping[str, str] | None = None,
                    *, length: int | None = None, pieces: Any = None) -> None:
        """Headers, then ``data`` (or the byte strings ``pieces`` yields, written as they come)."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data) if length is None else length))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            for piece in (pieces if pieces is not None else [data]):
                self.wfile.write(piece)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self) -> None:
        app = self.server.app
        if self.path.rstrip("/") == "/v1/models" and not getattr(app, "models_route", True):
            app._count("models:404")  # a server without the route (models_route = False): some lack it
            self._send(404, _error(f"no route GET {self.path}", "not_found"))
        elif self.path.rstrip("/") == "/v1/models":
            app._count("models")
            names = sorted(app.models) if app.models else ["judge"]
            self._send(200, {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "gapbench-tests"}
                                                        for n in names]})
        else:
            self._send(404, _error(f"no route GET {self.path}", "not_found"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.app._handle(self, raw)


def _error(message: str, type_: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class LLMServer:
    """See the module docstring. ``base_url`` is ``http://127.0.0.1:<port>/v1`` once started."""

    def __init__(
        self,
        qrels: Mapping[str, Mapping[str, int]] | None = None,
        *,
        queries: Mapping[str, str] | None = None,
        corpus: Mapping[str, str] | None = None,
        noise: float = 0.0,
        seed: int = 0,
        fault_seed: int | None = None,
        latency: float = 0.0,
        slots: int | None = None,
        overload_at: int | None = None,
        overload_status: int = 429,
        faults: Mapping[str, float] | None = None,
        slow_delay: float = 2.0,
        retry_after: float = 0.0,
        malformed_kinds: tuple[str, ...] = MALFORMED_KINDS,
        answer_style: str | None = None,
        style_times: int | None = None,
        embed_dim: int = 64,
        api_key: str | None = None,
        echo_key: bool = False,
        models: set[str] | None = None,
        fault: str | None = None,
        fault_after: int = 0,
        fault_times: int | None = None,
        hang_max: float = 60.0,
        drip_interval: float = 0.2,
        drip_bytes: int = 1,
        huge_bytes: int = 64 * 2**20,
        reject_params: Mapping[str, str | None] | None = None,
        reject_style: str = "openai",
        enforce_max_tokens: bool = False,
        rewrites: Mapping[str, str] | None = None,
        searches: Mapping[str, list[str]] | None = None,
        selections: Mapping[str, list[str]] | None = None,
    ) -> None:
        faults = dict(faults or {})
        unknown = set(faults) - set(HTTP_FAULTS) - set(CONTENT_FAULTS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; accepted: {HTTP_FAULTS + CONTENT_FAULTS}")
        for group in (HTTP_FAULTS, CONTENT_FAULTS):
            if sum(faults.get(k, 0.0) for k in group) > 1.0:
                raise ValueError(f"fault rates of {group} add up to more than 1")
        if set(malformed_kinds) - set(MALFORMED_KINDS) or not malformed_kinds:
            raise ValueError(f"malformed_kinds must be a non-empty subset of {MALFORMED_KINDS}")
        self.faults = faults
        self.noise, self.seed, self.latency = noise, seed, latency
        if slots is not None and slots < 1 or overload_at is not None and overload_at < 1:
            raise ValueError("slots and overload_at are None or >= 1")
        if overload_status not in (429, 503):
            raise ValueError(f"overload_status must be 429 or 503, not {overload_status!r}")
        self.slots = slots
        self._slot = threading.Semaphore(slots) if slots else contextlib.nullcontext()
        self.overload_at, self.overload_status = overload_at, overload_status
        self.fault_seed = seed if fault_seed is None else fault_seed
        self.slow_delay, self.retry_after = slow_delay, retry_after
        self.malformed_kinds = tuple(malformed_kinds)
        if answer_style is not None and answer_style not in ANSWER_STYLES:
            raise ValueError(f"unknown answer style {answer_style!r}; accepted: {ANSWER_STYLES}")
        self.answer_style, self.style_times = answer_style, style_times
        self.embed_dim = embed_dim
        self.api_key, self.echo_key, self.models = api_key, echo_key, models
        self.force_status: int | None = None
        self.fault_after, self.fault_times = fault_after, fault_times
        self._lock = threading.Lock()
        self.fault = fault
        self.hang_max, self.huge_bytes = hang_max, huge_bytes
        self.drip_interval, self.drip_bytes = drip_interval, drip_bytes
        self.reject_params = dict(reject_params or {})
        if reject_style not in ("openai", "llama.cpp"):
            raise ValueError(f"reject_style must be 'openai' or 'llama.cpp', not {reject_style!r}")
        self.reject_style = reject_style
        self.enforce_max_tokens = enforce_max_tokens
        self.rewrites = {_norm(q): a for q, a in (rewrites or {}).items()}
        self.searches = {_norm(q): list(a) for q, a in (searches or {}).items()}
        self.selections = {_norm(q): list(a) for q, a in (selections or {}).items()}
        self.prompts: list[str] = []  # prompts of the rewrite and agent modes, in order of arrival
        self.received: list[dict[str, Any]] = []
        self._stopping = threading.Event()
        self._judged: dict[str, dict[str, int]] = {}
        for qkey, docs in (qrels or {}).items():
            qtext = _norm(queries[qkey] if queries is not None else qkey)
            row = self._judged.setdefault(qtext, {})
            for dkey, grade in docs.items():
                row[_norm(corpus[dkey] if corpus is not None and dkey in corpus else dkey)] = int(grade)
        self._seen: Counter = Counter()
        self._counts: Counter = Counter()
        self.log: list[tuple[str, int, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.arrivals: list[int] = []  # requests in flight when each request arrived, itself included, in order
        self.arrival_times: list[float] = []  # time.monotonic() of each arrival
        self._httpd: _HTTPServer | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None

    @property
    def fault(self) -> str | None:
        return self._fault

    @fault.setter
    def fault(self, mode: str | None) -> None:
        if mode is not None and mode not in ENDPOINT_FAULTS:
            raise ValueError(f"unknown endpoint fault {mode!r}; accepted: {ENDPOINT_FAULTS}")
        with self._lock:
            self._fault, self._fault_seen = mode, 0

    def _take_fault(self) -> str | None:
        """The endpoint fault this API request meets, if any (counts the request)."""
        with self._lock:
            if self._fault is None:
                return None
            n = self._fault_seen
            self._fault_seen += 1
            hit = n >= self.fault_after and (self.fault_times is None or n < self.fault_after + self.fault_times)
            if hit:
                self._counts[self._fault] += 1
            return self._fault if hit else None

    # -- life cycle -------------------------------------------------------------------------------------------
    def start(self, poll_interval: float = 0.05) -> "LLMServer":
        """Serve from a daemon thread; ``poll_interval`` is how often it looks for a stop (new requests wake it)."""
        self._stopping.clear()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.app = self
        self._port = self._httpd.server_address[1]
        _SERVED_PORTS.add(self._port)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": poll_interval},
                                        name="llm-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases handlers that hang or drip
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd.drop_connections()
            self._httpd = None

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port it listens on (kept after ``stop``, to test a client against a server that is gone)."""
        if self._port is None:
            raise RuntimeError("start the server first (use it as a context manager)")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def counts(self) -> Counter:
        """A snapshot of the request counters (missing kinds read 0)."""
        with self._lock:
            return Counter(self._counts)

    @property
    def calls(self) -> int:
        """API requests received (chat and embeddings, any outcome)."""
        with self._lock:
            return self._counts["chat"] + self._counts["embeddings"]

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()
            self.log.clear()
            self.received.clear()
            self.max_in_flight = self.in_flight
            self.arrivals.clear()
            self.arrival_times.clear()

    # -- the judge --------------------------------------------------------------------------------------------
    def grade(self, query: str, passage: str) -> int:
        query, passage = _norm(query), _norm(passage)
        table = self._judged.get(query)
        if table is None:
            inside = [q for q in self._judged if q and q in query]
            table = self._judged[max(inside, key=len)] if inside else {}
        if passage in table:
            return table[passage]
        if passage:
            for text, g in table.items():
                if text.startswith(passage):
                    return g
        return 0

    def ideal_order(self, query: str, passages: list[str]) -> list[int]:
        """0-based passage positions, best first, as the noise-free judge ranks them."""
        q = _norm(query)
        return sorted(range(len(passages)),
                      key=lambda i: (-self.grade(q, passages[i]), _unit(self.seed, "tie", q, _norm(passages[i]))))

    def _styled(self, ids: list[int]) -> tuple[str, str]:
        """A fault-free ranking written in the answer style, while ``style_times`` lasts."""
        with self._lock:
            style = self.answer_style
            if style is not None and self.style_times is not None:
                if self.style_times <= 0:
                    style = None
                else:
                    self.style_times -= 1
        chain = " > ".join(f"[{i}]" for i in ids)
        if style is None:
            return chain, "ok"
        n = len(ids)
        reasoning = (f"<think>\nPassage [{ids[-1]}] looks off-topic; "
                     + " and ".join(f"[{i}]" for i in reversed(ids[:-1])) + " are close.\n")
        text = {
            "prose": "The Colosseum is in Rome, Italy. It opened in 80 AD.",
            "partial": " > ".join(f"[{i}]" for i in ids[: max(1, n // 2)]),
            "duplicates": " > ".join(f"[{i}]" for i in ids[:2] + ids),
            "out_of_range": " > ".join(f"[{i}]" for i in ids[:1] + [n + 1] + ids[1:] + [0]),
            "think": reasoning + "</think>\n" + chain,
            "think_open": reasoning,
            "fenced": f"Here is the ranking:\n```text\n{chain}\n```\nPassage [{ids[-1]}] is the least relevant.",
            "words": f"My ranking: {chain}. Passage [{ids[0]}] answers the query directly.",
            "bare": ", ".join(map(str, ids)),
        }[style]
        return text, f"style:{style}"

    def answer(self, prompt: str) -> tuple[str, str]:
        """(answer text, content kind) for a prompt, before HTTP faults: what a fault-free call returns."""
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        parsed = parse_listwise(prompt)
        retrieval = self.retrieval_answer(prompt)
        if retrieval is not None:
            return retrieval
        if parsed is None:
            return f"echo {digest[:16]}", "echo"
        query, passages = parsed
        order = self.ideal_order(query, passages)
        rng = random.Random(f"{self.seed}:{digest}")
        if self.noise > 0:
            for i in range(len(order) - 1):
                if rng.random() < self.noise:
                    order[i], order[i + 1] = order[i + 1], order[i]
        ids = [i + 1 for i in order]
        n = len(ids)
        u = _unit(self.fault_seed, "content", digest)
        truncated = self.faults.get("truncated", 0.0)
        if u < truncated and n >= 2:
            return " > ".join(f"[{i}]" for i in ids[: max(1, n // 2)]), "truncated"
        if truncated <= u < truncated + self.faults.get("malformed", 0.0):
            kind = self.malformed_kinds[int(_unit(self.fault_seed, "malformed", digest) * len(self.malformed_kinds))]
            if kind == "garbage":
                return "I'm sorry, but I cannot determine a ranking for these passages.", "malformed:garbage"
            if kind == "duplicate":
                dup = ids[:1] + ids[:1] + ids[2:] if n >= 2 else ids + ids
                return " > ".join(f"[{i}]" for i in dup), "malformed:duplicate"
            bad = ids[:-1] + [n + 1] + [0] if n >= 1 else [1]
            return " > ".join(f"[{i}]" for i in bad), "malformed:out_of_range"
        return self._styled(ids)

    def retrieval_answer(self, prompt: str) -> tuple[str, str] | None:
        """The answer to a query-rewrite or agent prompt (``prompts/query_rewrite.txt``, ``agent_search.txt``,
        ``agent_select.txt``: an ``Original query:`` line, the last line says which), None for other prompts.

        Rewrite: ``rewrites[query]``, else the query itself. Search: ``searches[query][hop - 1]``, else the query.
        Selection: ``selections[query][hop - 1]``, else the judge: ``Selected:`` the documents graded > 0 for the
        query, highest grade first (then in the order shown), and ``Notes: hop N: M relevant``."""
        lines = [line.rstrip() for line in prompt.splitlines()]
        query = next((line[len("Original query: "):] for line in lines if line.startswith("Original query: ")), None)
        last = next((line for line in reversed(lines) if line.strip()), "")
        if query is None:
            return None
        query = _norm(query)
        hop_line = next((re.match(r"Hop (\d+) of \d+\.$", line) for line in lines if line.startswith("Hop ")), None)
        hop = int(hop_line.group(1)) if hop_line else 1
        with self._lock:
            self.prompts.append(prompt)
        if last == "Rewritten query:":
            return self.rewrites.get(query, query), "rewrite"
        if last == "Search query:":
            script = self.searches.get(query, [])
            return (script[hop - 1] if hop <= len(script) else query), "search"
        if last.startswith("Notes:"):
            script = self.selections.get(query, [])
            if hop <= len(script):
                return script[hop - 1], "select"
            start = lines.index("Documents:") + 1
            docs = []
            for line in lines[start:]:
                m = _PASSAGE.match(line)
                if not m:
                    break
                docs.append(m.group(2) or "")
            graded = sorted((-self.grade(query, d), i) for i, d in enumerate(docs) if self.grade(query, d) > 0)
            picked = " ".join(f"[{i + 1}]" for _, i in graded) or "none"
            return f"Selected: {picked}\nNotes: hop {hop}: {len(graded)} relevant", "select"
        return None

    # -- embeddings -------------------------------------------------------------------------------------------
    @staticmethod
    def embed(text: str, dim: int) -> list[float]:
        vec = [0.0] * dim
        for word in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "big")
            vec[h % dim] += 1.0 if (h >> 63) & 1 else -1.0
        norm = sum(v * v for v in vec) ** 0.5
        return [v / norm for v in vec] if norm else vec

    # -- request handling -------------------------------------------------------------------------------------
    def _count(self, *kinds: str) -> None:
        with self._lock:
            for k in kinds:
                self._counts[k] += 1

    def _handle(self, h: _Handler, raw: bytes) -> None:
        path = h.path.split("?")[0].rstrip("/")
        kind = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings"}.get(path)
        with self._lock:
            self._counts["requests"] += 1
            if kind:
                self._counts[kind] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.arrivals.append(self.in_flight)
            self.arrival_times.append(time.monotonic())
            overloaded = self.overload_at is not None and self.in_flight > self.overload_at
        status, outcome = 500, "error"
        try:
            if overloaded:
                status, outcome = self._fail(h, self.overload_status, "Too many requests in flight (test server).",
                                             "requests", "rate_limit_exceeded", {"Retry-After": f"{self.retry_after:g}"})
                return
            with self._slot:  # a single-slot server: the others wait their turn in its queue, as llama.cpp's do
                if self.latency:
                    time.sleep(self.latency)
                status, outcome = self._respond(h, raw, kind, path)
        finally:
            with self._lock:
                self.in_flight -= 1
                self.log.append((path, status, outcome))

    def _fail(self, h: _Handler, status: int, message: str, type_: str, code: str | None = None,
              headers: Mapping[str, str] | None = None) -> tuple[int, str]:
        self._count(str(status))
        h._send(status, _error(message, type_, code), headers)
        return status, str(status)

    def _respond(self, h: _Handler, raw: bytes, kind: str | None, path: str) -> tuple[int, str]:
        if kind is None:
            return self._fail(h, 404, f"no route POST {path}; this server has /v1/chat/completions and "
                                      "/v1/embeddings", "invalid_request_error", "not_found")
        try:
            body = json.loads(raw or b"null")
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
        except ValueError as exc:
            return self._fail(h, 400, f"malformed JSON body: {exc}", "invalid_request_error")
        h.fault = self._take_fault()
        if h.fault == "hang":
            self._stopping.wait(self.hang_max)
            h.close_connection = True
            return 0, "hang"
        if h.fault == "close":
            h.close_connection = True
            return 0, "close"
        if h.fault == "html_502":
            page = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<h1>502 Bad Gateway</h1>\r\n"
                    "<p>The upstream server did not answer.</p>\r\n<hr><address>test-proxy</address>\r\n"
                    "</body>\r\n</html>\r\n")
            h._send_bytes(502, page.encode(), "text/html")
            return 502, "html_502"
        if self.force_status is not None:
            return self._fail(h, self.force_status, f"forced status {self.force_status} (test server)",
                              "invalid_request_error" if self.force_status < 500 else "server_error")
        if self.api_key is not None:
            got = h.headers.get("Authorization", "")
            if got != f"Bearer {self.api_key}":
                shown = got.removeprefix("Bearer ") if self.echo_key else "(hidden)"
                return self._fail(h, 401, f"Incorrect API key provided: {shown}.", "invalid_request_error",
                                  "invalid_api_key")
        model = body.get("model")
        if self.models is not None and model not in self.models:
            return self._fail(h, 404, f"The model `{model}` does not exist.", "invalid_request_error",
                              "model_not_found")
        canon = json.dumps(body, sort_keys=True, separators=(",", ":"))
        with self._lock:
            attempt = self._seen[canon]
            self._seen[canon] += 1
        u = _unit(self.fault_seed, "http", canon, attempt)
        edge = 0.0
        for fault in HTTP_FAULTS:
            rate = self.faults.get(fault, 0.0)
            if edge <= u < edge + rate:
                if fault == "429":
                    return self._fail(h, 429, "Rate limit reached (test server).", "requests", "rate_limit_exceeded",
                                      {"Retry-After": f"{self.retry_after:g}"})
                if fault == "500":
                    return self._fail(h, 500, "The server had an error (test server).", "server_error")
                if fault == "503":
                    return self._fail(h, 503, "The server is overloaded (test server).", "server_error", None,
                                      {"Retry-After": f"{self.retry_after:g}"})
                self._count("slow")
                time.sleep(self.slow_delay)
            edge += rate
        if kind == "chat":
            return self._chat(h, body, model)
        return self._embeddings(h, body, model)

    def _refusal(self, body: dict) -> dict | None:
        """OpenAI's error object for the first parameter of ``body`` this server refuses, or None."""
        for name, instead in self.reject_params.items():
            if name in body:
                if self.reject_style == "llama.cpp":
                    return {"error": {"code": 400, "message": f"Unsupported param: {name}",
                                      "type": "invalid_request_error"}}
                if instead:
                    message = (f"Unsupported parameter: '{name}' is not supported with this model. Use '{instead}' "
                               "instead.")
                    code = "unsupported_parameter"
                elif name in ("temperature", "top_p"):
                    message = (f"Unsupported value: '{name}' does not support {body[name]!r} with this model. Only "
                               "the default (1) value is supported.")
                    code = "unsupported_value"
                else:
                    message, code = f"Unsupported parameter: '{name}' is not supported with this model.", \
                        "unsupported_parameter"
                return {"error": {"message": message, "type": "invalid_request_error", "param": name, "code": code}}
        return None

    def _chat(self, h: _Handler, body: dict, model: Any) -> tuple[int, str]:
        with self._lock:
            self.received.append({k: v for k, v in body.items() if k != "messages"})
        refusal = self._refusal(body)
        if refusal is not None:
            param = next(k for k in self.reject_params if k in body)
            self._count("400", f"refused:{param}")
            h._send(400, refusal)
            return 400, f"refused:{param}"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._fail(h, 400, "'messages' must be a non-empty array", "invalid_request_error")
        contents = [m.get("content") if isinstance(m, dict) else None for m in messages]
        if not all(isinstance(c, str) for c in contents):
            return self._fail(h, 400, "each message needs a string 'content'", "invalid_request_error")
        prompt = "\n".join(contents)
        try:
            text, outcome = self.answer(prompt)
        except ValueError as exc:
            return self._fail(h, 400, f"the prompt does not follow the listwise template: {exc}",
                              "invalid_request_error")
        self._count("ok", *([outcome.split(":")[0], outcome] if outcome.startswith("malformed") else
                            [outcome] if outcome == "truncated" or outcome.startswith("style:") else []))
        finish = "stop"
        budget = body.get("max_completion_tokens", body.get("max_tokens"))
        if self.enforce_max_tokens and isinstance(budget, int) and _tokens(text) > budget:
            text, finish = " ".join(text.split()[:budget]), "length"
            self._count("length")
        pt, ct = sum(_tokens(c) for c in contents), _tokens(text)
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        return self._deliver(h, {
            "id": f"chatcmpl-{digest[:24]}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish,
                         "logprobs": None}],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
        }, outcome)

    def _embeddings(self, h: _Handler, body: dict, model: Any) -> tuple[int, str]:
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) for t in inputs):
            return self._fail(h, 400, "'input' must be a string or a non-empty array of strings",
                              "invalid_request_error")
        if any(t == "" for t in inputs):
            return self._fail(h, 400, "'$.input' is invalid: empty strings are not accepted", "invalid_request_error")
        dim = body.get("dimensions") or self.embed_dim
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(inputs):
            vec = self.embed(text, int(dim))
            emb: Any = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode() if b64 else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        self._count("ok")
        pt = sum(_tokens(t) for t in inputs)
        return self._deliver(h, {"object": "list", "data": data, "model": model,
                                 "usage": {"prompt_tokens": pt, "total_tokens": pt}}, "ok")

    def _deliver(self, h: _Handler, payload: dict, outcome: str) -> tuple[int, str]:
        """Send a 200 answer, spoilt as the request's endpoint fault says."""
        fault = getattr(h, "fault", None)
        data = json.dumps(payload).encode("utf-8")
        if fault is None:
            h._send_bytes(200, data, "application/json")
            return 200, outcome
        if fault == "drip":
            def pieces():
                for i in range(0, len(data), self.drip_bytes):
                    if i and self._stopping.wait(self.drip_interval):
                        return
                    yield data[i:i + self.drip_bytes]
            h._send_bytes(200, data, "application/json", pieces=pieces())
        elif fault == "close_mid_body":
            h._send_bytes(200, data, "application/json", pieces=[data[: len(data) // 2]])
            h.close_connection = True
        elif fault == "huge_body":
            chunk = b" " * 2**20
            pieces = [chunk] * (self.huge_bytes // len(chunk)) + [b" " * (self.huge_bytes % len(chunk)), data]
            h._send_bytes(200, data, "application/json", length=self.huge_bytes + len(data), pieces=pieces)
        elif fault in ("text_plain", "html_200", "not_json", "deep_json"):
            body, ctype = {
                "text_plain": (data, "text/plain; charset=utf-8"),
                "html_200": (b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n<body><h1>Sign in to "
                             b"continue</h1>\n<form method=post><input name=user></form></body></html>\n", "text/html"),
                "not_json": (b"upstream said: OK but no JSON here {", "application/json"),
                "deep_json": (b"[" * 100_000 + b"]" * 100_000, "application/json"),
            }[fault]
            h._send_bytes(200, body, ctype)
        else:
            spoilt = dict(payload)
            if fault == "no_choices":
                spoilt.pop("choices", None)
                spoilt.pop("data", None)
            elif fault == "empty_choices":
                spoilt["choices" if "choices" in spoilt else "data"] = []
            elif fault == "null_content" and "choices" in spoilt:
                spoilt["choices"] = [{**c, "message": {**c["message"], "content": None}, "finish_reason": "length"}
                                     for c in spoilt["choices"]]
            elif fault == "bad_schema":
                key = "choices" if "choices" in spoilt else "data"
                spoilt[key] = [json.dumps(x) for x in spoilt[key]]
            elif fault == "error_200":
                spoilt = _error("The model is overloaded; try again later (test server).", "server_error")
            h._send(200, spoilt)
        return 200, fault


def llm_server_fixture(scope: str = "function", **kwargs: Any):
    """A pytest fixture yielding a started :class:`LLMServer` built with ``kwargs``:
    ``server = llm_server_fixture(qrels=QRELS, faults={"500": 0.2})`` at module level, then ``def test_x(server)``."""
    import pytest

    @pytest.fixture(scope=scope)
    def _server():
        with LLMServer(**kwargs) as srv:
            yield srv

    return _server


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts connections, reads each one's request head and never answers: a stuck
    server, or a port forwarded to nothing. ``requests`` holds the first line of every request head received, in
    order; connections stay open until ``stop()``.

        with SilentServer() as srv:
            LLMClient(base_url=srv.base_url, ...)
    """

    def __init__(self) -> None:
        self.requests: list[str] = []
        held = []  # ports an LLMServer of this process had, kept bound until another one is given
        self._listener = socket.create_server(("127.0.0.1", 0))
        while self._listener.getsockname()[1] in _SERVED_PORTS:
            held.append(self._listener)
            self._listener = socket.create_server(("127.0.0.1", 0))
        for sock in held:
            sock.close()
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, name="silent-server", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:  # the accept timed out, or the listener was closed by stop()
                continue
            self._conns.append(conn)
            threading.Thread(target=self._read_head, args=(conn,), daemon=True).start()

    def _read_head(self, conn: socket.socket) -> None:
        data = b""
        try:
            while b"\r\n\r\n" not in data and not self._stop.is_set():
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
        except OSError:
            return
        self.requests.append(data.split(b"\r\n", 1)[0].decode("latin-1"))

    def start(self) -> "SilentServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
        self._listener.close()
        self._thread.join(5)

    def __enter__(self) -> "SilentServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
