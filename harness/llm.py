"""One client for OpenAI-compatible endpoints (OpenAI, vLLM, llama.cpp, Ollama): retries, bounded concurrency, a SQLite
response cache, usage counters, and the prompt templates.

    cfg = LLMConfig(base_url="http://localhost:8000/v1", model="Qwen/Qwen2.5-7B-Instruct", concurrency=16)
    llm = LLMClient(cfg)
    prompt = listwise_prompt("what is BM25?", ["BM25 is a ranking function ...", "Paris is ..."])
    answers = llm.chat_many([ChatRequest(prompt, tag="q1"), ...])       # in input order
    manifest["llm"] = llm.manifest()                                   # config and counters, never the key

Retries (exponential backoff with jitter, ``Retry-After`` honoured) happen on 429, 408, 5xx, timeouts and connection
errors; any other 4xx raises :class:`LLMRequestError` at once. The base URL and model come from the arguments, then
``$OPENAI_BASE_URL`` (else OpenAI's own URL); the key is read from ``$OPENAI_API_KEY`` (``api_key_env``) and is kept
out of every message, repr, manifest and counter. Local servers need no key.

Responses are cached in ``cache_dir("llm")/responses.sqlite`` keyed by sha256 of (model, messages, parameters), so a
re-run makes no calls. The endpoint is not part of the key: the same model name on two servers shares answers.

Prompt templates are ``prompts/<name>.txt`` files in this package, filled with ``str.format`` fields
(``render("listwise_rank", query=..., passages=..., num=...)``); a literal brace is written ``{{`` or ``}}``.
A path to your own ``.txt`` file works wherever a template name does.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sqlite3
import string
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from .cache import cache_dir
from .errors import ConfigError, GapbenchError, MissingDependencyError, UnknownNameError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PROMPTS_DIR = Path(__file__).with_name("prompts")
_NO_KEY = "EMPTY"  # vLLM's convention for servers that check no key; the openai package insists on some value
_RETRY_STATUSES = frozenset({408, 429})
_RETRY_AFTER_CAP = 120.0  # a server's Retry-After is honoured up to this (or retry_wait_max when larger)


# --------------------------------------------------------------------------------------------------------- errors
class LLMError(GapbenchError):
    """An LLM endpoint call failed; ``endpoint`` (no credentials) and ``status`` (HTTP status or None) say where."""

    def __init__(self, message: str, *, endpoint: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.status = status


class LLMRequestError(LLMError):
    """The endpoint refused the request (400, 401, 403, 404, 422, ...); retrying cannot help, so none was made."""


class LLMUnavailableError(LLMError):
    """The endpoint kept failing (429, 5xx, timeouts, no connection) until the retries ran out."""


class LLMResponseError(LLMError):
    """The endpoint answered, but with something that is not a usable OpenAI-format response."""


# --------------------------------------------------------------------------------------------------------- prompts
def available_prompts() -> list[str]:
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.txt"))


def prompt_path(name: str) -> Path:
    """The file of template ``name`` (a packaged template, or a path to a ``.txt`` file of your own)."""
    if name.endswith(".txt") or os.sep in name or "/" in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise ConfigError(f"prompt template file {str(path)!r} does not exist; give an existing .txt file or one of "
                              f"the packaged names: {', '.join(available_prompts())}.")
        return path
    path = PROMPTS_DIR / f"{name}.txt"
    if not path.is_file():
        raise UnknownNameError("prompt template", name, available_prompts(),
                               hint="Or give the path of a .txt template of your own.")
    return path


def load_prompt(name: str) -> str:
    return prompt_path(name).read_text(encoding="utf-8")


def prompt_fields(name: str) -> tuple[str, ...]:
    """The ``{field}`` names template ``name`` uses, in order of first use."""
    seen: dict[str, None] = {}
    for _, fname, _, _ in string.Formatter().parse(load_prompt(name)):
        if fname is not None:
            seen.setdefault(fname, None)
    return tuple(seen)


def render(name: str, **values: Any) -> str:
    """Template ``name`` filled with ``values`` (``str.format``); every field must be given and no other.

    >>> render("listwise_rank", query="q", passages="[1] a\\n[2] b", num=2)  # doctest: +ELLIPSIS
    'You are RankGPT, ...'
    """
    text = load_prompt(name)
    wanted = set(prompt_fields(name))
    missing, extra = sorted(wanted - set(values)), sorted(set(values) - wanted)
    if missing or extra:
        raise ConfigError(
            f"prompt template {name!r} takes the fields {', '.join(sorted(wanted)) or '(none)'}; "
            + (f"missing: {', '.join(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"unknown: {', '.join(extra)}" if extra else "")
            + ". Pass exactly the template's fields."
        )
    return text.format(**values)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def listwise_prompt(query: str, passages: Sequence[str], *, template: str = "listwise_rank",
                    max_chars: int | None = None) -> str:
    """The RankGPT listwise prompt: ``Query: ...`` on one line, then passages ``[1] ...``, ``[2] ...`` one per line.

    Whitespace inside the query and each passage is collapsed to single spaces (so each stays on its line), and a
    passage is cut to ``max_chars`` characters when given. The answer asked for looks like ``[2] > [1] > [3]``.
    """
    lines = []
    for i, text in enumerate(passages, 1):
        text = _one_line(text)
        if max_chars is not None and len(text) > max_chars:
            text = text[:max_chars].rstrip()
        lines.append(f"[{i}] {text}".rstrip())
    return render(template, query=_one_line(query), passages="\n".join(lines), num=len(lines))


# --------------------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class LLMConfig:
    """Where and how to call the model. Holds the *name* of the key's environment variable, never the key.

    ``max_retries`` retries follow the first attempt (so ``max_retries + 1`` attempts at most); the wait before retry
    n is drawn from [w/2, w] with w = ``min(retry_wait * 2**(n-1), retry_wait_max)``, or is the server's Retry-After
    when that is longer (up to 120 s, or ``retry_wait_max`` when larger). ``price_in`` / ``price_out`` are prices per 1M input / output tokens (any currency; reported as cost).
    """

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int | None = 512
    timeout: float = 120.0
    max_retries: int = 6
    concurrency: int = 8
    seed: int | None = 0
    price_in: float | None = None
    price_out: float | None = None
    retry_wait: float = 1.0
    retry_wait_max: float = 60.0

    def __post_init__(self) -> None:
        def bad(name: str, accepted: str) -> ConfigError:
            return ConfigError(f"LLMConfig.{name}={getattr(self, name)!r} is not accepted; give {accepted}.")

        if self.concurrency < 1:
            raise bad("concurrency", "an integer >= 1")
        if self.max_retries < 0:
            raise bad("max_retries", "an integer >= 0 (0 means one attempt, no retry)")
        if not self.timeout > 0:
            raise bad("timeout", "a number of seconds > 0")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise bad("max_tokens", "an integer >= 1, or None for the server's default")
        if self.temperature < 0:
            raise bad("temperature", "a number >= 0")
        for name in ("price_in", "price_out"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise bad(name, "a price per 1M tokens >= 0, or None")
        if self.retry_wait < 0 or self.retry_wait_max < 0:
            raise bad("retry_wait" if self.retry_wait < 0 else "retry_wait_max", "a number of seconds >= 0")

    def resolved(self) -> "LLMConfig":
        """This config with the base URL filled in (argument, else ``$OPENAI_BASE_URL``, else OpenAI) and checked."""
        base = self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        base = base.strip().rstrip("/")
        for suffix in ("/chat/completions", "/embeddings"):
            if base.endswith(suffix):  # a pasted endpoint URL rather than the API root
                base = base[: -len(suffix)]
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"LLM base URL {redact_url(base)!r} is not an http(s) URL; give the API root, e.g. "
                              "http://localhost:8000/v1 (vLLM), http://localhost:8080/v1 (llama.cpp), "
                              "http://localhost:11434/v1 (Ollama) or https://api.openai.com/v1 (--llm-base-url).")
        if not self.model:
            raise ConfigError("no LLM model given; pass the model name (--llm-model, or LLMConfig(model=...)) as the "
                              "endpoint knows it, e.g. 'gpt-4o-mini' or the name vLLM was started with.")
        return replace(self, base_url=base)


def redact_url(url: str) -> str:
    """``url`` without user, password, query string or fragment: safe to print."""
    try:
        p = urlsplit(url)
        host = p.hostname or ""
        if p.port:
            host += f":{p.port}"
        return urlunsplit((p.scheme, host, p.path, "", ""))
    except ValueError:
        return "<unparseable URL>"


# --------------------------------------------------------------------------------------------------------- records
Message = Mapping[str, str]


def _messages(value: str | Sequence[Message]) -> tuple[dict[str, str], ...]:
    if isinstance(value, str):
        return ({"role": "user", "content": value},)
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ConfigError(f"chat message #{i} is {m!r}; each message is a mapping with string 'role' and "
                              "'content', e.g. {'role': 'user', 'content': '...'}, or pass one prompt string.")
        out.append({"role": m["role"], "content": m["content"]})
    if not out:
        raise ConfigError("a chat request has no messages; pass a prompt string or a non-empty list of messages.")
    return tuple(out)


@dataclass(frozen=True)
class ChatRequest:
    """One chat call: a prompt string or OpenAI messages, a ``tag`` (e.g. the query id) for the counters, and
    per-request parameters that override the config (``temperature``, ``max_tokens``, ``stop``, ...)."""

    messages: str | Sequence[Message]
    tag: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatResponse:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    model: str = ""

    def to_cache(self) -> dict:
        return {"text": self.text, "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "model": self.model}

    @classmethod
    def from_cache(cls, data: Mapping[str, Any]) -> "ChatResponse":
        return cls(data["text"], data.get("finish_reason"), int(data.get("prompt_tokens", 0)),
                   int(data.get("completion_tokens", 0)), True, data.get("model", ""))


def cache_key(payload: Mapping[str, Any]) -> str:
    """sha256 over the model, the messages and every other request parameter (canonical JSON)."""
    body = {"model": payload["model"], "messages": payload["messages"],
            "params": {k: v for k, v in payload.items() if k not in ("model", "messages")}}
    blob = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------------------- cache
class ResponseCache:
    """A SQLite table key -> response JSON, in WAL mode so readers never wait on the writer; shared by threads (one
    connection behind a lock: a lookup costs microseconds next to an HTTP call) and safe across processes."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else cache_dir("llm") / "responses.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
            "response TEXT NOT NULL, created REAL NOT NULL)"
        )

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._conn.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, response: Mapping[str, Any]) -> None:
        blob = json.dumps(response, ensure_ascii=False)
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)", (key, model, blob, time.time()))

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"


