"""The usage counters of one client: requests, HTTP calls, retries, cache hits, failures, tokens and cost, in total
and per tag (query id), for the run manifest. :meth:`LLMUsage.record` is the record as a model
(:class:`UsageRecord`); the manifest holds its ``model_dump()``."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict

from ..schemas.base import Model

_COUNTERS = ("requests", "calls", "retries", "cache_hits", "failures", "prompt_tokens", "completion_tokens",
             "resent", "length_reasks", "truncated")


class UsageCounts(Model):
    """The counters of a client, or of one tag (query id), with their cost (None when no price is set)."""

    model_config = ConfigDict(frozen=True)

    requests: int = 0
    calls: int = 0
    retries: int = 0
    cache_hits: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    resent: int = 0
    length_reasks: int = 0
    truncated: int = 0
    cost: float | None = None


class UsageRecord(UsageCounts):
    """A client's usage as a run manifest records it: the totals, the prices per 1M tokens, and the counts per tag."""

    price_in_per_1m: float | None = None
    price_out_per_1m: float | None = None
    per_query: dict[str, UsageCounts] = {}


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

    def _counts(self, row: Mapping[str, int]) -> UsageCounts:
        return UsageCounts(**row, cost=self._cost(row))

    def total(self) -> dict[str, Any]:
        """The totals (:class:`UsageCounts`' fields), as plain data."""
        with self._lock:
            row = dict(self._total)
        return self._counts(row).model_dump()

    def record(self) -> UsageRecord:
        """The totals, the prices and the counts per tag (sorted), for a run manifest."""
        with self._lock:
            total, tags = dict(self._total), {t: dict(r) for t, r in self._tags.items()}
        return UsageRecord(**total, cost=self._cost(total), price_in_per_1m=self.price_in,
                           price_out_per_1m=self.price_out,
                           per_query={t: self._counts(r) for t, r in sorted(tags.items())})
