"""Listwise answers: how an LLM is asked to rank a batch of passages and how its answer is read.

:func:`read_ranking` reads a ranking out of an answer (reasoning, fences and words around it allowed; repeats and ids
out of range dropped); :class:`LLMListwise` asks through the LLM layer, asks again when an answer leaves passages out,
and counts how each ranking was obtained (:func:`answers_summary`). Passages are cut by :func:`count_tokens`, an
offline approximation of LLM tokenizers. The tournament and the sliding window (:mod:`gapbench.adapters.tournament`,
which re-exports every name here) take :meth:`LLMListwise.rank` as their ``rank_batch``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence

from gapbench.errors import ConfigError

_ID = re.compile(r"\[(\d+)\]")
_ID_CHAIN = re.compile(r"\[\d+\](?:\s*>\s*\[\d+\])+")
_BARE_CHAIN = re.compile(r"(?<!\w)(?<!\d\.)\d+(?:\s*>\s*\d+)+(?!\w|\.\d)")
_ONLY_NUMBERS = re.compile(r"[\d\s>,;|\[\]]+\.?")
_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_OPEN_REASONING = re.compile(r"<(?:think|thinking|reasoning)>", re.I)
_CLOSE_REASONING = re.compile(r"</(?:think|thinking|reasoning)>", re.I)
_FENCE = re.compile(r"```[\w+-]*\s*(.*?)```", re.S)


def read_ranking(answer: str | None, n: int) -> tuple[list[int], int]:
    """``(order, dropped)``: the 0-based passage positions an answer ranks, best first, and how many ids it gave that
    were dropped (repeats and ids outside ``[1]..[n]``). ``len(order) == n`` when the answer ranks every passage.

    Rules, in order (small models wrap, pad and explain their answers):

    1. Reasoning is not the answer: ``<think>...</think>`` (also ``<thinking>``, ``<reasoning>``) is removed; text
       before a lone closing tag is removed (servers that strip the opening one); after an opening tag never closed,
       nothing is read (the answer was cut inside its reasoning): ``"<think>[1] fits</think> [2] > [1]"`` -> 2, 1.
    2. In a code fence: when the answer has fenced blocks, only the last one holding a number is read:
       ``"Sure:\\n```\\n[2] > [1]\\n```"`` -> 2, 1.
    3. A chain of bracketed ids joined by ``>`` is the ranking, words around it ignored; of several, the longest (the
       last of equals): ``"[2] > [1] > [3], since [2] names it"`` -> 2, 1, 3.
    4. Without a chain, every bracketed id in order of appearance: ``"[2] is best, then [1]"`` -> 2, 1.
    5. Without bracketed ids, a chain of bare numbers (``2 > 1 > 3``), or bare numbers when the answer is nothing
       else (``2, 1, 3``); numbers inside prose are not ids: ``"The Colosseum is in Rome. It opened in 80 AD"`` -> none.

    The first mention of an id counts; repeats and ids outside ``1..n`` are dropped and counted.
    """
    text = _CLOSE_REASONING.split(_REASONING.sub(" ", answer or ""))[-1]
    text = _OPEN_REASONING.split(text)[0]
    blocks = [b for b in _FENCE.findall(text) if re.search(r"\d", b)]
    if blocks:
        text = blocks[-1]
    chains = _ID_CHAIN.findall(text)
    if chains:
        found = _ID.findall(max(reversed(chains), key=lambda c: c.count("[")))
    else:
        found = _ID.findall(text)
    if not found:
        bare = _BARE_CHAIN.findall(text)
        if bare:
            found = re.findall(r"\d+", max(reversed(bare), key=lambda c: c.count(">")))
        elif _ONLY_NUMBERS.fullmatch(text.strip()):
            found = re.findall(r"\d+", text)
    order: list[int] = []
    seen: set[int] = set()
    for token in found:
        i = int(token) - 1
        if 0 <= i < n and i not in seen:
            seen.add(i)
            order.append(i)
    return order, len(found) - len(order)


def parse_permutation(answer: str | None, n: int) -> list[int]:
    """0-based permutation of ``n`` passages from an answer such as ``[2] > [1] > [3]``.

    The ids are read by :func:`read_ranking`'s rules; ids missing from the answer follow the ranked ones in their
    input order, so no passage is ever lost: ``"[3] > [3] > [9] > [1]"`` with n=4 -> 2, 0, 1, 3.
    """
    order, _ = read_ranking(answer, n)
    return _completed(order, n)


def _completed(order: list[int], n: int) -> list[int]:
    seen = set(order)
    return order + [i for i in range(n) if i not in seen]


_PIECE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W\d_]{1,6}|\d{1,3}|[^\s]", re.U)


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by an offline approximation of LLM tokenizers (no vocabulary, no download).

    A token is a run of up to 6 letters, up to 3 digits, one CJK character, or any other non-space character. On
    ImpliRet's English dialogues that is 4.1 characters (1.5 words) a token, near the ~4 characters usually quoted for
    BPE vocabularies (GPT, Llama) on English; counts for code or other scripts are rougher. Used to cut passages, not
    to bill.
    """
    return sum(1 for _ in _PIECE.finditer(text))


def truncate_tokens(text: str, max_tokens: int | None) -> str:
    """``text`` cut after its first ``max_tokens`` tokens (as :func:`count_tokens` counts them); None: not cut."""
    if max_tokens is None:
        return text
    end = 0
    for k, m in enumerate(_PIECE.finditer(text)):
        if k == max_tokens:
            return text[:end]
        end = m.end()
    return text


