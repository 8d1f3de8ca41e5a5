"""One client for OpenAI-compatible endpoints (OpenAI, vLLM, llama.cpp, Ollama): retries, bounded concurrency, a SQLite
response cache, usage counters, and the prompt templates.

    cfg = LLMConfig(base_url="http://localhost:8000/v1", model="Qwen/Qwen2.5-7B-Instruct", concurrency=16)
    llm = LLMClient(cfg)
    prompt = listwise_prompt("what is BM25?", ["BM25 is a ranking function ...", "Paris is ..."])
    answers = llm.chat_many([ChatRequest(prompt, tag="q1"), ...])       # in input order
    manifest["llm"] = llm.manifest()                                   # config and counters, never the key

:class:`LLMClient` composes the parts, each a module of its own:

- :mod:`.config`: :class:`LLMConfig`, :func:`command_settings`, and how the base URL, model and time bounds resolve;
- :mod:`.templates`: the prompt templates (:func:`render`, :func:`listwise_prompt`);
- :mod:`.records`: :class:`ChatRequest` and :class:`ChatResponse`;
- :mod:`.cache`: the SQLite response cache (:class:`ResponseCache`, :func:`cache_key`);
- :mod:`.usage`: the counters (:class:`LLMUsage`);
- :mod:`.pacing`: how many calls are in flight, adapted to what the server sustains (``_Pacer``);
- :mod:`.retries`: the retry policy on tenacity, bounded in attempts and time, and the error of a call that gave up
  (``RetryPolicy``);
- :mod:`.refusals`: request parameters the server refused, left out or renamed for the rest of the command;
- :mod:`.transport` and :mod:`.failures`: one HTTP request and its OpenAI-format answer, and what went wrong.

Every name of those modules that callers used from here is still importable from here.

The key is read from ``$OPENAI_API_KEY`` (``api_key_env``) and is kept out of every message, repr, manifest and
counter. Local servers need no key.

A server that refuses one of the sampling parameters (HTTP 400 naming it, as OpenAI's reasoning models refuse
``temperature`` or want ``max_completion_tokens`` for ``max_tokens``) gets the request again without it, or renamed,
once per parameter; the client keeps doing so for the rest of the command and the manifest says what was sent. An
answer cut by its token budget (``finish_reason == "length"``) is asked again once with double the budget (up to
``max_tokens_cap``); cut again, it is kept with ``truncated=True`` and counted per query.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import fields, replace
from typing import Any
from urllib.parse import urlsplit

from ..errors import (
    ConfigError,
    GapbenchError,
    LLMError,
    LLMRequestError,
    LLMResponseError,
    LLMUnavailableError,
    MissingDependencyError,
    UnknownNameError,
)
from .competence import CompetenceWatch, prompt_text
from .competence import active as active_watch
from .config import _MAX_TOKENS_CAP, _RESERVED, DEFAULT_BASE_URL, LLMConfig, command_settings, parse_extra, redact_url
from .pacing import _Pacer, prompt_tokens
from .records import ChatRequest, ChatResponse, Message, _messages
from .refusals import Refusals, _refused_param, _Rejected
from .response_cache import ResponseCache, cache_key
from .retries import _BATCH, RetryPolicy, _Cancelled
from .templates import PROMPTS_DIR, available_prompts, listwise_prompt, load_prompt, prompt_fields, prompt_path, render
from .text import one_line
from .transport import _chat_response, _embeddings, _openai_module, open_client, post
from .usage import LLMUsage

# the names callers import from here, wherever they now live
__all__ = [
    "ChatRequest", "ChatResponse", "ConfigError", "DEFAULT_BASE_URL", "GapbenchError", "LazyClient", "LLMClient",
    "LLMConfig", "LLMError", "LLMRequestError", "LLMResponseError", "LLMUnavailableError", "LLMUsage", "Message",
    "MissingDependencyError", "PROMPTS_DIR", "ResponseCache", "UnknownNameError", "available_prompts", "cache_key",
    "command_settings", "listwise_prompt", "load_prompt", "parse_extra", "prompt_fields", "prompt_path",
    "prompt_tokens", "redact_url", "render",
]

_NO_KEY = "EMPTY"  # vLLM's convention for servers that check no key; the openai package insists on some value


class LLMClient:
    """Chat and embedding calls against one OpenAI-compatible endpoint, with retries, caching and counters.

    ``LLMClient(LLMConfig(model=...))`` or ``LLMClient(model=..., base_url=...)`` (keywords override the config).
    ``cache``: True for the shared cache, False for none, or a path of a SQLite file. ``api_key``: the key itself, for
    callers that do not keep it in the environment (it is held privately and never shown).
    """

    def __init__(self, config: LLMConfig | None = None, *, cache: bool | str | os.PathLike = True,
                 api_key: str | None = None, **overrides: Any) -> None:
        config = config or LLMConfig()
        if overrides:
            known = {f.name for f in fields(LLMConfig)}
            unknown = sorted(set(overrides) - known)
            if unknown:
                raise ConfigError(f"unknown LLM option(s) {', '.join(unknown)}; accepted: {', '.join(sorted(known))}.")
            config = replace(config, **overrides)
        self.config = config.resolved()
        key = api_key if api_key is not None else os.environ.get(self.config.api_key_env)
        self.__key = key or _NO_KEY
        self.endpoint = self.redact(redact_url(self.config.api_root()))
        if not key and urlsplit(self.config.api_root()).hostname == urlsplit(DEFAULT_BASE_URL).hostname:
            raise ConfigError(f"no API key for {self.endpoint}: set the environment variable "
                              f"${self.config.api_key_env} (or choose another with api_key_env=...).")
        self.usage = LLMUsage(self.config.price_in, self.config.price_out)
        if cache is False:
            self.cache: ResponseCache | None = None
        else:
            self.cache = ResponseCache(None if cache is True else cache)
        self._client = None
        self._client_lock = threading.Lock()
        # parameters the server refused, for the rest of the command: name -> name sent instead (None: left out)
        self._refusals = Refusals()
        self._pacer = _Pacer(self.config.concurrency, self.config.adaptive)
        # the retry policy, and the endpoint's health across every call of this client, i.e. of one command
        self._retrier = RetryPolicy(self.config, self.usage, self._pacer, self.endpoint, self._line,
                                self.cache.path if self.cache is not None else None)
        self._preflight_done = False
        self.watch: CompetenceWatch | None = None  # judges the first answers while set (.competence.watching)

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, endpoint={self.endpoint!r})"

    # -- plumbing ---------------------------------------------------------------------------------------------
    def _api(self):
        with self._client_lock:
            if self._client is None:
                self._client = open_client(self.__key, self.config.base_url, self.config.timeout)
            return self._client

    def redact(self, text: str) -> str:
        """``text`` with the API key (and anything that looks like a bearer token or an OpenAI key) masked."""
        key = self.__key
        if key and key != _NO_KEY and len(key) >= 4:
            text = text.replace(key, "[redacted]")
        text = re.sub(r"(?i)(bearer\s+)\S+", r"\1[redacted]", text)
        return re.sub(r"sk-[A-Za-z0-9_\-]{6,}", "sk-[redacted]", text)

    def preflight(self) -> None:
        """Before the first call to the endpoint: an endpoint that accepts connections and does not answer
        ``GET /models`` within ``preflight_timeout`` is named now, not after the calls' time bounds (:mod:`.preflight`).
        Skipped for the embedded server, which answered it when it started and is busy while it generates."""
        seconds = self.config.preflight_timeout
        if not seconds or self._preflight_done:
            return
        from .local import is_embedded
        from .preflight import check

        if is_embedded(self.config.base_url):
            self._preflight_done = True
            return
        key = self.__key if self.__key != _NO_KEY else None
        problem = check(self.config.api_root(), seconds, {"Authorization": f"Bearer {key}"} if key else None)
        if problem:
            url = f"{self.endpoint}/models"
            raise LLMUnavailableError(self._line(
                f"LLM endpoint {self.endpoint} {problem} ({url}, checked before the first call): it accepts "
                f"connections but does not answer, so every call would wait out its time bounds "
                f"({self.config.timeout:g} s an attempt). Check that the server there is up and serving, not stuck "
                "or overloaded, and that the base URL (base_url, or $OPENAI_BASE_URL) is its API root; a server that "
                "needs longer (llama-cpp-python's answers /models only between two generations) gets it with "
                "$GAPBENCH_LLM_PREFLIGHT_TIMEOUT (preflight_timeout; 0 skips the check)."), endpoint=url)
        self._preflight_done = True

    def _line(self, text: str) -> str:
        return self.redact(one_line(text))

    # -- chat -------------------------------------------------------------------------------------------------
    def payload(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (config defaults, then the request's own parameters)."""
        body: dict[str, Any] = {"model": self.config.model, "messages": [dict(m) for m in _messages(request.messages)],
                                **self._sampling()}
        for k, v in request.params.items():
            if k in _RESERVED:
                raise ConfigError(f"request parameter {k!r} cannot be set per request here; accepted are sampling "
                                  "parameters such as temperature, max_tokens, top_p, stop, seed.")
            body[k] = v
        return body

    def _sampling(self) -> dict[str, Any]:
        """The config's request parameters, as asked for (before any the server refused are taken out)."""
        c = self.config
        named = {"temperature": c.temperature, "top_p": c.top_p, "max_tokens": c.max_tokens, "seed": c.seed,
                 "stop": list(c.stop) if c.stop else None}
        return {**{k: v for k, v in named.items() if v is not None}, **c.extra}

    def _call_chat(self, body: Mapping[str, Any], tag: str | None) -> ChatResponse:
        """One answer to ``body``: refused parameters dropped, and an answer cut by its budget asked again once."""
        out = self._send_chat(body, tag)
        if out.finish_reason != "length":
            return out
        budget_key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        budget = body.get(budget_key)
        budget = budget if type(budget) is int else None
        larger = min(self.config.max_tokens_cap, 2 * budget if budget else self.config.max_tokens_cap)
        if budget is None or larger > budget:
            self.usage.add(tag, length_reasks=1)
            out = self._send_chat({**body, budget_key: larger}, tag)
        if out.finish_reason == "length":
            self.usage.add(tag, truncated=1)
            out = replace(out, truncated=True)
        return out

    def _send_chat(self, body: Mapping[str, Any], tag: str | None) -> ChatResponse:
        api = self._api()
        while True:  # ends: each refusal takes a parameter out of those sent (or renames max_tokens, once)
            sent = self._refusals.as_sent(body)
            params = {k: v for k, v in sent.items() if k not in ("model", "messages")}

            def call(seconds: float) -> ChatResponse:
                try:
                    data = post(api.chat.completions, seconds, self.config.max_response_bytes, model=sent["model"],
                                messages=sent["messages"], extra_body=params)
                except _openai_module().APIStatusError as exc:
                    refused = _refused_param(exc, params)
                    if refused is None:
                        raise
                    raise refused from None
                return _chat_response(data)

            try:
                out = self._retrier.call("chat/completions", body["model"], tag, call, prompt_tokens(sent["messages"]))
            except _Rejected as rej:
                self._refusals.refused(rej)
                self.usage.add(tag, resent=1)
                continue
            self.usage.add(tag, prompt_tokens=out.prompt_tokens, completion_tokens=out.completion_tokens)
            return out

    def chat(self, messages: str | Sequence[Message] | ChatRequest, *, tag: str | None = None,
             **params: Any) -> ChatResponse:
        """One answer: ``llm.chat("Say hi", tag="q1", max_tokens=5).text``."""
        req = messages if isinstance(messages, ChatRequest) else ChatRequest(messages, tag, params)
        answer = self.chat_many([req], concurrency=1)[0]
        if isinstance(answer, LLMError):  # not so: without return_exceptions a failure is raised, not returned
            raise answer
        return answer

    def chat_many(self, requests: Sequence[ChatRequest | str | Sequence[Message]], *, concurrency: int | None = None,
                  return_exceptions: bool = False,
                  progress: Callable[[int], None] | None = None) -> list[ChatResponse | LLMError]:
        """Answers to ``requests`` in input order, at most ``concurrency`` (default: the config's) calls in flight,
        fewer while the server shows it sustains fewer (:class:`.pacing._Pacer`).

        Cached answers cost no call; identical requests in one batch are sent once. On a failure the first error is
        raised once the calls in flight end (their answers are cached; calls not yet sent are not made), unless
        ``return_exceptions`` puts each request's error in its slot instead. While a watch is set
        (:func:`.competence.watching`), its first answers are judged and a model too weak for the job raises
        :class:`~gapbench.errors.ModelTooWeakError`.
        """
        reqs = [r if isinstance(r, ChatRequest) else ChatRequest(r) for r in requests]
        watch = self.watch or active_watch()
        if watch is None or not watch.open:
            return self._chat_many(reqs, concurrency, return_exceptions, progress)
        watch.bind(self)
        # a watch on the first answers (.competence): they go in small groups, each judged before the next is sent,
        # so a model that cannot do the job stops within its first calls
        width = max(1, concurrency or self.config.concurrency)
        out: list[Any] = []
        while len(out) < len(reqs):
            if watch.tripped:  # stopped by another thread's answers: nothing more is sent
                watch.calls_left = len(reqs) - len(out)
                raise watch.error()
            part = reqs[len(out):len(out) + (watch.group(width) if watch.open else len(reqs))]
            answers = self._chat_many(part, concurrency, return_exceptions, progress)
            out.extend(answers)
            watch.calls_left = len(reqs) - len(out)
            for req, ans in zip(part, answers):
                if not isinstance(ans, LLMError):
                    watch.see(prompt_text(req.messages), ans.text)
        return out

    def _chat_many(self, reqs: list[ChatRequest], concurrency: int | None, return_exceptions: bool,
                   progress: Callable[[int], None] | None) -> list[ChatResponse | LLMError]:
        bodies = [self.payload(r) for r in reqs]
        results: list[Any] = [None] * len(reqs)
        todo = self._from_cache(reqs, bodies, results, progress)
        if not todo:
            return results
        width = max(1, min(concurrency or self.config.concurrency, len(todo)))
        self._pacer.allow(width)

        def settle(key: str, out: ChatResponse | LLMError) -> None:
            for n, i in enumerate(todo[key]):
                results[i] = out if n == 0 or isinstance(out, LLMError) else replace(out, cached=True)
                if n and not isinstance(out, LLMError):  # a repeat in the batch, answered by the first one's call
                    self.usage.add(reqs[i].tag, cache_hits=1, truncated=int(out.truncated))
            if progress:
                progress(len(todo[key]))

        jobs = [(key, bodies[idxs[0]], reqs[idxs[0]].tag) for key, idxs in todo.items()]
        self._run_batch(jobs, width, return_exceptions, settle)
        return results

    def _from_cache(self, reqs: list[ChatRequest], bodies: list[dict], results: list[Any],
                    progress: Callable[[int], None] | None) -> dict[str, list[int]]:
        """Fills ``results`` with cached answers; the requests left to send, as key -> their positions."""
        todo: dict[str, list[int]] = {}
        for i, (req, body) in enumerate(zip(reqs, bodies)):
            key = cache_key(body)
            self.usage.add(req.tag, requests=1)
            if self.cache is None:
                todo[f"{key}#{i}"] = [i]
                continue
            if key in todo:
                todo[key].append(i)
                continue
            hit = self.cache.get(key)
            if hit is None:
                todo[key] = [i]
                continue
            results[i] = ChatResponse.from_cache(hit)
            self.usage.add(req.tag, cache_hits=1, truncated=int(results[i].truncated))
            if isinstance(hit.get("adjusted"), dict):
                self._refusals.learn(hit["adjusted"])
            if progress:
                progress(1)
        return todo

    def _answer(self, key: str, body: Mapping[str, Any], tag: str | None) -> ChatResponse:
        """The answer to ``body``, cached under ``key`` with the refusals learnt, so a re-run's manifest says what
        was sent."""
        out = self._call_chat(body, tag)
        if self.cache is not None:
            self.cache.put(key, body["model"], {**out.to_cache(), "adjusted": self._refusals.adjusted()})
        return out

    def _run_batch(self, jobs: list[tuple[str, dict, str | None]], width: int, return_exceptions: bool,
                   settle: Callable[[str, Any], None]) -> None:
        """Answers ``jobs`` (key, body, tag) on ``width`` threads, each call waiting for its place in the pacer.

        The first error (unless ``return_exceptions`` and an LLMError) cancels the calls not yet sent and is raised
        once the ones in flight end."""
        self.preflight()
        cancel = threading.Event()

        def one(key: str, body: dict, tag: str | None) -> ChatResponse:
            _BATCH.cancel, _BATCH.fail_fast = cancel, not return_exceptions
            try:
                return self._answer(key, body, tag)
            finally:
                _BATCH.cancel, _BATCH.fail_fast = None, False

        if width == 1:
            for key, body, tag in jobs:
                try:
                    settle(key, one(key, body, tag))
                except LLMError as exc:
                    if not return_exceptions:
                        raise
                    settle(key, exc)
            return
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="gapbench-llm") as pool:
            futures = {pool.submit(one, *job): job[0] for job in jobs}
            first: BaseException | None = None
            for fut in as_completed(futures):
                if fut.cancelled():
                    continue
                failure = fut.exception()
                if failure is None or (return_exceptions and isinstance(failure, LLMError)):
                    settle(futures[fut], fut.result() if failure is None else failure)
                elif first is None and not isinstance(failure, _Cancelled):
                    first = failure
                    cancel.set()
                    for f in futures:
                        f.cancel()
        if first is not None:
            raise first

    # -- embeddings -------------------------------------------------------------------------------------------
    def embed_many(self, texts: Sequence[str], model: str | None = None, *, dimensions: int | None = None,
                   batch_size: int = 256, tag: str | None = None, concurrency: int | None = None):
        """Embeddings of ``texts`` from ``/v1/embeddings`` as a float32 array (len(texts), dim), in input order.

        Batches of ``batch_size`` texts go out ``concurrency`` at a time, with the same retries and counters as chat.
        Not cached here: wrap it in :class:`gapbench.cache.EmbeddingCache`.
        """
        import numpy as np

        name = model or self.config.model
        if not name:
            raise ConfigError("no embedding model given; give model=... (the name the endpoint knows it by) or set "
                              "the client's model.")
        if batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r} is not accepted; give an integer >= 1.")
        if dimensions is not None and dimensions < 1:
            raise ConfigError(f"dimensions={dimensions!r} is not accepted; give an integer >= 1 or None.")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ConfigError(f"text #{i} is a {type(t).__name__}; embed_many takes strings.")
        batches = [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]
        if batches:
            self.preflight()
        api = self._api()
        extra = {"dimensions": dimensions} if dimensions is not None else {}

        def one(batch: list[str]) -> np.ndarray:
            def call(seconds: float):
                data = post(api.embeddings, seconds, self.config.max_response_bytes, input=batch, model=name,
                            encoding_format="float", extra_body=extra)
                return _embeddings(data, len(batch))

            self.usage.add(tag, requests=1)
            arr, tokens = self._retrier.call("embeddings", name, tag, call, prompt_tokens(batch))
            self.usage.add(tag, prompt_tokens=tokens)
            return arr

        width = max(1, min(concurrency or self.config.concurrency, len(batches)))
        if width == 1:
            parts = [one(b) for b in batches]
        else:
            with ThreadPoolExecutor(max_workers=width, thread_name_prefix="gapbench-embed") as pool:
                futures = [pool.submit(one, b) for b in batches]
                try:
                    parts = [f.result() for f in futures]
                finally:  # a failed batch stops the ones not started; the ones in flight end within their bounds
                    for f in futures:
                        f.cancel()
        if not parts:
            return np.zeros((0, dimensions or 0), dtype=np.float32)
        if len({p.shape[1] for p in parts}) > 1:
            raise LLMResponseError(f"LLM endpoint {self.endpoint}/embeddings returned vectors of different sizes "
                                   f"{sorted({p.shape[1] for p in parts})} for model {name!r}.",
                                   endpoint=f"{self.endpoint}/embeddings")
        return np.concatenate(parts, axis=0)

    # -- reporting --------------------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """sha256 over what shapes the answers: model and every sampling parameter (not the endpoint or key).

        The parameters added after the first four enter only when set, so fingerprints of older runs still match."""
        c = self.config
        more = {"top_p": c.top_p, "stop": list(c.stop) if c.stop else None, "extra": c.extra or None,
                "max_tokens_cap": c.max_tokens_cap if c.max_tokens_cap != _MAX_TOKENS_CAP else None}
        more = {k: v for k, v in more.items() if v is not None}
        blob = json.dumps([c.model, c.temperature, c.max_tokens, c.seed] + ([more] if more else []), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def describe(self) -> dict[str, Any]:
        """The config, under ``sent`` the parameters as the server got them (refused ones left out or renamed, with
        its words under ``refused``), and under ``retry`` the retry policy with its time bounds."""
        c = self.config
        refused = self._refusals.said()
        return {"endpoint": self.endpoint, "model": c.model, "temperature": c.temperature, "max_tokens": c.max_tokens,
                "seed": c.seed, "top_p": c.top_p, "stop": list(c.stop) if c.stop else None, "extra": dict(c.extra),
                "max_tokens_cap": c.max_tokens_cap, "sent": self._refusals.as_sent(self._sampling()),
                "refused": refused,
                "retry": self._retrier.describe(), "preflight_timeout": c.preflight_timeout,
                "concurrency": c.concurrency, "adaptive": c.adaptive, "api_key_env": c.api_key_env,
                "cache": str(self.cache.path) if self.cache else None}

    def manifest(self) -> dict[str, Any]:
        """Config and counters for a run manifest (JSON-ready; holds no key); ``pacing``: the concurrency the client
        ended at and the lowest it went to."""
        return {**self.describe(), "usage": self.usage.record().model_dump(), "pacing": self._pacer.state()}

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LazyClient:
    """One :class:`LLMClient`, made on first use and shared by every thread of the component that holds it.

    The config is checked when the component is built (``LLMConfig(...).resolved()``), so a bad URL or model is
    reported before any retrieval work; the client itself (and its HTTP session) only when a call needs it. A client
    passed in is used as it is.

        llm = LazyClient.of(model="m", temperature=None)   # config checked, nothing connects yet
        llm.get().chat("hello")                              # the client is made here, once
    """

    def __init__(self, config: LLMConfig | None = None, client: LLMClient | None = None, *,
                 cache: bool | str | os.PathLike = True) -> None:
        if client is None and config is None:
            raise ConfigError("LazyClient needs an LLMConfig or a client.")
        self._config, self._client, self._cache = config, client, cache
        self._lock = threading.Lock()

    @classmethod
    def of(cls, client: LLMClient | None = None, *, cache: bool | str | os.PathLike = True,
           **options: Any) -> LazyClient:
        """``client`` when given, else one made later from the ``options`` (LLMConfig fields) that are not None."""
        if client is not None:
            return cls(client=client)
        return cls(LLMConfig(**{k: v for k, v in options.items() if v is not None}).resolved(), cache=cache)

    def get(self) -> LLMClient:
        with self._lock:
            if self._client is None:
                self._client = LLMClient(self._config, cache=self._cache)
            return self._client

    @property
    def made(self) -> LLMClient | None:
        """The client when one exists, else None (no call was needed yet)."""
        return self._client

    def manifest(self) -> dict[str, Any] | None:
        """The client's manifest (model, endpoint, sampling, usage), or None when no client was made."""
        return self._client.manifest() if self._client is not None else None
