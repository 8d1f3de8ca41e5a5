"""The retry policy of a client (:class:`RetryPolicy`), declared once on tenacity: what is retried
(:meth:`RetryPolicy.retryable`: HTTP 408, 429 and 5xx, timeouts, answers still arriving at the attempt's end, dropped
connections, and a refused connection only once the endpoint has answered), the wait (exponential with jitter, or a
longer ``Retry-After``), the stop conditions (:attr:`RetryPolicy.stops`: attempts, the call's time, the command's
time without a usable answer, and the startup bound of an endpoint that has answered nothing but 5xx), and the
one-line error of a call that gave up. docs/llm.md#retries says it for users; the bounds are fields of
:class:`~.config.LLMConfig`.

An attempt waits up to ``timeout`` (more for a prompt longer than ``timeout_tokens``) without the server making
progress: while the calls ahead of it in the server's queue are answered, it is not timed out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tenacity
from tenacity.stop import stop_base

from .. import stopping
from ..errors import LLMError, LLMRequestError, LLMResponseError, LLMUnavailableError
from .config import LLMConfig
from .failures import _describe, _failure_kind, _port, _retry_after, _server_message, _status
from .pacing import _Pacer, _Sent
from .refusals import _Rejected
from .text import clause
from .transport import _CONNECT_TIMEOUT, _Attempt, _NoAnswer, _openai_module, _Slow
from .usage import LLMUsage

_RETRY_STATUSES = frozenset({408, 429})
_RETRY_AFTER_CAP = 120.0  # a server's Retry-After is honoured up to this (or retry_wait_max when larger)
_UNREACHABLE = ("refused", "dns", "connect", "connect_timeout")
_BATCH = threading.local()  # the cancel event of the chat_many batch a worker thread serves


class _Cancelled(Exception):
    """The batch this call belongs to failed, or the command is ending: no more attempts are made."""


class _Skipped(Exception):
    """No attempt is made: the call's time is spent, or the client gave up (``_Call.stop`` says which)."""


@dataclass
class _Call:
    """One call's state across its attempts (tenacity's ``retry_state.args[0]``)."""

    what: str
    model: str
    tag: str | None
    tokens: int
    start: float | None = None  # when its first attempt went out
    attempts: int = 0
    spent: float = 0.0  # the time the last attempt was given
    failure: BaseException | None = None
    stop: str = "final"  # why it stopped: final, attempts, call, outage or startup


class _Bound(stop_base):
    """A tenacity stop condition with a name, so the error of a call that gave up says which bound it met."""

    def __init__(self, name: str, test: Callable[[tenacity.RetryCallState], bool]) -> None:
        self.name, self.test = name, test

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        if not self.test(retry_state):
            return False
        retry_state.args[0].stop = self.name
        return True


