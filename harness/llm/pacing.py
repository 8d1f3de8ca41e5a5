"""How many calls of one client may be in flight: :class:`_Pacer`, shared by every thread of a client.

Concurrency adapts to what the server sustains: it starts at ``concurrency`` and is lowered by 429s, 503s, timeouts
and answers slowed by the server's queue (a single-slot server, as llama.cpp's, ends with one call at a time), then
raised again slowly. Prompt sizes are estimated from characters (:func:`prompt_tokens`), before any tokenizer is at
hand.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_CHARS_PER_TOKEN = 4  # English text in the BPE vocabularies of GPT, Llama and SmolLM: about 4 characters a token
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
