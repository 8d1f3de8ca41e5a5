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

Concurrency adapts to what the server sustains (:class:`_Pacer`, shared by every thread of a client): it starts at
``concurrency`` and is lowered by 429s, 503s, timeouts and answers slowed by the server's queue (a single-slot server,
as llama.cpp's, ends with one call at a time), then raised again slowly. An attempt waits up to ``timeout`` (more for a
prompt longer than ``timeout_tokens``) without the server making progress: while the calls ahead of it in the server's
queue are answered, it is not timed out.

The base URL and model come from the arguments, then ``$OPENAI_BASE_URL``, else OpenAI's own URL when
``$OPENAI_API_KEY`` is set, else the embedded llama.cpp server of ``gapbench[local-llm]`` (:mod:`.local_llm`). The key
is read from ``$OPENAI_API_KEY`` (``api_key_env``) and is kept out of every message, repr, manifest and counter. Local
servers need no key.

Responses are cached in ``cache_dir("llm")/responses.sqlite`` keyed by sha256 of (model, messages, parameters), so a
re-run makes no calls. The endpoint is not part of the key: the same model name on two servers shares answers.

Sampling is the user's: ``temperature``, ``top_p``, ``max_tokens``, ``seed``, ``stop`` and ``extra`` request fields
(``{"reasoning_effort": "low"}``) are config fields, and ``with command_settings({"temperature": 0.7}): ...`` (the
CLI's ``--llm-*`` options) sets them for every client a command builds, however deep. The key is made from the parameters
asked for. A server that refuses one of them (HTTP 400 naming it, as OpenAI's reasoning models refuse ``temperature``
or want ``max_completion_tokens`` for ``max_tokens``) gets the request again without it, or renamed, once per
parameter; the client keeps doing so for the rest of the command and the manifest says what was sent. An answer cut by
its token budget (``finish_reason == "length"``) is asked again once with double the budget (up to
``max_tokens_cap``); cut again, it is kept with ``truncated=True`` and counted per query.

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
from collections import deque
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from ..cache import cache_dir
from .. import stopping
from ..errors import (ConfigError, GapbenchError, LLMError, LLMRequestError, LLMResponseError, LLMUnavailableError,
                      MissingDependencyError, UnknownNameError)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PROMPTS_DIR = Path(__file__).with_name("prompts")
_NO_KEY = "EMPTY"  # vLLM's convention for servers that check no key; the openai package insists on some value
_RETRY_STATUSES = frozenset({408, 429})
_RETRY_AFTER_CAP = 120.0  # a server's Retry-After is honoured up to this (or retry_wait_max when larger)
_MAX_TOKENS_CAP = 8192  # the budget a re-ask of an answer cut at its budget may grow to, by default
_CONNECT_TIMEOUT = 10.0  # a TCP connection that takes longer is not coming: no retry waits for it
# (field, environment variable, default) of the time bounds; an argument wins over the variable, the variable over
# the default
_TIME_BOUNDS = (("timeout", "GAPBENCH_LLM_TIMEOUT", 120.0), ("call_timeout", "GAPBENCH_LLM_CALL_TIMEOUT", 300.0),
                ("outage_timeout", "GAPBENCH_LLM_OUTAGE_TIMEOUT", 300.0))
_PREFLIGHT = ("GAPBENCH_LLM_PREFLIGHT_TIMEOUT", 10.0)  # GET /models before the first call: see .preflight
_CHARS_PER_TOKEN = 4  # English text in the BPE vocabularies of GPT, Llama and SmolLM: about 4 characters a token


# --------------------------------------------------------------------------------------------------------- errors
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
    client gives up for good. ``max_response_bytes`` caps the size of one response body. ``timeout`` is meant
    for prompts of up to ``timeout_tokens`` tokens (estimated as characters / 4); a longer one's attempt gets more in
    proportion (a server reads a prompt at a steady rate), within the call's and the command's bounds.

    ``concurrency`` is where the number of calls in flight starts; ``adaptive`` lets the client lower it to what the
    server sustains and raise it again (see :class:`_Pacer`); False keeps it fixed.

    Sampling: ``temperature``, ``top_p`` and ``seed`` (None: not sent), ``max_tokens`` (None: the server's default),
    ``stop`` (a string or up to 4 strings), ``extra`` (other request fields, e.g. ``{"reasoning_effort": "low"}``).
    ``max_tokens_cap`` bounds the budget of the one re-ask of an answer cut by its budget.

    ``preflight_timeout``: before the first call to an endpoint, how long ``GET /models`` may go unanswered before the
    endpoint is reported as one that accepts connections and never answers (None: ``$GAPBENCH_LLM_PREFLIGHT_TIMEOUT``,
    else 10 s; 0 skips the check; see :mod:`.preflight`).
    """

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = 0.0
    max_tokens: int | None = 512
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    max_tokens_cap: int = _MAX_TOKENS_CAP
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
    timeout_tokens: int = 2000
    adaptive: bool = True
    preflight_timeout: float | None = None

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
        if self.preflight_timeout is not None and (isinstance(self.preflight_timeout, bool)
                                                   or not 0 <= self.preflight_timeout < math.inf):
            raise bad("preflight_timeout", "a finite number of seconds >= 0 (0 skips the check), or None for "
                                           "$GAPBENCH_LLM_PREFLIGHT_TIMEOUT or 10 s")
        if self.max_response_bytes < 1:
            raise bad("max_response_bytes", "an integer >= 1")
        if type(self.timeout_tokens) is not int or self.timeout_tokens < 1:
            raise bad("timeout_tokens", "a whole number of prompt tokens >= 1")
        if not isinstance(self.adaptive, bool):
            raise bad("adaptive", "True (concurrency follows what the server sustains) or False (kept fixed)")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise bad("max_tokens", "an integer >= 1, or None for the server's default")
        if self.temperature is not None and (isinstance(self.temperature, bool) or not 0 <= self.temperature <= 2):
            raise bad("temperature", "a number from 0 to 2")  # the comparisons also refuse nan
        if self.top_p is not None and (isinstance(self.top_p, bool) or not 0 <= self.top_p <= 1):
            raise bad("top_p", "a number from 0 to 1, or None to leave it to the server")
        if self.seed is not None and (type(self.seed) is not int or not -2**63 <= self.seed < 2**63):
            raise bad("seed", "a whole number that fits 64 bits, or None for no seed")
        if self.max_tokens_cap < 1:
            raise bad("max_tokens_cap", "an integer >= 1")
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop  # one string is the common case
        if stop is not None and (not isinstance(stop, (list, tuple)) or not 1 <= len(stop) <= 4
                                 or not all(isinstance(x, str) and x for x in stop)):
            raise bad("stop", "one to four non-empty strings, or None")
        if stop is not None:
            object.__setattr__(self, "stop", tuple(stop))
        if not isinstance(self.extra, Mapping):
            raise bad("extra", "a mapping of request field -> JSON value, e.g. {'reasoning_effort': 'low'}")
        for k, v in self.extra.items():
            if not isinstance(k, str) or not k or k in _RESERVED:
                raise ConfigError(f"LLMConfig.extra field {k!r} is not accepted; {_RESERVED_WHY}")
            if k in _OWN_FIELDS:
                raise ConfigError(f"LLMConfig.extra field {k!r} has its own setting; give {k}=... (--llm-"
                                  f"{k.replace('_', '-')}) instead of an extra field.")
            try:
                json.dumps(v, allow_nan=False)
            except (TypeError, ValueError):
                raise ConfigError(f"LLMConfig.extra field {k!r} = {v!r} is not a JSON value; give a string, number, "
                                  "boolean, null, list or object.") from None
        object.__setattr__(self, "extra", dict(self.extra))  # a private copy: the config stays as it was made
        for name in ("price_in", "price_out"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise bad(name, "a price per 1M tokens >= 0, or None")
        if self.retry_wait < 0 or self.retry_wait_max < 0:
            raise bad("retry_wait" if self.retry_wait < 0 else "retry_wait_max", "a number of seconds >= 0")

    def resolved(self) -> "LLMConfig":
        """This config with the command's settings (:func:`command_settings`) over its own, the base URL filled in
        (argument, else ``$OPENAI_BASE_URL``, else OpenAI) and checked."""
        with _COMMAND_LOCK:
            command = dict(_COMMAND)
        return replace(self, **command)._resolved() if command else self._resolved()

    def _resolved(self) -> "LLMConfig":
        if not (self.base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get(self.api_key_env)):
            # no endpoint, and no key that would mean OpenAI's: the embedded llama.cpp server (gapbench[local-llm])
            from .local import embedded_config

            return embedded_config(self)._resolved()
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
        if self.preflight_timeout is None:
            bounds["preflight_timeout"] = _env_seconds(*_PREFLIGHT, zero=True)
        return replace(self, base_url=base, **bounds)


_RESERVED = ("model", "messages", "stream", "n")
_RESERVED_WHY = ("model and messages come from the config and the prompt, and one whole answer is read per request "
                 "(no stream, no n); give other request fields, e.g. reasoning_effort=low.")
_OWN_FIELDS = ("temperature", "top_p", "max_tokens", "seed", "stop")
_COMMAND_LOCK = threading.Lock()
_COMMAND: dict[str, Any] = {}


@contextmanager
def command_settings(settings: Mapping[str, Any], *, options: bool = False) -> Iterator[None]:
    """Config fields the user set for a whole command (the CLI's ``--llm-*`` options): inside the block every config
    resolved takes them over its own values, so they reach clients built deep inside rerankers and in worker threads.
    Checked on entry, so a bad value fails before any work; ``options``: name them as ``--llm-*`` options."""
    global _COMMAND
    known = {f.name for f in fields(LLMConfig)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ConfigError(f"unknown LLM setting(s) {', '.join(unknown)}; accepted: {', '.join(sorted(known))}.")
    checked = {}
    for k, v in settings.items():
        try:
            checked[k] = getattr(replace(LLMConfig(), **{k: v}), k)
        except ConfigError as exc:
            if not options:
                raise
            said = str(exc).replace(f"LLMConfig.{k}={v!r}", f"--llm-{k.replace('_', '-')} {_short(repr(v))}")
            raise ConfigError(said.replace("LLMConfig.extra field", "--llm-extra field")) from None
    settings = checked
    with _COMMAND_LOCK:
        before, _COMMAND = _COMMAND, {**_COMMAND, **settings}
    try:
        yield
    finally:
        with _COMMAND_LOCK:
            _COMMAND = before


def parse_extra(items: Sequence[str], option: str = "--llm-extra") -> dict[str, Any]:
    """Request fields from ``key=value`` items (the value read as JSON when it is JSON, else as a string: ``n_probs=3``,
    ``reasoning_effort=low``) or JSON objects (``{"reasoning_effort": "low"}``); a later item wins."""
    out: dict[str, Any] = {}
    for item in items:
        text = item.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not isinstance(value, dict):
                raise ConfigError(f"{option} {_short(item)!r} starts like a JSON object but is not one; give "
                                  "key=value (e.g. reasoning_effort=low) or a JSON object like '{\"top_k\": 20}'.")
            out.update(value)
            continue
        key, eq, raw = text.partition("=")
        key = key.strip()
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", key):
            raise ConfigError(f"{option} {_short(item)!r} is not key=value; give a request field and its value, e.g. "
                              f"{option} reasoning_effort=low or {option} top_k=20.")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


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


def _env_seconds(name: str, default: float, *, zero: bool = False) -> float:
    """Seconds from the environment variable ``name`` (``zero``: 0 is accepted, meaning off)."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (0 <= value if zero else 0 < value) or not value < math.inf:
        raise ConfigError(f"${name}={raw!r} is not accepted; set it to a finite number of seconds "
                          f"{'>= 0 (0: off)' if zero else '> 0'} (e.g. 30), or unset it for the default.")
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
    truncated: bool = False  # cut by its token budget even after the re-ask with a larger one

    def to_cache(self) -> dict:
        return {"text": self.text, "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "model": self.model, "truncated": self.truncated}

    @classmethod
    def from_cache(cls, data: Mapping[str, Any]) -> "ChatResponse":
        return cls(data["text"], data.get("finish_reason"), int(data.get("prompt_tokens", 0)),
                   int(data.get("completion_tokens", 0)), True, data.get("model", ""), bool(data.get("truncated")))


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
_COUNTERS = ("requests", "calls", "retries", "cache_hits", "failures", "prompt_tokens", "completion_tokens",
             "resent", "length_reasks", "truncated")


class LLMUsage:
    """Thread-safe counters, in total and per tag (query id).

    ``requests``: answers asked for; ``calls``: HTTP calls made (first attempts and retries); ``retries``;
    ``cache_hits``: answers served without a call; ``failures``: requests that raised; ``resent``: requests sent
    again without a parameter the server refused; ``length_reasks``: answers cut by their token budget and asked again
    with a larger one; ``truncated``: answers still cut after that (cached ones too: they are the answers used);
    tokens are those billed (real calls only); cost = tokens x price per 1M tokens, when a price is set.
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


# --------------------------------------------------------------------------------------------------------- pacing
_QUEUED = 2.0  # an answer more than this many times slower than the fastest of its size, sent among others: a queue
# (less is jitter: a busy CPU slows every answer of a server that runs beside its client by up to half as much again)
_FAST = 1.25  # an answer within this many times the fastest of its size met no queue
_FASTEST_OF = 32  # the fastest of the last this many answers of a size is the server's time without a queue
_LOSSES = ("timeout", "slow", "dropped")


def prompt_tokens(messages: Sequence[Mapping[str, Any]] | Sequence[str]) -> int:
    """Prompt tokens estimated from characters, before any tokenizer is at hand (about 4 a token)."""
    chars = sum(len(m if isinstance(m, str) else str(m.get("content") or "")) for m in messages)
    return -(-chars // _CHARS_PER_TOKEN)


@dataclass(frozen=True)
class _Sent:
    at: float  # monotonic time the attempt went out
    place: int  # attempts of this client in flight with it, itself included
    tokens: int  # its prompt tokens, estimated


class _Pacer:
    """How many attempts of one client may be in flight (shared by every thread of the client): AIMD.

    The limit starts at the configured concurrency. A 429 or 503, a timeout or a dropped connection halves it, once
    per round (attempts sent before the last cut say nothing new about it). Queueing lowers it too: an answer that took
    ``_QUEUED`` times the fastest answer to a prompt of its size, sent while n attempts were in flight, says the server
    serves about n x fastest / latency at once (a single-slot server: 1), and the limit drops to that, or to half when
    that is more (one slow answer is weak evidence: a single-slot server's answers keep halving it). Fast answers
    while every place was taken and callers wait raise it by 1 / (4 x limit), up to the configured concurrency: one
    place more per four rounds; after a queue was seen, only once ``_FASTEST_OF`` more answers came (a single-slot
    server is probed with a second request once in that many). A Retry-After holds every new attempt until it has
    passed.
    """

    def __init__(self, limit: int, adaptive: bool = True) -> None:
        self.ceiling = self.limit = self.lowest = float(limit)
        self.adaptive = adaptive
        self.in_flight = self.waiting = self.cuts = 0
        self.last_answer = -math.inf  # when the server last gave a usable answer: its progress through its queue
        self._cond = threading.Condition()
        self._hold_until = 0.0
        self._cut_at = -math.inf
        self._calm = 0  # answers to wait after a queue was seen before probing for more places
        self._fastest: dict[int, deque] = {}

    def allow(self, width: int) -> None:
        """A caller asks for ``width`` in flight: a width above the configured one starts from itself."""
        with self._cond:
            if width > self.ceiling:
                self.ceiling = self.limit = float(width)
                self._cond.notify_all()

    def acquire(self, tokens: int, stop: Callable[[], bool]) -> _Sent | None:
        """A place for one attempt, once one is free and no Retry-After holds; None when ``stop()`` turns true."""
        with self._cond:
            self.waiting += 1
            try:
                while not stop():
                    hold = self._hold_until - time.monotonic()
                    if hold <= 0 and self.in_flight < max(1, int(self.limit)):
                        self.in_flight += 1
                        return _Sent(time.monotonic(), self.in_flight, tokens)
                    self._cond.wait(min(hold, 0.25) if hold > 0 else 0.25)  # stop() is looked at between waits
                return None
            finally:
                self.waiting -= 1

    def progress(self) -> None:
        with self._cond:
            self.last_answer = time.monotonic()

    def release(self, sent: _Sent, kind: str | None, status: int | None = None,
                retry_after: float | None = None) -> None:
        """The attempt ``sent`` ended: ``kind`` None for a usable answer, else its failure kind."""
        now = time.monotonic()
        with self._cond:
            self.in_flight -= 1
            if kind is None:
                self.last_answer = now
                self._answered(sent, now - sent.at)
            elif kind in _LOSSES or status in (429, 503):
                if retry_after:
                    self._hold_until = max(self._hold_until, now + retry_after)
                if sent.at >= self._cut_at:
                    self._cut(self.limit / 2)
            self._cond.notify_all()

    def _answered(self, sent: _Sent, latency: float) -> None:
        window = self._fastest.setdefault(sent.tokens.bit_length(), deque(maxlen=_FASTEST_OF))  # sizes within 2x
        window.append(latency)
        fastest = min(window)
        if sent.place > 1 and latency > _QUEUED * fastest:
            self._cut(max(sent.place * fastest / latency, self.limit / 2))
            self._calm = _FASTEST_OF
        elif self._calm:
            self._calm -= 1
        elif latency <= _FAST * fastest and self.waiting and sent.place >= int(self.limit) and self.adaptive:
            self.limit = min(self.ceiling, self.limit + 1 / (4 * self.limit))

    def _cut(self, to: float) -> None:
        if self.adaptive and to < self.limit:
            self.limit, self._cut_at = max(1.0, to), time.monotonic()
            self.lowest = min(self.lowest, self.limit)
            self.cuts += 1

    def state(self) -> dict[str, Any]:
        with self._cond:
            return {"adaptive": self.adaptive, "limit": round(self.limit, 3), "lowest": round(self.lowest, 3),
                    "cuts": self.cuts}


class _Attempt:
    """One HTTP attempt run on a thread of its own, so that its caller can stop waiting for it at a deadline that
    moves (an HTTP read cannot be interrupted): the thread ends within the attempt's hard bound, its answer unused."""

    def __init__(self, fn: Callable[[float], Any], seconds: float, answered: Callable[[], None]) -> None:
        self.done = threading.Event()
        self.reading = False  # the answer's headers came: a body still arriving at the deadline is a drip
        self.value: Any = None
        self.error: BaseException | None = None
        self.stream: Any = None  # the connection this attempt last read or wrote (see _TrackedStream)
        threading.Thread(target=self._run, args=(fn, seconds, answered), name="gapbench-llm-attempt",
                         daemon=True).start()

    def abort(self) -> None:
        """Close the connection of an attempt nobody waits for any more: a server whose queue still holds the request
        (llama.cpp checks before it starts one) drops it instead of computing an answer that would be thrown away,
        and the attempt's thread ends now instead of at its hard bound."""
        stream = self.stream
        if stream is not None and not self.done.is_set():
            stream.abort()

    def _run(self, fn: Callable[[float], Any], seconds: float, answered: Callable[[], None]) -> None:
        _ATTEMPT.current = self
        try:
            self.value = fn(seconds)
            answered()  # an answer nobody waits for any more is progress of the server all the same
        except BaseException as exc:  # handed to the caller, who raises it
            self.error = exc
        finally:
            self.done.set()


_ATTEMPT = threading.local()  # the _Attempt a thread runs, so _post can say when the answer's headers came
_BATCH = threading.local()  # the cancel event of the chat_many batch a worker thread serves


class _TrackedStream:
    """A network stream of the HTTP library (httpcore or its fork) that tells the attempt using it, so the attempt can
    shut the connection down from another thread (closing a socket does not wake a thread blocked reading it)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def _mark(self) -> None:
        attempt = getattr(_ATTEMPT, "current", None)
        if attempt is not None:
            attempt.stream = self

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._mark()
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._mark()
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, *args: Any, **kwargs: Any) -> "_TrackedStream":
        return _TrackedStream(self._inner.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    def abort(self) -> None:
        sock = self._inner.get_extra_info("socket")
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed by the other side or by the library
                pass


class _TrackingBackend:
    """The HTTP library's network backend, with every stream it opens a :class:`_TrackedStream`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> _TrackedStream:
        return _TrackedStream(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _TrackedStream:
        return _TrackedStream(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _abortable_http_client(openai: Any, timeout: float) -> Any | None:
    """openai's default HTTP client over a transport whose connections an abandoned attempt can shut down, or None
    where the HTTP library's pool does not have the one attribute this needs (then attempts run to their hard bound).

    openai 1.x uses httpx, 3.x its fork httpx2; both build their pool from httpcore(2) with a ``_network_backend``.
    """
    base = getattr(openai, "DefaultHttpxClient", None)
    lib = next((c.__module__.split(".")[0] for c in getattr(base, "__mro__", ())
                if c.__module__.split(".")[0] in ("httpx", "httpx2")), None)
    if lib is None:
        return None
    import importlib

    transport = importlib.import_module(lib).HTTPTransport()
    pool = getattr(transport, "_pool", None)
    if getattr(pool, "_network_backend", None) is None:
        return None
    pool._network_backend = _TrackingBackend(pool._network_backend)
    return base(transport=transport, timeout=timeout)


class _NoAnswer(Exception):
    """No answer within the attempt's time: classified as a timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


class _Cancelled(Exception):
    """The batch this call belongs to failed: its remaining calls are not made."""


# --------------------------------------------------------------------------------------------------------- client
def _openai_module():
    try:
        import openai
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "openai", "llm", "The LLM client") from None
    return openai


class _Garbage(Exception):
    """A 2xx answer that is not a usable OpenAI-format response; retrying the same request would get the same."""


class _Rejected(Exception):
    """A 400 that names a request parameter the server or model refuses: ``rename`` is the name it wants instead, or
    None to leave the parameter out."""

    def __init__(self, param: str, rename: str | None, said: str) -> None:
        super().__init__(said)
        self.param, self.rename, self.said = param, rename, said


class _Slow(Exception):
    """The body was still arriving when the attempt's time ran out (a drip): retried like a timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the answer was still arriving after {seconds:g} s")
        self.seconds = seconds


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
        # parameters the server refused, for the rest of the command: name -> name sent instead (None: left out)
        self._adjust_lock = threading.Lock()
        self._adjusted: dict[str, str | None] = {}
        self._refusals: dict[str, str] = {}
        self._pacer = _Pacer(self.config.concurrency, self.config.adaptive)
        self._preflight_done = False

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, endpoint={self.endpoint!r})"

    # -- plumbing ---------------------------------------------------------------------------------------------
    def _api(self):
        with self._client_lock:
            if self._client is None:
                openai = _openai_module()
                # the openai package's own retries are off: ours are bounded in time and count every HTTP call
                self._client = openai.OpenAI(api_key=self.__key, base_url=self.config.base_url,
                                             timeout=self.config.timeout, max_retries=0,
                                             http_client=_abortable_http_client(openai, self.config.timeout))
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
            attempt = getattr(_ATTEMPT, "current", None)
            if attempt is not None:
                attempt.reading = True
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
        problem = check(self.config.base_url, seconds, {"Authorization": f"Bearer {key}"} if key else None)
        if problem:
            url = f"{self.endpoint}/models"
            raise LLMUnavailableError(self._line(
                f"LLM endpoint {self.endpoint} {problem} ({url}, checked before the first call): it accepts "
                f"connections but does not answer, so every call would wait out its time bounds "
                f"({self.config.timeout:g} s an attempt). Check that the server there is up and serving, not stuck "
                "or overloaded, and that --llm-base-url (or $OPENAI_BASE_URL) is its API root; a server that needs "
                "longer (llama-cpp-python's answers /models only between two generations) gets it with "
                "$GAPBENCH_LLM_PREFLIGHT_TIMEOUT (preflight_timeout; 0 skips the check)."), endpoint=url)
        self._preflight_done = True

    def _attempt_time(self, call_start: float, tokens: int) -> tuple[float, float]:
        """(How long the next attempt may wait while the server makes no progress: the timeout, or longer for a long
        prompt; its hard bound: the least of the call's and the command's time left)."""
        cfg, now = self.config, time.monotonic()
        with self._health_lock:
            failing = 0.0 if self._failing_since is None else now - self._failing_since
        own = cfg.timeout * max(1.0, tokens / cfg.timeout_tokens)
        return own, min(cfg.call_timeout - (now - call_start), cfg.outage_timeout - failing)

    def _stopped(self) -> bool:
        cancel = getattr(_BATCH, "cancel", None)
        return self._gave_up is not None or (cancel is not None and cancel.is_set()) or stopping.STOP.is_set()

    def _await(self, fn: Callable[[float], Any], sent: _Sent, own: float, hard: float) -> tuple[Any, float]:
        """(``fn(hard)``'s answer, seconds it had). Given up as a timeout once the server has made no progress for
        ``own`` seconds (no answer to this attempt, nor to any other of this client's: one waiting in a server's
        queue is not stuck while the ones ahead of it are answered), or at ``hard``, at most ``own`` times the most
        calls in flight: a server that serves one at a time may come to it last."""
        attempt = _Attempt(fn, hard, self._pacer.progress)
        end = sent.at + hard
        while True:
            deadline = min(end, max(sent.at, self._pacer.last_answer) + own)
            # in slices, so that an ending command (Ctrl-C, SIGTERM) is noticed within a fraction of a second
            if attempt.done.wait(min(max(0.0, deadline - time.monotonic()), 0.25)):
                if attempt.error is not None:
                    raise attempt.error
                return attempt.value, min(own, hard)
            if stopping.STOP.is_set():
                attempt.abort()
                raise _Cancelled()
            if time.monotonic() >= min(end, max(sent.at, self._pacer.last_answer) + own):
                seconds = hard if deadline >= end else own
                attempt.abort()
                raise _Slow(seconds) if attempt.reading else _NoAnswer(seconds)

    def _with_retries(self, what: str, model: str, tag: str | None, fn: Callable[[float], Any],
                      tokens: int = 0) -> Any:
        """``fn(seconds)`` with retries on transient faults, bounded by attempts, the call's time and the command's;
        each attempt waits for a place among the client's calls in flight (:class:`_Pacer`).

        The call's time starts with its first attempt, not while it waits for a place. The command's bound: the
        endpoint's failing streak starts with the first attempt that failed after the last usable answer; once it is
        ``outage_timeout`` long, this call and every later one give up at once.
        """
        start: float | None = None
        attempts = 0
        failure: BaseException | None = None
        spent = self.config.timeout  # the time the last attempt was given
        while True:
            sent = self._pacer.acquire(tokens, self._stopped)
            if sent is None and self._gave_up is None:
                raise _Cancelled()
            start = sent.at if start is None and sent is not None else start
            own, left = self._attempt_time(start if start is not None else time.monotonic(), tokens)
            if sent is None or self._gave_up is not None or left < 0.05:
                stop = self._skip_attempt(sent)
                break
            attempts += 1
            self.usage.add(tag, calls=1)
            spent = min(own, left)
            try:
                out, spent = self._await(fn, sent, own, min(own * self._pacer.ceiling, left))
            except _Cancelled:  # the command is ending: no retry, no failure counted
                self._pacer.release(sent, "skipped")
                raise
            except Exception as exc:  # classified outside this block so the error raised carries no link to it
                failure = exc
            else:
                self._pacer.release(sent, None)
                with self._health_lock:
                    self._answered, self._failing_since = True, None
                return out
            final, spent = self._attempt_failed(sent, failure, spent)
            if final:
                stop = "final"
                break
            stop, delay = self._retry_plan(failure, sent.at, attempts, start)
            if stop is not None:
                break
            self.usage.add(tag, retries=1)
            if stopping.STOP.wait(delay):  # the command is ending: no more attempts
                raise _Cancelled()
        raise self._final_error(failure, what, model, tag, attempts, spent, stop)

    def _skip_attempt(self, sent: _Sent | None) -> str:
        """Frees the place of an attempt that will not be made; why not: 'outage' or 'call' (its time is spent)."""
        if sent is not None:
            self._pacer.release(sent, "skipped")
        with self._health_lock:
            failing = self._failing_since is not None
        return "outage" if self._gave_up is not None or failing else "call"

    def _attempt_failed(self, sent: _Sent, failure: BaseException, spent: float) -> tuple[bool, float]:
        """Frees the failed attempt's place; whether the failure is final, and the bound that cut the attempt."""
        final = not self._retryable(failure)
        if final and not isinstance(failure, _Rejected) and getattr(_BATCH, "fail_fast", False):
            _BATCH.cancel.set()  # before the place is freed, so no call waiting for it goes out
        self._pacer.release(sent, _failure_kind(failure), getattr(failure, "status_code", None),
                            self._retry_after_s(failure))
        return final, getattr(failure, "seconds", spent)  # the bound that cut it (_NoAnswer, _Slow)

    def _retry_plan(self, failure: BaseException, began: float, attempts: int,
                    start: float) -> tuple[str | None, float]:
        """Records the failing streak; the bound a retry would pass ('attempts', 'outage', 'call', or None to retry)
        and the delay before it."""
        cfg = self.config
        with self._health_lock:
            if self._failing_since is None or began < self._failing_since:
                self._failing_since = began
            failing_since = self._failing_since
            self._last_failure = _describe(failure)
        delay = self._delay(attempts, failure)
        after = time.monotonic() + delay + 0.05
        if attempts > cfg.max_retries:
            return "attempts", delay
        if after - failing_since >= cfg.outage_timeout:
            return "outage", delay
        if after - start >= cfg.call_timeout:
            return "call", delay
        return None, delay

    def _final_error(self, failure: BaseException | None, what: str, model: str, tag: str | None, attempts: int,
                     spent: float, stop: str) -> BaseException:
        """The error a call that gave up raises; an outage also makes every later call give up at once."""
        error = self._translate(failure, what, model, attempts, spent, stop)
        if error is None:
            return failure
        if stop == "outage":
            with self._health_lock:
                if self._gave_up is None:
                    self._gave_up = str(error)
                error = LLMUnavailableError(self._gave_up, endpoint=error.endpoint, status=error.status)
        self.usage.add(tag, failures=1)
        return error

    def _retryable(self, exc: BaseException) -> bool:
        kind = _failure_kind(exc)
        if kind == "status":
            return exc.status_code in _RETRY_STATUSES or exc.status_code >= 500
        if kind in ("refused", "dns", "connect", "connect_timeout"):
            return self._answered  # it answered before: a restart, not a wrong address
        return kind in ("timeout", "slow", "dropped")

    def _retry_after_s(self, exc: BaseException) -> float | None:
        """The server's Retry-After, up to 120 s (or retry_wait_max when larger)."""
        after = _retry_after(exc)
        return None if after is None else min(after, max(self.config.retry_wait_max, _RETRY_AFTER_CAP))

    def _delay(self, attempt: int, exc: BaseException) -> float:
        cfg = self.config
        ceiling = min(cfg.retry_wait * 2 ** (attempt - 1), cfg.retry_wait_max)
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        after = self._retry_after_s(exc)
        return delay if after is None else max(delay, after)

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

    def _as_sent(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``body`` with the parameters the server refused left out or renamed."""
        with self._adjust_lock:
            adjusted = dict(self._adjusted)
        out = dict(body)
        for name, instead in adjusted.items():
            if name in out:
                value = out.pop(name)
                if instead is not None:
                    out.setdefault(instead, value)
        return out

    def _learn(self, adjusted: Mapping[str, str | None]) -> None:
        with self._adjust_lock:
            self._adjusted.update(adjusted)

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
            sent = self._as_sent(body)
            params = {k: v for k, v in sent.items() if k not in ("model", "messages")}

            def call(seconds: float) -> ChatResponse:
                try:
                    data = self._post(api.chat.completions, seconds, model=sent["model"], messages=sent["messages"],
                                      extra_body=params)
                except _openai_module().APIStatusError as exc:
                    refused = _refused_param(exc, params)
                    if refused is None:
                        raise
                    raise refused from None
                return _chat_response(data)

            try:
                out = self._with_retries("chat/completions", body["model"], tag, call, prompt_tokens(sent["messages"]))
            except _Rejected as rej:
                self._learn({rej.param: rej.rename})
                with self._adjust_lock:
                    self._refusals[rej.param] = rej.said
                self.usage.add(tag, resent=1)
                continue
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
        """Answers to ``requests`` in input order, at most ``concurrency`` (default: the config's) calls in flight,
        fewer while the server shows it sustains fewer (:class:`_Pacer`).

        Cached answers cost no call; identical requests in one batch are sent once. On a failure the first error is
        raised once the calls in flight end (their answers are cached; calls not yet sent are not made), unless
        ``return_exceptions`` puts each request's error in its slot instead.
        """
        reqs = [r if isinstance(r, ChatRequest) else ChatRequest(r) for r in requests]
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
                self._learn(hit["adjusted"])
            if progress:
                progress(1)
        return todo

    def _answer(self, key: str, body: Mapping[str, Any], tag: str | None) -> ChatResponse:
        """The answer to ``body``, cached under ``key`` with the refusals learnt, so a re-run's manifest says what
        was sent."""
        out = self._call_chat(body, tag)
        if self.cache is not None:
            with self._adjust_lock:
                adjusted = dict(self._adjusted)
            self.cache.put(key, body["model"], {**out.to_cache(), "adjusted": adjusted})
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
                exc = fut.exception()
                if exc is None or (return_exceptions and isinstance(exc, LLMError)):
                    settle(futures[fut], fut.result() if exc is None else exc)
                elif first is None and not isinstance(exc, _Cancelled):
                    first = exc
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
        if batches:
            self.preflight()
        api = self._api()
        extra = {"dimensions": dimensions} if dimensions is not None else {}

        def one(batch: list[str]) -> "np.ndarray":
            def call(seconds: float):
                data = self._post(api.embeddings, seconds, input=batch, model=model, encoding_format="float",
                                  extra_body=extra)
                return _embeddings(data, len(batch))

            self.usage.add(tag, requests=1)
            arr, tokens = self._with_retries("embeddings", model, tag, call, prompt_tokens(batch))
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
        """sha256 over what shapes the answers: model and every sampling parameter (not the endpoint or key).

        The parameters added after the first four enter only when set, so fingerprints of older runs still match."""
        c = self.config
        more = {"top_p": c.top_p, "stop": list(c.stop) if c.stop else None, "extra": c.extra or None,
                "max_tokens_cap": c.max_tokens_cap if c.max_tokens_cap != _MAX_TOKENS_CAP else None}
        more = {k: v for k, v in more.items() if v is not None}
        blob = json.dumps([c.model, c.temperature, c.max_tokens, c.seed] + ([more] if more else []), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def describe(self) -> dict[str, Any]:
        """The config, and under ``sent`` the parameters as the server got them (refused ones left out or renamed,
        with its words under ``refused``)."""
        c = self.config
        with self._adjust_lock:
            refused = dict(self._refusals)
        return {"endpoint": self.endpoint, "model": c.model, "temperature": c.temperature, "max_tokens": c.max_tokens,
                "seed": c.seed, "top_p": c.top_p, "stop": list(c.stop) if c.stop else None, "extra": dict(c.extra),
                "max_tokens_cap": c.max_tokens_cap, "sent": self._as_sent(self._sampling()), "refused": refused,
                "timeout": c.timeout, "call_timeout": c.call_timeout, "timeout_tokens": c.timeout_tokens,
                "outage_timeout": c.outage_timeout, "preflight_timeout": c.preflight_timeout,
                "max_retries": c.max_retries, "concurrency": c.concurrency,
                "adaptive": c.adaptive,
                "api_key_env": c.api_key_env, "cache": str(self.cache.path) if self.cache else None}

    def manifest(self) -> dict[str, Any]:
        """Config and counters for a run manifest (JSON-ready; holds no key); ``pacing``: the concurrency the client
        ended at and the lowest it went to."""
        return {**self.describe(), "usage": self.usage.to_dict(), "pacing": self._pacer.state()}

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


def _refused_param(exc, params: Mapping[str, Any]) -> _Rejected | None:
    """The parameter a 400 refuses, when it names one that was sent (``param`` of OpenAI's error object, else a
    name in the message, quoted or after "param", as other servers word it, e.g. llama.cpp's "Unsupported param:
    tools"); None for any other error, or when the message names several of the parameters sent."""
    if getattr(exc, "status_code", None) not in (400, 422):
        return None
    said = _server_message(exc)
    param = getattr(exc, "param", None)
    if param not in params:
        named = [k for k in params if re.search(rf"(['\"`]){re.escape(k)}\1|\bparam(?:eter)?s?\b\W*{re.escape(k)}\b",
                                                said, re.IGNORECASE)]
        param = named[0] if len(named) == 1 else None
    if param is None:
        return None
    rename = "max_completion_tokens" if param == "max_tokens" and "max_completion_tokens" in said else None
    return _Rejected(param, rename, said)


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
    if isinstance(exc, _NoAnswer):
        return "timeout"
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
    if isinstance(exc, (_Slow, _Garbage, _NoAnswer)) or not named:
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
           **options: Any) -> "LazyClient":
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
