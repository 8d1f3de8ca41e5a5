"""Where and how to call the model: :class:`LLMConfig`, the settings a command sets for every client it builds
(:func:`command_settings`), and how the base URL, model and time bounds are resolved and checked.

The base URL and model come from the arguments, then ``$OPENAI_BASE_URL``, else OpenAI's own URL when
``$OPENAI_API_KEY`` is set, else the embedded llama.cpp server of ``gapbench[local-llm]`` (:mod:`.local`). The time
bounds come from the arguments, then their environment variables (``$GAPBENCH_LLM_TIMEOUT``,
``$GAPBENCH_LLM_CALL_TIMEOUT``, ``$GAPBENCH_LLM_OUTAGE_TIMEOUT``, ``$GAPBENCH_LLM_STARTUP_TIMEOUT``,
``$GAPBENCH_LLM_PREFLIGHT_TIMEOUT``), then defaults.

Sampling is the user's: ``temperature``, ``top_p``, ``max_tokens``, ``seed``, ``stop`` and ``extra`` request fields
(``{"reasoning_effort": "low"}``) are config fields, and ``with command_settings({"temperature": 0.7}): ...`` (what
the CLI's sampling options give) sets them for every client a command builds, however deep.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

from ..errors import ConfigError
from .text import short

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_MAX_TOKENS_CAP = 8192  # the budget a re-ask of an answer cut at its budget may grow to, by default
# (field, environment variable, default) of the time bounds; an argument wins over the variable, the variable over
# the default
_TIME_BOUNDS = (("timeout", "GAPBENCH_LLM_TIMEOUT", 120.0), ("call_timeout", "GAPBENCH_LLM_CALL_TIMEOUT", 300.0),
                ("outage_timeout", "GAPBENCH_LLM_OUTAGE_TIMEOUT", 300.0),
                ("startup_timeout", "GAPBENCH_LLM_STARTUP_TIMEOUT", 15.0))
_PREFLIGHT = ("GAPBENCH_LLM_PREFLIGHT_TIMEOUT", 10.0)  # GET /models before the first call: see .preflight


@dataclass(frozen=True)
class TimeBounds:
    """A config's time bounds in seconds, each its field, else its environment variable, else its default
    (:meth:`LLMConfig.bounds`); ``preflight_timeout`` 0 skips the check."""

    timeout: float
    call_timeout: float
    outage_timeout: float
    startup_timeout: float
    preflight_timeout: float


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to call the model. Holds the *name* of the key's environment variable, never the key.

    Retries (:mod:`.retries`): ``max_retries`` follow the first attempt, waits from ``retry_wait`` doubling up to
    ``retry_wait_max``. Time bounds in seconds (None: the environment variable, else the default): ``timeout`` per
    attempt, ``call_timeout`` per call with its retries, ``outage_timeout`` without a usable answer before the client
    gives up for good, ``startup_timeout`` for an endpoint that has answered nothing but HTTP 5xx since the first
    call. ``timeout`` is meant for prompts of up to ``timeout_tokens`` tokens (estimated as characters / 4); a longer
    one's attempt gets more in proportion, within the call's and the command's bounds. ``max_response_bytes`` caps
    the size of one response body. ``price_in`` / ``price_out`` are prices per 1M input / output tokens (any
    currency; reported as cost).

    ``concurrency`` is where the number of calls in flight starts; ``adaptive`` lets the client lower it to what the
    server sustains and raise it again (see :class:`.pacing._Pacer`); False keeps it fixed.

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
    startup_timeout: float | None = None
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
                raise ConfigError(f"LLMConfig.extra field {k!r} has its own setting; give {k}=... instead of an extra "
                                  "field.")
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

    def resolved(self) -> LLMConfig:
        """This config with the command's settings (:func:`command_settings`) over its own, the base URL filled in
        (argument, else ``$OPENAI_BASE_URL``, else OpenAI) and checked."""
        with _COMMAND_LOCK:
            command = dict(_COMMAND)
        return replace(self, **command)._resolved() if command else self._resolved()

    def _resolved(self) -> LLMConfig:
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
                              "http://localhost:11434/v1 (Ollama) or https://api.openai.com/v1 (base_url, or "
                              "$OPENAI_BASE_URL).")
        problem = _url_problem(parts, base)
        if problem:
            raise ConfigError(f"LLM base URL {redact_url(base)!r} {problem}; give the API root of a reachable server, "
                              "e.g. http://localhost:8000/v1 (base_url, or $OPENAI_BASE_URL).")
        if not self.model:
            raise ConfigError("no LLM model given; set model (LLMConfig(model=...)) to the name the endpoint knows it "
                              "by, e.g. 'gpt-4o-mini' or the name vLLM was started with.")
        b = self.bounds()
        return replace(self, base_url=base, timeout=b.timeout, call_timeout=b.call_timeout,
                       outage_timeout=b.outage_timeout, startup_timeout=b.startup_timeout,
                       preflight_timeout=b.preflight_timeout)

    def bounds(self) -> TimeBounds:
        """The time bounds: each field, else its environment variable, else its default (a resolved config holds
        them all, so this reads its fields)."""
        env = {name: (variable, default) for name, variable, default in _TIME_BOUNDS}

        def pick(value: float | None, name: str) -> float:
            return _env_seconds(*env[name]) if value is None else value

        preflight = self.preflight_timeout
        return TimeBounds(timeout=pick(self.timeout, "timeout"), call_timeout=pick(self.call_timeout, "call_timeout"),
                          outage_timeout=pick(self.outage_timeout, "outage_timeout"),
                          startup_timeout=pick(self.startup_timeout, "startup_timeout"),
                          preflight_timeout=_env_seconds(*_PREFLIGHT, zero=True) if preflight is None else preflight)

    def api_root(self) -> str:
        """The base URL of a resolved config (:meth:`resolved` fills it in from the argument or the environment)."""
        if self.base_url is None:
            raise ConfigError("this LLMConfig has no base URL yet; resolve it first (LLMConfig.resolved()), or give "
                              "base_url.")
        return self.base_url


_RESERVED = ("model", "messages", "stream", "n")
_RESERVED_WHY = ("model and messages come from the config and the prompt, and one whole answer is read per request "
                 "(no stream, no n); give other request fields, e.g. reasoning_effort=low.")
_OWN_FIELDS = ("temperature", "top_p", "max_tokens", "seed", "stop")
_COMMAND_LOCK = threading.Lock()
_COMMAND: dict[str, Any] = {}


@contextmanager
def command_settings(settings: Mapping[str, Any], *, name: Callable[[str], str] | None = None) -> Iterator[None]:
    """Config fields the user set for a whole command (the CLI's sampling options): inside the block every config
    resolved takes them over its own values, so they reach clients built deep inside rerankers and in worker threads.

    Checked on entry, so a bad value fails before any work. ``name``: what the caller calls a field in an error (the
    CLI passes its option names); by default the error names ``LLMConfig.<field>``."""
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
            if name is None:
                raise
            said = str(exc).replace(f"LLMConfig.{k}={v!r}", f"{name(k)} {short(repr(v))}")
            raise ConfigError(said.replace("LLMConfig.extra field", f"{name('extra')} field")) from None
    settings = checked
    with _COMMAND_LOCK:
        before, _COMMAND = _COMMAND, {**_COMMAND, **settings}
    try:
        yield
    finally:
        with _COMMAND_LOCK:
            _COMMAND = before


def parse_extra(items: Sequence[str], option: str = "extra") -> dict[str, Any]:
    """Request fields from ``key=value`` items (the value read as JSON when it is JSON, else as a string: ``n_probs=3``,
    ``reasoning_effort=low``) or JSON objects (``{"reasoning_effort": "low"}``); a later item wins. ``option``: what
    an error calls an item's setting (the CLI passes its option's name)."""
    out: dict[str, Any] = {}
    for item in items:
        text = item.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not isinstance(value, dict):
                raise ConfigError(f"{option} {short(item)!r} starts like a JSON object but is not one; give "
                                  "key=value (e.g. reasoning_effort=low) or a JSON object like '{\"top_k\": 20}'.")
            out.update(value)
            continue
        key, eq, raw = text.partition("=")
        key = key.strip()
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", key):
            raise ConfigError(f"{option} {short(item)!r} is not key=value; give a request field and its value, e.g. "
                              "reasoning_effort=low or top_k=20.")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def _url_problem(parts: SplitResult, raw: str) -> str | None:
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
