"""One client for OpenAI-compatible endpoints (OpenAI, vLLM, llama.cpp, Ollama): retries, bounded concurrency, a SQLite
response cache, usage counters, and the prompt templates.

    cfg = LLMConfig(base_url="http://localhost:8000/v1", model="Qwen/Qwen2.5-7B-Instruct", concurrency=16)
    llm = LLMClient(cfg)
    prompt = listwise_prompt("what is BM25?", ["BM25 is a ranking function ...", "Paris is ..."])
    answers = llm.chat_many([ChatRequest(prompt, tag="q1"), ...])       # in input order
    manifest["llm"] = llm.manifest()                                   # config and counters, never the key

Retries (exponential backoff with jitter, ``Retry-After`` honoured) happen on 429, 408, 5xx, timeouts and dropped
connections; any other 4xx, and an answer that is not an OpenAI-format response, raises at once. Every retry loop is
bounded in time, not only in attempts: one attempt by ``timeout`` (``$GAPBENCH_LLM_TIMEOUT``, default 120 s, however
slowly the body drips in), one call with its retries by ``call_timeout`` (``$GAPBENCH_LLM_CALL_TIMEOUT``, 300 s), and
a whole command by ``outage_timeout`` (``$GAPBENCH_LLM_OUTAGE_TIMEOUT``, 300 s): once the endpoint has given no usable
answer for that long, every call of the client gives up, so a server that accepts connections and never answers ends
the command after about that long. An endpoint that cannot be reached at all (connection refused, unknown host, no
TCP connection within 10 s) fails at once, unless it has answered before in this client (a server restarting).
Answers that are not OpenAI-format responses (not JSON, no choices, content null, an HTML page, an error object with
status 200) are clear errors; the body's Content-Type is not held against a valid answer.

The base URL and model come from the arguments, then ``$OPENAI_BASE_URL`` (else OpenAI's own URL); the key is read from ``$OPENAI_API_KEY`` (``api_key_env``) and is kept
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
import math
import os
import random
import re
import socket
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
_CONNECT_TIMEOUT = 10.0  # a TCP connection that takes longer is not coming: no retry waits for it
# (field, environment variable, default) of the time bounds; an argument wins over the variable, the variable over
# the default
_TIME_BOUNDS = (("timeout", "GAPBENCH_LLM_TIMEOUT", 120.0), ("call_timeout", "GAPBENCH_LLM_CALL_TIMEOUT", 300.0),
                ("outage_timeout", "GAPBENCH_LLM_OUTAGE_TIMEOUT", 300.0))


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


def _clause(text: str) -> str:
    """``text`` ready to be followed by a full stop of ours."""
    return text.rstrip(" .")


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
    when that is longer (up to 120 s, or ``retry_wait_max`` when larger). ``price_in`` / ``price_out`` are prices per
    1M input / output tokens (any currency; reported as cost).

    Time bounds in seconds (None: the environment variable, else the default; see the module docstring): ``timeout``
    per attempt, ``call_timeout`` per call with its retries, ``outage_timeout`` without a usable answer before the
    client gives up for good. ``max_response_bytes`` caps the size of one response body.
    """

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int | None = 512
    timeout: float | None = None
    max_retries: int = 6
    concurrency: int = 8
    seed: int | None = 0
    price_in: float | None = None
    price_out: float | None = None
    retry_wait: float = 1.0
    retry_wait_max: float = 60.0
    call_timeout: float | None = None
    outage_timeout: float | None = None
    max_response_bytes: int = 256 * 2**20

    def __post_init__(self) -> None:
        def bad(name: str, accepted: str) -> ConfigError:
            return ConfigError(f"LLMConfig.{name}={getattr(self, name)!r} is not accepted; give {accepted}.")

        if self.concurrency < 1:
            raise bad("concurrency", "an integer >= 1")
        if self.max_retries < 0:
            raise bad("max_retries", "an integer >= 0 (0 means one attempt, no retry)")
        for name, _, _ in _TIME_BOUNDS:
            value = getattr(self, name)
            if value is not None and not 0 < value < math.inf:
                raise bad(name, "a finite number of seconds > 0, or None for the environment variable or default")
        if self.max_response_bytes < 1:
            raise bad("max_response_bytes", "an integer >= 1")
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
        try:
            parts = urlsplit(base)
        except ValueError:  # e.g. an unclosed [ of an IPv6 address
            parts = urlsplit("")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"LLM base URL {redact_url(base)!r} is not an http(s) URL; give the API root, e.g. "
                              "http://localhost:8000/v1 (vLLM), http://localhost:8080/v1 (llama.cpp), "
                              "http://localhost:11434/v1 (Ollama) or https://api.openai.com/v1 (--llm-base-url).")
        problem = _url_problem(parts, base)
        if problem:
            raise ConfigError(f"LLM base URL {redact_url(base)!r} {problem}; give the API root of a reachable server, "
                              "e.g. http://localhost:8000/v1 (--llm-base-url or $OPENAI_BASE_URL).")
        if not self.model:
            raise ConfigError("no LLM model given; pass the model name (--llm-model, or LLMConfig(model=...)) as the "
                              "endpoint knows it, e.g. 'gpt-4o-mini' or the name vLLM was started with.")
        bounds = {name: _env_seconds(env, default) if getattr(self, name) is None else getattr(self, name)
                  for name, env, default in _TIME_BOUNDS}
        return replace(self, base_url=base, **bounds)


