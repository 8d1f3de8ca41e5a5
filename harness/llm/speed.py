"""How fast an endpoint reads and writes, measured on a short probe, and the time a piece of LLM work will take.

Two uncached calls: one reads a prompt of about :data:`PROBE_WORDS` words and writes one token (the prompt speed),
one reads a line and writes up to :data:`PROBE_ANSWER_TOKENS` tokens (the answer speed, its prompt time taken
out). On the embedded SmolLM2 they take a few seconds; an endpoint is probed once per process.

    speed = probe(llm)                                   # Speed(prompt_tps=..., answer_tps=..., ...)
    low, high = speed.seconds(28_000, 5_400)             # answers a quarter of their budgets .. all of them
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..errors import GapbenchError

PROBE_WORDS = 300
PROBE_ANSWER_TOKENS = 48
LOW_ANSWER_SHARE = 0.25  # the low end of a range: answers use a quarter of their token budgets
_WORDS = ("river stone market letter garden window engine morning silver paper orange bridge winter music doctor "
          "forest number yellow island kitchen").split()
_KNOWN: dict[tuple[str, str], Speed] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Speed:
    """Tokens a second an endpoint read (``prompt_tps``) and wrote (``answer_tps``), one call at a time."""

    prompt_tps: float
    answer_tps: float
    model: str
    endpoint: str

    def seconds(self, prompt_tokens: float, answer_tokens: float) -> tuple[float, float]:
        """(low, high) seconds for ``prompt_tokens`` read and answers of ``answer_tokens`` budget, one call at a
        time: high when every answer fills its budget, low when answers use :data:`LOW_ANSWER_SHARE` of it."""
        read = prompt_tokens / self.prompt_tps
        return (read + LOW_ANSWER_SHARE * answer_tokens / self.answer_tps, read + answer_tokens / self.answer_tps)

    def text(self, prompt_tokens: float, answer_tokens: float) -> str:
        low, high = self.seconds(prompt_tokens, answer_tokens)
        return (f"about {span(low, high)} at {self.prompt_tps:,.0f} prompt and {self.answer_tps:,.0f} answer "
                f"tokens/s, measured on {self.model} at {self.endpoint} with a short probe (one call at a time; an "
                "endpoint that serves several at once takes less)")


def span(low: float, high: float) -> str:
    """``20 s-1 min``, ``4-12 min``, ``1.5-3.2 h``."""
    if high < 90:
        return f"{low:.0f}-{high:.0f} s"
    if high < 5400:
        return (f"{low:.0f} s-{high / 60:.0f} min" if low < 60 else f"{low / 60:.0f}-{high / 60:.0f} min")
    return f"{low / 3600:.1f}-{high / 3600:.1f} h"


def known(llm: Any) -> Speed | None:
    """The speed measured for ``llm``'s endpoint and model in this process, if any (no call made)."""
    with _LOCK:
        return _KNOWN.get(_key(llm))


def _key(llm: Any) -> tuple[str, str]:
    return (str(getattr(llm, "endpoint", "")), str(getattr(getattr(llm, "config", None), "model", "")))


def probe(llm: Any, *, clock=time.monotonic) -> Speed:
    """The speed of ``llm``'s endpoint and model (an :class:`~gapbench.llm.client.LLMClient`), measured on two short
    uncached calls (once per process; the calls are not counted in ``llm``'s usage)."""
    from .client import ChatRequest, LLMClient

    with _LOCK:
        if _key(llm) in _KNOWN:
            return _KNOWN[_key(llm)]
    rng = random.Random(0)
    filler = " ".join(rng.choice(_WORDS) for _ in range(PROBE_WORDS))
    side = LLMClient(llm.config, cache=False)  # its own counters: the probe is not the command's work
    try:
        start = clock()
        # a nonce first, so that no server's prompt cache answers from an earlier probe
        read = side.chat(ChatRequest(f"Probe {time.time_ns()}. Say OK.\n{filler}", "speed probe", {"max_tokens": 1}))
        read_s = max(clock() - start, 1e-3)
        prompt_tps = max(read.prompt_tokens or PROBE_WORDS * 4 // 3, 1) / read_s
        start = clock()
        wrote = side.chat(ChatRequest(f"Probe {time.time_ns()}. Write the numbers from one to two hundred in words, "
                                      "separated by commas.", "speed probe", {"max_tokens": PROBE_ANSWER_TOKENS}))
        wrote_s = clock() - start
    finally:
        side.close()
    tokens = wrote.completion_tokens or max(1, len(wrote.text.split()) * 4 // 3)
    writing = max(wrote_s - (wrote.prompt_tokens or 20) / prompt_tps, 0.05 * wrote_s, 1e-3)
    speed = Speed(prompt_tps, tokens / writing, str(llm.config.model), str(llm.endpoint))
    with _LOCK:
        _KNOWN[_key(llm)] = speed
    return speed


def try_probe(llm: Any) -> tuple[Speed | None, str]:
    """(speed, "") or (None, why it could not be measured): a probe that fails leaves the estimate without a time."""
    try:
        return probe(llm), ""
    except GapbenchError as exc:
        return None, str(exc)
