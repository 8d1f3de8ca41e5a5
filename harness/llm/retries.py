"""The retry loop of a client (:class:`Retrier`): every call's attempts, bounded in attempts and in time, and the
one-line error of a call that gave up.

Retries (exponential backoff with jitter, ``Retry-After`` honoured) happen on 429, 408, 5xx, timeouts and dropped
connections; any other 4xx, and an answer that is not an OpenAI-format response, raises at once. Every retry loop is
bounded in time, not only in attempts: one attempt by ``timeout`` (``$GAPBENCH_LLM_TIMEOUT``, default 120 s, however
slowly the body drips in), one call with its retries by ``call_timeout`` (``$GAPBENCH_LLM_CALL_TIMEOUT``, 300 s), and
a whole command by ``outage_timeout`` (``$GAPBENCH_LLM_OUTAGE_TIMEOUT``, 300 s): once the endpoint has given no usable
answer for that long, every call of the client gives up, so a server that accepts connections and never answers ends
the command after about that long. An endpoint that cannot be reached at all (connection refused, unknown host, no
TCP connection within 10 s) fails at once, unless it has answered before in this client (a server restarting).

An attempt waits up to ``timeout`` (more for a prompt longer than ``timeout_tokens``) without the server making
progress: while the calls ahead of it in the server's queue are answered, it is not timed out.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from .. import stopping
from ..errors import LLMError, LLMRequestError, LLMResponseError, LLMUnavailableError
from .config import LLMConfig
from .failures import _describe, _failure_kind, _port, _retry_after, _server_message
from .pacing import _Pacer, _Sent
from .refusals import _Rejected
from .text import clause
from .transport import _CONNECT_TIMEOUT, _Attempt, _NoAnswer, _openai_module, _Slow
from .usage import LLMUsage

_RETRY_STATUSES = frozenset({408, 429})
_RETRY_AFTER_CAP = 120.0  # a server's Retry-After is honoured up to this (or retry_wait_max when larger)
_BATCH = threading.local()  # the cancel event of the chat_many batch a worker thread serves


class _Cancelled(Exception):
    """The batch this call belongs to failed: its remaining calls are not made."""


class Retrier:
    """Runs the calls of one client with retries (:meth:`call`), and keeps the endpoint's health across all of them,
    i.e. across one command: whether it has answered, since when it has been failing, and whether the client gave up.

    ``pacer`` gives each attempt its place among the client's calls in flight, ``usage`` counts calls, retries and
    failures, ``line`` puts a message on one line with the key masked; ``cache_path`` is named in the error of a call
    that gave up (a re-run resumes from it).
    """

    def __init__(self, config: LLMConfig, usage: LLMUsage, pacer: _Pacer, endpoint: str, line: Callable[[str], str],
                 cache_path: Path | None) -> None:
        self.config, self.usage, self.pacer, self.endpoint = config, usage, pacer, endpoint
        self._line, self._cache_path = line, cache_path
        self._health_lock = threading.Lock()
        self._answered = False
        self._failing_since: float | None = None
        self._last_failure = ""
        self._gave_up: str | None = None

    def _attempt_time(self, call_start: float, tokens: int) -> tuple[float, float]:
        """(How long the next attempt may wait while the server makes no progress: the timeout, or longer for a long
        prompt; its hard bound: the least of the call's and the command's time left)."""
        cfg, now = self.config, time.monotonic()
        with self._health_lock:
            failing = 0.0 if self._failing_since is None else now - self._failing_since
        own = cfg.timeout * max(1.0, tokens / cfg.timeout_tokens)
        return own, min(cfg.call_timeout - (now - call_start), cfg.outage_timeout - failing)

    def stopped(self) -> bool:
        cancel = getattr(_BATCH, "cancel", None)
        return self._gave_up is not None or (cancel is not None and cancel.is_set()) or stopping.STOP.is_set()

    def _await(self, fn: Callable[[float], Any], sent: _Sent, own: float, hard: float) -> tuple[Any, float]:
        """(``fn(hard)``'s answer, seconds it had). Given up as a timeout once the server has made no progress for
        ``own`` seconds (no answer to this attempt, nor to any other of this client's: one waiting in a server's
        queue is not stuck while the ones ahead of it are answered), or at ``hard``, at most ``own`` times the most
        calls in flight: a server that serves one at a time may come to it last."""
        attempt = _Attempt(fn, hard, self.pacer.progress)
        end = sent.at + hard
        while True:
            deadline = min(end, max(sent.at, self.pacer.last_answer) + own)
            # in slices, so that an ending command (Ctrl-C, SIGTERM) is noticed within a fraction of a second
            if attempt.done.wait(min(max(0.0, deadline - time.monotonic()), 0.25)):
                if attempt.error is not None:
                    raise attempt.error
                return attempt.value, min(own, hard)
            if stopping.STOP.is_set():
                attempt.abort()
                raise _Cancelled()
            if time.monotonic() >= min(end, max(sent.at, self.pacer.last_answer) + own):
                seconds = hard if deadline >= end else own
                attempt.abort()
                raise _Slow(seconds) if attempt.reading else _NoAnswer(seconds)

    def call(self, what: str, model: str, tag: str | None, fn: Callable[[float], Any], tokens: int = 0) -> Any:
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
            sent = self.pacer.acquire(tokens, self.stopped)
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
                out, spent = self._await(fn, sent, own, min(own * self.pacer.ceiling, left))
            except _Cancelled:  # the command is ending: no retry, no failure counted
                self.pacer.release(sent, "skipped")
                raise
            except Exception as exc:  # classified outside this block so the error raised carries no link to it
                failure = exc
            else:
                self.pacer.release(sent, None)
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
            self.pacer.release(sent, "skipped")
        with self._health_lock:
            failing = self._failing_since is not None
        return "outage" if self._gave_up is not None or failing else "call"

    def _attempt_failed(self, sent: _Sent, failure: BaseException, spent: float) -> tuple[bool, float]:
        """Frees the failed attempt's place; whether the failure is final, and the bound that cut the attempt."""
        final = not self._retryable(failure)
        if final and not isinstance(failure, _Rejected) and getattr(_BATCH, "fail_fast", False):
            _BATCH.cancel.set()  # before the place is freed, so no call waiting for it goes out
        self.pacer.release(sent, _failure_kind(failure), getattr(failure, "status_code", None),
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
        where = "the base URL (base_url, or $OPENAI_BASE_URL)"
        status = getattr(exc, "status_code", None) if kind == "status" else None
        if stop == "final":
            if kind == "status":
                said = _server_message(exc)
                hint = {
                    401: f"Check the API key in ${cfg.api_key_env} (the key is read from that variable).",
                    403: f"The key in ${cfg.api_key_env} is not allowed to use this model or endpoint.",
                    404: "Check the model name and that the base URL is the API root ending in /v1, e.g. "
                         "http://localhost:8000/v1 (base_url, model).",
                }.get(status, "The endpoint rejected the request; check the model name, max_tokens, temperature and "
                              "the prompt length for this model.")
                return LLMRequestError(self._line(f"LLM endpoint {url} answered HTTP {status} (model {model!r}), not "
                                                  f"retried: {clause(said)}. {hint}"), endpoint=url, status=status)
            if kind in ("refused", "dns", "connect", "connect_timeout"):
                parts = urlsplit(cfg.base_url)
                detail = {
                    "refused": f"connection refused: nothing listens on {parts.hostname}:{_port(parts)}. Start the "
                               f"server there, or point {where} at the one that runs",
                    "dns": f"the host name {parts.hostname!r} does not resolve. Check the host in {where}",
                    "connect_timeout": f"no TCP connection within {min(_CONNECT_TIMEOUT, seconds):g} s. Check that "
                                       f"{parts.hostname} is up and reachable from here and the port in {where}",
                }.get(kind, f"{clause(_describe(exc))}. Is the server running, and is {where} right?")
                return LLMUnavailableError(self._line(f"cannot connect to the LLM endpoint {url}: {detail}."),
                                           endpoint=url)
            if kind == "garbage":
                return LLMResponseError(self._line(
                    f"LLM endpoint {url} answered with something that is not an OpenAI-format response (model "
                    f"{model!r}): {clause(str(exc))}. Check that {where} is the API root of an OpenAI-compatible "
                    "server (it ends in /v1), not a proxy or sign-in page."), endpoint=url)
            openai = _openai_module()
            if isinstance(exc, openai.OpenAIError):
                return LLMResponseError(self._line(f"LLM endpoint {url} failed (model {model!r}): "
                                                   f"{clause(_describe(exc))}."), endpoint=url)
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
        cached = (f"answers already received are cached in {str(self._cache_path)!r}, so a re-run resumes where this "
                  "one stopped" if self._cache_path is not None else "nothing was cached (cache=False)")
        return LLMUnavailableError(self._line(
            f"{clause(head)}{why}. Check that the server is up and not overloaded, lower concurrency, or raise "
            f"max_retries, the timeout ($GAPBENCH_LLM_TIMEOUT) or the limits; {cached}."), endpoint=url, status=status)