def _url_problem(parts, raw: str) -> str | None:
    """What is wrong with an http(s) URL (``raw``, split into ``parts``) that urlsplit accepted, or None."""
    if any(c.isspace() or ord(c) < 32 for c in raw):  # urlsplit silently drops tabs and newlines
        return "contains spaces or control characters"
    try:
        port = parts.port
    except ValueError:
        return "has a port that is not a number from 0 to 65535"
    if port == 0:
        return "has port 0, where no server listens"
    host = parts.hostname
    if not host:
        return "has no host name"
    if not re.fullmatch(r"[\w.~%:\-]+", host):
        return f"has the host name {host!r}, which is not a valid host"
    return None


def _env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise ConfigError(f"${name}={raw!r} is not accepted; set it to a finite number of seconds > 0 (e.g. 30), or "
                          "unset it for the default.")
    return value


def redact_url(url: str) -> str:
    """``url`` without user, password, query string or fragment: safe to print."""
    try:
        p = urlsplit(url)
        if any(ord(c) < 32 for c in url):  # urlsplit would drop them, and show a URL other than the one given
            raise ValueError(url)
    except ValueError:  # unparseable (an unclosed IPv6 bracket): still drop what may hold a credential
        return re.sub(r"//[^/]*@", "//", re.split(r"[?#]", url, maxsplit=1)[0])
    return urlunsplit((p.scheme, p.netloc.rpartition("@")[2], p.path, "", ""))


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
_BUSY_S = 60.0  # how long a cache statement waits for another writer
_SETUP_LOCK = threading.Lock()
_SET_UP: set[str] = set()  # cache files this process has already set up


def _set_up(conn: sqlite3.Connection) -> None:
    """WAL mode and the table, retried while another process sets up the same file: SQLite answers a lock upgrade
    that could deadlock with "database is locked" at once, without waiting out the busy timeout."""
    deadline = time.monotonic() + _BUSY_S
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                         "response TEXT NOT NULL, created REAL NOT NULL)")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.01, 0.05))