# --------------------------------------------------------------------------------------------------------- counters
_COUNTERS = ("requests", "calls", "retries", "cache_hits", "failures", "prompt_tokens", "completion_tokens")


class LLMUsage:
    """Thread-safe counters, in total and per tag (query id).

    ``requests``: answers asked for; ``calls``: HTTP calls made (first attempts and retries); ``retries``;
    ``cache_hits``: answers served without a call; ``failures``: requests that raised; tokens are those billed
    (real calls only); cost = tokens x price per 1M tokens, when a price is set.
    """

    def __init__(self, price_in: float | None = None, price_out: float | None = None) -> None:
        self.price_in, self.price_out = price_in, price_out
        self._lock = threading.Lock()
        self._total = dict.fromkeys(_COUNTERS, 0)
        self._tags: dict[str, dict[str, int]] = {}

    def add(self, tag: str | None, **deltas: int) -> None:
        with self._lock:
            rows = [self._total]
            if tag is not None:
                rows.append(self._tags.setdefault(str(tag), dict.fromkeys(_COUNTERS, 0)))
            for row in rows:
                for k, v in deltas.items():
                    row[k] += v

    def _cost(self, row: Mapping[str, int]) -> float | None:
        if self.price_in is None and self.price_out is None:
            return None
        cost = row["prompt_tokens"] * (self.price_in or 0.0) + row["completion_tokens"] * (self.price_out or 0.0)
        return round(cost / 1e6, 8)

    def total(self) -> dict[str, Any]:
        with self._lock:
            row = dict(self._total)
        return {**row, "cost": self._cost(row)}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data for a run manifest."""
        with self._lock:
            total, tags = dict(self._total), {t: dict(r) for t, r in self._tags.items()}
        return {
            **total, "cost": self._cost(total), "price_in_per_1m": self.price_in, "price_out_per_1m": self.price_out,
            "per_query": {t: {**r, "cost": self._cost(r)} for t, r in sorted(tags.items())},
        }


# --------------------------------------------------------------------------------------------------------- client
def _openai_module():
    try:
        import openai
        import tenacity  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "openai", "llm", "The LLM client") from None
    return openai


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
        self.endpoint = redact_url(self.config.base_url)
        key = api_key if api_key is not None else os.environ.get(self.config.api_key_env)
        if not key:
            if urlsplit(self.config.base_url).hostname == urlsplit(DEFAULT_BASE_URL).hostname:
                raise ConfigError(f"no API key for {self.endpoint}: set the environment variable "
                                  f"${self.config.api_key_env} (or choose another with api_key_env=...).")
            key = _NO_KEY
        self.__key = key
        self.usage = LLMUsage(self.config.price_in, self.config.price_out)
        if cache is False:
            self.cache: ResponseCache | None = None
        else:
            self.cache = ResponseCache(None if cache is True else cache)
        self._client = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, endpoint={self.endpoint!r})"

    # -- plumbing ---------------------------------------------------------------------------------------------
    def _api(self):
        with self._client_lock:
            if self._client is None:
                openai = _openai_module()
                # the openai package's own retries are off: tenacity owns them, so every HTTP call is counted
                self._client = openai.OpenAI(api_key=self.__key, base_url=self.config.base_url,
                                             timeout=self.config.timeout, max_retries=0)
            return self._client

    def redact(self, text: str) -> str:
        """``text`` with the API key (and anything that looks like a bearer token or an OpenAI key) masked."""
        key = self.__key
        if key and key != _NO_KEY and len(key) >= 4:
            text = text.replace(key, "[redacted]")
        text = re.sub(r"(?i)(bearer\s+)\S+", r"\1[redacted]", text)
        return re.sub(r"sk-[A-Za-z0-9_\-]{6,}", "sk-[redacted]", text)

    def _wait(self, state) -> float:
        cfg = self.config
        ceiling = min(cfg.retry_wait * 2 ** (state.attempt_number - 1), cfg.retry_wait_max)
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        after = _retry_after(state.outcome.exception())
        if after is not None:
            delay = max(delay, min(after, max(cfg.retry_wait_max, _RETRY_AFTER_CAP)))
        return delay

    def _with_retries(self, what: str, model: str, tag: str | None, fn: Callable[[], Any]) -> Any:
        from tenacity import Retrying, retry_if_exception, stop_after_attempt

        attempts = 0

        def attempt():
            nonlocal attempts
            attempts += 1
            self.usage.add(tag, calls=1)
            return fn()

        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_retries + 1), wait=self._wait,
            retry=retry_if_exception(_is_retryable), reraise=True,
            before_sleep=lambda state: self.usage.add(tag, retries=1),
        )
        error: LLMError | None = None
        try:
            return retrying(attempt)
        except Exception as exc:  # translated outside this block so the new error carries no link to the request
            error = self._translate(exc, what, model, attempts)
            if error is None:
                raise
        self.usage.add(tag, failures=1)
        raise error

    def _translate(self, exc: BaseException, what: str, model: str, attempts: int) -> LLMError | None:
        openai = _openai_module()
        url = f"{self.endpoint}/{what}"
        tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            said = self.redact(_server_message(exc))
            if _is_retryable(exc):
                return LLMUnavailableError(
                    f"LLM endpoint {url} still answers HTTP {status} {tries} (model {model!r}): {said}. Raise "
                    "max_retries, lower concurrency, or try later; answers already received are cached, so a re-run "
                    "resumes where this one stopped.", endpoint=url, status=status)
            hint = {
                401: f"Check the API key in ${self.config.api_key_env} (the key is read from that variable).",
                403: f"The key in ${self.config.api_key_env} is not allowed to use this model or endpoint.",
                404: "Check the model name and that the base URL is the API root ending in /v1, e.g. "
                     "http://localhost:8000/v1 (--llm-base-url, --llm-model).",
            }.get(status, "The endpoint rejected the request; check the model name, max_tokens, temperature and the "
                          "prompt length for this model.")
            return LLMRequestError(f"LLM endpoint {url} answered HTTP {status} (model {model!r}), not retried: {said}. "
                                   f"{hint}", endpoint=url, status=status)
        if isinstance(exc, openai.APITimeoutError):
            return LLMUnavailableError(
                f"LLM endpoint {url} did not answer within {self.config.timeout:g}s, {tries}. Raise the timeout, "
                "lower concurrency, or check the server's load.", endpoint=url)
        if isinstance(exc, openai.APIConnectionError):
            return LLMUnavailableError(
                f"cannot connect to the LLM endpoint {url} ({tries}): {self.redact(type(exc).__name__)}. Is the "
                "server running and the base URL right (--llm-base-url)?", endpoint=url)
        if isinstance(exc, (openai.OpenAIError, ValueError, KeyError, TypeError)):
            return LLMResponseError(
                f"LLM endpoint {url} answered with something that is not an OpenAI-format response "
                f"({self.redact(type(exc).__name__)}: {self.redact(str(exc))[:300]}).", endpoint=url)
        return None

    # -- chat -------------------------------------------------------------------------------------------------
    def payload(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (config defaults, then the request's own parameters)."""
        body: dict[str, Any] = {"model": self.config.model, "messages": [dict(m) for m in _messages(request.messages)],
                                "temperature": self.config.temperature}
        if self.config.max_tokens is not None:
            body["max_tokens"] = self.config.max_tokens
        if self.config.seed is not None:
            body["seed"] = self.config.seed
        for k, v in request.params.items():
            if k in ("model", "messages", "stream", "n"):
                raise ConfigError(f"request parameter {k!r} cannot be set per request here; accepted are sampling "
                                  "parameters such as temperature, max_tokens, top_p, stop, seed.")
            body[k] = v
        return body

    def _call_chat(self, body: Mapping[str, Any], tag: str | None) -> ChatResponse:
        api = self._api()
        extra = {k: v for k, v in body.items() if k not in ("model", "messages")}

        def call() -> ChatResponse:
            resp = api.chat.completions.create(model=body["model"], messages=body["messages"], extra_body=extra)
            if not resp.choices:
                raise ValueError("the response has no choices")
            choice = resp.choices[0]
            usage = resp.usage
            return ChatResponse(
                text=choice.message.content or "", finish_reason=choice.finish_reason,
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                cached=False, model=resp.model or "",
            )

        out = self._with_retries("chat/completions", body["model"], tag, call)
        self.usage.add(tag, prompt_tokens=out.prompt_tokens, completion_tokens=out.completion_tokens)
        return out

    def chat(self, messages: str | Sequence[Message] | ChatRequest, *, tag: str | None = None,
             **params: Any) -> ChatResponse:
        """One answer: ``llm.chat("Say hi", tag="q1", max_tokens=5).text``."""
        req = messages if isinstance(messages, ChatRequest) else ChatRequest(messages, tag, params)
        return self.chat_many([req], concurrency=1)[0]

    def chat_many(self, requests: Sequence[ChatRequest | str | Sequence[Message]], *, concurrency: int | None = None,
                  return_exceptions: bool = False,
                  progress: Callable[[int], None] | None = None) -> list[ChatResponse | LLMError]:
        """Answers to ``requests`` in input order, at most ``concurrency`` (default: the config's) calls in flight.

        Cached answers cost no call; identical requests in one batch are sent once. On a failure the first error is
        raised once the calls in flight end (their answers are cached), unless ``return_exceptions`` puts each
        request's error in its slot instead.
        """
        reqs = [r if isinstance(r, ChatRequest) else ChatRequest(r) for r in requests]
        bodies = [self.payload(r) for r in reqs]
        keys = [cache_key(b) for b in bodies]
        results: list[Any] = [None] * len(reqs)
        todo: dict[str, list[int]] = {}
        for i, (req, key) in enumerate(zip(reqs, keys)):
            self.usage.add(req.tag, requests=1)
            if self.cache is not None:
                if key in todo:  # the same request twice in one batch: answered by the first one's call
                    todo[key].append(i)
                    continue
                hit = self.cache.get(key)
                if hit is not None:
                    results[i] = ChatResponse.from_cache(hit)
                    self.usage.add(req.tag, cache_hits=1)
                    if progress:
                        progress(1)
                    continue
                todo[key] = [i]
            else:
                todo[f"{key}#{i}"] = [i]
        if not todo:
            return results

        def run(key: str, first: int) -> ChatResponse:
            out = self._call_chat(bodies[first], reqs[first].tag)
            if self.cache is not None:
                self.cache.put(key, bodies[first]["model"], out.to_cache())
            return out

        def settle(key: str, fut: Future) -> None:
            idxs = todo[key]
            exc = fut.exception()
            for n, i in enumerate(idxs):
                if exc is not None:
                    results[i] = exc
                else:
                    results[i] = fut.result() if n == 0 else replace(fut.result(), cached=True)
                    if n:
                        self.usage.add(reqs[i].tag, cache_hits=1)
            if progress:
                progress(len(idxs))

        width = max(1, min(concurrency or self.config.concurrency, len(todo)))
        if width == 1:
            for key, idxs in todo.items():
                fut: Future = Future()
                try:
                    fut.set_result(run(key, idxs[0]))
                except LLMError as exc:
                    if not return_exceptions:
                        raise
                    fut.set_exception(exc)
                settle(key, fut)
            return results
        pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="gapbench-llm")
        try:
            futures = {pool.submit(run, key, idxs[0]): key for key, idxs in todo.items()}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for fut in done:
                    exc = fut.exception()
                    if exc is not None and not (return_exceptions and isinstance(exc, LLMError)):
                        for p in pending:
                            p.cancel()
                        pool.shutdown(wait=True, cancel_futures=True)
                        raise exc
                    settle(futures[fut], fut)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return results

    # -- embeddings -------------------------------------------------------------------------------------------
    def embed_many(self, texts: Sequence[str], model: str | None = None, *, dimensions: int | None = None,
                   batch_size: int = 256, tag: str | None = None, concurrency: int | None = None):
        """Embeddings of ``texts`` from ``/v1/embeddings`` as a float32 array (len(texts), dim), in input order.

        Batches of ``batch_size`` texts go out ``concurrency`` at a time, with the same retries and counters as chat.
        Not cached here: wrap it in :class:`gapbench.cache.EmbeddingCache`.
        """
        import numpy as np

        model = model or self.config.model
        if batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r} is not accepted; give an integer >= 1.")
        if dimensions is not None and dimensions < 1:
            raise ConfigError(f"dimensions={dimensions!r} is not accepted; give an integer >= 1 or None.")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ConfigError(f"text #{i} is a {type(t).__name__}; embed_many takes strings.")
        batches = [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]
        api = self._api()
        extra = {"dimensions": dimensions} if dimensions is not None else {}

        def one(batch: list[str]) -> "np.ndarray":
            def call():
                resp = api.embeddings.create(input=batch, model=model, encoding_format="float", extra_body=extra)
                data = sorted(resp.data, key=lambda d: d.index)
                if len(data) != len(batch):
                    raise ValueError(f"{len(data)} embeddings came back for {len(batch)} texts")
                return np.asarray([d.embedding for d in data], dtype=np.float32), resp.usage

            self.usage.add(tag, requests=1)
            arr, usage = self._with_retries("embeddings", model, tag, call)
            self.usage.add(tag, prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0))
            return arr

        width = max(1, min(concurrency or self.config.concurrency, len(batches)))
        if width == 1:
            parts = [one(b) for b in batches]
        else:
            with ThreadPoolExecutor(max_workers=width, thread_name_prefix="gapbench-embed") as pool:
                parts = list(pool.map(one, batches))
        if not parts:
            return np.zeros((0, dimensions or 0), dtype=np.float32)
        if len({p.shape[1] for p in parts}) > 1:
            raise LLMResponseError(f"LLM endpoint {self.endpoint}/embeddings returned vectors of different sizes "
                                   f"{sorted({p.shape[1] for p in parts})} for model {model!r}.",
                                   endpoint=f"{self.endpoint}/embeddings")
        return np.concatenate(parts, axis=0)

    # -- reporting --------------------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """sha256 over what shapes the answers: model, temperature, max_tokens, seed (not the endpoint or key)."""
        c = self.config
        blob = json.dumps([c.model, c.temperature, c.max_tokens, c.seed], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def describe(self) -> dict[str, Any]:
        c = self.config
        return {"endpoint": self.endpoint, "model": c.model, "temperature": c.temperature, "max_tokens": c.max_tokens,
                "seed": c.seed, "timeout": c.timeout, "max_retries": c.max_retries, "concurrency": c.concurrency,
                "api_key_env": c.api_key_env, "cache": str(self.cache.path) if self.cache else None}

    def manifest(self) -> dict[str, Any]:
        """Config and counters for a run manifest (JSON-ready; holds no key)."""
        return {**self.describe(), "usage": self.usage.to_dict()}

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_retryable(exc: BaseException) -> bool:
    openai = _openai_module()
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRY_STATUSES or exc.status_code >= 500
    return False


def _retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000.0
        if headers.get("retry-after"):
            return float(headers["retry-after"])
    except (TypeError, ValueError):  # an HTTP date: fall back to our own backoff
        return None
    return None


def _server_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            return str(err.get("message") or err)[:300]
        return str(err)[:300]
    try:
        text = exc.response.text
    except Exception:  # a streamed or unreadable body
        text = ""
    return (text or getattr(exc, "message", "") or "no message").strip()[:300]
