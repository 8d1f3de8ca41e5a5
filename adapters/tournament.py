"""Listwise LLM reranking: the OBLIQ-Bench tournament and the RankGPT sliding window.

Tournament (OBLIQ-Bench, Appendix C): shuffle the candidate pool (seeded per query and round), split it into batches
of size B, rank each batch listwise with the LLM, promote the top P of each batch, and repeat on the promoted
candidates until the pool fits in one final batch (``max_final``), which is ranked directly. The final ranking is the
final batch followed by the eliminated tails, deepest round first. Within one round's tail, candidates are ordered by
their position inside their batch (every batch's P+1-th, then every P+2-th, ...), so a candidate that lost at rank
P+1 is never placed below one that lost at rank B. A batch of at most P candidates is promoted whole without a call.

Sliding window (RankGPT, Sun et al. 2023): windows of ``window`` candidates moved from the bottom of the list to the
top by ``stride``, each ranked listwise.

Both take a ``rank_batch(query, passages) -> permutation`` callable (0-based indices, best first) so the algorithm is
independent of the model; :class:`LLMListwise` provides it through the LLM layer (it and the reading of listwise
answers live in :mod:`._tournament_listwise`; every name is importable from here).
"""

from __future__ import annotations

import hashlib
import math
import numbers
import random
import threading
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from gapbench.contract import Depth, ModelName, NonNegative, NonNegativeInt, Positive, Seed, Text
from gapbench.errors import ConfigError
from gapbench.retrieval import payload_fingerprint
from gapbench.settings import Settings
from gapbench.types import Run

# reading listwise answers and asking for them live in their own module; every name stays importable from here
from ._tournament_listwise import (
    PASSAGE_TOKENS,
    LLMListwise,
    _completed,
    _cut_option,
    answers_summary,
    count_tokens,
    parse_permutation,
    read_ranking,
    truncate_tokens,
)

__all__ = ["LLMListwise", "PASSAGE_TOKENS", "RankBatch", "SlidingWindow", "Tournament", "TournamentConfig",
           "answers_summary", "count_tokens", "parse_permutation", "parse_seeds", "read_ranking", "sliding_window",
           "sliding_window_calls", "tournament", "tournament_calls", "truncate_tokens", "TournamentSettings",
           "SlidingWindowSettings"]

RankBatch = Callable[[str, Sequence[str]], Sequence[int]]