class ResponseCache:
    """A SQLite table key -> response JSON, in WAL mode so readers never wait on the writer; shared by threads (one
    connection behind a lock: a lookup costs microseconds next to an HTTP call) and safe across processes.

    Many caches may be opened on one file at once (rerankers open theirs from worker threads): the file is set up
    (WAL, the table) once per process under a lock, and a setup that races another process is retried.
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else cache_dir("llm") / "responses.sqlite"
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), timeout=_BUSY_S, check_same_thread=False,
                                         isolation_level=None)
            self._conn.execute(f"PRAGMA busy_timeout={int(_BUSY_S * 1000)}")
            key = str(self.path.resolve())
            with _SETUP_LOCK:
                if key not in _SET_UP or not self._conn.execute(
                        "SELECT 1 FROM sqlite_master WHERE name = 'responses'").fetchone():  # deleted since
                    _set_up(self._conn)
                    _SET_UP.add(key)
            self._conn.execute("PRAGMA synchronous=NORMAL")  # a per-connection setting
        except (OSError, sqlite3.Error) as exc:
            raise self._broken("opened", exc) from None

    def _broken(self, what: str, exc: BaseException) -> GapbenchError:
        return GapbenchError(
            f"the LLM response cache {str(self.path)!r} cannot be {what} ({type(exc).__name__}: "
            f"{_one_line(str(exc))}); if it is damaged, delete it (gapbench cache clear llm) and re-run, or point $GAPBENCH_HOME at a writable "
            "folder.")

    def _query(self, what: str, sql: str, args: tuple = ()) -> list[tuple]:
        try:
            with self._lock:
                return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            error = self._broken(what, exc)
        raise error

    def get(self, key: str) -> dict | None:
        rows = self._query("read", "SELECT response FROM responses WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def put(self, key: str, model: str, response: Mapping[str, Any]) -> None:
        blob = json.dumps(response, ensure_ascii=False)
        self._query("written", "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)", (key, model, blob, time.time()))

    def __len__(self) -> int:
        return self._query("read", "SELECT COUNT(*) FROM responses")[0][0]

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
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "openai", "llm", "The LLM client") from None
    return openai


class _Garbage(Exception):
    """A 2xx answer that is not a usable OpenAI-format response; retrying the same request would get the same."""


class _Slow(Exception):
    """The body was still arriving when the attempt's time ran out (a drip): retried like a timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the answer was still arriving after {seconds:g} s")


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
        self.endpoint = self.redact(redact_url(self.config.base_url))
        if not key and urlsplit(self.config.base_url).hostname == urlsplit(DEFAULT_BASE_URL).hostname:
            raise ConfigError(f"no API key for {self.endpoint}: set the environment variable "
                              f"${self.config.api_key_env} (or choose another with api_key_env=...).")
        self.usage = LLMUsage(self.config.price_in, self.config.price_out)
        if cache is False:
            self.cache: ResponseCache | None = None
        else:
            self.cache = ResponseCache(None if cache is True else cache)
        self._client = None
        self._client_lock = threading.Lock()
        # the endpoint's health across every call of this client, i.e. of one command: see _with_retries
        self._health_lock = threading.Lock()
        self._answered = False
        self._failing_since: float | None = None
        self._last_failure = ""
        self._gave_up: str | None = None

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, endpoint={self.endpoint!r})"

    # -- plumbing ---------------------------------------------------------------------------------------------
    def _api(self):
        with self._client_lock:
            if self._client is None:
                openai = _openai_module()
                # the openai package's own retries are off: ours are bounded in time and count every HTTP call
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

    def _post(self, resource, seconds: float, **kwargs: Any) -> Any:
        """The JSON of a 2xx answer to one request, read within ``seconds`` however slowly it arrives."""
        openai = _openai_module()
        start = time.monotonic()
        timeout = openai.Timeout(seconds, connect=min(_CONNECT_TIMEOUT, seconds))
        with resource.with_streaming_response.create(**kwargs, timeout=timeout) as response:
            http = response.http_response
            chunks, size = [], 0
            for chunk in http.iter_bytes():
                size += len(chunk)
                if size > self.config.max_response_bytes:
                    raise _Garbage(f"a body larger than {self.config.max_response_bytes} bytes (max_response_bytes)")
                chunks.append(chunk)
                if time.monotonic() - start > seconds:
                    raise _Slow(seconds)
            content_type = http.headers.get("content-type", "")
        return _decode_json(b"".join(chunks), content_type)

    def _attempt_time(self, call_start: float) -> float:
        """Seconds the next attempt may take: the least of the timeout, the call's and the command's time left."""
        cfg, now = self.config, time.monotonic()
        with self._health_lock:
            failing = 0.0 if self._failing_since is None else now - self._failing_since
        return min(cfg.timeout, cfg.call_timeout - (now - call_start), cfg.outage_timeout - failing)

    def _with_retries(self, what: str, model: str, tag: str | None, fn: Callable[[float], Any]) -> Any:
        """``fn(seconds)`` with retries on transient faults, bounded by attempts, the call's time and the command's.

        The command's bound: the endpoint's failing streak starts with the first attempt that failed after the last
        usable answer; once it is ``outage_timeout`` long, this call and every later one give up at once.
        """
        cfg = self.config
        start = time.monotonic()
        attempts = 0
        failure: BaseException | None = None
        spent = cfg.timeout  # the time the last attempt was given
        stop = "attempts"
        while True:
            with self._health_lock:
                gave_up, failing = self._gave_up, self._failing_since is not None
            seconds = self._attempt_time(start)
            if gave_up is not None or seconds < 0.05:
                stop = "outage" if gave_up is not None or failing else "call"
                break
            spent = seconds
            attempts += 1
            self.usage.add(tag, calls=1)
            began = time.monotonic()
            try:
                out = fn(seconds)
            except Exception as exc:  # classified outside this block so the error raised carries no link to it
                failure = exc
            else:
                with self._health_lock:
                    self._answered, self._failing_since = True, None
                return out
            if not self._retryable(failure):
                stop = "final"
                break
            with self._health_lock:
                if self._failing_since is None or began < self._failing_since:
                    self._failing_since = began
                failing_since = self._failing_since
                self._last_failure = _describe(failure)
            delay = self._delay(attempts, failure)
            after = time.monotonic() + delay + 0.05
            if attempts > cfg.max_retries:
                stop = "attempts"
                break
            if after - failing_since >= cfg.outage_timeout:
                stop = "outage"
                break
            if after - start >= cfg.call_timeout:
                stop = "call"
                break
            self.usage.add(tag, retries=1)
            time.sleep(delay)
        error = self._translate(failure, what, model, attempts, spent, stop)
        if error is None:
            raise failure
        if stop == "outage":
            with self._health_lock:
                if self._gave_up is None:
                    self._gave_up = str(error)
                error = LLMUnavailableError(self._gave_up, endpoint=error.endpoint, status=error.status)
        self.usage.add(tag, failures=1)
        raise error

    def _retryable(self, exc: BaseException) -> bool:
        kind = _failure_kind(exc)
        if kind == "status":
            return exc.status_code in _RETRY_STATUSES or exc.status_code >= 500
        if kind in ("refused", "dns", "connect", "connect_timeout"):
            return self._answered  # it answered before: a restart, not a wrong address
        return kind in ("timeout", "slow", "dropped")

    def _delay(self, attempt: int, exc: BaseException) -> float:
        cfg = self.config
        ceiling = min(cfg.retry_wait * 2 ** (attempt - 1), cfg.retry_wait_max)
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        after = _retry_after(exc)
        if after is not None:
            delay = max(delay, min(after, max(cfg.retry_wait_max, _RETRY_AFTER_CAP)))
        return delay

    def _translate(self, exc: BaseException | None, what: str, model: str, attempts: int, seconds: float,
                   stop: str) -> LLMError | None:
        """The one-line error for a call that failed (``exc``: its last failure; ``stop``: why it stopped)."""
        cfg = self.config
        url = f"{self.endpoint}/{what}"
        tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        kind = _failure_kind(exc) if exc is not None else "none"
        where = "--llm-base-url (or $OPENAI_BASE_URL)"
        status = getattr(exc, "status_code", None) if kind == "status" else None
        if stop == "final":
            if kind == "status":
                said = _server_message(exc)
                hint = {
                    401: f"Check the API key in ${cfg.api_key_env} (the key is read from that variable).",
                    403: f"The key in ${cfg.api_key_env} is not allowed to use this model or endpoint.",
                    404: "Check the model name and that the base URL is the API root ending in /v1, e.g. "
                         "http://localhost:8000/v1 (--llm-base-url, --llm-model).",
                }.get(status, "The endpoint rejected the request; check the model name, max_tokens, temperature and "
                              "the prompt length for this model.")
                return LLMRequestError(self._line(f"LLM endpoint {url} answered HTTP {status} (model {model!r}), not "
                                                  f"retried: {_clause(said)}. {hint}"), endpoint=url, status=status)
            if kind in ("refused", "dns", "connect", "connect_timeout"):
                parts = urlsplit(cfg.base_url)
                detail = {
                    "refused": f"connection refused: nothing listens on {parts.hostname}:{_port(parts)}. Start the "
                               f"server there, or point {where} at the one that runs",
                    "dns": f"the host name {parts.hostname!r} does not resolve. Check the host in {where}",
                    "connect_timeout": f"no TCP connection within {min(_CONNECT_TIMEOUT, seconds):g} s. Check that "
                                       f"{parts.hostname} is up and reachable from here and the port in {where}",
                }.get(kind, f"{_clause(_describe(exc))}. Is the server running, and is {where} right?")
                return LLMUnavailableError(self._line(f"cannot connect to the LLM endpoint {url}: {detail}."),
                                           endpoint=url)
            if kind == "garbage":
                return LLMResponseError(self._line(
                    f"LLM endpoint {url} answered with something that is not an OpenAI-format response (model "
                    f"{model!r}): {_clause(str(exc))}. Check that {where} is the API root of an OpenAI-compatible "
                    "server (it ends in /v1), not a proxy or sign-in page."), endpoint=url)
            openai = _openai_module()
            if isinstance(exc, openai.OpenAIError):
                return LLMResponseError(self._line(f"LLM endpoint {url} failed (model {model!r}): "
                                                   f"{_clause(_describe(exc))}."), endpoint=url)
            return None
        if kind == "status":
            head = f"LLM endpoint {url} still answers HTTP {status} {tries} (model {model!r}): {_server_message(exc)}"
        elif kind == "timeout":
            head = f"LLM endpoint {url} did not answer within {seconds:g} s, {tries} (model {model!r})"
        elif kind == "none":  # other calls used up the time of this one
            head = f"LLM endpoint {url} gave no usable answer (model {model!r}); last failure: {self._last_failure}"
        else:
            head = f"LLM endpoint {url} still fails {tries} (model {model!r}): {_describe(exc)}"
        why = {
            "attempts": "",
            "call": f"; gave up: one call may take {cfg.call_timeout:g} s with its retries "
                    "($GAPBENCH_LLM_CALL_TIMEOUT or call_timeout)",
            "outage": f"; gave up: no usable answer for {cfg.outage_timeout:g} s, the limit for one command "
                      "($GAPBENCH_LLM_OUTAGE_TIMEOUT or outage_timeout)",
        }[stop]
        cached = (f"answers already received are cached in {str(self.cache.path)!r}, so a re-run resumes where this "
                  "one stopped" if self.cache is not None else "nothing was cached (cache=False)")
        return LLMUnavailableError(self._line(
            f"{_clause(head)}{why}. Check that the server is up and not overloaded, lower concurrency, or raise "
            f"max_retries, the timeout ($GAPBENCH_LLM_TIMEOUT) or the limits; {cached}."), endpoint=url, status=status)

    def _line(self, text: str) -> str:
        return self.redact(_one_line(text))

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

        def call(seconds: float) -> ChatResponse:
            data = self._post(api.chat.completions, seconds, model=body["model"], messages=body["messages"],
                              extra_body=extra)
            return _chat_response(data)

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
            def call(seconds: float):
                data = self._post(api.embeddings, seconds, input=batch, model=model, encoding_format="float",
                                  extra_body=extra)
                return _embeddings(data, len(batch))

            self.usage.add(tag, requests=1)
            arr, tokens = self._with_retries("embeddings", model, tag, call)
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
                "seed": c.seed, "timeout": c.timeout, "call_timeout": c.call_timeout,
                "outage_timeout": c.outage_timeout, "max_retries": c.max_retries, "concurrency": c.concurrency,
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