class RetryPolicy:
    """The retries of one client's calls (:meth:`call`), and the endpoint's health across all of them, i.e. across one
    command: whether it has answered, since when it has been failing, whether every failure was a 5xx, and whether
    the client gave up. :meth:`describe` is what the manifest shows.

    ``pacer`` gives each attempt its place among the client's calls in flight, ``usage`` counts calls, retries and
    failures, ``line`` puts a message on one line with the key masked; ``cache_path`` is named in the error of a call
    that gave up (a re-run resumes from it). Tests may pass their own ``clock`` (time.monotonic) and ``sleep``.
    """

    def __init__(self, config: LLMConfig, usage: LLMUsage, pacer: _Pacer, endpoint: str, line: Callable[[str], str],
                 cache_path: Path | None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] | None = None) -> None:
        self.config, self.usage, self.pacer, self.endpoint = config, usage, pacer, endpoint
        self._line, self._cache_path, self._clock = line, cache_path, clock
        # a command ending (Ctrl-C, SIGTERM) cuts a wait short; the next attempt then sees it and is not made
        self._sleep = sleep or tenacity.sleep_using_event(stopping.STOP)
        self._health_lock = threading.Lock()
        self._answered = False
        self._failing_since: float | None = None
        self._only_5xx = True  # every failure so far was an HTTP 5xx (matters while the endpoint never answered)
        self._last_failure = ""
        self._gave_up: str | None = None
        cfg = self.config
        self.bounds = bounds = cfg.bounds()  # the time bounds in seconds (a resolved config holds them)
        # the wait: w/2 + uniform(0, w/2), w = min(retry_wait * 2**(n-1), retry_wait_max); or a longer Retry-After
        half = dict(multiplier=cfg.retry_wait / 2, max=cfg.retry_wait_max / 2)
        self._backoff = tenacity.wait_exponential(**half) + tenacity.wait_random_exponential(**half)
        self.stops = (_Bound("attempts", tenacity.stop_after_attempt(cfg.max_retries + 1))
                      | _Bound("startup", lambda rs: not self._answered and self._only_5xx
                             and self._failing_for(rs) >= bounds.startup_timeout)
                      | _Bound("outage", lambda rs: self._failing_for(rs) >= bounds.outage_timeout)
                      | _Bound("call", lambda rs: self._after_wait(rs) - rs.args[0].start >= bounds.call_timeout))

    def describe(self) -> dict[str, Any]:
        """The policy as the manifest shows it."""
        cfg, b = self.config, self.bounds
        return {"library": f"tenacity {version('tenacity')}",
                "retry_on": ["HTTP 408", "HTTP 429", "HTTP 5xx", "timeout", "answer still arriving", "dropped "
                             "connection", "refused connection or unknown host after the endpoint answered"],
                "wait": {"kind": "exponential, drawn from [w/2, w]", "first": cfg.retry_wait, "max": cfg.retry_wait_max,
                         "retry_after_cap": max(cfg.retry_wait_max, _RETRY_AFTER_CAP)},
                "stop": {"attempts": cfg.max_retries + 1, "call_timeout": b.call_timeout,
                         "outage_timeout": b.outage_timeout, "startup_timeout": b.startup_timeout},
                "attempt_timeout": b.timeout, "timeout_tokens": cfg.timeout_tokens}

    # -- the stop conditions and the wait -------------------------------------------------------------------------
    def _after_wait(self, retry_state: tenacity.RetryCallState) -> float:
        return self._clock() + retry_state.upcoming_sleep + 0.05

    def _failing_for(self, retry_state: tenacity.RetryCallState) -> float:
        """How long the endpoint's failing streak will be once the wait before the next attempt is over."""
        since = self._failing_since
        return 0.0 if since is None else self._after_wait(retry_state) - since

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome  # set once an attempt has ended, as it has before any wait
        after = self._retry_after_s(outcome.exception() if outcome is not None else None)
        return max(self._backoff(retry_state), after or 0.0)

    def _retry_after_s(self, exc: BaseException | None) -> float | None:
        """The server's Retry-After, up to 120 s (or retry_wait_max when larger)."""
        after = _retry_after(exc)
        return None if after is None else min(after, max(self.config.retry_wait_max, _RETRY_AFTER_CAP))

    def retryable(self, exc: BaseException) -> bool:
        kind = _failure_kind(exc)
        if kind == "status":
            status = _status(exc)
            return status is not None and (status in _RETRY_STATUSES or status >= 500)
        if kind in _UNREACHABLE:
            return self._answered  # it answered before: a restart, not a wrong address
        return kind in ("timeout", "slow", "dropped")

    # -- one call -------------------------------------------------------------------------------------------------
    def stopped(self) -> bool:
        cancel = getattr(_BATCH, "cancel", None)
        return self._gave_up is not None or (cancel is not None and cancel.is_set()) or stopping.STOP.is_set()

    def call(self, what: str, model: str, tag: str | None, fn: Callable[[float], Any], tokens: int = 0) -> Any:
        """``fn(seconds)`` with retries on transient faults, within the policy's bounds; each attempt waits for a place
        among the client's calls in flight (:class:`_Pacer`). The call's time starts with its first attempt, not while
        it waits for a place."""
        call = _Call(what, model, tag, tokens)
        retrying = tenacity.Retrying(retry=tenacity.retry_if_exception(self.retryable), wait=self._wait,
                                     stop=self.stops, sleep=self._sleep, reraise=True,
                                     before_sleep=lambda rs: self.usage.add(tag, retries=1))
        try:
            return retrying(self._attempt, call, fn)
        except (_Cancelled, _Rejected):
            raise
        except Exception:  # the last failure, or _Skipped: worded below, outside this block, so the error carries
            pass  # no link to it
        raise self._final_error(call)

    def _attempt(self, call: _Call, fn: Callable[[float], Any]) -> Any:
        sent = self.pacer.acquire(call.tokens, self.stopped)
        if sent is None and self._gave_up is None:
            raise _Cancelled()
        call.start = sent.at if call.start is None and sent is not None else call.start
        own, left = self._attempt_time(call)
        if sent is None or self._gave_up is not None or left < 0.05:
            if sent is not None:
                self.pacer.release(sent, "skipped")
            with self._health_lock:
                call.stop = "outage" if self._gave_up is not None or self._failing_since is not None else "call"
            raise _Skipped()
        call.attempts += 1
        self.usage.add(call.tag, calls=1)
        call.spent = min(own, left)
        try:
            out, call.spent = self._await(fn, sent, own, min(own * self.pacer.ceiling, left))
        except _Cancelled:  # the command is ending: no retry, no failure counted
            self.pacer.release(sent, "skipped")
            raise
        except Exception as exc:
            call.failure = exc
            self._failed(call, sent, exc)
            raise
        self.pacer.release(sent, None)
        with self._health_lock:
            self._answered, self._failing_since = True, None
        return out

    def _attempt_time(self, call: _Call) -> tuple[float, float]:
        """(How long the attempt may wait while the server makes no progress: the timeout, or longer for a long
        prompt; its hard bound: the least of the call's and the command's time left)."""
        b, now = self.bounds, self._clock()
        with self._health_lock:
            failing = 0.0 if self._failing_since is None else now - self._failing_since
        own = b.timeout * max(1.0, call.tokens / self.config.timeout_tokens)
        start = call.start if call.start is not None else now
        return own, min(b.call_timeout - (now - start), b.outage_timeout - failing)

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

    def _failed(self, call: _Call, sent: _Sent, failure: BaseException) -> None:
        """Frees the failed attempt's place; a final failure cancels the batch, a retryable one joins the endpoint's
        failing streak (which starts with the first attempt that failed after the last usable answer)."""
        retryable = self.retryable(failure)
        if not retryable and not isinstance(failure, _Rejected) and getattr(_BATCH, "fail_fast", False):
            _BATCH.cancel.set()  # before the place is freed, so no call waiting for it goes out
        self.pacer.release(sent, _failure_kind(failure), _status(failure), self._retry_after_s(failure))
        call.spent = getattr(failure, "seconds", call.spent)  # the bound that cut it (_NoAnswer, _Slow)
        if retryable:
            with self._health_lock:
                if self._failing_since is None or sent.at < self._failing_since:
                    self._failing_since = sent.at
                self._only_5xx &= (_status(failure) or 0) >= 500
                self._last_failure = _describe(failure)

    # -- the error of a call that gave up -------------------------------------------------------------------------
    def _final_error(self, call: _Call) -> BaseException:
        """The error a call that gave up raises; an outage or startup stop also makes every later call give up."""
        failure = call.failure
        if call.stop == "final" and failure is not None:
            refused = self._refused(call, failure)
            if refused is None:  # none of ours: raised as it came
                return failure
            self.usage.add(call.tag, failures=1)
            return refused
        error = self._gave_up_error(call)
        if call.stop in ("outage", "startup"):
            with self._health_lock:
                if self._gave_up is None:
                    self._gave_up = str(error)
                error = LLMUnavailableError(self._gave_up, endpoint=error.endpoint, status=error.status)
        self.usage.add(call.tag, failures=1)
        return error

    def _refused(self, call: _Call, exc: BaseException) -> LLMError | None:
        """The one-line error for a call whose last failure ``exc`` is not retried, or None for a failure that is
        none of the endpoint's (raised as it came)."""
        cfg, model, seconds = self.config, call.model, call.spent
        url = f"{self.endpoint}/{call.what}"
        kind = _failure_kind(exc)
        status = _status(exc) if kind == "status" else None
        where = "the base URL (base_url, or $OPENAI_BASE_URL)"
        if status is not None:
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
        if kind in _UNREACHABLE:
            parts = urlsplit(cfg.api_root())
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
        if isinstance(exc, _openai_module().OpenAIError):
            return LLMResponseError(self._line(f"LLM endpoint {url} failed (model {model!r}): "
                                               f"{clause(_describe(exc))}."), endpoint=url)
        return None

    def _gave_up_error(self, call: _Call) -> LLMUnavailableError:
        """The one-line error for a call that stopped at a bound (``call.stop``) after retries, or with no attempt
        left (``call.failure``: its last failure, if any)."""
        b, exc, model, seconds = self.bounds, call.failure, call.model, call.spent
        url = f"{self.endpoint}/{call.what}"
        tries = f"after {call.attempts} attempt{'s' if call.attempts != 1 else ''}"
        kind = _failure_kind(exc) if exc is not None else "none"
        status = _status(exc) if exc is not None and kind == "status" else None
        if exc is None:  # other calls used up the time of this one
            head = f"LLM endpoint {url} gave no usable answer (model {model!r}); last failure: {self._last_failure}"
        elif kind == "status":
            head = f"LLM endpoint {url} still answers HTTP {status} {tries} (model {model!r}): {_server_message(exc)}"
        elif kind == "timeout":
            head = f"LLM endpoint {url} did not answer within {seconds:g} s, {tries} (model {model!r})"
        else:
            head = f"LLM endpoint {url} still fails {tries} (model {model!r}): {_describe(exc)}"
        why = {
            "attempts": "",
            "call": f"; gave up: one call may take {b.call_timeout:g} s with its retries "
                    "($GAPBENCH_LLM_CALL_TIMEOUT or call_timeout)",
            "outage": f"; gave up: no usable answer for {b.outage_timeout:g} s, the limit for one command "
                      "($GAPBENCH_LLM_OUTAGE_TIMEOUT or outage_timeout)",
            "startup": f"; gave up: it has answered nothing but HTTP 5xx since the first call, for "
                       f"{b.startup_timeout:g} s ($GAPBENCH_LLM_STARTUP_TIMEOUT or startup_timeout; raise it for a "
                       "server that is still starting)",
        }.get(call.stop, "")
        cached = (f"answers already received are cached in {str(self._cache_path)!r}, so a re-run resumes where this "
                  "one stopped" if self._cache_path is not None else "nothing was cached (cache=False)")
        return LLMUnavailableError(self._line(
            f"{clause(head)}{why}. Check that the server is up and not overloaded, lower concurrency, or raise "
            f"max_retries, the timeout ($GAPBENCH_LLM_TIMEOUT) or the limits; {cached}."), endpoint=url, status=status)
