"""How fast an endpoint reads and writes, measured on a short probe, and the time a piece of LLM work will take.

Four short uncached calls (:func:`probe`): a warm-up, a line answered with one token, a prompt of about
:data:`PROBE_WORDS` more words answered with one token (the reading speed) and the line answered with up to
:data:`PROBE_ANSWER_TOKENS` tokens (the writing speed, its prompt's reading time taken out). On the embedded
SmolLM2 they take a few seconds; an endpoint is probed once per process. On a busy machine the speeds are noisy: the
range is a guide, and the progress lines revise it from the calls themselves.

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

PROBE_WORDS = 200
PROBE_ANSWER_TOKENS = 32
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
    """``20-45 s``, ``20 s-2 min``, ``4-12 min``, ``1.5-3.2 h``; one value when both ends read the same (``12 min``)."""
    if high < 90:
        a, b, unit = f"{low:.0f}", f"{high:.0f}", " s"
    elif high < 5400:
        if low < 60:
            return f"{low:.0f} s-{high / 60:.0f} min"
        a, b, unit = f"{low / 60:.0f}", f"{high / 60:.0f}", " min"
    else:
        a, b, unit = f"{low / 3600:.1f}", f"{high / 3600:.1f}", " h"
    return f"{a}{unit}" if a == b else f"{a}-{b}{unit}"


def known(llm: Any) -> Speed | None:
    """The speed measured for ``llm``'s endpoint and model in this process, if any (no call made)."""
    with _LOCK:
        return _KNOWN.get(_key(llm))


def _key(llm: Any) -> tuple[str, str]:
    return (str(getattr(llm, "endpoint", "")), str(getattr(getattr(llm, "config", None), "model", "")))


def probe(llm: Any, *, clock=time.monotonic) -> Speed:
    """The speed of ``llm``'s endpoint and model (an :class:`~gapbench.llm.client.LLMClient`), measured on short
    uncached calls (once per process; they are not counted in ``llm``'s usage): a warm-up (a cold model loads on its
    first call), then a short call writing one token (the time of any call), a long prompt writing one token (the
    reading speed, from the difference) and the short prompt writing up to :data:`PROBE_ANSWER_TOKENS` (the writing
    speed: the tokens written over the call's time less its prompt's reading)."""
    from .client import ChatRequest, LLMClient

    with _LOCK:
        if _key(llm) in _KNOWN:
            return _KNOWN[_key(llm)]
    rng = random.Random(0)
    filler = " ".join(rng.choice(_WORDS) for _ in range(PROBE_WORDS))
    side = LLMClient(llm.config, cache=False)  # its own counters: the probe is not the command's work

    def timed(prompt: str, max_tokens: int):
        start = clock()
        # a nonce first, so that no server's prompt cache answers from an earlier probe
        out = side.chat(ChatRequest(f"Probe {time.time_ns()}. {prompt}", "speed probe", {"max_tokens": max_tokens}))
        return out, max(clock() - start, 1e-3)

    short = "Count from 1 to 100, one number a line."
    try:
        timed("Say OK.", 1)
        base, base_s = timed(short, 1)
        read, read_s = timed(f"Say OK.\n{filler}", 1)
        wrote, wrote_s = timed(short, PROBE_ANSWER_TOKENS)
    finally:
        side.close()
    extra = max((read.prompt_tokens or PROBE_WORDS * 4 // 3) - (base.prompt_tokens or 20), 1)
    prompt_tps = extra / max(read_s - base_s, 0.05 * read_s)
    tokens = max(wrote.completion_tokens or len(wrote.text.split()) * 4 // 3, 1)
    # the writing time: the call's time less its prompt's reading (a call's own overhead stays in: a lower speed)
    answer_tps = tokens / max(wrote_s - (wrote.prompt_tokens or 20) / prompt_tps, 0.05 * wrote_s)
    speed = Speed(prompt_tps, answer_tps, str(llm.config.model), str(llm.endpoint))
    with _LOCK:
        _KNOWN[_key(llm)] = speed
    return speed


def try_probe(llm: Any) -> tuple[Speed | None, str]:
    """(speed, "") or (None, why it could not be measured): a probe that fails leaves the estimate without a time."""
    try:
        return probe(llm), ""
    except GapbenchError as exc:
        return None, str(exc)