# --------------------------------------------------------------------------------------------------------- responses
def _decode_json(body: bytes, content_type: str) -> Any:
    try:
        return json.loads(body)
    except RecursionError:
        raise _Garbage("JSON nested too deeply to read") from None
    except ValueError:  # not JSON, or not UTF-8
        raise _Garbage(f"{_body_kind(body, content_type)} where JSON was expected") from None


def _body_kind(body: bytes, content_type: str) -> str:
    text = body.decode("utf-8", "replace")
    if not text.strip():
        return f"an empty body (Content-Type {content_type or 'none'!r})"
    if "html" in content_type.lower() or text.lstrip().startswith("<"):
        words = _one_line(re.sub(r"<[^>]*>", " ", text))
        return f"an HTML page ({words[:120]!r})"
    return f"{len(body)} bytes of {content_type or 'unlabelled'} text starting {_one_line(text)[:80]!r}"


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _object(data: Any, wanted: str) -> dict:
    """``data`` when it is an object holding ``wanted``; else what it is instead, as a _Garbage."""
    if not isinstance(data, dict):
        raise _Garbage(f"a JSON {_json_type(data)} where an object with {wanted!r} was expected")
    if wanted not in data:
        err = data.get("error")
        if err is not None:
            said = err.get("message", err) if isinstance(err, dict) else err
            raise _Garbage(f"an error object with a success status: {_one_line(str(said))[:300]}")
        keys = ", ".join(sorted(map(str, data))[:8]) or "none"
        raise _Garbage(f"a JSON object without {wanted!r} (its keys: {keys})")
    return data