def _rng(seed: int, query_id: str, round_no: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{query_id}\x00{round_no}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


@dataclass(frozen=True)
class TournamentConfig:
    batch_size: int = 20  # B
    promote: int = 4  # P
    max_final: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        if self.batch_size < 2:
            raise ConfigError(f"tournament batch size must be at least 2, got {self.batch_size}.")
        if not 1 <= self.promote < self.batch_size:
            raise ConfigError(
                f"tournament promote P={self.promote} must satisfy 1 <= P < B={self.batch_size}, or rounds never "
                f"shrink."
            )
        if self.max_final < 1:
            raise ConfigError(f"tournament max_final must be at least 1, got {self.max_final}.")


def tournament_calls(n: int, batch_size: int = 20, promote: int = 4, max_final: int = 20) -> int:
    """The number of listwise calls the tournament makes for a pool of ``n`` candidates."""
    TournamentConfig(batch_size, promote, max_final)
    calls = 0
    while n > max_final:
        full, last = divmod(n, batch_size)
        sizes = [batch_size] * full + ([last] if last else [])
        calls += sum(1 for s in sizes if s > promote)
        n = sum(min(promote, s) for s in sizes)
    return calls + (1 if n > 1 else 0)


def tournament(query_id: str, query: str, candidates: Sequence[str], texts: dict[str, str], rank_batch: RankBatch,
               config: TournamentConfig = TournamentConfig()) -> list[str]:
    """The tournament ranking of ``candidates`` (doc ids) for one query. Every candidate appears exactly once."""
    pool = list(dict.fromkeys(candidates))
    tails: list[list[str]] = []
    round_no = 0
    while len(pool) > config.max_final:
        _rng(config.seed, query_id, round_no).shuffle(pool)
        promoted: list[str] = []
        losers: list[list[str]] = []
        for start in range(0, len(pool), config.batch_size):
            batch = pool[start : start + config.batch_size]
            if len(batch) <= config.promote:
                promoted.extend(batch)
                continue
            order = _ranked(query, batch, texts, rank_batch)
            promoted.extend(order[: config.promote])
            losers.append(order[config.promote :])
        # interleave by position inside the batch: all (P+1)-th places first, then (P+2)-th, ...
        depth = max((len(x) for x in losers), default=0)
        tails.append([lost[i] for i in range(depth) for lost in losers if i < len(lost)])
        pool = promoted
        round_no += 1
    _rng(config.seed, query_id, round_no).shuffle(pool)
    head = _ranked(query, pool, texts, rank_batch) if len(pool) > 1 else pool
    return head + [d for tail in reversed(tails) for d in tail]


def sliding_window(query: str, candidates: Sequence[str], texts: dict[str, str], rank_batch: RankBatch,
                   window: int = 20, stride: int = 10) -> list[str]:
    """RankGPT's sliding window from the bottom of the list to the top."""
    if window < 2 or not 1 <= stride <= window:
        raise ConfigError(f"sliding window needs window >= 2 and 1 <= stride <= window, got {window}/{stride}.")
    ranking = list(dict.fromkeys(candidates))
    end = len(ranking)
    while True:
        start = max(0, end - window)
        if end - start > 1:
            ranking[start:end] = _ranked(query, ranking[start:end], texts, rank_batch)
        if start == 0:
            return ranking
        end -= stride


def sliding_window_calls(n: int, window: int = 20, stride: int = 10) -> int:
    if n <= 1:
        return 0
    if n <= window:
        return 1
    return 1 + math.ceil((n - window) / stride)


def _ranked(query: str, batch: list[str], texts: dict[str, str], rank_batch: RankBatch) -> list[str]:
    perm = rank_batch(query, [texts[d] for d in batch])
    # a custom ranker may hand back numpy integers, repeats or a partial list: its first mention of a position counts,
    # and the positions it left out follow in batch order, as parse_permutation completes an answer
    order: list[int] = []
    for i in perm:
        if isinstance(i, numbers.Integral) and not isinstance(i, bool) and 0 <= i < len(batch) and int(i) not in order:
            order.append(int(i))
    return [batch[i] for i in _completed(order, len(batch))]


# ------------------------------------------------------------------------------------------- LLM-backed rerankers

ANSWER_TOKENS_PER_PASSAGE = 4  # "[12] > " in a listwise answer
PROMPT_TOKENS_PER_CALL = 60  # the listwise template around the query and the passages


class _PoolReranker:
    """Shared shape of the LLM rerankers: pools (or a run's top ``depth``) in, a Run of rank scores out."""

    name = "llm-reranker"

    def __init__(self, o: ListwiseSettings) -> None:
        depth, llm_base_url, llm_model, concurrency = o.depth, o.llm_base_url, o.llm_model, o.concurrency
        max_chars, max_tokens_per_passage, reasks, client = o.max_chars, o.max_tokens_per_passage, o.reasks, o.client
        temperature = getattr(o, "temperature", None)
        self.depth = depth
        self.concurrency = concurrency
        self.temperature = temperature
        self.max_chars = _cut_option("max_chars", max_chars)
        # checked now, not when the first worker thread builds the ranker
        self.max_tokens_per_passage = _cut_option("max_tokens_per_passage", max_tokens_per_passage)
        self.reasks = reasks
        self._ranker: LLMListwise | None = None
        self._lock = threading.Lock()
        from gapbench.llm.client import LazyClient

        # a bad URL, a missing model or a bad time limit is reported now, not from a worker thread after the
        # retrieval work; the client is made in the first worker thread that needs it and shared by all
        self._llm = LazyClient.of(client, base_url=llm_base_url, model=llm_model, concurrency=concurrency,
                                  temperature=temperature)

    @property
    def client(self):
        return self._llm.get()

    def llm_manifest(self) -> dict | None:
        """The LLM's model, endpoint, sampling and usage for the manifest; None before the first call."""
        return self._llm.manifest()

    @property
    def ranker(self) -> LLMListwise:
        client = self.client
        with self._lock:
            if self._ranker is None:
                self._ranker = LLMListwise(client, max_chars=self.max_chars, reasks=self.reasks,
                                           max_tokens_per_passage=self.max_tokens_per_passage)
            return self._ranker

    def config(self) -> dict:
        return {"depth": self.depth, "max_chars": self.max_chars,
                # nested: public_config masks a top-level key naming "token" as a secret
                "passage_cut": {"max_tokens_per_passage": self.max_tokens_per_passage, "counted_by": PASSAGE_TOKENS},
                "reasks": self.reasks, **self._algo_config(),
                "llm": self.client.describe()}

    @property
    def fingerprint(self) -> str:
        """sha256 over what shapes the ranking: the algorithm's options, the passage cut, the LLM's fingerprint (model
        and sampling, not the endpoint, time limits or concurrency) and the prompt; the same in every process."""
        from gapbench.llm.client import load_prompt

        payload = {"adapter": f"gapbench-{self.name}/1", "depth": self.depth, "max_chars": self.max_chars,
                   "max_tokens_per_passage": self.max_tokens_per_passage, "reasks": self.reasks,
                   **self._algo_config(), "llm": self.client.fingerprint,
                   "prompt": hashlib.sha256(load_prompt("listwise_rank").encode()).hexdigest()}
        return payload_fingerprint(payload)

    def _algo_config(self) -> dict:
        return {}

    def _calls(self, n: int) -> int:
        """Listwise rankings this reranker asks for a pool of ``n`` documents (0: not known)."""
        return 0

    def _width(self) -> int:
        """Passages in one listwise prompt at most."""
        return 20

    def _order(self, query_id: str, query: str, pool: list[str], texts: dict[str, str],
               seed: int | None = None) -> list[str]:
        raise NotImplementedError

    @contextmanager
    def _ranking_progress(self, ranker: LLMListwise, queries, pools: dict[str, list[str]], corpus):
        """The rankings of ``pools`` as one progress stage, with the embedded model's estimate (passages counted as the
        ranker cuts them; a pool's batches hold at most its size)."""
        from gapbench.llm.estimate import llm_progress

        calls = prompt = answer = 0
        cut = ranker.max_tokens_per_passage
        for qid, pool in pools.items():
            n = self._calls(len(pool))
            if not n:
                continue
            per = [len(corpus[d].full_text) // 4 for d in pool]
            avg = sum(min(t, cut) if cut else t for t in per) / len(per)
            width = min(len(pool), self._width())
            calls += n
            prompt += n * int(width * avg + len(queries[qid].text) // 4 + PROMPT_TOKENS_PER_CALL)
            answer += n * width * ANSWER_TOKENS_PER_PASSAGE
        with llm_progress(ranker.client, f"{self.name}: LLM rankings", calls=calls, prompt_tokens=prompt,
                          answer_tokens=answer) as advance:
            ranker.on_ranked = advance
            try:
                yield
            finally:
                ranker.on_ranked = None

    def rerank_pools(self, queries, pools, corpus, seed: int | None = None) -> Run:
        """Rank each query's pool; queries run in parallel (``concurrency``), each query's rounds in sequence.

        ``seed`` replaces the reranker's own seed for this call (one repetition of a repeated tournament)."""
        from concurrent.futures import ThreadPoolExecutor

        def one(qid: str) -> tuple[str, list[str]]:
            pool = list(dict.fromkeys(pools[qid]))
            texts = {d: corpus[d].full_text for d in pool}
            q = queries[qid]
            text = f"{q.instruction} {q.text}" if q.instruction else q.text
            return qid, self._order(qid, text, pool, texts, seed)

        qids = [q for q in queries if q in pools]
        ranker = self.ranker
        with self._ranking_progress(ranker, queries, {q: list(dict.fromkeys(pools[q])) for q in qids}, corpus), \
                ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as ex:
            futures = [ex.submit(one, q) for q in qids]
            try:
                ordered = dict(f.result() for f in futures)
            finally:  # after a failure, queries not started yet are not started; answers received stay cached
                for f in futures:
                    f.cancel()
        return Run({q: [(d, float(len(o) - i)) for i, d in enumerate(o)] for q, o in ordered.items()}, self.name,
                   _sorted=True)

    def rerank(self, queries, run: Run, corpus) -> Run:
        """Rerank each query's top ``depth`` of ``run``; documents below it keep their order underneath."""
        pools = {q: [d for d, _ in run[q][: self.depth]] for q in run if q in queries}
        head = self.rerank_pools(queries, pools, corpus)
        data = {}
        for q, ranking in run.items():
            top = [d for d, _ in head.get(q, ())]
            rest = [d for d, _ in ranking[self.depth:]]
            order = top + rest
            data[q] = [(d, float(len(order) - i)) for i, d in enumerate(order)]
        return Run(data, f"{run.name}>>{self.name}", _sorted=True)

    @property
    def llm_calls(self) -> int:
        """HTTP calls made so far (cache hits cost none)."""
        made = self._llm.made
        return int(made.usage.total().get("calls", 0)) if made is not None else 0

    @property
    def llm_requests(self) -> int:
        """Listwise rankings asked for so far, whether answered by a call or by the cache."""
        made = self._llm.made
        return int(made.usage.total().get("requests", 0)) if made is not None else 0

    @property
    def answers(self) -> dict:
        """How the model's answers were read so far (:meth:`LLMListwise.answers`): clean, repaired, re-asked or
        completed by the fallback, in total and per query; a manifest holds it beside the LLM's usage."""
        return self._ranker.answers() if self._ranker is not None else answers_summary({})


def parse_seeds(value) -> tuple[int, ...]:
    """Tournament repetitions: a count (``3`` -> seeds 0, 1, 2) or the seeds themselves (``"0,4,7"``, ``[0, 4, 7]``)."""
    try:
        return _seeds(value)
    except ValueError as exc:
        raise ConfigError(f"tournament seeds={value!r} {exc}.") from None


def _seeds(value) -> tuple[int, ...]:
    """:func:`parse_seeds`, refusing with a ValueError that says what is accepted."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if len(parts) == 1 and parts[0].isdigit():
            value = int(parts[0])
        elif all(p.isdigit() for p in parts):
            value = [int(p) for p in parts]
        else:
            raise ValueError("is not a count or a list of seeds; write seeds=3 (seeds 0, 1, 2) or seeds=0,4,7 (whole "
                             "numbers >= 0)")
    if isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
        raise ValueError("is not a count or a list of seeds; write seeds=3 or seeds=0,4,7")
    if isinstance(value, int):
        if value < 1:
            raise ValueError("repeats the tournament no times; give a count >= 1")
        return tuple(range(value))
    seeds = tuple(value)
    if not seeds or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in seeds):
        raise ValueError("must be whole numbers >= 0, at least one; write seeds=0,4,7")
    if len(set(seeds)) != len(seeds):
        raise ValueError("repeats a seed, which would count one tournament twice; give each seed once")
    return seeds


def _seeds_or_none(value):
    return None if value is None else _seeds(value)


class ListwiseSettings(Settings):
    """What the listwise LLM rerankers share: the depth reranked, the LLM and how passages are cut."""

    depth: Depth = Field(100, description="Documents of each query's run (or pool) reranked.")
    llm_base_url: Text | None = Field(None, description="OpenAI-compatible endpoint; none: $OPENAI_BASE_URL, else "
                                                           "the embedded server.")
    llm_model: ModelName | None = Field(None, description="The model at that endpoint.")
    concurrency: Positive = Field(8, description="LLM calls in flight at once.")
    max_chars: NonNegativeInt | None = Field(None, description="Characters kept per passage; none or 0: no cut.")
    max_tokens_per_passage: NonNegativeInt | None = Field(
        500, description="Tokens kept per passage (RankGPT's cut); none or 0: no cut.")
    reasks: NonNegativeInt = Field(3, description="Times an unreadable ranking is asked again before the fallback.")
    client: Any = Field(None, description="An LLM client to use (Python only); none: one is made from the endpoint.")


class TournamentSettings(ListwiseSettings):
    """The settings of ``tournament`` (``tournament:batch_size=20,promote=4,max_final=20``)."""

    batch_size: Annotated[int, Field(ge=2)] = Field(20, description="Candidates per listwise call (B).")
    promote: Positive = Field(4, description="Candidates each batch promotes to the next round (P < B).")
    max_final: Positive = Field(20, description="The pool size ranked directly in the final call.")
    seed: Seed = Field(0, description="Seed of the per-query shuffles.")
    temperature: NonNegative | None = Field(
        None, description="Sampling temperature of the client it makes (OBLIQ-Bench sampled at 1.0); none: the "
                          "LLM's default.")
    seeds: Annotated[tuple[int, ...] | None, BeforeValidator(_seeds_or_none),
                     Field(json_schema_extra={"accepts": "a count (3) or seeds (0,4,7)"})] = Field(
        None, description="Repeat the tournament: a count (3: seeds 0, 1, 2) or the seeds (0,4,7); none: seed alone.")

    @model_validator(mode="after")
    def _rounds_shrink(self) -> TournamentSettings:
        if not self.promote < self.batch_size:
            raise ValueError(f"promote must be less than batch_size ({self.promote} >= {self.batch_size}), or rounds "
                             "never shrink")
        if self.client is not None and self.temperature is not None:
            # a client passed in keeps its own sampling; silently ignoring the option would misreport the run
            raise ValueError(f"temperature={self.temperature} applies to the client the reranker makes; with client= "
                             "given, set temperature on that client's LLMConfig instead")
        return self


class SlidingWindowSettings(ListwiseSettings):
    """The settings of ``sliding-window`` (``sliding-window:window=20,stride=10``)."""

    window: Annotated[int, Field(ge=2)] = Field(20, description="Candidates per listwise call.")
    stride: Positive = Field(10, description="How far the window moves up after each call (at most window).")

    @model_validator(mode="after")
    def _stride_fits(self) -> SlidingWindowSettings:
        if self.stride > self.window:
            raise ValueError(f"stride must be at most window ({self.stride} > {self.window})")
        return self


class Tournament(_PoolReranker):
    """OBLIQ-Bench's tournament reranker (``--reranker tournament:batch_size=20,promote=4,max_final=20``).

    ``seeds`` repeats the whole tournament once per seed (``seeds=3`` or ``seeds=0,4,7``): the gap reports the mean
    and the spread over them. ``temperature`` is the sampling temperature of the client it makes (the OBLIQ-Bench
    authors sampled at 1.0; gapbench's LLM default is 0)."""

    name = "tournament"

    settings = TournamentSettings

    def __init__(self, **options: Any) -> None:
        """``Tournament(batch_size=6, promote=2, client=client)``: any of :class:`TournamentSettings`, checked (an
        ``OptionsError`` names a bad one)."""
        o = self.settings.check(f"reranker {self.name}", options)
        super().__init__(o)
        batch_size, promote, max_final, seed, seeds = o.batch_size, o.promote, o.max_final, o.seed, o.seeds
        self.seeds = (seed,) if seeds is None else seeds
        self.tconfig = TournamentConfig(batch_size, promote, max_final, self.seeds[0])

    def _algo_config(self) -> dict:
        c = self.tconfig
        return {"batch_size": c.batch_size, "promote": c.promote, "max_final": c.max_final, "seed": c.seed,
                "seeds": list(self.seeds), "temperature": self.temperature}

    def _calls(self, n: int) -> int:
        c = self.tconfig
        return tournament_calls(n, c.batch_size, c.promote, c.max_final)

    def _width(self) -> int:
        return max(self.tconfig.batch_size, self.tconfig.max_final)

    def _order(self, query_id, query, pool, texts, seed=None):
        config = self.tconfig if seed is None else replace(self.tconfig, seed=seed)
        return tournament(query_id, query, pool, texts,
                          lambda q, passages: self.ranker.rank(q, passages, tag=query_id), config)


class SlidingWindow(_PoolReranker):
    """RankGPT's sliding-window listwise reranker (``--reranker sliding-window:window=20,stride=10``)."""

    name = "sliding-window"

    settings = SlidingWindowSettings

    def __init__(self, **options: Any) -> None:
        """``SlidingWindow(window=20, stride=10)``: any of :class:`SlidingWindowSettings`, checked (an
        ``OptionsError`` names a bad one)."""
        o = self.settings.check(f"reranker {self.name}", options)
        super().__init__(o)
        window, stride = o.window, o.stride
        self.window, self.stride = window, stride

    def _algo_config(self) -> dict:
        return {"window": self.window, "stride": self.stride}

    def _calls(self, n: int) -> int:
        return sliding_window_calls(n, self.window, self.stride)

    def _width(self) -> int:
        return self.window

    def _order(self, query_id, query, pool, texts, seed=None):  # the window has no randomness to seed
        return sliding_window(query, pool, texts, lambda q, passages: self.ranker.rank(q, passages, tag=query_id),
                              self.window, self.stride)
