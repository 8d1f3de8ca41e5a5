"""Progress of a batch of LLM calls, and, on the embedded llama.cpp server, how long it will take: said before the
first call and revised from the speed the first calls measured.

    with llm_progress(llm, "argus synthesis", calls=40, prompt_tokens=52_000, answer_tokens=9_000) as advance:
        llm.chat_many(reqs, progress=advance)

prints, when ``llm`` talks to the embedded server (no endpoint configured) and the work would take 30 s or more::

    gapbench: argus synthesis: 40 calls to the embedded SmolLM2-135M-Instruct.Q4_1.gguf, about 52,000 prompt and
    9,000 answer tokens: about 14 min at ~100 prompt and ~30 answer tokens/s on a CPU (...)
    gapbench: argus synthesis: after the first call (the model warming up), 3 calls took 1m06s (22 s a call):
    about 13 min left for 36 calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..progress import format_duration, progress, say

# SmolLM2-135M (Q4_1) under llama.cpp on 2 busy CPU cores: about 100 prompt tokens/s and 20-40 answer tokens/s
# (measured on this project's machines, /work/shared/ENVIRONMENT.md); the first calls replace these with what they took.
EMBEDDED_PROMPT_TPS = 100.0
EMBEDDED_ANSWER_TPS = 30.0
SAY_ABOVE_S = 30.0  # work expected to take less is not announced
REVISE_AFTER = 3  # calls measured, after the first (a cold model: tens of seconds more), for the revised estimate


def is_embedded(llm: Any) -> bool:
    """Whether ``llm`` (an :class:`~gapbench.llm.client.LLMClient`) talks to an embedded server gapbench started."""
    from .local import is_embedded as started_here

    return started_here(getattr(getattr(llm, "config", None), "base_url", None))


def uncached(llm: Any, requests: Sequence[Any]) -> list[Any]:
    """The requests whose answers are not in ``llm``'s cache yet (those cost a call)."""
    from .response_cache import cache_key

    cache = getattr(llm, "cache", None)
    if cache is None:
        return list(requests)
    return [r for r in requests if cache.get(cache_key(llm.payload(r))) is None]


@dataclass
class Estimate:
    """The up-front estimate of ``calls`` calls, and its revision from the first calls' speed."""

    description: str
    model: str
    calls: int
    prompt_tokens: int
    answer_tokens: int
    prompt_tps: float = EMBEDDED_PROMPT_TPS
    answer_tps: float = EMBEDDED_ANSWER_TPS

    @property
    def seconds(self) -> float:
        return self.prompt_tokens / self.prompt_tps + self.answer_tokens / self.answer_tps

    def text(self) -> str:
        return (f"{self.description}: {self.calls:,} calls to the embedded {self.model}, about "
                f"{self.prompt_tokens:,} prompt and {self.answer_tokens:,} answer tokens: about "
                f"{_minutes(self.seconds)} at ~{self.prompt_tps:g} prompt and ~{self.answer_tps:g} answer tokens/s on "
                "a CPU (give --llm-base-url for a faster endpoint; answers already cached cost nothing).")

    def revised(self, done: int, measured: int, seconds: float) -> str:
        """The estimate once ``done`` calls are answered, the last ``measured`` of them in ``seconds``."""
        per_call = seconds / measured
        left = max(0, self.calls - done)
        return (f"{self.description}: after the first call (the model warming up), {measured} calls took "
                f"{format_duration(seconds)} ({per_call:.0f} s a call): about {_minutes(left * per_call)} left for "
                f"{left:,} call{'' if left == 1 else 's'}.")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


@contextmanager
def llm_progress(llm: Any, description: str, *, calls: int, total: int | None = None, prompt_tokens: int = 0,
                 answer_tokens: int = 0, embedded: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> Iterator[Callable[[int], None]]:
    """A progress stage of ``total`` LLM requests (default ``calls``) of which ``calls`` are not cached and answered
    first (as ``chat_many`` does); on the embedded server (``embedded`` None: :func:`is_embedded`), the estimate of
    the ``calls`` (``prompt_tokens``, ``answer_tokens``: theirs) first and, after :data:`REVISE_AFTER` of them, the
    estimate from their measured speed."""
    total = calls if total is None else total
    embedded = is_embedded(llm) if embedded is None else embedded
    est = None
    if embedded and calls > 0:
        model = str(getattr(getattr(llm, "config", None), "model", None) or "model")
        from .speed import known

        measured = known(llm)  # a probe earlier in the command (obliq build's) measured the model: its speed
        est = Estimate(description, model, calls, prompt_tokens, answer_tokens,
                       *((round(measured.prompt_tps), round(measured.answer_tps)) if measured else ()))
        if est.seconds < SAY_ABOVE_S:
            est = None
        else:
            say(est.text())
    start = clock()
    done = 0
    with progress(total, description, unit="calls") as advance:
        def step(n: int = 1) -> None:
            nonlocal done, est, start
            advance(n)
            done += n
            made = done - (total - calls)  # the cached answers come first, at once
            if est is None:
                return
            if made <= 1:  # measured from the first call's answer on
                start = clock()
            elif made >= 1 + REVISE_AFTER and made < est.calls:
                say(est.revised(made, made - 1, clock() - start))
                est = None  # revised once; the progress lines keep the ETA from here on

        yield step


DEFAULT_ANSWER_TOKENS = 256  # a request's token budget when neither it nor the config sets one


def chat_many_reporting(llm: Any, requests: Sequence[Any], description: str, *,
                        answer_tokens: Sequence[int] | None = None,
                        progress: Callable[[int], None] | None = None, embedded: bool | None = None,
                        concurrency: int | None = None, judge: Callable[[str, str], str] | None = None) -> list[Any]:
    """``llm.chat_many(requests)`` as a progress stage, estimated from its uncached requests when ``llm`` is the
    embedded server. ``answer_tokens``: the answer length expected of each request (default half its ``max_tokens``,
    the request's or the config's). ``progress`` is called as well; ``embedded`` None: :func:`is_embedded`.
    ``judge``: the first answers are watched (:mod:`.competence`, the stage named ``description``) and a model that
    cannot do the job stops the work within them."""
    from .pacing import prompt_tokens
    from .records import ChatRequest

    reqs = [r if isinstance(r, ChatRequest) else ChatRequest(r) for r in requests]
    if answer_tokens is None:
        budget = getattr(getattr(llm, "config", None), "max_tokens", None) or DEFAULT_ANSWER_TOKENS
        answer_tokens = [int(r.params.get("max_tokens") or budget) // 2 for r in reqs]
    expected = dict(zip(map(id, reqs), answer_tokens))
    embedded = is_embedded(llm) if embedded is None else embedded
    todo = uncached(llm, reqs) if embedded else reqs
    prompt = sum(prompt_tokens([r.messages] if isinstance(r.messages, str) else r.messages) for r in todo)
    answers = sum(expected.get(id(r), 0) for r in todo)
    with llm_progress(llm, description, calls=len(todo), total=len(reqs), prompt_tokens=prompt,
                      answer_tokens=answers, embedded=embedded) as advance:
        def step(n: int = 1) -> None:
            advance(n)
            if progress:
                progress(n)

        if judge is None:
            return llm.chat_many(reqs, progress=step, concurrency=concurrency)
        from .competence import watching

        with watching(llm, description, judge):
            return llm.chat_many(reqs, progress=step, concurrency=concurrency)