def _count(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _chat_response(data: Any) -> ChatResponse:
    choices = _object(data, "choices")["choices"]
    if not isinstance(choices, list) or not choices:
        raise _Garbage(f"'choices' is {'empty' if choices == [] else 'a JSON ' + _json_type(choices)}, not a list "
                       "with one answer")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise _Garbage(f"choices[0] is a JSON {_json_type(choice)} without a 'message' object")
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    content = message.get("content")
    if content is None:
        if isinstance(message.get("refusal"), str):
            raise _Garbage(f"the model refused: {message['refusal'][:200]!r}")
        hint = "; the answer ran out of tokens: raise max_tokens" if finish == "length" else ""
        raise _Garbage(f"the message has no content (content null, finish_reason {finish!r}){hint}")
    if not isinstance(content, str):
        raise _Garbage(f"the message content is a JSON {_json_type(content)}, not a string")
    usage = data.get("usage")
    model = data.get("model")
    return ChatResponse(text=content, finish_reason=finish, prompt_tokens=_count(usage, "prompt_tokens"),
                        completion_tokens=_count(usage, "completion_tokens"), cached=False,
                        model=model if isinstance(model, str) else "")


def _embeddings(data: Any, n: int):
    """(float32 array in input order, prompt tokens) from an embeddings response for ``n`` texts."""
    import numpy as np

    items = _object(data, "data")["data"]
    if not isinstance(items, list) or len(items) != n:
        got = len(items) if isinstance(items, list) else f"a JSON {_json_type(items)} instead of"
        raise _Garbage(f"{got} embeddings came back for {n} texts")
    if not all(isinstance(d, dict) and isinstance(d.get("embedding"), list) for d in items):
        raise _Garbage("an item of 'data' has no 'embedding' list")
    index = [d.get("index", i) for i, d in enumerate(items)]
    if not all(type(i) is int for i in index) or sorted(index) != list(range(n)):
        raise _Garbage(f"the embeddings' 'index' values are not 0 to {n - 1} once each")
    order = sorted(range(n), key=index.__getitem__)
    try:
        arr = np.asarray([items[i]["embedding"] for i in order], dtype=np.float32)
    except (TypeError, ValueError):
        raise _Garbage("the embeddings are not lists of numbers of one length") from None
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise _Garbage("the embeddings are not lists of numbers of one length")
    return arr, _count(data.get("usage"), "prompt_tokens")


# --------------------------------------------------------------------------------------------------------- failures
def _chain(exc: BaseException | None) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and len(out) < 12 and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _transport_names(chain: list[BaseException]) -> set[str]:
    """Class names of the HTTP library's errors in ``chain`` (httpx or its forks, whichever openai uses)."""
    return {c.__name__ for e in chain for c in type(e).__mro__ if c.__module__.split(".")[0].startswith(("httpx",
                                                                                                         "httpcore"))}


def _failure_kind(exc: BaseException) -> str:
    """status, timeout, slow, dropped, refused, dns, connect, connect_timeout, garbage, or other."""
    openai = _openai_module()
    if isinstance(exc, _Garbage):
        return "garbage"
    if isinstance(exc, _Slow):
        return "slow"
    if isinstance(exc, openai.APIStatusError):
        return "status"
    chain = _chain(exc)
    names = _transport_names(chain)
    if "ConnectTimeout" in names:
        return "connect_timeout"
    if isinstance(exc, openai.APITimeoutError) or "TimeoutException" in names:
        return "timeout"
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "refused"
    if any(isinstance(e, socket.gaierror) for e in chain):
        return "dns"
    if "ConnectError" in names:
        return "connect"
    if isinstance(exc, openai.APIConnectionError) or "TransportError" in names:
        return "dropped"
    return "other"


def _describe(exc: BaseException) -> str:
    """What went wrong, in a few words, from the deepest informative error (no request, no headers)."""
    chain = _chain(exc)
    named = [e for e in chain if _transport_names([e]) or isinstance(e, OSError)]
    if isinstance(exc, (_Slow, _Garbage)) or not named:
        return _one_line(str(exc) or type(exc).__name__)[:300]
    first = named[0]
    return f"{type(first).__name__}: {_one_line(str(first)) or 'no detail'}"[:300]


def _port(parts) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


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
    """The server's own words from an error answer, on one line: the message of a JSON error, else the text of the
    body (an HTML page reduced to its words)."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            return _one_line(str(err.get("message") or err))[:300]
        return _one_line(str(err))[:300]
    try:
        text = exc.response.text
    except Exception:  # a streamed or unreadable body
        text = ""
    text = text or getattr(exc, "message", "") or ""
    if "<" in text and ">" in text:
        text = re.sub(r"<[^>]*>", " ", text)
    return _one_line(text)[:300] or "no message"