PASSAGE_TOKENS = "gapbench word pieces v1 (an approximation of BPE counts)"  # what count_tokens counts, for manifests


def _cut_option(name: str, value: int | None) -> int | None:
    """A passage bound, checked: a whole number >= 1, or None / 0 for no cut."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ConfigError(f"listwise ranker {name}={value!r} is not a whole number >= 0; give e.g. {name}=300, "
                          "or 0 for no cut.")
    return value or None


_OUTCOMES = ("clean", "repaired", "reasked", "fallback")


class LLMListwise:
    """``rank_batch`` through the LLM layer: RankGPT's listwise prompt, the answer read by :func:`read_ranking`.

    Each ranking ends in one of four outcomes, counted per tag (query id) in :meth:`answers`:

    - ``clean``: the first answer names every passage once (reasoning, fences and words around it are allowed);
    - ``repaired``: the first answer names every passage, with repeats or ids out of range, which are dropped;
    - ``reasked``: an answer that left passages out (a partial ranking, prose) was asked again, up to ``reasks``
      times, with a system line saying so (the request and its cache entry differ), and a later answer named them all;
    - ``fallback``: no answer named them all: the one naming the most (the first of equals) is completed with the
      missing passages in their given order, so its order is partly or wholly the input's, not the model's.

    ``reask_calls`` and ``fallback_ids`` (passages placed by a completion) are counted too. Passages are cut to
    ``max_tokens_per_passage`` tokens (:func:`count_tokens`; the default 500 is about the 2,000 characters passages
    were cut to before), then to ``max_chars`` characters; None or 0: not cut.
    """

    def __init__(self, client, *, max_chars: int | None = None, reasks: int = 3, template: str = "listwise_rank",
                 max_tokens_per_passage: int | None = 500) -> None:
        if isinstance(reasks, bool) or not isinstance(reasks, int) or reasks < 0:
            raise ConfigError(f"listwise ranker reasks={reasks!r} is not a whole number >= 0; give e.g. reasks=3.")
        self.client = client
        self.max_chars = _cut_option("max_chars", max_chars)
        self.max_tokens_per_passage = _cut_option("max_tokens_per_passage", max_tokens_per_passage)
        self.reasks = reasks
        self.template = template
        self._counts: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()  # queries are ranked from several threads
        self.on_ranked: Callable[[int], None] | None = None  # called with 1 after each ranking (progress)

    def _count(self, tag: str | None, **deltas: int) -> None:
        with self._lock:
            for key in ("", str(tag)) if tag is not None else ("",):
                row = self._counts.setdefault(key, dict.fromkeys(_OUTCOMES + ("reask_calls", "fallback_ids"), 0))
                for k, v in deltas.items():
                    row[k] += v

    def answers(self) -> dict:
        """Outcome counts, in total and per tag, with the share of rankings completed by the fallback."""
        with self._lock:
            rows = {k: dict(v) for k, v in self._counts.items()}
        return answers_summary(rows.pop("", {}), rows)

    @property
    def reasked(self) -> int:
        """Re-ask calls made (a ranking may need several)."""
        return self.answers()["reask_calls"]

    @property
    def repaired(self) -> int:
        """Rankings used although their answer was not a clean permutation: repaired or completed by the fallback."""
        a = self.answers()
        return a["repaired"] + a["fallback"]

    def rank(self, query: str, passages: Sequence[str], tag: str | None = None) -> list[int]:
        from gapbench.llm.client import listwise_prompt

        cut = [truncate_tokens(p, self.max_tokens_per_passage) for p in passages]
        prompt = listwise_prompt(query, cut, template=self.template, max_chars=self.max_chars)
        n = len(passages)
        best: list[int] = []
        for attempt in range(self.reasks + 1):
            messages = [{"role": "user", "content": prompt}]
            if attempt:
                messages.insert(0, {"role": "system", "content": (
                    f"Attempt {attempt + 1}: the previous answer did not rank all {n} passages. "
                    f"List every identifier from [1] to [{n}] exactly once.")})
            order, dropped = read_ranking(self.client.chat(messages, tag=tag).text, n)
            if len(order) == n:
                self._count(tag, reask_calls=attempt, **{"reasked" if attempt else
                                                         "repaired" if dropped else "clean": 1})
                self._ranked()
                return order
            if len(order) > len(best):
                best = order
        self._count(tag, reask_calls=self.reasks, fallback=1, fallback_ids=n - len(best))
        self._ranked()
        return _completed(best, n)

    def _ranked(self) -> None:
        if self.on_ranked is not None:
            self.on_ranked(1)


def answers_summary(total: dict, per_query: dict | None = None) -> dict:
    """JSON-ready outcome counts: the four outcomes, ``rankings`` (their sum), ``fallback_rate`` (fallback share,
    0 without rankings), ``reask_calls``, ``fallback_ids``, and ``per_query`` rows of the same shape."""
    def row(r: dict) -> dict:
        out: dict[str, float] = {k: int(r.get(k, 0)) for k in _OUTCOMES + ("reask_calls", "fallback_ids")}
        out["rankings"] = sum(out[k] for k in _OUTCOMES)
        out["fallback_rate"] = out["fallback"] / out["rankings"] if out["rankings"] else 0.0
        return out

    return {**row(total), "per_query": {q: row(r) for q, r in sorted((per_query or {}).items())}}


